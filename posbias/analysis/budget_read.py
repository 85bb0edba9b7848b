"""What the chapter ``wu-bias-over-training`` reads off the fixed-budget study (:mod:`posbias.analysis.budget`):
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

from posbias.analysis import budget as bd
from posbias.measures import stats
from posbias.analysis import claims
from posbias.measures import convergence as cv
from posbias.analysis.overtraining import MEASURED_ALONG

__all__ = ["PAPER_STEP", "done", "complete", "networks_table", "readings_table", "branches_of", "split_words",
           "exits_after", "trajectories", "window_swing", "swing_sentence", "branch_table", "moving_table",
           "best_table", "claims_table", "claims_sentence", "training_hours"]

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
    SE over the networks stored of its reading (:func:`posbias.analysis.budget.reading`) at ``at`` and at the end,
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
    """The branches (:func:`posbias.analysis.budget.branches`) of a configuration's stored networks, lowest
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


def exits_after(r: Mapping[str, Any], after: int = PAPER_STEP) -> list[int]:
    """The steps at which a network leaves a plateau of its mean IC accuracy
    (:func:`posbias.analysis.budget.plateau_exits`) after ``after`` iterations, ascending."""
    c = r["curves"]
    return [int(x["exit"]) for x in bd.plateau_exits(c["step"], bd.mean_accuracy(c)) if x["exit"] > after]


def trajectories(study: Study) -> dict[str, Any]:
    """What :func:`posbias.figures.budget_trajectories_figure` draws: ``configs``, label -> ``designed`` (the
    design's number of networks) and ``lines``, one per stored network in the design's order: ``seed``, ``design``
    (trained under the design, not admitted), ``left`` (it left a plateau after 100,000 iterations,
    :func:`exits_after`), ``step``, ``accuracy`` (mean IC accuracy) and ``first_last`` (the gap), each
    ``(evals,)``; and the two references of the IC sets (:func:`posbias.science.retrieval.closed_forms`):
    ``copy_random`` (copying a random context label) and ``ignore_best`` (the best any network that ignores
    the query scores)."""
    from posbias.science.retrieval import closed_forms

    source = {(label, s): src for label, rows in study.items() for s, src, _ in rows}
    configs = {}
    for label, runs in done(study).items():
        lines = [{"seed": seed, "design": source[(label, seed)] == "design", "left": bool(exits_after(r)),
                  "step": np.asarray(r["curves"]["step"]), "accuracy": bd.mean_accuracy(r["curves"]),
                  "first_last": cv.gap_curve(r["curves"], "first-last")} for seed, r in runs]
        configs[label] = {"designed": len(study[label]), "lines": lines}
    ic = closed_forms()["ic"]
    return {"configs": configs, "copy_random": float(ic["copy_random"]), "ignore_best": float(ic["ignore_best"])}


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
            exits = sorted((s, x) for s, r in b for x in exits_after(r))
            so_far = "" if complete(study, label) else " so far"
            rows.append({"configuration": label, "branch": f"{i} of {len(bs)}{so_far}", "networks": len(b),
                         "seeds": ", ".join(str(s) for s in sorted(s for s, _ in b)),
                         "accuracy at the end": (f"{min(acc):.3f}" if len(acc) == 1
                                                 else f"{min(acc):.3f} to {max(acc):.3f}"),
                         "widest swing in a reading window": f"{max(window_swing(r) for _, r in b):.3f}",
                         **{g: f"{np.mean([x['gaps'][g] for x in rd]):+.3f}" for g in cv.GAP_NAMES},
                         "left a plateau after 100k": "; ".join(f"seed {s} at {x:,}" for s, x in exits) or "none"})
    return pd.DataFrame(rows)


def moving_table(runs: Mapping[str, Sequence[Mapping[str, Any] | None]], window: int = bd.READ_WINDOW,
                 margin: float = bd.MARGIN):
    """Still moving at the end (:func:`posbias.analysis.budget.still_moving`): one row per configuration and
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
    """:func:`posbias.analysis.claims.judge` entry by entry, each on the seeds that every configuration it names
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
    iterations and at the end, and per branch (:data:`posbias.analysis.budget.MIN_BRANCH` networks or more, Holm
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
