"""posbias.analysis.overtraining: the gaps along training, on synthetic curves with a known plateau, a known
drift and a known sign change, and the register judged at earlier iterations."""
import numpy as np
import pytest

from posbias.analysis import overtraining as ot

STEPS = list(range(0, 100_001, 5000))
N_TEST = 10_000


def _unit(fl, seed_shift=0.0):
    """A run whose first-last gap follows ``fl(step)`` (the other gaps 0), accuracies around 0.5."""
    g = np.array([fl(s) for s in STEPS]) + seed_shift
    c = {"step": STEPS, "loss": [0.0] + [1.0] * (len(STEPS) - 1)}
    for a, b in (("first", "middle"), ("middle", "first"), ("middle", "last"), ("last", "middle")):
        c[f"IC_{a}_{b}"] = [0.5] * len(STEPS)
    c["IC_first_last"], c["IC_last_first"] = list(0.5 + g / 2), list(0.5 - g / 2)
    ic = {k: v[-1] for k, v in c.items() if k.startswith("IC_")}
    return {"params": {"n_test": N_TEST, "n_sweep": 2000, "n_sink": 10000, "depth": 2}, "curves": c,
            "ic_accuracy": ic, "gaps": {"first-middle": 0.0, "first-last": float(g[-1]), "middle-last": 0.0},
            "sweep_accuracy": [0.5] * 8}


SHIFTS = [-0.002, -0.001, 0.0, 0.001, 0.002]


def _row(study, gap="first-last"):
    tab = ot.still_moving_table(study, 20_000)
    return tab[(tab["configuration"] == "x") & (tab["gap"] == gap)].iloc[0]


def test_a_plateau_is_not_moving_and_its_sign_settles_where_it_crosses():
    study = {"x": [_unit(lambda s: 0.1 if s >= 30_000 else -0.1, d) for d in SHIFTS]}
    r = _row(study)
    assert not r["still moving"] and r["sign settled from"] == "30,000 (+)"
    assert r["at the end"].startswith("+0.100")


def test_a_drift_is_moving():
    study = {"x": [_unit(lambda s: 0.3 * s / 100_000, d) for d in SHIFTS]}
    r = _row(study)
    assert r["still moving"] and r["change over last 20k"].startswith("+0.060")


def test_a_gap_ending_at_zero_has_no_settled_sign():
    study = {"x": [_unit(lambda s: 0.0, d) for d in SHIFTS], "y": [None] * 5}
    tab = ot.still_moving_table(study, 20_000)
    assert set(tab["configuration"]) == {"x"}                 # an incomplete configuration is skipped
    assert (tab["sign settled from"] == "").all()


def test_units_at_reads_the_curves_at_that_step():
    u = _unit(lambda s: s / 100_000)
    (v,) = ot.units_at([u], 40_000)
    assert v["gaps"]["first-last"] == pytest.approx(0.4) and v["curves"]["step"][-1] == 40_000
    assert "sweep_accuracy" not in v and u["gaps"]["first-last"] == pytest.approx(1.0)   # the original untouched
    assert ot.units_at([None], 40_000) == [None]
    with pytest.raises(ValueError, match="no evaluation at step 42"):
        ot.units_at([u], 42)


def test_a_claim_that_changes_verdict_along_training_is_listed():
    """The decay mask 'reduces' No PE's gap early (decay at -0.1) but not at the end (both at +0.1)."""
    nope = [_unit(lambda s: 0.1, d) for d in SHIFTS]
    decay = [_unit(lambda s: -0.1 if s < 60_000 else 0.1, d) for d in SHIFTS]
    tab, changed = ot.verdicts_over_training({"wu-fig-2": {"No PE|2": nope, "decay|2": decay}}, [25_000, 100_000])
    row = tab[tab["claim"] == "fig2-decay-reduces-2"].iloc[0]
    assert (row["25k"], row["100k"]) == ("reproduced", "inconclusive")
    assert "fig2-decay-reduces-2" in changed and "fig2-nope-early-2" not in changed
    assert set(tab[tab["claim"] == "fig2-rope-reduces-2"]["100k"]) == {"not yet"}


def _settling_curves():
    """Curves to 300k whose first-last gap drifts 0.1 per 50k until 200k, then is flat; the loss is flat
    throughout, the other gaps 0."""
    steps = list(range(0, 300_001, 5000))
    fl = [0.1 * min(s, 200_000) / 50_000 for s in steps]
    c = {"step": steps, "loss": [1.0] * len(steps),
         "IC_first_last": [0.5 + g / 2 for g in fl], "IC_last_first": [0.5 - g / 2 for g in fl]}
    for a, b in (("first", "middle"), ("middle", "first"), ("middle", "last"), ("last", "middle")):
        c[f"IC_{a}_{b}"] = [0.5] * len(steps)
    return c


def test_the_stop_table_says_where_each_network_stopped_and_when_its_gaps_settled():
    from posbias.measures import convergence as cv
    c = _settling_curves()
    stop = cv.stop_step(c, N_TEST, cv.PLATEAU)
    u = {"curves": c, "ic_accuracy": {"IC_first_last": 0.9, "IC_last_first": 0.5},
         "stop": {"rule": cv.PLATEAU.to_dict(), "stopped_at": stop, "reason": "rule"}}
    tab = ot.stop_table({"x": [u, None]}, N_TEST)
    assert len(tab) == 1
    row = tab.iloc[0]
    assert row["configuration"] == "x" and row["run"] == 0 and row["why"] == "rule"
    assert 200_000 < stop <= 250_000 and row["gap parts first held at"] == f"{stop:,}"
    assert row["loss change over last 50k"] == "+0.0%" and row["accuracy"] == "0.700"
    assert row["loss above its best"] == "+0.0%" and ot.fell_back({"x": [u, None]}) == "none"


def test_fell_back_names_a_network_that_stopped_after_losing_what_it_learned():
    from posbias.measures import convergence as cv
    u = _unit(lambda s: 0.0)
    c = u["curves"]
    c["loss"] = [0.0] + [2.0] * 10 + [3.0] * 10           # best 2.0 from 5k, ends at 3.0
    c["IC_first_middle"] = [0.5] * 11 + [0.1] * 10        # accuracy falls with it
    u["ic_accuracy"] = {k: v[-1] for k, v in c.items() if k.startswith("IC_")}
    u["stop"] = {"rule": cv.PLATEAU.to_dict(), "stopped_at": 100_000, "reason": "rule"}
    assert ot.fell_back({"x": [None, u]}) == ("x run 1 (loss 50% above its best at 5,000 iterations; mean IC "
                                               "accuracy 0.500 there, 0.433 at its stop)")
    row = ot.stop_table({"x": [None, u]}, N_TEST).iloc[0]
    assert row["loss above its best"] == "+50.0% (best at 5,000)"
    c["loss"][-1] = 2.0 * (1 + cv.PLATEAU.loss_rel / 2)    # within the rule's own tolerance: not named
    assert ot.fell_back({"x": [None, u]}) == "none"


def test_converged_counts_leave_out_claims_not_yet_judged():
    import pandas as pd

    from posbias.analysis import claims

    cmp = pd.DataFrame({"100k": ["reproduced", "inconclusive", "reproduced", "contradicted"],
                        "converged": ["reproduced", "reproduced", claims.NOT_YET, claims.NOT_YET]})
    cmp["at best loss"] = ["reproduced", "reproduced", claims.NOT_YET, claims.NOT_YET]
    assert ot.converged_counts(cmp) == {"judged": 2, "differ": 1, "differ_best": 0}
    cmp.loc[0, "at best loss"] = "inconclusive"
    assert ot.converged_counts(cmp)["differ_best"] == 1


def test_reach_names_the_configurations_each_claim_still_needs():
    judgeable, out = ot.reach(["No PE|6", "RoPE|6"])
    assert set(judgeable) == {"fig2-nope-early-6", "fig2-middle-last-smaller-nope-6", "fig2-middle-last-smaller-rope-6",
                              "fig2-rope-reduces-6", "fig2-rope-recent-6"}
    assert out["fig2-depth-nope-first-last"] == ["No PE|2", "No PE|4"]
    assert out["fig2-decay-reduces-6"] == ["decay|6"]
    assert out["fig2-rope-reduces-2"] == ["No PE|2", "RoPE|2"]
    everything, none = ot.reach([f"{a}|{d}" for a in ("No PE", "decay", "RoPE") for d in (2, 4, 6)])
    assert none == {} and len(everything) == len(judgeable) + len(out) == 39


def test_the_converged_profile_is_the_campaigns_configurations():
    from posbias.book.chapters import get_chapter
    from posbias import training as train

    meta = get_chapter("wu-bias-over-training").meta["profiles"]["converged"]
    CONVERGED_CONFIGS = tuple(meta["configs"])
    assert tuple(train.units_of("wu-bias-over-training", "converged", {})) == CONVERGED_CONFIGS
    judgeable, out = ot.reach(CONVERGED_CONFIGS)
    # with No PE and RoPE at depth 2, the decay mask's depth-2 claims and the depth claims are in reach
    assert {"fig2-decay-reduces-2", "fig2-depth-nope-first-last", "fig2-depth-rope-first-last"} <= set(judgeable)
    # the decay mask trains at depth 2 only: its depth trend and its claims at depths 4 and 6 are out of reach
    assert set(out) == {f"fig2-{c}-{d}" for c in ("decay-reduces", "decay-more-than-rope", "decay-recent",
                                                   "middle-last-smaller-decay", "no-u") for d in (4, 6)} \
        | {f"fig2-depth-decay-{g}" for g in ("first-middle", "first-last", "middle-last")}


def test_paper_and_end_reads_the_snapshot_and_the_stop_from_the_curves():
    """A run whose first-last gap is 0.03 at 100k and 0.225 at its stop (300k), accuracy rising with it;
    a run not yet trained is left out, and a run without an evaluation at the snapshot is refused."""
    steps = list(range(0, 300_001, 5000))
    fl = [0.04 if s <= 100_000 else 0.3 for s in steps]
    c = {"step": steps, "loss": [1.0] * len(steps),
         "IC_first_last": [0.5 + g / 2 for g in fl], "IC_last_first": [0.5 - g / 4 for g in fl]}
    for a, b in (("first", "middle"), ("middle", "first"), ("middle", "last"), ("last", "middle")):
        c[f"IC_{a}_{b}"] = [0.5] * len(steps)
    ic = {k: v[-1] for k, v in c.items() if k.startswith("IC_")}
    tab = ot.paper_and_end({"x": [None, {"curves": c, "ic_accuracy": ic}]})
    assert len(tab) == 1
    row = tab.iloc[0]
    assert row["run"] == 1 and row["stopped at"] == 300_000
    assert row["first-last at 100k"] == pytest.approx(0.03) and row["first-last at the end"] == pytest.approx(0.225)
    assert row["first-middle at the end"] == pytest.approx(0.0)
    assert row["accuracy at 100k"] == pytest.approx(0.5 + 0.04 / 24)
    assert row["accuracy at the end"] == pytest.approx(0.5 + 0.3 / 24)
    assert ot.spread_text(tab, "first-last at the end", "x") == "from +0.225 to +0.225"
    assert ot.spread_text(tab, "first-last at the end", "y") == "no network yet"
    with pytest.raises(ValueError, match="no evaluation at step 100,000"):
        ot.paper_and_end({"x": [{"curves": {**c, "step": [s + 1 for s in steps]}, "ic_accuracy": ic}]})


def test_spread_summary_names_each_configuration_and_its_ranges():
    import pandas as pd

    tab = pd.DataFrame({"configuration": ["a", "a", "b"], "accuracy at 100k": [0.51, 0.52, 0.6],
                        "accuracy at the end": [0.53, 0.75, 0.9], "first-last at 100k": [0.01, -0.04, 0.2],
                        "first-last at the end": [0.03, -0.16, 0.1]})
    s = ot.spread_summary(tab)
    assert s.startswith("a (2 networks): accuracy from 0.510 to 0.520 at 100,000 iterations and from 0.530 "
                        "to 0.750 at the end; first-last gap from -0.040 to +0.010, then from -0.160 to +0.030")
    assert "; b (1 network): accuracy from 0.600 to 0.600" in s
    assert ot.spread_summary(tab.iloc[:0]) == "no network yet"


def _fallen(fl_best, fl_after, best_until, seed_shift=0.0):
    """A run whose loss is 1.0 up to ``best_until`` (its best at 5,000) and 2.0 after, its first-last gap
    ``fl_best`` up to there and ``fl_after`` after: a network that fell back from what it had learned."""
    u = _unit(lambda s: fl_best if s <= best_until else fl_after, seed_shift)
    u["curves"]["loss"] = [0.0] + [1.0] * (best_until // 5000) + [2.0] * ((100_000 - best_until) // 5000)
    return u


def test_units_at_best_reads_each_run_at_its_lowest_training_loss():
    u = _fallen(0.1, -0.1, 50_000)
    u["curves"]["loss"][3] = 0.5                                  # its lowest at 15,000
    flat = _unit(lambda s: 0.2)                                   # flat loss: its best is its first evaluation
    v, w, none = ot.units_at_best([u, flat, None])
    assert v["curves"]["step"][-1] == 15_000 and v["gaps"]["first-last"] == pytest.approx(0.1)
    assert w["curves"]["step"][-1] == 5000 and none is None
    assert u["gaps"]["first-last"] == pytest.approx(-0.1)        # the original untouched


def test_the_comparison_sets_the_verdict_at_the_best_loss_beside_the_stop():
    """No PE ends with the first slot disfavoured after falling back; at its best it favoured it."""
    paper = {"No PE|2": [_unit(lambda s: 0.1, d) for d in SHIFTS], "decay|2": [_unit(lambda s: 0.0, d) for d in SHIFTS]}
    conv = {"No PE|2": [_fallen(0.1, -0.1, 50_000, d) for d in SHIFTS],
            "decay|2": [_unit(lambda s: 0.0, d) for d in SHIFTS]}
    for u in conv["No PE|2"]:                                     # it also forgot what it had learned
        u["curves"]["IC_first_middle"] = [0.9 if s <= 50_000 else 0.1 for s in u["curves"]["step"]]
        u["ic_accuracy"]["IC_first_middle"] = 0.1
    cmp = ot.converged_comparison(paper, conv)
    row = cmp[cmp["claim"] == "fig2-decay-reduces-2"].iloc[0]
    assert row["100k"] == row["at best loss"] == "reproduced" and row["converged"] != "reproduced"
    # over its ten runs: five at (5 x 0.5 + 0.1 or 0.9) / 6, five decay runs at 0.5
    assert row["accuracy"] == "0.467" and row["accuracy at best loss"] == "0.533"
    assert row["mean at best loss"] == row["mean at 100k"] and row["mean converged"] != row["mean at 100k"]
    counts = ot.converged_counts(cmp)
    assert counts["differ_best"] >= 1 and counts["differ"] >= 1
    assert set(cmp[cmp["claim"] == "fig2-rope-reduces-2"]["at best loss"]) == {"not yet"}


def test_stop_mismatches_re_derives_each_stop_from_the_curves():
    from posbias.measures import convergence as cv
    c = _settling_curves()
    steps = c["step"]
    stop = cv.stop_step(c, N_TEST, cv.PLATEAU)
    cut = {k: v[:steps.index(stop) + 1] for k, v in c.items()}

    def run(curves, at, why, rule=cv.PLATEAU):
        return {"params": {"n_test": N_TEST, "steps": 300_000}, "curves": curves,
                "stop": {"rule": rule.to_dict(), "stopped_at": at, "reason": why}}

    assert ot.stop_mismatches({"x": [run(cut, stop, "rule"), None]}) == []
    bad = ot.stop_mismatches({"x": [run(cut, stop, "cap")],                   # the rule held before the cap
                              "y": [run(c, 300_000, "rule")],                 # held first at `stop`, not 300k
                              "z": [run(c, stop, "rule")]})                   # the curve goes on past the stop
    assert [b.split(":")[0] for b in bad] == ["x run 0", "y run 0", "z run 0"]
    assert f"the rule gives {stop:,}" in bad[1]
    # a run at its cap (its own steps) that never met the rule (a drift to the end) agrees, unless its own
    # n_test is so small that the drift is within the rule's standard errors
    drift = {**c, "IC_first_last": [0.5 + s / 1e6 for s in steps], "IC_last_first": [0.5 - s / 1e6 for s in steps]}
    assert ot.stop_mismatches({"x": [run(drift, 300_000, "cap")]}) == []
    assert ot.stop_mismatches({"x": [{**run(drift, 300_000, "cap"), "params": {"n_test": 1, "steps": 300_000}}]})
    short = {k: v[:5] for k, v in drift.items()}                                # a short run: cap 20,000
    short_run = {**run(short, 20_000, "cap"), "params": {"n_test": N_TEST, "steps": 20_000}}
    assert ot.stop_mismatches({"x": [short_run]}) == []


def test_gap_bands_hold_the_mean_and_se_over_runs_of_complete_configurations_only():
    """Two runs whose first-last gaps are 0.02 and 0.04 everywhere: the band's mean is 0.03 and its SE
    sqrt(var/2 + 2/(4 n_test)) with var = 0.0002 (worked by hand); an incomplete configuration is left out."""
    runs = [_unit(lambda s: 0.02), _unit(lambda s: 0.04)]
    bands = ot.gap_bands({"x": runs, "half": [runs[0], None], "none": []})
    assert list(bands) == ["x"]
    mean, se = bands["x"]["gaps"]["first-last"]
    assert np.allclose(mean, 0.03) and np.allclose(se, np.sqrt(0.0002 / 2 + 2 / (4 * N_TEST)))
    assert np.allclose(bands["x"]["gaps"]["first-middle"][0], 0.0)
    assert list(bands["x"]["gaps"]) == ["first-middle", "first-last", "middle-last"]
    assert list(bands["x"]["step"]) == STEPS and np.isnan(bands["x"]["loss"][0]) and bands["x"]["loss"][1] == 1.0
