"""Each real-model chapter's record: every measurement it stores (``store.cached``), with its cost, and
registered for ``posbias check-data`` (``@recomputable``) beside the function it recomputes.
"""
from __future__ import annotations

import resource
import time
from typing import Callable

from posbias.storage.recompute import recomputable
from posbias.llm.loading import load_decoder, load_encoder, token_batch
from posbias.llm.retrieval import answer_tokens as tokens_for, evidence_positions, kv_example, kv_prompt, retrieval_rows
from posbias.llm.sinks import rollout_survey, sink_survey
from posbias.llm.streaming import stream_curves

__all__ = ["sink_chapter", "streaming_chapter", "retrieval_params", "retrieval_chapter"]


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


def retrieval_params(n_pairs: int, trials: int, n_hex: int, seed: int, n_positions: int = 0) -> dict:
    """The ``lost-in-the-middle`` chapter's parameters as :func:`retrieval_chapter` takes them (and the
    store keys them): ``positions`` from :func:`evidence_positions` only when ``n_positions`` is not 0
    (every position), so a record of every position keeps its key; ``answer_tokens``
    (:func:`~posbias.llm.retrieval.answer_tokens`) only where it is not 10, the length every answer had
    before it followed ``n_hex`` (records up to 10 characters keep their key; longer ones, whose answers
    were cut short, get a new one)."""
    params = dict(n_pairs=n_pairs, trials=trials, n_hex=n_hex, seed=seed)
    if n_positions:
        params["positions"] = evidence_positions(n_pairs, n_positions)
    if tokens_for(n_hex) != 10:
        params["answer_tokens"] = tokens_for(n_hex)
    return params


def retrieval_chapter(n_pairs: int, trials: int, n_hex: int, seed: int,
                      positions: list[int] | None = None, answer_tokens: int = 10) -> dict:
    """Every measurement of the ``lost-in-the-middle`` chapter (stored under that name).

    SmolLM2 on Liu et al.'s key-value task, the evidence at ``positions`` (0-based; None: every
    position), greedy answers of ``answer_tokens`` new tokens. Returns a dict: ``"rows"``, the dicts of
    :func:`retrieval_rows`; ``"prompt_tokens"``,
    the token count of the prompt of ``kv_example(n_pairs, 0, seed, n_hex)`` (a typical length);
    ``"wall_s"`` (seconds) and ``"peak_rss_mb"`` (peak resident memory of the process, MB). Runs on
    the current torch threads (the chapter and the committed record: one).
    """
    def compute() -> dict:
        model, tok = load_decoder()
        rows = retrieval_rows(model, tok, n_pairs, trials, n_hex=n_hex, seed=seed, positions=positions,
                              max_new_tokens=answer_tokens)
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
