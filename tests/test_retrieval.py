"""posbias.science.retrieval: the strategies' closed forms against their oracle networks, and the reading rule."""
import itertools
import math
from fractions import Fraction

import pytest
import torch

from posbias.science import retrieval as r
from posbias.science.task import TaskConfig, ic_test_sets, make_task

N_MC = 3000


@pytest.fixture(scope="module")
def mc():
    return r.baselines(n=N_MC, seed=11)


def test_closed_forms_by_hand():
    """The paper's sizes (N = 8, B = 4, L = 32), worked by hand: a slot other than the correct one holds the
    query's class with probability 3/7, so its label is the query's with q = 3/7 + 4/7 * 1/32 = 0.4464."""
    c = r.closed_forms()
    q = 3 / 7 + 4 / 7 / 32
    assert c["ic"]["uniform"] == 1 / 32
    assert c["ic"]["copy_random"] == pytest.approx(1 / 2 + 1 / 64, abs=1e-15)
    assert c["ic"]["copy_slot"] == pytest.approx((2 + 4 * q) / 6, abs=1e-15)
    assert c["ic"]["match_worst"] == pytest.approx(1 / 2 + q / 2, abs=1e-15)
    assert c["ic"]["ignore_best"] == pytest.approx(81 / 112, abs=1e-15)   # 5/7 + 2/7 * 1/32
    assert c["sweep"]["copy_random"] == c["sweep"]["copy_slot"] == pytest.approx(1 / 8 + 7 / 8 / 32, abs=1e-15)
    assert c["sweep"]["match_worst"] == 1.0
    assert set(c["ic"]) == set(c["sweep"]) == set(r.STRATEGIES)
    assert all(c[k][s] is None for k in ("ic",) for s in r.MC_ONLY)


def test_max_count_mean_against_enumeration():
    for n, L in ((3, 4), (4, 3), (5, 2), (2, 6)):
        brute = Fraction(sum(max(a.count(v) for v in set(a)) for a in itertools.product(range(L), repeat=n)), L ** n)
        assert r.max_count_mean(n, L) == brute
    assert r.max_count_mean(1, 32) == 1 and r.max_count_mean(8, 1) == 8


@pytest.mark.parametrize("kind", ["ic", "sweep"])
def test_closed_forms_match_the_oracle_networks(mc, kind):
    """Every closed form equals its oracle network's accuracy, measured by task.accuracy, within four binomial
    standard errors (the six IC sets or the eight sweep sets of N_MC sequences each)."""
    closed = r.closed_forms()[kind]
    sets = 6 if kind == "ic" else 8
    for s, exact in closed.items():
        if exact is None:
            continue
        se = math.sqrt(max(exact * (1 - exact), 1e-4) / (N_MC * sets))
        bias = 3 * se if s == "copy_slot" else 0     # the best of eight noisy slots is biased upward
        assert mc[kind][s] == pytest.approx(exact, abs=4 * se + bias), (kind, s)


def test_monte_carlo_only_strategies(mc):
    """Matching by the nearest item retrieves; reading the items without the query solves the IC sets through
    their planted copy, yet scores no more than the label-only ceiling on the sweep, which plants none."""
    assert 0.88 < mc["ic"]["match_nearest"] < 0.97
    assert mc["sweep"]["match_nearest"] > 0.99
    assert mc["ic"]["dup_vote"] > 0.97
    assert mc["sweep"]["dup_vote"] == mc["sweep"]["ignore_best"]


def test_oracles_are_measured_as_networks():
    """An oracle is scored by task.accuracy like a trained network: copying the correct slot is always right."""
    from posbias.science.task import accuracy
    task = make_task(0)
    sets = ic_test_sets(200, 0)
    right = r.Oracle("copy_slot", task, slot=0)
    assert float(accuracy(right, [task], sets["IC_first_last"])) == 1.0
    assert float(accuracy(right, [task], sets["IC_last_first"])) < 0.7
    with pytest.raises(ValueError, match="unknown strategy"):
        r.Oracle("copy_everything", task)
    with pytest.raises(ValueError, match="tie"):
        r.Oracle("match_worst", task, tie="middle")
    with pytest.raises(ValueError, match="one member"):
        right(torch.zeros(2, 1, 17, 64))


def test_reading_rule():
    cfg = TaskConfig()
    c = r.closed_forms(cfg)
    ceil, copier = c["sweep"]["ignore_best"], c["ic"]["copy_random"]
    assert r.reading(0.52, 0.16, 10000, 2000) == "ignores the query"
    assert r.reading(0.74, 0.16, 10000, 2000) == "between"
    assert r.reading(0.74, 0.90, 10000, 2000) == "retrieves"
    assert r.reading(0.52, ceil + 0.002, 10000, 2000) == "ignores the query"      # inside three SEs of the ceiling
    assert r.reading(0.52, ceil + 0.03, 10000, 2000) == "retrieves"
    assert r.reading(copier + 0.003, 0.1, 10000, 2000) == "ignores the query"
    assert r.reading(copier + 0.03, 0.1, 10000, 2000) == "between"
    assert set(r.READINGS) == {"retrieves", "between", "ignores the query"}
