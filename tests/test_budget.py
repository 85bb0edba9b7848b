"""posbias.analysis.budget: the fixed-budget study's readings, plateau exits, branches and "still moving", on
synthetic trajectories with a known jump, a known plateau and no jump."""
import numpy as np
import pytest

from posbias.analysis import budget as bd

STEPS = list(range(0, 500_001, 5000))


def _run(acc, fl=lambda s: 0.0, heldout=None, steps=STEPS):
    """A record whose six IC accuracies average ``acc(step)`` and whose first-last gap is ``fl(step)``."""
    a = np.array([acc(s) for s in steps], dtype=float)
    g = np.array([fl(s) for s in steps], dtype=float)
    c = {"step": list(steps), "loss": [0.0] + [1.0] * (len(steps) - 1)}
    for x, y in (("first", "middle"), ("middle", "first"), ("middle", "last"), ("last", "middle")):
        c[f"IC_{x}_{y}"] = list(a)
    c["IC_first_last"], c["IC_last_first"] = list(a + g / 2), list(a - g / 2)
    if heldout is not None:
        c["heldout_loss"] = [float(heldout(s)) for s in steps]
    return {"params": {"n_test": 10_000, "eval_every": 5000, "depth": 2}, "curves": c,
            "ic_accuracy": {k: v[-1] for k, v in c.items() if k.startswith("IC_")}, "sweep_accuracy": [0.5] * 8}


def _jump(at, low=0.515, high=0.74, width=20_000):
    return lambda s: low + (high - low) * min(max((s - at) / width, 0.0), 1.0)


def _noise(seed, sd=0.002):
    r = np.random.default_rng(seed).normal(0, sd, len(STEPS))
    return lambda s: r[s // 5000]


def test_a_known_jump_is_found_where_it_is():
    for at in (150_000, 200_000, 350_000):
        f, e = _jump(at), _noise(at)
        (x,) = bd.plateau_exits(STEPS, [f(s) + e(s) for s in STEPS])
        assert at < x["exit"] <= at + 20_000, x                # the first evaluation 0.05 above the plateau
        assert x["level"] == pytest.approx(0.515, abs=0.003) and x["after"] > 0.7
        assert x["plateau_to"] <= at + 5000 and x["plateau_from"] < at - 50_000


def test_a_known_plateau_and_no_jump_have_no_exit():
    flat = _noise(1)
    assert bd.plateau_exits(STEPS, [0.515 + flat(s) for s in STEPS]) == []
    smooth = [0.9 - 0.6 * np.exp(-s / 40_000) for s in STEPS]           # rises from the start, then saturates
    assert bd.plateau_exits(STEPS, smooth) == []
    drift = [0.5 + 0.004 * s / 50_000 for s in STEPS]                   # a slow drift: flat windows, 0.04 in all
    assert bd.plateau_exits(STEPS, drift) == []


def test_a_spike_that_does_not_last_is_not_an_exit_and_two_jumps_are_two():
    spike = [0.515 + (0.2 if s == 200_000 else 0.0) for s in STEPS]
    assert bd.plateau_exits(STEPS, spike) == []
    two = [0.3 + (0.2 if s > 150_000 else 0.0) + (0.2 if s > 350_000 else 0.0) for s in STEPS]
    got = bd.plateau_exits(STEPS, two)
    assert [x["exit"] for x in got] == [155_000, 355_000]
    assert [round(x["level"], 3) for x in got] == [0.3, 0.5]


def test_branches_cut_where_neighbours_differ_by_more_than_the_gap():
    ends = {0: 0.74, 1: 0.52, 2: 0.745, 3: 0.735, 4: 0.51}
    assert bd.branches(ends) == [[4, 1], [3, 0, 2]]
    assert bd.branches({0: 0.5, 1: 0.54, 2: 0.58}) == [[0, 1, 2]]       # chained within 0.05 each: one branch
    assert bd.branches({0: 0.5, 1: 0.551}) == [[0], [1]]
    assert bd.branches({}) == []


def test_reading_is_the_mean_of_the_last_eleven_evaluations():
    u = _run(lambda s: s / 1e6, fl=lambda s: 0.1 if s >= 480_000 else 0.0)
    r = bd.reading(u)
    assert r["n"] == 11 and r["step"] == 500_000
    assert r["accuracy"] == pytest.approx(np.mean([s / 1e6 for s in range(450_000, 500_001, 5000)]))
    assert r["gaps"]["first-last"] == pytest.approx(0.1 * 5 / 11)
    assert bd.reading(u, end=100_000)["accuracy"] == pytest.approx(0.075)
    with pytest.raises(ValueError, match="no evaluation at step 42"):
        bd.reading(u, end=42)


def test_best_reading_is_the_evaluation_of_lowest_heldout_loss():
    u = _run(lambda s: s / 1e6, heldout=lambda s: 1.0 + abs(s - 300_000) / 1e6 if s else 0.0)
    b = bd.best_reading(u)
    assert b["step"] == 300_000 and b["accuracy"] == pytest.approx(0.3)          # step 0 is never the best
    assert bd.best_reading(_run(lambda s: 0.5)) is None
    assert bd.as_read(u, "best")["ic_accuracy"]["IC_first_middle"] == pytest.approx(0.3)
    assert bd.as_read(_run(lambda s: 0.5), "best") is None and bd.as_read(None) is None


def test_still_moving_uses_the_equivalence_margin():
    e = _noise(3)
    settled = bd.still_moving(STEPS, [0.1 + e(s) for s in STEPS])
    assert settled["verdict"] == "settled" and abs(settled["change"]) < 0.01
    moving = bd.still_moving(STEPS, [0.1 - 0.15 * s / 50_000 + e(s) for s in STEPS])
    assert moving["verdict"] == "moving" and moving["change"] == pytest.approx(-0.15, abs=0.01)
    noisy = _noise(4, sd=0.03)
    mid = bd.still_moving(STEPS, [0.02 * s / 50_000 + noisy(s) for s in STEPS])
    assert mid["verdict"] == "undetermined" and mid["lo"] < 0.02 < mid["hi"]


def test_admitted_records_end_exactly_at_the_budget():
    u = _run(lambda s: 0.5)
    u["stop"] = {"stopped_at": 500_000, "reason": "cap"}
    assert bd.admitted(u, 2)
    assert not bd.admitted(u, 6) and not bd.admitted(None, 2)
    short = _run(lambda s: 0.5, steps=list(range(0, 300_001, 5000)))
    short["params"]["depth"], short["stop"] = 6, {"stopped_at": 300_000, "reason": "cap"}
    assert bd.admitted(short, 6)
    longer = _run(lambda s: 0.5, steps=list(range(0, 325_001, 5000)))
    longer["params"]["depth"], longer["stop"] = 6, {"stopped_at": 325_000, "reason": "rule"}
    assert not bd.admitted(longer, 6)                                   # its end-of-training records are not at 300k


def test_the_design_is_what_the_constants_say():
    assert bd.DESIGN["read_evaluations"] == 11 and bd.budget(2) == 500_000 and bd.budget(6) >= 300_000
    with pytest.raises(ValueError, match="depth 4 is not in the study"):
        bd.budget(4)
