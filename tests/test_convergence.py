"""The stopping rule of the ``converged`` profile and the reading of learning curves, on synthetic
curves with a known plateau, a known drift and a known sign change, and on a tiny training run."""
import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from posbias.measures import convergence as cv
from posbias import training as train

N_TEST = 10_000


def _curves(steps, gap_fl, loss, base=0.5):
    """Curves whose first-last gap is ``gap_fl`` (the others 0) and loss ``loss``, per step."""
    g = np.asarray(gap_fl, dtype=float)
    c = {"step": list(steps), "loss": list(loss)}
    for a, b in (("first", "middle"), ("middle", "first"), ("middle", "last"), ("last", "middle")):
        c[f"IC_{a}_{b}"] = [base] * len(steps)
    c["IC_first_last"] = list(base + g / 2)
    c["IC_last_first"] = list(base - g / 2)
    return c


STEPS = list(range(0, 300_001, 5000))


def test_a_plateau_stops_at_the_first_step_allowed():
    c = _curves(STEPS, [0.1] * len(STEPS), [1.0] * len(STEPS))
    assert cv.stop_step(c, N_TEST, cv.PLATEAU) == cv.PLATEAU.min_step


def test_a_drift_larger_than_two_standard_errors_never_stops():
    se = float(cv.gap_se(_curves([0], [0.0], [1.0]), "first-last", N_TEST)[0])
    # a gap that moves 3 SE per 50,000 iterations, forever
    c = _curves(STEPS, [3 * se * s / 50_000 for s in STEPS], [1.0] * len(STEPS))
    assert cv.stop_step(c, N_TEST, cv.PLATEAU) is None
    # and one that moves 1 SE per 50,000 iterations passes
    c = _curves(STEPS, [1 * se * s / 50_000 for s in STEPS], [1.0] * len(STEPS))
    assert cv.stop_step(c, N_TEST, cv.PLATEAU) == cv.PLATEAU.min_step


def test_a_falling_loss_holds_the_rule_until_it_flattens():
    # the loss falls 2% per 50k iterations until 200k, then stays: the window must clear the fall
    loss = [1.0 - 0.02 * min(s, 200_000) / 50_000 for s in STEPS]
    c = _curves(STEPS, [0.0] * len(STEPS), loss)
    stop = cv.stop_step(c, N_TEST, cv.PLATEAU)
    assert 200_000 < stop <= 250_000          # not while it falls 2% a window; once the fit clears the fall
    assert not cv.rule_holds(c, N_TEST, cv.PLATEAU, 200_000)


def test_the_window_change_is_the_least_squares_slope_times_the_window():
    steps = [0, 10, 20, 30]
    assert float(cv.window_change(steps, np.array([1.0, 2.0, 3.0, 4.0]), 30, 20)) == pytest.approx(2.0)
    two = cv.window_change(steps, np.array([[0, 0], [1, -1], [2, -2], [3, -3.0]]), 30, 30)
    assert two.tolist() == pytest.approx([3.0, -3.0])
    with pytest.raises(ValueError, match="need two"):
        cv.window_change(steps, np.zeros(4), 30, 5)


def test_sign_stable_from_finds_the_last_sign_change():
    steps = [0, 10, 20, 30, 40]
    mean, se = np.array([0.2, -0.1, 0.015, 0.3, 0.4]), np.full(5, 0.01)
    assert cv.sign_stable_from(steps, mean, se) == (30, 1)
    assert cv.sign_stable_from(steps, -mean, se) == (30, -1)
    assert cv.sign_stable_from(steps, np.array([0.2, 0.2, 0.2, 0.2, 0.0]), se) is None


def test_plateau_rows_tells_a_moving_mean_from_a_still_one():
    steps = list(range(0, 100_001, 5000))
    rng = np.random.default_rng(0)
    flat = 0.1 + 0.002 * rng.standard_normal((len(steps), 5))
    drift = flat + np.outer(np.array(steps) / 100_000, np.ones(5)) * 0.2
    assert not cv.plateau_rows(steps, flat, 20_000)["moving"]
    assert cv.plateau_rows(steps, drift, 20_000)["moving"]


def test_an_unknown_rule_is_refused():
    with pytest.raises(ValueError, match="plateau-50k"):
        cv.rule("plateau-1k")


def test_a_unit_with_a_rule_stops_when_it_holds_and_agrees_with_the_fixed_run(tmp_path, monkeypatch):
    """A tiny rule (from step 20, window 10, loose bounds) stops a 200-step cap early; the curves it
    has are exactly the first ones of the same unit trained a fixed number of steps, and its record
    says where and why it stopped. A rule that cannot hold trains to the cap and says so."""
    loose = cv.StopRule(name="tiny-loose", window=10, min_step=20, cap=200, gap_z=1e9, loss_rel=1e9)
    never = cv.StopRule(name="tiny-never", window=10, min_step=20, cap=200, gap_z=-1.0, loss_rel=-1.0)
    monkeypatch.setitem(cv.RULES, loose.name, loose)
    monkeypatch.setitem(cv.RULES, never.name, never)
    kw = dict(steps=200, seeds=[0], eval_every=10, n_test=64, n_sweep=32, n_sink=32, depths=[2])
    u = train.units_of("wu-fig-2", "default", kw)["decay|2"][0]      # a rule of the test's own, set on the unit
    u_loose, u_never = (dataclasses.replace(u, stop_rule=r) for r in ("tiny-loose", "tiny-never"))
    u_fixed = dataclasses.replace(u, steps=20)
    assert "stop_rule" not in u_fixed.params() and u_loose.params()["stop_rule"] == "tiny-loose"
    quiet = dict(progress=False, log=lambda s: None, threads=1)
    (r_loose,) = train.train_units([u_loose], **quiet)
    (r_fixed,) = train.train_units([u_fixed], **quiet)
    assert r_loose["stop"]["stopped_at"] == 20 and r_loose["stop"]["reason"] == "rule"
    assert r_loose["curves"] == r_fixed["curves"] and r_loose["ic_accuracy"] == r_fixed["ic_accuracy"]
    (r_never,) = train.train_units([u_never], checkpoint_dir=tmp_path, **quiet)
    assert r_never["stop"]["stopped_at"] == 200 and r_never["stop"]["reason"] == "cap"
    assert r_never["curves"]["step"][-1] == 200
    assert "stop" not in r_fixed
    with pytest.raises(ValueError, match="trains alone"):
        train.train_units([u_loose, u_never.__class__(**{**u_loose.__dict__, "seed": 1})], **quiet)


def test_units_without_a_rule_keep_their_keys():
    """Adding the field changed no stored key: a paper unit's params have no ``stop_rule``."""
    u = train.units_of("wu-fig-2", "paper", dict(depths=[2]))["decay|2"][0]
    assert "stop_rule" not in u.params() and train.Unit.from_params(u.params()) == u
    assert train.stored_campaign("wu-fig-2", "paper", depths=[2])["decay|2"][0] is not None


def test_rule_parts_name_the_part_that_fails_and_first_held_finds_the_gaps_alone():
    # gaps flat from the start, the loss falling 2% per 50k until 250k: the gaps hold at 100k,
    # the loss part only once its window clears the fall
    loss = [1.0 - 0.02 * min(s, 250_000) / 50_000 for s in STEPS]
    c = _curves(STEPS, [0.05] * len(STEPS), loss)
    parts = cv.rule_parts(c, N_TEST, cv.PLATEAU, 150_000)
    assert set(parts) == {*cv.GAP_NAMES, "loss"}
    assert all(bool(parts[g]) for g in cv.GAP_NAMES) and not bool(parts["loss"])
    assert cv.first_held(c, N_TEST, cv.PLATEAU, cv.GAP_NAMES) == cv.PLATEAU.min_step
    assert cv.first_held(c, N_TEST, cv.PLATEAU, ["loss"]) == cv.stop_step(c, N_TEST, cv.PLATEAU) > 250_000
    # before min_step nothing holds, whatever the curves
    assert not any(bool(v) for v in cv.rule_parts(c, N_TEST, cv.PLATEAU, 50_000).values())


def test_rule_reading_gives_each_drift_in_the_rules_own_units():
    # the first-last gap moves 3 SE (of step 0) per 50,000 iterations, the loss falls 2% of 1 per 50,000
    se0 = float(cv.gap_se(_curves([0], [0.0], [1.0]), "first-last", N_TEST)[0])
    loss = [1.0 - 0.02 * s / 50_000 for s in STEPS]
    c = _curves(STEPS, [3 * se0 * s / 50_000 for s in STEPS], loss)
    end = 200_000
    i = STEPS.index(end)
    got = cv.rule_reading(c, N_TEST, cv.PLATEAU, end)
    assert float(got["first-last"]) == pytest.approx(3 * se0 / cv.gap_se(c, "first-last", N_TEST)[i], rel=1e-9)
    assert float(got["first-middle"]) == float(got["middle-last"]) == 0.0
    assert float(got["loss"]) == pytest.approx(-0.02 / loss[i], rel=1e-9)
    assert cv.rule_reading(c, N_TEST, cv.PLATEAU, 95_000) is None                 # before min_step
    text = cv.describe_reading(got, cv.PLATEAU, end)
    assert text == ("at 200,000 over the last 50,000 iterations the gaps moved first-middle +0.0, first-last +3.0, "
                    "middle-last +0.0 SE (the rule allows 2) and the loss -2.2% (allows 1%)")
    assert "not read at 95,000" in cv.describe_reading(None, cv.PLATEAU, 95_000)


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([100_000, 150_000, 300_000]))
def test_a_part_holds_exactly_when_its_reading_is_within_the_rules_bound(seed, end):
    rng = np.random.default_rng(seed)
    n = len(STEPS)
    c = {"step": STEPS, "loss": list(1.0 + np.cumsum(rng.normal(0, 0.004, n)))}
    for a in ("first", "middle", "last"):
        for b in ("first", "middle", "last"):
            if a != b:
                c[f"IC_{a}_{b}"] = list(np.clip(0.5 + np.cumsum(rng.normal(0, 0.003, n)), 0.01, 0.99))
    parts, reading = cv.rule_parts(c, N_TEST, cv.PLATEAU, end), cv.rule_reading(c, N_TEST, cv.PLATEAU, end)
    for g in cv.GAP_NAMES:
        assert bool(parts[g]) == (abs(float(reading[g])) <= cv.PLATEAU.gap_z)
    assert bool(parts["loss"]) == (abs(float(reading["loss"])) <= cv.PLATEAU.loss_rel)


def test_loss_rise_finds_a_collapse_and_not_a_descent():
    steps = list(range(0, 300_001, 5000))
    falling = [0.0] + [1.0 + 1.0 / (1 + s / 50_000) for s in steps[1:]]   # step 0 logs no loss
    rise, best = cv.loss_rise({"step": steps, "loss": falling})
    assert rise == 0.0 and best == 300_000
    # learns to 2.5 by 120k, then falls back to 3.4 from 220k on (a plateau the rule would stop on)
    collapse = [0.0] + [3.3 - 0.8 * min(s, 120_000) / 120_000 if s < 220_000 else 3.4 for s in steps[1:]]
    rise, best = cv.loss_rise({"step": steps, "loss": collapse})
    assert best == 120_000 and rise == pytest.approx(3.4 / 2.5 - 1)


def test_member_curves_picks_one_member_and_leaves_a_units_curves_alone():
    ens = {"step": [0, 10], "loss": [[0.0, 0.0], [2.0, 3.0]], "IC_first_last": [[0.1, 0.2], [0.5, 0.6]]}
    assert cv.member_curves(ens, 1) == {"step": [0, 10], "loss": [0.0, 3.0], "IC_first_last": [0.2, 0.6]}
    unit = {"step": [0, 10], "loss": [0.0, 2.0]}
    assert cv.member_curves(unit) == unit
