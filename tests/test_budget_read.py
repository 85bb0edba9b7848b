"""posbias.budget_read: the over-training chapter's tables and sentences on a synthetic study with a
known 3 : 2 split, and "not yet" where networks are missing."""
import numpy as np
import pytest

from posbias import budget_read as br

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


def test_the_split_and_the_u_in_words():
    words = br.branch_sentences(_study())
    assert words.startswith("decay|2, 5 of 10 networks stored: 2 branches, 2 : 3 so far;")
    assert "the first item is served best, then the last, then the middle" in words    # the lower branch
    assert "the middle and last items are served alike, better than the first" in words and "RoPE|6" not in words
    full = {"decay|2": [row for row in _study()["decay|2"] if row[2] is not None]}
    assert br.split_words(full, "decay|2") == "2 branches, 2 : 3"
    one = {"RoPE|6": [(0, "design", _run(0.52, 0.0, 0.0, 0.0))] + _study()["RoPE|6"][1:]}
    assert br.branch_sentences(one).startswith("RoPE|6, 1 of 5 networks stored: one branch so far; 1 ends at")
    assert br.split_words({"RoPE|6": one["RoPE|6"][:1]}, "RoPE|6") == "one branch"
    assert br.branch_sentences({"RoPE|6": _study()["RoPE|6"]}) == "no network yet."


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


def _slots(first, middle, last, n=1):
    """Readings of ``n`` identical networks with these accuracies by answer slot."""
    ic = {"IC_first_middle": first, "IC_first_last": first, "IC_middle_first": middle,
          "IC_middle_last": middle, "IC_last_first": last, "IC_last_middle": last}
    return [{"ic_accuracy": dict(ic)} for _ in range(n)]


def test_slot_accuracy_averages_the_two_sets_whose_answer_sits_there():
    r = {"ic_accuracy": {"IC_first_middle": 0.6, "IC_first_last": 0.7, "IC_middle_first": 0.8,
                         "IC_middle_last": 0.9, "IC_last_first": 0.1, "IC_last_middle": 0.3}}
    assert br.slot_accuracy(r) == pytest.approx({"first": 0.65, "middle": 0.85, "last": 0.2})


def test_slot_difference_adds_the_shared_binomial_floor_to_the_spread():
    reads = _slots(0.7, 0.6, 0.5, n=4)
    m, se = br.slot_difference(reads, "first", "last", 10_000)
    assert m == pytest.approx(0.2) and se == pytest.approx(0.005)     # no spread: the floor 1/sqrt(4 n)
    reads[0]["ic_accuracy"]["IC_first_middle"] = 0.9                   # network 0: first 0.8
    m, se = br.slot_difference(reads, "first", "last", 10_000)
    d = np.array([0.3, 0.2, 0.2, 0.2])
    assert m == pytest.approx(d.mean()) and se == pytest.approx(np.sqrt(d.var(ddof=1) / 4 + 1 / 40_000))


def test_slot_words_name_the_middle_when_it_beats_the_last():
    # decay|2's upper branch as the issue measured it: first 0.656, middle 0.806, last 0.760
    words = br.slot_words(_slots(0.656, 0.806, 0.760, n=8), 10_000)
    assert words.startswith("the middle item is served best, then the last, then the first")
    assert "last item" not in words.split("(")[0].replace("then the last", "")


def test_slot_words_group_slots_within_two_standard_errors():
    se = 0.005                                                         # identical networks, n_test 10,000
    assert br.slot_words(_slots(0.70, 0.60, 0.70 - 1.9 * se), 10_000).startswith(
        "the first and last items are served alike, better than the middle")
    assert br.slot_words(_slots(0.70, 0.60, 0.70 - 2.1 * se), 10_000).startswith(
        "the first item is served best, then the last, then the middle")
    assert br.slot_words(_slots(0.70, 0.694, 0.688), 10_000).startswith(
        "the first item is served better than the last; the middle is told from neither")
    assert br.slot_words(_slots(0.50, 0.505, 0.501), 10_000).startswith("no slot is served differently")
    assert br.slot_words(_slots(0.70, 0.60, 0.60), 10_000).startswith(
        "the first item is served best, the middle and the last alike")


def _swinging(level, swing, seed):
    """A network at ``level`` whose evaluations in the reading window alternate +-swing/2."""
    r = _run(level, 0.0, 0.0, 0.0)
    wob = np.array([(swing / 2) * (-1) ** i if s >= 450_000 else 0.0 for i, s in enumerate(STEPS)])
    for k in [k for k in r["curves"] if k.startswith("IC_")]:
        r["curves"][k] = list(np.asarray(r["curves"][k]) + wob)
    return seed, r


def test_firm_branches_keep_together_a_cut_inside_the_networks_own_swing():
    # readings 0.20 and 0.27 (the design cuts them), but each swings by 0.10: ranges overlap
    runs = [_swinging(0.20, 0.10, 0), _swinging(0.27, 0.10, 1), _swinging(0.60, 0.01, 2)]
    firm, uncertain = br.firm_branches(runs)
    assert firm == [[0, 1], [2]] and uncertain == [(0, 1)]
    assert [[s for s, _ in b] for b in br.branches_of(runs)] == [[0], [1], [2]]
    assert br.firm_split_words(runs) == ("2 : 1 (the design's rule: 1 : 1 : 1; 1 of its cuts falls inside "
                                         "the networks' own swing)")
    # small swings: the same cut holds
    steady = [_swinging(0.20, 0.01, 0), _swinging(0.27, 0.01, 1), _swinging(0.60, 0.01, 2)]
    assert br.firm_branches(steady) == ([[0], [1], [2]], [])
    assert br.firm_split_words(steady) == "1 : 1 : 1, as the design's rule"
    assert br.firm_branches([]) == ([], [])


def _with_loss(changes_per_window, base=0.6):
    """A network whose held-out loss falls linearly within each 50k window by the given amounts (oldest
    first, ending at 500k), with a small alternating wobble so the fit has residuals."""
    r = _run(0.74, 0.0, 0.0, 0.0)
    s = np.asarray(STEPS, dtype=float)
    loss = np.full(len(s), base)
    start = 500_000 - 50_000 * len(changes_per_window)
    level = base
    for k, ch in enumerate(changes_per_window):
        lo = start + 50_000 * k
        sel = (s > lo) & (s <= lo + 50_000)
        loss[sel] = level + ch * (s[sel] - lo) / 50_000
        level += ch
    loss[s > 500_000 - 50_000 * len(changes_per_window) - 1] += 1e-4 * (-1) ** np.arange(
        int((s > 500_000 - 50_000 * len(changes_per_window) - 1).sum()))
    r["curves"]["heldout_loss"] = list(loss)
    return r


def test_still_learning_reads_the_slope_and_extrapolates_a_geometric_trend():
    r = _with_loss([-0.04, -0.02, -0.01, -0.005], base=0.5)
    got = br.still_learning(r)
    assert got["learning"] and got["change"] == pytest.approx(-0.005, abs=5e-4)
    assert got["ratio"] == pytest.approx(0.5, rel=0.1)
    # 1% of the final loss (~0.4250) is 0.00425: the next halving (0.0025) at 550,000 crosses it
    assert got["settles_at"] == 550_000
    flat = br.still_learning(_with_loss([-0.01, -0.01, -0.01, -0.01]))
    assert flat["learning"] and flat["settles_at"] is None and flat["ratio"] == pytest.approx(1.0, rel=0.05)
    assert br.still_learning(_run(0.5, 0, 0, 0)) is None
    assert br.loss_changes(_run(0.5, 0, 0, 0)) == []


def test_learning_table_counts_networks_still_learning():
    study = {"decay|2": [(0, "design", _with_loss([-0.04, -0.02, -0.01, -0.005])),
                         (1, "design", _with_loss([-0.01, -0.01, -0.01, -0.01])),
                         (2, "admitted", _run(0.5, 0, 0, 0))]}
    row = br.learning_table(study).iloc[0]
    assert row["with a held-out loss"] == 2 and row["still learning"] == "2 of 2"
    assert row["trend settles by (extrapolation)"].endswith("; 1 not shrinking")


def test_firm_table_reads_the_counts_three_ways():
    runs = [_swinging(0.20, 0.10, 0), _swinging(0.27, 0.10, 1), _swinging(0.60, 0.01, 2)]
    for _, r in runs:
        r["params"]["depth"] = 6
    row = br.firm_table({"RoPE|6": [(s, "design", r) for s, r in runs]}).iloc[0]
    assert row["design's rule"] == "1 : 1 : 1" and row["holding against the swing"] == "2 : 1"
    assert row["cuts inside the swing"] == "seeds 0 | 1" and row["count certain"] == "no"
    steady = br.firm_table({"decay|2": [(s, "design", _run(x, 0, 0, 0)) for s, x in ((0, 0.5), (1, 0.74))]}).iloc[0]
    assert steady["design's rule"] == "1 : 1" and steady["count certain"] == "yes"
    assert steady["the window ending 5/10/15/20k earlier"] == "1:1, 1:1, 1:1, 1:1"


def test_timing_says_when_the_accuracy_and_the_gap_move():
    study = _study()
    t = br.timing(study["decay|2"][2][2])                 # seed 2: the jump at 175,000, constant gaps
    assert t["exit"] == 175_000 and t["accuracy"]["at"] == 175_000 and "sweep" not in t
    assert not t["first-last"]["moves"] and t["first-last"]["at"] is None
    tab = br.timing_table(study)
    assert list(tab["left the plateau"]) == ["never", "never", "175,000", "190,000", "225,000"]
    assert tab.iloc[0]["accuracy moves"] == "does not move"
    assert tab.iloc[2]["first-last leads by"] == ""


def test_headline_counts_the_jumpers_and_their_lead():
    study = {"decay|2": [row for row in _study()["decay|2"] if row[2] is not None],
             "No PE|2": [(0, "design", _with_loss([-0.01] * 4))]}
    for _, _, r in study["decay|2"]:
        r["params"]["n_sweep"] = 2000
        r["ic_accuracy"] = {k: v[-1] for k, v in r["curves"].items() if k.startswith("IC_")}
        r["sweep_accuracy"] = [0.30] * 8                  # above the sweep's ceiling 0.2081: retrieves
    h = br.headline(study)
    assert (h["n"], h["n_left"], h["exit_range"], h["end_range"]) == ("5", "3", "175,000 to 225,000", "0.740")
    assert h["retrieve"] == "3 of 3" and h["lead_range"] == ""          # constant gaps never move
    assert h["slots"].startswith("the middle and last items are served alike")
    assert (h["others_left"], h["others_n"], h["learning"], h["with_loss"]) == ("0", "1", "1", "1")
