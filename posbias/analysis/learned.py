"""What the book's trained networks learned: where every trained figure's networks stand among the strategies of
:mod:`posbias.science.retrieval`, and the sentences the pages print about it (the front page, the README's numbers, the
Figure 2 chapter, the scoreboard). Reads stored units only; never trains. Exploratory: the reading rule was
committed before it was applied, after the networks had been trained."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from posbias.science import retrieval

__all__ = ["FIGURES", "Standing", "stored_results", "standings", "standing_table", "fig2_sentence",
           "others_sentence", "jump_sentence", "fig2_headline", "others_headline",
           "chapter_standings", "standing_words"]

#: The trained figures read here, by the name the pages give them, and their chapters.
FIGURES = {"Figure 2": "wu-fig-2", "Figure 3": "wu-fig-3", "Figure 4": "wu-fig-4", "Figure 6": "wu-fig-6",
           "residual study": "wu-residual-depth"}
#: The fixed-budget study's networks at the end of their budget, as :func:`stored_results` names them.
OVER_TRAINING = "over-training, end"


@dataclass(frozen=True)
class Standing:
    """One configuration's networks: means and ranges of IC and sweep accuracy, readings, and the query-ignoring
    strategy whose scores are closest (:func:`posbias.science.retrieval.closest`)."""

    figure: str
    label: str
    networks: int
    ic_mean: float
    ic_range: tuple[float, float]
    sweep_mean: float
    sweep_range: tuple[float, float]
    readings: dict[str, int]
    closest: str

    @property
    def mostly_retrieves(self) -> bool:
        return 2 * self.readings["retrieves"] > self.networks


def stored_results(profile: str = "paper") -> dict[str, dict[str, list[dict | None]]]:
    """figure -> configuration -> stored results (None where not stored) of every trained figure, and the
    fixed-budget study at the end of its budget (:data:`OVER_TRAINING`). Reads ``data/`` and the cache only."""
    from posbias.training import budget_study, stored_campaign

    out = {name: stored_campaign(ch, profile) for name, ch in FIGURES.items()}
    out[OVER_TRAINING] = {label: [rec for _, _, rec in rows] for label, rows in budget_study().items()}
    return out


def standings(stored: dict[str, dict[str, list[dict | None]]], base: dict[str, dict[str, Any]]) -> list[Standing]:
    """A :class:`Standing` per configuration with readable stored networks, the closest strategy taken from ``base``."""
    out = []
    for figure, groups in stored.items():
        for label, results in groups.items():
            got = [r for r in results if r is not None]
            if not retrieval.readable(got):
                continue
            s = retrieval.standing(got)
            near = retrieval.closest(s["ic_mean"], s["sweep_mean"], base)
            out.append(Standing(figure, label, s["networks"], s["ic_mean"], s["ic_range"], s["sweep_mean"],
                                s["sweep_range"], s["readings"], near))
    return out


def standing_table(rows: list[Standing]) -> list[dict[str, Any]]:
    """:func:`standings` as a page's rows: figure, configuration, networks, IC and sweep accuracy (mean, lowest to
    highest network), how many networks retrieve / are between / ignore the query, and, where most do not retrieve,
    the query-ignoring strategy (:data:`posbias.science.retrieval.IGNORING`) whose scores are closest."""
    def span(m: float, r: tuple[float, float]) -> str:
        return f"{m:.3f} ({r[0]:.3f}-{r[1]:.3f})"

    return [{"figure": s.figure, "configuration": s.label, "networks": s.networks,
             "IC accuracy": span(s.ic_mean, s.ic_range), "sweep accuracy": span(s.sweep_mean, s.sweep_range),
             "retrieve / between / ignore": " / ".join(str(s.readings[w]) for w in retrieval.READINGS),
             "scores like": "retrieval (most networks)" if s.mostly_retrieves else s.closest} for s in rows]


def fig2_sentence(rows: list[Standing], exact: dict[str, dict[str, Any]]) -> str:
    """One plain sentence: whether Figure 2's networks retrieve, where they stand, what their gaps then measure."""
    fig2 = [s for s in rows if s.figure == "Figure 2"]
    if not fig2:
        return "No Figure 2 network is stored yet."
    n, r = sum(s.networks for s in fig2), sum(s.readings["retrieves"] for s in fig2)
    ic = [x for s in fig2 for x in s.ic_range]
    sw = [x for s in fig2 for x in s.sweep_range]
    if r:
        return (f"{r} of the {n} Figure 2 networks at the paper's settings retrieve by the rule fixed beforehand; "
                f"their mean IC accuracies run from {min(ic):.3f} to {max(ic):.3f}.")
    copier, ceiling = exact["ic"]["copy_random"], exact["sweep"]["ignore_best"]
    above = max(ic) - copier
    ic_words = (f"sit at or below what copying a random context label scores ({copier:.3f})" if above <= 0 else
                f"are at most {above:.3f} above what copying a random context label scores ({copier:.3f})")
    sw_words = "none exceeds" if max(sw) <= ceiling else "none exceeds by three standard errors"
    return (f"None of the {n} Figure 2 networks at the paper's settings retrieves: their mean IC accuracies "
            f"({min(ic):.3f} to {max(ic):.3f}) {ic_words}, and on the position sweep ({min(sw):.3f} to "
            f"{max(sw):.3f}) {sw_words} the {ceiling:.3f} that a network ignoring the query can reach; so Figure 2's "
            "gaps measure where a network copies a label from, not which item retrieval prefers.")


def others_sentence(rows: list[Standing]) -> str:
    """Where retrieval does appear among the book's trained configurations, and how many copy one fixed slot."""
    ret = [s for s in rows if s.mostly_retrieves]
    slot = [s for s in rows if s.closest == "copy_slot"]
    where = "; ".join(f"{f}: {', '.join(s.label for s in ret if s.figure == f)}"
                      for f in dict.fromkeys(s.figure for s in ret))
    return (f"Of the book's {len(rows)} trained configurations, {len(ret)} have most of their networks retrieving "
            f"({where or 'none'}), and {len(slot)} score what copying the label at one fixed slot scores.")


def jump_sentence(rows_of_study: list[dict], exact: dict[str, dict[str, Any]], nearest_sweep: float) -> str:
    """Where the over-training study's late jumpers land: ``rows_of_study`` are the stored results of one
    configuration at the end of its budget; a jumper ends above what copying one fixed slot scores."""
    up = [r for r in rows_of_study if r is not None and sum(r["ic_accuracy"].values()) / len(r["ic_accuracy"])
          > exact["ic"]["copy_slot"]]
    if not up:
        return "no network of the study left the plateau"
    s = retrieval.standing(up)
    return (f"the {s['networks']} networks that jumped end at mean IC accuracy {s['ic_range'][0]:.3f} to "
            f"{s['ic_range'][1]:.3f}, just above the {exact['ic']['ignore_best']:.3f} of the best query-ignoring "
            f"strategy, and at {s['sweep_range'][0]:.3f} to {s['sweep_range'][1]:.3f} on the sweep, against the "
            f"query-ignoring ceiling of {exact['sweep']['ignore_best']:.3f} and the {nearest_sweep:.3f} of a "
            f"network that matches the query; {s['readings']['retrieves']} of them retrieve by the rule")


def fig2_headline(profile: str = "paper") -> str:
    """:func:`fig2_sentence` on the stored networks of ``profile``: the sentence the front page and the scoreboard
    print (closed forms only; reads stored units, never trains)."""
    exact = retrieval.closed_forms()
    return fig2_sentence(standings(stored_results(profile), exact), exact)


def others_headline(profile: str = "paper") -> str:
    """:func:`others_sentence` on the stored networks of ``profile`` (closed forms only; never trains)."""
    exact = retrieval.closed_forms()
    return others_sentence(standings(stored_results(profile), exact))


def chapter_standings(chapter: str, profile: str = "paper") -> list[Standing]:
    """:func:`standings` of one trained chapter's networks under ``profile`` (the over-training chapter: its
    fixed-budget study at the end of the budget), the closest strategies from the closed forms."""
    from posbias.training import budget_study, stored_campaign

    if chapter == "wu-bias-over-training":
        stored = {OVER_TRAINING: {label: [rec for _, _, rec in rows] for label, rows in budget_study().items()}}
    else:
        stored = {chapter: stored_campaign(chapter, profile)}
    return standings(stored, retrieval.closed_forms())


def standing_words(rows: list[Standing]) -> str:
    """One sentence on a chapter's configurations: how many mostly retrieve, and which query-ignoring strategy the
    others score like, naming them."""
    if not rows:
        return "None of this chapter's networks is stored yet."
    names = {"copy_random": "copying a random context label", "copy_slot": "copying the label at one fixed slot",
             "ignore_best": "the best strategy that ignores the query", "uniform": "guessing a label"}
    ret = [s.label for s in rows if s.mostly_retrieves]
    n = len(rows)
    parts = [f"{len(ret)} of its {n} configuration{'s' if n != 1 else ''} "
             f"{'have' if n != 1 else 'has'} most of {'their' if n != 1 else 'its'} networks retrieving"
             + (f" ({', '.join(ret)})" if ret else "")]
    for key, words in names.items():
        like = [s.label for s in rows if not s.mostly_retrieves and s.closest == key]
        if like:
            parts.append(f"{len(like)} score{'s' if len(like) == 1 else ''} closest to {words} ({', '.join(like)})")
    return "; ".join(parts) + "."
