"""posbias.llm.streaming: the sink-plus-window cache on a tiny randomly initialised Llama."""
from __future__ import annotations


import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posbias import llm

torch.set_num_threads(1)


def test_large_cache_equals_full_forward(two_layers):
    ids = torch.randint(3, 128, (2, 30), generator=torch.Generator().manual_seed(0))
    full = llm.full_nll(two_layers, ids)
    assert torch.allclose(llm.stream_nll(two_layers, ids, k=0, w=None), full, atol=1e-5)
    assert torch.allclose(llm.stream_nll(two_layers, ids, k=4, w=100), full, atol=1e-5)


def test_small_cache_differs_from_full(two_layers):
    ids = torch.randint(3, 128, (1, 30), generator=torch.Generator().manual_seed(1))
    full = llm.full_nll(two_layers, ids)
    part = llm.stream_nll(two_layers, ids, k=1, w=4)
    assert torch.allclose(part[:, :4], full[:, :4], atol=1e-5)   # nothing evicted yet
    assert (part[:, 10:] - full[:, 10:]).abs().max() > 1e-3


@settings(max_examples=15, deadline=None)
@given(k=st.integers(0, 3), w=st.integers(1, 6), n=st.integers(1, 25))
def test_eviction_keeps_sinks_and_recent(one_layer, k, w, n):
    cache = llm.StreamingCache(one_layer, k, w)
    for t in range(n):
        cache.step(torch.tensor([5 + t % 50]))
        assert len(cache.kept) <= k + w
        assert cache.cache.layers[0].keys.shape[-2] == len(cache.kept)
    expect = sorted(set(range(min(k, n))) | set(range(max(0, n - w), n))) if n > k + w else list(range(n))
    assert cache.kept == expect


@settings(max_examples=10, deadline=None)
@given(k=st.integers(0, 3), w=st.integers(1, 6), n=st.integers(8, 24))
def test_reindexed_positions_match_a_fresh_forward(one_layer, k, w, n):
    """One layer: keys depend only on token and position, so the streamed logits must equal a fresh
    forward pass over the cached tokens at positions 0..len-1 (StreamingLLM's re-indexing)."""
    ids = torch.randint(3, 128, (2, n), generator=torch.Generator().manual_seed(n))
    cache = llm.StreamingCache(one_layer, k, w)
    for t in range(n):
        logits = cache.step(ids[:, t])
    fresh = one_layer(input_ids=ids[:, cache.kept]).logits[:, -1]
    assert torch.allclose(logits, fresh, atol=1e-5)


def test_true_positions_would_not_match(one_layer):
    """The same comparison fails if the cache kept the true positions: re-indexing matters."""
    ids = torch.randint(3, 128, (1, 20), generator=torch.Generator().manual_seed(3))
    cache = llm.StreamingCache(one_layer, 1, 4)
    for t in range(20):
        logits = cache.step(ids[:, t])
    pos = torch.tensor([cache.kept])
    true_pos = one_layer(input_ids=ids[:, cache.kept], position_ids=pos).logits[:, -1]
    assert not torch.allclose(logits, true_pos, atol=1e-4)


def test_cache_rejects_bad_sizes(one_layer):
    with pytest.raises(ValueError):
        llm.StreamingCache(one_layer, -1, 4)
    with pytest.raises(ValueError):
        llm.StreamingCache(one_layer, 1, 0)
