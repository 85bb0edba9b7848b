"""Property tests of posbias.rollout."""
import torch
from hypothesis import given, settings, strategies as st

from posbias.attention import iter_random_attention, masked_softmax, random_attention_stack
from posbias.masks import make_mask, reachability
from posbias.rollout import first_position_mass, layers_to_reach, rollout, row_powers, stream_rollout

MASK = st.sampled_from(["full", "causal", "window", "prefix"])


def _mask(kind, n, w):
    return make_mask(kind, n, window=min(w, n), prefix=min(w, n))


@settings(max_examples=40, deadline=None)
@given(MASK, st.integers(2, 12), st.integers(1, 6), st.integers(1, 5), st.floats(0.0, 20.0), st.integers(0, 10**6))
def test_rows_of_rollout_are_distributions(kind, n, w, depth, scale, seed):
    mask = _mask(kind, n, w)
    g = torch.Generator().manual_seed(seed)
    logits = (torch.rand(depth, n, n, generator=g, dtype=torch.float64) * 2 - 1) * scale
    p = rollout(masked_softmax(logits, mask))
    assert (p >= 0).all()
    assert torch.allclose(p.sum(-1), torch.ones(depth, n, dtype=torch.float64), atol=1e-12)
    # P(t) only puts mass where walks of t+1 steps on the mask graph can go
    for t in range(depth):
        assert not (p[t][~reachability(mask, t + 1)] != 0).any()


@settings(max_examples=20, deadline=None)
@given(MASK, st.integers(2, 10), st.integers(1, 5), st.integers(1, 4), st.integers(0, 1000))
def test_stream_rollout_equals_rollout(kind, n, w, depth, seed):
    mask = _mask(kind, n, w)
    attn, _ = random_attention_stack(mask, depth, samples=2, seed=seed, weight_norm=2.0)
    layers = list(iter_random_attention(mask, depth, samples=2, seed=seed, weight_norm=2.0))
    assert torch.equal(torch.stack(layers, 1), attn)
    kept, last = stream_rollout(layers, cols=[0])
    full = rollout(attn)
    assert torch.allclose(last, full[:, -1], atol=1e-12)
    assert torch.allclose(kept[..., 0], first_position_mass(full), atol=1e-12)


def test_row_powers_matches_matrix_power():
    a = masked_softmax(torch.randn(7, 7, dtype=torch.float64), make_mask("causal", 7))
    rows = row_powers(a, 5, [1, 3, 4])
    for r, L in zip(rows, [1, 3, 4]):
        assert torch.allclose(r, torch.linalg.matrix_power(a, L)[5], atol=1e-14)


def test_residual_rollout_keeps_half_on_self_after_one_layer():
    a = masked_softmax(torch.zeros(1, 4, 4, dtype=torch.float64), make_mask("causal", 4))
    p = rollout(a, residual=True)[0]
    assert torch.allclose(torch.diagonal(p), 0.5 + 0.5 / torch.arange(1, 5, dtype=torch.float64))


def test_layers_to_reach():
    mass = torch.tensor([[0.1, 0.4, 0.7, 0.9], [0.0, 0.0, 0.1, 0.2]])
    assert layers_to_reach(mass, 0.5).tolist() == [3, -1]
