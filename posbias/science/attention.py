"""Attention primitives shared by the theory chapters and the trained models.

Shapes use ``...`` for any leading batch/ensemble axes, ``n`` for tokens and ``d`` for width.
"""
from __future__ import annotations

import math

import torch

__all__ = [
    "masked_softmax",
    "decay_bias",
    "rope_angles",
    "apply_rope",
    "sinusoidal_pe",
    "attention_weights",
    "random_attention_stack",
    "iter_random_attention",
]


def masked_softmax(logits: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Softmax over the last axis restricted to ``mask`` (True = allowed).

    ``logits``: ``(..., n, n)``; ``mask``: broadcastable boolean ``(n, n)``. Rows with no allowed
    entry are an error (every mask in this book has self-loops). Returns ``(..., n, n)``, rows sum to 1
    and forbidden entries are exactly 0.
    """
    if not bool(mask.any(dim=-1).all()):
        raise ValueError("every row of the mask must allow at least one position")
    neg = torch.finfo(logits.dtype).min
    z = logits.masked_fill(~mask, neg)
    z = z - z.amax(dim=-1, keepdim=True)
    e = torch.exp(z) * mask
    return e / e.sum(dim=-1, keepdim=True)


def decay_bias(n: int, m: float, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """ALiBi-style decay logit bias ``-m (i - j)`` for ``j <= i`` (0 elsewhere). Shape ``(n, n)``.

    Adding it to causal logits multiplies the unnormalised weights by ``gamma^(i-j)``, ``gamma = e^{-m}``.
    """
    if m < 0:
        raise ValueError(f"decay rate m must be >= 0, got {m}")
    i = torch.arange(n, dtype=dtype).unsqueeze(1)
    j = torch.arange(n, dtype=dtype).unsqueeze(0)
    return (-m * (i - j)).clamp(max=0.0)


def rope_angles(n: int, d: int, base: float = 10000.0, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Rotation angles ``pos * theta_p`` with ``theta_p = base^(-2p/d)``, ``p = 0..d/2-1``. Shape ``(n, d/2)``."""
    if d % 2:
        raise ValueError(f"RoPE needs an even width, got d={d}")
    if not dtype.is_floating_point:      # an integer dtype would wrap the positions (int8: 128 -> -128)
        raise ValueError(f"RoPE angles are real numbers: pass a floating dtype, got {dtype}")
    theta = base ** (-torch.arange(0, d, 2, dtype=dtype) / d)
    pos = torch.arange(n, dtype=dtype).unsqueeze(1)
    return pos * theta.unsqueeze(0)


def apply_rope(x: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
    """Rotate interleaved pairs ``(x[2p], x[2p+1])`` of ``x`` ``(..., n, d)`` by ``angles`` ``(n, d/2)``."""
    cos, sin = torch.cos(angles).to(x.dtype), torch.sin(angles).to(x.dtype)
    x1, x2 = x[..., 0::2], x[..., 1::2]
    out = torch.stack((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)
    return out.flatten(-2)


def sinusoidal_pe(n: int, d: int, base: float = 10000.0, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    """The sin/cos positional encoding of Vaswani et al.: ``pe[pos, 2p] = sin(pos/base^(2p/d))``. Shape ``(n, d)``."""
    ang = rope_angles(n, d, base, dtype=torch.float64)
    pe = torch.stack((torch.sin(ang), torch.cos(ang)), dim=-1).flatten(-2)
    return pe.to(dtype)


def attention_weights(
    q: torch.Tensor,
    k: torch.Tensor,
    mask: torch.Tensor,
    bias: torch.Tensor | None = None,
) -> torch.Tensor:
    """``softmax_mask(q k^T / sqrt(d) + bias)``. ``q, k``: ``(..., n, d)``; returns ``(..., n, n)``."""
    logits = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if bias is not None:
        logits = logits + bias
    return masked_softmax(logits, mask)


def random_attention_stack(
    mask: torch.Tensor,
    depth: int,
    *,
    d: int = 16,
    weight_norm: float = 1.0,
    samples: int = 1,
    seed: int = 0,
    bias: torch.Tensor | None = None,
    rope_base: float | None = None,
) -> tuple[torch.Tensor, float]:
    """Attention matrices of a random attention-only stack satisfying A1-A2 of Wu et al.

    Inputs ``X(0)`` have rows on the unit sphere; every layer draws ``W_Q, W_K, W_V`` with Gaussian
    entries rescaled to spectral norm ``weight_norm`` (``W_V`` to 1, so token norms never exceed 1)
    and computes ``A(t) = softmax_mask(X W_Q (X W_K)^T / sqrt(d) + bias)``, ``X(t+1) = A(t) X(t) W_V``.
    With ``rope_base`` set, queries and keys are rotated by RoPE before the product.

    Returns ``(A, logit_bound)``: ``A`` of shape ``(samples, depth, n, n)`` in float64, and the bound
    ``B = weight_norm^2 / sqrt(d)`` on ``|q . k| / sqrt(d)`` that A1-A2 give (before ``bias``).
    """
    layers = iter_random_attention(mask, depth, d=d, weight_norm=weight_norm, samples=samples, seed=seed,
                                   bias=bias, rope_base=rope_base)
    return torch.stack(list(layers), dim=1), weight_norm**2 / math.sqrt(d)


def iter_random_attention(
    mask: torch.Tensor,
    depth: int,
    *,
    d: int = 16,
    weight_norm: float = 1.0,
    samples: int = 1,
    seed: int = 0,
    bias: torch.Tensor | None = None,
    rope_base: float | None = None,
):
    """Layer-by-layer version of :func:`random_attention_stack`: yields ``A(t)`` of shape ``(samples, n, n)``.

    Same draws, same order, same seed as :func:`random_attention_stack`, so
    ``torch.stack(list(iter_random_attention(...)), 1)`` equals its first output; only one layer is
    held in memory, which lets deep stacks on long sequences stream through a rollout.
    """
    n = mask.shape[-1]
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(samples, n, d, generator=g, dtype=torch.float64)
    x = x / x.norm(dim=-1, keepdim=True)

    def draw(scale: float) -> torch.Tensor:
        w = torch.randn(samples, d, d, generator=g, dtype=torch.float64)
        return w / torch.linalg.matrix_norm(w, ord=2).reshape(samples, 1, 1) * scale

    angles = rope_angles(n, d, rope_base) if rope_base is not None else None
    for _ in range(depth):
        wq, wk, wv = draw(weight_norm), draw(weight_norm), draw(1.0)
        q, k = x @ wq, x @ wk
        if angles is not None:
            q, k = apply_rope(q, angles), apply_rope(k, angles)
        a = attention_weights(q, k, mask, bias)
        yield a
        x = a @ x @ wv
