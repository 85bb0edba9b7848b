"""posbias.measures.stats: the mean over runs and its standard error, Student's t, the verdict, Holm's correction."""
import pytest
import torch

from posbias.measures.stats import holm, p_value, rate_verdict, seed_mean_se, t_critical, verdict


def test_verdict_and_standard_error():
    m, se = seed_mean_se([0.2, 0.2], n_test=1000)
    assert m == 0.2 and abs(se - (0.5 / 1000) ** 0.5) < 1e-12      # no seed spread: binomial part only,
    m, se = seed_mean_se([0.2] * 5, n_test=1000)                     # and seeds share the test sets, so it
    assert abs(se - (0.5 / 1000) ** 0.5) < 1e-12                     # does not shrink with more of them
    m, se = seed_mean_se([0.1, 0.3], n_test=10**9)
    assert abs(m - 0.2) < 1e-12 and abs(se - (0.02 / 2) ** 0.5) < 1e-6   # spread part: sample variance / n
    assert verdict(0.2, 0.05) == "reproduced" and verdict(-0.2, 0.05) == "contradicted"
    assert verdict(0.05, 0.05) == "inconclusive" and verdict(-0.2, 0.05, sign=-1) == "reproduced"
    m, se = seed_mean_se([0.25, 0.15], 10000)                        # 3.96 SE, below t(1 df) = 12.7: too few runs
    assert verdict(m, se, n_runs=2) == "inconclusive"
    m, se = seed_mean_se([0.25, 0.15, 0.2, 0.25, 0.15], 10000)       # 8.5 SE > t(4 df) = 2.78
    assert verdict(m, se, n_runs=5) == "reproduced"


def test_t_critical_and_p_value_are_students_t():
    assert abs(t_critical(5) - 2.7764) < 1e-4 and abs(t_critical(2) - 12.706) < 1e-3
    assert abs(t_critical(1) - 1.95996) < 1e-4                     # one run: the known binomial variance
    # the p-value is below the level exactly when the mean lies beyond the critical value
    crit = t_critical(5)
    assert p_value(crit * 1.01, 1.0, 5) < 0.05 < p_value(crit * 0.99, 1.0, 5)
    assert p_value(0.0, 1.0, 5) == 1.0 and p_value(0.1, 0.0, 5) == 0.0
    # 2.5 SE with five runs: "reproduced" by the old two-SE rule, inconclusive under t(4)
    assert verdict(2.5, 1.0) == "reproduced" and verdict(2.5, 1.0, n_runs=5) == "inconclusive"


def test_holm_steps_down_and_stops_at_the_first_failure():
    # m = 4: thresholds 0.0125, 0.0167, 0.025, 0.05
    assert holm([0.01, 0.04, 0.03, 0.005]) == [True, False, False, True]     # 0.03 > 0.025 stops it
    assert holm([0.001, 0.002, 0.02, 0.04]) == [True, True, True, True]
    assert holm([0.2, 0.001]) == [False, True] and holm([]) == []
    assert holm([0.03, 0.03]) == [False, False] and holm([0.03]) == [True]   # one test: the level itself



def test_rate_verdict_is_the_exact_test_both_ways():
    from math import comb

    from posbias.measures.stats import rate_verdict

    def tail(ks, n, p):
        return sum(comb(n, k) * p ** k * (1 - p) ** (n - k) for k in ks)

    r = rate_verdict(5, 6, 0.25)
    assert abs(r["p_above"] - tail((5, 6), 6, 0.25)) < 1e-12 and r["verdict"] == "reproduced"   # 0.0046
    assert abs(r["p_below"] - tail(range(6), 6, 0.25)) < 1e-12 and r["rate"] == 5 / 6
    # 4 of 6: P(X >= 4) = 0.0376, above 0.025 (one-sided 5% would call it reproduced)
    assert rate_verdict(4, 6, 0.25)["verdict"] == "inconclusive"
    # 0 of 6 against 1/4: P(X <= 0) = 0.178, too few to contradict; 0 of 13: 0.0238
    assert rate_verdict(0, 6, 0.25)["verdict"] == "inconclusive"
    assert rate_verdict(0, 12, 0.25)["verdict"] == "inconclusive"      # 0.0317
    assert rate_verdict(0, 13, 0.25)["verdict"] == "contradicted"
    # a majority: 21 of 30 (P(X >= 21) = 0.021) is shown, 20 (0.049) is not; 9 of 30 is a minority (0.021)
    assert rate_verdict(21, 30, 0.5)["verdict"] == "reproduced"
    assert rate_verdict(20, 30, 0.5)["verdict"] == "inconclusive"
    assert rate_verdict(9, 30, 0.5)["verdict"] == "contradicted"
    assert rate_verdict(0, 0, 0.5)["verdict"] == "inconclusive"
    with pytest.raises(ValueError, match="successes"):
        rate_verdict(7, 6, 0.25)


def test_rate_verdict_contradicts_a_true_claim_rarely():
    """Simulated at the null rate and above it: contradicted at most level / 2 of the time, at any size."""
    import numpy as np

    from posbias.measures.stats import rate_verdict
    rng = np.random.default_rng(0)
    for p0, p, n in ((0.25, 0.25, 12), (0.25, 0.31, 120), (0.5, 0.5, 29), (1 / 12, 0.2, 10)):
        v = [rate_verdict(int(k), n, p0)["verdict"] for k in rng.binomial(n, p, 4000)]
        assert np.mean([x == "contradicted" for x in v]) <= 0.025 + 3 * (0.025 * 0.975 / 4000) ** 0.5


def test_within_bound_decides_on_the_interval_both_ways():
    from posbias.measures.stats import within_bound

    # z = 1.960 for one estimate, 2.241 for two (Bonferroni): 1 - 0.025 / 2 = 0.9875
    assert abs(within_bound(0.0, 1.0, 5.0)["z"] - 1.959964) < 1e-5
    assert abs(within_bound(0.0, 1.0, 5.0, family=2)["z"] - 2.241403) < 1e-5
    # |value| + z se <= bound: within; the sign of the value does not matter
    assert within_bound(-1.0, 1.0, 2.97)["verdict"] == "reproduced"          # 2.960 <= 2.97
    assert within_bound(-1.0, 1.0, 2.95)["verdict"] == "inconclusive"        # 2.960 > 2.95
    assert within_bound(1.0, 1.0, 2.95, family=2)["verdict"] == "inconclusive"
    # |value| - z se > bound: beyond
    assert within_bound(5.0, 1.0, 3.03)["verdict"] == "contradicted"         # 3.040 > 3.03
    assert within_bound(-5.0, 1.0, 3.05)["verdict"] == "inconclusive"        # 3.040 <= 3.05
    # a noisy estimate decides neither way; an exact one decides at the bound
    assert within_bound(1e-6, 1e-5, 1e-5)["verdict"] == "inconclusive"
    assert within_bound(1.0, 0.0, 1.0)["verdict"] == "reproduced"
    assert within_bound(1.0 + 1e-12, 0.0, 1.0)["verdict"] == "contradicted"
    with pytest.raises(ValueError, match="se >= 0"):
        within_bound(0.0, -1.0, 1.0)


def test_within_bound_contradicts_a_true_claim_rarely():
    """Estimates drawn at the bound and inside it: contradicted at most level / 2 of the time."""
    import numpy as np

    from posbias.measures.stats import within_bound
    rng = np.random.default_rng(1)
    for true, se, bound in ((1.0, 0.5, 1.0), (-1.0, 0.1, 1.0), (0.0, 2.0, 1.0)):
        v = [within_bound(x, se, bound)["verdict"] for x in rng.normal(true, se, 4000)]
        assert np.mean([x == "contradicted" for x in v]) <= 0.025 + 3 * (0.025 * 0.975 / 4000) ** 0.5


def test_family_z_is_bonferroni_two_sided():
    from scipy import stats as st

    from posbias.measures.stats import family_z

    assert family_z(1, 0.05) == pytest.approx(1.959964, abs=1e-6)
    assert family_z(500) == pytest.approx(4.7534, abs=1e-4) and family_z(5000) == pytest.approx(5.1993, abs=1e-4)
    # m entries at z: a correct simulation fails any one with probability m * 2 * P(Z > z) = level
    for m in (1, 37, 1520):
        assert m * 2 * st.norm.sf(family_z(m)) == pytest.approx(1e-3, rel=1e-9)
    with pytest.raises(ValueError, match="m >= 1"):
        family_z(0)


def test_rate_verdict_on_no_trials_says_nothing_and_is_a_probability():
    r = rate_verdict(0, 0, 0.5)
    assert (r["p_above"], r["p_below"], r["verdict"], r["n"]) == (1.0, 1.0, "inconclusive", 0)


def test_within_bound_returns_its_inputs_by_name_and_takes_a_bound_of_zero():
    from posbias.measures.stats import within_bound

    r = within_bound(0.0, 0.0, 0.0)                 # exactly zero, known exactly: within a bound of zero
    assert r == {"value": 0.0, "se": 0.0, "bound": 0.0, "z": pytest.approx(1.959964, abs=1e-6), "verdict": "reproduced"}
    assert within_bound(0.1, 0.0, 0.0)["verdict"] == "contradicted"
    with pytest.raises(ValueError, match="bound >= 0"):
        within_bound(0.0, 0.1, -0.01)


def test_rate_verdict_reproduces_at_p_above_equal_to_half_the_level():
    """The rule is ``P(X >= successes) <= level / 2``, equality included: 5 of 5 trials against
    p0 = 1/2 has P(X >= 5) = 2^-5 = 1/32, exactly half of level = 1/16 in floating point, so the claim
    is reproduced (a strict ``<`` would leave it inconclusive). The same boundary on the other side:
    0 of 5 has P(X <= 0) = 1/32, contradicted."""
    r = rate_verdict(5, 5, 0.5, level=1 / 16)
    assert r["p_above"] == 1 / 32 == (1 / 16) / 2
    assert r["verdict"] == "reproduced"
    r = rate_verdict(0, 5, 0.5, level=1 / 16)
    assert r["p_below"] == 1 / 32 and r["verdict"] == "contradicted"


def test_p_value_of_a_mean_of_one_is_not_the_zero_mean_shortcut():
    """A mean of exactly 1.0 is an ordinary mean: 2 SE with one run is the normal two-sided 0.0455
    (2 * (1 - Phi(2)) = 0.04550026), not the 1.0 kept for a zero mean. Sees a shortcut on the wrong mean."""
    assert p_value(1.0, 0.5, 1) == pytest.approx(0.04550026, abs=1e-8)
    assert p_value(-1.0, 0.5, 1) == pytest.approx(0.04550026, abs=1e-8)


def test_family_z_refuses_a_level_of_one_or_more():
    """A level is a probability below 1: level 1.0 or 1.5 raises (a widened bound would return a z of
    1.28 or 0.67 for them); level 0.05 for one entry is the two-sided 5% quantile 1.959964."""
    from posbias.measures.stats import family_z

    assert family_z(1, 0.05) == pytest.approx(1.959964, abs=1e-6)
    for level in (1.0, 1.5, 0.0):
        with pytest.raises(ValueError, match="0 < level < 1"):
            family_z(5, level)


def test_seed_mean_se_takes_the_contrasts_coefficients_as_the_judge_does():
    """Issue 94: a difference of two gaps has four accuracies (coef2 = 4), so its binomial floor is 1/n_test,
    twice a single gap's; the judge's formula, sqrt(s^2/n + coef2/(4 n_test))."""
    import math

    from posbias.analysis.claims import quantities

    vals, n = [0.01, 0.03, 0.02, 0.05], 10_000
    var = sum((v - 0.0275) ** 2 for v in vals) / 3
    assert seed_mean_se(vals, n)[1] == pytest.approx(math.sqrt(var / 4 + 2 / (4 * n)))       # a gap
    assert seed_mean_se(vals, n, coef2=4)[1] == pytest.approx(math.sqrt(var / 4 + 4 / (4 * n)))
    assert seed_mean_se([0.2], n, coef2=4)[1] == pytest.approx(math.sqrt(1 / n))
    from posbias.analysis.claims import mean_se

    m = quantities.Measure(torch.tensor(vals, dtype=torch.float64), n, 4.0)
    assert mean_se(m)[:2] == pytest.approx(seed_mean_se(vals, n, coef2=4))


# ------------------------------------------------------------------ the absent verdict and power (issue 94)

def test_tost_is_two_one_sided_students_t_tests():
    from scipy import stats as st

    from posbias.measures.stats import tost

    mean, se, n, margin = 0.012, 0.015, 5, 0.05
    r = tost(mean, se, n, margin)
    t = st.t(n - 1)
    assert r["p"] == pytest.approx(max(t.sf((mean + margin) / se), t.sf((margin - mean) / se)), rel=1e-12)
    assert (r["lower"], r["upper"]) == pytest.approx((mean - t.ppf(0.95) * se, mean + t.ppf(0.95) * se), rel=1e-12)
    assert r["absent"] and r["p"] < 0.05


def test_tost_uses_the_ninety_percent_interval_not_the_ninety_five():
    from scipy import stats as st

    from posbias.measures.stats import tost

    # half-widths: 90% 2.132 se, 95% 2.776 se (4 df): a mean whose 90% interval fits and 95% does not
    se, margin = 0.01, 0.05
    mean = margin - 2.45 * se
    assert mean + st.t.ppf(0.95, 4) * se < margin < mean + st.t.ppf(0.975, 4) * se
    assert tost(mean, se, 5, margin)["absent"]
    assert not tost(mean + 0.4 * se, se, 5, margin)["absent"]          # 90% interval reaches past the margin


@pytest.mark.parametrize("mean", [-0.049, -0.03, 0.0, 0.02, 0.049, 0.06, -0.07])
def test_tost_absent_exactly_when_the_interval_lies_inside_the_margin(mean):
    from posbias.measures.stats import tost

    for se, n in ((0.004, 5), (0.02, 10), (0.01, 1)):
        r = tost(mean, se, n, 0.05)
        assert r["absent"] == (-0.05 < r["lower"] and r["upper"] < 0.05)
    assert not tost(0.06, 0.0, 5, 0.05)["absent"] and tost(0.04, 0.0, 5, 0.05)["absent"]


def test_tost_refuses_a_margin_of_zero_and_a_negative_se():
    from posbias.measures.stats import tost

    with pytest.raises(ValueError, match="margin > 0"):
        tost(0.0, 0.01, 5, 0.0)
    with pytest.raises(ValueError, match="se >= 0"):
        tost(0.0, -0.01, 5, 0.05)


def test_seeds_needed_is_the_first_n_that_passes_by_brute_force():
    from scipy import stats as st

    from posbias.measures.stats import floor_binds, seeds_needed

    cases = ((0.03, 0.04, 0.005, 0.05), (-0.05, 0.02, 0.01, 0.05 / 48), (0.2, 0.0, 0.01, 0.001))
    for effect, sd, floor, level in cases:
        brute = next(n for n in range(2, 10_000)
                     if abs(effect) >= st.t.ppf(1 - level / 2, n - 1) * (sd ** 2 / n + floor ** 2) ** 0.5)
        assert seeds_needed(effect, sd, floor, level) == brute
        assert not floor_binds(effect, floor, level)


def test_seeds_needed_says_none_where_the_floor_binds_or_beyond_n_max():
    from scipy import stats as st

    from posbias.measures.stats import floor_binds, seeds_needed

    floor, level = 0.01, 0.05 / 48
    z = st.norm.ppf(1 - level / 2)
    assert floor_binds(0.99 * z * floor, floor, level) and seeds_needed(0.99 * z * floor, 0.0, floor, level) is None
    assert not floor_binds(1.01 * z * floor, floor, level)
    assert seeds_needed(1.01 * z * floor, 0.0, floor, level) is not None       # no spread: t -> z reaches it
    assert seeds_needed(0.01, 0.3, 0.0, 0.05, n_max=50) is None                # needs ~3,500 runs
