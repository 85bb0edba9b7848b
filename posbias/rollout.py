"""Cumulative context ``P(t) = A(t) A(t-1) ... A(0)`` (attention rollout)."""
from __future__ import annotations

import torch

__all__ = ["rollout", "first_position_mass", "layers_to_reach", "stream_rollout", "row_powers"]


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


def stream_rollout(layers, cols: list[int] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Roll out layers one at a time without storing the stack.

    ``layers``: an iterable of ``A(t)`` of shape ``(..., n, n)`` (e.g.
    :func:`posbias.attention.iter_random_attention`). Returns ``(kept, p_last)``: ``kept`` of shape
    ``(..., T, n, len(cols))`` holds the columns ``cols`` of ``P(t)`` after every layer (all columns
    when ``cols`` is None), and ``p_last`` is the final ``P(T-1)`` of shape ``(..., n, n)``.
    """
    kept = []
    p = None
    for a in layers:
        p = a if p is None else a @ p
        kept.append(p if cols is None else p[..., cols])
    if p is None:
        raise ValueError("no layers given")
    return torch.stack(kept, dim=-3), p


def row_powers(a: torch.Tensor, row: int, depths: list[int]) -> torch.Tensor:
    """Row ``row`` of ``A^L`` for each ``L`` in ``depths`` (one fixed layer repeated), by vector products.

    ``a``: ``(n, n)``; returns ``(len(depths), n)``. Costs ``O(max(depths) n^2)`` instead of the
    ``O(L n^3)`` of a full rollout, so ``n`` in the thousands is fine.
    """
    if not depths or min(depths) < 1:
        raise ValueError("depths must be a non-empty list of integers >= 1")
    want = set(depths)
    v = torch.zeros(a.shape[-1], dtype=a.dtype)
    v[row] = 1.0
    out = {}
    for L in range(1, max(depths) + 1):
        v = v @ a
        if L in want:
            out[L] = v.clone()
    return torch.stack([out[L] for L in depths])
