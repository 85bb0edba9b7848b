"""StreamingLLM: a KV cache that keeps the first ``k`` tokens (sinks) and a window of the ``w`` most
recent, and the next-token losses along a stream with it and with the full cache.

Shapes: ``B`` streams, ``n`` tokens.
"""
from __future__ import annotations

import torch

__all__ = ["StreamingCache", "stream_nll", "full_nll", "stream_curves"]


def _rotate(x: torch.Tensor, pos: torch.Tensor, inv_freq: torch.Tensor) -> torch.Tensor:
    """Llama's RoPE (halves convention) at positions ``pos`` ``(m,)`` on ``x`` ``(b, h, m, d)``."""
    freqs = pos.to(torch.float32)[:, None] * inv_freq[None, :].float()
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
    return x * cos + torch.cat((-x2, x1), dim=-1) * sin


class StreamingCache:
    """A KV cache holding the first ``k`` tokens (sinks) and the ``w`` most recent, as StreamingLLM.

    Keys are kept un-rotated; after every step the cached keys are re-rotated at their *index in
    the cache* (``0..k+w-1``), so positions are re-indexed inside the cache and never exceed
    ``k + w``. ``w = None`` keeps everything at its true position (the full cache). ``kept`` lists
    the stream positions currently cached, in cache order. Eviction happens before a token is
    fed, so the token being predicted from attends to at most ``k + w`` entries, itself included.
    """

    def __init__(self, model, k: int, w: int | None):
        from transformers import DynamicCache  # lazy: transformers costs ~0.9s at import

        if k < 0 or (w is not None and w < 1):
            raise ValueError(f"need k >= 0 and w >= 1, got k={k}, w={w}")
        self.model, self.k, self.w = model, k, w
        self.cache = DynamicCache(config=model.config)
        self.inv_freq = model.model.rotary_emb.inv_freq
        self.raw: list[torch.Tensor] = []      # per layer: un-rotated keys (B, h_kv, m, d)
        self.kept: list[int] = []
        self.t = 0                              # stream positions consumed

    @property
    def capacity(self) -> int | None:
        return None if self.w is None else self.k + self.w

    @torch.no_grad()
    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        """Feed one token per stream, ``(B,)``; return the next-token logits ``(B, vocab)``.

        The ``B`` streams advance in lock step, so they share positions and evictions.
        """
        if self.capacity is not None and len(self.kept) >= self.capacity:
            self._evict(len(self.kept) - self.capacity + 1)
        pos = self.t if self.w is None else len(self.kept)
        tokens = torch.as_tensor(tokens).reshape(-1, 1)
        out = self.model(input_ids=tokens, past_key_values=self.cache,
                         position_ids=torch.full_like(tokens, pos), use_cache=True)
        self.kept.append(self.t)
        self.t += 1
        p = torch.tensor([pos])
        for li, layer in enumerate(self.cache.layers):
            new = _rotate(layer.keys[:, :, -1:], -p, self.inv_freq)
            if li < len(self.raw):
                self.raw[li] = torch.cat([self.raw[li], new], dim=-2)
            else:
                self.raw.append(new)
        return out.logits[:, -1]

    def _evict(self, n_out: int) -> None:
        k = self.k
        keep = list(range(k)) + list(range(k + n_out, len(self.kept)))
        idx = torch.tensor(keep, dtype=torch.long)
        self.kept = [self.kept[j] for j in keep]
        pos = torch.arange(len(keep))
        for li, layer in enumerate(self.cache.layers):
            self.raw[li] = self.raw[li].index_select(-2, idx)
            layer.keys = _rotate(self.raw[li], pos, self.inv_freq)
            layer.values = layer.values.index_select(-2, idx)


@torch.no_grad()
def stream_nll(model, ids: torch.Tensor, k: int, w: int | None) -> torch.Tensor:
    """Token-by-token negative log-likelihood with a StreamingLLM cache: ``(B, n) -> (B, n-1)``.

    Entry ``[b, t]`` is ``-log p(ids[b, t+1] | cache after ids[b, :t+1])``.
    """
    cache = StreamingCache(model, k, w)
    nll = torch.empty(ids.shape[0], ids.shape[1] - 1)
    for t in range(ids.shape[1] - 1):
        logp = torch.log_softmax(cache.step(ids[:, t]).float(), dim=-1)
        nll[:, t] = -logp.gather(-1, ids[:, t + 1, None])[:, 0]
    return nll


@torch.no_grad()
def full_nll(model, ids: torch.Tensor) -> torch.Tensor:
    """The same quantity from one forward pass over each whole stream (the full cache): ``(B, n) -> (B, n-1)``."""
    logits = model(input_ids=ids).logits[:, :-1].float()
    return -torch.log_softmax(logits, dim=-1).gather(-1, ids[:, 1:, None])[..., 0]


def stream_curves(model, ids: torch.Tensor, windows: list[int], sinks: list[int]) -> dict:
    """Next-token loss along the stream for the full cache and every StreamingLLM cache.

    ``ids``: ``(B, n)`` token ids, the ``B`` streams run in lock step. Returns ``{"full": (n-1,),
    "stream": {"<k>-<w>": (n-1,)}}`` as lists: entry ``t`` is ``-log p(ids[:, t+1] | ids[:, :t+1])``
    in nats, averaged over the ``B`` streams, for the full cache (:func:`full_nll`) and for the cache
    keeping ``k`` sinks and a window of ``w`` (:func:`stream_nll`), for every ``w`` in ``windows``
    and ``k`` in ``sinks``.
    """
    out: dict = {"full": full_nll(model, ids).mean(0).tolist(), "stream": {}}
    for w in windows:
        for k in sinks:
            out["stream"][f"{k}-{w}"] = stream_nll(model, ids, k=k, w=w).mean(0).tolist()
    return out
