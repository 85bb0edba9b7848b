"""posbias.analysis.budget_rules: issue 92's readings of the fixed-budget study on synthetic networks of known shape."""
import numpy as np
import pytest

from posbias.analysis import budget_read as br
from posbias.analysis import budget_rules as rules

from test_budget_read import STEPS, _run, _study


def test_the_split_and_the_u_in_words():
    words = rules.branch_sentences(_study())
    assert words.startswith("decay|2, 5 of 10 networks stored: 2 branches, 2 : 3 so far;")
    assert "the first item is served best, then the last, then the middle" in words    # the lower branch
    assert "the middle and last items are served alike, better than the first" in words and "RoPE|6" not in words
    full = {"decay|2": [row for row in _study()["decay|2"] if row[2] is not None]}
    assert br.split_words(full, "decay|2") == "2 branches, 2 : 3"
    one = {"RoPE|6": [(0, "design", _run(0.52, 0.0, 0.0, 0.0))] + _study()["RoPE|6"][1:]}
    assert rules.branch_sentences(one).startswith("RoPE|6, 1 of 5 networks stored: one branch so far; 1 ends at")
    assert br.split_words({"RoPE|6": one["RoPE|6"][:1]}, "RoPE|6") == "one branch"
    assert rules.branch_sentences({"RoPE|6": _study()["RoPE|6"]}) == "no network yet."



def _slots(first, middle, last, n=1):
    """Readings of ``n`` identical networks with these accuracies by answer slot."""
    ic = {"IC_first_middle": first, "IC_first_last": first, "IC_middle_first": middle,
          "IC_middle_last": middle, "IC_last_first": last, "IC_last_middle": last}
    return [{"ic_accuracy": dict(ic)} for _ in range(n)]


def test_slot_accuracy_averages_the_two_sets_whose_answer_sits_there():
    r = {"ic_accuracy": {"IC_first_middle": 0.6, "IC_first_last": 0.7, "IC_middle_first": 0.8,
                         "IC_middle_last": 0.9, "IC_last_first": 0.1, "IC_last_middle": 0.3}}
    assert rules.slot_accuracy(r) == pytest.approx({"first": 0.65, "middle": 0.85, "last": 0.2})


def test_slot_difference_adds_the_shared_binomial_floor_to_the_spread():
    reads = _slots(0.7, 0.6, 0.5, n=4)
    m, se = rules.slot_difference(reads, "first", "last", 10_000)
    assert m == pytest.approx(0.2) and se == pytest.approx(0.005)     # no spread: the floor 1/sqrt(4 n)
    reads[0]["ic_accuracy"]["IC_first_middle"] = 0.9                   # network 0: first 0.8
    m, se = rules.slot_difference(reads, "first", "last", 10_000)
    d = np.array([0.3, 0.2, 0.2, 0.2])
    assert m == pytest.approx(d.mean()) and se == pytest.approx(np.sqrt(d.var(ddof=1) / 4 + 1 / 40_000))


def test_slot_words_name_the_middle_when_it_beats_the_last():
    # decay|2's upper branch as the issue measured it: first 0.656, middle 0.806, last 0.760
    words = rules.slot_words(_slots(0.656, 0.806, 0.760, n=8), 10_000)
    assert words.startswith("the middle item is served best, then the last, then the first")
    assert "last item" not in words.split("(")[0].replace("then the last", "")


def test_slot_words_group_slots_within_two_standard_errors():
    se = 0.005                                                         # identical networks, n_test 10,000
    assert rules.slot_words(_slots(0.70, 0.60, 0.70 - 1.9 * se), 10_000).startswith(
        "the first and last items are served alike, better than the middle")
    assert rules.slot_words(_slots(0.70, 0.60, 0.70 - 2.1 * se), 10_000).startswith(
        "the first item is served best, then the last, then the middle")
    assert rules.slot_words(_slots(0.70, 0.694, 0.688), 10_000).startswith(
        "the first item is served better than the last; the middle is told from neither")
    assert rules.slot_words(_slots(0.50, 0.505, 0.501), 10_000).startswith("no slot is served differently")
    assert rules.slot_words(_slots(0.70, 0.60, 0.60), 10_000).startswith(
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
    firm, uncertain = rules.firm_branches(runs)
    assert firm == [[0, 1], [2]] and uncertain == [(0, 1)]
    assert [[s for s, _ in b] for b in br.branches_of(runs)] == [[0], [1], [2]]
    assert rules.firm_split_words(runs) == ("2 : 1 (the design's rule: 1 : 1 : 1; 1 of its cuts falls inside "
                                         "the networks' own swing)")
    # small swings: the same cut holds
    steady = [_swinging(0.20, 0.01, 0), _swinging(0.27, 0.01, 1), _swinging(0.60, 0.01, 2)]
    assert rules.firm_branches(steady) == ([[0], [1], [2]], [])
    assert rules.firm_split_words(steady) == "1 : 1 : 1, as the design's rule"
    assert rules.firm_branches([]) == ([], [])


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
    got = rules.still_learning(r)
    assert got["learning"] and got["change"] == pytest.approx(-0.005, abs=5e-4)
    assert got["ratio"] == pytest.approx(0.5, rel=0.1)
    # 1% of the final loss (~0.4250) is 0.00425: the next halving (0.0025) at 550,000 crosses it
    assert got["settles_at"] == 550_000
    flat = rules.still_learning(_with_loss([-0.01, -0.01, -0.01, -0.01]))
    assert flat["learning"] and flat["settles_at"] is None and flat["ratio"] == pytest.approx(1.0, rel=0.05)
    assert rules.still_learning(_run(0.5, 0, 0, 0)) is None
    assert rules.loss_changes(_run(0.5, 0, 0, 0)) == []


def test_learning_table_counts_networks_still_learning():
    study = {"decay|2": [(0, "design", _with_loss([-0.04, -0.02, -0.01, -0.005])),
                         (1, "design", _with_loss([-0.01, -0.01, -0.01, -0.01])),
                         (2, "admitted", _run(0.5, 0, 0, 0))]}
    row = rules.learning_table(study).iloc[0]
    assert row["with a held-out loss"] == 2 and row["still learning"] == "2 of 2"
    assert row["trend settles by (extrapolation)"].endswith("; 1 not shrinking")


def test_firm_table_reads_the_counts_three_ways():
    runs = [_swinging(0.20, 0.10, 0), _swinging(0.27, 0.10, 1), _swinging(0.60, 0.01, 2)]
    for _, r in runs:
        r["params"]["depth"] = 6
    row = rules.firm_table({"RoPE|6": [(s, "design", r) for s, r in runs]}).iloc[0]
    assert row["design's rule"] == "1 : 1 : 1" and row["holding against the swing"] == "2 : 1"
    assert row["cuts inside the swing"] == "seeds 0 | 1" and row["count certain"] == "no"
    steady = rules.firm_table({"decay|2": [(s, "design", _run(x, 0, 0, 0)) for s, x in ((0, 0.5), (1, 0.74))]}).iloc[0]
    assert steady["design's rule"] == "1 : 1" and steady["count certain"] == "yes"
    assert steady["the window ending 5/10/15/20k earlier"] == "1:1, 1:1, 1:1, 1:1"


def test_timing_says_when_the_accuracy_and_the_gap_move():
    study = _study()
    t = rules.timing(study["decay|2"][2][2])                 # seed 2: the jump at 175,000, constant gaps
    assert t["exit"] == 175_000 and t["accuracy"]["at"] == 175_000 and "sweep" not in t
    assert not t["first-last"]["moves"] and t["first-last"]["at"] is None
    tab = rules.timing_table(study)
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
    h = rules.headline(study)
    assert (h["n"], h["n_left"], h["exit_range"], h["end_range"]) == ("5", "3", "175,000 to 225,000", "0.740")
    assert h["retrieve"] == "3 of 3" and h["lead_range"] == ""          # constant gaps never move
    assert h["slots"].startswith("the middle and last items are served alike")
    assert (h["others_left"], h["others_n"], h["learning"], h["with_loss"]) == ("0", "1", "1", "1")
