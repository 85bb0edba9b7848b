"""posbias.stats: the mean over runs and its standard error, Student's t, the verdict, Holm's correction."""
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
