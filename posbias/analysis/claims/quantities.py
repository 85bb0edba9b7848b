"""The quantities the claim register names: each is one number per run (seed), measured on the
stored units of one campaign, with the size of the test sample behind it.

Every function takes ``units``, a mapping from the campaign's configuration labels (``"No PE|2"``,
``"first|causal|none"``, ``"window|4"``, ...) to the stored results of its runs in seed order, and
the entry's ``args``; it returns a :class:`Measure`. Comparisons of two configurations are per-seed
differences: the same seed gives the same task, initial draws and test sequences.

Each :class:`Measure` carries the binomial bound of the contrast it computes, from that contrast's
own coefficients (``coef2``): a quantity ``sum_i c_i a_i`` of accuracies ``a_i`` on distinct test
sets of ``n`` sequences has test-set variance at most ``sum_i c_i^2 / (4 n)``. Attention quantities
(``alpha_k`` and Gu et al.'s sink rate) combine values measured on the *same* sequences, whose
correlation is unknown; their bound is ``(sum_i |c_i|)^2 / (4 n)`` over the ``n`` sequences, which
holds for any correlation.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Sequence

import torch

from posbias.measures import evaluate as ev

Units = Mapping[str, Sequence[dict]]


@dataclass(frozen=True)
class Measure:
    """``per_seed`` ``(runs,)`` float64; ``n`` the sequences behind each accuracy or attention mean;
    ``coef2`` the contrast's coefficient factor: the binomial bound of the shared test sets is
    ``coef2 / (4 n)`` (:func:`posbias.analysis.claims.judge`). ``baseline``: the same contrast under uniform
    attention, for the attention quantities (``None`` for the others)."""

    per_seed: torch.Tensor
    n: int
    coef2: float
    baseline: float | None = None


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
    """:func:`posbias.measures.evaluate.slot_preference`: the mean of the two gaps involving ``slot``, toward it."""
    us = units[config]
    return Measure(ev.slot_preference(list(us), slot), _n_test(us), 1)     # 4 accuracies at 1/2


def preference_difference(units: Units, minuend: str, subtrahend: str, slot: str) -> Measure:
    """:func:`slot_preference` of ``minuend`` minus that of ``subtrahend``, per seed."""
    a, b = units[minuend], units[subtrahend]
    return Measure(ev.slot_preference(list(a), slot) - ev.slot_preference(list(b), slot), _n_test(a), 2)


def _sweep(us: Sequence[dict]) -> torch.Tensor:
    return ev.stack(list(us), "sweep_accuracy")                       # (seeds, N)


def _u_coef2(sweep: torch.Tensor) -> float:
    """The U's coefficients: 1 on the lower end, ``1/m`` on each of the ``m`` middle slots."""
    m = sweep.shape[1] - 2
    return 1.0 + 1.0 / m


def u_depth(units: Units, config: str) -> Measure:
    """:func:`posbias.measures.evaluate.u_statistic` of the position sweep: min(first, last) - mean(middle slots)."""
    us = units[config]
    s = _sweep(us)
    return Measure(ev.u_statistic(s), int(us[0]["params"]["n_sweep"]), _u_coef2(s))


def u_depth_max(units: Units, configs: list[str]) -> Measure:
    """Per seed, the largest :func:`u_depth` over ``configs``: negative when no architecture shows a U.
    Each per-seed value is one configuration's U, so its bound is one U's (not ``len(configs)`` of them)."""
    sweeps = [_sweep(units[c]) for c in configs]
    per = torch.stack([ev.u_statistic(s) for s in sweeps])
    return Measure(per.max(0).values, int(units[configs[0]][0]["params"]["n_sweep"]), _u_coef2(sweeps[0]))


def sweep_advantage(units: Units, config: str, slot: str, over: str) -> Measure:
    """Position-sweep accuracy with the answer at ``slot`` minus at ``over`` (``first``/``last``)."""
    us = units[config]
    s = _sweep(us)
    idx = {"first": 0, "last": s.shape[1] - 1}
    return Measure(s[:, idx[slot]] - s[:, idx[over]], int(us[0]["params"]["n_sweep"]), 2)


def _mask(us: Sequence[dict]) -> torch.Tensor:
    """The boolean mask ``(T, T)`` the units trained with, read from their stored parameters."""
    import dataclasses

    from posbias.science.model import MemberConfig

    p = us[0]["params"]
    cfg = MemberConfig(**{f.name: p[f.name] for f in dataclasses.fields(MemberConfig)})
    return cfg.mask_and_bias(len(us[0]["sink_alpha"][0]))[0]


def _n_sink(us: Sequence[dict]) -> int:
    """The sequences behind every attention mean (the layers of one sequence are not independent)."""
    return int(us[0]["params"]["n_sink"])


def _excess(us: Sequence[dict]) -> tuple[torch.Tensor, int]:
    """Per seed, the layer-mean ``alpha_k`` minus uniform attention's, ``(seeds, T)``; and the
    sequences behind each value."""
    return ev.sink_excess(list(us), _mask(us)), _n_sink(us)


def first_key_excess(units: Units, config: str) -> Measure:
    """Key 1's attention (``alpha_1``, layer mean) minus its value under uniform attention."""
    e, n = _excess(units[config])
    return Measure(e[:, 0], n, 1)


def sink_margin(units: Units, config: str) -> Measure:
    """Key 1's excess minus the largest excess of keys ``2..T-1`` (the last key sees only itself)."""
    e, n = _excess(units[config])
    return Measure(e[:, 0] - e[:, 1:e.shape[1] - 1].max(-1).values, n, 4)


def excess_difference(units: Units, minuend: str, subtrahend: str) -> Measure:
    """Key 1's excess under ``minuend``'s mask minus under ``subtrahend``'s, per seed."""
    a, n = _excess(units[minuend])
    b, _ = _excess(units[subtrahend])
    return Measure(a[:, 0] - b[:, 0], n, 4)


def prefix_excess(units: Units, config: str, keys: list[int]) -> Measure:
    """The mean excess of keys ``keys[0]..keys[1]`` (1-based, inclusive)."""
    e, n = _excess(units[config])
    return Measure(e[:, keys[0] - 1:keys[1]].mean(-1), n, 1)


def prefix_margin(units: Units, config: str, size: int) -> Measure:
    """The prefix keys' (``1..size``) mean excess minus that of the keys after them (the last excluded)."""
    e, n = _excess(units[config])
    return Measure(e[:, :size].mean(-1) - e[:, size:e.shape[1] - 1].mean(-1), n, 4)


def prefix_excess_vs_causal(units: Units, config: str, keys: list[int]) -> Measure:
    """:func:`prefix_excess` of ``config`` minus that of the same keys under the causal mask."""
    a, b = prefix_excess(units, config, keys), prefix_excess(units, "causal", keys)
    return Measure(a.per_seed - b.per_seed, a.n, 4)


def _trend_weights(sizes: Sequence[float]) -> torch.Tensor:
    """Least-squares slope weights over ``sizes``, times their span: the slope in units of the whole
    range (for three equally spaced sizes, ``(-1, 0, 1)``)."""
    x = torch.as_tensor(list(sizes), dtype=torch.float64)
    d = x - x.mean()
    return d / (d * d).sum() * (x.max() - x.min())


def excess_trend(units: Units, configs: list[str], sizes: list[int]) -> Measure:
    """Per seed, the least-squares slope of key 1's excess over the mask sizes ``sizes`` (one per
    configuration), times their span (:func:`_trend_weights`)."""
    w = _trend_weights(sizes)
    ex = [_excess(units[c]) for c in configs]
    per = sum(wi * e[:, 0] for wi, (e, _) in zip(w.tolist(), ex))
    return Measure(per, ex[0][1], float(w.abs().sum()) ** 2)


# --------------------------------------------------------------------------- Gu et al.'s sink rate

def uniform_sink_rate(mask: torch.Tensor, threshold: float = 0.3) -> torch.Tensor:
    """Gu et al.'s sink rate of uniform attention under ``mask``: 1 at the keys whose uniform
    ``alpha_k`` (:func:`posbias.measures.evaluate.uniform_sink_alpha`) exceeds ``threshold``, else 0, ``(T,)``
    float64. The rate a network reaches with no preference at all (under a window of 4, key 1
    already scores 1)."""
    return (ev.uniform_sink_alpha(mask) > threshold).to(torch.float64)


def sink_baseline_rows(units: dict[str, list[dict]], threshold: float = 0.3) -> list[dict]:
    """Gu et al.'s sink rate beside uniform attention's, for each Figure 6 mask label of ``units``
    (stored runs with ``sink_share`` and ``sink_alpha``): at the sink position (key 1; the mean over
    keys ``1..K`` for a prefix of ``K``), the networks' rate (mean over runs), uniform attention's rate
    under the same mask (:func:`uniform_sink_rate`), and the networks' ``alpha`` excess over uniform
    attention there (:func:`posbias.measures.evaluate.sink_excess`, layer mean)."""
    rows = []
    for label, us in units.items():
        T = len(us[0]["sink_share"])
        mask = ev.fig6_mask(label, T)
        k = int(label.split("|")[1]) if label.startswith("prefix|") else 1
        rate = ev.stack(us, "sink_share").mean(0)
        rows.append({"mask": label.replace("|", " "), "sink keys": f"1..{k}" if k > 1 else "1",
                     "sink rate": float(rate[:k].mean()),
                     "under uniform attention": float(uniform_sink_rate(mask, threshold)[:k].mean()),
                     "excess over uniform": float(ev.sink_excess(us, mask)[:, :k].mean())})
    return rows



def _rates(us: Sequence[dict]) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Gu et al.'s sink rate per seed and key, ``(seeds, T)`` (the stored ``sink_share``: the share of
    (sequence, layer) pairs with ``alpha_k > 0.3``, the paper's epsilon); the same rate under uniform
    attention ``(T,)`` (each key 0 or 1); and the sequences behind each rate."""
    mask = _mask(us)
    return ev.stack(list(us), "sink_share"), uniform_sink_rate(mask), _n_sink(us)


def _rate_measure(per: torch.Tensor, base: torch.Tensor, n: int, coef: float) -> Measure:
    return Measure(per, n, coef ** 2, float(base))


def sink_rate(units: Units, config: str, keys: list[int]) -> Measure:
    """The mean sink rate of keys ``keys[0]..keys[1]`` (1-based, inclusive)."""
    r, u, n = _rates(units[config])
    sl = slice(keys[0] - 1, keys[1])
    return _rate_measure(r[:, sl].mean(-1), u[sl].mean(), n, 1.0)


def rate_margin(units: Units, config: str) -> Measure:
    """Key 1's sink rate minus the largest rate of keys ``2..T-1`` (the last key sees only itself)."""
    r, u, n = _rates(units[config])
    T = r.shape[1]
    return _rate_measure(r[:, 0] - r[:, 1:T - 1].max(-1).values, u[0] - u[1:T - 1].max(), n, 2.0)


def rate_trend(units: Units, configs: list[str], sizes: list[int]) -> Measure:
    """Per seed, the least-squares slope of key 1's sink rate over the mask sizes ``sizes`` (one per
    configuration), times their span; the baseline is the same slope of uniform attention's rates."""
    w = _trend_weights(sizes).tolist()
    rs = [_rates(units[c]) for c in configs]
    per = sum(wi * r[:, 0] for wi, (r, _, _) in zip(w, rs))
    base = sum(wi * u[0] for wi, (_, u, _) in zip(w, rs))
    return _rate_measure(per, base, rs[0][2], sum(abs(x) for x in w))


def prefix_rate_margin(units: Units, config: str, size: int) -> Measure:
    """The prefix keys' (``1..size``) mean sink rate minus that of the keys after them (the last excluded)."""
    r, u, n = _rates(units[config])
    T = r.shape[1]
    return _rate_measure(r[:, :size].mean(-1) - r[:, size:T - 1].mean(-1),
                         u[:size].mean() - u[size:T - 1].mean(), n, 2.0)


def prefix_rate_vs_causal(units: Units, config: str, keys: list[int]) -> Measure:
    """:func:`sink_rate` of keys ``keys`` under ``config`` minus the same keys under the causal mask."""
    a, b = sink_rate(units, config, keys), sink_rate(units, "causal", keys)
    return Measure(a.per_seed - b.per_seed, a.n, 4.0, a.baseline - b.baseline)


# --------------------------------------------------------------------------- sizes and trends of gaps

def gap_size_contrast(units: Units, config: str, larger: str, smaller: str) -> Measure:
    """Within ``config``, per seed: ``|gap larger| - |gap smaller|`` (positive when the gap ``smaller``
    is the smaller in size, whatever the signs). Bounded as the difference of the two gaps."""
    us = units[config]
    return Measure(_gap(us, larger).abs() - _gap(us, smaller).abs(), _n_test(us), 4)


def depth_trend(units: Units, config: str, pair: str, depths: list[int]) -> Measure:
    """Per seed, the least-squares slope of the gap ``pair`` of ``config`` over ``depths`` (labels
    ``config|depth``), times their span: the change over the whole range of depths that the trend
    line gives (for depths 2, 4, 6: the gap at 6 minus at 2, the middle depth weighing 0)."""
    w = _trend_weights(depths).tolist()
    per = sum(wi * _gap(units[f"{config}|{d}"], pair) for wi, d in zip(w, depths))
    return Measure(per, _n_test(units[f"{config}|{depths[0]}"]), 2 * sum(x * x for x in w))


#: The quantities an entry may name.
QUANTITIES: dict[str, Callable[..., Measure]] = {f.__name__: f for f in (
    gap, gap_difference, gap_contrast, depth_change, slot_advantage, slot_preference, preference_difference,
    u_depth, u_depth_max, sweep_advantage, first_key_excess, sink_margin, excess_difference, prefix_excess,
    prefix_margin, prefix_excess_vs_causal, excess_trend, sink_rate, rate_margin, rate_trend, prefix_rate_margin,
    prefix_rate_vs_causal, gap_size_contrast, depth_trend)}
