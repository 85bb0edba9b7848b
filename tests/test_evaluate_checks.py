"""posbias.measures.evaluate, the checks and readings a trained chapter calls (the rest: tests/test_evaluate.py),
each against values written out by hand."""
import pytest
import torch

from posbias.measures import evaluate as ev
from posbias.science.masks import make_mask

NAMES = ["IC_first_middle", "IC_middle_first", "IC_first_last", "IC_last_first", "IC_middle_last", "IC_last_middle"]


def _unit(acc=0.3, gap_shift=0.0, depth=2):
    ic = {n: acc for n in NAMES}
    gaps = {k: float(v) + gap_shift for k, v in ev.gaps(ic).items()}
    return {"ic_accuracy": ic, "gaps": gaps, "params": {"depth": depth},
            "curves": {"step": [0, 1, 2], "loss": [0.0, 3.4, 3.2], **{n: [acc] * 3 for n in NAMES}}}


def test_first_is_peak_needs_key_one_strictly_above_the_rest():
    assert ev.first_is_peak([0.6, 0.5, 0.1, 0.9])                 # the last key does not count
    assert not ev.first_is_peak([0.5, 0.5, 0.1, 0.9])             # a tie is not a peak
    assert not ev.first_is_peak([0.0, 0.0, 0.0, 0.0])


def test_learning_judged_says_nothing_when_every_network_is_judged():
    shallow = [_unit(depth=2), _unit(depth=4)]
    assert ev.learning_judged(shallow, 2000) == (shallow, "")
    judged, why = ev.learning_judged([*shallow, _unit(depth=6)], 2000)
    assert judged == shallow and why.startswith("networks of depth 6 are not judged")


def test_check_training_reports_the_stale_gap_it_measured(fresh):
    from posbias.storage import report

    ev.check_training([_unit(gap_shift=0.004)] * 2, 1000, steps=100_000)
    c = next(c for c in report.record()["checks"] if c["name"] == "gaps-recomputed")
    assert not c["passed"] and c["value"] == pytest.approx(0.004)


def test_check_attention_records_is_strict_at_its_tolerance(fresh):
    """Uniform causal maps over 4 tokens, the last row putting nothing on the last key (alpha_4 = 0 of the
    mean map): stored alpha equal to the map's passes; stored alpha_4 = 1e-5, a gap of exactly 1e-5, fails
    '< 1e-5' and the check reports that gap."""
    from posbias.storage import report

    mask = make_mask("causal", 4)
    a = mask.double() / mask.double().sum(-1, keepdim=True)
    a[3] = torch.tensor([1 / 3, 1 / 3, 1 / 3, 0.0], dtype=torch.float64)
    alpha = ev.sink_alpha(a, mask)
    assert float(alpha[3]) == 0.0
    unit = {"mean_attention": [a.tolist()], "sink_alpha": [alpha.tolist()]}
    ev.check_attention_records([unit, unit], mask, prefix="ok-")
    stale = {**unit, "sink_alpha": [[*alpha[:3].tolist(), 1e-5]]}
    ev.check_attention_records([unit, stale], mask, prefix="edge-")
    got = {c["name"]: c for c in report.record()["checks"]}
    assert got["ok-alpha-recomputed"]["passed"] and got["ok-attention-masked"]["passed"]
    assert not got["edge-alpha-recomputed"]["passed"] and got["edge-alpha-recomputed"]["value"] == 1e-5


def test_sink_rate_rows_read_key_one_for_windows_and_the_prefix_mean_for_prefixes():
    share = {"window|4": torch.tensor([[0.9, 0.1, 0.2, 0.3, 0.8]]),
             "prefix|2": torch.tensor([[0.6, 0.4, 0.1, 0.2, 0.7]])}
    rows = ev.sink_rate_rows(share, [4], [2], {"real": torch.tensor([0.5, 0.2, 0.3, 0.9])})
    got = {r["network"]: (r["rate at the sink"], r["max elsewhere"]) for r in rows}
    assert got["toy, window w=4"] == pytest.approx((0.9, 0.3))          # key 1; keys 2..4 (the last left out)
    assert got["toy, prefix K=2 (prefix mean)"] == pytest.approx((0.5, 0.2))
    assert got["real"] == pytest.approx((0.5, 0.3))


def test_stored_curves_and_real_rates_are_read_in_float64():
    """Losses 3.4 -> 3.2 and a real rate of 0.3 are not float32 numbers: read in float32 the loss drop
    would be 0.20000005 and the rate 0.30000001, off by 2e-7 relative."""
    u = _unit()
    u["curves"]["loss"] = [0.0, 3.4, 3.2]
    assert ev.training_sanity([u], 1000)["loss_drop"] == pytest.approx(3.4 - 3.2, rel=1e-12)
    (row,) = ev.sink_rate_rows({}, [], [], {"real": [0.6, 0.3, 0.1, 0.9]})
    assert (row["rate at the sink"], row["max elsewhere"]) == (0.6, 0.3)


def test_fig3_name_is_the_architecture_in_running_prose():
    """'no mask, RoPE' reads 'no-mask RoPE' and 'causal, No PE' reads 'causal No PE' (the two replacements;
    sees a broken replacement or one that no longer matches the table's 'no mask, ')."""
    assert ev.fig3_name("full", "rope") == "no-mask RoPE"
    assert ev.fig3_name("full", "none") == "no-mask No PE"
    assert ev.fig3_name("causal", "none") == "causal No PE"


def test_check_attention_records_reports_the_leak_it_measured(fresh):
    """Causal maps over 3 tokens whose first row puts 0.5 on the forbidden key 2: rows still sum to 1, so
    the residual is that 0.5 of weight outside the mask; the check fails and records the 0.5 as its
    value (sees a check that records no measurement)."""
    from posbias.storage import report

    mask = make_mask("causal", 3)
    a = mask.double() / mask.double().sum(-1, keepdim=True)
    a[0] = torch.tensor([0.5, 0.5, 0.0], dtype=torch.float64)
    unit = {"mean_attention": [a.tolist()], "sink_alpha": [ev.sink_alpha(a, mask).tolist()]}
    ev.check_attention_records([unit, unit], mask, prefix="leak-")
    c = {c["name"]: c for c in report.record()["checks"]}["leak-attention-masked"]
    assert not c["passed"] and c["value"] == pytest.approx(0.5, abs=1e-12)


def _learned(acc, loss=(0.0, 3.4, 3.2)):
    u = _unit(acc=acc)
    u["curves"]["loss"] = list(loss)
    return u


def test_check_training_by_hand_at_four_times_chance(fresh):
    """Four networks at accuracy 0.14 (140 of 1,000 test sequences; chance 1/32, 4 x chance = 0.125, the
    worst 48 SE above chance), loss 3.4 -> 3.2 (a drop of 0.2): loss-falls, test-set-size and above-chance
    pass, above-chance expects 'median >= 0.125', n_test_sets is glued as 1000, the gaps check says what
    it compares. Sees a stricter loss or median threshold, a lost glue, claim or expected text."""
    from posbias.storage import report

    ev.check_training([_learned(0.14)] * 4, 1000, steps=100_000)
    rec = report.record()
    got = {c["name"]: c for c in rec["checks"]}
    assert got["loss-falls"]["passed"] and got["loss-falls"]["value"] == pytest.approx(0.2, rel=1e-12)
    assert got["test-set-size"]["passed"] and got["gaps-recomputed"]["passed"]
    assert "differences of the stored accuracies" in got["gaps-recomputed"]["claim"]
    assert got["above-chance"]["passed"]
    assert got["above-chance"]["expected"] == "worst > 3 SE above 1/32; median >= 0.125"
    assert rec["values"]["n_test_sets"] == 1000


def test_check_training_refuses_accuracies_that_are_not_counts(fresh):
    """Accuracy 0.1405 over 1,000 test sequences is 140.5 sequences: half a count from an integer, far past
    the 0.01 allowed, so test-set-size fails with value 0.5 (sees a bound loose enough to pass any residual)."""
    from posbias.storage import report

    ev.check_training([_learned(0.1405)] * 2, 1000, steps=100_000, prefix="half-")
    c = {c["name"]: c for c in report.record()["checks"]}["half-test-set-size"]
    assert not c["passed"] and c["value"] == pytest.approx(0.5, abs=1e-9)


def test_check_training_says_what_each_check_compares(fresh):
    """The claim and expected texts of every check, written out (late_rise_ok: loss-falls reads the best
    drop, 3.4 -> min(3.2) = 0.2)."""
    from posbias.storage import report

    ev.check_training([_learned(0.14)] * 2, 1000, steps=100_000, late_rise_ok=True)
    got = {c["name"]: c for c in report.record()["checks"]}
    assert got["loss-falls"]["expected"] == "smallest drop > 0" and got["loss-falls"]["passed"]
    assert got["test-set-size"]["expected"] == "distance of acc * n_test from an integer < 0.01"
    assert got["gaps-recomputed"]["expected"] == "< 1e-6"
    assert got["above-chance"]["claim"] == ("the worst judged network's mean accuracy over the six IC sets "
                                            "exceeds chance (1/32) and the median judged network's reaches "
                                            "four times chance")


def test_check_training_count_residual_of_exactly_the_bound_fails(fresh):
    """Accuracy 1e-5 over 1,000 test sequences is 0.01 of a sequence (exactly, in float64: 1e-5 * 1000 ==
    0.01): at the bound, not below it, so test-set-size fails with value 0.01."""
    from posbias.storage import report

    assert 1e-5 * 1000 == 0.01
    ev.check_training([_learned(1e-5)] * 2, 1000, steps=100_000, prefix="edge-")
    c = {c["name"]: c for c in report.record()["checks"]}["edge-test-set-size"]
    assert c["value"] == 0.01 and not c["passed"]


def test_complete_depths_reads_the_depth_after_the_last_bar():
    """Architectures whose own names hold a '|' ('first|causal'): the depth is what follows the last '|'
    (2 and 4), and the depth missing 'last|causal' (6) is left out."""
    complete = {"first|causal|2": [1], "first|causal|4": [2], "last|causal|2": [3], "last|causal|4": [4],
                "first|causal|6": [5]}
    full, kept = ev.complete_depths(complete, pes=("first|causal", "last|causal"))
    assert full == [2, 4] and kept == {k: v for k, v in complete.items() if not k.endswith("|6")}
