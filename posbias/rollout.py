"""Cumulative context ``P(t) = A(t) A(t-1) ... A(0)`` (attention rollout)."""
from __future__ import annotations

import torch

__all__ = ["rollout", "first_position_mass", "layers_to_reach"]


def rollout(attn: torch.Tensor, residual: bool = False) -> torch.Tensor:
    """Cumulative context after each layer.

    ``attn``: ``(..., T, n, n)``, layer ``t`` along axis ``-3`` (``t = 0`` is the first layer).
    Returns ``P`` of the same shape with ``P[..., t, :, :] = A(t) ... A(0)``; row ``i`` of ``P(t)``
    is the distribution over input positions that token ``i``'s depth-``t`` representation is built
    from. With ``residual=True`` each layer is replaced by ``(A + I) / 2`` (Abnar & Zuidema's rollout
    with the residual term).
    """
    n = attn.shape[-1]
    if residual:
        eye = torch.eye(n, dtype=attn.dtype, device=attn.device)
        attn = 0.5 * (attn + eye)
    out = torch.empty_like(attn)
    p = attn[..., 0, :, :]
    out[..., 0, :, :] = p
    for t in range(1, attn.shape[-3]):
        p = attn[..., t, :, :] @ p
        out[..., t, :, :] = p
    return out


def first_position_mass(p: torch.Tensor, k: int = 1) -> torch.Tensor:
    """Mass each row of ``P`` puts on the first ``k`` positions: ``(..., n, n) -> (..., n)``."""
    return p[..., :k].sum(dim=-1)


def layers_to_reach(mass: torch.Tensor, level: float) -> torch.Tensor:
    """First layer count ``t+1`` at which ``mass[..., t] >= level``; ``-1`` if never. ``(..., T) -> (...)``."""
    hit = mass >= level
    first = torch.argmax(hit.to(torch.int8), dim=-1) + 1
    return torch.where(hit.any(dim=-1), first, torch.full_like(first, -1))
