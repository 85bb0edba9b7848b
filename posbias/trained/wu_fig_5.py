"""Figure 5: ``depth`` layers, the causal mask without PE, no residual, unbiased (Figure 2's networks
at depth 2), labelled ``"causal|none"``."""
from posbias.science.model import MemberConfig
from posbias.trained import Config, TrainedChapter


def configs(p) -> list[Config]:
    return [Config("causal|none", p["depth"], MemberConfig("causal", "none"))]


DECLARATION = TrainedChapter(configs)
