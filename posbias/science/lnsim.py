"""The parameter-free LayerNorm stack of Kim et al., vectorised over simulations.

One layer, with identity ``W_Q = W_K = W_V`` and no feed-forward::

    h      = LN(x)            (or h = x without LayerNorm; LN has no affine parameters, eps 1e-12)
    scores = h h^T / sqrt(d)  (+ optional decay bias; with RoPE, q = k = rope(h) in the product)
    x'     = softmax_causal(scores) h   (+ x with the residual connection)

Inputs are ``x_i = (z_i + l u) / sqrt(d)`` with ``z_i, u ~ N(0, I_d)``: the shared vector ``u`` gives
anisotropy ``alpha = l^2 / (1 + l^2)`` (the cosine between two distinct inputs as ``d -> inf``).

Shapes: ``s`` simulations, ``n`` tokens, ``d`` width, ``T`` layers. Positions are 0-based in code.

The closed forms (derived in the ``kim-*`` chapters) live in :mod:`posbias.science.lntheory`; every name
there is re-exported here, so ``lnsim.layer2_scores`` keeps working.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from posbias.science.attention import apply_rope, decay_bias, masked_softmax, rope_angles
from posbias.science.masks import causal_mask
from posbias.science.lntheory import (  # noqa: F401 - re-exported: lnsim.X names the closed forms too
    NOLN_MEAN_FIELD_MIN_D,
    ScoreMoments,
    TOL_CALIBRATION,
    alpha0_slope_factor,
    alpha_to_l,
    anisotropy_level,
    calibration_fix,
    closed_form_outside,
    compare_increments,
    expansion_parameter,
    layer1_log_weights,
    layer1_moments_check,
    layer1_offdiag_moments,
    layer1_var_second_order,
    layer2_scores,
    layer2_slope,
    mean_field_excess,
    next_order_tol,
    noln_mean_field,
    noln_score_variance,
    resolvable,
    rope_layer1_scores,
    row_fluctuation,
    row_slope,
    slope_contrast,
    slope_resolvable,
    uniform_sketch,
)
from posbias.science.rollout import rollout

__all__ = [
    "LN_EPS",
    "ScoreMoments",
    "SimResult",
    "anisotropy_level",
    "alpha_to_l",
    "sample_inputs",
    "layer_norm",
    "stack_forward",
    "simulate",
    "recency_probability",
    "layer1_offdiag_moments",
    "layer1_moments_check",
    "layer1_var_second_order",
    "NOLN_MEAN_FIELD_MIN_D",
    "next_order_tol",
    "TOL_CALIBRATION",
    "row_fluctuation",
    "closed_form_outside",
    "calibration_fix",
    "resolvable",
    "slope_resolvable",
    "layer1_log_weights",
    "layer2_scores",
    "uniform_sketch",
    "row_slope",
    "slope_contrast",
    "layer2_slope",
    "alpha0_slope_factor",
    "expansion_parameter",
    "noln_mean_field",
    "compare_increments",
    "rope_layer1_scores",
    "mean_field_excess",
    "last_row_increments",
]

LN_EPS = 1e-12
_BLOCK = 1000  # simulations per random-number block: results do not depend on the memory chunk


def sample_inputs(sims: int, n: int, d: int, alpha: float, generator: torch.Generator) -> torch.Tensor:
    """``(randn(n, d) + l randn(1, d)) / sqrt(d)`` for each simulation. Shape ``(sims, n, d)``, float64."""
    ell = alpha_to_l(alpha)
    z = torch.randn(sims, n, d, generator=generator, dtype=torch.float64)
    u = torch.randn(sims, 1, d, generator=generator, dtype=torch.float64)
    return (z + ell * u) / math.sqrt(d)


def layer_norm(x: torch.Tensor, eps: float = LN_EPS) -> torch.Tensor:
    """LayerNorm over the last axis without affine parameters: ``(x - mean) / sqrt(var + eps)``."""
    return torch.nn.functional.layer_norm(x, x.shape[-1:], eps=eps)


def stack_forward(
    x: torch.Tensor,
    depth: int,
    *,
    layernorm: bool = True,
    residual: bool = False,
    rope_base: float | None = None,
    decay: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Run the parameter-free stack on inputs ``x`` ``(s, n, d)``.

    Returns ``(scores, attn)``, both ``(s, T, n, n)``: the pre-softmax scores of each layer (masked
    entries set to NaN) and the causal attention weights. ``rope_base`` rotates queries and keys
    by RoPE before the product (values stay unrotated); ``decay`` adds the bias ``-m (i - j)``.
    """
    s, n, d = x.shape
    mask = causal_mask(n)
    bias = decay_bias(n, decay, dtype=x.dtype) if decay else None
    angles = rope_angles(n, d, rope_base, dtype=x.dtype) if rope_base is not None else None
    scores = torch.empty(s, depth, n, n, dtype=x.dtype)
    attn = torch.empty(s, depth, n, n, dtype=x.dtype)
    for t in range(depth):
        h = layer_norm(x) if layernorm else x
        qk = apply_rope(h, angles) if angles is not None else h
        logits = qk @ qk.transpose(-1, -2) / math.sqrt(d)
        if bias is not None:
            logits = logits + bias
        a = masked_softmax(logits, mask)
        scores[:, t] = logits.masked_fill(~mask, float("nan"))
        attn[:, t] = a
        x = a @ h + (x if residual else 0.0)
    return scores, attn


@dataclass
class SimResult:
    """Monte Carlo summary over ``sims`` simulations, per layer ``(T, n, n)`` (float64 numpy).

    ``score_mean``/``score_var``: mean and variance of the pre-softmax scores (NaN above the
    diagonal); ``attn_mean``: mean attention weights; ``rp_per_sim``: per layer, the mean over
    simulations of the recency probability of each simulation's own score matrix;
    ``slope_mean``/``slope_var``: per layer ``(T,)``, mean and variance over simulations of the
    within-row slope of score against key position (:func:`row_slope`); ``first_mass``: ``(T, n)``, the
    mean over simulations of the cumulative context ``P(t)_{i1}`` (attention rollout, no residual term):
    how much of token ``i``'s layer-``t`` representation comes from position 1.
    """

    score_mean: np.ndarray
    score_var: np.ndarray
    attn_mean: np.ndarray
    rp_per_sim: np.ndarray
    slope_mean: np.ndarray
    slope_var: np.ndarray
    first_mass: np.ndarray
    sims: int

    @property
    def score_se(self) -> np.ndarray:
        """Standard error of ``score_mean``."""
        return np.sqrt(self.score_var / self.sims)

    @property
    def slope_se(self) -> np.ndarray:
        """Standard error of ``slope_mean`` ``(T,)``."""
        return np.sqrt(self.slope_var / self.sims)

    @property
    def rp(self) -> np.ndarray:
        """RP of the mean score map of each layer ``(T,)``: the number annotated on Fig 1."""
        return recency_probability(self.score_mean).numpy()

    def to_dict(self) -> dict:
        return {k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in self.__dict__.items()}

    @classmethod
    def from_dict(cls, dct: dict) -> "SimResult":
        """Inverse of :meth:`to_dict`. Results stored before ``first_mass`` existed get it as NaN."""
        out = {k: (np.asarray(v, dtype=float) if k != "sims" else int(v)) for k, v in dct.items()}
        if "first_mass" not in out:
            t, n = out["score_mean"].shape[:2]
            out["first_mass"] = np.full((t, n), np.nan)
        return cls(**out)


def simulate(
    *,
    n: int = 10,
    d: int = 64,
    alpha: float = 0.0,
    depth: int = 4,
    sims: int = 100_000,
    layernorm: bool = True,
    residual: bool = False,
    rope_base: float | None = None,
    decay: float | None = None,
    seed: int = 0,
    max_bytes: int = 64 * 2**20,
) -> SimResult:
    """Monte Carlo of the stack: ``sims`` input sequences, accumulated in chunks.

    Random numbers are drawn in fixed blocks of ``_BLOCK`` simulations, block ``b`` from a generator
    seeded with ``(seed, b)``, so the result does not depend on ``max_bytes``; a chunk holds as many
    blocks as keep its largest tensors under ``max_bytes``, so memory is bounded for any ``sims``.
    """
    if sims < 1 or n < 3 or d < 2 or depth < 1:       # n >= 3: the recency probability compares two keys
        raise ValueError("need sims >= 1, n >= 3, d >= 2, depth >= 1")
    per_sim = 8 * (4 * n * d + 4 * depth * n * n)  # inputs, h, q/k, output + scores/attn buffers
    blocks_per_chunk = max(1, max_bytes // (per_sim * _BLOCK))
    n_blocks = math.ceil(sims / _BLOCK)
    acc_s = torch.zeros(depth, n, n, dtype=torch.float64)
    acc_s2 = torch.zeros(depth, n, n, dtype=torch.float64)
    acc_a = torch.zeros(depth, n, n, dtype=torch.float64)
    acc_rp = torch.zeros(depth, dtype=torch.float64)
    acc_b = torch.zeros(depth, dtype=torch.float64)
    acc_b2 = torch.zeros(depth, dtype=torch.float64)
    acc_p = torch.zeros(depth, n, dtype=torch.float64)
    contrast = slope_contrast(n)
    for b0 in range(0, n_blocks, blocks_per_chunk):
        xs = []
        for b in range(b0, min(b0 + blocks_per_chunk, n_blocks)):
            g = torch.Generator().manual_seed(seed * 1_000_003 + b)
            xs.append(sample_inputs(min(_BLOCK, sims - b * _BLOCK), n, d, alpha, g))
        x = torch.cat(xs)
        sc, at = stack_forward(x, depth, layernorm=layernorm, residual=residual, rope_base=rope_base, decay=decay)
        acc_s += sc.sum(0)
        acc_s2 += (sc * sc).sum(0)
        acc_a += at.sum(0)
        acc_rp += recency_probability(sc).sum(0)
        slopes = (torch.nan_to_num(sc) * contrast).sum((-1, -2))
        acc_b += slopes.sum(0)
        acc_b2 += (slopes * slopes).sum(0)
        acc_p += rollout(at)[..., 0].sum(0)

    def mean_var(s1: torch.Tensor, s2: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
        m = s1 / sims
        return m.numpy(), ((s2 / sims - m**2).clamp(min=0.0) * sims / max(sims - 1, 1)).numpy()

    (sm, sv), (bm, bv) = mean_var(acc_s, acc_s2), mean_var(acc_b, acc_b2)
    return SimResult(sm, sv, (acc_a / sims).numpy(), (acc_rp / sims).numpy(), bm, bv, (acc_p / sims).numpy(), sims)


def _triples(n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    idx = torch.combinations(torch.arange(n), r=3)  # rows (j, k, i) with j < k < i
    return idx[:, 2], idx[:, 1], idx[:, 0]


def recency_probability(scores: torch.Tensor | np.ndarray) -> torch.Tensor:
    """RP: share of triples ``j < k < i`` with ``score[i, k] > score[i, j]``. ``(..., n, n) -> (...)``.

    Only strictly-below-diagonal entries enter. RP = 1 is perfect recency, 0 a perfect early-token
    preference, 1/2 no order. Needs ``n >= 3``.
    """
    s = torch.as_tensor(scores, dtype=torch.float64)
    n = s.shape[-1]
    if n < 3:
        raise ValueError("RP needs at least 3 tokens")
    i, k, j = _triples(n)
    return (s[..., i, k] > s[..., i, j]).to(torch.float64).mean(dim=-1)


def last_row_increments(scores: torch.Tensor | np.ndarray) -> np.ndarray:
    """The last query row's scores relative to its first key: ``s[S, j] - s[S, 1]`` for ``j < S``.

    ``scores``: ``(n, n)``; returns ``(n-1,)`` (the first entry is 0), the curve of Kim et al.'s Figure 2.
    """
    s = np.asarray(scores)
    last = s.shape[-1] - 1
    return s[last, :last] - s[last, 0]
