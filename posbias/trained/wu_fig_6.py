"""Figure 6: ``depth`` layers without PE or residual, unbiased; the causal mask, a sliding window of each
of ``windows`` and a prefix of each of ``prefixes``, labelled ``"causal"``, ``"window|w"``, ``"prefix|k"``."""
from posbias.science.model import MemberConfig
from posbias.trained import Config, TrainedChapter


def configs(p) -> list[Config]:
    d = p["depth"]
    return ([Config("causal", d, MemberConfig("causal", "none"))]
            + [Config(f"window|{w}", d, MemberConfig("window", "none", window=w)) for w in p["windows"]]
            + [Config(f"prefix|{k}", d, MemberConfig("prefix", "none", prefix=k)) for k in p["prefixes"]])


DECLARATION = TrainedChapter(configs)
