"""The residual study: Figure 2's three architectures with the residual connection, at each of ``depths``."""
from posbias.trained import FIG2_ARCHITECTURES, Config, TrainedChapter, fig2_config


def configs(p) -> list[Config]:
    return [fig2_config(name, d, residual=True) for d in p["depths"] for name in FIG2_ARCHITECTURES]


DECLARATION = TrainedChapter(configs)
