"""The quantities the claim register names: each is one number per run (seed), measured on the
stored units of one campaign, with the size of the test sample behind it.

Every function takes ``units``, a mapping from the campaign's configuration labels (``"No PE|2"``,
``"first|causal|none"``, ``"window|4"``, ...) to the stored results of its runs in seed order, and
the entry's ``args``; it returns a :class:`Measure`. Comparisons of two configurations are per-seed
differences: the same seed gives the same task, initial draws and test sequences.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import torch

from .. import evaluate as ev

Units = Mapping[str, Sequence[dict]]


@dataclass(frozen=True)
class Measure:
    """``per_seed`` ``(runs,)`` float64; ``n`` the sequences behind each accuracy or attention mean;
    ``n_acc`` how many such means enter one value (the binomial bound of the shared test sets is
    ``n_acc / (4 n)``, :func:`posbias.claims.judge`)."""

    per_seed: torch.Tensor
    n: int
    n_acc: int


def _n_test(us: Sequence[dict]) -> int:
    return int(us[0]["params"]["n_test"])


def _gap(us: Sequence[dict], pair: str) -> torch.Tensor:
    return ev.stack(list(us), "gaps", pair)


def _toward(us: Sequence[dict], slot: str, over: str) -> torch.Tensor:
    """The gap between ``slot`` and ``over`` signed toward ``slot``: positive when ``slot`` wins."""
    if f"{slot}-{over}" in dict.fromkeys(f"{a}-{b}" for a, b in ev.GAP_PAIRS):
        return _gap(us, f"{slot}-{over}")
    return -_gap(us, f"{over}-{slot}")


def gap(units: Units, config: str, pair: str) -> Measure:
    """The gap ``pair`` (``"first-last"``: acc(IC_first_last) - acc(IC_last_first)) of ``config``."""
    return Measure(_gap(units[config], pair), _n_test(units[config]), 2)


def gap_difference(units: Units, minuend: str, subtrahend: str, pair: str) -> Measure:
    """The gap ``pair`` of ``minuend`` minus that of ``subtrahend``, per seed."""
    return Measure(_gap(units[minuend], pair) - _gap(units[subtrahend], pair), _n_test(units[minuend]), 4)


def gap_contrast(units: Units, config: str, larger: str, smaller: str) -> Measure:
    """Within ``config``: the gap ``larger`` minus the gap ``smaller``."""
    us = units[config]
    return Measure(_gap(us, larger) - _gap(us, smaller), _n_test(us), 4)


def depth_change(units: Units, config: str, pair: str, shallow: int, deep: int) -> Measure:
    """The gap ``pair`` of ``config`` at ``deep`` layers minus at ``shallow`` layers (labels ``config|depth``)."""
    lo, hi = units[f"{config}|{shallow}"], units[f"{config}|{deep}"]
    return Measure(_gap(hi, pair) - _gap(lo, pair), _n_test(hi), 4)


def slot_advantage(units: Units, config: str, slot: str, over: str) -> Measure:
    """The IC gap between ``slot`` and ``over`` signed toward ``slot`` (``"last"`` over ``"middle"``:
    acc(IC_last_middle) - acc(IC_middle_last))."""
    return Measure(_toward(units[config], slot, over), _n_test(units[config]), 2)


def slot_preference(units: Units, config: str, slot: str) -> Measure:
    """:func:`posbias.evaluate.slot_preference`: the mean of the two gaps involving ``slot``, toward it."""
    us = units[config]
    return Measure(ev.slot_preference(list(us), slot), _n_test(us), 4)


def preference_difference(units: Units, minuend: str, subtrahend: str, slot: str) -> Measure:
    """:func:`slot_preference` of ``minuend`` minus that of ``subtrahend``, per seed."""
    a, b = units[minuend], units[subtrahend]
    return Measure(ev.slot_preference(list(a), slot) - ev.slot_preference(list(b), slot), _n_test(a), 8)


def _sweep(us: Sequence[dict]) -> torch.Tensor:
    return ev.stack(list(us), "sweep_accuracy")                       # (seeds, N)


def u_depth(units: Units, config: str) -> Measure:
    """:func:`posbias.evaluate.u_statistic` of the position sweep: min(first, last) - mean(middle slots)."""
    us = units[config]
    return Measure(ev.u_statistic(_sweep(us)), int(us[0]["params"]["n_sweep"]), 3)


def u_depth_max(units: Units, configs: list[str]) -> Measure:
    """Per seed, the largest :func:`u_depth` over ``configs``: negative when no architecture shows a U."""
    per = torch.stack([ev.u_statistic(_sweep(units[c])) for c in configs])
    return Measure(per.max(0).values, int(units[configs[0]][0]["params"]["n_sweep"]), 3 * len(configs))


def sweep_advantage(units: Units, config: str, slot: str, over: str) -> Measure:
    """Position-sweep accuracy with the answer at ``slot`` minus at ``over`` (``first``/``last``)."""
    us = units[config]
    s = _sweep(us)
    idx = {"first": 0, "last": s.shape[1] - 1}
    return Measure(s[:, idx[slot]] - s[:, idx[over]], int(us[0]["params"]["n_sweep"]), 2)


def _excess(us: Sequence[dict]) -> tuple[torch.Tensor, int]:
    """Per seed, the layer-mean ``alpha_k`` minus uniform attention's, ``(seeds, T)``; and the
    (sequence, layer) pairs behind each value."""
    import dataclasses

    from ..model import MemberConfig

    p = us[0]["params"]
    cfg = MemberConfig(**{f.name: p[f.name] for f in dataclasses.fields(MemberConfig)})
    mask = cfg.mask_and_bias(len(us[0]["sink_alpha"][0]))[0]      # the mask the units trained with
    return ev.sink_excess(list(us), mask), int(p["n_sink"]) * int(p["depth"])


def first_key_excess(units: Units, config: str) -> Measure:
    """Key 1's attention (``alpha_1``, layer mean) minus its value under uniform attention."""
    e, n = _excess(units[config])
    return Measure(e[:, 0], n, 1)


def sink_margin(units: Units, config: str) -> Measure:
    """Key 1's excess minus the largest excess of keys ``2..T-1`` (the last key sees only itself)."""
    e, n = _excess(units[config])
    return Measure(e[:, 0] - e[:, 1:e.shape[1] - 1].max(-1).values, n, 2)


def excess_difference(units: Units, minuend: str, subtrahend: str) -> Measure:
    """Key 1's excess under ``minuend``'s mask minus under ``subtrahend``'s, per seed."""
    a, n = _excess(units[minuend])
    b, _ = _excess(units[subtrahend])
    return Measure(a[:, 0] - b[:, 0], n, 2)


def prefix_excess(units: Units, config: str, keys: list[int]) -> Measure:
    """The mean excess of keys ``keys[0]..keys[1]`` (1-based, inclusive)."""
    e, n = _excess(units[config])
    return Measure(e[:, keys[0] - 1:keys[1]].mean(-1), n, 1)


def prefix_margin(units: Units, config: str, size: int) -> Measure:
    """The prefix keys' (``1..size``) mean excess minus that of the keys after them (the last excluded)."""
    e, n = _excess(units[config])
    return Measure(e[:, :size].mean(-1) - e[:, size:e.shape[1] - 1].mean(-1), n, 2)


def prefix_excess_vs_causal(units: Units, config: str, keys: list[int]) -> Measure:
    """:func:`prefix_excess` of ``config`` minus that of the same keys under the causal mask."""
    a, b = prefix_excess(units, config, keys), prefix_excess(units, "causal", keys)
    return Measure(a.per_seed - b.per_seed, a.n, 2)


#: The quantities an entry may name.
QUANTITIES: dict[str, Callable[..., Measure]] = {f.__name__: f for f in (
    gap, gap_difference, gap_contrast, depth_change, slot_advantage, slot_preference, preference_difference,
    u_depth, u_depth_max, sweep_advantage, first_key_excess, sink_margin, excess_difference, prefix_excess,
    prefix_margin, prefix_excess_vs_causal)}
