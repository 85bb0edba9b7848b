"""The absent verdict and the power column (posbias/analysis/claims/power.py) on synthetic units with known effects."""
import pytest
from scipy import stats as st

from posbias.analysis import claims
from posbias.analysis.claims import power

N_TEST = 10_000


def _unit(gap: float, acc: float = 0.5):
    """A stored-unit stand-in whose first-last gap is ``gap`` (its other gaps 0)."""
    gaps = {"first-middle": 0.0, "first-last": gap, "middle-last": 0.0}
    ic = {}
    for pair, g in gaps.items():
        a, b = pair.split("-")
        ic[f"IC_{a}_{b}"], ic[f"IC_{b}_{a}"] = acc + g / 2, acc - g / 2
    curves = {"step": [0, 50, 100], **{k: [acc, acc, v] for k, v in ic.items()}, "loss": [0.0, 1.0, 1.0]}
    return {"params": {"n_test": N_TEST, "n_sweep": 2000, "n_sink": 10000, "depth": 2},
            "gaps": gaps, "ic_accuracy": ic, "curves": curves}


def _runs(mean: float, spread: float, n: int = 5):
    return [_unit(mean + spread * (k - (n - 1) / 2)) for k in range(n)]


ENTRY = "fig2-nope-early-2"            # No PE|2's first-last gap, '> 0'


def _judged(units):
    reg = claims.register()
    (j,) = claims.judge([e for e in reg.entries if e.id == ENTRY], {"wu-fig-2": {"No PE|2": units}})
    return j


def test_the_register_declares_the_absent_rule_with_its_grounds():
    reg = claims.register()
    assert reg.judge.absent == (0.05, 0.05)
    assert "90% interval" in reg.judge.text["absent"] and "absence margin" in reg.judge.text["absent_grounds"]


def test_an_effect_near_zero_with_a_tight_interval_is_absent():
    j = _judged(_runs(0.002, 0.004))
    a = power.absent(j)
    assert j.holm == "inconclusive" and a is not None and a["absent"]
    t = st.t(j.n_runs - 1).ppf(0.95)
    assert a["upper"] == pytest.approx(j.mean + t * j.se) and a["upper"] < 0.05
    assert power.verdicts([j]) == ["absent"]


def test_a_noisy_effect_near_zero_stays_inconclusive():
    j = _judged(_runs(0.0, 0.05))                                  # SD ~0.08: the 90% interval is wider than +-0.05
    assert j.holm == "inconclusive" and not power.absent(j)["absent"]
    assert power.verdicts([j]) == ["inconclusive"]


def test_an_effect_just_beyond_the_margin_is_not_absent_and_a_reproduced_one_is_not_tested():
    j = _judged(_runs(0.045, 0.03))                                # small effect, interval crosses 0.05
    assert j.holm == "inconclusive" and power.verdicts([j]) == ["inconclusive"]
    big = _judged(_runs(0.2, 0.004))
    assert big.holm == "reproduced" and power.absent(big) is None and power.verdicts([big]) == ["reproduced"]


def test_absent_counts_partition_the_entries_and_count_those_that_survive_holm():
    js = [_judged(_runs(0.0, 0.002)), _judged(_runs(0.0, 0.05)), _judged(_runs(0.2, 0.004))]
    c = power.absent_counts(js)
    assert (c["absent"], c["inconclusive"], c["reproduced"], c["total"]) == (1, 1, 1, 3)
    assert sum(c[v] for v in power.VERDICTS) == c["total"] and c["absent after Holm"] == 1


def test_pooled_units_take_a_profile_only_where_every_configuration_is_complete():
    reg = claims.register()
    e = next(e for e in reg.entries if e.id == "fig2-decay-reduces-2")          # No PE|2 and decay|2
    full = {"No PE|2": _runs(0.1, 0.01), "decay|2": _runs(0.05, 0.01)}
    part = {"No PE|2": _runs(0.1, 0.01), "decay|2": _runs(0.05, 0.01)[:4] + [None]}
    got = power.pooled_units(e, {"paper": full, "confirm": part})
    assert len(got["No PE|2"]) == 5 and len(got["decay|2"]) == 5
    got = power.pooled_units(e, {"paper": full, "confirm": full})
    assert len(got["No PE|2"]) == 10
    assert power.pooled_units(e, {"paper": part}) is None


def test_power_rows_need_the_runs_students_t_needs_at_holms_strictest_step():
    units = _runs(0.03, 0.04)
    j = _judged(units)
    (row,) = power.power_rows([j], {"paper": {"wu-fig-2": {"No PE|2": units}}})
    floor = (2 / (4 * N_TEST)) ** 0.5
    assert row["floor"] == pytest.approx(floor) and row["runs pooled"] == 5
    level = 0.05 / 1                                    # one entry judged: Holm's first step is the level
    sd = row["sd"]
    brute = next(n for n in range(2, 5000)
                 if 0.03 >= st.t.ppf(1 - level / 2, n - 1) * (sd ** 2 / n + floor ** 2) ** 0.5)
    assert row["effect"] == pytest.approx(0.03) and row["runs needed"] == brute and not row["floor binds"]


def test_an_effect_under_the_floor_can_be_decided_by_no_number_of_runs():
    units = _runs(0.01, 0.0)
    (row,) = power.power_rows([_judged(units)], {"paper": {"wu-fig-2": {"No PE|2": units}}})
    assert row["floor binds"] and row["runs needed"] is None and not row["decided now"]
