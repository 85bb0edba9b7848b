"""Cumulative context ``P(t) = A(t) A(t-1) ... A(0)`` (attention rollout)."""
from __future__ import annotations

import itertools
import math

import torch

__all__ = ["rollout", "first_position_mass", "layers_to_reach", "stream_rollout", "row_powers",
           "causal_bound_ratios", "first_mass_drops", "drain_summary",
           "prefix_rollout", "walk_sum"]


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
    :func:`posbias.science.attention.iter_random_attention`). Returns ``(kept, p_last)``: ``kept`` of shape
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


def row_powers(a: torch.Tensor, row: int, depths: list[int], log: bool = False,
               held: bool = False) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """Row ``row`` of ``A^L`` for each ``L`` in ``depths`` (one fixed layer repeated), by vector products.

    ``a``: ``(n, n)``; returns ``(len(depths), n)``. Costs ``O(max(depths) n^2)`` instead of the
    ``O(L n^3)`` of a full rollout, so ``n`` in the thousands is fine.

    With ``log=True`` (``a`` non-negative) it returns ``log`` of the rows: the row is divided by its
    largest entry after every product and the scale is kept in log space (summed exactly, with
    :func:`math.fsum`), so a power whose entries overflow float64 (unnormalised weights such as
    ``e^{beta cos(k theta)}`` over hundreds of layers) or underflow it (``((1-gamma) W)^L``) is
    returned to rounding. Entries more than about ``e^{-708}`` below the row's largest are lost to
    float64's range (``-inf``, or subnormal and imprecise), and an entry near that edge lacks the share
    of its neighbours lost beyond it, and what is lost at one layer is missing from every entry it
    feeds at the next: a shallow tail lost early corrupts entries far inside the range later.

    With ``held=True`` (and ``log=True``) it also returns which entries float64 holds: a bound on
    what underflow took from each entry, carried through the products alongside the row and scaled
    with it (times ``2^1000``, so that the bound does not underflow with the entries it bounds).
    Below float64's smallest normal number a value keeps an absolute precision of the smallest
    subnormal, ``u = 2^-1074``: a product ``v_i a_ij`` that falls there loses at most ``u`` (and can
    only fall there where ``v_i`` is below that number over the smallest positive ``a_ij``: each
    entry's bound takes ``u`` for every such ``i``), and so does each addition and the division of
    an entry that ends there; what an entry had lost is carried to the next layer through ``a`` like
    the row. ``held`` ``(len(depths), n)`` is True where the bound is below ``1e-12`` of the entry
    (never where it is 0); rounding in the normal range (about ``n 2^-53`` relative per layer,
    random in sign) is not in the bound.
    """
    if not depths or min(depths) < 1:
        raise ValueError("depths must be a non-empty list of integers >= 1")
    if held and not log:
        raise ValueError("held=True needs log=True: the plain product keeps no bound")
    want = set(depths)
    n = a.shape[-1]
    v = torch.zeros(n, dtype=a.dtype)
    v[row] = 1.0
    lost = torch.zeros(n, dtype=a.dtype)     # bound on what underflow took, in v's units times 2^1000
    tiny, u = torch.finfo(a.dtype).tiny, math.ulp(0.0) * 2.0 ** 1000
    amin = float(a[a > 0].min()) if held else 0.0
    out, ok, scales = {}, {}, []
    for L in range(1, max(depths) + 1):
        if held:      # products in the subnormals: only from v_i < tiny / (smallest positive a_ij)
            sub = int((v < tiny / amin).sum())
        v = v @ a
        if log:
            top = v.max()
            if not bool(top > 0):
                raise ValueError(f"row {row} of A^{L} has no positive entry: its log is undefined")
            if held:
                lost = (lost @ a + u * (sub + n * (v < tiny))) / top
            v = v / top
            scales.append(math.log(float(top)))
            if held:
                lost = lost + u * (v < tiny)
        if L in want:
            out[L] = torch.log(v) + math.fsum(scales) if log else v.clone()
            ok[L] = lost < 1e-12 * 2.0 ** 1000 * v
    rows = torch.stack([out[L] for L in depths])
    return (rows, torch.stack([ok[L] for L in depths])) if held else rows


def causal_bound_ratios(attn: torch.Tensor, p: torch.Tensor, logit_bound: float) -> dict[str, float]:
    """Measured mass away from the first positions over Theorem 4.1's bounds (causal stacks).

    ``attn``, ``p``: ``(S, T, n, n)``, causal attention layers and their :func:`rollout`; ``logit_bound``
    is ``B`` with every logit in ``[-B, B]``. With ``eps = exp(-2B)/n`` and ``P(t)`` built from ``t+1``
    layers, returns

    - ``generic``: ``max (1 - P(t)_{i1}) / (1 - eps)^(t+1)`` over samples, ``t`` and ``i``;
    - ``last``: the same maximum at the last layer only;
    - ``sharp``: ``max P(z_i(t) >= j) / (1 - (j-1) eps_min)^(t+1)`` over samples, ``t``, ``i`` and
      ``j >= 2``, with ``eps_min`` the smallest allowed attention weight drawn (``inf`` where the bound is
      0 and mass remains).

    Every ratio is at most 1 when the bounds hold. The mass away from position 1 is summed from the
    entries ``P(t)_{ij}``, ``j >= 2`` (never ``1 - P(t)_{i1}``, which stalls at float64's 1e-16 while
    the bound goes on shrinking); a bound below float64's smallest normal number (2.2e-308), which
    no float64 sum can be resolved against, is compared as that number.
    """
    n, depth = p.shape[-1], p.shape[-3]
    t = torch.arange(1, depth + 1, dtype=torch.float64)                  # t+1 layers in P(t)
    tail = p.flip(-1).cumsum(-1).flip(-1)                                 # tail[..., j] = P(z >= j)
    resid = tail[..., 1] if n > 1 else torch.zeros_like(p[..., 0])        # (S, T, n): 1 - P(t)_{i1}
    tiny = torch.finfo(torch.float64).tiny
    generic = torch.exp(t * math.log1p(-math.exp(-2 * logit_bound) / n)).clamp(min=tiny)  # (T,)
    eps_min = float(attn.masked_select(torch.ones(n, n, dtype=torch.bool).tril()).min())
    earlier = torch.arange(n, dtype=torch.float64)                        # positions before j (0-based j)
    sharp = ((1 - earlier * eps_min).clamp(min=0)[None, :] ** t[:, None])[None, :, None, :]
    ratio = torch.where(sharp > 0, tail / sharp.clamp(min=1e-300),
                        torch.where(tail > 1e-15, torch.inf, 0.0))
    return {"generic": float((resid / generic[None, :, None]).max()),
            "last": float((resid[:, -1] / generic[-1]).max()),
            "sharp": float(ratio[..., 1:].max()) if n > 1 else 0.0}      # one token: no mass away from it


def first_mass_drops(p: torch.Tensor, tol: float = 1e-12) -> tuple[int, int]:
    """How often a row loses mass on position 1 from one layer to the next.

    ``p``: ``(S, T, n, n)`` rollouts. Returns ``(drops, cases)``: the number of (sample, layer, row)
    with ``P(t+1)_{i1} < P(t)_{i1} - tol``, and the number of such cases, ``S (T-1) n``.
    """
    first = p[..., 0]                                                     # (S, T, n)
    step = first[:, 1:] - first[:, :-1]
    return int((step < -tol).sum()), step.numel()


def drain_summary(mass: torch.Tensor, hops: torch.Tensor, level: float) -> dict:
    """How the mass on position 1 builds up over depth, for one mask.

    ``mass``: ``(S, T, n)``, ``P(t)_{i1}`` for ``S`` samples after ``t+1`` layers; ``hops``: ``(n,)``,
    each token's hop distance to position 1 (:func:`posbias.science.masks.hop_distance`); ``level``: the mass
    the last token should reach. Returns

    - ``reach_ok``: every token's first layer count with positive mass equals its hop distance
      (at least 1);
    - ``never``: samples whose last token never reaches ``level`` within ``T`` layers;
    - ``needed``: mean layers the last token needs to reach ``level`` (over the samples that do;
      ``nan`` if none), ``needed_min`` their minimum (``-1`` if none);
    - ``final_deficit``: ``max (1 - P(T-1)_{i1})`` over samples and tokens.
    """
    first_pos = (mass > 0).to(torch.int8).argmax(dim=1) + 1                # (S, n)
    reach = layers_to_reach(mass[:, :, -1], level)                          # (S,), -1 = never
    hit = reach[reach > 0]
    return {"reach_ok": bool((first_pos == hops.clamp(min=1)).all()),
            "never": int((reach < 0).sum()),
            "needed": float(hit.double().mean()) if hit.numel() else float("nan"),
            "needed_min": int(hit.min()) if hit.numel() else -1,
            "final_deficit": float((1 - mass[:, -1]).max())}


def prefix_rollout(layers, k: int, logit_bound: float) -> dict:
    """Roll out layers under a prefix mask of ``k`` tokens and measure Theorem 4.3's bound.

    ``layers``: an iterable of ``A(t)``, each ``(S, n, n)``; ``logit_bound``: ``B`` with every logit in
    ``[-B, B]``. With ``mu_t = min_l sum_{j<k} A(t)_{lj}`` (the smallest mass a layer sends into the
    prefix) and ``L`` layers, returns

    - ``kept``: ``(S, L, n, k)``, the prefix columns of ``P(t)``; ``deficit``: ``(S, L, n)``,
      ``1 -`` the prefix mass;
    - ``drawn_ratio``: ``max deficit / prod_{s<=t} (1 - mu_s)`` (the bound with the weights drawn);
    - ``generic_ratio``: ``max deficit / (1 - k e^{-2B}/n)^(t+1)`` (the bound A1-A2 give);
    - ``share_min``: the smallest ``P(t)_{ij}``, ``j < k``; ``share_floor_ok``: every such entry is at
      least ``min_l A(0)_{lj}``; ``a_priori``: ``e^{-2B}/n``; ``final``: the largest last-layer deficit.

    The deficit is the non-prefix mass itself, ``P(t) 1_{j >= k} = A(t) (P(t-1) 1_{j >= k})``, a sum of
    non-negative terms, not ``1 -`` the prefix mass (which stalls at float64's 1e-16 while the bounds go
    on shrinking); both bounds are formed in log space, and one below float64's smallest normal number
    (2.2e-308) is compared as that number.
    """
    mu, floor0, away = [], [], []

    def tap(stream):
        for t, a in enumerate(stream):
            mu.append(a[..., :k].sum(-1).amin(-1))                         # (S,)
            rest = a[..., k:].sum(-1) if t == 0 else (a @ away[-1].unsqueeze(-1)).squeeze(-1)
            away.append(rest)                                              # (S, n): P(t) 1_{j >= k}
            if t == 0:
                floor0.append(a[..., :k].amin(-2))                         # (S, k)
            yield a

    kept, _ = stream_rollout(tap(layers), cols=list(range(k)))             # (S, L, n, k)
    n, depth = kept.shape[-2], kept.shape[-3]
    deficit = torch.stack(away, 1)                                         # (S, L, n)
    tiny = torch.finfo(torch.float64).tiny
    drawn_bound = torch.exp(torch.cumsum(torch.log1p(-torch.stack(mu, 1)), dim=1)).clamp(min=tiny)
    a_priori = math.exp(-2 * logit_bound) / n
    steps = torch.arange(1, depth + 1, dtype=torch.float64)
    generic = torch.exp(steps * math.log1p(-k * a_priori)).clamp(min=tiny)  # (L,)
    return {"kept": kept, "deficit": deficit,
            "drawn_ratio": float((deficit.amax(-1) / drawn_bound).max()),
            "generic_ratio": float((deficit.amax(-1) / generic).max()),
            "share_min": float(kept.amin(dim=(1, 2)).min()),
            "share_floor_ok": bool((kept >= floor0[0][:, None, None, :] - 1e-12).all()),
            "a_priori": a_priori, "final": float(deficit[:, -1].max())}


def walk_sum(layers, i: int, j: int) -> float:
    """Entry ``(i, j)`` of ``A(t) ... A(0)`` for ``layers = [A(0), ..., A(t)]`` (each ``(N, N)``),
    by enumerating every walk ``i -> l_1 -> ... -> l_t -> j`` that takes one step per layer, the
    last layer first, and summing the products of the weights along it: ``N^t`` walks, no matrix
    product. The reference the chapters check :func:`rollout` and :func:`stream_rollout` against,
    so it shares no code with them; use it on a few tokens and layers only."""
    n, total = layers[0].shape[-1], 0.0
    for mids in itertools.product(range(n), repeat=len(layers) - 1):
        walk, w = (i, *mids, j), 1.0
        for step, a in enumerate(reversed(layers)):
            w *= float(a[walk[step], walk[step + 1]])
        total += w
    return total
