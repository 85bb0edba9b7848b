"""Figure 2: unbiased data, no residual connection; No PE, decay and RoPE at each of ``depths``."""
from posbias.trained import FIG2_ARCHITECTURES, Config, TrainedChapter, fig2_config


def configs(p) -> list[Config]:
    return [fig2_config(name, d) for d in p["depths"] for name in FIG2_ARCHITECTURES]


DECLARATION = TrainedChapter(configs)
