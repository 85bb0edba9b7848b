"""Figure 4: Figure 3's six architectures, the targets at the first, middle or last slot only,
labelled ``"where|mask|pe"``."""
from posbias.science.model import MemberConfig
from posbias.science.task import TaskConfig, slot_index
from posbias.trained import Config, TrainedChapter
from posbias.trained.wu_fig_3 import ARCHITECTURES


def configs(p) -> list[Config]:
    n = TaskConfig().n_items
    return [Config(f"{where}|{mask}|{pe}", 2, MemberConfig(mask, pe, residual=True), (slot_index(where, n),))
            for where in ("first", "middle", "last") for mask, pe in ARCHITECTURES]


DECLARATION = TrainedChapter(configs)
