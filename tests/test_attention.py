"""Property tests of posbias.science.attention."""
import math

import pytest
import torch
from hypothesis import given, settings, strategies as st

from posbias.science.attention import (apply_rope, decay_bias, masked_softmax, random_attention_stack,
                                       rope_angles, sinusoidal_pe)
from posbias.science.masks import make_mask

MASK = st.sampled_from(["full", "causal", "window", "prefix"])


@settings(max_examples=60, deadline=None)
@given(MASK, st.integers(1, 16), st.integers(1, 8), st.floats(0.0, 1e3), st.integers(0, 10**6))
def test_masked_softmax_rows_are_distributions_on_the_mask(kind, n, w, scale, seed):
    mask = make_mask(kind, n, window=min(w, n), prefix=min(w, n))
    g = torch.Generator().manual_seed(seed)
    logits = (torch.rand(3, n, n, generator=g, dtype=torch.float64) * 2 - 1) * scale
    a = masked_softmax(logits, mask)
    assert torch.isfinite(a).all() and (a >= 0).all()
    assert torch.allclose(a.sum(-1), torch.ones(3, n, dtype=torch.float64), atol=1e-12)
    assert (a[:, ~mask] == 0).all()  # a token never sees a position its mask forbids


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 8), st.integers(0, 10**6), st.floats(10.0, 1e5))
def test_rope_preserves_norms(half_d, seed, base):
    d, n = 2 * half_d, 11
    x = torch.randn(n, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    y = apply_rope(x, rope_angles(n, d, base))
    assert torch.allclose(y.norm(dim=-1), x.norm(dim=-1), rtol=1e-12)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 8), st.integers(0, 10**6), st.integers(0, 50))
def test_rope_scores_depend_only_on_relative_position(half_d, seed, shift):
    d, n = 2 * half_d, 12
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(d, generator=g, dtype=torch.float64), torch.randn(d, generator=g, dtype=torch.float64)
    ang = rope_angles(n + shift, d)
    qs, ks = apply_rope(q.expand(n + shift, d), ang), apply_rope(k.expand(n + shift, d), ang)
    s = qs @ ks.T  # s[i, j] for positions i, j
    # shifting both positions by `shift` leaves the score unchanged
    assert torch.allclose(s[:n, :n], s[shift:, shift:], atol=1e-10)


def test_rope_rotates_each_interleaved_pair_by_hand():
    """Pairs are (x[2p], x[2p+1]): angle 0 leaves a vector as it is, a quarter turn on pair 0 sends
    (a, b) to (-b, a) and leaves pair 1 alone. Sees an output written pair-major instead of
    interleaved (a permutation of coordinates: norms and relative-position scores cannot see it)."""
    x = torch.tensor([[1.0, 2.0, 3.0, 4.0]], dtype=torch.float64)
    assert torch.equal(apply_rope(x, torch.zeros(1, 2, dtype=torch.float64)), x)
    quarter = apply_rope(x, torch.tensor([[math.pi / 2, 0.0]], dtype=torch.float64))
    assert torch.allclose(quarter, torch.tensor([[-2.0, 1.0, 3.0, 4.0]], dtype=torch.float64), atol=1e-15)


def test_decay_bias_multiplies_by_gamma_power():
    n, m = 6, 0.7
    a = masked_softmax(decay_bias(n, m), make_mask("causal", n))
    assert torch.allclose(a[5, 3] / a[5, 4], torch.tensor(math.exp(-m), dtype=torch.float64))


def test_sinusoidal_pe_shape_and_range():
    pe = sinusoidal_pe(10, 8)
    assert pe.shape == (10, 8) and pe.abs().max() <= 1
    assert torch.allclose(pe[0, 0::2], torch.zeros(4)) and torch.allclose(pe[0, 1::2], torch.ones(4))


def test_sinusoidal_pe_angles_are_float64_at_long_range():
    """Against the formula in float64 at positions up to 4,095: angles formed in float32 are off by
    up to about 2e-4 there (float32's spacing at 4,096 is 4.9e-4), far above float64 rounding."""
    n, d = 4096, 16
    pe = sinusoidal_pe(n, d, dtype=torch.float64)
    pos = torch.arange(n, dtype=torch.float64)[:, None]
    ang = pos / 10000.0 ** (torch.arange(0, d, 2, dtype=torch.float64) / d)
    assert torch.allclose(pe[:, 0::2], torch.sin(ang), rtol=0, atol=1e-12)
    assert torch.allclose(pe[:, 1::2], torch.cos(ang), rtol=0, atol=1e-12)


@settings(max_examples=15, deadline=None)
@given(MASK, st.integers(2, 10), st.integers(1, 4), st.floats(0.5, 3.0), st.integers(0, 1000))
def test_random_stack_respects_logit_bound(kind, n, w, weight_norm, seed):
    """A1-A2: every allowed edge has weight >= e^{-2B} / (allowed positions in the row)."""
    mask = make_mask(kind, n, window=min(w, n), prefix=min(w, n))
    attn, bound = random_attention_stack(mask, 3, weight_norm=weight_norm, samples=2, seed=seed)
    allowed = mask.sum(-1, keepdim=True).double()
    floor = math.exp(-2 * bound) / allowed
    assert ((attn >= floor * (1 - 1e-12)) | ~mask).all()
    assert torch.allclose(attn.sum(-1), torch.ones_like(attn.sum(-1)))


def test_random_stack_first_layer_by_hand():
    """The construction the docstring states, written out for layer 1: rows of X(0) on the unit sphere,
    W_Q, W_K rescaled to spectral norm ``weight_norm``, A(0) = softmax_mask(X W_Q (X W_K)^T / sqrt(d)); and the
    bound B = weight_norm^2 / sqrt(d) (at weight_norm = 3, d = 16: 9/4, where 2 weight_norm / sqrt(d) is 6/4)."""
    mask, (s, n, d, w) = make_mask("causal", 5), (2, 5, 16, 3.0)
    attn, bound = random_attention_stack(mask, 2, d=d, weight_norm=w, samples=s, seed=7)
    assert bound == 9 / 4
    g = torch.Generator().manual_seed(7)
    x = torch.randn(s, n, d, generator=g, dtype=torch.float64)
    x = x / x.norm(dim=-1, keepdim=True)
    wq, wk = (torch.randn(s, d, d, generator=g, dtype=torch.float64) for _ in range(2))
    wq, wk = (m / torch.linalg.matrix_norm(m, ord=2)[:, None, None] * w for m in (wq, wk))
    a0 = masked_softmax((x @ wq) @ (x @ wk).transpose(-1, -2) / math.sqrt(d), mask)
    assert torch.allclose(attn[:, 0], a0, rtol=1e-12, atol=1e-15)


def test_rope_refuses_an_odd_width_and_says_why():
    with pytest.raises(ValueError, match="RoPE needs an even width, got d=5"):
        rope_angles(4, 5)


def test_random_stacks_default_to_seed_zero_and_apply_rope_when_given_a_base():
    from posbias.science.attention import iter_random_attention

    mask = make_mask("causal", 6)
    plain, _ = random_attention_stack(mask, 2, samples=2)
    assert torch.equal(plain, random_attention_stack(mask, 2, samples=2, seed=0)[0])
    roped = torch.stack(list(iter_random_attention(mask, 2, samples=2, rope_base=100.0)), 1)
    assert torch.equal(roped, random_attention_stack(mask, 2, samples=2, rope_base=100.0)[0])
    assert not torch.allclose(roped, plain, atol=1e-6)                # rotated queries and keys move the weights


def test_a_mask_row_with_nothing_allowed_is_refused_by_name():
    mask = torch.ones(3, 3, dtype=torch.bool)
    mask[1] = False
    with pytest.raises(ValueError, match="every row of the mask must allow at least one position"):
        masked_softmax(torch.zeros(3, 3), mask)


def test_masked_softmax_rejects_an_empty_row_in_a_batched_mask():
    """A (1, 2, 2) mask whose second row allows nothing while every column is allowed somewhere: refused with
    the documented message. Sees the check run along dim 1 (columns of a batched mask) or a changed message."""
    mask = torch.tensor([[[True, True], [False, False]]])
    with pytest.raises(ValueError, match="^every row of the mask must allow at least one position$"):
        masked_softmax(torch.zeros(1, 2, 2), mask)


def test_rope_angles_default_base_is_ten_thousand():
    """d = 4: theta = (1, 10000^(-1/2)) = (1, 0.01), so position 1's angles are exactly (1, 0.01) by hand.
    Sees a different default base (10001 gives 0.0099995)."""
    from posbias.science.attention import rope_angles

    ang = rope_angles(2, 4)
    assert ang[0].tolist() == [0.0, 0.0]
    assert ang[1, 0].item() == 1.0 and ang[1, 1].item() == pytest.approx(0.01, rel=1e-12)


def test_sinusoidal_pe_uses_the_base_it_is_given():
    """base 100, d = 4: theta = (1, 100^(-1/2)) = (1, 0.1), so position 2's row is
    (sin 2, cos 2, sin 0.2, cos 0.2) by hand. Sees the base dropped (10,000 gives theta_1 = 0.01)."""
    pe = sinusoidal_pe(3, 4, base=100.0, dtype=torch.float64)
    want = [math.sin(2.0), math.cos(2.0), math.sin(0.2), math.cos(0.2)]
    assert pe[2].tolist() == pytest.approx(want, rel=0, abs=1e-15)


def test_decay_bias_in_int8_is_the_closed_form_within_127_positions():
    """dtype int8, n = 200, m = 1: positions past 127 wrap in i and in j alike, and the wrap cancels in
    i - j, so every pair less than 128 apart (the whole of an 8-bit window) still gets -(i - j) below the
    diagonal and 0 above it, by hand. Sees i formed in int64 while j wraps (then i - j is off by 256)."""
    b = decay_bias(200, 1, dtype=torch.int8)
    k = torch.arange(200)[:, None] - torch.arange(200)[None, :]
    near = k.abs() < 128
    assert torch.equal(b[near].double(), (-k[near]).clamp(max=0).double())
    assert b[150, 140] == -10 and b[140, 150] == 0


def test_decay_bias_is_zero_at_rate_zero_and_refuses_a_negative_rate():
    """m = 0 is no decay: the bias is 0 everywhere, by hand; m < 0 is refused with the rule it breaks."""
    assert torch.equal(decay_bias(4, 0.0), torch.zeros(4, 4, dtype=torch.float64))
    with pytest.raises(ValueError, match=r"^decay rate m must be >= 0, got -0\.5$"):
        decay_bias(4, -0.5)


def test_random_stacks_default_to_one_sample():
    """Without ``samples`` one stack is drawn: shapes ``(1, depth, n, n)`` and ``(1, n, n)`` per layer."""
    from posbias.science.attention import iter_random_attention

    mask = make_mask("causal", 5)
    assert random_attention_stack(mask, 2)[0].shape == (1, 2, 5, 5)
    assert [a.shape for a in iter_random_attention(mask, 2)] == [(1, 5, 5)] * 2


@pytest.mark.parametrize("shape", [(1, 6), (1, 1, 6)])
def test_random_stack_takes_the_token_count_from_a_broadcast_mask_row(shape):
    """A full mask given as one broadcast row (masked_softmax takes any mask broadcastable to the logits):
    with weight_norm = 0 every logit is 0, so every layer attends uniformly, 1/6 everywhere, by hand."""
    mask = torch.ones(shape, dtype=torch.bool)
    attn, bound = random_attention_stack(mask, 2, weight_norm=0.0, samples=2)
    assert bound == 0.0
    assert torch.allclose(attn, torch.full((2, 2, 6, 6), 1 / 6, dtype=torch.float64), rtol=0, atol=1e-15)


def _stack_by_hand(mask: torch.Tensor, depth: int, d: int, w: float, s: int, seed: int, base: float) -> torch.Tensor:
    """The docstring's construction in a plain loop, with RoPE as complex multiplication of the pairs
    ``x[2p] + i x[2p+1]`` by ``e^{i pos theta_p}`` and the mask as ``-inf`` logits."""
    n = mask.shape[-1]
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(s, n, d, generator=g, dtype=torch.float64)
    x = x / x.norm(dim=-1, keepdim=True)

    def unit(scale: float) -> torch.Tensor:
        m = torch.randn(s, d, d, generator=g, dtype=torch.float64)
        return m / torch.linalg.matrix_norm(m, ord=2)[:, None, None] * scale

    theta = torch.tensor([base ** (-2 * p / d) for p in range(d // 2)], dtype=torch.float64)
    turn = torch.polar(torch.ones(n, d // 2, dtype=torch.float64), torch.arange(n)[:, None] * theta)
    out = []
    for _ in range(depth):
        wq, wk, wv = unit(w), unit(w), unit(1.0)
        q, k = x @ wq, x @ wk
        qc, kc = (torch.complex(v[..., 0::2], v[..., 1::2]) * turn for v in (q, k))
        logits = (qc @ kc.conj().transpose(-1, -2)).real / math.sqrt(d)
        a = torch.softmax(logits.masked_fill(~mask, -math.inf), dim=-1)
        out.append(a)
        x = a @ x @ wv
    return torch.stack(out, 1)


def test_random_rope_stack_matches_the_construction_by_hand_over_two_layers():
    """Two layers at d = 8, weight_norm = 2, RoPE base 100, against the loop above: sees the width, the base
    and W_V's unit norm (layer 2 reads X(1) = A X(0) W_V); the bound is 4 / sqrt(8)."""
    mask = make_mask("window", 6, window=3)
    attn, bound = random_attention_stack(mask, 2, d=8, weight_norm=2.0, samples=2, seed=3, rope_base=100.0)
    assert bound == pytest.approx(4 / math.sqrt(8), rel=1e-15)
    assert torch.allclose(attn, _stack_by_hand(mask, 2, 8, 2.0, 2, 3, 100.0), rtol=1e-10, atol=1e-14)


def test_rope_angles_refuse_an_integer_dtype():
    """Integer positions would wrap (int8 holds 127 at most) and the angles be wrong: refused, naming the fix."""
    with pytest.raises(ValueError, match="pass a floating dtype, got torch.int8"):
        rope_angles(200, 4, dtype=torch.int8)
    assert rope_angles(3, 2, dtype=torch.float32).dtype == torch.float32
