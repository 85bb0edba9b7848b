"""Issue 92's readings of the fixed-budget study (:mod:`posbias.analysis.budget`), written and committed before they
were applied to its networks: which answer slot a group of networks serves best, told apart by standard errors
(:func:`slot_words`, and the branch sentences that use it); branch counts that hold against each network's own
swing (:func:`firm_branches`, :func:`firm_table`); whether a network is still learning at its budget
(:func:`still_learning`); when its accuracy, sweep and gaps move (:func:`timing`); and the numbers of the
over-training chapter's first screen (:func:`headline`). Nothing here trains.
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from posbias.analysis import budget as bd
from posbias.analysis import budget_read as br
from posbias.measures import convergence as cv
from posbias.analysis.budget_read import Study

__all__ = ["SLOTS", "SLOT_Z", "slot_accuracy", "slot_difference", "slot_words", "branch_sentences", "window_range",
           "firm_branches", "firm_split_words", "loss_changes", "still_learning", "learning_table", "firm_table",
           "timing", "timing_table", "headline"]


#: Answer slots and the two IC sets whose answer sits there (``IC_<answer>_<distractor>``).
SLOTS: dict[str, tuple[str, str]] = {"first": ("IC_first_middle", "IC_first_last"),
                                     "middle": ("IC_middle_first", "IC_middle_last"),
                                     "last": ("IC_last_first", "IC_last_middle")}
#: Two answer slots are told apart when their accuracies differ by more than this many standard errors
#: of the difference (the two-standard-error band the plateau rule uses for a gap).
SLOT_Z = 2.0


def slot_accuracy(reading: Mapping[str, Any]) -> dict[str, float]:
    """A reading's accuracy by answer slot: the mean of the two IC accuracies whose answer sits in that
    slot, ``{"first", "middle", "last"} -> float``."""
    ic = reading["ic_accuracy"]
    return {slot: (ic[a] + ic[b]) / 2 for slot, (a, b) in SLOTS.items()}


def slot_difference(readings: Sequence[Mapping[str, Any]], a: str, b: str, n_test: int) -> tuple[float, float]:
    """Mean over networks of slot ``a``'s accuracy minus slot ``b``'s and its standard error: the spread
    between networks (sample variance / n) plus the test sets' binomial noise, which the networks share
    (the same sequences) and which does not shrink with them. The difference is half the sum of four
    accuracies on four independent sets with coefficients +-1/2, so its binomial variance is at most
    ``4 * (1/4) * 1/(4 n_test) = 1/(4 n_test)``."""
    d = np.array([slot_accuracy(r)[a] - slot_accuracy(r)[b] for r in readings], dtype=float)
    spread = float(d.var(ddof=1)) / len(d) if len(d) > 1 else 0.0
    return float(d.mean()), math.sqrt(spread + 1 / (4 * n_test))


def slot_words(readings: Sequence[Mapping[str, Any]], n_test: int, z: float = SLOT_Z) -> str:
    """Which answer slot a group of networks (their :func:`posbias.analysis.budget.reading`) serves best, in words,
    from all three slots' own accuracies: slots are ranked by mean accuracy, and two are *told apart*
    when their difference exceeds ``z`` standard errors (:func:`slot_difference`). The best slot is
    named alone only when it is told apart from both others; slots not told apart are named together."""
    acc = {s: float(np.mean([slot_accuracy(r)[s] for r in readings])) for s in SLOTS}
    top, mid, low = sorted(SLOTS, key=lambda s: -acc[s])

    def apart(x: str, y: str) -> bool:
        m, se = slot_difference(readings, x, y, n_test)
        return abs(m) > z * se

    nums = ", ".join(f"{s} {acc[s]:.3f}" for s in (top, mid, low))
    if apart(top, mid) and apart(top, low):
        rest = (f"then the {mid}, then the {low}" if apart(mid, low)
                else f"the {mid} and the {low} alike")
        return f"the {top} item is served best, {rest} ({nums})"
    if apart(top, low) and apart(mid, low):
        pair = " and ".join(s for s in SLOTS if s in (top, mid))
        return f"the {pair} items are served alike, better than the {low} ({nums})"
    if apart(top, low):
        return f"the {top} item is served better than the {low}; the {mid} is told from neither ({nums})"
    return f"no slot is served differently beyond {z:g} standard errors ({nums})"


def _n_test(runs: Sequence[tuple[int, Mapping[str, Any]]]) -> int:
    """The test sets' size of a group of networks (one value: they are read on the same sets)."""
    (n,) = {int(r["params"]["n_test"]) for _, r in runs}
    return n


def branch_sentences(study: Study) -> str:
    """One plain sentence per configuration with networks stored: how its networks split
    (:func:`split_words`, "so far" while some are not stored) and where each branch ends (accuracy,
    gaps, and which slot it serves best by :func:`slot_words`); ``"no network yet"`` when none is."""
    out = []
    for label, runs in br.done(study).items():
        if not runs:
            continue
        bs = br.branches_of(runs)
        parts = []
        for b in bs:
            rd = [bd.reading(r) for _, r in b]
            g = {k: float(np.mean([x["gaps"][k] for x in rd])) for k in cv.GAP_NAMES}
            acc = [x["accuracy"] for x in rd]
            parts.append(f"{len(b)} end{'s' * (len(b) == 1)} at mean IC accuracy {min(acc):.3f}"
                         + (f" to {max(acc):.3f}" if len(b) > 1 else "")
                         + f" (first-middle {g['first-middle']:+.3f}, first-last {g['first-last']:+.3f}, "
                         f"middle-last {g['middle-last']:+.3f}; {slot_words(rd, _n_test(b))})")
        head = f"{label}, {len(runs)} of {len(study[label])} networks stored: {br.split_words(study, label)}; "
        out.append(head + "; ".join(parts))
    return ". ".join(out) + "." if out else "no network yet."


def window_range(record: Mapping[str, Any], end: int | None = None,
                 window: int = bd.READ_WINDOW) -> tuple[float, float]:
    """The lowest and highest mean IC accuracy among the evaluations a network's reading averages."""
    c = record["curves"]
    end = int(c["step"][-1]) if end is None else int(end)
    acc = bd.mean_accuracy(c)[bd.in_window(c["step"], end, window)]
    return float(acc.min()), float(acc.max())


def firm_branches(runs: Sequence[tuple[int, Mapping[str, Any]]], gap: float = bd.BRANCH_GAP,
                  end: int | None = None) -> tuple[list[list[int]], list[tuple[int, int]]]:
    """Branches that hold against each network's own swing (issue 92; a second reading beside the
    design's :func:`posbias.analysis.budget.branches`, exploratory). Networks sorted by their reading of mean IC
    accuracy; two neighbours are cut apart only when their readings differ by more than ``gap`` *and*
    every evaluation the upper one's reading averages lies above every evaluation of the lower one's (their
    window ranges, :func:`window_range`, do not overlap). A cut the design's rule makes but whose ranges
    overlap is *uncertain*: the networks stay together here, and the pair ``(lower seed, upper seed)``
    is returned. Returns ``(branches, uncertain)``, branches lowest first, each a list of seeds."""
    if not runs:
        return [], []
    read = {s: bd.reading(r, end)["accuracy"] for s, r in runs}
    span = {s: window_range(r, end) for s, r in runs}
    order = sorted(read, key=lambda s: (read[s], s))
    out, uncertain = [[order[0]]], []
    for lo, hi in zip(order, order[1:]):
        if read[hi] - read[lo] > gap and span[hi][0] > span[lo][1]:
            out.append([hi])
            continue
        if read[hi] - read[lo] > gap:
            uncertain.append((lo, hi))
        out[-1].append(hi)
    return out, uncertain


def firm_split_words(runs: Sequence[tuple[int, Mapping[str, Any]]]) -> str:
    """The firm branch count (:func:`firm_branches`) beside the design's, in words: ``"2 : 8, as the
    design's rule"`` or ``"2 : 3 (the design's rule: 1 : 1 : 2 : 1; 2 of its cuts fall inside the
    networks' own swing)"``."""
    firm, uncertain = firm_branches(runs)
    design = br.branches_of(runs)
    f = " : ".join(str(len(b)) for b in firm) if len(firm) > 1 else "one branch"
    d = " : ".join(str(len(b)) for b in design) if len(design) > 1 else "one branch"
    if not uncertain:
        return f"{f}, as the design's rule"
    n = len(uncertain)
    return f"{f} (the design's rule: {d}; {n} of its cuts fall{'s' * (n == 1)} inside the networks' own swing)"


def loss_changes(record: Mapping[str, Any], windows: int = 4, window: int = bd.READ_WINDOW) -> list[float]:
    """The held-out loss's least-squares change over each of the last ``windows`` non-overlapping reading
    windows, oldest first (:func:`posbias.analysis.budget.still_moving`); ``[]`` without a held-out loss."""
    c = record["curves"]
    if "heldout_loss" not in c:
        return []
    last = int(c["step"][-1])
    return [bd.still_moving(c["step"], c["heldout_loss"], end=last - k * window, window=window)["change"]
            for k in reversed(range(windows))]


def still_learning(record: Mapping[str, Any], window: int = bd.READ_WINDOW,
                   loss_rel: float = cv.PLATEAU.loss_rel) -> dict[str, Any] | None:
    """Is a network still learning at the end of its budget? (issue 92; exploratory.) None without a
    held-out loss. ``learning``: the held-out loss's change over the last reading window has its 90%
    interval entirely below zero (:func:`posbias.analysis.budget.still_moving`). ``settles_at`` (an
    *extrapolation*): fitting the magnitudes of the last four windows' changes as a geometric sequence
    (least squares on their logarithms, every change negative), the first later window end whose
    extrapolated change is within ``loss_rel`` of the loss at the end (the plateau rule's loss
    criterion); None when the changes do not shrink or are not all falls."""
    c = record["curves"]
    if "heldout_loss" not in c:
        return None
    m = bd.still_moving(c["step"], c["heldout_loss"], window=window)
    ch = loss_changes(record, window=window)
    loss = float(c["heldout_loss"][-1])
    out = {"change": m["change"], "hi": m["hi"], "learning": m["hi"] < 0, "settles_at": None,
           "ratio": None}
    if len(ch) >= 2 and all(x < 0 for x in ch):
        k = np.arange(len(ch), dtype=float)
        slope, icept = np.polyfit(k, np.log(np.abs(ch)), 1)
        out["ratio"] = float(math.exp(slope))
        if slope < 0:
            target = math.log(loss_rel * abs(loss))
            n = max(0, math.ceil((target - icept) / slope - (len(ch) - 1)))
            out["settles_at"] = int(c["step"][-1]) + n * window
    return out


def learning_table(study: Study):
    """Still learning at the budget? One row per configuration with networks stored: networks with a
    held-out loss, how many are still learning (:func:`still_learning`), the held-out loss's change over
    the last window (range), and where the geometric trend would settle (range; an extrapolation).
    A ``pandas.DataFrame``."""
    import pandas as pd  # lazy: pandas costs ~0.5s at import

    rows = []
    for label, runs in br.done(study).items():
        got = [x for x in (still_learning(r) for _, r in runs) if x is not None]
        if not got:
            rows.append({"configuration": label, "with a held-out loss": "not recorded", "still learning": "",
                         "loss change over the last 50k": "", "trend settles by (extrapolation)": ""})
            continue
        ch = [x["change"] for x in got]
        at = [x["settles_at"] for x in got]
        known = sorted(a for a in at if a is not None)
        settle = ("" if not known else f"{known[0]:,}" if known[0] == known[-1] else f"{known[0]:,} to {known[-1]:,}")
        if len(known) < len(at):
            settle = (settle + "; " if settle else "") + f"{len(at) - len(known)} not shrinking"
        rows.append({"configuration": label, "with a held-out loss": len(got),
                     "still learning": f"{sum(x['learning'] for x in got)} of {len(got)}",
                     "loss change over the last 50k": f"{min(ch):+.3f} to {max(ch):+.3f}",
                     "trend settles by (extrapolation)": settle})
    return pd.DataFrame(rows)


def firm_table(study: Study, shifts: Sequence[int] = (0, 5_000, 10_000, 15_000, 20_000)):
    """The branch counts read two more ways beside the design's (exploratory): :func:`firm_branches` (cuts that
    hold against the networks' own swing), and the design's rule with the reading window ending ``shifts``
    iterations earlier (up to four of its eleven evaluations replaced). A count is *certain* when no cut lies
    inside the swing and every shift gives it. One row per configuration with networks stored. A
    ``pandas.DataFrame``."""
    import pandas as pd  # lazy: pandas costs ~0.5s at import

    def count(bs: Sequence[Sequence[Any]], sep: str = " : ") -> str:
        return sep.join(str(len(b)) for b in bs) if len(bs) > 1 else "one branch"

    rows = []
    for label, runs in br.done(study).items():
        if not runs:
            continue
        firm, uncertain = firm_branches(runs)
        last = min(int(r["curves"]["step"][-1]) for _, r in runs)
        split = [bd.branches({s: bd.reading(r, last - k)["accuracy"] for s, r in runs}) for k in shifts]
        shifted = [count(b) for b in split]
        rows.append({"configuration": label, "design's rule": shifted[0], "holding against the swing": count(firm),
                     "cuts inside the swing": "; ".join(f"seeds {a} | {b}" for a, b in uncertain) or "none",
                     "the window ending " + "/".join(f"{k // 1000}" for k in shifts[1:]) + "k earlier":
                         ", ".join(count(b, ":") if len(b) > 1 else "1" for b in split[1:]),
                     "count certain": "yes" if not uncertain and len(set(shifted)) == 1 else "no"})
    return pd.DataFrame(rows)


def timing(record: Mapping[str, Any]) -> dict[str, Any]:
    """When a network's quantities move (:func:`posbias.analysis.jump.half_change`): ``{"exit"}`` (its first plateau
    exit after 100,000, or None) and one half-change dict per quantity: ``accuracy`` (mean IC), the three gaps,
    and ``sweep`` (the sweep's mean accuracy, where the curves hold it)."""
    from posbias.analysis import jump

    c = record["curves"]
    out: dict[str, Any] = {"exit": next(iter(br.exits_after(record)), None),
                           "accuracy": jump.half_change(c["step"], bd.mean_accuracy(c)),
                           **{g: jump.half_change(c["step"], cv.gap_curve(c, g)) for g in cv.GAP_NAMES}}
    if "sweep" in c:
        out["sweep"] = jump.half_change(c["step"], np.asarray(c["sweep"], dtype=float).mean(-1))
    return out


def timing_table(study: Study, label: str = "decay|2"):
    """When each of ``label``'s networks moves (exploratory: the jump study's rule, :mod:`posbias.analysis.jump`,
    applied to the fixed-budget records): its plateau exit, the half-change step of its mean IC accuracy, of the sweep's
    mean accuracy and of each gap (with its start and end), and how long the first-last gap moves before the
    accuracy. A ``pandas.DataFrame``."""
    import pandas as pd  # lazy: pandas costs ~0.5s at import

    def at(x: Mapping[str, Any] | None) -> str:
        if x is None:
            return "not recorded"
        return f"{x['at']:,}" if x["at"] is not None else ("does not move" if not x["moves"] else "not half way")

    rows = []
    for s, r in sorted(br.done(study)[label]):
        t = timing(r)
        lead = (t["accuracy"]["at"] - t["first-last"]["at"]
                if t["accuracy"]["at"] is not None and t["first-last"]["at"] is not None else None)
        rows.append({"seed": s, "left the plateau": f"{t['exit']:,}" if t["exit"] else "never",
                     "accuracy moves": at(t["accuracy"]), "sweep moves": at(t.get("sweep")),
                     **{f"{g} moves (start → end)": f"{at(t[g])} ({t[g]['start']:+.3f} → {t[g]['end']:+.3f})"
                        for g in cv.GAP_NAMES},
                     "first-last leads by": "" if lead is None else f"{lead:,}"})
    return pd.DataFrame(rows)


def headline(study: Study, label: str = "decay|2", others: Sequence[str] = ("No PE|2", "RoPE|2")) -> dict[str, str]:
    """The numbers of the chapter's first screen, as strings to glue: of ``label``'s stored networks, how many left
    a plateau after 100,000 iterations (``n_left`` of ``n``) and when (``exit_range``), where those end
    (``end_range``: mean IC accuracy), which slot they serve best (``slots``, :func:`slot_words`), how many of them
    retrieve by :data:`posbias.science.retrieval.READING_RULE` (``retrieve``), how long their first-last gap moves
    before their accuracy (``lead_range``, :func:`timing`); how many of ``others``' networks left a plateau
    (``others_left`` of ``others_n``); and how many depth-2 networks with a held-out loss are still learning at the
    budget (``learning`` of ``with_loss``, :func:`still_learning`)."""
    from posbias.science import retrieval

    runs = br.done(study)[label]
    up = [(s, r) for s, r in runs if br.exits_after(r)]
    exits = sorted(br.exits_after(r)[0] for _, r in up)
    ends = sorted(bd.reading(r)["accuracy"] for _, r in up)
    times = [timing(r) for _, r in up]
    leads = sorted(t["accuracy"]["at"] - t["first-last"]["at"] for t in times
                   if t["accuracy"]["at"] is not None and t["first-last"]["at"] is not None)
    reads = retrieval.standing([r for _, r in up])["readings"] if up else {}
    deep2 = [r for lab in study if int(lab.split("|")[1]) == 2 for _, r in br.done(study)[lab]]
    got = [x for x in (still_learning(r) for r in deep2) if x is not None]
    other = [r for lab in others for _, r in br.done(study).get(lab, [])]

    def span(xs: Sequence[float], fmt: str) -> str:
        return "" if not xs else format(xs[0], fmt) if xs[0] == xs[-1] else f"{xs[0]:{fmt}} to {xs[-1]:{fmt}}"

    return {"n": str(len(runs)), "n_left": str(len(up)), "exit_range": span(exits, ","),
            "end_range": span(ends, ".3f"), "slots": slot_words([bd.reading(r) for _, r in up], _n_test(up)) if up
            else "", "retrieve": f"{reads.get('retrieves', 0)} of {len(up)}", "lead_range": span(leads, ","),
            "others_left": str(sum(bool(br.exits_after(r)) for r in other)), "others_n": str(len(other)),
            "learning": str(sum(x["learning"] for x in got)), "with_loss": str(len(got))}
