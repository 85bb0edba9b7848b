"""Tests of posbias.theory: path counts, decay identity and band, RoPE bounds and critical distances."""
import math

import pytest
import torch
from hypothesis import given, strategies as st

from posbias import theory
from posbias.attention import masked_softmax, decay_bias, random_attention_stack
from posbias.masks import causal_mask
from posbias.rollout import rollout, row_powers


@given(st.integers(0, 60), st.integers(1, 30))
def test_log_path_count_matches_comb(k, depth):
    assert math.isclose(math.exp(float(theory.log_path_count(k, depth))), math.comb(k + depth - 1, k), rel_tol=1e-9)


def test_log_path_count_large_arguments_are_finite():
    v = theory.log_path_count(torch.tensor([0, 5000, 100000]), 5000)
    assert torch.isfinite(v).all() and abs(float(v[0])) < 1e-9


def test_log_path_count_counts_monotone_walks():
    # brute force: number of walks of `depth` steps on the causal graph from i down to i-k
    n, depth = 9, 4
    w = causal_mask(n).double()
    walks = torch.linalg.matrix_power(w, depth)
    for k in range(n):
        assert walks[n - 1, n - 1 - k] == math.comb(k + depth - 1, k)


@given(st.integers(1, 80), st.floats(0.02, 3.0))
def test_decay_critical_distance_is_argmax_and_near_stirling(depth, m):
    k = torch.arange(0, 20000)
    prof = theory.decay_profile_log(k, depth, m)
    kstar = theory.decay_critical_distance(depth, m)
    assert prof[kstar] >= prof.max() - 1e-9
    st_ = theory.decay_critical_distance_stirling(depth, m)
    assert st_ - 1 - 1e-9 <= kstar <= max(st_, 0) + 1e-9


def test_decay_identity_unnormalised_power_is_path_count():
    n, m = 40, 0.3
    gamma = math.exp(-m)
    a = (1 - gamma) * theory.decay_weights(n, m)
    for depth in (1, 3, 7):
        p = rollout(a.expand(depth, n, n))[-1]
        k = torch.arange(n)
        pred = torch.exp(depth * math.log(1 - gamma) + theory.decay_profile_log(k, depth, m))
        assert torch.allclose(p[n - 1].flip(0), pred, rtol=1e-12, atol=0)


def test_decay_normalised_rollout_lies_in_band():
    n, m, depth = 30, 0.5, 5
    a = masked_softmax(decay_bias(n, m), causal_mask(n))
    p = rollout(a.expand(depth, n, n))[-1]
    i, j = torch.tril_indices(n, n)
    k = (i - j).double()
    log_ratio = torch.log(p[i, j]) - depth * math.log(-math.expm1(-m)) - theory.decay_profile_log(k, depth, m)
    lo, hi = theory.decay_band(depth, m, j)
    assert (log_ratio >= lo - 1e-10).all() and (log_ratio <= hi + 1e-10).all()
    assert log_ratio.min() < 1e-4  # the lower end is approached (rows far from the start)


def test_decay_band_with_random_logits():
    n, m, depth = 24, 0.4, 4
    attn, bound = random_attention_stack(causal_mask(n), depth, weight_norm=2.0, samples=3, seed=1,
                                         bias=decay_bias(n, m))
    p = rollout(attn)[:, -1]
    i, j = torch.tril_indices(n, n)
    log_ratio = (torch.log(p[:, i, j]) - depth * math.log(-math.expm1(-m))
                 - theory.decay_profile_log((i - j).double(), depth, m))
    lo, hi = theory.decay_band(depth, m, j, bound)
    assert (log_ratio >= lo - 1e-10).all() and (log_ratio <= hi + 1e-10).all()


def test_rope_scores_match_lemma_form():
    n, theta, beta, phi = 20, 0.07, 2.5, 0.3
    s = theory.rope_scores(n, theta, beta, phi)
    i = torch.arange(n, dtype=torch.float64).unsqueeze(1)
    j = torch.arange(n, dtype=torch.float64).unsqueeze(0)
    assert torch.allclose(s, beta * torch.cos(phi + (i - j) * theta), atol=1e-12)


def test_rope_row_scores_is_last_row_of_rope_scores():
    s = theory.rope_scores(30, 0.05, 3.0, 0.4)
    assert torch.allclose(theory.rope_row_scores(30, 0.05, 3.0, 0.4), s[-1].flip(0), atol=1e-12)


@pytest.mark.parametrize("depth,theta,beta", [(1, 0.05, 3.0), (2, 0.02, 4.0), (5, 0.05, 16.0)])
def test_rope_path_sum_matches_matrix_power_and_bounds(depth, theta, beta):
    n = int(math.pi / (2 * theta)) + 1
    logh = theory.rope_path_sum_log(n, depth, theta, beta)
    w = torch.exp(theory.rope_scores(n, theta, beta)) * causal_mask(n)
    direct = torch.log(row_powers(w, n - 1, [depth])[0].flip(0))
    assert torch.allclose(logh, direct, rtol=1e-10)
    lo, hi = theory.rope_profile_bounds_log(torch.arange(n), depth, theta, beta)
    assert (logh >= lo - 1e-9).all() and (logh <= hi + 1e-9).all()


def test_rope_stirling_root_and_slopes():
    depth, theta, c = 4, 0.01, 16.0
    k = theory.rope_critical_distance_stirling(depth, theta, c)
    assert abs(theory._rope_F(k, depth, theta, c)) < 1e-8
    dk_dl, dk_dt = theory.rope_critical_slopes(k, depth, theta, c)
    assert dk_dl > 0 and dk_dt < 0
    # the slopes agree with finite differences of the root
    h = 1e-6
    root = theory.rope_critical_distance_stirling
    fd_t = (root(depth, theta + h, c) - root(depth, theta - h, c)) / (2 * h)
    assert math.isclose(fd_t, dk_dt, rel_tol=1e-4)
    # discrete argmax of the paper's profile is within a token or two of the Stirling root
    assert abs(theory.rope_critical_distance(depth, theta, c) - k) <= 2


def test_half_weight_distances():
    assert math.isclose(math.exp(-0.3 * theory.half_weight_distance_decay(0.3)), 0.5)
    k = theory.half_weight_distance_rope(0.01, 2.0)
    assert math.isclose(math.exp(2.0 * (math.cos(k * 0.01) - 1)), 0.5)
    assert theory.half_weight_distance_rope(0.01, 0.1) == math.inf
    assert theory.half_weight_distance_rope(0.01, 0.3) == math.inf       # 1 - ln 2 / beta = -1.31: just below -1
    assert math.isclose(theory.rope_slowest_angle(64), 10000 ** (-62 / 64))


def test_decay_peaks_reads_the_argmax_of_the_matrix_power():
    from posbias.attention import decay_bias, masked_softmax
    from posbias.masks import causal_mask
    from posbias.theory import decay_peaks

    n, m = 400, 0.2231
    rows, skipped = decay_peaks(n, [m], [2, 4, 64])
    assert [r["L"] for r in rows] == [2, 4] and skipped == [(m, 64)]      # L = 64 would reach position 1
    a = masked_softmax(decay_bias(n, m), causal_mask(n))
    for r in rows:
        last = torch.linalg.matrix_power(a, r["L"])[n - 1].flip(0)
        assert r["k_hat"] == int(torch.argmax(last)) and r["admissible"]
        assert abs(r["k_stirling"] - r["k_hat"]) <= 1


def test_half_weight_rows_match_the_closed_forms():
    m, beta = -math.log(0.8), 16.0
    th = theory.rope_slowest_angle(64, 10000.0)
    hw = theory.half_weight_rows(m, th, beta, 64, 10000.0)
    n = hw["n_far"]
    assert all(hw[k].shape == (n,) and float(hw[k][0]) == 1.0 for k in ("w_decay", "w_rope", "w_all"))
    assert hw["half_decay"] == math.ceil(theory.half_weight_distance_decay(m)) == 4
    assert abs(hw["half_rope"] - math.ceil(theory.half_weight_distance_rope(th, beta))) <= 1
    assert float(hw["w_rope"][hw["half_rope"]]) <= 0.5 < float(hw["w_rope"][hw["half_rope"] - 1])
    assert 0 < hw["half_all"] < hw["half_rope"]          # all pairs together halve far sooner than the slowest
