"""The residual study's descriptive report: changes with depth, paired by seed, and their sentences."""
import pytest

from posbias.analysis import studies

N_TEST = 10_000


def _units(gaps_by_seed):
    return [{"gaps": {"first-last": g, "middle-last": 0.0, "first-middle": 0.0}} for g in gaps_by_seed]


def _results(per_pe):
    """``per_pe[pe][depth]`` -> per-seed first-vs-last gaps."""
    return {f"{pe}|{d}": _units(gs) for pe, by_d in per_pe.items() for d, gs in by_d.items()}


SEED_NOISE = [0.00, 0.01, -0.01, 0.005, -0.005]


def _shift(base, delta):
    return [base + delta + e for e in SEED_NOISE]


RES = _results({"No PE": {2: _shift(0.2, 0), 6: _shift(0.2, -0.1), 10: _shift(0.2, -0.2)},
                "decay": {2: _shift(0.0, 0), 6: _shift(0.0, 0.1), 10: _shift(0.0, 0.2)},
                "RoPE": {2: _shift(0.1, 0), 6: _shift(0.1, 0.0), 10: _shift(0.1, 0.001)}})


def test_depth_changes_are_paired_by_seed_with_the_binomial_bound_of_four_accuracies():
    ch = studies.depth_changes(RES, [2, 6, 10], N_TEST)
    assert [(c.pe, c.shallow, c.deep) for c in ch[:3]] == [("No PE", 2, 6), ("No PE", 6, 10), ("No PE", 2, 10)]
    whole = {c.pe: c for c in ch if (c.shallow, c.deep) == (2, 10)}
    assert whole["No PE"].mean == pytest.approx(-0.2) and whole["decay"].mean == pytest.approx(0.2)
    # the seeds' noise cancels in the paired difference: only the test sets' bound, 1 / n_test, remains
    assert whole["No PE"].se == pytest.approx((1 / N_TEST) ** 0.5)
    assert whole["No PE"].runs == 5 and whole["No PE"].crit == pytest.approx(2.776, abs=1e-3)
    assert [whole[pe].direction for pe in ("No PE", "decay", "RoPE")] == ["falls", "rises", "flat"]


def test_two_depths_give_one_change_and_the_table_says_which_way():
    ch = studies.depth_changes(RES, [6, 2], N_TEST, pes=("No PE",))
    assert [(c.shallow, c.deep) for c in ch] == [(2, 6)]
    t = studies.changes_table(studies.depth_changes(RES, [2, 10], N_TEST))
    assert list(t["direction"]) == ["falls", "rises", "flat (within its noise)"]
    assert t["change of first-last"][0] == f"{-0.2:+.3f} ± {(1 / N_TEST) ** 0.5:.3f}"


def test_sentences_state_the_numbers_and_the_directions():
    s = studies.trend_sentence(RES, [2, 6, 10], N_TEST)
    assert s.startswith("No PE's first-vs-last gap is +0.200 ± ")
    assert "falls beyond its noise for No PE (-0.200" in s and "rises beyond its noise for decay" in s
    assert "stays within its noise for RoPE" in s
    assert studies.trend_sentence(RES, [2], N_TEST).startswith("fewer than two depths")
    o = studies.ordering_sentence(RES, [2, 10], N_TEST)
    assert o.startswith("at 2 layers No PE (+0.200") and "; at 10 layers decay (+0.200" in o
    assert studies.ordering_sentence(RES, [], N_TEST) == "no depth is complete yet"
