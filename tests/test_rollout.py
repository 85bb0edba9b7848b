"""Property tests of posbias.science.rollout."""
import math

import pytest
import torch
from hypothesis import given, settings, strategies as st

from posbias.science.attention import iter_random_attention, masked_softmax, random_attention_stack
from posbias.science.masks import make_mask, reachability
from posbias.science.rollout import (causal_bound_ratios, first_position_mass, layers_to_reach, rollout, row_powers,
                                     stream_rollout)

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


def test_row_powers_stops_at_the_deepest_power_asked():
    """A nilpotent shift (row 1 of A is e_0, and e_0 A = 0): A^1 is asked for, A^2 has no positive entry;
    the log rows are defined up to the deepest power asked, and the next one is never formed."""
    a = torch.tensor([[0.0, 0.0], [1.0, 0.0]], dtype=torch.float64)
    assert row_powers(a, 1, [1], log=True).tolist() == [[0.0, -math.inf]]
    with pytest.raises(ValueError, match="row 1 of A\\^2 has no positive entry"):
        row_powers(a, 1, [1, 2], log=True)


def test_residual_rollout_keeps_half_on_self_after_one_layer():
    a = masked_softmax(torch.zeros(1, 4, 4, dtype=torch.float64), make_mask("causal", 4))
    p = rollout(a, residual=True)[0]
    assert torch.allclose(torch.diagonal(p), 0.5 + 0.5 / torch.arange(1, 5, dtype=torch.float64))


def test_layers_to_reach():
    mass = torch.tensor([[0.1, 0.4, 0.7, 0.9], [0.0, 0.0, 0.1, 0.2]])
    assert layers_to_reach(mass, 0.5).tolist() == [3, -1]


def test_causal_bound_ratios_hold_on_random_stacks_and_match_a_direct_count():
    import math

    from posbias.science.masks import causal_mask
    from posbias.science.rollout import causal_bound_ratios

    n, depth = 6, 5
    attn, b = random_attention_stack(causal_mask(n), depth, d=4, weight_norm=1.5, samples=3, seed=1)
    p = rollout(attn)
    r = causal_bound_ratios(attn, p, b)
    assert 0 < r["last"] <= r["generic"] <= 1 and 0 < r["sharp"] <= 1
    eps, eps_min = math.exp(-2 * b) / n, float(attn.masked_select(causal_mask(n)).min())
    generic = sharp = 0.0
    for s in range(3):
        for t in range(depth):
            for i in range(n):
                generic = max(generic, (1 - float(p[s, t, i, 0])) / (1 - eps) ** (t + 1))
                for j in range(1, n):       # 0-based j: j earlier positions
                    sharp = max(sharp, float(p[s, t, i, j:].sum()) / (1 - j * eps_min) ** (t + 1))
    assert math.isclose(r["generic"], generic, rel_tol=1e-9) and math.isclose(r["sharp"], sharp, rel_tol=1e-9)
    last = max((1 - float(p[s, depth - 1, i, 0])) / (1 - eps) ** depth for s in range(3) for i in range(n))
    before = max((1 - float(p[s, depth - 2, i, 0])) / (1 - eps) ** depth for s in range(3) for i in range(n))
    assert math.isclose(r["last"], last, rel_tol=1e-9) and not math.isclose(before, last, rel_tol=1e-3)


def test_first_mass_drops_counts_a_row_that_loses_mass():
    from posbias.science.rollout import first_mass_drops

    a0 = torch.tensor([[1.0, 0, 0], [0.01, 0.99, 0], [0.9, 0.05, 0.05]], dtype=torch.float64)
    a1 = torch.tensor([[1.0, 0, 0], [0.5, 0.5, 0], [0.01, 0.98, 0.01]], dtype=torch.float64)
    p = rollout(torch.stack([a0, a1]))[None]
    assert first_mass_drops(p) == (1, 3)          # row 3 drops (0.9 -> 0.0278); rows 1 and 2 do not
    assert first_mass_drops(rollout(torch.stack([a0, a0]))[None])[0] == 0


def test_drain_summary_on_a_hand_made_mass_curve():
    from posbias.science.rollout import drain_summary

    # two samples, 4 layers, 3 tokens; hop distances 0, 1, 2
    mass = torch.tensor([[[1, 0.0, 0.0], [1, 0.3, 0.2], [1, 0.6, 0.55], [1, 0.9, 0.97]],
                         [[1, 0.0, 0.0], [1, 0.5, 0.1], [1, 0.7, 0.3], [1, 0.8, 0.45]]], dtype=torch.float64)
    s = drain_summary(mass, torch.tensor([0, 1, 2]), level=0.5)
    assert s["never"] == 1 and s["needed"] == 3.0 and s["needed_min"] == 3
    assert not s["reach_ok"]                         # token 2, one hop away, has no mass after 1 layer
    assert abs(s["final_deficit"] - 0.55) < 1e-12
    mass[:, 0, 1] = 0.1                              # now it has: every first contact is at its hop count
    assert drain_summary(mass, torch.tensor([0, 1, 2]), level=0.5)["reach_ok"]
    mass[0, 0, 2] = 0.1                              # token 3 touched position 1 a layer too early
    assert not drain_summary(mass, torch.tensor([0, 1, 2]), level=0.5)["reach_ok"]


def test_prefix_rollout_keeps_the_prefix_columns_and_its_bounds_hold():
    from posbias.science.masks import prefix_mask
    from posbias.science.rollout import prefix_rollout

    n, k, depth = 10, 3, 6
    attn, b = random_attention_stack(prefix_mask(n, k), depth, d=4, weight_norm=1.5, samples=2, seed=3)
    r = prefix_rollout(iter(attn.unbind(1)), k, b)                     # layers (S, n, n), one at a time
    p = rollout(attn)
    assert torch.allclose(r["kept"], p[..., :k], atol=1e-12)
    assert torch.allclose(r["deficit"], 1 - p[..., :k].sum(-1), atol=1e-12)
    mu = attn[..., :k].sum(-1).amin(-1)                                # (S, L)
    drawn = float(((1 - p[..., :k].sum(-1)).amax(-1) / torch.cumprod(1 - mu, 1)).max())
    # bounds, with the round-off the chapter allows (wu-thm-4-3: 1 + 1e-9); 1 + 2.2e-16 here, where one is tight
    assert abs(r["drawn_ratio"] - drawn) < 1e-9 and 0 < r["drawn_ratio"] <= 1 + 1e-9 and r["generic_ratio"] <= 1 + 1e-9
    assert r["share_floor_ok"] and r["share_min"] >= r["a_priori"]
    assert abs(r["final"] - float((1 - p[:, -1, :, :k].sum(-1)).max())) < 1e-12
    eps = math.exp(-2 * b) / n                                          # the generic bound, layer by layer
    generic = max(float((1 - p[:, t, :, :k].sum(-1)).max()) / (1 - k * eps) ** (t + 1) for t in range(depth))
    assert r["a_priori"] == eps and math.isclose(r["generic_ratio"], generic, rel_tol=1e-9)


def test_walk_sum_is_the_product_in_its_order():
    """The chapters' brute-force reference: the sum over walks equals A(t) ... A(0), and not the
    product taken the other way round (non-commuting layers tell the two apart)."""
    from posbias.science.rollout import walk_sum
    g = torch.Generator().manual_seed(3)
    layers = [torch.softmax(torch.randn(4, 4, generator=g, dtype=torch.float64), -1) for _ in range(3)]
    forward = layers[2] @ layers[1] @ layers[0]
    backward = layers[0] @ layers[1] @ layers[2]
    got = torch.tensor([[walk_sum(layers, i, j) for j in range(4)] for i in range(4)], dtype=torch.float64)
    assert torch.allclose(got, forward, atol=1e-14)
    assert (got - backward).abs().max() > 1e-3
    assert walk_sum(layers[:1], 2, 1) == float(layers[0][2, 1])


def test_first_mass_drops_compares_each_layer_with_the_one_before():
    """Three layers: row 0's mass on position 1 goes 0.5 -> 0.9 -> 0.7, one drop (against the layer
    before, not against layer 0, where 0.7 is still a gain)."""
    from posbias.science.rollout import first_mass_drops
    p = torch.zeros(1, 3, 2, 2, dtype=torch.float64)
    p[0, :, 0, 0] = torch.tensor([0.5, 0.9, 0.7], dtype=torch.float64)
    p[0, :, 1, 0] = 0.3
    assert first_mass_drops(p) == (1, 4)


def test_row_powers_log_equals_the_log_of_the_plain_rows():
    a = masked_softmax(torch.randn(9, 9, dtype=torch.float64), make_mask("causal", 9))
    plain = row_powers(a, 8, [1, 2, 7])
    logs = row_powers(a, 8, [1, 2, 7], log=True)
    held = plain > 0
    assert torch.allclose(logs[held], torch.log(plain[held]), rtol=0, atol=1e-13)
    assert (logs[~held] == -torch.inf).all()


def test_row_powers_log_holds_a_row_that_underflows_float64():
    """The last row of ((1-gamma) W)^L, W_ij = gamma^(i-j), is the negative binomial pmf (1-gamma)^L
    C(k+L-1, k) gamma^k: at m = 0.01 and L = 2000 it is below 1e-3000 everywhere (the plain product is
    zero: wu-thm-4-5's check (a) took the max of an empty selection, exit 1, from make fuzz)."""
    import math

    from posbias.science import theory

    n, m, depth = 64, 0.01, 2000
    a = -math.expm1(-m) * theory.decay_weights(n, m)
    assert (row_powers(a, n - 1, [depth]) == 0).all()
    logs = row_powers(a, n - 1, [depth], log=True)[0].flip(0)
    k = torch.arange(n)
    pmf = depth * math.log(-math.expm1(-m)) + theory.decay_profile_log(k, depth, m)
    assert float(logs.max()) < -3000 * math.log(10)
    assert torch.allclose(logs, pmf, rtol=1e-13, atol=1e-10)


def test_row_powers_held_marks_the_entries_underflow_left_exact():
    """make fuzz (wu-thm-4-5, n_identity 553, m 0.1, L 1599): entries lost below float64's range at
    early layers are missing from the entries they feed later, so entries within e^-600 of the row's
    largest were off by up to e^144. The entries `held` marks match the negative binomial to 1e-10;
    every entry is held in a shallow power; held needs log."""
    import math

    import pytest

    from posbias.science import theory

    n, m, depth = 553, 0.1, 1599
    a = -math.expm1(-m) * theory.decay_weights(n, m)
    logs, held = row_powers(a, n - 1, [1, depth], log=True, held=True)
    k = torch.arange(n)
    pmf = depth * math.log(-math.expm1(-m)) + theory.decay_profile_log(k, depth, m)
    meas, ok = logs[1].flip(0), held[1].flip(0)
    err = (meas - pmf).abs()
    assert held[0].all() and 200 < int(ok.sum()) < n
    assert float(err[ok].max()) < 1e-10
    window = meas > meas.max() - 600                         # the rule it replaces
    assert float(err[window].max()) > 100
    with pytest.raises(ValueError, match="needs log=True"):
        row_powers(a, n - 1, [1], held=True)


def test_row_powers_log_refuses_a_row_with_no_positive_entry():
    import pytest

    with pytest.raises(ValueError, match="no positive entry"):
        row_powers(torch.zeros(3, 3, dtype=torch.float64), 2, [1], log=True)


def test_row_powers_refuses_bad_depths_with_the_rule():
    from posbias.science.rollout import row_powers

    a = torch.full((3, 3), 1 / 3, dtype=torch.float64)
    for bad in ([], [0]):
        with pytest.raises(ValueError, match="depths must be a non-empty list of integers >= 1"):
            row_powers(a, 2, bad)


def test_drain_summary_when_the_last_token_never_reaches_the_level():
    from posbias.science.rollout import drain_summary

    mass = torch.tensor([[[1, 0.0, 0.0], [1, 0.3, 0.1], [1, 0.6, 0.2]]], dtype=torch.float64)   # (1, 3, 3)
    s = drain_summary(mass, torch.tensor([0, 1, 1]), level=0.5)
    assert s["never"] == 1 and s["needed_min"] == -1 and math.isnan(s["needed"])


def _held_boundary_matrix(k: float) -> torch.Tensor:
    """4 x 4, row 0: a_00 = 1, a_01 = a_13 = x = 2^-511 (the smallest positive weight), a_23 = k.
    Row 0 of A is [1, x, 0, 0] and of A^2 [1, x, 0, x^2 = 2^-1022], float64's smallest normal number;
    the top entry stays 1, so no scale enters the bounds."""
    x = 2.0 ** -511
    a = torch.zeros(4, 4, dtype=torch.float64)
    a[0, 0], a[0, 1], a[1, 3], a[2, 3] = 1.0, x, x, k
    return a


def test_row_powers_held_counts_no_loss_for_a_product_that_lands_on_the_smallest_normal():
    """The bound by hand, in units of u = 2^-1074 (times 2^1000 inside): layer 1 takes u for each
    v_i < tiny / amin = 2^-511 (the zeros 1..3 of e_0: 3 u on every entry), and entry 2, zero, takes
    4 u (n entries below tiny) and 1 u (after the division): 8 u. Layer 2 carries 8 u * k into entry 3
    and adds u for each v_i < 2^-511: the two zeros, 2 u, not v_1 = 2^-511 itself, whose product
    v_1 a_13 = 2^-1022 is a normal number and loses nothing. With k = 4501 / 8 the bound of entry 3
    is 4503 u, below 1e-12 of it (1e-12 * 2^52 u = 4503.6 u): held. Counting v_1 too (<= instead of
    <) would make it 4504 u and not held."""
    rows, held = row_powers(_held_boundary_matrix(4501 / 8), 0, [2], log=True, held=True)
    assert rows[0, 3].item() == math.log(2.0 ** -1022) and rows[0, 0].item() == 0.0
    assert held.tolist() == [[True, True, False, True]]


def test_row_powers_held_needs_the_bound_strictly_below_1e12_of_the_entry():
    """The same matrix with k = (1e-12 * 2^52 - 2) / 8 (exact in float64): entry 3's bound is
    8 u k + 2 u = 1e-12 * 2^52 u, exactly 1e-12 of its value 2^-1022 in float64, not below it: not
    held (the docstring's rule is "below"; <= would call it held)."""
    k = (1e-12 * 2.0 ** 52 - 2) / 8
    assert 8 * k + 2 == 1e-12 * 2.0 ** 52
    _, held = row_powers(_held_boundary_matrix(k), 0, [2], log=True, held=True)
    assert held.tolist() == [[True, True, False, False]]


def test_row_powers_refuses_held_without_log_with_its_message():
    """held=True with log=False is refused with the documented message. Sees a changed message."""
    with pytest.raises(ValueError, match="^held=True needs log=True: the plain product keeps no bound$"):
        row_powers(torch.eye(2, dtype=torch.float64), 1, [1], held=True)


def test_drain_summary_counts_a_first_layer_hit():
    """One sample, two layers, two tokens; the last token's mass on position 1 is 0.6 then 0.9, level 0.5:
    it reaches the level after 1 layer, so needed = needed_min = 1 and never = 0 (by hand); the first token
    is position 1 itself (mass 1, hop 0, counted as 1). Sees a hit at layer 1 dropped (needed nan, min -1)."""
    from posbias.science.rollout import drain_summary

    mass = torch.tensor([[[1.0, 0.6], [1.0, 0.9]]], dtype=torch.float64)      # (S=1, T=2, n=2)
    out = drain_summary(mass, torch.tensor([0, 1]), 0.5)
    assert out["reach_ok"] is True and out["never"] == 0
    assert out["needed"] == 1.0 and out["needed_min"] == 1
    assert out["final_deficit"] == pytest.approx(0.1, abs=1e-15)


def test_layers_to_reach_reads_each_row_on_its_own():
    """Row 0 reaches 0.5 at its second layer, row 1 at its first: (2, 1) by hand. Sees the argmax taken
    over the flattened rows (the first hit of all, layer 2, given to both)."""
    mass = torch.tensor([[0.1, 0.6], [0.7, 0.9]], dtype=torch.float64)
    assert layers_to_reach(mass, 0.5).tolist() == [2, 1]


def test_first_mass_drops_needs_a_loss_of_more_than_tol():
    """tol = 0.25: row 0 goes 0.75 -> 0.5, a loss of exactly tol (0.5 < 0.75 - 0.25 is false: no drop);
    row 1 goes 0.75 -> 0.25, a drop. One drop in two cases, by hand (all values exact in binary)."""
    from posbias.science.rollout import first_mass_drops
    p = torch.zeros(1, 2, 2, 2, dtype=torch.float64)
    p[0, :, 0, 0] = torch.tensor([0.75, 0.5], dtype=torch.float64)
    p[0, :, 1, 0] = torch.tensor([0.75, 0.25], dtype=torch.float64)
    assert first_mass_drops(p, tol=0.25) == (1, 2)


def test_causal_bound_ratios_of_one_row_by_hand():
    """The bounds hold row by row, so the rollout of the last token alone (S = T = 1, one row of n = 3)
    has ratios by hand: row (0.2, 0.3, 0.5), eps = e^{-2B}/3, generic = last = 0.8 / (1 - eps); the
    smallest causal weight is 0.2, so sharp = max(0.8 / 0.8, 0.5 / 0.6) = 1. Sees n read from the row
    count (1: no mass away from position 1, and eps_min over the zeros above the diagonal)."""
    from posbias.science.rollout import causal_bound_ratios
    attn = torch.tensor([[[[1.0, 0, 0], [0.5, 0.5, 0], [0.2, 0.3, 0.5]]]], dtype=torch.float64)
    b = 0.5
    r = causal_bound_ratios(attn, rollout(attn)[..., 2:, :], b)
    eps = math.exp(-2 * b) / 3
    assert r["generic"] == pytest.approx(0.8 / (1 - eps), rel=1e-12)
    assert r["last"] == pytest.approx(0.8 / (1 - eps), rel=1e-12)
    assert r["sharp"] == pytest.approx(1.0, rel=1e-12)


# --------------------------------------------------------------------------- triage of the surviving mutants
def _repeat_layer(a: torch.Tensor, depth: int) -> torch.Tensor:
    """One causal layer ``a`` ``(n, n)`` repeated ``depth`` times, as a stack ``(1, depth, n, n)``."""
    return a.expand(1, depth, *a.shape).clone()


def test_causal_bound_ratios_of_two_tokens_by_hand():
    """n = 2, one layer, row 1 = (0.4, 0.6): generic = last = 0.6 / (1 - e^{-2B}/2), and sharp = 0.6 / (1 - 0.4) = 1
    (by hand). Sees the residual mass dropped for n = 2."""
    from posbias.science.rollout import causal_bound_ratios
    attn = torch.tensor([[[[1.0, 0.0], [0.4, 0.6]]]], dtype=torch.float64)
    r = causal_bound_ratios(attn, rollout(attn), 0.5)
    eps = math.exp(-1.0) / 2
    assert r["generic"] == pytest.approx(0.6 / (1 - eps), rel=1e-12) and r["last"] == pytest.approx(0.6 / (1 - eps))
    assert r["sharp"] == pytest.approx(1.0, rel=1e-12)


def test_causal_bound_ratios_sharp_bound_is_a_power_of_the_depth():
    """The last row of a two-layer stack, n = 3, smallest weight 0.01: P(0) row 2 = (0.98, 0.01, 0.01) and P(1)
    row 2 = 0.01 e_0 + 0.98 (0.5, 0.5, 0) + 0.01 P(0) = (0.5098, 0.4901, 0.0001) (by hand), so the sharp ratio peaks
    at the second layer: 0.4902 / 0.99^2; generic the same over (1 - e^{-1}/3)^2."""
    from posbias.science.rollout import causal_bound_ratios
    l0 = torch.tensor([[1.0, 0, 0], [0.5, 0.5, 0], [0.98, 0.01, 0.01]], dtype=torch.float64)
    l1 = torch.tensor([[1.0, 0, 0], [0.5, 0.5, 0], [0.01, 0.98, 0.01]], dtype=torch.float64)
    attn = torch.stack([l0, l1])[None]
    r = causal_bound_ratios(attn, rollout(attn)[..., 2:, :], 0.5)
    assert r["sharp"] == pytest.approx(0.4902 / 0.99 ** 2, rel=1e-12)
    assert r["generic"] == pytest.approx(0.4902 / (1 - math.exp(-1.0) / 3) ** 2, rel=1e-12)


def test_causal_bound_ratios_where_the_sharp_bound_underflows():
    """n = 2, the layer row 1 = (0.6, 0.4) repeated 1500 times: the sharp bound 0.6^t is 0 in float64 past t = 1460
    while the mass 0.4^t is 0 long before: sharp = 0.4 / 0.6 (the first layer, by hand), and 0 where both are 0.
    Mass 0.5 left at the last layer, where the bound is 0, is infinitely over it; mass of exactly 1e-15 there is
    not counted as mass remaining (the rule is "above 1e-15")."""
    from posbias.science.rollout import causal_bound_ratios
    attn = _repeat_layer(torch.tensor([[1.0, 0.0], [0.6, 0.4]], dtype=torch.float64), 1500)
    p = rollout(attn)
    assert 0.6 ** 1499 == 0.0
    assert causal_bound_ratios(attn, p, 0.5)["sharp"] == pytest.approx(2 / 3, rel=1e-12)
    left = p.clone()
    left[0, -1, 1] = torch.tensor([0.5, 0.5], dtype=torch.float64)
    assert causal_bound_ratios(attn, left, 0.5)["sharp"] == math.inf
    left[0, -1, 1] = torch.tensor([1 - 1e-15, 1e-15], dtype=torch.float64)
    assert causal_bound_ratios(attn, left, 0.5)["sharp"] == pytest.approx(2 / 3, rel=1e-12)


def test_layers_to_reach_counts_a_mass_equal_to_the_level_along_the_last_axis():
    """(2, 2, 3) masses, level 0.5, by hand: a mass of exactly 0.5 has reached it (layer 2 of the first row, layer 3
    of the last); the layers are the last axis, whatever the leading ones."""
    mass = torch.tensor([[[0.1, 0.5, 0.9], [0.6, 0.7, 0.8]], [[0.0, 0.2, 0.4], [0.2, 0.3, 0.5]]], dtype=torch.float64)
    assert layers_to_reach(mass, 0.5).tolist() == [[2, 1], [-1, 3]]


def test_prefix_rollout_share_floor_allows_1e12_of_round_off_and_no_more():
    """n = 2, prefix k = 1, A(0) all 0.5 (floor 0.5), then A(1) = c I: the share at the second layer is c / 2. With
    c = 2 (0.5 - 1e-12) (exact in float64) the share is the floor less the 1e-12 allowed: ok; with c = 1/4 it is
    0.125, far below: not ok (by hand)."""
    from posbias.science.rollout import prefix_rollout
    a0 = torch.full((1, 2, 2), 0.5, dtype=torch.float64)
    for c, ok in ((2 * (0.5 - 1e-12), True), (0.25, False)):
        a1 = c * torch.eye(2, dtype=torch.float64)[None]
        r = prefix_rollout(iter([a0, a1]), 1, 1.0)
        assert r["share_floor_ok"] is ok and r["share_min"] == pytest.approx(c / 2, rel=1e-15)


def test_residual_rollout_keeps_the_dtype_and_device_of_its_input(monkeypatch):
    """bfloat16 in, bfloat16 out (the identity added in the input's dtype), and the identity is made on the input's
    device (seen by a spy: a second device, CUDA, is not here, and the meta device's first torch.eye costs 2 s)."""
    made, eye = [], torch.eye

    def spy(*args, **kwargs):
        made.append(kwargs.get("device"))
        return eye(*args, **kwargs)

    a = masked_softmax(torch.zeros(2, 3, 3, dtype=torch.float64), make_mask("causal", 3)).to(torch.bfloat16)
    monkeypatch.setattr(torch, "eye", spy)
    p = rollout(a, residual=True)
    assert p.dtype == torch.bfloat16 and made == [a.device]
    assert torch.allclose(torch.diagonal(p[0]).double(), 0.5 + 0.5 / torch.arange(1, 4, dtype=torch.float64), atol=1e-2)


def test_refusals_name_the_rule_word_for_word():
    """An empty stream of layers and an empty depth list are refused with their messages."""
    with pytest.raises(ValueError, match=r"^no layers given$"):
        stream_rollout(iter([]))
    with pytest.raises(ValueError, match=r"^depths must be a non-empty list of integers >= 1$"):
        row_powers(torch.eye(2, dtype=torch.float64), 1, [])


def test_causal_bound_ratios_of_one_token_are_zero():
    """One token: every row is all on position 1, so no mass lies away from it and every ratio is 0 (by hand);
    the sharp bound has no ``j >= 2`` to take a maximum over."""
    attn = torch.ones(2, 3, 1, 1, dtype=torch.float64)
    assert causal_bound_ratios(attn, rollout(attn), 1.0) == {"generic": 0.0, "last": 0.0, "sharp": 0.0}
