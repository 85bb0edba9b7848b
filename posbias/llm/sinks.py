"""Attention probes of a real model: the weights, the sink metric of Gu et al., Wu et al.'s rollout on
the real layers, and the surveys the sink chapters store (small JSON, not attention tensors).

Shapes: ``B`` sequences, ``L`` layers, ``H`` heads, ``n`` tokens.
"""
from __future__ import annotations

import math

import torch

from posbias.science.rollout import rollout

from posbias.llm.loading import token_batch

__all__ = ["attention_maps", "sink_alpha", "sink_rate", "first_over_rest", "FAR_ABOVE", "far_above_decided",
           "head_mean_rollout", "drop_position", "uniform_causal", "with_special", "sink_survey", "rollout_survey"]


@torch.no_grad()
def attention_maps(model, input_ids: torch.Tensor, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Attention weights of every layer and head: ``(B, n) -> (B, L, H, n, n)``, rows sum to 1."""
    out = model(input_ids=input_ids, attention_mask=attention_mask, output_attentions=True)
    return torch.stack(out.attentions, dim=1).float()


# ---------------------------------------------------------------------------------------------
# the sink metric of Gu et al.


def sink_alpha(attn: torch.Tensor, causal: bool = True) -> torch.Tensor:
    """``alpha_k``: mean attention key ``k`` receives from the queries allowed to see it.

    ``attn``: ``(..., n, n)`` (query rows, key columns). Causal: queries ``i >= k``, so
    ``alpha_k = sum_{i>=k} A[i,k] / (n - k)`` (0-based ``k``); bidirectional: all ``n`` queries.
    Returns ``(..., n)``.
    """
    n = attn.shape[-1]
    col = attn.sum(dim=-2)
    if not causal:
        return col / n
    seen_by = torch.arange(n, 0, -1, dtype=attn.dtype, device=attn.device)
    return col / seen_by


def sink_rate(alpha: torch.Tensor, eps: float = 0.3, dims: tuple[int, ...] = (0, 1, 2)) -> torch.Tensor:
    """Share of entries with ``alpha_k > eps``, averaged over ``dims`` (default: sequence, layer, head).

    ``alpha``: ``(B, L, H, n)`` -> ``(n,)`` with the default ``dims``; ``dims=(0,)`` gives the
    per layer and head rate ``(L, H, n)``. A fraction in [0, 1] (Gu et al. report it in percent).
    """
    return (alpha > eps).float().mean(dim=dims)


def first_over_rest(rate) -> float:
    """How many times position 1's sink rate exceeds the largest of the others: ``rate[0] / max(rate[1:])``.

    ``rate``: ``(n,)``, ``n >= 2`` (a :func:`sink_rate`). ``inf`` when no other position is ever a sink
    but position 1 is; ``0`` when position 1 never is (a threshold no ``alpha`` reaches gives all zeros:
    no sink, not a tie), so ``first_over_rest(rate) >= c`` holds only where position 1 is a sink.
    """
    first, rest = float(rate[0]), float(max(rate[1:]))
    if first == 0:
        return 0.0
    return math.inf if rest == 0 else first / rest


FAR_ABOVE = 5
"""Position 1's sink rate is "far above every other position" when :func:`first_over_rest` is at least this."""


def far_above_decided(batch: int, factor: float = FAR_ABOVE) -> bool:
    """Whether ``first_over_rest(rate) >= factor``, on a :func:`sink_rate` over ``batch`` sequences, is
    decided by the text rather than by one sequence: ``batch >= factor``.

    A single sequence whose token ``k`` is as strong a sink as token 1 (a delimiter, say) adds its
    rate of token 1 divided by ``batch`` to ``rate(k)``; in a typical sequence that alone takes the ratio
    down to about ``batch``. Below ``factor`` sequences, one such sequence fails the check; from
    ``factor`` on it cannot alone. The rule reads the batch size only, never the rates.
    """
    return batch >= factor


# ---------------------------------------------------------------------------------------------
# rollout helpers


def head_mean_rollout(attn: torch.Tensor, residual: bool = False) -> torch.Tensor:
    """Wu et al.'s cumulative context on the real layers, heads averaged: ``(B, L, H, n, n) -> (B, L, n, n)``."""
    return rollout(attn.mean(dim=2).double(), residual=residual)


def drop_position(attn: torch.Tensor, k: int = 0) -> torch.Tensor:
    """Remove key/query ``k`` and renormalise rows: ``(..., n, n) -> (..., n-1, n-1)``.

    What the layers would do if the mass they send to ``k`` were spread in proportion over the keys
    that remain (the sink taken out, nothing else changed).
    """
    n = attn.shape[-1]
    keep = torch.tensor([j for j in range(n) if j != k])
    a = attn.index_select(-1, keep).index_select(-2, keep)
    return a / a.sum(dim=-1, keepdim=True).clamp_min(torch.finfo(a.dtype).tiny)


def uniform_causal(n: int, n_layers: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Uniform attention under the causal mask, ``(L, n, n)``: the mask's contribution alone."""
    a = torch.tril(torch.ones(n, n, dtype=dtype))
    a = a / a.sum(dim=-1, keepdim=True)
    return a.expand(n_layers, n, n).clone()


# ---------------------------------------------------------------------------------------------
# the surveys the chapters store


def with_special(tokenizer, ids: torch.Tensor) -> torch.Tensor:
    """Wrap ``(B, n-2)`` ids as ``[CLS] ids [SEP]`` for an encoder: ``(B, n)``."""
    b = ids.shape[0]
    cls = torch.full((b, 1), tokenizer.cls_token_id)
    sep = torch.full((b, 1), tokenizer.sep_token_id)
    return torch.cat([cls, ids, sep], dim=1)


@torch.no_grad()
def sink_survey(model, tokenizer, kind: str, n_tokens: int, batch: int, seed: int = 0,
                prefix: list[int] | None = None, eps: float = 0.3, causal: bool = True,
                chunk: int = 4) -> dict:
    """Sink statistics of one input kind and length, in chunks of ``chunk`` sequences.

    Returns ``{"rate": (n,) share of (sequence, layer, head) with alpha_k > eps per position k,
    "rate_first_lh": (L, H) share of sequences with alpha_1 > eps, "alpha_first_l": (L,) mean
    alpha_1 per layer, "alpha_mean": (n,) mean alpha_k}`` as lists. For an encoder
    (``causal=False``) the ids are wrapped in ``[CLS] ... [SEP]``.
    """
    body = n_tokens if causal else n_tokens - 2
    ids = token_batch(tokenizer, kind, body, batch, seed=seed, prefix=prefix)
    if not causal:
        ids = with_special(tokenizer, ids)
    alphas = []
    for s in range(0, batch, chunk):
        alphas.append(sink_alpha(attention_maps(model, ids[s:s + chunk]), causal=causal))
    alpha = torch.cat(alphas)                                   # (B, L, H, n)
    return {"rate": sink_rate(alpha, eps).tolist(),
            "rate_first_lh": sink_rate(alpha[..., 0], eps, dims=(0,)).tolist(),
            "alpha_first_l": alpha[..., 0].mean(dim=(0, 2)).tolist(),
            "alpha_mean": alpha.mean(dim=(0, 1, 2)).tolist()}


@torch.no_grad()
def rollout_survey(model, tokenizer, n_tokens: int, batch: int, seed: int = 0) -> dict:
    """Mass on the first position of Wu et al.'s rollout over the real layers, heads averaged.

    For natural text windows of ``n_tokens``: per layer ``t`` (``(L,)`` lists), the mean over rows
    ``i`` and sequences of ``P(t)_{i1}`` and the minimum over rows, without and with the residual
    term; the same after removing the sink (position 1, rows renormalised), where "first" is the
    original position 2; and under uniform causal attention (the mask alone).
    """
    ids = token_batch(tokenizer, "natural", n_tokens, batch, seed=seed)
    out: dict = {}
    acc: dict[str, list[torch.Tensor]] = {}
    for s in range(batch):
        a = attention_maps(model, ids[s:s + 1])                 # (1, L, H, n, n)
        for res in (False, True):
            tag = "res" if res else "nores"
            for name, att in (("sink", a), ("nosink", drop_position(a, 0))):
                p1 = head_mean_rollout(att, res)[..., 0]        # (1, L, n)
                acc.setdefault(f"{name}_{tag}_mean", []).append(p1.mean(-1))
                acc.setdefault(f"{name}_{tag}_min", []).append(p1.amin(-1))
    for key, v in acc.items():
        out[key] = torch.cat(v).mean(0).tolist()
    n_layers = model.config.num_hidden_layers
    for res in (False, True):
        tag = "res" if res else "nores"
        for name, n in (("uniform", n_tokens), ("uniform_nosink", n_tokens - 1)):
            p1 = rollout(uniform_causal(n, n_layers), residual=res)[..., 0]
            out[f"{name}_{tag}_mean"] = p1.mean(-1).tolist()
            out[f"{name}_{tag}_min"] = p1.amin(-1).tolist()
    return out
