"""posbias.science.masks: masks as graphs, hop distances, center nodes; property tests for their invariants."""
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posbias.science.masks import (causal_mask, center_nodes, full_mask, hop_distance, make_mask, prefix_mask,
                                   reachability, sliding_window_mask, window_hops)

ns = st.integers(min_value=1, max_value=40)


@given(ns)
def test_causal_is_lower_triangular_with_self_loops(n):
    m = causal_mask(n)
    i, j = torch.meshgrid(torch.arange(n), torch.arange(n), indexing="ij")
    assert torch.equal(m, j <= i)


@given(ns, st.integers(min_value=1, max_value=50))
def test_window_sees_exactly_the_last_w_positions(n, w):
    m = sliding_window_mask(n, w)
    for i in range(n):
        allowed = set(torch.nonzero(m[i]).flatten().tolist())
        assert allowed == set(range(max(0, i - w + 1), i + 1))


@given(ns, st.data())
def test_prefix_mask(n, data):
    k = data.draw(st.integers(min_value=0, max_value=n))
    m = prefix_mask(n, k)
    for i in range(n):
        for j in range(n):
            assert bool(m[i, j]) == (j <= i or j < k)
    assert torch.equal(prefix_mask(n, n), full_mask(n))
    assert torch.equal(prefix_mask(n, 1), causal_mask(n))


def test_center_nodes():
    assert center_nodes(causal_mask(7)) == [0]
    assert center_nodes(sliding_window_mask(9, 3)) == [0]
    assert center_nodes(prefix_mask(8, 3)) == [0, 1, 2]
    assert center_nodes(full_mask(4)) == [0, 1, 2, 3]
    assert center_nodes(sliding_window_mask(5, 1)) == []  # only self-loops: nobody reaches anybody else


@given(st.integers(min_value=2, max_value=60), st.integers(min_value=2, max_value=20))
def test_window_hop_count_matches_graph_distance(n, w):
    dist = hop_distance(sliding_window_mask(n, w), target=0)
    assert int(dist[-1]) == window_hops(n, w)
    assert int(dist.max()) == window_hops(n, w)


def test_reachability_in_t_steps():
    m = sliding_window_mask(10, 2)
    r = reachability(m, steps=3)
    assert bool(r[9, 6]) and not bool(r[9, 5])


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=1, max_value=16), st.integers(min_value=1, max_value=20), st.data())
def test_reachability_is_the_support_of_the_mask_power(n, t, data):
    # the oracle of the rollout's support property: a walk of exactly t steps exists iff (M^t)_ij > 0
    kind = data.draw(st.sampled_from(["full", "causal", "window", "prefix"]))
    size = data.draw(st.integers(min_value=1, max_value=n))
    m = make_mask(kind, n, window=size if kind == "window" else None, prefix=size if kind == "prefix" else None)
    power = torch.linalg.matrix_power(m.double(), t)
    assert torch.equal(reachability(m, steps=t), power > 0)
    assert torch.equal(reachability(m), torch.linalg.matrix_power(m.double(), n) > 0)   # closure: n steps suffice


def test_bad_input_is_refused():
    import pytest

    with pytest.raises(ValueError, match="window"):
        sliding_window_mask(5, 0)
    with pytest.raises(ValueError, match="prefix"):
        prefix_mask(5, 6)
    with pytest.raises(ValueError, match="unknown mask"):
        make_mask("diagonal", 5)


def test_is_closed_on_the_center_sets_and_off_them():
    from posbias.science.masks import causal_mask, is_closed, prefix_mask

    assert is_closed(causal_mask(6), [0]) and is_closed(prefix_mask(6, 3), [0, 1, 2])
    assert not is_closed(causal_mask(6), [1])              # token 2 sees token 1
    assert not is_closed(prefix_mask(6, 3), [0, 1])         # the prefix tokens see each other


def test_hop_distance_marks_an_unreachable_token_minus_one():
    from posbias.science.masks import hop_distance

    mask = torch.eye(3, dtype=torch.bool)
    mask[1, 0] = True                                           # token 1 reaches token 0; token 2 does not
    assert hop_distance(mask).tolist() == [0, 1, -1]


def test_masks_refuse_a_zero_length():
    """n = 0 is an int but not positive: refused with the documented message. Sees the guard that refuses
    only a non-int below 1 (the int 0 then gives an empty mask)."""
    import pytest

    with pytest.raises(ValueError, match="n must be a positive integer, got 0"):
        causal_mask(0)


def test_window_hops_refuses_a_width_below_two_with_its_message():
    """w = 1 lets a token see only itself: refused with the reason, word for word."""
    import pytest

    with pytest.raises(ValueError, match=r"^with w < 2 no token can reach an earlier position$"):
        window_hops(5, 1)


def test_reachability_of_a_one_column_mask_is_the_mask():
    """A mask of one column: tokens 1 and 3 see position 1, token 2 nothing. A walk's first step lands on
    position 1 or nowhere, so the walks are the single edges and R is the mask itself (the closure needs
    1 step, the column count). Sees the step count taken from the rows (3: a 3x1 by 3x1 product fails)."""
    mask = torch.tensor([[True], [False], [True]])
    assert torch.equal(reachability(mask), mask)


def _hops_by_matrix_powers(mask: torch.Tensor, target: int) -> list[int]:
    """Second method for hop distances: the least t with ``(M^t)[i, target] > 0`` (``M^0 = I``), -1 if none."""
    n = mask.shape[-1]
    power, out = torch.eye(n, dtype=torch.float64), [-1] * n
    for t in range(n):                                          # a shortest walk has at most n - 1 edges
        out = [t if d < 0 and power[i, target] > 0 else d for i, d in enumerate(out)]
        power = power @ mask.double()
    return out


def test_hop_distance_is_the_first_power_of_the_mask_that_reaches_the_target():
    """Against matrix powers on masks where every token sees the target directly (full, prefix) and on a
    3-cycle without self-loops: a token once reached keeps its first distance, in int64."""
    cycle = torch.roll(torch.eye(4, dtype=torch.bool), 1, dims=1)            # token i sees i + 1 (mod 4) only
    for mask, target in ((full_mask(5), 0), (prefix_mask(6, 3), 1), (sliding_window_mask(7, 3), 2), (cycle, 0)):
        dist = hop_distance(mask, target=target)
        assert dist.dtype == torch.int64
        assert dist.tolist() == _hops_by_matrix_powers(mask, target)
    assert hop_distance(cycle).tolist() == [0, 3, 2, 1]                      # by hand: 3 -> 0, 2 -> 3 -> 0, ...


def test_reachability_without_self_loops_collects_every_walk_length():
    """Masks without self-loops, by hand: the chain 0 -> 1 -> 2 reaches (0,1), (1,2) and (0,2) only; the
    3-cycle 0 -> 1 -> 2 -> 0 reaches everything, itself included after 3 steps. The last power alone
    (empty for the chain, the identity for the cycle) is not the union of the walks."""
    chain = torch.zeros(3, 3, dtype=torch.bool)
    chain[0, 1] = chain[1, 2] = True
    want = chain.clone()
    want[0, 2] = True
    assert torch.equal(reachability(chain), want)
    cycle = torch.roll(torch.eye(3, dtype=torch.bool), 1, dims=1)
    assert torch.equal(reachability(cycle), torch.ones(3, 3, dtype=torch.bool))


def test_make_mask_asks_for_the_missing_width_or_prefix_word_for_word():
    """``window`` without ``window=`` and ``prefix`` without ``prefix=`` are refused with a message that names
    the keyword to pass."""
    import pytest

    with pytest.raises(ValueError, match=r"^the 'window' mask needs a width: window=w$"):
        make_mask("window", 5)
    with pytest.raises(ValueError, match=r"^the 'prefix' mask needs a prefix size: prefix=k$"):
        make_mask("prefix", 5)
