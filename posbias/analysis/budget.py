"""The fixed-budget study of position bias over training (issue 67): its design, declared before any
of its networks trained, and the readings, branches and tests it is read with. Nothing here trains.

Design (:data:`DESIGN`; the chapter ``wu-bias-over-training`` repeats it in its front matter under
``budget_design`` and checks that the two agree):

- **Budget.** Every network trains exactly :data:`BUDGETS` iterations for its depth (500,000 at depth
  2; 300,000 at depth 6, chosen from the measured cost), evaluated every :data:`EVAL_EVERY`: the six
  IC sets, the position sweep, and the cross-entropy on a fixed held-out set of :data:`N_HELDOUT`
  sequences. No rule stops a network early.
- **Reading.** A network is read by the mean of each quantity over the evaluations of its last
  :data:`READ_WINDOW` iterations (eleven evaluations): :func:`reading`.
- **Secondary reading.** The evaluation of lowest held-out loss (its weights are kept):
  :func:`best_reading`. The held-out loss is chosen as a criterion no claim measures.
- **Plateau exits** (:func:`plateau_exits`), on the mean of the six IC accuracies: a plateau is a
  window of :data:`READ_WINDOW` iterations over which the accuracy's least-squares change is within
  ``±``:data:`FLAT`; the network leaves it at the first later evaluation whose accuracy is at least
  :data:`JUMP` above the plateau's mean and after which the mean of the next window is too.
- **Branches** (:func:`branches`): a configuration's networks sorted by their reading of mean IC
  accuracy, cut wherever two neighbours differ by more than :data:`BRANCH_GAP`. Branches are defined on
  the accuracy the network is trained to raise, never on the gaps the claims measure, so a verdict
  within a branch is not selected on its own outcome.
- **Still moving** (:func:`still_moving`), per network and quantity: the least-squares change over the
  last :data:`READ_WINDOW` iterations with its standard error from the fit (t, 9 degrees of freedom);
  ``settled`` when its 90% interval lies within ``±``:data:`MARGIN` (two one-sided tests at 5%),
  ``moving`` when the interval lies entirely beyond ``+MARGIN`` or ``-MARGIN``, ``undetermined`` otherwise.
- **Claims per branch** (:data:`MIN_BRANCH`): the register's claims measurable from the IC accuracies
  are judged on every network of their configurations, each read by :func:`reading` (the primary
  verdict); where a configuration a claim names splits into two or more branches, the claim is also
  judged within each branch of at least :data:`MIN_BRANCH` networks (the other configurations' networks
  unchanged), Holm's correction over the per-branch verdicts; a smaller branch is shown, not judged.
- **Seeds.** decay at depth 2: seeds 0-9. The other configurations: seeds 0-4; No PE and RoPE at depth
  2 get seeds 5-9 as well when their five networks fall in two or more branches (:data:`WIDEN`).
- **Admitted records** (:func:`admitted`): a committed record of the earlier ``converged`` campaign,
  of the same configuration and seed and the same evaluation settings, whose training ended exactly at
  the depth's budget (the plateau rule never stopped it before), is that network's trajectory under this
  design and is not trained again; it has no held-out loss (the secondary reading reads ``not
  recorded`` for it) and no sweep along training.

Grounds for the thresholds, fixed without looking at any network of the study: one IC accuracy on
10,000 sequences has a binomial standard error of at most 0.005, a gap (two independent sets) at most
0.0071, and the mean of the six accuracies at most 0.002; the test sets are fixed, so a difference
between two networks' readings has a standard error up to about 0.01. :data:`JUMP` and
:data:`BRANCH_GAP` (0.05) are five such standard errors: no jump and no split can come from the test
sets' sampling alone, and 5 points of accuracy is a change a reader would call a different network.
:data:`FLAT` (0.01 over 50,000 iterations) is five standard errors of the mean accuracy. :data:`MARGIN`
(0.02 per 50,000 iterations) is about three standard errors of one gap measurement; a drift at that
rate moves a gap by 0.1 over 250,000 more iterations (twice :data:`BRANCH_GAP`), and a slower one is
what this study calls settled. :data:`MIN_BRANCH` = 3 leaves Student's t two degrees of freedom.
"""
from __future__ import annotations

import copy
import math
from typing import Any, Mapping, Sequence

import numpy as np

from posbias.measures import convergence as cv
from posbias.trained import parse_fig2

__all__ = ["BUDGETS", "EVAL_EVERY", "READ_WINDOW", "N_HELDOUT", "FLAT", "JUMP", "BRANCH_GAP", "MARGIN",
           "MIN_BRANCH", "WIDEN", "DESIGN", "budget", "mean_accuracy", "reading", "best_reading",
           "plateau_exits", "branches", "still_moving", "admitted", "as_read", "network_hours", "cost_plan"]

#: Iterations every network of the study trains, by depth.
BUDGETS: dict[int, int] = {2: 500_000, 6: 300_000}
EVAL_EVERY = 5_000
#: The reading window: the mean over the evaluations of the last 50,000 iterations (eleven).
READ_WINDOW = 50_000
N_HELDOUT = 10_000
#: A plateau: the mean IC accuracy's least-squares change over a window within this.
FLAT = 0.01
#: Leaving a plateau: the accuracy this far above the plateau's mean, and the next window's mean too.
JUMP = 0.05
#: Branches: neighbours (sorted by their reading of mean IC accuracy) further apart than this are cut.
BRANCH_GAP = 0.05
#: Still moving: the equivalence margin of a change over the last window.
MARGIN = 0.02
#: The fewest networks of a branch a claim is judged on.
MIN_BRANCH = 3
#: Configurations that get seeds 5-9 when their seeds 0-4 fall in two or more branches.
WIDEN = ("No PE|2", "RoPE|2")

DESIGN: dict[str, Any] = {
    "budgets": {str(d): s for d, s in BUDGETS.items()}, "eval_every": EVAL_EVERY, "read_window": READ_WINDOW,
    "read_evaluations": READ_WINDOW // EVAL_EVERY + 1, "n_heldout": N_HELDOUT, "secondary": "best-heldout-loss",
    "flat": FLAT, "jump": JUMP, "branch_gap": BRANCH_GAP, "margin": MARGIN, "min_branch": MIN_BRANCH,
    "seeds": {"decay|2": list(range(10)), "No PE|2": list(range(5)), "RoPE|2": list(range(5)),
              "No PE|6": list(range(5)), "RoPE|6": list(range(5))},
    "widen": list(WIDEN),
}


def budget(depth: int) -> int:
    """The iterations a network of ``depth`` trains; ``ValueError`` for a depth outside the study."""
    if depth not in BUDGETS:
        raise ValueError(f"depth {depth} is not in the study (depths {sorted(BUDGETS)})")
    return BUDGETS[depth]


def mean_accuracy(curves: Mapping[str, Sequence]) -> np.ndarray:
    """The mean of the six IC accuracies at every evaluation, ``(n_evals,)``."""
    return np.mean([np.asarray(v, dtype=float) for k, v in curves.items() if k.startswith("IC_")], axis=0)


def in_window(steps: Sequence[int], end: int, window: int) -> np.ndarray:
    """Which evaluations a reading over the last ``window`` iterations up to ``end`` averages: a boolean
    mask of shape ``(len(steps),)``, true on ``end - window <= step <= end``. ``end`` must be evaluated."""
    s = np.asarray(steps)
    sel = (s > end - window - 1e-9) & (s <= end)
    if end not in set(int(x) for x in s):
        raise ValueError(f"no evaluation at step {end}")
    return sel


def reading(run: Mapping[str, Any], end: int | None = None, window: int = READ_WINDOW) -> dict[str, Any]:
    """A network's reading: each quantity's mean over the evaluations of the last ``window`` iterations
    up to ``end`` (default its last evaluation): ``{"step", "n", "accuracy", "ic_accuracy": {...},
    "gaps": {...}}`` plus ``"heldout_loss"`` where the curves have it."""
    c = run["curves"]
    end = int(c["step"][-1]) if end is None else int(end)
    sel = in_window(c["step"], end, window)
    out: dict[str, Any] = {"step": end, "n": int(sel.sum()),
                           "accuracy": float(mean_accuracy(c)[sel].mean()),
                           "ic_accuracy": {k: float(np.asarray(v, dtype=float)[sel].mean())
                                           for k, v in c.items() if k.startswith("IC_")},
                           "gaps": {g: float(cv.gap_curve(c, g)[sel].mean()) for g in cv.GAP_NAMES}}
    if "heldout_loss" in c:
        out["heldout_loss"] = float(np.asarray(c["heldout_loss"], dtype=float)[sel].mean())
    return out


def best_reading(run: Mapping[str, Any]) -> dict[str, Any] | None:
    """The secondary reading: the network at its evaluation of lowest held-out loss (after step 0; the
    earliest of ties), ``{"step", "heldout_loss", "accuracy", "ic_accuracy", "gaps"}``; None for a record
    without a held-out loss (an admitted one). Its weights are the record's ``best``."""
    c = run["curves"]
    if "heldout_loss" not in c:
        return None
    steps, loss = np.asarray(c["step"]), np.asarray(c["heldout_loss"], dtype=float)
    later = np.flatnonzero(steps > 0)
    i = int(later[np.argmin(loss[later])])
    return {"step": int(steps[i]), "heldout_loss": float(loss[i]), "accuracy": float(mean_accuracy(c)[i]),
            "ic_accuracy": {k: float(v[i]) for k, v in c.items() if k.startswith("IC_")},
            "gaps": {g: float(cv.gap_curve(c, g)[i]) for g in cv.GAP_NAMES}}


def plateau_exits(steps: Sequence[int], accuracy: Sequence[float], window: int = READ_WINDOW,
                  flat: float = FLAT, jump: float = JUMP) -> list[dict[str, float]]:
    """Where a network leaves a plateau of its accuracy curve ``accuracy`` (evaluations at ``steps``).

    The window ending at evaluation ``p`` (``[p - window, p]``, within the curve) is flat when the
    least-squares change of ``accuracy`` over it is within ``±flat``. A plateau is a run of consecutive
    flat windows; its level is the mean over its last window. The network leaves it at the first later
    evaluation ``x``, before any window is flat again, with ``accuracy[x] >= level + jump`` and the mean
    over ``[x, x + window]`` (what the curve has of it, at least two evaluations) ``>= level + jump``.
    The search for the next plateau starts at ``x + window``. One dict per exit: ``plateau_from`` and
    ``plateau_to`` (the flat stretch), ``level``, ``exit`` (the step) and ``after`` (the next window's
    mean). A curve that rises smoothly from the start, or that stays on one level, has none."""
    s, a = np.asarray(steps, dtype=float), np.asarray(accuracy, dtype=float)
    n = len(s)

    def is_flat(i: int) -> bool:
        return s[i] - window >= s[0] and abs(float(cv.window_change(s, a, s[i], window))) <= flat

    def after(j: int) -> float | None:
        nxt = (s >= s[j]) & (s <= s[j] + window)
        return float(a[nxt].mean()) if nxt.sum() >= 2 else None

    out: list[dict[str, float]] = []
    i = 0
    while i < n:
        if not is_flat(i):
            i += 1
            continue
        first = i
        while i + 1 < n and is_flat(i + 1):
            i += 1
        level = float(a[(s >= s[i] - window) & (s <= s[i])].mean())
        j = i + 1
        while j < n and not is_flat(j):
            m = after(j)
            if a[j] >= level + jump and m is not None and m >= level + jump:
                out.append({"plateau_from": int(s[first] - window), "plateau_to": int(s[i]), "level": level,
                            "exit": int(s[j]), "after": m})
                j = int(np.searchsorted(s, s[j] + window))
                break
            j += 1
        i = j
    return out


def branches(end_accuracy: Mapping[Any, float], gap: float = BRANCH_GAP) -> list[list[Any]]:
    """A configuration's networks (key -> its reading of mean IC accuracy) in branches: sorted by
    accuracy, cut wherever two neighbours differ by more than ``gap``. Branches from the lowest up,
    each a list of keys in accuracy order; ``[]`` for no networks."""
    order = sorted(end_accuracy, key=lambda k: (end_accuracy[k], str(k)))
    out: list[list[Any]] = []
    for k in order:
        if out and end_accuracy[k] - end_accuracy[out[-1][-1]] <= gap:
            out[-1].append(k)
        else:
            out.append([k])
    return out


def still_moving(steps: Sequence[int], values: Sequence[float], end: int | None = None,
                 window: int = READ_WINDOW, margin: float = MARGIN) -> dict[str, Any]:
    """Is a quantity still moving at ``end`` (default the last evaluation)? Its least-squares change over
    ``[end - window, end]`` (slope times ``window``) with the fit's standard error, and the 90% interval
    (t with ``n - 2`` degrees of freedom): ``verdict`` ``settled`` when the interval lies within
    ``±margin``, ``moving`` when it lies entirely beyond one of them, ``undetermined`` otherwise."""
    from scipy import stats  # lazy: scipy.stats costs ~0.8s at import

    s, v = np.asarray(steps, dtype=float), np.asarray(values, dtype=float)
    end = s[-1] if end is None else end
    sel = in_window(s.astype(int), int(end), window)
    x, y = s[sel] - s[sel].mean(), v[sel]
    n = int(sel.sum())
    if n < 3:
        raise ValueError(f"the window holds {n} evaluations; need three")
    slope = float(x @ (y - y.mean()) / (x @ x))
    resid = y - y.mean() - slope * x
    se = math.sqrt(float(resid @ resid) / (n - 2) / float(x @ x)) * window
    change = slope * window
    t = float(stats.t.ppf(0.95, n - 2))
    lo, hi = change - t * se, change + t * se
    verdict = ("settled" if -margin < lo and hi < margin else
               "moving" if lo > margin or hi < -margin else "undetermined")
    return {"change": change, "se": se, "lo": lo, "hi": hi, "verdict": verdict}


def admitted(record: Mapping[str, Any] | None, depth: int) -> bool:
    """May ``record`` (a committed ``converged``-campaign unit of the configuration and seed) stand for
    the network this design trains? Its evaluations are every :data:`EVAL_EVERY` on 10,000 sequences per
    IC set, and its training ended exactly at the depth's budget (at the cap, or the rule first holding
    there), so its trajectory up to the budget is one the rule never cut."""
    if record is None or depth not in BUDGETS:
        return False
    p, steps = record["params"], record["curves"]["step"]
    stop = record.get("stop", {})
    return (p["eval_every"] == EVAL_EVERY and p["n_test"] == 10_000 and p["depth"] == depth
            and int(steps[-1]) == BUDGETS[depth] and stop.get("stopped_at") == BUDGETS[depth]
            and list(steps) == list(range(0, BUDGETS[depth] + 1, EVAL_EVERY)))


def as_read(run: Mapping[str, Any] | None, how: str = "reading", end: int | None = None) -> dict[str, Any] | None:
    """A copy of ``run`` whose ``ic_accuracy`` and ``gaps`` are its :func:`reading` up to ``end``
    (``how="reading"``; default the last evaluation) or its :func:`best_reading` (``"best"``; None when
    the record has no held-out loss), for the register's judge; the records stored at the end only
    (sweep, attention) are dropped."""
    if run is None:
        return None
    r = reading(run, end) if how == "reading" else best_reading(run)
    if r is None:
        return None
    v = {k: copy.deepcopy(x) for k, x in run.items() if k not in ("sweep_accuracy", "mean_attention", "sink_alpha",
                                                                   "sink_share", "best")}
    v["ic_accuracy"], v["gaps"] = dict(r["ic_accuracy"]), dict(r["gaps"])
    return v


def network_hours(depth: int, ms_per_step: float, eval_seconds: float, steps: int | None = None) -> float:
    """Core-hours of one network of ``depth`` trained ``steps`` (default its budget) at the measured
    ``ms_per_step``, with an evaluation every :data:`EVAL_EVERY` (and at step 0) of ``eval_seconds``."""
    n = budget(depth) if steps is None else steps
    return (n * ms_per_step / 1000 + (n // EVAL_EVERY + 1) * eval_seconds) / 3600


def cost_plan(measured: Mapping[str, Any]) -> dict[str, str]:
    """The study's plan from the front matter's ``cost_plan`` (``ms_per_step`` and ``eval_seconds`` by
    depth, ``to_train`` and ``if_split``: networks per configuration), as the chapter prints it:
    ``ms_<d>``, ``eval_<d>``, ``net_hours_<d>``, ``n_to_train``, ``hours`` (all of ``to_train``),
    ``hours_if_split``, ``hours_6`` and ``hours_6_at_500k`` (the depth-6 networks at the two budgets)."""
    ms = {int(d): float(v) for d, v in measured["ms_per_step"].items()}
    ev = {int(d): float(v) for d, v in measured["eval_seconds"].items()}

    def hours(counts: Mapping[str, int], steps6: int | None = None) -> float:
        total = 0.0
        for label, n in counts.items():
            d = parse_fig2(label)[1]
            total += n * network_hours(d, ms[d], ev[d], steps6 if d == 6 else None)
        return total

    deep = {k: v for k, v in measured["to_train"].items() if parse_fig2(k)[1] == 6}
    out = {f"ms_{d}": f"{ms[d]:.2f}" for d in sorted(ms)} | {f"eval_{d}": f"{ev[d]:.1f}" for d in sorted(ev)}
    out |= {f"net_hours_{d}": f"{network_hours(d, ms[d], ev[d]):.2f}" for d in sorted(ms)}
    out |= {"n_to_train": str(sum(measured["to_train"].values())), "hours": f"{hours(measured['to_train']):.1f}",
            "hours_if_split": f"{hours(measured['if_split']):.1f}", "hours_6": f"{hours(deep):.1f}",
            "hours_6_at_500k": f"{hours(deep, 500_000):.1f}"}
    return out
