"""Attention masks as directed graphs on positions.

A mask is a boolean matrix ``M`` of shape ``(n, n)``: ``M[i, j]`` is True when token ``i`` may
attend to position ``j`` (an edge ``i -> j`` of the mask graph). Positions are 0-based in code
and 1-based in the prose of the book (code position 0 is "position 1" of the papers).
"""
from __future__ import annotations

import math

import torch

__all__ = [
    "full_mask",
    "causal_mask",
    "sliding_window_mask",
    "prefix_mask",
    "make_mask",
    "MASKS",
    "reachability",
    "center_nodes",
    "is_closed",
    "hop_distance",
    "window_hops",
]

MASKS = ("full", "causal", "window", "prefix")


def _check_n(n: int) -> None:
    if not isinstance(n, int) or n < 1:
        raise ValueError(f"n must be a positive integer, got {n!r}")


def full_mask(n: int) -> torch.Tensor:
    """Every token sees every position. Shape ``(n, n)``."""
    _check_n(n)
    return torch.ones(n, n, dtype=torch.bool)


def causal_mask(n: int) -> torch.Tensor:
    """Token ``i`` sees positions ``j <= i``. Shape ``(n, n)``, lower triangular."""
    _check_n(n)
    return torch.tril(torch.ones(n, n, dtype=torch.bool))


def sliding_window_mask(n: int, w: int) -> torch.Tensor:
    """Causal window of width ``w``: token ``i`` sees ``i-w < j <= i``. Shape ``(n, n)``.

    ``w = 1`` lets a token see only itself; ``w >= n`` is the causal mask.
    """
    _check_n(n)
    if not isinstance(w, int) or w < 1:
        raise ValueError(f"window width w must be an integer >= 1, got {w!r}")
    i = torch.arange(n).unsqueeze(1)
    j = torch.arange(n).unsqueeze(0)
    return (j <= i) & (j > i - w)


def prefix_mask(n: int, k: int) -> torch.Tensor:
    """Prefix-LM mask with ``k`` prefix tokens: ``j < k`` (bidirectional prefix) or ``j <= i``.

    Shape ``(n, n)``. ``k = 0`` or ``k = 1`` is the causal mask; ``k = n`` is the full mask.
    """
    _check_n(n)
    if not isinstance(k, int) or not 0 <= k <= n:
        raise ValueError(f"prefix size k must be an integer in [0, n={n}], got {k!r}")
    i = torch.arange(n).unsqueeze(1)
    j = torch.arange(n).unsqueeze(0)
    return (j <= i) | (j < k)


def make_mask(kind: str, n: int, *, window: int | None = None, prefix: int | None = None) -> torch.Tensor:
    """Build a mask by name: ``full``, ``causal``, ``window`` (needs ``window``), ``prefix`` (needs ``prefix``)."""
    if kind == "full":
        return full_mask(n)
    if kind == "causal":
        return causal_mask(n)
    if kind == "window":
        if window is None:
            raise ValueError("the 'window' mask needs a width: window=w")
        return sliding_window_mask(n, window)
    if kind == "prefix":
        if prefix is None:
            raise ValueError("the 'prefix' mask needs a prefix size: prefix=k")
        return prefix_mask(n, prefix)
    raise ValueError(f"unknown mask {kind!r}; choose one of {MASKS}")


def reachability(mask: torch.Tensor, steps: int | None = None) -> torch.Tensor:
    """``R[i, j]`` is True when a directed walk of length ``1..steps`` leads from ``i`` to ``j``.

    With ``steps=None`` walks of any length count (the transitive closure). Shape ``(n, n)``.
    Walks of exactly ``t`` steps matter for ``P(t)``; since every mask here has self-loops,
    "at most t steps" and "exactly t steps" coincide.
    """
    n = mask.shape[-1]
    steps = n if steps is None else steps
    a = mask.to(torch.float64)
    reach = mask.clone()
    power = mask.clone()
    for _ in range(steps - 1):
        nxt = (power.to(torch.float64) @ a) > 0
        if torch.equal(nxt, power):
            break
        power = nxt
        reach |= power
    return reach


def center_nodes(mask: torch.Tensor) -> list[int]:
    """Positions (0-based) reachable from every token by some directed walk: the center nodes."""
    reach = reachability(mask)
    return [int(j) for j in torch.nonzero(reach.all(dim=0)).flatten()]


def is_closed(mask: torch.Tensor, nodes: list[int]) -> bool:
    """Whether no edge leaves ``nodes``: the tokens in ``nodes`` attend only to tokens in ``nodes``.

    ``mask``: ``(n, n)`` boolean, ``mask[i, j]`` when token ``i`` sees ``j``; ``nodes``: 0-based positions.
    """
    outside = torch.ones(mask.shape[-1], dtype=torch.bool)
    outside[list(nodes)] = False
    return not bool(mask[list(nodes)][:, outside].any())


def hop_distance(mask: torch.Tensor, target: int = 0) -> torch.Tensor:
    """Fewest edges from each token to ``target``; ``-1`` where ``target`` is unreachable. Shape ``(n,)``."""
    n = mask.shape[-1]
    dist = torch.full((n,), -1, dtype=torch.long)
    dist[target] = 0
    frontier = torch.zeros(n, dtype=torch.bool)
    frontier[target] = True
    seen = frontier.clone()
    for hop in range(1, n + 1):
        # tokens i with an edge i -> j for some j in the frontier
        nxt = (mask & frontier.unsqueeze(0)).any(dim=1) & ~seen
        if not nxt.any():
            break
        dist[nxt] = hop
        seen |= nxt
        frontier = nxt
    return dist


def window_hops(n: int, w: int) -> int:
    """Hops the last token of a width-``w`` sliding window needs to reach position 1: ``ceil((n-1)/(w-1))``."""
    if w < 2:
        raise ValueError("with w < 2 no token can reach an earlier position")
    return math.ceil((n - 1) / (w - 1))
