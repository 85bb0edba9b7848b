"""What the chapter ``wu-bias-over-training`` reads off the fixed-budget study (:mod:`posbias.budget`):
one table per question, the sentences that describe the branches, the register's claims at 100,000
iterations and at the end of the budget on the same networks, and per branch. Nothing here trains.

A *study* is what :func:`posbias.training.budget_study` returns: configuration label -> one
``(seed, source, record)`` per seed of the design, ``source`` ``"design"``, ``"admitted"`` or
``"not yet"`` (record None). Every table says ``not yet`` where the networks are not stored.
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from . import budget as bd
from . import claims, stats
from . import convergence as cv
from .overtraining import MEASURED_ALONG

__all__ = ["PAPER_STEP", "done", "complete", "networks_table", "readings_table", "branches_of", "split_words",
           "branch_table", "branch_sentences", "moving_table", "best_table", "claims_table",
           "training_hours", "SLOTS", "SLOT_Z", "slot_accuracy", "slot_difference", "slot_words", "window_range",
           "firm_branches", "firm_split_words", "loss_changes", "still_learning", "learning_table", "firm_table",
           "timing", "timing_table", "headline"]

#: The paper's snapshot; read from the same long runs as the end (the mean over 50,000 to 100,000).
PAPER_STEP = 100_000
Study = Mapping[str, Sequence[tuple[int, str, "dict[str, Any] | None"]]]
QUANTITIES = ("accuracy", *cv.GAP_NAMES)


def done(study: Study) -> dict[str, list[tuple[int, dict[str, Any]]]]:
    """label -> ``(seed, record)`` of the networks stored so far (trained under the design or admitted)."""
    return {label: [(s, r) for s, _, r in rows if r is not None] for label, rows in study.items()}


def complete(study: Study, label: str) -> bool:
    """Whether every network of ``label`` in the design is stored (trained under the design or admitted)."""
    return all(r is not None for _, _, r in study[label])


def _value(r: Mapping[str, Any], q: str) -> float:
    return float(r["accuracy"] if q == "accuracy" else r["gaps"][q])


def _mean_se(values: Sequence[float], signed: bool = True) -> str:
    v = np.asarray(values, dtype=float)
    f = "+.3f" if signed else ".3f"
    if len(v) == 0:
        return "not yet"
    if len(v) == 1:
        return f"{v[0]:{f}} (one network)"
    return f"{v.mean():{f}} ± {v.std(ddof=1) / math.sqrt(len(v)):.3f}"


def training_hours(record: Mapping[str, Any]) -> float:
    """Hours one network took to train (its ensemble's wall time over its members; one torch thread)."""
    return float(record["train_seconds_ensemble"]) / int(record.get("ensemble_size", 1)) / 3600


def networks_table(study: Study):
    """One row per configuration: the design's networks, how many trained under the design, admitted,
    not yet, and the training hours of those stored. A ``pandas.DataFrame``."""
    import pandas as pd  # lazy: pandas costs ~0.5s at import

    rows = []
    for label, rs in study.items():
        n = {k: sum(src == k for _, src, _ in rs) for k in ("design", "admitted", "not yet")}
        stored = [r for _, _, r in rs if r is not None]
        rows.append({"configuration": label, "networks in the design": len(rs),
                     "trained under the design": n["design"], "admitted (converged campaign)": n["admitted"],
                     "not yet trained": n["not yet"],
                     "training hours": f"{sum(training_hours(r) for r in stored):.1f}"})
    return pd.DataFrame(rows)


def readings_table(study: Study, at: int = PAPER_STEP):
    """The networks at the paper's snapshot and at the end of their budget, the same networks both
    times: one row per configuration and quantity (mean IC accuracy, the three gaps), each the mean ±
    SE over the networks stored of its reading (:func:`posbias.budget.reading`) at ``at`` and at the end,
    and the change per network. A ``pandas.DataFrame``."""
    import pandas as pd  # lazy: pandas costs ~0.5s at import

    rows = []
    for label, runs in done(study).items():
        snap = [bd.reading(r, at) for _, r in runs]
        end = [bd.reading(r) for _, r in runs]
        for q in QUANTITIES:
            a, b = [_value(x, q) for x in snap], [_value(x, q) for x in end]
            rows.append({"configuration": label, "quantity": "mean IC accuracy" if q == "accuracy" else q,
                         "networks": f"{len(runs)} of {len(study[label])}",
                         f"at {at // 1000}k": _mean_se(a, q != "accuracy"), "at the end": _mean_se(b, q != "accuracy"),
                         "change": _mean_se(np.subtract(b, a))})
    return pd.DataFrame(rows)


def branches_of(runs: Sequence[tuple[int, Mapping[str, Any]]]) -> list[list[tuple[int, Mapping[str, Any]]]]:
    """The branches (:func:`posbias.budget.branches`) of a configuration's stored networks, lowest
    accuracy first, each a list of ``(seed, record)``."""
    by = {s: r for s, r in runs}
    return [[(s, by[s]) for s in b] for b in bd.branches({s: bd.reading(r)["accuracy"] for s, r in runs})]


def split_words(study: Study, label: str) -> str:
    """How ``label``'s stored networks split: ``"one branch"`` or ``"2 branches, 2 : 8"``, with ``"so
    far"`` while some of the design's networks are not stored (a branch count on part of a configuration
    is a lower bound: a network still to train may start a branch of its own)."""
    bs = branches_of(done(study)[label])
    words = "one branch" if len(bs) == 1 else f"{len(bs)} branches, {' : '.join(str(len(b)) for b in bs)}"
    return words + ("" if complete(study, label) else " so far")


def _exits_after(r: Mapping[str, Any], after: int = PAPER_STEP) -> list[int]:
    c = r["curves"]
    return [int(x["exit"]) for x in bd.plateau_exits(c["step"], bd.mean_accuracy(c)) if x["exit"] > after]


def window_swing(record: Mapping[str, Any], end: int | None = None, window: int = bd.READ_WINDOW) -> float:
    """How far one network's mean IC accuracy moves inside the window its reading averages: the largest
    minus the smallest of the evaluations there (a scalar). A description beside the branches, not a rule:
    a swing wider than the branch gap means two of the network's own evaluations lie further apart than
    neighbouring branches must."""
    c = record["curves"]
    end = int(c["step"][-1]) if end is None else int(end)
    acc = bd.mean_accuracy(c)[bd.in_window(c["step"], end, window)]
    return float(acc.max() - acc.min())


def swing_sentence(study: Study) -> str:
    """Per configuration with networks stored, the widest :func:`window_swing` of its networks (and whose
    it is) set against the branch gap, in one sentence; it names the configurations where some network's
    own evaluations spread wider than the gap that separates branches."""
    widest = {label: max((window_swing(r), s) for s, r in runs) for label, runs in done(study).items() if runs}
    if not widest:
        return "No network is stored yet."
    parts = "; ".join(f"{label} {w:.3f} (seed {s})" for label, (w, s) in widest.items())
    wide = [label for label, (w, _) in widest.items() if w > bd.BRANCH_GAP]
    tail = (f" In {' and '.join(wide)} a network's own evaluations spread wider than the gap between branches, "
            "so there the branches group readings that move between evaluations by more than the gap that "
            "separates them, and their count is less certain than where every swing stays inside the gap." if wide else
            " Every network's swing stays inside the gap between branches.")
    return (f"The widest swing of mean IC accuracy within one network's reading window, per configuration: "
            f"{parts}; the branch gap is {bd.BRANCH_GAP:.2f}.{tail}")


def branch_table(study: Study):
    """One row per branch of each configuration with networks stored (``"1 of 2 so far"`` while some of
    its networks are not stored): its networks (seeds), their readings of mean IC accuracy (range), the
    widest :func:`window_swing` among them, their readings of the three gaps (mean), and where its
    networks left a plateau after 100,000 iterations. A ``pandas.DataFrame``."""
    import pandas as pd  # lazy: pandas costs ~0.5s at import

    rows = []
    for label, runs in done(study).items():
        if not runs:
            rows.append({"configuration": label, "branch": "not yet", "networks": "", "seeds": "",
                         "accuracy at the end": "", "widest swing in a reading window": "",
                         **{g: "" for g in cv.GAP_NAMES},
                         "left a plateau after 100k": ""})
            continue
        bs = branches_of(runs)
        for i, b in enumerate(bs, 1):
            rd = [bd.reading(r) for _, r in b]
            acc = [x["accuracy"] for x in rd]
            exits = sorted((s, x) for s, r in b for x in _exits_after(r))
            so_far = "" if complete(study, label) else " so far"
            rows.append({"configuration": label, "branch": f"{i} of {len(bs)}{so_far}", "networks": len(b),
                         "seeds": ", ".join(str(s) for s in sorted(s for s, _ in b)),
                         "accuracy at the end": (f"{min(acc):.3f}" if len(acc) == 1
                                                 else f"{min(acc):.3f} to {max(acc):.3f}"),
                         "widest swing in a reading window": f"{max(window_swing(r) for _, r in b):.3f}",
                         **{g: f"{np.mean([x['gaps'][g] for x in rd]):+.3f}" for g in cv.GAP_NAMES},
                         "left a plateau after 100k": "; ".join(f"seed {s} at {x:,}" for s, x in exits) or "none"})
    return pd.DataFrame(rows)


def _n_test(runs: Sequence[tuple[int, Mapping[str, Any]]]) -> int:
    """The test sets' size of a group of networks (one value: they are read on the same sets)."""
    (n,) = {int(r["params"]["n_test"]) for _, r in runs}
    return n


def branch_sentences(study: Study) -> str:
    """One plain sentence per configuration with networks stored: how its networks split
    (:func:`split_words`, "so far" while some are not stored) and where each branch ends (accuracy,
    gaps, and which slot it serves best by :func:`slot_words`); ``"no network yet"`` when none is."""
    out = []
    for label, runs in done(study).items():
        if not runs:
            continue
        bs = branches_of(runs)
        parts = []
        for b in bs:
            rd = [bd.reading(r) for _, r in b]
            g = {k: float(np.mean([x["gaps"][k] for x in rd])) for k in cv.GAP_NAMES}
            acc = [x["accuracy"] for x in rd]
            parts.append(f"{len(b)} end{'s' * (len(b) == 1)} at mean IC accuracy {min(acc):.3f}"
                         + (f" to {max(acc):.3f}" if len(b) > 1 else "")
                         + f" (first-middle {g['first-middle']:+.3f}, first-last {g['first-last']:+.3f}, "
                         f"middle-last {g['middle-last']:+.3f}; {slot_words(rd, _n_test(b))})")
        head = f"{label}, {len(runs)} of {len(study[label])} networks stored: {split_words(study, label)}; "
        out.append(head + "; ".join(parts))
    return ". ".join(out) + "." if out else "no network yet."


def moving_table(runs: Mapping[str, Sequence[Mapping[str, Any] | None]], window: int = bd.READ_WINDOW,
                 margin: float = bd.MARGIN):
    """Still moving at the end (:func:`posbias.budget.still_moving`): one row per configuration and
    quantity (mean IC accuracy and the three gaps), how many of its networks are settled, moving or
    undetermined over the last ``window`` iterations, and the mean change. Configurations without
    networks are left out. A ``pandas.DataFrame``."""
    import pandas as pd  # lazy: pandas costs ~0.5s at import

    rows = []
    for label, us in runs.items():
        us = [u for u in us if u is not None]
        if not us:
            continue
        for q in QUANTITIES:
            got = [bd.still_moving(u["curves"]["step"], bd.mean_accuracy(u["curves"]) if q == "accuracy"
                                   else cv.gap_curve(u["curves"], q), window=window, margin=margin) for u in us]
            rows.append({"configuration": label, "quantity": "mean IC accuracy" if q == "accuracy" else q,
                         "networks": len(us), **{v: sum(x["verdict"] == v for x in got)
                                                 for v in ("settled", "moving", "undetermined")},
                         f"change over the last {window:,} iterations": _mean_se([x["change"] for x in got])})
    return pd.DataFrame(rows)


def best_table(study: Study):
    """The secondary reading: one row per configuration with networks stored: how many recorded a
    held-out loss, where their lowest was (range of steps), their mean IC accuracy there and in the
    reading. A ``pandas.DataFrame``."""
    import pandas as pd  # lazy: pandas costs ~0.5s at import

    rows = []
    for label, runs in done(study).items():
        best = [(bd.best_reading(r), bd.reading(r)) for _, r in runs]
        have = [(b, r) for b, r in best if b is not None]
        steps = [b["step"] for b, _ in have]
        rows.append({"configuration": label, "networks": len(runs),
                     "with a held-out loss": len(have) if have else "not recorded",
                     "lowest held-out loss at": f"{min(steps):,} to {max(steps):,}" if steps else "",
                     "accuracy there": _mean_se([b["accuracy"] for b, _ in have], False) if have else "",
                     "accuracy in the reading": _mean_se([r["accuracy"] for _, r in have], False) if have else ""})
    return pd.DataFrame(rows)


def _entries(labels: Sequence[str]) -> list[claims.Entry]:
    return [e for e in claims.register().select(campaign="wu-fig-2") if e.quantity in MEASURED_ALONG
            and all(g["quantity"] in MEASURED_ALONG for g in e.guards) and set(e.configs) <= set(labels)]


def _judge_paired(entries: Sequence[claims.Entry], study: Study, end: int | None = None,
                  runs: Mapping[str, Sequence[tuple[int, Mapping[str, Any]]]] | None = None) -> list[claims.Judged]:
    """:func:`posbias.claims.judge` entry by entry, each on the seeds that every configuration it names
    has (the register pairs configurations seed by seed, and decay | 2's wide seeds 5-9 pair with no
    other configuration), with Holm over the entries judged, as one call of the judge applies it.
    ``runs``: ``label -> (seed, record)`` in place of the study's rows (a branch)."""
    rows = {label: [(s, r) for s, _, r in study[label]] for label in study}
    rows.update(runs or {})
    out = []
    for e in entries:
        common = set.intersection(*({s for s, _ in rows[c]} for c in e.configs))
        # seed order for every configuration, so that the judge pairs run i of one with run i of another
        # (a branch's runs come in accuracy order)
        units = {c: [bd.as_read(r, "reading", end) for s, r in sorted(rows[c], key=lambda sr: sr[0]) if s in common]
                 for c in e.configs}
        out += claims.judge([e], {"wu-fig-2": units})
    tested = [j for j in out if j.status != claims.NOT_YET]
    for j, rejected in zip(tested, stats.holm([j.p for j in tested])):
        j.holm = j.status if rejected and j.status != "inconclusive" else "inconclusive"
    return out


def claims_table(study: Study):
    """The register's Figure 2 claims measurable from the IC accuracies whose configurations are all in
    the study: the verdict (after Holm, over these claims) on every network at its reading at 100,000
    iterations and at the end, and per branch (:data:`posbias.budget.MIN_BRANCH` networks or more, Holm
    over the per-branch verdicts) where a configuration the claim names splits; ``not yet`` until all
    the design's networks of its configurations are stored. A ``pandas.DataFrame``."""
    import pandas as pd  # lazy: pandas costs ~0.5s at import

    entries = _entries(list(study))
    at100, at_end = _judge_paired(entries, study, PAPER_STEP), _judge_paired(entries, study)
    split = {label: branches_of(done(study)[label]) for label in study if complete(study, label)}
    split = {label: bs for label, bs in split.items() if len(bs) > 1}
    per_branch: list[tuple[int, str, Any]] = []
    for i, e in enumerate(entries):
        for label in e.configs:
            for k, b in enumerate(split.get(label, []), 1):
                if len(b) < bd.MIN_BRANCH:
                    n = f"{len(b)} network" + "s" * (len(b) != 1)
                    per_branch.append((i, f"{label} branch {k}: {n}, not judged", None))
                    continue
                (j,) = _judge_paired([e], study, runs={label: b})
                per_branch.append((i, f"{label} branch {k}", j))
    tested = [j for _, _, j in per_branch if j is not None and j.p is not None]
    for j, rejected in zip(tested, stats.holm([j.p for j in tested])):
        j.holm = j.status if rejected and j.status != "inconclusive" else "inconclusive"

    def mean(j):
        return "" if j.mean is None else f"{j.mean:+.3f} ± {j.se:.3f}"

    rows = []
    for i, (e, a, b) in enumerate(zip(entries, at100, at_end)):
        pb = [f"{name}: {'' if j is None else j.holm + (' ' + mean(j) if j.mean is not None else '')}".rstrip(": ")
              for k, name, j in per_branch if k == i]
        rows.append({"claim": e.id, "at 100k": a.holm, "mean at 100k": mean(a), "at the end": b.holm,
                     "mean at the end": mean(b), "per branch": "; ".join(pb) or "no split"})
    return pd.DataFrame(rows)


def claims_sentence(claims) -> str:
    """How many of :func:`claims_table`'s claims are judged at the end of the budget, in one sentence:
    all of them, or how many wait (``not yet``) for networks still to train."""
    n, judged = len(claims), int((claims["at the end"] != "not yet").sum()) if len(claims) else 0
    if judged == n:
        return f"All {n} of the study's claims are judged."
    return f"{judged} of the study's {n} claims can be judged so far; the rest wait for networks still to train."


# --- Issue 92's rules, written and committed before they were applied to the study's networks. ---------

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
    """Which answer slot a group of networks (their :func:`posbias.budget.reading`) serves best, in words,
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
    design's :func:`posbias.budget.branches`, exploratory). Networks sorted by their reading of mean IC
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
    design = branches_of(runs)
    f = " : ".join(str(len(b)) for b in firm) if len(firm) > 1 else "one branch"
    d = " : ".join(str(len(b)) for b in design) if len(design) > 1 else "one branch"
    if not uncertain:
        return f"{f}, as the design's rule"
    n = len(uncertain)
    return f"{f} (the design's rule: {d}; {n} of its cuts fall{'s' * (n == 1)} inside the networks' own swing)"


def loss_changes(record: Mapping[str, Any], windows: int = 4, window: int = bd.READ_WINDOW) -> list[float]:
    """The held-out loss's least-squares change over each of the last ``windows`` non-overlapping reading
    windows, oldest first (:func:`posbias.budget.still_moving`); ``[]`` without a held-out loss."""
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
    interval entirely below zero (:func:`posbias.budget.still_moving`). ``settles_at`` (an
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
    for label, runs in done(study).items():
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
    for label, runs in done(study).items():
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
    """When a network's quantities move (:func:`posbias.jump.half_change`): ``{"exit"}`` (its first plateau exit
    after 100,000, or None) and one half-change dict per quantity: ``accuracy`` (mean IC), the three gaps,
    and ``sweep`` (the sweep's mean accuracy, where the curves hold it)."""
    from . import jump

    c = record["curves"]
    out: dict[str, Any] = {"exit": next(iter(_exits_after(record)), None),
                           "accuracy": jump.half_change(c["step"], bd.mean_accuracy(c)),
                           **{g: jump.half_change(c["step"], cv.gap_curve(c, g)) for g in cv.GAP_NAMES}}
    if "sweep" in c:
        out["sweep"] = jump.half_change(c["step"], np.asarray(c["sweep"], dtype=float).mean(-1))
    return out


def timing_table(study: Study, label: str = "decay|2"):
    """When each of ``label``'s networks moves (exploratory: the jump study's rule, :mod:`posbias.jump`, applied
    to the fixed-budget records): its plateau exit, the half-change step of its mean IC accuracy, of the sweep's
    mean accuracy and of each gap (with its start and end), and how long the first-last gap moves before the
    accuracy. A ``pandas.DataFrame``."""
    import pandas as pd  # lazy: pandas costs ~0.5s at import

    def at(x: Mapping[str, Any] | None) -> str:
        if x is None:
            return "not recorded"
        return f"{x['at']:,}" if x["at"] is not None else ("does not move" if not x["moves"] else "not half way")

    rows = []
    for s, r in sorted(done(study)[label]):
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
    retrieve by :data:`posbias.retrieval.READING_RULE` (``retrieve``), how long their first-last gap moves before
    their accuracy (``lead_range``, :func:`timing`); how many of ``others``' networks left a plateau
    (``others_left`` of ``others_n``); and how many depth-2 networks with a held-out loss are still learning at the
    budget (``learning`` of ``with_loss``, :func:`still_learning`)."""
    from . import retrieval

    runs = done(study)[label]
    up = [(s, r) for s, r in runs if _exits_after(r)]
    exits = sorted(_exits_after(r)[0] for _, r in up)
    ends = sorted(bd.reading(r)["accuracy"] for _, r in up)
    times = [timing(r) for _, r in up]
    leads = sorted(t["accuracy"]["at"] - t["first-last"]["at"] for t in times
                   if t["accuracy"]["at"] is not None and t["first-last"]["at"] is not None)
    reads = retrieval.standing([r for _, r in up])["readings"] if up else {}
    deep2 = [r for lab in study if int(lab.split("|")[1]) == 2 for _, r in done(study)[lab]]
    got = [x for x in (still_learning(r) for r in deep2) if x is not None]
    other = [r for lab in others for _, r in done(study).get(lab, [])]

    def span(xs: Sequence[float], fmt: str) -> str:
        return "" if not xs else format(xs[0], fmt) if xs[0] == xs[-1] else f"{xs[0]:{fmt}} to {xs[-1]:{fmt}}"

    return {"n": str(len(runs)), "n_left": str(len(up)), "exit_range": span(exits, ","),
            "end_range": span(ends, ".3f"), "slots": slot_words([bd.reading(r) for _, r in up], _n_test(up)) if up
            else "", "retrieve": f"{reads.get('retrieves', 0)} of {len(up)}", "lead_range": span(leads, ","),
            "others_left": str(sum(bool(_exits_after(r)) for r in other)), "others_n": str(len(other)),
            "learning": str(sum(x["learning"] for x in got)), "with_loss": str(len(got))}
