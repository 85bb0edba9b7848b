"""When has a trained network stopped changing? The stopping rule of the ``converged`` profile, and
the reading of learning curves: the gaps against iterations, whether they still move, and from which
iteration a sign holds.

A unit's ``curves`` (as stored in ``data/wu-units``) hold, for every evaluation, the ``step``, the
mean training ``loss`` since the previous evaluation and the six ``IC_<a>_<b>`` accuracies on
``n_test`` sequences each. The three gaps are ``acc(IC_a_b) - acc(IC_b_a)`` (:data:`GAP_NAMES`).

The rule (:data:`PLATEAU`) was fixed before any network was trained past the paper's 100,000
iterations; its grounds are stated on :class:`StopRule` and do not involve any verdict.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Mapping, Sequence

import numpy as np

__all__ = ["GAP_NAMES", "StopRule", "PLATEAU", "RULES", "rule", "gap_curve", "gap_se", "window_change",
           "member_curves", "rule_reading", "describe_reading", "rule_parts", "rule_holds",
           "first_held", "stop_step", "loss_rise", "sign_stable_from", "plateau_rows"]

#: The paper's three gaps, ``"a-b"``: ``acc(IC_a_b) - acc(IC_b_a)``, positive = the earlier slot preferred.
GAP_NAMES = ("first-middle", "first-last", "middle-last")


@dataclass(frozen=True)
class StopRule:
    """Train until the gaps and the loss stop moving, checked at every evaluation from ``min_step``.

    At an evaluation step ``s >= min_step`` the rule holds when, over the window of the last ``window``
    iterations (the evaluations at ``s - window`` .. ``s``, every ``eval_every``):

    - for each of the three gaps, the change over the window fitted by least squares (slope times
      ``window``) is at most ``gap_z`` standard errors of one measurement of that gap at ``s``
      (binomial, ``sqrt(p_ab (1 - p_ab) / n + p_ba (1 - p_ba) / n)``): the drift is smaller than what
      a test set of ``n_test`` sequences can resolve;
    - the mean training loss changed over the window (fitted the same way) by at most ``loss_rel``
      of its value at ``s``.

    Training stops at the first such ``s``, or at ``cap`` iterations ("a network that reaches the cap
    is a finding, not a failure"). Grounds, fixed before results: ``window`` is half the paper's
    training length, long enough for eleven evaluations at the paper's ``eval_every`` of 5,000;
    ``min_step`` is the paper's 100,000, so a converged network is never trained less than the paper's;
    ``gap_z = 2`` is the usual two-standard-error band of the measurement the claims are judged on;
    ``loss_rel = 1%`` is a change of the loss that moves the per-token probability of the right label
    by about 1% of itself; ``cap`` five times the paper's procedure bounds the cost.
    """

    name: str = "plateau-50k"
    window: int = 50_000
    min_step: int = 100_000
    cap: int = 500_000
    gap_z: float = 2.0
    loss_rel: float = 0.01

    def describe(self) -> str:
        """The rule in one sentence, for the chapter and the records."""
        return (f"from {self.min_step:,} iterations on, stop at the first evaluation where, over the last "
                f"{self.window:,} iterations, each gap's least-squares change is within {self.gap_z:g} standard "
                f"errors of one measurement and the training loss changed by at most {self.loss_rel:.0%}; "
                f"at most {self.cap:,} iterations")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


PLATEAU = StopRule()
#: Stopping rules by name: a unit names its rule (``Unit.stop_rule``), so changing a rule means a new name.
RULES: dict[str, StopRule] = {PLATEAU.name: PLATEAU}


def rule(name: str) -> StopRule:
    """The rule called ``name``; ``ValueError`` naming the known ones otherwise."""
    if name not in RULES:
        raise ValueError(f"unknown stopping rule {name!r}; known: {', '.join(RULES)}")
    return RULES[name]


def member_curves(curves: Mapping[str, Sequence], e: int = 0) -> dict[str, list]:
    """Member ``e``'s curves from an ensemble's (one list per evaluation, as training and its
    checkpoints hold them); a unit's own curves (one value per evaluation) pass unchanged."""
    return {k: [row[e] if isinstance(row, list) else row for row in v] for k, v in curves.items()}


def gap_curve(curves: Mapping[str, Sequence], name: str) -> np.ndarray:
    """The gap ``name`` (``"first-last"``, ...) at every evaluation, ``(n_evals,)`` or, for an
    ensemble's curves (one list per evaluation), ``(n_evals, E)``."""
    a, b = name.split("-")
    return np.asarray(curves[f"IC_{a}_{b}"], dtype=float) - np.asarray(curves[f"IC_{b}_{a}"], dtype=float)


def gap_se(curves: Mapping[str, Sequence], name: str, n_test: int) -> np.ndarray:
    """Binomial standard error of one measurement of the gap ``name`` at every evaluation (same shape
    as :func:`gap_curve`): the two accuracies are on independent sets of ``n_test`` sequences."""
    a, b = name.split("-")
    pa, pb = (np.asarray(curves[f"IC_{x}_{y}"], dtype=float) for x, y in ((a, b), (b, a)))
    return np.sqrt((pa * (1 - pa) + pb * (1 - pb)) / n_test)


def window_change(steps: Sequence[int], values: np.ndarray, end: int, window: int) -> np.ndarray:
    """Least-squares slope of ``values`` over the evaluations with ``end - window <= step <= end``,
    times ``window``: the change over the window a straight line fits. ``values`` is ``(n_evals,)``
    or ``(n_evals, E)``; the result ``()`` or ``(E,)``. Needs at least two evaluations in the window."""
    s = np.asarray(steps, dtype=float)
    sel = (s >= end - window) & (s <= end)
    if sel.sum() < 2:
        raise ValueError(f"the window {end - window}..{end} holds {int(sel.sum())} evaluation(s); need two")
    x = s[sel] - s[sel].mean()
    y = np.asarray(values, dtype=float)[sel]
    y = y - y.mean(0)
    slope = np.tensordot(x, y, axes=(0, 0)) / float(x @ x)
    return slope * window


def _at(steps: Sequence[int], end: int) -> int:
    idx = [i for i, s in enumerate(steps) if s == end]
    if not idx:
        raise ValueError(f"no evaluation at step {end}")
    return idx[0]


def _changes(curves: Mapping[str, Sequence], n_test: int, r: StopRule,
             end: int) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each part of ``r`` at the evaluation ``end`` as (fitted change over the window, the change the
    rule allows): a gap's allowance is ``gap_z`` standard errors of one measurement at ``end``, the
    loss's ``loss_rel`` of its value there. Assumes the window is covered."""
    steps = list(curves["step"])
    i = _at(steps, end)
    out = {name: (window_change(steps, gap_curve(curves, name), end, r.window),
                  r.gap_z * gap_se(curves, name, n_test)[i]) for name in GAP_NAMES}
    loss = np.asarray(curves["loss"], dtype=float)
    out["loss"] = (window_change(steps, loss, end, r.window), r.loss_rel * np.abs(loss[i]))
    return out


def _covered(steps: Sequence[int], r: StopRule, end: int) -> bool:
    return end >= r.min_step and end - r.window >= steps[0]


def rule_parts(curves: Mapping[str, Sequence], n_test: int, r: StopRule,
               end: int | None = None) -> dict[str, np.ndarray]:
    """Each part of ``r`` at the evaluation ``end`` (default the last): ``{gap name: held, ...,
    "loss": held}``, each a bool or ``(E,)`` bools for an ensemble's curves; a gap holds when its
    fitted change over the window is within ``gap_z`` SE, the loss when its fitted change is within
    ``loss_rel`` of its value. All False before ``r.min_step`` or when the window is not covered."""
    steps = list(curves["step"])
    end = steps[-1] if end is None else end
    i = _at(steps, end)
    shape = np.shape(np.asarray(curves["loss"][i]))
    if not _covered(steps, r, end):
        return {name: np.zeros(shape, dtype=bool) if shape else np.bool_(False) for name in (*GAP_NAMES, "loss")}
    return {name: np.abs(change) <= allowed for name, (change, allowed) in _changes(curves, n_test, r, end).items()}


def rule_reading(curves: Mapping[str, Sequence], n_test: int, r: StopRule,
                 end: int | None = None) -> dict[str, np.ndarray] | None:
    """How far each part of ``r`` is from holding at the evaluation ``end`` (default the last), in the
    rule's own units: ``{gap name: fitted change over the window in standard errors of one measurement,
    ..., "loss": fitted change as a fraction of the loss}``, signed, each a float or ``(E,)``. A part
    holds when its reading is within ``gap_z`` (gaps) or ``loss_rel`` (loss) of 0. None before
    ``r.min_step`` or when the window is not covered."""
    steps = list(curves["step"])
    end = steps[-1] if end is None else end
    _at(steps, end)
    if not _covered(steps, r, end):
        return None
    ch = _changes(curves, n_test, r, end)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = {name: ch[name][0] * r.gap_z / ch[name][1] for name in GAP_NAMES}
        out["loss"] = ch["loss"][0] * r.loss_rel / ch["loss"][1]
    return out


def describe_reading(reading: Mapping[str, np.ndarray] | None, r: StopRule, end: int) -> str:
    """:func:`rule_reading` of one unit as a phrase: each gap's change in SE and the loss's in percent,
    beside what the rule allows."""
    if reading is None:
        return f"the rule is not read at {end:,} (from {r.min_step:,}, over {r.window:,} iterations)"
    gaps = ", ".join(f"{n} {float(reading[n]):+.1f}" for n in GAP_NAMES)
    return (f"at {end:,} over the last {r.window:,} iterations the gaps moved {gaps} SE (the rule allows "
            f"{r.gap_z:g}) and the loss {100 * float(reading['loss']):+.1f}% (allows {r.loss_rel:.0%})")


def rule_holds(curves: Mapping[str, Sequence], n_test: int, r: StopRule, end: int | None = None) -> np.ndarray:
    """Does ``r`` hold at the evaluation ``end`` (default the last)? A bool, or ``(E,)`` bools for an
    ensemble's curves: every part of :func:`rule_parts` at once."""
    parts = list(rule_parts(curves, n_test, r, end).values())
    ok = np.logical_and.reduce(parts)
    return ok if np.ndim(ok) else np.bool_(ok)


def first_held(curves: Mapping[str, Sequence], n_test: int, r: StopRule, parts: Sequence[str]) -> int | None:
    """The first evaluation step at which the named parts of ``r`` (``"loss"`` and gap names) all hold
    on one unit's curves, or None: where the gaps alone settled, say, when the rule as a whole never
    held."""
    for s in curves["step"]:
        if s >= r.min_step:
            got = rule_parts(curves, n_test, r, s)
            if all(bool(got[p]) for p in parts):
                return int(s)
    return None


def stop_step(curves: Mapping[str, Sequence], n_test: int, r: StopRule) -> int | None:
    """The first evaluation step at which ``r`` holds on one unit's curves, or None."""
    for s in curves["step"]:
        if s >= r.min_step and bool(rule_holds(curves, n_test, r, s)):
            return int(s)
    return None


def loss_rise(curves: Mapping[str, Sequence]) -> tuple[float, int]:
    """How far a run's training loss ended above its best: ``(rise, best_step)``, ``rise`` the last
    evaluation's loss over the lowest one's, minus 1, and ``best_step`` where the lowest was (evaluations
    after step 0, which logs no training loss). A plateau the rule stops on after a rise beyond its own
    ``loss_rel`` is one the network fell to, having lost what it had learned, not one it converged to."""
    steps = np.asarray(curves["step"])
    loss = np.asarray(curves["loss"], dtype=float)[steps > 0]
    best = int(np.argmin(loss))
    return float(loss[-1] / loss[best] - 1.0), int(steps[steps > 0][best])


def sign_stable_from(steps: Sequence[int], mean: np.ndarray, se: np.ndarray, z: float = 2.0) -> tuple[int, int] | None:
    """From which evaluation on the sign of a seed-mean curve is settled: ``(step, sign)`` where
    ``sign`` is the sign the curve ends with, beyond ``z`` standard errors (``mean > z se`` or
    ``mean < -z se``), and ``step`` the first evaluation from which every later one is on that side
    of zero beyond ``z`` SE. None when the last evaluation is within ``z`` SE of zero (no sign)."""
    m, e = np.asarray(mean, dtype=float), np.asarray(se, dtype=float)
    sign = 1 if m[-1] > z * e[-1] else -1 if m[-1] < -z * e[-1] else 0
    if sign == 0:
        return None
    held = sign * m > z * e
    first = len(m) - 1
    while first > 0 and held[first - 1]:
        first -= 1
    return int(steps[first]), sign


def plateau_rows(steps: Sequence[int], per_seed: np.ndarray, window: int, z: float = 2.0) -> dict[str, float | bool]:
    """Is a seed-mean curve still moving at its last evaluation? ``per_seed`` is ``(n_evals, n_seeds)``.

    The fitted change over the last ``window`` iterations of each seed's curve, averaged over seeds,
    against its standard error over seeds (t with ``n_seeds - 1`` degrees of freedom at 5%, two-sided,
    when there are at least two seeds; else ``z``): ``{"change", "se", "moving"}``."""
    from posbias.measures.stats import t_critical  # lazy: posbias.measures.stats (torch) costs ~1.3s at import

    ch = window_change(steps, per_seed, int(steps[-1]), window)
    ch = np.atleast_1d(ch)
    n = len(ch)
    mean = float(ch.mean())
    se = float(ch.std(ddof=1) / math.sqrt(n)) if n > 1 else float("nan")
    crit = t_critical(n) if n > 1 else z
    return {"change": mean, "se": se, "moving": bool(n > 1 and abs(mean) > crit * se)}
