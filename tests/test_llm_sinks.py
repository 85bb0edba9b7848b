"""posbias.llm.sinks: Gu et al.'s alpha_k, sink rates and the rollout, by hand and on a tiny Llama."""
from __future__ import annotations


import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posbias import llm

torch.set_num_threads(1)


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


def test_first_over_rest():
    """sinks-real-decoder's two "far above every other position" checks read it. A threshold that no
    alpha reaches (make fuzz: eps = 1.0) gives all-zero rates: 0, not a tie that passes ``0 >= 5 * 0``
    and not the ZeroDivisionError it raised."""
    assert llm.first_over_rest(torch.tensor([0.6, 0.1, 0.12])) == pytest.approx(5.0)
    assert llm.first_over_rest([0.3, 0.0, 0.0]) == float("inf")
    assert llm.first_over_rest(torch.zeros(4)) == 0.0
    assert llm.first_over_rest([0.0, 0.2]) == 0.0
    assert llm.first_over_rest([0.1, 0.5]) == pytest.approx(0.2)


@pytest.mark.parametrize("batch", [2, 4, 5, 6, 8])
def test_far_above_is_decided_where_one_sequence_cannot_fail_it(batch):
    """Typical sequences sink on token 1 in 60% of their (layer, head) pairs and nowhere else; one of
    them also sinks on token 3 wherever it sinks on token 1. That one sequence takes the ratio to
    ``batch``: it fails the check exactly where ``far_above_decided`` says the batch is too small."""
    alpha = torch.zeros(batch, 5, 4, 8)
    alpha[:, :3, :, 0] = 0.9                                   # 3 of 5 layers: a rate of 0.6 at token 1
    alpha[0, :3, :, 2] = 0.9                                   # the one sequence with a second sink
    ratio = llm.first_over_rest(llm.sink_rate(alpha))
    assert ratio == pytest.approx(batch)
    assert (ratio >= llm.FAR_ABOVE) == llm.far_above_decided(batch)


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


def test_with_special_wraps_each_row_in_one_cls_and_one_sep():
    class Tok:
        cls_token_id, sep_token_id = 101, 102

    ids = torch.tensor([[5, 6, 7], [8, 9, 10]])
    out = llm.sinks.with_special(Tok(), ids)
    assert out.tolist() == [[101, 5, 6, 7, 102], [101, 8, 9, 10, 102]]


def test_sink_alpha_keeps_the_counts_on_the_attention_device():
    """The per-key query counts n..1 are made on ``attn``'s device: on the meta device (shapes, no data, no
    GPU needed) a count tensor left on the CPU raises a device mismatch. Shape and device come back intact."""
    a = torch.empty(2, 4, 4, device="meta")
    alpha = llm.sink_alpha(a)
    assert alpha.device.type == "meta" and alpha.shape == (2, 4)
    assert llm.sink_alpha(a, causal=False).device.type == "meta"
