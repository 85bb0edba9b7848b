"""posbias.analysis.budget_read: the over-training chapter's tables and sentences on a synthetic study with a
known 3 : 2 split, and "not yet" where networks are missing."""
import numpy as np
import pytest

from posbias.analysis import budget_read as br

STEPS = list(range(0, 500_001, 5000))


def _run(level, fm, fl, ml, jump_at=None):
    """A network at mean IC accuracy ``level`` (0.515 before ``jump_at``) with constant gaps."""
    acc = np.array([0.515 if jump_at is not None and s < jump_at else level for s in STEPS])
    c = {"step": STEPS, "loss": [0.0] + [1.0] * (len(STEPS) - 1)}
    # IC_a_b - IC_b_a = gap; the six accuracies average to acc
    c["IC_first_middle"], c["IC_middle_first"] = list(acc + fm / 2), list(acc - fm / 2)
    c["IC_first_last"], c["IC_last_first"] = list(acc + fl / 2), list(acc - fl / 2)
    c["IC_middle_last"], c["IC_last_middle"] = list(acc + ml / 2), list(acc - ml / 2)
    return {"params": {"n_test": 10_000, "eval_every": 5000, "depth": 2}, "curves": c,
            "train_seconds_ensemble": 3600.0, "ensemble_size": 1}


def _study():
    up = [_run(0.74, -0.14, -0.15, 0.02, jump_at=at) for at in (175_000, 190_000, 225_000)]
    low = [_run(0.53, 0.11, 0.03, -0.08) for _ in range(2)]
    rows = [(s, "admitted", r) for s, r in zip((2, 3, 4, 0, 1), up + low)]
    return {"decay|2": sorted(rows) + [(s, "not yet", None) for s in range(5, 10)],
            "RoPE|6": [(s, "not yet", None) for s in range(5)]}


def test_a_configuration_is_complete_when_every_network_of_the_design_is_stored():
    study = _study()
    assert not br.complete(study, "decay|2") and not br.complete(study, "RoPE|6")
    assert br.complete({"decay|2": [row for row in study["decay|2"] if row[2] is not None]}, "decay|2")


def test_branch_table_finds_the_exits_and_says_not_yet():
    tab = br.branch_table(_study())
    upper = tab[(tab["configuration"] == "decay|2") & (tab["branch"] == "2 of 2 so far")].iloc[0]
    assert upper["seeds"] == "2, 3, 4" and upper["networks"] == 3
    assert upper["left a plateau after 100k"] == "seed 2 at 175,000; seed 3 at 190,000; seed 4 at 225,000"
    assert tab[tab["configuration"] == "RoPE|6"].iloc[0]["branch"] == "not yet"


def test_window_swing_is_the_spread_of_the_evaluations_a_reading_averages():
    r = _run(0.30, 0.0, 0.0, 0.0)
    c = r["curves"]
    wobble = np.array([0.1 if s == 470_000 else -0.05 if s == 490_000 else 0.0 for s in STEPS])
    wobble[STEPS.index(440_000)] = 0.5                      # outside the last 50,000 iterations (450k-500k)
    for k in [k for k in c if k.startswith("IC_")]:
        c[k] = list(np.asarray(c[k]) + wobble)
    assert br.window_swing(r) == pytest.approx(0.15, abs=1e-12)
    assert br.window_swing(r, end=450_000) == pytest.approx(0.5, abs=1e-12)
    assert br.window_swing(_run(0.74, -0.14, -0.15, 0.02, jump_at=175_000)) == 0.0
    tab = br.branch_table({"RoPE|6": [(0, "design", r), (1, "design", _run(0.42, 0.0, 0.0, 0.0))]})
    assert list(tab["widest swing in a reading window"]) == ["0.150", "0.000"]
    words = br.swing_sentence({"RoPE|6": [(0, "design", r), (1, "design", _run(0.42, 0.0, 0.0, 0.0))],
                               "decay|2": _study()["decay|2"]})
    assert "RoPE|6 0.150 (seed 0)" in words and "decay|2 0.000 (seed 4)" in words
    assert "In RoPE|6 a network's own evaluations spread wider" in words
    assert "swing stays inside" in br.swing_sentence({"decay|2": _study()["decay|2"]})
    assert br.swing_sentence({"RoPE|6": _study()["RoPE|6"]}) == "No network is stored yet."


def test_readings_are_of_the_same_networks_at_100k_and_at_the_end():
    tab = br.readings_table(_study())
    acc = tab[(tab["configuration"] == "decay|2") & (tab["quantity"] == "mean IC accuracy")].iloc[0]
    assert acc["networks"] == "5 of 10" and acc["at 100k"].startswith(f"{(3 * 0.515 + 2 * 0.53) / 5:.3f}")
    assert acc["at the end"].startswith(f"{(3 * 0.74 + 2 * 0.53) / 5:.3f}")
    rope = tab[tab["configuration"] == "RoPE|6"]
    assert set(rope["networks"]) == {"0 of 5"} and set(rope["at the end"]) == {"not yet"}


def test_tables_of_a_study_without_networks_say_not_yet():
    st = {"RoPE|6": _study()["RoPE|6"]}
    assert br.networks_table(st).iloc[0]["not yet trained"] == 5
    assert br.best_table(st).empty or br.best_table(st).iloc[0]["with a held-out loss"] == "not recorded"
    assert br.training_hours(_run(0.5, 0, 0, 0)) == pytest.approx(1.0)
    moving = br.moving_table({"decay|2": [r for _, _, r in _study()["decay|2"]]})
    assert set(moving["settled"]) == {5} and set(moving["moving"]) == {0}


def test_claims_pair_configurations_on_the_seeds_they_share():
    """decay | 2 with ten networks (its wide seeds 5-9 too) and No PE | 2 with five: an entry comparing
    the two is judged on seeds 0-4, paired seed by seed (a difference of ten and five runs cannot be
    formed); decay's first-last -0.15 against No PE's +0.10 is a reduction of 0.25 on every seed."""
    decay = [(s, "design", _run(0.74, -0.14, -0.15, 0.02)) for s in range(10)]
    nope = [(s, "design", _run(0.52, 0.08, 0.10, 0.02)) for s in range(5)]
    tab = br.claims_table({"decay|2": decay, "No PE|2": nope})
    row = tab[tab["claim"] == "fig2-decay-reduces-2"].iloc[0]
    assert row["at the end"] == "reproduced" and row["mean at the end"].startswith("+0.250")
    assert br.claims_sentence(tab) == f"All {len(tab)} of the study's claims are judged."
    rope = [(0, "design", _run(0.51, 0.0, 0.0, 0.0))] + [(s, "not yet", None) for s in range(1, 5)]
    waiting = br.claims_table({"decay|2": decay, "No PE|2": nope, "RoPE|2": rope})
    judged = int((waiting["at the end"] != "not yet").sum())
    assert 0 < judged < len(waiting)                        # the RoPE claims wait, the others are judged
    assert br.claims_sentence(waiting).startswith(f"{judged} of the study's {len(waiting)} claims can be judged so far")


def test_a_small_branch_is_shown_with_its_count_not_judged():
    """decay | 2 splitting 9 : 1: the lone network's branch is below the rule's three and is named with
    its count in the singular; the branch of nine is judged."""
    decay = [(s, "design", _run(0.74, -0.14, -0.15, 0.02)) for s in range(9)]
    decay.append((9, "design", _run(0.53, 0.10, 0.03, -0.08)))
    nope = [(s, "design", _run(0.52, 0.08, 0.10, 0.02)) for s in range(5)]
    row = br.claims_table({"decay|2": decay, "No PE|2": nope}).set_index("claim").loc["fig2-decay-recent-2"]
    assert "decay|2 branch 1: 1 network, not judged" in row["per branch"]
    assert "decay|2 branch 2: " in row["per branch"] and "branch 2: 9 network" not in row["per branch"]


def test_a_branch_pairs_with_the_other_configurations_seed_by_seed():
    """A branch's networks come in accuracy order (seeds 3, 4, 2 here), the other configurations' in seed order:
    the judge must pair seed 2 with seed 2. Each seed's decay and No PE first-last gaps move together, so paired
    by seed the reduction is the same 0.25 on every seed; paired in accuracy order it would scatter."""
    shift = {2: 0.00, 3: 0.06, 4: -0.05}
    decay = {s: _run(0.74 + 0.001 * k, -0.14, -0.15 + shift[s], 0.02) for k, s in enumerate((2, 4, 3))}
    nope = {s: _run(0.52, 0.08, 0.10 + shift[s], 0.02) for s in (2, 3, 4)}
    study = {"decay|2": [(s, "design", decay[s]) for s in (2, 3, 4)],
             "No PE|2": [(s, "design", nope[s]) for s in (2, 3, 4)]}
    (entry,) = [e for e in br._entries(list(study)) if e.id == "fig2-decay-reduces-2"]
    (by_seed,) = br._judge_paired([entry], study)
    branch = [(s, decay[s]) for s in (3, 4, 2)]                 # accuracy order, as branches_of gives it
    (in_branch,) = br._judge_paired([entry], study, runs={"decay|2": branch})
    assert by_seed.mean == pytest.approx(0.25, abs=1e-9) and in_branch.mean == pytest.approx(0.25, abs=1e-9)
    assert in_branch.se == pytest.approx(by_seed.se, rel=1e-9)


def test_trajectories_hold_each_stored_network_as_the_figure_draws_it():
    """Every stored network of the design, in its order, with its source, whether it left a plateau after
    100,000, its mean IC accuracy and its first-last gap; the IC references are the closed forms'."""
    from posbias.science.retrieval import closed_forms

    study = _study()
    study["decay|2"][0] = (0, "design", study["decay|2"][0][2])
    t = br.trajectories(study)
    lines = t["configs"]["decay|2"]["lines"]
    assert t["configs"]["decay|2"]["designed"] == 10 and t["configs"]["RoPE|6"] == {"designed": 5, "lines": []}
    assert [r["seed"] for r in lines] == [0, 1, 2, 3, 4]
    assert [r["design"] for r in lines] == [True, False, False, False, False]
    assert [r["left"] for r in lines] == [False, False, True, True, True]       # seeds 2-4 jump at 175k-225k
    assert np.allclose(lines[0]["accuracy"], 0.53) and np.allclose(lines[0]["first_last"], 0.03)
    assert np.allclose(lines[2]["accuracy"][-1], 0.74) and np.allclose(lines[2]["first_last"], -0.15)
    ic = closed_forms()["ic"]
    assert (t["copy_random"], t["ignore_best"]) == (float(ic["copy_random"]), float(ic["ignore_best"]))
