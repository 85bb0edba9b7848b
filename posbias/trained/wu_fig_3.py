"""Figure 3: targets at the first or the last slot, 2 layers with residual; masks full and causal x PEs
none, sinusoidal and RoPE, labelled ``"mask|pe"``."""
from posbias.science.model import MemberConfig
from posbias.science.task import TaskConfig
from posbias.trained import Config, TrainedChapter

#: The six architectures of Figures 3 and 4, in the order they train.
ARCHITECTURES = tuple((m, p) for m in ("full", "causal") for p in ("none", "sin", "rope"))


def configs(p) -> list[Config]:
    n = TaskConfig().n_items
    return [Config(f"{mask}|{pe}", 2, MemberConfig(mask, pe, residual=True), (0, n - 1))
            for mask, pe in ARCHITECTURES]


DECLARATION = TrainedChapter(configs)
