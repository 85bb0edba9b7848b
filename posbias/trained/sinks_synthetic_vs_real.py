"""The synthetic-against-real sinks chapter reads Figure 6's networks, under the settings of the wu-fig-6
profile its ``campaign`` names, for ``toy_seeds``."""
from posbias.trained import TrainedChapter


def reads(p) -> tuple[str, str, dict]:
    return "wu-fig-6", p["campaign"], {"depth": p["depth"], "windows": list(p["windows"]),
                                       "prefixes": list(p["prefixes"]), "seeds": list(p["toy_seeds"])}


DECLARATION = TrainedChapter(reads=reads)
