"""Tests of posbias.science.theory: path counts, decay identity and band, RoPE bounds and critical distances."""
import math

import pytest
import torch
from hypothesis import given, strategies as st

from posbias.science import theory
from posbias.science.attention import masked_softmax, decay_bias, random_attention_stack
from posbias.science.masks import causal_mask
from posbias.science.rollout import rollout, row_powers


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
    from posbias.science.attention import decay_bias, masked_softmax
    from posbias.science.masks import causal_mask
    from posbias.science.theory import decay_peaks

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


def test_rope_path_sum_log_is_exact_where_it_spans_more_than_float64():
    """At n = 800, L = 400 log h_L spans about 760 nats over k: the former float convolution, scaled by
    the row's maximum, lost the small-k entries to subnormal rounding (make fuzz: h_L(0) 1e-6 below
    the bound it equals, failing path-sum-between-bounds). h_L(0), h_L(1), h_L(2) written out."""
    n, depth, beta = 800, 400, 16.0
    theta = math.pi / (2 * (n - 1))
    logh = theory.rope_path_sum_log(n, depth, theta, beta)
    assert float(logh.max() - logh[0]) > 710
    w = [beta * math.cos(k * theta) for k in range(3)]           # log w(k)
    exact = [depth * w[0],                                        # all steps 0
             math.log(depth) + (depth - 1) * w[0] + w[1],         # one step of 1
             torch.logsumexp(torch.tensor([math.log(depth) + (depth - 1) * w[0] + w[2],      # one of 2
                                           math.log(depth * (depth - 1) / 2) + (depth - 2) * w[0] + 2 * w[1]],
                                          dtype=torch.float64), 0).item()]                  # two of 1
    assert torch.allclose(logh[:3], torch.tensor(exact, dtype=torch.float64), rtol=1e-14, atol=0)
    lo, hi = theory.rope_profile_bounds_log(torch.arange(n), depth, theta, beta)
    assert float((logh - lo).min()) >= -1e-9 and float((hi - logh).min()) >= -1e-9


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_log_convolve_matches_the_sum_in_log_space(seed):
    """Steep steps (the first token's mass in a deep rollout), -inf entries and a range far beyond
    float64's: against a plain logsumexp over every pair."""
    g = torch.Generator().manual_seed(seed)
    n = 150
    logv = torch.cumsum(torch.randn(n, generator=g, dtype=torch.float64) * 30, 0)
    logv[n // 2] += 2000.0
    logv[7] = -math.inf
    w = torch.exp(-3 * torch.rand(n, generator=g, dtype=torch.float64))
    got = theory._log_convolve(logv, w)
    k = torch.arange(n)
    lag = k[:, None] - k[None, :]
    pairs = torch.where(lag >= 0, logv[None, :] + torch.log(w)[lag.clamp(min=0)], -math.inf)
    assert torch.allclose(got, torch.logsumexp(pairs, dim=1), rtol=1e-13, atol=1e-10)


def test_rope_rollout_row_log_is_the_float_rollout_and_a_distribution():
    """Against masked_softmax and row_powers where float64 holds the row; and deep with a small beta,
    where the float row's window k <= pi/(2 theta) underflows to zero (its argmax then read 0: make
    fuzz's normalised-peak-directions), the log-space row still sums to one."""
    th, beta = 0.0055, 0.62
    kmax = int(math.pi / (2 * th))
    n = 2 * kmax + 2
    depths = [1, 2, 64, 256]
    logs = theory.rope_rollout_row_log(n, depths, th, beta)
    a = masked_softmax(theory.rope_scores(n, th, beta), causal_mask(n))
    rows = row_powers(a, n - 1, depths).flip(-1)
    held = rows > 1e-290
    assert torch.allclose(logs[held], torch.log(rows[held]), rtol=0, atol=1e-10)
    assert torch.allclose(torch.logsumexp(logs, dim=1), torch.zeros(len(depths), dtype=torch.float64),
                          atol=1e-11)
    assert float(rows[-1, : kmax + 1].max()) == 0.0                    # the float window is gone
    assert bool(torch.isfinite(logs[-1]).all()) and int(torch.argmax(logs[-1, : kmax + 1])) == kmax


def test_peak_directions():
    pk = {(0.1, 2): 3, (0.1, 4): 6, (0.2, 2): 1, (0.2, 4): 2}
    lo = {(0.1, 2): 3, (0.1, 4): 5, (0.2, 2): 1, (0.2, 4): 1}
    hi = {(0.1, 2): 4, (0.1, 4): 7, (0.2, 2): 2, (0.2, 4): 3}
    d = theory.peak_directions(pk, lo, hi, name="m")
    assert d == {"non-decreasing in L": True, "non-increasing in m": True, "moves where forced": True, "forced": 1}
    # the forced angle stays put: fails; where the intervals overlap a peak may stay put
    assert not theory.peak_directions({**pk, (0.1, 4): 3}, lo, hi)["moves where forced"]
    assert theory.peak_directions({**pk, (0.2, 4): 1}, lo, hi)["moves where forced"]
    # a peak already at the cap cannot move: not forced
    assert theory.peak_directions({**pk, (0.1, 4): 3}, lo, hi, cap={0.1: 3, 0.2: 9})["forced"] == 0
    # one depth (make fuzz: "moves at all" failed every one-depth grid), and points not measured
    one = theory.peak_directions({(0.1, 2): 3, (0.2, 2): 1}, lo, hi)
    assert one["forced"] == 0 and all(v for k, v in one.items() if k != "forced")
    gap = {(0.1, 2): 3, (0.1, 8): 9, (0.2, 2): 1}                       # (0.1, 4) and (0.2, 8) skipped
    assert theory.peak_directions(gap, {**lo, (0.1, 8): 8}, {**hi, (0.1, 8): 10})["forced"] == 1
    # wrong directions
    assert not theory.peak_directions({**pk, (0.1, 4): 2}, lo, hi)["non-decreasing in L"]
    assert not theory.peak_directions({**pk, (0.2, 2): 4}, lo, hi)["non-increasing in x"]


def test_peak_directions_fails_when_any_forced_rate_stays_put():
    """Two forced rates, the first stays put and the second moves: the verdict is the conjunction
    over every forced rate (not the last one's alone)."""
    pk = {(0.1, 2): 3, (0.1, 4): 3, (0.2, 2): 1, (0.2, 4): 2}
    lo = {(0.1, 2): 3, (0.1, 4): 5, (0.2, 2): 1, (0.2, 4): 2}
    hi = {(0.1, 2): 4, (0.1, 4): 6, (0.2, 2): 1, (0.2, 4): 3}
    d = theory.peak_directions(pk, lo, hi)
    assert d["forced"] == 2 and not d["moves where forced"]
    assert theory.peak_directions({**pk, (0.1, 4): 5}, lo, hi)["moves where forced"]


def test_decay_peaks_skips_a_point_by_its_stated_spread():
    """m = 1, L = 2: the negative binomial's spread sqrt(L e^-m)/(1 - e^-m) is 1.357 (not sqrt(L/e^-m)/(..),
    3.689): k* + 10 spread + 10/m = 24.15, so a row of n = 25 keeps the point and one of 24 skips it."""
    g = math.exp(-1.0)
    edge = theory.decay_critical_distance_stirling(2, 1.0) + 10 * math.sqrt(2 * g) / (1 - g) + 10
    assert 24 < edge < 25
    rows, skipped = theory.decay_peaks(25, [1.0], [2])
    assert [r["L"] for r in rows] == [2] and skipped == []
    assert theory.decay_peaks(24, [1.0], [2]) == ([], [(1.0, 2)])


def test_decay_peaks_admissible_range_holds_the_exact_peak():
    rows, _ = theory.decay_peaks(400, [0.2231, 1.0], [1, 2, 8])
    assert rows and all(r["k_lo"] <= r["k_exact"] <= r["k_hi"] and r["k_lo"] <= r["k_hat"] <= r["k_hi"]
                        for r in rows)


def test_half_weight_rows_all_pairs_by_the_cosine_sum():
    """All d/2 pairs aligned, equal norm per pair: the key at distance k scores (2 beta/d) sum_p cos(k theta_p)
    with theta_p = base^(-2p/d). Written out at base 100, d = 4 (so a default base of 10,000, the query
    one position off, or scores held in float32 (1e-7 relative, 1e-8 here) show)."""
    import numpy as np

    m, beta, d, base = -math.log(0.8), 0.5, 4, 100.0
    hw = theory.half_weight_rows(m, theory.rope_slowest_angle(d, base), beta, d, base)
    k = np.arange(hw["n_far"])[:, None]
    theta = base ** (-np.arange(0, d, 2) / d)
    s = 2 * beta / d * np.cos(k * theta).sum(1)
    assert hw["w_all"].dtype == torch.float64
    np.testing.assert_allclose(hw["w_all"].numpy(), np.exp(s - s[0]), rtol=1e-13, atol=0)
    assert hw["half_all"] == int(np.nonzero(np.exp(s - s[0]) <= 0.5)[0][0]) == 16


def test_half_weight_rows_says_when_all_pairs_never_halve_and_refuses_a_slowest_pair_that_cannot():
    """At beta = 0.35 (just above ln 2 / 2 = 0.347, where the slowest pair's weight still halves) the
    pairs together stay above 0.505 over the whole row (base 100, d = 4): ``half_all`` is -1. Below
    ln 2 / 2 no pair can halve (the weight never falls under e^(-2 beta)): refused by name."""
    th = theory.rope_slowest_angle(4, 100.0)
    hw = theory.half_weight_rows(-math.log(0.8), th, 0.35, 4, 100.0)
    assert float(hw["w_all"].min()) > 0.5 and hw["half_all"] == -1 and hw["half_rope"] == 30
    with pytest.raises(ValueError, match=r"beta = 0.3 .*never halves .*\(it stays above e\^\(-2 beta\) > 1/2\); "
                                         "raise beta above 0.3466"):
        theory.half_weight_rows(-math.log(0.8), th, 0.3, 4, 100.0)


def test_half_weight_rows_in_chunks_equal_one_product(monkeypatch):
    m, beta, d, base = -math.log(0.8), 16.0, 64, 10000.0
    th = theory.rope_slowest_angle(d, base)
    whole = theory.half_weight_rows(m, th, beta, d, base)
    monkeypatch.setattr(theory, "_CHUNK", 97)
    chunked = theory.half_weight_rows(m, th, beta, d, base)
    assert whole["n_far"] > 10 * 97
    assert torch.allclose(chunked["w_all"], whole["w_all"], rtol=1e-12, atol=0)
    assert chunked["half_all"] == whole["half_all"]


def test_half_weight_rows_memory_does_not_grow_with_the_row(tmp_path):
    """base 49,000, d = 512: the rows reach pi/theta_slow = 150,000 positions. Rotating every key at
    once took 150,000 x 256 angles per tensor, about 2 GB in all (at base 10^6 and d = 490 make fuzz
    asked for 1.2 GB at once and died; 3 million positions asked for 6 GB a tensor); in chunks it stays
    a few hundred MiB above the import."""
    import subprocess
    import sys

    code = ("import math, resource, torch; from posbias.science import theory; "
            "base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss; "
            "th = theory.rope_slowest_angle(512, 49000.0); "
            "hw = theory.half_weight_rows(-math.log(0.8), th, 0.6, 512, 49000.0); "
            "print(hw['n_far'], (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) // 1024)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    n_far, grew_mb = int(out[0]), int(out[1])
    assert n_far > 100_000 and grew_mb < 400, (n_far, grew_mb)


def test_refused_inputs_name_what_is_wrong():
    """A negative distance and a depth below 1 are refused with a message naming the rule (issue 70:
    mutants that dropped the message, or let depth 0 through, survived the sample)."""
    with pytest.raises(ValueError, match="distances k must be >= 0"):
        theory.log_path_count(torch.tensor([-1, 2]), 3)
    for bad in ([0], [2, 0]):
        with pytest.raises(ValueError, match="depths must be a non-empty list of integers >= 1"):
            theory.rope_rollout_row_log(8, bad, 0.3, 1.0)


def test_decay_distance_refuses_m_zero_and_rope_bounds_meet_at_k_zero():
    """m = 0 is refused with the reason (the profile grows without bound), not a division by zero; at
    k = 0 the only composition is all zeros, so both RoPE bounds equal log h_L(0) = beta L exactly."""
    with pytest.raises(ValueError, match="grows without bound"):
        theory.decay_critical_distance(4, 0.0)
    for depth, beta in ((2, 1.3), (5, 0.4)):
        lo, hi = theory.rope_profile_bounds_log(torch.tensor([0.0]), depth, 0.2, beta)
        assert float(lo[0]) == pytest.approx(beta * depth, abs=1e-12) and float(hi[0]) == pytest.approx(beta * depth)


def test_decay_band_by_hand():
    """L = 3, gamma = e^-0.5, B = 0.25, column j = 1: the band is [e^{-2BL}, e^{2BL} (1 - gamma^2)^{-L}],
    in logs [-1.5, 1.5 - 3 log(1 - e^-1)]."""
    lo, hi = theory.decay_band(3, 0.5, 1, 0.25)
    assert float(lo) == -1.5 and float(hi) == pytest.approx(1.5 - 3 * math.log(1 - math.exp(-1.0)), rel=1e-14)


def test_rope_critical_distance_saturates_at_the_end_of_the_concave_range():
    """Depth 64, theta 0.1, c 0.1: the path count wins on the whole range k <= pi/(2 theta) = 15.7, so the
    integer argmax is its last point, 15 (not 16, outside it), and the Stirling root saturates at 15.71."""
    assert theory.rope_critical_distance(64, 0.1, 0.1) == 15 == int(math.pi / 0.2)
    assert theory.rope_critical_distance(64, 0.1, 0.1, k_max=7) == 7
    assert theory.rope_critical_distance_stirling(64, 0.1, 0.1) == math.pi / 0.2


def test_log_convolve_cuts_the_blocks_its_docstring_states(monkeypatch):
    """The cost the docstring states: blocks of at most ``width`` (64) consecutive entries, a new one
    wherever log v crosses a multiple of ``spread`` (200) below its maximum. Counted by hand, as the
    rows of the (blocks, n) tensor summed by the last logsumexp, and the values against a plain
    logsumexp over every pair. (a) log v = -0.01 k, k < 66: the maximum alone at level 0, then 65
    entries at level -1, cut at 64: 3 blocks (width 65 would make 2; levels by ``* spread`` would cut
    at every entry, 66). (b) log v = [0, -100, -199, -201, -350, -450]: levels 0, -1, -1, -2, -2, -3,
    4 blocks (not 6)."""
    seen = []
    real = torch.logsumexp

    def spy(t, dim):
        seen.append(t.shape[0])
        return real(t, dim)

    monkeypatch.setattr(torch, "logsumexp", spy)
    for logv, blocks in ((-0.01 * torch.arange(66, dtype=torch.float64), 3),
                         (torch.tensor([0, -100, -199, -201, -350, -450], dtype=torch.float64), 4)):
        n = logv.shape[0]
        w = torch.exp(-0.5 * torch.arange(n, dtype=torch.float64) / n)
        seen.clear()
        got = theory._log_convolve(logv, w)
        assert seen == [blocks]
        k = torch.arange(n)
        lag = k[:, None] - k[None, :]
        pairs = torch.where(lag >= 0, logv[None, :] + torch.log(w)[lag.clamp(min=0)], -math.inf)
        assert torch.allclose(got, real(pairs, dim=1), rtol=1e-13, atol=0)


def test_half_weight_distance_rope_at_the_edge_beta_is_half_a_turn():
    """beta = ln 2 / 2 gives x = 1 - 2 = -1 exactly: the weight e^{beta(cos - 1)} reaches 1/2 only at
    k theta = pi, so k = pi / theta (2 pi at theta = 1/2), finite. Sees x = -1 treated as never (inf)."""
    assert theory.half_weight_distance_rope(0.5, math.log(2) / 2) == pytest.approx(2 * math.pi, rel=1e-12)


def test_half_weight_rows_span_twice_the_predicted_half_distance():
    """theta_slow = 0.01, beta = 2: the slowest pair halves at k = arccos(1 - ln 2 / 2) / 0.01 = 85.87, so
    n_far = int(2 * 85.87) + 2 = 173 (below pi / 0.01 = 314; the decay row, m = 1, needs only 3), and the
    rope row halves at 86. Sees another multiple of the prediction (3x gives 259)."""
    pred = math.acos(1 - math.log(2) / 2) / 0.01
    r = theory.half_weight_rows(1.0, 0.01, 2.0, 8)
    assert r["n_far"] == int(2 * pred) + 2 == 173
    assert r["half_rope"] == math.ceil(pred) == 86 and r["half_decay"] == 1


def test_rope_critical_distance_stirling_depth_one_and_saturation():
    """Depth 1 has no path count: 0.0. With c = 0, F(k) = log((k + L - 1)/k) > 0 everywhere, so the root
    saturates at pi/(2 theta) = 5 pi (theta = 0.1), where F = log(1 + 1/(5 pi)) = 0.0617 (between 0 and 1).
    Sees depth 1 returning another value, and a saturation test against 1 instead of 0 (brentq then finds
    no sign change and raises)."""
    assert theory.rope_critical_distance_stirling(1, 0.1, 2.0) == 0.0
    assert theory.rope_critical_distance_stirling(2, 0.1, 0.0) == pytest.approx(5 * math.pi, rel=1e-15)


def test_decay_peaks_band_is_tight_at_a_clear_peak():
    """n = 40, m = 1, L = 3: the path-count profile C(k+2, 2) e^{-k} is 1, 3/e = 1.10, 6/e^2 = 0.81 at
    k = 0, 1, 2, a clear maximum at k = 1 (by hand); the finite-row band (width below e^{-30}) admits only
    k = 1. Sees the band's tolerance widened from 1e-9 to about 1 (it then admits k = 0..3)."""
    rows, skipped = theory.decay_peaks(40, [1.0], [3])
    assert skipped == [] and len(rows) == 1
    r = rows[0]
    assert (r["k_hat"], r["k_exact"], r["k_lo"], r["k_hi"]) == (1, 1, 1, 1) and r["admissible"]


def test_decay_peaks_band_admits_a_near_tie_within_the_finite_row_width():
    """L = 2, m = ln(9/8) + 1.03e-9: the profile (k+1) e^{-mk} peaks at k = 7, with k = 8 below it by
    ln(9/8) - m = -1.03e-9 in log, just past the 1e-9 tolerance. The finite row (n = 213, the smallest not
    skipped) widens k = 8 by -2 ln(1 - e^{-m (213 - 8)}) = 2 e^{-24.15} = 6.5e-11 > 3e-11, so the band is
    k = 7..8 (by hand). Sees the width taken at n + k (2 e^{-26.0} = 1e-11: the band shrinks to k = 7)."""
    m = math.log(9 / 8) + 1.03e-9
    assert -2 * math.log(-math.expm1(-m * (213 - 8))) > 3e-11 > -2 * math.log(-math.expm1(-m * (213 + 8)))
    rows, skipped = theory.decay_peaks(213, [m], [2])
    assert skipped == [] and len(rows) == 1
    r = rows[0]
    assert (r["k_exact"], r["k_lo"], r["k_hi"]) == (7, 7, 8) and r["admissible"]


def test_log_path_count_and_stirling_refusals_are_word_for_word():
    """The messages are the contract: a negative distance, and m = 0 for the Stirling distance (which
    would otherwise divide by e^0 - 1 = 0)."""
    with pytest.raises(ValueError, match=r"^distances k must be >= 0$"):
        theory.log_path_count(torch.tensor([-1, 2]), 3)
    with pytest.raises(ValueError, match=r"^with m <= 0 the profile grows without bound: no critical distance$"):
        theory.decay_critical_distance_stirling(4, 0.0)


def test_half_weight_rows_rotates_each_key_once_in_chunks(monkeypatch):
    """d = 4, base 100, beta = 2: theta_slow = 0.1, the half distance is arccos(1 - ln 2 / 2) / 0.1 = 8.59,
    so n_far = int(17.17) + 2 = 19 (by hand). With _CHUNK = 4 the 19 keys (pair 0 turns 1 per position:
    its angle is the position) are rotated once each, in order: 0-3, 4-7, 8-11, 12-15, 16-18. Sees chunks
    started at every position (the same rows, each key rotated up to 4 times)."""
    rotated, rope = [], theory.apply_rope

    def spy(x, angles):
        if x.shape[-1] == 4:                         # the all-pairs query and keys (the slowest pair has d = 2)
            rotated.append([int(a) for a in angles[:, 0].tolist()])
        return rope(x, angles)

    monkeypatch.setattr(theory, "apply_rope", spy)
    monkeypatch.setattr(theory, "_CHUNK", 4)
    hw = theory.half_weight_rows(-math.log(0.8), 0.1, 2.0, 4, 100.0)
    assert hw["n_far"] == 19
    assert rotated == [[18], [0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15], [16, 17, 18]]


# --------------------------------------------------------------------------- triage of the surviving mutants
def _blocks_seen(monkeypatch: pytest.MonkeyPatch, logv: torch.Tensor) -> tuple[int, torch.Tensor]:
    """Run ``_log_convolve`` on ``logv`` with a slowly decaying ``w``; return its block count (the rows
    of the tensor its last logsumexp sums) and its result."""
    seen: list[int] = []
    real = torch.logsumexp

    def spy(t: torch.Tensor, dim: int) -> torch.Tensor:
        seen.append(t.shape[0])
        return real(t, dim)

    n = logv.shape[0]
    w = torch.exp(-0.5 * torch.arange(n, dtype=torch.float64) / n)
    monkeypatch.setattr(torch, "logsumexp", spy)
    got = theory._log_convolve(logv, w)
    monkeypatch.setattr(torch, "logsumexp", real)
    k = torch.arange(n)
    lag = k[:, None] - k[None, :]
    pairs = torch.where(lag >= 0, logv[None, :] + torch.log(w)[lag.clamp(min=0)], -math.inf)
    assert torch.allclose(got, torch.logsumexp(pairs, dim=1), rtol=1e-13, atol=0)
    assert len(seen) == 1
    return seen[0], got


@pytest.mark.parametrize("logv,blocks", [
    ([0.0, -100.0, -200.5], 3),                            # levels 0, -1, -2 (a spread of 201 would make 2)
    ([50.0, -50.0, -149.0, -151.0, -300.0, -400.0], 4),    # levels taken below the maximum 50: 0, -1, -1, -2, -2, -3
    ([0.0] * 66, 2),                                       # one level: cut at 0 and 64 only
    ([0.0] * 10 + [-250.0] * 50, 2),                       # a level cut at 10, then 50 entries: under width
])
def test_log_convolve_cuts_blocks_at_the_levels_and_widths_by_hand(monkeypatch, logv, blocks):
    """Block counts by hand from the docstring's rule (a new block where log v - max log v crosses a multiple of
    200, and after 64 entries of one block), with the values against a plain logsumexp over every pair."""
    assert _blocks_seen(monkeypatch, torch.tensor(logv, dtype=torch.float64))[0] == blocks


def test_refusals_name_the_rule_word_for_word():
    """Depth 0, a rate m = 0, an empty depth list and a beta that cannot halve are refused with their messages."""
    with pytest.raises(ValueError, match=r"^depth must be >= 1, got 0$"):
        theory.log_path_count(3, 0)
    with pytest.raises(ValueError, match=r"^with m <= 0 the profile grows without bound: no critical distance$"):
        theory.decay_critical_distance(4, 0.0)
    with pytest.raises(ValueError, match=r"^depths must be a non-empty list of integers >= 1$"):
        theory.rope_rollout_row_log(8, [0], 0.3, 1.0)
    with pytest.raises(ValueError, match=r"^beta = 0.3 is at most ln 2 / 2 = 0.3466: the slowest pair's weight never "
                                         r"halves \(it stays above e\^\(-2 beta\) > 1/2\); raise beta above 0.3466$"):
        theory.half_weight_rows(1.0, 0.1, 0.3, 4, 100.0)


def test_decay_band_default_logit_bound_is_zero():
    """By hand, B = 0 (the default): L = 3, m = 0.5, j = 1 gives the band [0, -3 log(1 - e^-1)]."""
    lo, hi = theory.decay_band(3, 0.5, 1)
    assert float(lo) == 0.0 and float(hi) == pytest.approx(-3 * math.log(1 - math.exp(-1.0)), rel=1e-14)


def test_decay_critical_distance_takes_the_smaller_of_a_tie():
    """L = 5, m = ln 2: g(k) = C(k+4, 4) 2^-k is 1, 5/2, 15/4, 35/8, 35/8, 63/16 for k = 0..5 (by hand): a tie at
    3 and 4, and the smaller, 3, is returned."""
    assert theory.decay_critical_distance(5, math.log(2)) == 3


def test_decay_peaks_admissible_needs_the_finite_row_width():
    """L = 1, m = 1, n = 20: the peak is k = 0 on the profile's maximum, and the band's width there is
    -log(1 - e^-20) = 2.06e-9 (by hand), more than the 1e-9 tolerance: admissible, and the band admits k = 0 only."""
    rows, skipped = theory.decay_peaks(20, [1.0], [1])
    assert skipped == [] and len(rows) == 1
    r = rows[0]
    assert (r["k_hat"], r["k_exact"], r["k_lo"], r["k_hi"]) == (0, 0, 0, 0) and r["admissible"]


def test_decay_peaks_skip_rule_at_another_rate_and_on_its_edge():
    """m = 0.5, L = 1: k* = 0 and the edge 10 e^-0.25 / (1 - e^-0.5) + 10 / 0.5 = 39.79 (by hand): n = 40 keeps the
    point, n = 39 skips it. At m = 0.49744090471551505 the edge is 40.0 exactly: a row of 40 skips it (it reaches
    the first token). A skipped depth listed first does not end the grid: L = 64 at m = 1 is skipped, L = 3 kept."""
    g = math.exp(-0.5)
    assert 39.7 < 10 * math.sqrt(g) / (1 - g) + 20 < 39.8
    assert len(theory.decay_peaks(40, [0.5], [1])[0]) == 1
    assert theory.decay_peaks(39, [0.5], [1]) == ([], [(0.5, 1)])
    m = 0.49744090471551505
    assert 10 * math.sqrt(math.exp(-m)) / (1 - math.exp(-m)) + 10 / m == 40.0
    assert theory.decay_peaks(40, [m], [1]) == ([], [(m, 1)])
    rows, skipped = theory.decay_peaks(40, [1.0], [64, 3])
    assert [r["L"] for r in rows] == [3] and skipped == [(1.0, 64)]


def test_decay_peaks_band_includes_a_distance_exactly_at_the_tolerance():
    """L = 2, n = 213, m = 0.11778303672165934 (near the tie of k = 7 and 8): log g(8) + width(8) equals
    max log g - 1e-9 (to 1e-14 written out here, to the last bit in the library's float64): k = 8 is admitted."""
    m, n = 0.11778303672165934, 213
    logg = [math.log(k + 1) - m * k for k in range(n)]                  # log C(k+1, k) e^{-mk}
    width8 = -2 * math.log(-math.expm1(-m * (n - 8)))
    assert max(logg) == logg[7] and abs(logg[8] + width8 - (logg[7] - 1e-9)) < 1e-14
    rows, _ = theory.decay_peaks(n, [m], [2])
    assert (rows[0]["k_lo"], rows[0]["k_hi"]) == (7, 8)


def test_half_weight_rows_defaults_and_reach_by_hand():
    """d = 4 at the default base 10,000: pair angles 1 and 0.01, scores (beta/2)(cos k + cos 0.01 k) (numpy). m = 0.01:
    the decay row halves at ceil(ln 2 / 0.01) = 70, so the rows run to n_far = 72 (the rope pair needs 19)."""
    import numpy as np

    m, theta, beta = 0.01, 0.1, 2.0
    hw = theory.half_weight_rows(m, theta, beta, 4)
    assert hw["n_far"] == 72 and hw["half_decay"] == 70
    k = np.arange(72)
    s = beta / 2 * (np.cos(k) + np.cos(0.01 * k))
    np.testing.assert_allclose(hw["w_all"].numpy(), np.exp(s - s[0]), rtol=1e-13, atol=0)
    assert all(hw[x].dtype == torch.float64 for x in ("w_decay", "w_rope", "w_all"))
    np.testing.assert_allclose(hw["w_decay"].numpy(), np.exp(-m * k), rtol=1e-15, atol=0)


def test_half_weight_rows_is_float64_whatever_the_default_dtype():
    """torch's default dtype set to bfloat16 changes nothing: n_far = 258 (theta_slow = 0.01, beta = 0.9686: the
    slowest pair halves at 128.4), so the query's position 257 (not a bfloat16) must be kept in float64. Against
    numpy, pair angles 1 and 0.01 (d = 4, base 10,000)."""
    import numpy as np

    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        hw = theory.half_weight_rows(0.5, 0.01, 0.9686, 4)
    finally:
        torch.set_default_dtype(old)
    assert hw["n_far"] == 258 and all(hw[x].dtype == torch.float64 for x in ("w_decay", "w_rope", "w_all"))
    k = np.arange(258)
    s = 0.9686 / 2 * (np.cos(k) + np.cos(0.01 * k))
    np.testing.assert_allclose(hw["w_all"].numpy(), np.exp(s - s[0]), rtol=1e-13, atol=0)
    np.testing.assert_allclose(hw["w_decay"].numpy(), np.exp(-0.5 * k), rtol=1e-15, atol=0)
    np.testing.assert_allclose(hw["w_rope"].numpy(), np.exp(0.9686 * (np.cos(0.01 * k) - 1)), rtol=1e-13, atol=0)


def test_half_weight_rows_a_weight_of_exactly_one_half_has_halved():
    """The half distances are the first k with weight <= 1/2, found where a weight is 1/2 to the last bit: the decay
    row at m = ln 2, k = 1; the slowest pair (theta 0.1) at beta = 0.8350840266515347, k = 14; and all pairs (base 100,
    d = 4) at beta = 0.3550205764855563, whose row has its minimum, exactly 1/2, at k = 28 and nowhere below it."""
    hw = theory.half_weight_rows(math.log(2), 0.1, 2.0, 4, 100.0)
    assert float(hw["w_decay"][1]) == 0.5 and hw["half_decay"] == 1
    hw = theory.half_weight_rows(-math.log(0.8), 0.1, 0.8350840266515347, 4, 100.0)
    assert float(hw["w_rope"][14]) == 0.5 < float(hw["w_rope"][13]) and hw["half_rope"] == 14
    hw = theory.half_weight_rows(-math.log(0.8), 0.1, 0.3550205764855563, 4, 100.0)
    assert float(hw["w_all"].min()) == float(hw["w_all"][28]) == 0.5 and hw["half_all"] == 28


def test_peak_directions_touching_intervals_do_not_force_a_move():
    """hi of the shallowest depth equal to lo of the deepest (4 = 4): the peak may stay at 4's neighbour: not forced."""
    pk = {(0.1, 2): 3, (0.1, 4): 3}
    d = theory.peak_directions(pk, {(0.1, 2): 3, (0.1, 4): 4}, {(0.1, 2): 4, (0.1, 4): 6})
    assert d["forced"] == 0 and d["moves where forced"]


def test_rope_critical_distance_stirling_finds_a_root_below_one():
    """L = 2, theta = 0.5, c = 100: F(1) = log 2 - 50 sin 0.5 < 0, so the root lies below k = 1; against a bisection
    of F = log((k+1)/k) - 50 sin(k/2) written out here."""
    def f(k: float) -> float:
        return math.log((k + 1) / k) - 50 * math.sin(k / 2)

    lo, hi = 1e-9, 1.0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if f(mid) > 0 else (lo, mid)
    got = theory.rope_critical_distance_stirling(2, 0.5, 100.0)
    assert got < 1 and got == pytest.approx(lo, abs=1e-9)


def test_rope_profile_bounds_and_profile_by_hand_away_from_zero():
    """k = 2, L = 2, theta = 0.2, beta = 1.3: bounds log 3 + 1.3 (1 + cos 0.4) and log 3 + 2.6 cos 0.2; the paper's
    profile at integer k (an int64 tensor) is log C(k+L-1, k) + c cos(k theta) in float64 (math, term by term)."""
    lo, hi = theory.rope_profile_bounds_log(torch.tensor([2]), 2, 0.2, 1.3)
    assert float(lo[0]) == pytest.approx(math.log(3) + 1.3 * (1 + math.cos(0.4)), rel=1e-14)
    assert float(hi[0]) == pytest.approx(math.log(3) + 2.6 * math.cos(0.2), rel=1e-14)
    k = torch.arange(40)
    got = theory.rope_profile_log(k, 4, 0.05, 16.0)
    want = [math.log(math.comb(int(i) + 3, int(i))) + 16.0 * math.cos(int(i) * 0.05) for i in k]
    assert got.dtype == torch.float64
    assert torch.allclose(got, torch.tensor(want, dtype=torch.float64), rtol=1e-14, atol=1e-14)


def test_rope_row_scores_is_the_lemma_form_to_float64():
    """out[k] = beta cos(phi + k theta) (Lemma 4.6, numpy), to 1e-12 absolute with no relative slack."""
    import numpy as np

    n, theta, beta, phi = 300, 0.05, 3.0, 0.4
    k = np.arange(n)
    got = theory.rope_row_scores(n, theta, beta, phi)
    np.testing.assert_allclose(got.numpy(), beta * np.cos(phi + k * theta), rtol=0, atol=1e-12)
