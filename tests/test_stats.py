"""posbias.stats: the mean over runs and its standard error, Student's t, the verdict, Holm's correction."""
import pytest

from posbias.stats import holm, p_value, seed_mean_se, t_critical, verdict


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


def test_sample_size_is_the_textbook_formula():
    from posbias.stats import sample_size
    # (1.95996 sqrt(3/16) + 0.84162 sqrt(15/64)) / 0.375 = 3.3505, squared 11.23 -> 12
    assert sample_size(0.25, 0.625) == 12
    assert sample_size(0.5, 0.75) == 29                     # (0.97998 + 0.36445) / 0.25 = 5.378 -> 28.9
    assert sample_size(0.1, 0.2) == 86                      # (0.58799 + 0.33665) / 0.1 = 9.246 -> 85.5
    with pytest.raises(ValueError, match="p0 < p1"):
        sample_size(0.5, 0.5)


def test_rate_above_is_the_exact_one_sided_test():
    from math import comb

    from posbias.stats import rate_above
    r = rate_above(5, 6, 0.25, p1=0.5)
    by_hand = sum(comb(6, k) * 0.25 ** k * 0.75 ** (6 - k) for k in (5, 6))   # P(X >= 5) = 0.00464
    assert abs(r["p_value"] - by_hand) < 1e-12 and r["rate"] == 5 / 6
    # 4 of 6: P(X >= 4) = 0.0376 > 0.025 (a two-sided 5% would not reject either; one-sided 5% would)
    assert abs(rate_above(4, 6, 0.25)["p_value"] - 0.03760) < 1e-4
    # decided from n and the rule alone: 12 trials against 0.25 (alternative 0.625) decide, 11 do not,
    # whatever the successes
    assert all(rate_above(k, 12, 0.25)["decided"] for k in range(13))
    assert not any(rate_above(k, 11, 0.25)["decided"] for k in range(12))
    assert not rate_above(11, 11, 0.25)["passed"]           # significant, but the sample was too small
    # a nearer alternative needs more: 20 trials decide against 0.625, not against 0.5 (30)
    assert rate_above(10, 20, 0.25)["decided"] and not rate_above(10, 20, 0.25, p1=0.5)["decided"]
    assert rate_above(7, 12, 0.25)["passed"] and not rate_above(6, 12, 0.25)["passed"]
    with pytest.raises(ValueError, match="successes"):
        rate_above(7, 6, 0.25)


def test_rate_above_holds_its_level_and_power():
    """Simulated: under the null rate the test passes at most level / 2 of the time (the exact test
    is conservative); at the alternative and a sample of ``n_needed`` it passes about ``power`` of
    the time (exact: 0.73 at 12 trials against 0.25, 0.71 at 29 against 1/2: its critical count is an
    integer)."""
    import numpy as np

    from posbias.stats import rate_above
    rng = np.random.default_rng(0)
    for p0, n in ((0.25, 12), (0.5, 29), (0.1, 40)):
        p1 = (1 + p0) / 2
        null = np.mean([rate_above(int(k), n, p0)["passed"] for k in rng.binomial(n, p0, 4000)])
        alt = np.mean([rate_above(int(k), n, p0)["passed"] for k in rng.binomial(n, p1, 4000)])
        assert null <= 0.025 + 3 * (0.025 * 0.975 / 4000) ** 0.5, (p0, null)
        assert alt >= 0.65, (p0, alt)
