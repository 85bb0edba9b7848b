"""posbias.llm.retrieval: the key-value retrieval task's examples and batches."""
from __future__ import annotations

import json

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_helpers import _Tok

from posbias import llm

torch.set_num_threads(1)


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
    tok = _Tok()
    nat = llm.token_batch(tok, "natural", 16, 3, seed=0)
    rnd = llm.token_batch(tok, "random", 16, 3, seed=0, prefix=[1])
    rep = llm.token_batch(tok, "repeated", 16, 3, seed=0)
    assert nat.shape == rnd.shape == rep.shape == (3, 16)
    assert (rnd[:, 0] == 1).all() and (rnd[:, 1:] >= 3).all()
    assert (rep == rep[:, :1]).all()
    with pytest.raises(ValueError):
        llm.token_batch(tok, "other", 4, 1)
