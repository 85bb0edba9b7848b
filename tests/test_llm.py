"""Tests of posbias.llm on a tiny randomly initialised Llama (the real model's code path)."""
from __future__ import annotations

import json

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posbias import llm

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def one_layer():
    return llm.tiny_llama(n_layers=1, seed=0)


@pytest.fixture(scope="module")
def two_layers():
    return llm.tiny_llama(n_layers=2, seed=1)


# --- streaming cache ------------------------------------------------------------------------


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


# --- sink metric ----------------------------------------------------------------------------


def test_sink_alpha_causal_by_hand():
    a = torch.tensor([[1.0, 0, 0], [0.5, 0.5, 0], [0.2, 0.2, 0.6]])
    alpha = llm.sink_alpha(a)
    assert torch.allclose(alpha, torch.tensor([1.7 / 3, 0.7 / 2, 0.6]))
    assert torch.allclose(llm.sink_alpha(a, causal=False), a.sum(0) / 3)


@settings(max_examples=30, deadline=None)
@given(n=st.integers(2, 12), seed=st.integers(0, 1000))
def test_sink_alpha_of_uniform_causal(n, seed):
    """Uniform causal attention: alpha_k = (H_n - H_k) / (n - k) in closed form (1-based k)."""
    a = llm.uniform_causal(n, 1)[0]
    h = torch.cumsum(1.0 / torch.arange(1, n + 1, dtype=torch.float64), 0)
    k = torch.arange(1, n + 1)
    expect = (h[-1] - h + 1.0 / k) / (n - k + 1)
    assert torch.allclose(llm.sink_alpha(a), expect)


def test_sink_rate_counts_threshold():
    alpha = torch.zeros(2, 3, 4, 5)
    alpha[..., 0] = 0.9
    alpha[0, 0, 0, 1] = 0.31
    alpha[1, 0, 0, 2] = 0.3                      # not strictly above eps
    r = llm.sink_rate(alpha, eps=0.3)
    assert r.shape == (5,)
    assert r[0] == 1.0 and r[1] == pytest.approx(1 / 24) and r[2] == 0.0
    assert llm.sink_rate(alpha, dims=(0,)).shape == (3, 4, 5)


def test_sink_metric_on_tiny_llama(two_layers):
    ids = torch.randint(3, 128, (2, 12), generator=torch.Generator().manual_seed(0))
    a = llm.attention_maps(two_layers, ids)
    assert a.shape == (2, 2, 4, 12, 12)
    assert torch.allclose(a.sum(-1), torch.ones(2, 2, 4, 12), atol=1e-5)
    assert torch.all(a.triu(1) == 0)
    alpha = llm.sink_alpha(a)
    assert alpha[..., 0].min() > 0 and alpha.max() <= 1 + 1e-6


def test_drop_position_renormalises():
    a = llm.uniform_causal(6, 2)
    d = llm.drop_position(a, 0)
    assert d.shape == (2, 5, 5)
    assert torch.allclose(d, llm.uniform_causal(5, 2))


def test_head_mean_rollout_shape(two_layers):
    ids = torch.randint(3, 128, (1, 8))
    p = llm.head_mean_rollout(llm.attention_maps(two_layers, ids))
    assert p.shape == (1, 2, 8, 8)
    assert torch.allclose(p.sum(-1), torch.ones(1, 2, 8, dtype=p.dtype))


# --- retrieval task -------------------------------------------------------------------------


@settings(max_examples=30, deadline=None)
@given(n=st.integers(1, 30), data=st.data())
def test_kv_example_places_the_evidence(n, data):
    gold = data.draw(st.integers(0, n - 1))
    ex = llm.kv_example(n, gold, seed=data.draw(st.integers(0, 10**6)))
    assert len(ex.pairs) == n and ex.pairs[gold] == (ex.key, ex.value)
    strings = [s for p in ex.pairs for s in p]
    assert len(set(strings)) == 2 * n
    prompt = llm.kv_prompt(ex)
    obj = json.loads(prompt[prompt.index("{"): prompt.index("}") + 1])
    assert list(obj.items()) == list(ex.pairs)              # order preserved: gold is item `gold`
    assert prompt.endswith(f'The value corresponding to the key "{ex.key}" is "')
    assert f'Key: "{ex.key}"' in prompt


def test_kv_example_is_deterministic_and_checked():
    assert llm.kv_example(5, 2, seed=3) == llm.kv_example(5, 2, seed=3)
    with pytest.raises(ValueError):
        llm.kv_example(5, 5, seed=0)


def test_copied_pair():
    ex = llm.kv_example(4, 1, seed=0)
    assert llm.copied_pair(ex, ' "' + ex.pairs[3][1] + '"') == 3
    assert llm.copied_pair(ex, ex.value + '" and more') == 1
    assert llm.copied_pair(ex, ex.pairs[2][1][:5]) == 2            # truncated answer, prefix match
    assert llm.copied_pair(ex, ex.pairs[0][0]) == -2
    assert llm.copied_pair(ex, "no idea") == -1


def test_token_batch_kinds():
    class Tok:
        all_special_ids = [0, 1, 2]

        def __len__(self):
            return 100

        def __call__(self, text, add_special_tokens=False):
            return {"input_ids": [3 + (ord(c) % 90) for c in text[:5000]]}

    tok = Tok()
    nat = llm.token_batch(tok, "natural", 16, 3, seed=0)
    rnd = llm.token_batch(tok, "random", 16, 3, seed=0, prefix=[1])
    rep = llm.token_batch(tok, "repeated", 16, 3, seed=0)
    assert nat.shape == rnd.shape == rep.shape == (3, 16)
    assert (rnd[:, 0] == 1).all() and (rnd[:, 1:] >= 3).all()
    assert (rep == rep[:, :1]).all()
    with pytest.raises(ValueError):
        llm.token_batch(tok, "other", 4, 1)
