"""posbias.analysis.jump: the design of the study of the jump, and its timing rule on curves of known shape."""
import numpy as np
import pytest

from posbias.analysis import budget as bd, jump

STEPS = list(range(0, 500_001, 5000))


def _sigmoid(at, lo=0.5, hi=0.75, width=5000.0):
    s = np.asarray(STEPS, dtype=float)
    return lo + (hi - lo) / (1 + np.exp(-(s - at) / width))


def test_half_change_finds_the_middle_of_a_step():
    got = jump.half_change(STEPS, _sigmoid(177_500))    # the middle between two evaluations
    assert got["moves"] and got["start"] == pytest.approx(0.5, abs=1e-6) and got["end"] == pytest.approx(0.75)
    assert got["at"] == 180_000
    down = jump.half_change(STEPS, _sigmoid(197_500, lo=0.3, hi=0.1))
    assert down["moves"] and down["at"] == 200_000


def test_a_change_below_the_unit_does_not_move():
    got = jump.half_change(STEPS, _sigmoid(177_500, lo=0.5, hi=0.5 + 0.99 * bd.JUMP))
    assert not got["moves"] and got["at"] is None
    assert jump.half_change(STEPS, _sigmoid(177_500, lo=0.5, hi=0.5 + 1.01 * bd.JUMP))["at"] == 180_000


def test_one_spike_past_half_is_not_a_move():
    v = _sigmoid(300_000)
    v[STEPS.index(150_000)] = 0.74                    # a single evaluation past half, then back
    assert jump.half_change(STEPS, v)["at"] == 300_000


def test_moves_before_needs_more_than_one_snapshot_interval():
    a, b = {"at": 150_000}, {"at": 150_000 + jump.EVERY}
    assert jump.moves_before(a, b) is False
    assert jump.moves_before(a, {"at": 150_000 + jump.EVERY + 5000}) is True
    assert jump.moves_before({"at": None}, b) is None


def test_the_design_names_one_jumper_and_one_non_jumper_and_prices_the_rest():
    assert jump.DESIGN["seeds"] == {"jumper": 5, "non-jumper": 0} and jump.EVERY == 25_000
    assert set(jump.PREDICTIONS) == {"H1", "H2", "H3", "H4"}
    # 500,000 steps at 8.53 ms and 101 evaluations at 1.4 s, at depth 2
    assert jump.core_hours(2) == pytest.approx((500_000 * 8.53e-3 + 101 * 1.4) / 3600)
    assert jump.core_hours(4, networks=5) == pytest.approx(10 * jump.core_hours(2))


SNAPS = list(range(0, 500_001, jump.EVERY))


def _series(ratio_at=None, train=0.5, novel=0.5):
    s = np.asarray(SNAPS, dtype=float)
    ratio = 1.0 + (0.0 * s if ratio_at is None else 0.5 / (1 + np.exp(-(s - ratio_at) / 5000)))
    return {"step": SNAPS, "ratio": list(ratio), "training_classes": [train] * len(SNAPS),
            "novel_classes": [novel] * len(SNAPS)}


def _record(at=None):
    acc = _sigmoid(at) if at is not None else np.full(len(STEPS), 0.515)
    sweep = _sigmoid(at, lo=0.155, hi=0.22) if at is not None else np.full(len(STEPS), 0.16)
    curves = {"step": STEPS, **{f"IC_{k}": list(acc) for k in ("a_b", "b_a")}, "sweep": [[x] * 8 for x in sweep]}
    return {"curves": curves}


def test_judge_holds_when_the_jumper_learns_to_retrieve_with_its_attention():
    got = jump.judge({"jumper": _series(187_500), "non-jumper": _series(None, 0.6, 0.5)},
                     {"jumper": _record(177_500), "non-jumper": _record(None)})
    assert {h: v["verdict"] for h, v in got.items()} == {"H1": "holds", "H2": "holds", "H3": "holds", "H4": "holds"}


def test_judge_fails_an_attention_that_moves_late_or_not_at_all():
    got = jump.judge({"jumper": _series(287_500), "non-jumper": _series(187_500)},
                     {"jumper": _record(177_500), "non-jumper": _record(None)})
    assert got["H1"]["verdict"] == "holds" and got["H2"]["verdict"] == "fails"      # 110,000 after the accuracy
    assert got["H3"]["verdict"] == "fails" and got["H4"]["verdict"] == "fails"
    flat = jump.judge({"jumper": _series(None), "non-jumper": _series(None)},
                      {"jumper": _record(None), "non-jumper": _record(None)})
    assert flat["H1"]["verdict"] == "fails" and flat["H2"]["verdict"] == "fails"


def test_judge_waits_for_unfinished_runs():
    part = {"step": SNAPS[:9], "ratio": [1.0] * 9, "training_classes": [0.5] * 9, "novel_classes": [0.5] * 9}
    got = jump.judge({"jumper": part, "non-jumper": part}, {"jumper": None, "non-jumper": None})
    assert all(v["verdict"] == "not yet" for v in got.values())
    assert got["H1"]["why"] == "the jumper has reached 200,000 of 500,000 iterations"


def _attention(label_at=None, item_at=None):
    s = np.asarray(SNAPS, dtype=float)

    def curve(at, up):
        return list(1.0 + (0.0 * s if at is None else (0.5 if up else -0.3) / (1 + np.exp(-(s - at) / 5000))))

    return {"step": SNAPS, "item_ratio_1": [1.0] * len(SNAPS), "label_ratio_1": [1.0] * len(SNAPS),
            "item_ratio_2": curve(item_at, False), "label_ratio_2": curve(label_at, True)}


def test_the_exploratory_readings_are_declared_apart_and_read_the_last_layers_label_ratio():
    assert set(jump.EXPLORATORY) == {"E1", "E2"} and not set(jump.EXPLORATORY) & set(jump.PREDICTIONS)
    got = jump.judge_exploratory({"jumper": _attention(187_500, 187_500), "non-jumper": _attention()},
                                 {"jumper": _record(177_500), "non-jumper": _record(None)})
    assert got["E1"]["verdict"] == "holds" and got["E2"]["verdict"] == "holds"
    late = jump.judge_exploratory({"jumper": _attention(287_500), "non-jumper": _attention(187_500)},
                                  {"jumper": _record(177_500), "non-jumper": _record(None)})
    assert late["E1"]["verdict"] == "fails" and late["E2"]["verdict"] == "fails"
    # a rise of the first layer's ratio alone is not the last layer's
    first = _attention()
    first["label_ratio_1"] = _attention(187_500)["label_ratio_2"]
    assert jump.judge_exploratory({"jumper": first, "non-jumper": _attention()},
                                  {"jumper": _record(177_500), "non-jumper": None})["E1"]["verdict"] == "fails"


def test_the_exploratory_readings_wait_for_unfinished_runs():
    got = jump.judge_exploratory({"jumper": _attention(), "non-jumper": _attention()},
                                 {"jumper": None, "non-jumper": None})
    assert {v["verdict"] for v in got.values()} == {"not yet"}


def test_the_attention_reading_follows_the_numbers():
    jumps = _attention(187_500, 187_500)                        # labels +0.5, items -0.3 after 187,500
    got = jump.attention_reading({"jumper": jumps, "non-jumper": _attention()})
    assert got.startswith("In the network that jumps the query moves its attention from the matching items to the")
    assert got.endswith("neither moves by 0.05.")
    labels_only = _attention(187_500)
    assert "looks more at the labels" in jump.attention_reading({"jumper": labels_only, "non-jumper": jumps})
    assert "they move too (-0.30 and +0.50)" in jump.attention_reading({"jumper": labels_only, "non-jumper": jumps})
    assert "neither ratio has moved" in jump.attention_reading({"jumper": _attention(), "non-jumper": _attention()})
    early = {k: v[:3] for k, v in jumps.items()}
    assert "no kept network after" in jump.attention_reading({"jumper": early, "non-jumper": early})


def _deep(at=None, gap_at=None):
    """A decay|4 record: mean IC accuracy jumping at ``at`` (flat when None), the first-last gap rising from -0.15
    to 0 at ``gap_at`` (the mean accuracy unchanged by it)."""
    acc = _sigmoid(at) if at is not None else np.full(len(STEPS), 0.515)
    d = _sigmoid(gap_at, lo=-0.075, hi=0.0) if gap_at is not None else np.zeros(len(STEPS))
    names = ("first_middle", "middle_first", "middle_last", "last_middle")
    curves = {"step": STEPS, **{f"IC_{k}": list(acc) for k in names},
              "IC_first_last": list(acc + d), "IC_last_first": list(acc - d)}
    return {"curves": curves}


def test_the_elsewhere_predictions_are_declared_apart_and_read_the_study_rules():
    assert set(jump.ELSEWHERE) == {"H5", "H6", "H7", "H8"} and not set(jump.ELSEWHERE) & set(jump.PREDICTIONS)
    memorises = _series(None, 0.5, 0.5)
    memorises["training_classes"] = list(_sigmoid(250_000, lo=0.5, hi=0.7)[::5])
    got = jump.judge_elsewhere([_deep(177_500, 127_500), _deep()] + [_deep()] * 3, memorises, True)
    assert {h: v["verdict"] for h, v in got.items()} == {"H5": "holds", "H6": "holds", "H7": "holds", "H8": "holds"}
    assert got["H6"]["why"].endswith("by 50,000")
    # the gap moving with the accuracy, not before: H6 fails; a single evaluation's lead is not enough
    assert jump.judge_elsewhere([_deep(177_500, 177_500)] * 5, memorises, True)["H6"]["verdict"] == "fails"
    assert jump.judge_elsewhere([_deep(177_500, 157_500)] * 5, memorises, True)["H6"]["verdict"] == "fails"
    flat = jump.judge_elsewhere([_deep()] * 5, _series(None, 0.5, 0.5), True)
    assert flat["H5"]["verdict"] == "fails" and flat["H6"]["verdict"] == "no case"
    assert flat["H7"]["verdict"] == "fails" and flat["H8"]["verdict"] == "fails"
    # learning novel classes too is not memorising
    both = {**memorises, "novel_classes": list(_sigmoid(250_000, lo=0.4, hi=0.6)[::5])}
    assert jump.judge_elsewhere([_deep()] * 5, both, True)["H8"]["verdict"] == "fails"


def test_the_elsewhere_predictions_wait_for_unfinished_networks():
    got = jump.judge_elsewhere([_deep(), None, None, None, None], _series(), False)
    assert {v["verdict"] for v in got.values()} == {"not yet"}
    assert got["H5"]["why"] == "1 of 5 decay|4 networks trained"


def test_the_no_pe_network_of_item_3_is_the_study_unit_with_seed_5():
    us = jump.units()
    assert set(us) == {"jumper", "non-jumper", "No PE|2"}
    u = us["No PE|2"]
    assert (u.seed, u.depth, u.config.mask, u.config.pe, u.steps) == (5, 2, "causal", "none", 500_000)
    assert u.n_heldout == us["jumper"].n_heldout and u.eval_every == 5000
