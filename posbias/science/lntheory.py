"""Closed forms for the parameter-free LayerNorm stack of Kim et al. (simulated in :mod:`posbias.science.lnsim`).

Write ``G`` for the large-``d`` Gram matrix of the layer-1 values divided by ``d`` and ``W`` for the
layer-1 attention rows. Then the layer-1 output is ``y = W h`` and, with LayerNorm, the layer-2 score is
``sqrt(d) cos(y_i, y_j)`` with ``y_i . y_j / d = (W G W^T)_ij``; without LayerNorm it is
``(W G W^T)_ij / sqrt(d)``. Inputs are ``x_i = (z_i + l u) / sqrt(d)``, anisotropy ``alpha = l^2 / (1 + l^2)``.
Every name here is also importable from :mod:`posbias.science.lnsim`.
"""
from __future__ import annotations

import math
from typing import Protocol

import numpy as np
import torch

from posbias.science.attention import decay_bias, masked_softmax, rope_angles
from posbias.science.masks import causal_mask

__all__ = [
    "ScoreMoments",
    "anisotropy_level",
    "alpha_to_l",
    "layer1_offdiag_moments",
    "layer1_moments_check",
    "layer1_var_second_order",
    "NOLN_MEAN_FIELD_MIN_D",
    "layer1_log_weights",
    "layer2_scores",
    "uniform_sketch",
    "slope_contrast",
    "row_slope",
    "layer2_slope",
    "alpha0_slope_factor",
    "expansion_parameter",
    "next_order_tol",
    "TOL_CALIBRATION",
    "row_fluctuation",
    "closed_form_outside",
    "calibration_fix",
    "slope_resolvable",
    "noln_mean_field",
    "noln_score_variance",
    "compare_increments",
    "rope_layer1_scores",
    "mean_field_excess",
]


class ScoreMoments(Protocol):
    """What the comparisons here read of a simulation (:class:`posbias.science.lnsim.SimResult` is one): the score
    moments over simulations, ``(T, n, n)``, the within-row slopes ``(T,)`` and the number of simulations."""

    score_mean: np.ndarray
    score_var: np.ndarray
    slope_mean: np.ndarray
    sims: int

    @property
    def score_se(self) -> np.ndarray: ...

    @property
    def slope_se(self) -> np.ndarray: ...


def anisotropy_level(ell: float) -> float:
    """``alpha = l^2 / (1 + l^2)``: the limiting cosine of two inputs sharing ``l u`` (``l`` is ``ell``)."""
    return ell * ell / (1.0 + ell * ell)


def alpha_to_l(alpha: float) -> float:
    """Inverse of :func:`anisotropy_level`: ``l = sqrt(alpha / (1 - alpha))`` for ``0 <= alpha < 1``."""
    if not 0.0 <= alpha < 1.0:
        raise ValueError(f"anisotropy alpha must be in [0, 1), got {alpha}")
    return math.sqrt(alpha / (1.0 - alpha))


def layer1_offdiag_moments(d: int, alpha: float) -> tuple[float, float]:
    """Mean and variance of a layer-1 off-diagonal LN score ``sqrt(d) r`` to order ``1/d``.

    After LayerNorm the cosine ``r`` of two inputs is exactly the Pearson correlation of ``d`` i.i.d.
    bivariate normal pairs with correlation ``alpha``, so (Fisher) ``E r = alpha (1 - (1-alpha^2)/(2d))``
    and ``Var r = (1 - alpha^2)^2 / d``.
    """
    mean = math.sqrt(d) * alpha * (1.0 - (1.0 - alpha**2) / (2 * d))
    var = (1.0 - alpha**2) ** 2
    return mean, var


def layer1_log_weights(n: int, d: int, alpha: float, *, layernorm: bool = True, finite_d: bool = True) -> torch.Tensor:
    """Log of the unnormalised layer-1 attention weights ``(n, n)`` (``-inf`` above the diagonal).

    With LayerNorm the diagonal is ``sqrt(d)`` and an off-diagonal weight is ``E exp(score)``:
    ``exp(mean + var/2)`` with ``finite_d=True`` (the score is nearly normal, so this is the log-normal
    mean; :func:`layer1_offdiag_moments`), or the paper's
    ``exp(alpha sqrt(d))`` with ``finite_d=False``, which gives its ``D_j = e^{sqrt d} + (j-1) e^{alpha sqrt d}``.
    Without LayerNorm the scores are ``E x_i . x_j / sqrt(d)``: ``(1 + l^2) / sqrt(d)`` and ``l^2 / sqrt(d)``.
    """
    if layernorm:
        diag = math.sqrt(d)
        if finite_d:
            m, v = layer1_offdiag_moments(d, alpha)
            off = m + v / 2
        else:
            off = alpha * math.sqrt(d)
    else:
        l2 = alpha_to_l(alpha) ** 2
        diag, off = (1.0 + l2) / math.sqrt(d), l2 / math.sqrt(d)
    lw = torch.full((n, n), off, dtype=torch.float64)
    lw.fill_diagonal_(diag)
    return lw.masked_fill(~causal_mask(n), float("-inf"))


def layer2_scores(
    n: int,
    d: int,
    alpha: float = 0.0,
    *,
    layernorm: bool = True,
    residual: bool = False,
    finite_d: bool = True,
    log_weights: torch.Tensor | None = None,
) -> torch.Tensor:
    """Predicted mean layer-2 score matrix ``(n, n)`` (NaN above the diagonal).

    Layer 1 averages its values with rows ``W = softmax(log_weights)`` (default
    :func:`layer1_log_weights`); the residual adds the un-normalised input, which is ``sigma h_i``
    plus a constant with ``sigma = 1/sqrt(d (1 - alpha))`` under LayerNorm and ``h_i`` itself without.
    ``G`` is ``r + (1 - r) I`` (LN values divided by ``d``; ``r = alpha``, or its finite-``d`` mean
    ``E r`` with ``finite_d=True``) or ``l^2 + I`` (raw inputs). Then
    ``C = W G W^T`` and the score is ``sqrt(d) C_ij / sqrt(C_ii C_jj)`` with LN, ``C_ij / sqrt(d)`` without.
    """
    lw = layer1_log_weights(n, d, alpha, layernorm=layernorm, finite_d=finite_d) if log_weights is None else log_weights
    w = torch.softmax(lw, dim=-1)
    eye = torch.eye(n, dtype=torch.float64)
    if layernorm:
        r = layer1_offdiag_moments(d, alpha)[0] / math.sqrt(d) if finite_d else alpha
        gram = r + (1.0 - r) * eye
        sigma = 1.0 / math.sqrt(d * (1.0 - alpha))
    else:
        gram = alpha_to_l(alpha) ** 2 + eye
        sigma = 1.0
    if residual:
        w = w + sigma * eye
    c = w @ gram @ w.T
    if layernorm:
        dg = torch.sqrt(torch.diagonal(c))
        s = math.sqrt(d) * c / (dg[:, None] * dg[None, :])
    else:
        s = c / math.sqrt(d)
    return s.masked_fill(~causal_mask(n), float("nan"))


def uniform_sketch(n: int) -> torch.Tensor:
    """``LN(x1_i) . LN(x1_j) / d = sqrt(j / i)`` (1-based, ``j <= i``) if layer 1 averaged uniformly. ``(n, n)``."""
    pos = torch.arange(1, n + 1, dtype=torch.float64)
    s = torch.sqrt(torch.minimum(pos[:, None], pos[None, :]) / pos[:, None])
    return s.masked_fill(~causal_mask(n), float("nan"))


def slope_contrast(n: int) -> torch.Tensor:
    """Coefficients ``c`` ``(n, n)`` with ``row_slope(S) = sum(c * S)`` (zero on and above the diagonal)."""
    c = torch.zeros(n, n, dtype=torch.float64)
    for i in range(2, n):
        x = torch.arange(i, dtype=torch.float64)
        c[i, :i] = x - x.mean()
    return c / (c * c).sum()


def row_slope(scores: torch.Tensor | np.ndarray) -> torch.Tensor:
    """Pooled least-squares slope of score against key position ``j`` within rows, over ``j < i``.

    Rows ``i >= 2`` (0-based) contribute their strictly-below-diagonal entries, centred on the row
    mean, so row offsets do not count: a positive slope is recency, a negative one an early-token
    preference. ``(..., n, n) -> (...)``; linear in the scores, so the slope of a mean map is the
    mean of the slopes.
    """
    s = torch.nan_to_num(torch.as_tensor(scores, dtype=torch.float64))
    return (s * slope_contrast(s.shape[-1])).sum((-1, -2))


def layer2_slope(n: int, d: int, alpha: float = 0.0, **kw) -> float:
    """Within-row slope (:func:`row_slope`) of the predicted layer-2 map :func:`layer2_scores`."""
    return float(row_slope(layer2_scores(n, d, alpha, **kw)))


def alpha0_slope_factor(d: int) -> float:
    """Leading finite-``d`` correction ``1 - 1/sqrt(d) - 2/d`` of the layer-2 slope at ``alpha = 0`` (no residual).

    At ``alpha = 0`` the recency slope is second order in the off-diagonal weight; the terms the
    mean-weight formula drops (a weight correlates with the score it came from, ``E xi e^xi = e^{1/2}``,
    and with the norm it enters, ``E xi^2 e^xi = 2 e^{1/2}``) shrink it by ``1/sqrt(d) + 2/d``.
    """
    return 1.0 - 1.0 / math.sqrt(d) - 2.0 / d


def expansion_parameter(n: int, d: int, alpha: float) -> float:
    """``(n - 1) eps`` with ``eps = E e^{score_ik} / e^{sqrt d}``: the total off-diagonal weight of a
    layer-1 row relative to its diagonal, the small parameter of the closed forms."""
    m, v = layer1_offdiag_moments(d, alpha)
    return (n - 1) * math.exp(m + v / 2 - math.sqrt(d))


def noln_score_variance(d: int, alpha: float) -> float:
    """``(1 + l^2) / d^2``: the variance over keys of a layer-1 score without LayerNorm, ``x_i . x_j / sqrt(d)``
    with ``x = (z + l u) / sqrt(d)`` (``(z_i + l u) . z_j`` varies with the key ``j``). The mean field puts
    ``e^{E s}`` for ``E e^s``, a relative error of this order; its checks, which allow ``1/d``, are decided
    where it is at most ``1/d``, i.e. ``d >= 1 + l^2 = 1 / (1 - alpha)``."""
    return (1.0 + alpha_to_l(alpha) ** 2) / d**2


def noln_mean_field(n: int, d: int, alpha: float = 0.0, depth: int = 4, *, residual: bool = False,
                    decay: float | None = None) -> torch.Tensor:
    """Deterministic layer-by-layer scores of the stack without LayerNorm, ``(T, n, n)`` (NaN above the diagonal).

    Without LayerNorm the scores are ``O(1/sqrt d)``, so a softmax weight barely depends on its score's
    ``O(1/d)`` fluctuation and the Gram matrix ``C = E x x^T`` can be propagated as if deterministic:
    ``C^1 = l^2 + I``, scores ``C^t / sqrt(d)``, ``W^t = softmax_causal(scores)``, and
    ``C^{t+1} = (W^t + r I) C^t (W^t + r I)^T`` with ``r = 1`` for the residual, else 0.
    Layer 2 of this recursion is :func:`layer2_scores` with ``layernorm=False``. ``decay`` adds the
    deterministic bias ``-m (i - j)`` to every layer's scores.
    """
    mask = causal_mask(n)
    c = alpha_to_l(alpha) ** 2 + torch.eye(n, dtype=torch.float64)
    bias = decay_bias(n, decay) if decay else torch.zeros(n, n, dtype=torch.float64)
    out = torch.empty(depth, n, n, dtype=torch.float64)
    for t in range(depth):
        s = c / math.sqrt(d) + bias
        out[t] = s.masked_fill(~mask, float("nan"))
        w = masked_softmax(s, mask)
        if residual:
            w = w + torch.eye(n, dtype=torch.float64)
        c = w @ c @ w.T
    return out


def compare_increments(res: ScoreMoments, d: int, alpha: float, *, residual: bool = False, factor: float = 1.0,
                       n_se: float = 3.0, tol: float | None = None) -> dict:
    """Layer-2 increments ``s[i, i-1] - s[i, 0]`` (rows ``i >= 2``, 0-based) measured against the closed form.

    The closed form is :func:`layer2_scores` times ``factor``; the tolerance is ``tol`` relative (default
    :func:`next_order_tol`, ``1.5/sqrt(d)``: the closed form keeps the leading order in ``1/sqrt(d)``), plus
    ``n_se`` standard errors (the SE of a difference bounded by the sum of the two SEs). The pooled
    within-row slope (:func:`row_slope`, with its own, much smaller, SE) is compared with the same
    relative tolerance. Returns arrays ``mc``,
    ``pred``, ``paper``, ``se`` ``(n-2,)``, the slopes ``slope_mc``, ``slope_se``, ``slope_pred``,
    ``slope_paper``, ``tol``, and ``excess``: the largest ``|measured - predicted| - allowed`` over the
    increments and the slope (<= 0 passes).
    """
    n = res.score_mean.shape[-1]

    def inc(s: np.ndarray) -> np.ndarray:
        return np.array([s[i, i - 1] - s[i, 0] for i in range(2, n)])

    pred = factor * inc(layer2_scores(n, d, alpha, residual=residual).numpy())
    paper = inc(layer2_scores(n, d, alpha, residual=residual, finite_d=False).numpy())
    mc = inc(res.score_mean[1])
    se = np.array([res.score_se[1][i, i - 1] + res.score_se[1][i, 0] for i in range(2, n)])
    if tol is None:
        tol = next_order_tol(d)
    excess = float((np.abs(mc - pred) - (tol * np.abs(pred) + n_se * se)).max())
    slope_mc, slope_se = float(res.slope_mean[1]), float(res.slope_se[1])
    slope_pred = factor * layer2_slope(n, d, alpha, residual=residual)
    slope_paper = layer2_slope(n, d, alpha, residual=residual, finite_d=False)
    slope_excess = abs(slope_mc - slope_pred) - (tol * abs(slope_pred) + n_se * slope_se)
    return dict(mc=mc, pred=pred, paper=paper, se=se, tol=tol, excess=max(excess, slope_excess),
                slope_mc=slope_mc, slope_se=slope_se, slope_pred=slope_pred, slope_paper=slope_paper)


def rope_layer1_scores(n: int, d: int, alpha: float, base: float = 10000.0) -> torch.Tensor:
    """Mean layer-1 LN scores with RoPE on queries and keys, ``(n, n)`` (NaN above the diagonal), large ``d``.

    ``h_i = sqrt(1-alpha) z_i + sqrt(alpha) u`` (norm ``sqrt d``); only the shared part survives the mean of
    ``h_i . R_{(i-j) theta} h_j``, and a rotation by angle ``phi`` of a random pair keeps ``cos(phi)`` of its
    squared length, so ``E s_ij = alpha sqrt(d) mean_p cos((i - j) theta_p)`` off the diagonal, ``sqrt(d)`` on it.
    """
    ang = rope_angles(n, d, base)  # (n, d/2): pos * theta_p
    rel = torch.cos(ang[:, None, :] - ang[None, :, :]).mean(-1)  # (n, n)
    s = alpha * math.sqrt(d) * rel
    s.fill_diagonal_(math.sqrt(d))
    return s.masked_fill(~causal_mask(n), float("nan"))


#: The smallest width at which the mean field without LayerNorm is checked against |mean field|/d: it
#: neglects terms of order 1/d, which exceed that allowance at d = 4, 6 and 8 (kim-prop-1's widths and
#: kim-fig-1's row 1); 16 is the smallest width of the committed simulations.
NOLN_MEAN_FIELD_MIN_D = 16


def mean_field_excess(res: ScoreMoments, d: int, *, alpha: float = 0.0, rel_tol: float | None = None,
                      n_se: float = 4.5) -> tuple[float, float]:
    """How far a simulated stack without LayerNorm lies from :func:`noln_mean_field`.

    ``res``: a :func:`simulate` result with ``layernorm=False`` (``score_mean``, ``score_se`` of shape
    ``(T, n, n)``). Over every layer and every ``i >= j`` returns ``(excess, rel_err2)``: ``excess``, the
    largest ``|MC - mean field| - (rel_tol |mean field| + n_se SE)`` (``<= 0`` passes; ``rel_tol``
    defaults to ``1/d``), and ``rel_err2``, the largest relative error ``|MC - mean field| / |mean field|``
    at layer 2.
    """
    depth, n = res.score_mean.shape[0], res.score_mean.shape[-1]
    rel_tol = 1.0 / d if rel_tol is None else rel_tol
    low = np.tril(np.ones((n, n), dtype=bool))
    mf = noln_mean_field(n, d, alpha, depth).numpy()
    err = np.abs(res.score_mean - mf)                                      # (T, n, n)
    allowed = rel_tol * np.abs(mf) + n_se * res.score_se
    return float((err - allowed)[:, low].max()), float((err[1] / np.abs(mf[1]))[low].max())


def next_order_tol(d: int) -> float:
    """Relative tolerance ``1.5/sqrt(d)`` of the layer-2 closed forms against Monte Carlo.

    :func:`layer2_scores` keeps the leading order in ``1/sqrt(d)``; the neglected term is ``c/sqrt(d)``
    relative. Over every committed simulation (``alpha`` 0.2-0.8, ``d`` 16-144, with and without the
    residual) the measured ``|MC - closed form| - 3 SE`` stays below ``1.32/sqrt(d)`` of the closed form,
    so ``c = 1.5``. At ``d = 16`` it is 0.375: a closed form of zero or of the opposite sign fails."""
    return 1.5 / math.sqrt(d)


#: Where :func:`next_order_tol` was measured: every committed depth-2 LayerNorm simulation behind it has
#: S = 10 tokens, alpha 0.2-0.8 and d 16-256 (with and without the residual).
TOL_CALIBRATION = {"n": 10, "alphas": (0.2, 0.4, 0.5, 0.6, 0.8), "widths": (16, 36, 64, 144, 256)}


def row_fluctuation(n: int, d: int, alpha: float) -> float:
    """``v (n - 1) eps``: how much of a layer-1 row the closed forms replace by its mean.

    A row is its diagonal weight (fixed, ``e^{sqrt d}``) plus ``n - 1`` random ones whose total, relative to
    the diagonal, is :func:`expansion_parameter`; each has log-variance ``v = (1 - alpha^2)^2``. The closed
    forms put mean weights for random ones, so what they neglect grows with this product: with ``n`` and
    ``v`` (at fixed ``d`` the Monte Carlo slope falls further below the closed form as ``S`` grows), and
    falls with ``d``."""
    return layer1_offdiag_moments(d, alpha)[1] * expansion_parameter(n, d, alpha)


def closed_form_outside(n: int, d: int, alpha: float) -> str:
    """Why :func:`next_order_tol` does not bound the layer-2 closed form at ``(n, d, alpha)``; ``""`` where it does.

    The tolerance is a measured constant, so it is trusted where it was measured (:data:`TOL_CALIBRATION`):
    ``d`` from the smallest calibrated width, ``alpha`` within the calibrated range, and the part of a row
    replaced by its mean, :func:`row_fluctuation`, no larger than anywhere in the calibration. Below it the
    neglected order is known to reach the tolerance: at ``alpha -> 0`` it is kim-thm-1's ``1/sqrt(d) + 2/d``,
    equal to ``1.5/sqrt(d)`` at ``d = 16`` and above it below."""
    cal = TOL_CALIBRATION
    lo, hi = min(cal["alphas"]), max(cal["alphas"])
    bound = max(row_fluctuation(cal["n"], w, a) for a in cal["alphas"] for w in cal["widths"])
    if d < min(cal["widths"]):
        return f"d = {d} is below {min(cal['widths'])}, the smallest width the tolerance was measured on"
    if not lo <= alpha <= hi:
        return f"alpha = {alpha:.3g} is outside [{lo}, {hi}], the range the tolerance was measured on"
    fl = row_fluctuation(n, d, alpha)
    if fl > bound:
        return (f"v (S - 1) eps = {fl:.2f} at S = {n} exceeds {bound:.2f}, the most of a row the closed form "
                "replaced by its mean where the tolerance was measured")
    return ""


def calibration_fix() -> str:
    """What brings a setting where :func:`next_order_tol` was measured, for a check's skip message."""
    cal = TOL_CALIBRATION
    return (f"use an alpha in [{min(cal['alphas'])}, {max(cal['alphas'])}], a width of at least "
            f"{min(cal['widths'])}, or fewer tokens")


def resolvable(pred: float, se: float, tol: float, n_se: float = 5.0) -> bool:
    """Whether a closed form ``pred`` with relative tolerance ``tol`` says the quantity clears ``n_se``
    standard errors ``se`` even at the low edge of its tolerance: ``|pred| (1 - tol) >= n_se se``. A check
    that demands ``z >= 3`` there has two SE of margin. The size, not the sign: the theorems claim
    recency, so a closed form that predicts a large negative slope contradicts them and must reach the
    direction checks, not excuse them."""
    return abs(pred) * (1.0 - tol) >= n_se * se


def slope_resolvable(pred: float, se: float, n: int, d: int, alpha: float, n_se: float = 5.0) -> bool:
    """:func:`resolvable` for a layer-2 slope against :func:`layer2_scores` at the tolerance
    :func:`next_order_tol`, where that tolerance holds (:func:`closed_form_outside`)."""
    return not closed_form_outside(n, d, alpha) and resolvable(pred, se, next_order_tol(d), n_se)


def layer1_var_second_order(d: int, alpha: float) -> float:
    """Hotelling's variance of ``sqrt(d) r`` (``r`` the sample correlation of ``d`` pairs with correlation
    ``alpha``) to second order in ``1/d``: ``(1 - alpha^2)^2 (1 + a1/d + a2/d^2)``, ``a1 = 1 + 11 alpha^2/2``,
    ``a2 = 1 + 11 alpha^2 + (479 alpha^4 - 192 alpha^2)/8``; the next term is below
    ``10 / ((1 - alpha^2)^2 d^3)`` relative (see :func:`layer1_moments_check`)."""
    v = layer1_offdiag_moments(d, alpha)[1]
    a1 = 1 + 5.5 * alpha**2
    a2 = 1 + 11 * alpha**2 + (479 * alpha**4 - 192 * alpha**2) / 8
    return v * (1 + a1 / d + a2 / d**2)


def layer1_moments_check(res, d: int, alpha: float, n_se: float = 4.5) -> dict:
    """Measured layer-1 off-diagonal LN scores against :func:`layer1_offdiag_moments`, pooled over the entries.

    ``res``: a :func:`posbias.science.lnsim.simulate` result with LayerNorm (``score_mean``, ``score_se``,
    ``score_var`` of shape ``(T, n, n)``, ``sims``). Tokens are exchangeable, so every off-diagonal layer-1
    score has the same distribution and the same prediction: the check compares the mean over the
    ``n (n - 1) / 2`` entries of each measured moment (a maximum over entries would be a maximum over
    correlated, right-skewed sample variances, whose false alarms grow with ``n``). The SE of a mean of
    correlated estimates is at most the mean of their SEs. The mean is compared with ``n_se`` SE plus
    ``d^{-3/2}`` (the Fisher expansion's next term, ``sqrt(d) O(1/d^2)``); the variance with Hotelling's
    expansion of the sample correlation's variance written out to second order,
    ``v (1 + a1/d + a2/d^2)``, ``a1 = 1 + 11 alpha^2/2``, ``a2 = 1 + 11 alpha^2 + (479 alpha^4 - 192 alpha^2)/8``,
    allowing the larger of ``30/d^2`` relative (the earlier rule's allowance, which also absorbs the
    sample variance's excess kurtosis at large alpha, not in the SE below) and the term after them,
    ``10 / ((1 - alpha^2)^2 d^3)`` (measured: its coefficient times ``(1 - alpha^2)^2`` stays below 5 for
    alpha 0-0.95 and d 4-16; the series is one in ``1/(d (1 - alpha^2))``), plus ``n_se`` SE of a sample
    variance, ``v sqrt(2/sims)``. Returns
    ``mean_excess``, ``var_excess`` (``|measured - predicted| - allowed``; ``<= 0`` passes)
    and the predictions.
    """
    n = res.score_mean.shape[-1]
    low = np.tril(np.ones((n, n), dtype=bool), -1)
    m, v = layer1_offdiag_moments(d, alpha)
    mc_m, se_m, mc_v = res.score_mean[0][low].mean(), res.score_se[0][low].mean(), res.score_var[0][low].mean()
    mean_excess = float(abs(mc_m - m) - (n_se * se_m + d**-1.5))
    v2 = layer1_var_second_order(d, alpha)
    rest = max(30 / d**2, 10 / ((1 - alpha**2) ** 2 * d**3))
    var_excess = float(abs(mc_v - v2) - v * (rest + n_se * math.sqrt(2 / res.sims)))
    return dict(mean_excess=mean_excess, var_excess=var_excess, mean_pred=m, var_pred=v2,
                mean_mc=float(mc_m), var_mc=float(mc_v))
