"""Closed forms of Wu et al. (2025), Section 4: path counts, decay profiles, critical distances.

Conventions. ``depth`` ``L`` is the NUMBER of attention layers (factors in the product
``A(L-1) ... A(0)``); the rollout tensor of :mod:`posbias.science.rollout` stores that product at index
``L - 1``. ``k = i - j >= 0`` is the distance from a token back to a position. Everything that
can overflow is computed in log space, so ``k`` and ``L`` in the thousands are fine.

Two objects must not be confused:

* the *unnormalised* (Toeplitz) path sum ``W^L`` where ``W_ij = w(i - j)`` for ``j <= i``:
  for the decay weight ``w(k) = e^{-m k}`` it is exactly ``C(k+L-1, k) e^{-m k}``;
* the *normalised* rollout ``P = (D^{-1} W)^L`` of causal attention, where row ``i`` is divided by
  ``Z_i = sum_{l <= i} w(i - l)``. Because ``Z_i`` depends on ``i`` the rows of ``D^{-1} W`` are
  not all the same profile, and ``P`` equals the path-count formula only up to the band of
  :func:`decay_band`.
"""
from __future__ import annotations

import math

import numpy as np
import torch
from scipy.optimize import brentq

from posbias.science.attention import apply_rope, decay_bias, masked_softmax, rope_angles
from posbias.science.masks import causal_mask
from posbias.science.rollout import row_powers

__all__ = [
    "log_path_count",
    "decay_profile_log",
    "decay_critical_distance",
    "decay_critical_distance_stirling",
    "decay_weights",
    "decay_band",
    "rope_scores",
    "rope_row_scores",
    "rope_path_sum_log",
    "rope_rollout_row_log",
    "rope_profile_bounds_log",
    "rope_profile_log",
    "rope_critical_distance",
    "rope_critical_distance_stirling",
    "rope_critical_slopes",
    "rope_slowest_angle",
    "half_weight_distance_decay",
    "half_weight_distance_rope",
    "decay_peaks",
    "peak_directions",
    "half_weight_rows",
]


# --------------------------------------------------------------------------- path counts
def log_path_count(k: torch.Tensor | np.ndarray | int, depth: int) -> torch.Tensor:
    """``log C(k + L - 1, k)``: the log number of monotone walks of ``L`` steps covering distance ``k``.

    A walk ``i = l_0 >= l_1 >= ... >= l_L = j`` on the causal graph is a composition of
    ``k = i - j`` into ``L`` non-negative steps; there are ``C(k+L-1, k)`` of them. ``k``: any shape,
    returns float64 of the same shape.
    """
    if depth < 1:
        raise ValueError(f"depth must be >= 1, got {depth}")
    k = torch.as_tensor(k, dtype=torch.float64)
    if bool((k < 0).any()):
        raise ValueError("distances k must be >= 0")
    return torch.lgamma(k + depth) - torch.lgamma(k + 1) - math.lgamma(depth)


# --------------------------------------------------------------------------- decay mask
def decay_profile_log(k: torch.Tensor | np.ndarray | int, depth: int, m: float) -> torch.Tensor:
    """``log g_L(k) = log C(k+L-1, k) - m k``: the multi-layer decay profile of Theorem 4.5."""
    return log_path_count(k, depth) - m * torch.as_tensor(k, dtype=torch.float64)


def decay_critical_distance(depth: int, m: float) -> int:
    """Smallest argmax of ``g_L(k) = C(k+L-1, k) e^{-m k}`` over integers ``k >= 0`` (exact).

    ``g(k+1)/g(k) = e^{-m} (k+L)/(k+1) > 1`` iff ``k < kappa = (L-1)/(e^m-1) - 1``, so ``g`` rises
    up to ``ceil(kappa)`` and falls after (a tie at ``kappa`` and ``kappa+1`` when ``kappa`` is an
    integer; the smaller is returned).
    """
    if m <= 0:
        raise ValueError("with m <= 0 the profile grows without bound: no critical distance")
    kappa = (depth - 1) / math.expm1(m) - 1.0
    return max(0, math.ceil(kappa - 1e-12))


def decay_critical_distance_stirling(depth: int, m: float) -> float:
    """Root of the Stirling derivative ``log((k+L-1)/k) = m``: ``k* = (L-1)/(e^m - 1)``.

    It is exactly ``kappa + 1`` of :func:`decay_critical_distance`, so the Stirling value is at most
    one token above the exact argmax.
    """
    if m <= 0:
        raise ValueError("with m <= 0 the profile grows without bound: no critical distance")
    return (depth - 1) / math.expm1(m)


def decay_weights(n: int, m: float) -> torch.Tensor:
    """Unnormalised causal decay weights ``W_ij = e^{-m (i-j)}`` for ``j <= i``, 0 above. Shape ``(n, n)``."""
    return torch.exp(decay_bias(n, m)) * causal_mask(n)


def decay_band(depth: int, m: float, j: torch.Tensor | int,
               logit_bound: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    """Log band for ``P(L)_ij / [(1-gamma)^L C(k+L-1,k) gamma^k]``, ``gamma = e^{-m}``, 0-based column ``j``.

    Every factor of a path from ``i`` down to ``j`` is ``e^{s} gamma^{step} / Z_row`` with the logit
    ``|s| <= B`` (``logit_bound``) and a row ``>= j``, whose normaliser lies in
    ``[e^{-B} Z_j^0, e^{B} / (1-gamma)]`` where ``Z_j^0 = (1-gamma^{j+1})/(1-gamma)``. Hence the ratio
    lies in ``[e^{-2BL}, e^{2BL} (1-gamma^{j+1})^{-L}]``. Returns ``(log_lo, log_hi)`` shaped like ``j``.
    """
    j = torch.as_tensor(j, dtype=torch.float64)
    lo = torch.full_like(j, -2.0 * logit_bound * depth)
    hi = 2.0 * logit_bound * depth - depth * torch.log(-torch.expm1(-m * (j + 1)))
    return lo, hi


# --------------------------------------------------------------------------- RoPE
def rope_scores(n: int, theta: float, beta: float, phi: float = 0.0) -> torch.Tensor:
    """Logits ``q_i . k_j`` of one RoPE pair (d = 2) rotating ``theta`` per position. Shape ``(n, n)``.

    Every token's raw query has angle ``phi`` and raw key angle 0, with ``|q| |k| = beta``; the library's
    :func:`posbias.science.attention.apply_rope` rotates them by ``i theta`` and ``j theta``. Lemma 4.6's
    form is ``beta cos(phi + (i - j) theta)``.
    """
    angles = torch.arange(n, dtype=torch.float64).unsqueeze(1) * theta  # (n, 1)
    q = torch.tensor([math.cos(phi), math.sin(phi)], dtype=torch.float64).expand(n, 2) * math.sqrt(beta)
    k = torch.tensor([1.0, 0.0], dtype=torch.float64).expand(n, 2) * math.sqrt(beta)
    return apply_rope(q, angles) @ apply_rope(k, angles).T


def rope_row_scores(n: int, theta: float, beta: float, phi: float = 0.0) -> torch.Tensor:
    """Row ``N`` of :func:`rope_scores` read by distance: ``out[k] = q_{N} . k_{N-k}``. Shape ``(n,)``.

    Only the last query is rotated, so ``n`` in the tens of thousands costs ``O(n)``.
    """
    angles = torch.arange(n, dtype=torch.float64).unsqueeze(1) * theta
    q = torch.tensor([[math.cos(phi), math.sin(phi)]], dtype=torch.float64) * math.sqrt(beta)
    k = torch.tensor([1.0, 0.0], dtype=torch.float64).expand(n, 2) * math.sqrt(beta)
    return (apply_rope(q, angles[-1:]) @ apply_rope(k, angles).T).flatten().flip(0)


def rope_path_sum_log(n: int, depth: int, theta: float, beta: float) -> torch.Tensor:
    """``log h_L(k)``, ``k = 0..n-1``: the unnormalised L-layer path sum for RoPE weights.

    ``h_L`` is the ``L``-fold convolution of ``w(k) = e^{beta cos(k theta)}`` (the Toeplitz rollout
    ``(W^L)_{i, i-k}`` for a token far from the start, before any row normalisation). Shape ``(n,)``,
    float64, every entry to float64 rounding (relative ``1e-15`` of ``log h``): the convolution is
    computed in log space (:func:`_log_convolve`), so ``h_L`` may span more than the ``e^{+-708}`` of a
    float64 across ``k``. (A convolution in floats scaled by the row's maximum loses the entries more
    than ``e^{-708}`` below it, first to subnormal rounding, then to zero: at ``n = 1571``, ``L = 255``
    ``log h_L(0)`` came out ``1e-6`` low, below the bound it meets exactly.) Needs ``e^{-2 beta}``
    to be a normal float64 (``beta`` below about 350).
    """
    k = torch.arange(n, dtype=torch.float64)
    logw = beta * torch.cos(k * theta)
    w = torch.exp(logw - beta)                       # in [e^{-2 beta}, 1]; e^{beta} added back per layer
    logv = logw.clone()
    for _ in range(depth - 1):
        logv = _log_convolve(logv, w) + beta
    return logv


def rope_rollout_row_log(n: int, depths: list[int], theta: float, beta: float) -> torch.Tensor:
    """``log P_{N, N-k}``, ``k = 0..n-1``, of the row-normalised rollout ``P = A^L`` for each ``L`` in ``depths``.

    ``A = softmax_causal(beta cos((i-j) theta))`` on ``n`` tokens: row ``i`` of the Toeplitz weights
    ``w(i-j) = e^{beta cos((i-j) theta)}`` divided by its own ``Z_i = sum_{d <= i} w(d)``. A row vector
    times ``A`` is a convolution of ``v_i / Z_i`` with ``w`` read from the last token, so the last row
    of ``A^L`` is ``L`` log-space convolutions (:func:`_log_convolve`): exact to rounding however small
    its entries, where the float64 product (``masked_softmax`` and ``row_powers``) loses every entry
    below ``1e-308``; a deep stack with a small ``beta`` puts all but that much of the mass at the start
    of the sequence. Shape ``(len(depths), n)``.
    """
    if not depths or min(depths) < 1:
        raise ValueError("depths must be a non-empty list of integers >= 1")
    k = torch.arange(n, dtype=torch.float64)
    logw = beta * torch.cos(k * theta)
    w = torch.exp(logw - beta)
    log_z = torch.logcumsumexp(logw, dim=0).flip(0)                      # [k]: log Z of the row N - k
    logv = logw - log_z[0]                                                # L = 1: the last row of A
    out = {}
    for L in range(1, max(depths) + 1):
        if L > 1:
            logv = _log_convolve(logv - log_z, w) + beta
        if L in depths:
            out[L] = logv
    return torch.stack([out[L] for L in depths])


def _log_convolve(logv: torch.Tensor, w: torch.Tensor, spread: float = 200.0, width: int = 64) -> torch.Tensor:
    """``log (v * w)[:n]`` from ``log v`` (any range, ``-inf`` allowed) and ``w`` (``(n,)``, in ``[e^{-2 beta}, 1]``).

    ``v`` is cut into blocks of at most ``width`` consecutive entries whose logs lie within ``spread`` of
    each other (a new block wherever ``log v`` crosses a multiple of ``spread``); each block is convolved
    in floats relative to its own largest entry (one matrix product for all blocks) and the blocks'
    contributions are summed in log space. Every product stays a normal float: nothing underflows,
    whatever the range of ``v``, and a single steep step (the first token's mass) costs one block more.
    """
    n = logv.shape[0]
    idx = torch.arange(n)
    level = torch.floor((logv - logv.max()).clamp(min=-1e300) / spread)
    cut = torch.ones(n, dtype=torch.bool)
    cut[1:] = level[1:] != level[:-1]
    start = torch.cummax(torch.where(cut, idx, 0), dim=0).values
    cut |= (idx - start) % width == 0                                     # at most `width` entries a block
    block = torch.cumsum(cut.long(), dim=0) - 1
    start = torch.cummax(torch.where(cut, idx, 0), dim=0).values
    b = int(block[-1]) + 1
    blocks = logv.new_full((b, width), -math.inf)
    blocks[block, idx - start] = logv
    top = blocks.amax(dim=1)
    top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))   # a block of zeros adds nothing
    lag = idx[None, :] - torch.arange(width)[:, None]                     # (width, n): r - offset
    shift = torch.where(lag >= 0, w[lag.clamp(min=0)], 0.0)                # shift[o, r] = w(r - o)
    part = top[:, None] + torch.log(torch.exp(blocks - top[:, None]) @ shift)   # (b, n): at start + r
    r = idx[None, :] - idx[cut][:, None]                                   # (b, n): k - the block's start
    out = torch.where(r >= 0, part.gather(1, r.clamp(min=0)), -math.inf)   # [block, k]: its share of k
    return torch.logsumexp(out, dim=0)


def rope_profile_bounds_log(k: torch.Tensor | np.ndarray, depth: int, theta: float,
                            beta: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Bounds on ``log h_L(k)`` valid for ``k theta <= pi/2`` (where ``cos(x theta)`` is concave).

    For a composition ``k_1 + ... + k_L = k`` concavity gives
    ``(L-1) + cos(k theta) <= sum_s cos(k_s theta) <= L cos(k theta / L)`` (extreme split vs even
    split), so ``log C + beta (L - 1 + cos k theta) <= log h_L(k) <= log C + beta L cos(k theta / L)``.
    The lower bound is the paper's profile ``C(k+L-1,k) e^{c cos(k theta)}`` with ``c = beta``.
    """
    k = torch.as_tensor(k, dtype=torch.float64)
    lc = log_path_count(k, depth)
    return lc + beta * (depth - 1 + torch.cos(k * theta)), lc + beta * depth * torch.cos(k * theta / depth)


def rope_profile_log(k: torch.Tensor | np.ndarray, depth: int, theta: float, c: float) -> torch.Tensor:
    """The paper's multi-layer RoPE profile ``log[C(k+L-1, k) e^{c cos(k theta)}]`` (Theorem 4.7)."""
    k = torch.as_tensor(k, dtype=torch.float64)
    return log_path_count(k, depth) + c * torch.cos(k * theta)


def rope_critical_distance(depth: int, theta: float, c: float, k_max: int | None = None) -> int:
    """Integer argmax of :func:`rope_profile_log` over ``0 <= k <= k_max`` (default ``floor(pi/(2 theta))``)."""
    k_max = int(math.pi / (2 * theta)) if k_max is None else k_max
    k = torch.arange(k_max + 1)
    return int(torch.argmax(rope_profile_log(k, depth, theta, c)))


def _rope_F(k: float, depth: int, theta: float, c: float) -> float:
    return math.log((k + depth - 1) / k) - c * theta * math.sin(k * theta)


def rope_critical_distance_stirling(depth: int, theta: float, c: float) -> float:
    """Root in ``(0, pi/(2 theta)]`` of ``F(k) = log((k+L-1)/k) - c theta sin(k theta)`` (Appendix H).

    ``F`` is the Stirling derivative of the log profile; it decreases on ``(0, pi/(2 theta))``. If it
    is still positive at ``pi/(2 theta)`` the path count wins on the whole concave range and
    ``pi/(2 theta)`` is returned (saturated).
    """
    if depth < 2:
        return 0.0
    hi = math.pi / (2 * theta)
    if _rope_F(hi, depth, theta, c) >= 0:
        return hi
    return brentq(_rope_F, 1e-12, hi, args=(depth, theta, c), xtol=1e-10)


def rope_critical_slopes(k: float, depth: int, theta: float, c: float) -> tuple[float, float]:
    """Implicit differentiation of ``F(k, L, theta) = 0``: returns ``(dk/dL, dk/dtheta)``.

    ``F_k = 1/(k+L-1) - 1/k - c theta^2 cos(k theta) < 0``, ``F_L = 1/(k+L-1) > 0`` and
    ``F_theta = -c (sin(k theta) + k theta cos(k theta)) < 0`` for ``k theta < pi/2``, so
    ``dk/dL = -F_L/F_k > 0`` and ``dk/dtheta = -F_theta/F_k < 0``.
    """
    f_k = 1 / (k + depth - 1) - 1 / k - c * theta**2 * math.cos(k * theta)
    f_l = 1 / (k + depth - 1)
    f_t = -c * (math.sin(k * theta) + k * theta * math.cos(k * theta))
    return -f_l / f_k, -f_t / f_k


def rope_slowest_angle(d: int, base: float = 10000.0) -> float:
    """Angle per position of the slowest RoPE pair, ``base^{-(d-2)/d}`` (pair ``p = d/2 - 1``)."""
    return base ** (-(d - 2) / d)


def half_weight_distance_decay(m: float) -> float:
    """Distance at which one decay-mask layer halves the weight: ``e^{-m k} = 1/2``, ``k = ln 2 / m``."""
    return math.log(2) / m


def half_weight_distance_rope(theta: float, beta: float) -> float:
    """Distance at which one aligned RoPE pair halves the weight: ``e^{beta (cos(k theta) - 1)} = 1/2``.

    ``k = arccos(1 - ln 2 / beta) / theta``; ``inf`` when ``beta < ln 2 / 2`` (never halves).
    """
    x = 1 - math.log(2) / beta
    if x < -1:
        return math.inf
    return math.acos(x) / theta


def decay_peaks(n: int, m_grid: list[float], depth_grid: list[int]) -> tuple[list[dict], list[tuple]]:
    """Where the last row of ``A^L`` peaks, for the decay-mask layer ``A = softmax_causal(-m (i-j))``.

    For each ``m`` in ``m_grid`` and ``L`` in ``depth_grid`` the last token's row of ``A^L`` (length ``n``,
    by :func:`posbias.science.rollout.row_powers`) is read at distance ``k = N - j``. Points whose predicted peak
    plus ten spreads (the negative binomial's ``sqrt(L e^{-m})/(1-e^{-m})``, and ``10/m``) would reach the
    first token are skipped. Returns ``(rows, skipped)``: ``rows`` has ``m, L``, the measured peak
    ``k_hat``, :func:`decay_critical_distance` ``k_exact``, the Stirling value ``k_stirling``,
    ``admissible``: whether ``k_hat`` is within the finite-row band of the path-count profile's maximum,
    and ``k_lo``, ``k_hi``: the smallest and largest distance the band admits as the peak (``k_exact``
    among them); ``skipped`` lists the ``(m, L)`` left out.
    """
    rows, skipped = [], []
    k = torch.arange(n)
    for m in m_grid:
        a = masked_softmax(decay_bias(n, m), causal_mask(n))
        last = row_powers(a, n - 1, depth_grid).flip(-1)                  # [., k] = P_{N, N-k}
        del a
        g = math.exp(-m)
        for L, r in zip(depth_grid, last):
            spread = math.sqrt(L * g) / (1 - g)
            kst = decay_critical_distance_stirling(L, m)
            if kst + 10 * spread + 10 / m >= n:
                skipped.append((m, L))
                continue
            logg = decay_profile_log(k, L, m)
            width = -L * torch.log(-torch.expm1(-m * (n - k).double()))
            k_hat = int(torch.argmax(r))
            ok = torch.nonzero(logg + width >= logg.max() - 1e-9).flatten()
            rows.append(dict(m=m, L=L, k_hat=k_hat, k_exact=decay_critical_distance(L, m), k_stirling=kst,
                             admissible=bool(logg[k_hat] + width[k_hat] >= logg.max() - 1e-9),
                             k_lo=int(ok.min()), k_hi=int(ok.max())))
    return rows, skipped


#: keys rotated at a time by :func:`half_weight_rows` (its rows reach ``pi / theta_slow``: 3 million
#: positions at base 10^6 and d = 512, 6 GB for each tensor of angles at once)
_CHUNK = 8192


def peak_directions(peaks: dict[tuple[float, int], int], lo: dict[tuple[float, int], int],
                    hi: dict[tuple[float, int], int], cap: dict[float, int] | None = None,
                    name: str = "x") -> dict:
    """Do measured peaks move as Theorems 4.5 and 4.7 say: back (larger ``k``) with depth, forward with ``x``?

    ``peaks[(x, L)]``: the measured peak distance at rate or angle ``x`` (``m`` or ``theta``) and depth ``L``;
    a point not measured is absent. ``lo``, ``hi``: for each point, an interval the peak must lie in
    (the band's admissible peaks, or the bracket of Theorem 4.7's chapter). ``cap[x]``: the largest
    distance measured at ``x``, where a peak cannot move further (none: no cap). ``name`` names ``x`` in
    the keys. Returns

    - ``non-decreasing in L``: at every ``x``, over its measured depths in increasing order;
    - ``non-increasing in <name>``: at every ``L``, over its measured ``x`` in increasing order;
    - ``moves where forced``: at every ``x`` whose shallowest measured depth's interval lies wholly below
      its deepest's (``hi < lo``: the peak cannot stay put) and whose shallowest peak is below the cap,
      the deepest peak is further back than the shallowest;
    - ``forced``: how many ``x`` that is. A grid of one depth, or whose intervals overlap, forces none:
      a peak that stays put there contradicts nothing.
    """
    xs = sorted({x for x, _ in peaks})
    depths = sorted({L for _, L in peaks})
    by_x = {x: [peaks[(x, L)] for L in depths if (x, L) in peaks] for x in xs}
    by_l = {L: [peaks[(x, L)] for x in xs if (x, L) in peaks] for L in depths}
    forced, moved = 0, True
    for x in xs:
        measured = [L for L in depths if (x, L) in peaks]
        first, last = (x, measured[0]), (x, measured[-1])
        if hi[first] < lo[last] and (cap is None or peaks[first] < cap[x]):
            forced += 1
            moved &= peaks[last] > peaks[first]
    return {"non-decreasing in L": all(a <= b for v in by_x.values() for a, b in zip(v, v[1:])),
            f"non-increasing in {name}": all(a >= b for v in by_l.values() for a, b in zip(v, v[1:])),
            "moves where forced": moved, "forced": forced}


def half_weight_rows(m: float, theta_slow: float, beta: float, d: int, base: float = 10000.0) -> dict:
    """One layer's weight against distance, relative to distance 0, for three position encodings.

    ``m``: the decay mask's rate (``gamma = e^{-m}``); ``theta_slow``: the slowest RoPE pair's angle per
    position (:func:`rope_slowest_angle`); ``beta``: the logit scale; ``d``, ``base``: the RoPE width and
    base. The rows run over ``k = 0 .. n_far - 1`` with ``n_far`` twice the slowest pair's predicted
    half-weight distance (at most ``pi/theta_slow``) plus 2. Returns ``n_far``; ``w_decay``, ``w_rope``
    (the slowest pair alone) and ``w_all`` (all ``d/2`` pairs, aligned query and key with equal norm per
    pair, the same total logit scale ``beta``), each ``(n_far,)``; and ``half_decay``, ``half_rope``,
    ``half_all``: the first ``k`` whose weight is at most one half (``half_all`` is ``-1`` if none).
    A ``beta`` at most ``ln 2 / 2``, where even the slowest pair never halves, is refused.
    """
    pred = half_weight_distance_rope(theta_slow, beta)
    if not math.isfinite(pred):
        raise ValueError(f"beta = {beta:g} is at most ln 2 / 2 = 0.3466: the slowest pair's weight never halves "
                         "(it stays above e^(-2 beta) > 1/2); raise beta above 0.3466")
    n_far = int(min(2 * pred, math.pi / theta_slow)) + 2
    n_far = max(n_far, math.ceil(half_weight_distance_decay(m)) + 2)     # the decay row must reach its half too
    w_decay = torch.exp(-m * torch.arange(n_far, dtype=torch.float64))
    s_rope = rope_row_scores(n_far, theta_slow, beta)
    w_rope = torch.exp(s_rope - s_rope[0])
    theta_p = rope_angles(2, d, base)[1]                                 # each pair's angle per position
    u = torch.full((1, d), math.sqrt(beta / d), dtype=torch.float64)
    q = apply_rope(u, torch.tensor([[n_far - 1.0]], dtype=torch.float64) * theta_p)   # the query, last
    s_all = torch.empty(n_far, dtype=torch.float64)     # keys in chunks: memory O(_CHUNK d), not O(n_far d)
    for a in range(0, n_far, _CHUNK):                  # (written in place: a list of small chunk results
        pos = torch.arange(a, min(n_far, a + _CHUNK), dtype=torch.float64)[:, None]   # fragments the heap)
        s_all[a:a + len(pos)] = apply_rope(u.expand(len(pos), d), pos * theta_p) @ q[0]
    s_all = s_all.flip(0)                                                               # query last
    w_all = torch.exp(s_all - s_all[0])
    half_all = int(torch.nonzero(w_all <= 0.5)[0]) if bool((w_all <= 0.5).any()) else -1
    return {"n_far": n_far, "w_decay": w_decay, "w_rope": w_rope, "w_all": w_all,
            "half_decay": int(torch.nonzero(w_decay <= 0.5)[0]),
            "half_rope": int(torch.nonzero(w_rope <= 0.5)[0]), "half_all": half_all}
