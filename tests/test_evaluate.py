"""posbias.evaluate: gaps, sink metric and accuracies on hand-made inputs."""
import dataclasses

import pytest
import torch
from hypothesis import given, settings, strategies as st

from posbias import evaluate as ev
from posbias.evaluate import accuracy, gaps, sink_alpha, sink_share
from posbias.masks import make_mask
from posbias.model import EnsembleNet, MemberConfig
from posbias.task import TaskConfig, ic_test_set, make_task


def test_gaps_are_differences_of_mirrored_sets():
    acc = {"IC_first_middle": 0.9, "IC_middle_first": 0.2, "IC_first_last": 0.5, "IC_last_first": 0.5,
           "IC_middle_last": 0.3, "IC_last_middle": 0.6}
    g = gaps(acc)
    assert abs(float(g["first-middle"]) - 0.7) < 1e-6 and float(g["first-last"]) == 0.0
    assert abs(float(g["middle-last"]) + 0.3) < 1e-6


def test_sink_alpha_on_a_pure_first_token_sink():
    T = 6
    mask = make_mask("causal", T)
    attn = torch.zeros(T, T)
    attn[:, 0] = 1.0                                      # every query puts all its mass on token 1
    alpha = sink_alpha(attn, mask)
    assert alpha[0] == 1.0 and bool((alpha[1:-1] == 0).all())
    share = sink_share(attn.expand(2, 3, T, T), mask)
    assert share[0] == 1.0 and share[1] == 0.0


@settings(max_examples=25, deadline=None)
@given(T=st.integers(2, 12), seed=st.integers(0, 1000))
def test_alpha_of_uniform_causal_attention(T, seed):
    # uniform causal rows: A_ik = 1/(i+1); alpha_k = mean over i >= k of 1/(i+1)
    mask = make_mask("causal", T)
    attn = mask.double() / mask.double().sum(-1, keepdim=True)
    alpha = sink_alpha(attn, mask)
    for k in range(T):
        expected = sum(1 / (i + 1) for i in range(k, T)) / (T - k)
        assert abs(alpha[k].item() - expected) < 1e-12


def test_accuracy_of_an_untrained_net_is_near_chance():
    cfg = TaskConfig()
    ts = ic_test_set("first", None, 256, 0, cfg)
    net = EnsembleNet([MemberConfig()], [0], 2)
    a = accuracy(net, [make_task(0, cfg)], ts)
    assert a.shape == (1,) and 0 <= a.item() < 0.2


def test_verdict_and_standard_error():
    from posbias.evaluate import claim, seed_mean_se, verdict
    m, se = seed_mean_se([0.2, 0.2], n_test=1000)
    assert m == 0.2 and abs(se - (0.5 / 1000) ** 0.5) < 1e-12      # no seed spread: binomial part only,
    m, se = seed_mean_se([0.2] * 5, n_test=1000)                     # and seeds share the test sets, so it
    assert abs(se - (0.5 / 1000) ** 0.5) < 1e-12                     # does not shrink with more of them
    m, se = seed_mean_se([0.1, 0.3], n_test=10**9)
    assert abs(m - 0.2) < 1e-12 and abs(se - (0.02 / 2) ** 0.5) < 1e-6   # spread part: sample variance / n
    assert verdict(0.2, 0.05) == "reproduced" and verdict(-0.2, 0.05) == "contradicted"
    assert verdict(0.05, 0.05) == "inconclusive" and verdict(-0.2, 0.05, sign=-1) == "reproduced"
    row = claim("x", "positive", [0.25, 0.15], 10000)          # 3.96 SE, below t(1 df) = 12.7: too few runs
    assert row.verdict == "inconclusive" and abs(row.mean - 0.2) < 1e-12 and row.n_runs == 2
    row = claim("x", "positive", [0.25, 0.15, 0.2, 0.25, 0.15], 10000)   # 8.5 SE > t(4 df) = 2.78
    assert row.verdict == "reproduced" and abs(row.crit - 2.776) < 1e-3


def test_still_learning_detects_rising_accuracy():
    from posbias.evaluate import still_learning
    names = ["IC_first_middle", "IC_middle_first", "IC_first_last", "IC_last_first", "IC_middle_last", "IC_last_middle"]
    rising = [{"curves": {"step": [0, 1, 2], **{n: [0.1, 0.3, 0.6] for n in names}}} for _ in range(2)]
    flat = [{"curves": {"step": [0, 1, 2], **{n: [0.1, 0.6, 0.6] for n in names}}} for _ in range(2)]
    assert still_learning(rising, 1000).verdict == "reproduced"
    assert still_learning(flat, 1000).verdict == "inconclusive"


def _unit(acc, loss=(0.0, 3.4, 3.2), gap_shift=0.0):
    from posbias.evaluate import gaps
    g = {k: float(v) + gap_shift for k, v in gaps(acc).items()}
    return {"ic_accuracy": acc, "gaps": g,
            "curves": {"step": [0, 1, 2], "loss": list(loss), **{n: [a, a, a] for n, a in acc.items()}}}


def test_training_sanity_passes_on_a_sound_unit_and_flags_each_defect():
    from posbias.evaluate import training_sanity
    names = ["IC_first_middle", "IC_middle_first", "IC_first_last", "IC_last_first", "IC_middle_last", "IC_last_middle"]
    acc = {n: k / 1000 for n, k in zip(names, [300, 250, 280, 260, 270, 240])}
    s = training_sanity([_unit(acc)], n_test=1000)
    assert s["loss_drop"] > 0 and s["count_residual"] < 1e-9 and s["gap_residual"] < 1e-6
    assert abs(s["accuracy_min"] - 1.6 / 6) < 1e-12 and s["z_chance"] > 3
    assert training_sanity([_unit(acc, loss=(0.0, 3.2, 3.4))], 1000)["loss_drop"] < 0       # loss rose
    unstable = training_sanity([_unit(acc, loss=(0.0, 3.2, 3.0, 2.9)), _unit(acc, loss=(0.0, 3.2, 2.5, 3.4))], 1000)
    assert unstable["loss_drop"] < 0 < unstable["best_drop"] and unstable["n_loss_rose"] == 1
    never = training_sanity([_unit(acc, loss=(0.0, 3.2, 3.0, 2.9)), _unit(acc, loss=(0.0, 3.2, 3.3, 3.4))], 1000)
    assert never["best_drop"] < 0 and never["n_loss_rose"] == 1
    from posbias.evaluate import loss_rose
    assert loss_rose([_unit(acc, loss=(0.0, 3.2, 3.0, 2.9)), _unit(acc, loss=(0.0, 3.2, 2.5, 3.4))]) == [1]
    assert training_sanity([_unit(acc)], 1024)["count_residual"] > 0.1                       # wrong set size
    assert training_sanity([_unit(acc, gap_shift=0.01)], 1000)["gap_residual"] > 0.009       # stale gaps
    at_chance = {n: 1 / 32 for n in names}
    assert abs(training_sanity([_unit(at_chance)], 1024)["z_chance"]) < 1e-9


def test_check_training_late_rise_ok_refuses_only_a_network_that_never_learned(fresh):
    from posbias import report
    from posbias.evaluate import check_training
    names = ["IC_first_middle", "IC_middle_first", "IC_first_last", "IC_last_first", "IC_middle_last", "IC_last_middle"]
    acc = {n: k / 1000 for n, k in zip(names, [300, 250, 280, 260, 270, 240])}
    sound, unstable, never = (_unit(acc, loss=L) for L in [(0.0, 3.2, 3.0, 2.9), (0.0, 3.2, 2.5, 3.4),
                                                           (0.0, 3.2, 3.3, 3.4)])
    verdicts = {}
    for prefix, units, ok in [("a-", [sound, unstable], False), ("b-", [sound, unstable], True),
                              ("c-", [sound, never], True)]:
        check_training(units, 1000, steps=10, prefix=prefix, late_rise_ok=ok)
        verdicts[prefix] = next(c["passed"] for c in report.record()["checks"] if c["name"] == f"{prefix}loss-falls")
    assert verdicts == {"a-": False, "b-": True, "c-": False}
    assert report.record()["values"]["b_n_loss_rose"] == 1


def test_attention_residual_sees_mass_outside_the_mask():
    from posbias.evaluate import attention_residual
    T = 5
    causal = make_mask("causal", T)
    uniform = causal.double() / causal.double().sum(-1, keepdim=True)
    assert attention_residual(uniform, causal) < 1e-12
    full = torch.full((T, T), 1 / T, dtype=torch.float64)
    assert abs(attention_residual(full, causal) - 1 / T) < 1e-12                           # leaks past the mask
    assert abs(attention_residual(0.5 * uniform, causal) - 0.5) < 1e-12                    # rows not stochastic


def test_uniform_sink_alpha_is_the_harmonic_baseline():
    from posbias.masks import causal_mask, sliding_window_mask

    T = 9
    harmonic = lambda n: sum(1 / i for i in range(1, n + 1))  # noqa: E731
    a = ev.uniform_sink_alpha(causal_mask(T))
    assert a.dtype == torch.float64 and a.shape == (T,)
    # key k is seen by queries k..T, query i spreads 1/i over its keys
    want = torch.tensor([(harmonic(T) - harmonic(k - 1)) / (T - k + 1) for k in range(1, T + 1)], dtype=torch.float64)
    assert torch.allclose(a, want, atol=1e-12, rtol=0)
    w = 3
    assert abs(float(ev.uniform_sink_alpha(sliding_window_mask(T, w))[0]) - harmonic(w) / w) < 1e-12


def test_fixed_depth_claims_are_the_stated_differences():
    vals = {("No PE", "first-last"): 5.0, ("No PE", "middle-last"): 1.0, ("decay", "first-last"): -2.0,
            ("RoPE", "first-last"): 3.0}
    rows = ev.fixed_depth_claims(lambda pe, p: torch.tensor([vals[pe, p]]))
    got = {name: (float(q), n_acc, used) for name, _, used, q, n_acc in rows}
    assert got == {"nope-early": (5.0, 2, ["No PE"]), "middle-last-smaller": (4.0, 4, ["No PE"]),
                   "decay-reduces": (7.0, 4, ["No PE", "decay"]), "rope-reduces": (2.0, 4, ["No PE", "RoPE"]),
                   "decay-more-than-rope": (5.0, 4, ["RoPE", "decay"])}


def test_depth_claims_are_deep_minus_shallow_gaps():
    fl = {("No PE", 2): 1.0, ("No PE", 6): 4.0, ("decay", 2): 0.5, ("decay", 6): -1.0,
          ("RoPE", 2): 2.0, ("RoPE", 6): 2.5}
    rows = ev.depth_claims(lambda pe, d: torch.tensor([fl[pe, d]]), 2, 6)
    assert {name: (float(q), n_acc, used) for name, _, used, q, n_acc in rows} == {
        "depth-nope": (3.0, 4, ["No PE"]), "depth-decay": (-1.5, 4, ["decay"]), "depth-rope": (0.5, 4, ["RoPE"])}
    assert rows[0][1] == "No PE: the first-vs-last gap grows from 2 to 6 layers"


def test_publish_and_check_claims(fresh):
    """The claims table: glued verdicts and counts; a listed claim is asserted only once its networks stopped."""
    import pytest

    from posbias import report

    five = lambda a, b: [a, b, a, b, (a + b) / 2]  # noqa: E731   five runs: t critical value 2.78
    rows = [ev.claim("up", "positive", five(0.3, 0.2), 10000),                     # reproduced
            ev.claim("down", "positive", five(-0.3, -0.2), 10000),                 # contradicted
            ev.claim("neg", "negative", five(-0.3, -0.2), 10000, sign=-1),
            dataclasses.replace(ev.claim("rising", "positive", five(-0.3, -0.2), 10000), still_rising=True),
            ev.claim("flat", "positive", five(0.01, -0.01), 10000)]                # inconclusive
    with pytest.raises(ValueError, match="not in the table"):
        ev.publish_claims(rows, ["up", "typo"])
    ev.publish_claims(rows, ["up", "down", "neg", "rising"], prefix="p_")
    v = report.record()["values"]
    assert (v["p_n_reproduced"], v["p_n_inconclusive"], v["p_n_contradicted"], v["p_n_claims"]) == (2, 1, 2, 5)
    assert v["p_v_down"] == "contradicted" and abs(v["p_m_up"] - 0.25) < 1e-12 and v["p_s_up"] > 0
    assert v["p_contradicted_list"].startswith("positive (-0.250 ± ") and v["p_contradicted_list"].count(";") == 1
    assert (v["p_n_kind"], v["p_n_asserted"]) == (4, 3)          # "rising" is listed but still learning
    assert [r.asserted for r in rows] == [True, True, True, False, False]
    ev.check_claims(rows)
    checks = {c["name"]: c["passed"] for c in report.record()["checks"]}
    assert checks == {"claim-up": True, "claim-down": False, "claim-neg": True}   # "down" fails the build


# --------------------------------------------------------------------------- chapter tables

_NAMES = ["IC_first_middle", "IC_middle_first", "IC_first_last", "IC_last_first", "IC_middle_last", "IC_last_middle"]


def _fig2_results(depths, shift=0.0, seeds=3):
    """Figure 2-shaped results: every seed of a (PE, depth) has the same accuracies (no seed spread);
    No PE's first-vs-last gap is 0.1 * depth + shift, the others' 0."""
    out = {}
    for pe in ev.FIG2_PES:
        for d in depths:
            acc = {n: 0.5 for n in _NAMES}
            if pe == "No PE":
                acc["IC_first_last"] = 0.5 + 0.1 * d / 10 + shift
            out[f"{pe}|{d}"] = [_unit(acc) for _ in range(seeds)]
    return out


def test_coverage_counts_stored_units_and_keeps_complete_labels():
    stored = {"a": [{"x": 1}, None], "b": [{"x": 2}, {"x": 3}], "c": [None, None], "d": []}
    cov = ev.coverage(stored)
    assert isinstance(cov, ev.Coverage) and "Coverage" in ev.__all__
    assert [f.name for f in dataclasses.fields(cov)] == ["n_units", "n_total", "complete", "statement"]
    assert cov == ev.Coverage(n_units=3, n_total=6, complete={"b": [{"x": 2}, {"x": 3}]},
                              statement="3 of 6 units committed")
    assert cov.complete["b"] is not stored["b"]                 # a copy of the seeds' list
    with pytest.raises(dataclasses.FrozenInstanceError):
        cov.n_units = 4
    assert ev.coverage({}) == ev.Coverage(0, 0, {}, "0 of 0 units committed")


def test_fig2_claims_mean_over_depths_keeps_one_depths_test_noise():
    """Issue 25: the depths share the test sequences, so a per-seed mean over depths is given the
    binomial error of one depth, not one divided by the number of depths."""
    n_test = 1000
    rows = {r.name: r for r in ev.fig2_claims(_fig2_results([2, 4, 6]), [2, 4, 6], n_test, per_depth=False)}
    assert set(rows) == {"depth-nope", "depth-decay", "depth-rope", "nope-early", "middle-last-smaller",
                         "decay-reduces", "rope-reduces", "decay-more-than-rope"}
    one_depth = ev.claim("x", "", [0.04] * 3, n_test).se          # no seed spread: binomial part only
    assert abs(rows["nope-early"].se - one_depth) < 1e-15 and abs(one_depth - (0.5 / n_test) ** 0.5) < 1e-15
    assert abs(rows["nope-early"].mean - 0.04) < 1e-6 and rows["nope-early"].depth == "mean"
    assert abs(rows["depth-nope"].mean - 0.04) < 1e-6 and rows["depth-nope"].accuracy_shallow_deep
    assert all(r.still_rising is False for r in rows.values())


def test_fig2_claims_per_depth_and_single_depth():
    rows = ev.fig2_claims(_fig2_results([2, 6]), [2, 6], 1000, per_depth=True)
    assert len(rows) == 3 + 5 * 2 and rows[3].name == "nope-early-2" and rows[-1].name == "decay-more-than-rope-6"
    assert abs(rows[-2].mean - 0.06) < 1e-6             # rope-reduces at 6 layers: 0.06 - 0
    single = ev.fig2_claims(_fig2_results([4]), [4], 1000, per_depth=True)
    assert [r.name for r in single] == [f"{n}-4" for n in ["nope-early", "middle-last-smaller", "decay-reduces",
                                                              "rope-reduces", "decay-more-than-rope"]]


def test_fig2_study_claims_name_only_what_the_finished_study_will():
    """A campaign in progress: each complete depth gets its five claims; the depth claims compare the
    study's shallowest and deepest depths, never two partial ones (2 to 6 standing in for 2 to 10)."""
    study = [2, 6, 10]
    full = ev.fig2_claims(_fig2_results(study), study, 1000, per_depth=True)
    assert [r.name for r in ev.fig2_study_claims(_fig2_results(study), study, 1000)] == [r.name for r in full]
    assert ev.fig2_study_claims({}, study, 1000) == []
    part = ev.fig2_study_claims(_fig2_results([2, 6]), study, 1000)
    assert [r.name for r in part] == [r.name for r in full if r.depth in ("2", "6")] and len(part) == 10
    ends = ev.fig2_study_claims(_fig2_results([2, 10]), study, 1000)
    depth_rows = [r for r in ends if r.depth == "2 to 10"]
    assert [r.name for r in depth_rows] == ["depth-nope", "depth-decay", "depth-rope"]
    same = {r.name: r.mean for r in full}
    assert all(abs(r.mean - same[r.name]) < 1e-12 for r in ends)   # the same numbers as the full study


def test_depth_trend_phrase_answers_from_the_rows_judged_so_far():
    """The residual chapter's answer to "does depth amplify the early bias?": No PE's first-slot
    preference at each complete depth in order, then the depth claims, or that they wait."""
    study = [2, 6, 10]
    assert ev.depth_trend_phrase(ev.fig2_study_claims({}, study, 1000)) == "no depth of the study is complete yet"
    part = ev.depth_trend_phrase(ev.fig2_study_claims(_fig2_results([6, 2]), study, 1000))
    assert part.index("at 2 layers") < part.index("at 6 layers") and "at 10 layers" not in part
    assert part.endswith("the depth claims wait for the shallowest and the deepest depths")
    rows = ev.fig2_study_claims(_fig2_results(study), study, 1000)
    text = ev.depth_trend_phrase(rows)
    early = {r.depth: r for r in rows if r.name.startswith("nope-early-")}
    assert f"{early['10'].mean:+.3f} ± {early['10'].se:.3f} at 10 layers ({early['10'].verdict})" in text
    deep = {r.name: r for r in rows if r.depth == "2 to 10"}
    assert deep["depth-nope"].mean > 0 and deep["depth-decay"].mean == 0      # No PE's gap grows with depth
    assert (f"growing from 2 to 10 layers is {deep['depth-nope'].verdict} for No PE "
            f"({deep['depth-nope'].mean:+.3f} ± {deep['depth-nope'].se:.3f})") in text
    assert text.endswith(f"and {deep['depth-rope'].verdict} for RoPE (+0.000 ± {deep['depth-rope'].se:.3f})")


def test_fig2_table_rows_and_standard_errors():
    res = _fig2_results([2, 4])
    t = ev.fig2_table(res, [2, 4], 1000)
    assert list(t["PE"]) == list(ev.FIG2_PES) * 2 and list(t["depth"]) == [2, 2, 2, 4, 4, 4]
    m, se = ev.seed_mean_se(ev.stack(res["No PE|4"], "gaps", "first-last"), 1000)
    assert t.loc[3, "first-last"] == f"{m:+.3f} ± {se:.3f}" == "+0.040 ± 0.022"
    assert abs(t.loc[0, "accuracy"] - round((0.52 + 5 * 0.5) / 6, 3)) < 1e-12
    assert ev.fig2_table(res, [], 1000).empty


def _sink_unit(attn: torch.Tensor, mask: torch.Tensor) -> dict:
    """A unit whose every layer (2) has the mean attention ``attn``."""
    alpha = ev.sink_alpha(attn, mask)
    return {"sink_alpha": [alpha.tolist()] * 2, "sink_share": (alpha > 0.3).double().tolist()}


def test_sink_claims_on_uniform_and_on_a_first_token_sink():
    T = 6
    mask = make_mask("causal", T)
    uniform = mask.double() / mask.double().sum(-1, keepdim=True)
    rows, summary = ev.sink_claims([_sink_unit(uniform, mask)] * 2, mask, n_sink=10**6)
    assert abs(rows[0].mean) < 1e-12 and rows[0].verdict == "inconclusive"
    assert abs(summary["alpha1"] - summary["alpha1_unif"]) < 1e-12
    sink = torch.where(mask, 0.0, 0.0).double()
    sink[:, 0] = 1.0                                      # every query on token 1
    rows, summary = ev.sink_claims([_sink_unit(sink, mask)] * 2, mask, n_sink=10**6)
    assert [r.verdict for r in rows] == ["reproduced", "reproduced"]
    assert summary["alpha1"] == 1.0 and summary["share1"] == 1.0 and summary["share_other"] == 0.0


def test_u_statistic_and_claim():
    sweep = torch.tensor([[0.9, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.7],      # U: min(0.9, 0.7) - 0.5 = 0.2
                          [0.9, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.3]])     # one-sided: 0.3 - 0.5 = -0.2
    assert torch.allclose(ev.u_statistic(sweep), torch.tensor([0.2, -0.2], dtype=torch.float64))
    units = [{"sweep_accuracy": sweep[0].tolist()}] * 3
    row = ev.u_claim("u", "a U", units, n_sweep=2000)
    assert row.verdict == "reproduced" and abs(row.se - (0.5 / (2000 * 2 // 3)) ** 0.5) < 1e-12
    res = {"first|causal|none": units, "last|full|rope": [{"sweep_accuracy": sweep[1].tolist()}] * 3}
    claims = ev.u_claims(res, 2000, ("first", "last"))               # missing labels are skipped
    assert list(claims) == [("first", "causal|none"), ("last", "full|rope")]
    assert claims[("first", "causal|none")] == dataclasses.replace(row, name="u-first-causal|none", claim="U present")
    table = ev.u_frame(claims).data
    assert list(table["network"]) == ["causal, No PE", "no mask, RoPE"]
    assert list(table["U present?"]) == ["reproduced", "contradicted"]
    assert abs(table["U depth"][1] + 0.2) < 1e-6


def test_fig6_claims_skip_missing_labels():
    T = 6
    e = torch.zeros(2, T, dtype=torch.float64)
    e[:, 0] = 0.2
    excess = {"causal": e, "window|4": e * 0.5, "window|12": e, "prefix|2": e}
    rows = ev.fig6_claims(excess, [4, 8, 12], [2, 4], n_eff=10**6)
    assert [r.name for r in rows] == ["causal-first", "window-grows", "prefix-2", "prefix-2-beyond-first"]
    assert [r.verdict for r in rows] == ["reproduced", "reproduced", "reproduced", "inconclusive"]
    assert [r.name for r in ev.fig6_claims({"causal": e}, [4, 12], [2], 100)] == ["causal-first"]


def test_expected_false_verdicts_is_the_two_sided_normal_tail():
    assert (abs(ev.expected_false_verdicts(1, z=2) - 0.0455) < 1e-4
            and abs(ev.expected_false_verdicts(20, z=1.96) - 1) < 1e-3)
    assert ev.expected_false_verdicts(20) == 20 * 0.05 and ev.expected_false_verdicts(10, level=0.01) == 10 * 0.01


def test_check_attention_records_fails_on_a_leak_and_on_stale_alpha(fresh):
    from posbias import report

    T = 5
    mask = make_mask("causal", T)
    uniform = mask.double() / mask.double().sum(-1, keepdim=True)
    sound = {"mean_attention": [uniform.tolist()] * 2, "sink_alpha": [ev.sink_alpha(uniform, mask).tolist()] * 2}
    leaky = {**sound, "mean_attention": [torch.full((T, T), 1 / T).tolist()] * 2}
    stale = {**sound, "sink_alpha": [(ev.sink_alpha(uniform, mask) + 0.01).tolist()] * 2}
    for prefix, units in [("a-", [sound]), ("b-", [sound, leaky]), ("c-", [stale])]:
        ev.check_attention_records(units, mask, prefix=prefix)
    checks = {c["name"]: c["passed"] for c in report.record()["checks"]}
    assert checks == {"a-attention-masked": True, "a-alpha-recomputed": True, "b-attention-masked": False,
                      "b-alpha-recomputed": False, "c-attention-masked": True, "c-alpha-recomputed": False}


# --------------------------------------------------------------------------- verdict statistics (issue 25)

def test_t_critical_and_p_value_are_students_t():
    assert abs(ev.t_critical(5) - 2.7764) < 1e-4 and abs(ev.t_critical(2) - 12.706) < 1e-3
    assert abs(ev.t_critical(1) - 1.95996) < 1e-4                   # one run: the known binomial variance
    # the p-value is below the level exactly when the mean lies beyond the critical value
    crit = ev.t_critical(5)
    assert ev.p_value(crit * 1.01, 1.0, 5) < 0.05 < ev.p_value(crit * 0.99, 1.0, 5)
    assert ev.p_value(0.0, 1.0, 5) == 1.0 and ev.p_value(0.1, 0.0, 5) == 0.0
    # 2.5 SE with five runs: "reproduced" by the old two-SE rule, inconclusive under t(4)
    assert ev.verdict(2.5, 1.0) == "reproduced" and ev.verdict(2.5, 1.0, n_runs=5) == "inconclusive"


def test_holm_steps_down_and_stops_at_the_first_failure():
    # m = 4: thresholds 0.0125, 0.0167, 0.025, 0.05
    assert ev.holm([0.01, 0.04, 0.03, 0.005]) == [True, False, False, True]     # 0.03 > 0.025 stops it
    assert ev.holm([0.001, 0.002, 0.02, 0.04]) == [True, True, True, True]
    assert ev.holm([0.2, 0.001]) == [False, True] and ev.holm([]) == []
    five = lambda a, b: [a, b, a, b, (a + b) / 2]  # noqa: E731
    rows = [ev.claim("a", "up", five(0.3, 0.2), 10000), ev.claim("b", "up", five(-0.3, -0.2), 10000),
            ev.claim("c", "up", five(0.045, 0.015), 10000),      # t = 3.08, p = 0.037: reproduced alone,
            ev.claim("e", "up", five(0.045, 0.015), 10000),      # but Holm asks p < 0.05 / 2 of the third
            ev.claim("d", "up", five(0.3, 0.2), 10000, learned=[True, False])]
    assert [r.verdict for r in rows] == ["reproduced", "contradicted", "reproduced", "reproduced", "not comparable"]
    assert 0.025 < rows[2].p < 0.05
    ev.holm_verdicts(rows)
    assert [r.holm_verdict for r in rows] == ["reproduced", "contradicted", "inconclusive", "inconclusive",
                                                 "not comparable"]
    assert ev.n_tested(rows) == 4 and rows[4].learned == "1 of 2"


def test_depth_mean_claim_keeps_one_depths_test_noise():
    per_depth = [torch.full((5,), 0.02, dtype=torch.float64), torch.full((5,), 0.04, dtype=torch.float64)]
    row = ev.depth_mean_claim("m", "positive", per_depth, 1000, n_acc=4)
    assert abs(row.mean - 0.03) < 1e-12 and abs(row.se - (1 / 1000) ** 0.5) < 1e-12   # not / 2 depths


def _learning_unit(acc: float, last_loss: float):
    return _unit({n: acc for n in _NAMES}, loss=(0.0, 3.4, last_loss))


def test_learned_needs_low_loss_and_accuracy_well_above_chance():
    import math
    units = [_learning_unit(0.52, 0.65),          # a two-layer paper network
             _learning_unit(0.44, 2.2),           # a four-layer No-PE paper network: learned
             _learning_unit(0.44, 2.7),           # accuracy fine, loss above 0.75 ln(32) = 2.60
             _learning_unit(0.39, 2.55),          # loss fine, accuracy below 13/32
             _learning_unit(0.116, 3.27)]         # a six-layer No-PE paper network
    assert ev.learned(units) == [True, True, False, False, False]
    edge = 0.75 * math.log(32)
    assert ev.learned([_learning_unit(13 / 32, edge), _learning_unit(13 / 32, edge + 1e-6),
                       _learning_unit(13 / 32 - 1e-6, edge)]) == [True, False, False]


def test_learned_rule_states_the_thresholds_learned_applies():
    """The phrase the chapters glue is made from the thresholds :func:`learned` uses: a unit just
    inside both is learned, one just outside either is not."""
    rule = ev.learned_rule()
    assert rule["text"] == "final training loss <= 2.60 nats (0.75 ln 32) and mean IC accuracy >= 13/32"
    loss, acc = rule["loss_max"], rule["accuracy_min"]
    assert ev.learned([_learning_unit(acc, loss), _learning_unit(acc, loss + 1e-6),
                       _learning_unit(acc - 1e-6, loss)]) == [True, False, False]


def test_learned_on_the_committed_paper_units_of_figure_2():
    """The committed 45 paper-profile units (issue 25): every network at depths 2 and 4 learned, and
    the decay networks at depth 6; no six-layer No-PE or RoPE network did; the accuracies leave a
    margin of more than 0.01 on each side of the threshold 13/32."""
    from posbias import train
    st = train.stored_campaign("wu-fig-2", "paper")
    flags = {k: ev.learned(us) for k, us in st.items()}
    assert all(all(flags[f"{pe}|{d}"]) for pe in ev.FIG2_PES for d in (2, 4)) and all(flags["decay|6"])
    assert not any(flags["No PE|6"]) and not any(flags["RoPE|6"]) and sum(map(sum, flags.values())) == 35
    acc = ev.final_accuracy([u for us in st.values() for u in us])
    assert float((acc - 13 / 32).abs().min()) > 0.01
    rows = ev.fig2_claims(st, [2, 4, 6], 10000, per_depth=True, judge_learning=True)
    v = {r.name: r.verdict for r in rows}
    assert v["depth-nope"] == "not comparable" and v["decay-reduces-4"] != "not comparable"
    assert v["nope-early-2"] != "not comparable"


def test_check_training_median_and_learned_share(fresh):
    from posbias import report
    good, weak = _learning_unit(0.5, 0.7), _learning_unit(0.1, 3.0)   # 0.1: 21 SE above chance at n_test 1000
    ev.check_training([good, weak, weak], 1000, steps=1000, prefix="a-")       # median 0.1 < 4/32
    ev.check_training([good, good, weak], 1000, steps=1000, prefix="b-")
    ev.check_training([good, weak, weak], 1000, steps=100_000, prefix="c-", gaps=False)
    ev.check_training([good, good, weak], 1000, steps=100_000, prefix="d-", gaps=False)
    checks = {c["name"]: c["passed"] for c in report.record()["checks"]}
    assert checks["a-above-chance"] is False and checks["b-above-chance"] is True
    assert "b-learned-share" not in checks                       # short runs: not asked to have learned
    assert checks["d-learned-share"] is True and checks["c-learned-share"] is False
    v = report.record()["values"]
    assert (v["d_n_learned"], v["d_n_networks"], v["d_not_learned"]) == (2, 3, "2")


def test_fig3_and_fig4_claims_count_and_signs():
    cfgs = list(ev.FIG3_NAMES)
    acc = {n: 0.5 for n in _NAMES}
    acc["IC_first_middle"], acc["IC_middle_last"] = 0.6, 0.4          # first over middle, last over middle
    res3 = {c: [_unit(dict(acc)) for _ in range(5)] for c in cfgs}
    rows = ev.fig3_claims(res3, 1000)
    assert len(rows) == 15 and rows[1].name == "causal-nope-first" and abs(rows[1].mean - 0.1) < 1e-6
    nl = next(r for r in rows if r.name == "causal-nope-not-last")
    assert nl.sign == -1 and abs(nl.mean - 0.1) < 1e-6 and nl.verdict == "contradicted"
    specs = ev.fig3_specs(lambda c, p: torch.zeros(1), lambda c, s: torch.zeros(1))
    assert [s[0] for s in specs] == [r.name for r in rows]
    res4 = {f"{w}|{c}": [_unit(dict(acc)) for _ in range(5)] for w in ["first", "middle", "last"] for c in cfgs}
    rows4 = ev.fig4_claims(res4, 1000)
    assert len(rows4) == 15 and rows4[0].name == "first-causal-early"
    first_sin = next(r for r in rows4 if r.name == "first-full-sin")
    assert abs(first_sin.mean - 0.05) < 1e-6            # (gap first-middle 0.1 + first-last 0) / 2


def test_fig6_mask_reads_the_label():
    from posbias.masks import causal_mask

    assert torch.equal(ev.fig6_mask("causal", 7), causal_mask(7))
    w = ev.fig6_mask("window|3", 7)
    assert w[6].tolist() == [False] * 4 + [True] * 3 and w[2, 0]
    p = ev.fig6_mask("prefix|2", 7)
    assert p[0, 1] and not p[2, 3] and p[6, :].all()


def test_first_is_peak_and_sink_rate_rows():
    assert ev.first_is_peak([0.5, 0.1, 0.2, 0.9]) and not ev.first_is_peak([0.1, 0.5, 0.2, 0.0])
    assert not ev.first_is_peak([0.0, 0.0, 0.0, 1.0])                 # no sink at all
    share = torch.tensor([[0.6, 0.1, 0.2, 0.9], [0.4, 0.1, 0.0, 0.9]], dtype=torch.float64)
    rows = ev.sink_rate_rows({"causal": share, "prefix|2": share}, [4], [2, 3],
                             {"real": torch.tensor([0.7, 0.3, 1.0], dtype=torch.float64)})
    assert [r["network"] for r in rows] == ["toy, causal", "toy, prefix K=2 (prefix mean)", "real"]
    assert rows[0]["rate at the sink"] == 0.5 and abs(rows[0]["max elsewhere"] - 0.1) < 1e-12
    assert abs(rows[1]["rate at the sink"] - 0.3) < 1e-12 and rows[1]["max elsewhere"] == 0.1
    assert rows[2] == {"network": "real", "rate at the sink": 0.7, "max elsewhere": 0.3}


def test_claims_are_judged_for_learning_by_default_at_the_papers_scale():
    """judge_learning=None: a claim on networks trained PAPER_SCALE_STEPS steps or more is 'not
    comparable' when one did not learn; shorter runs (the re-run-it-yourself profiles) are not judged."""
    weak = _learning_unit(0.10, 3.0)
    short = {pe: [weak] * 3 for pe in ev.FIG3_NAMES}
    long = {pe: [{**weak, "params": {"steps": ev.PAPER_SCALE_STEPS}}] * 3 for pe in ev.FIG3_NAMES}
    assert {r.verdict for r in ev.fig3_claims(long, 1000)} == {"not comparable"}
    assert "not comparable" not in {r.verdict for r in ev.fig3_claims(short, 1000)}
    assert "not comparable" not in {r.verdict for r in ev.fig3_claims(long, 1000, judge_learning=False)}


def test_claims_frame_keeps_the_readers_columns():
    rows = [dataclasses.replace(ev.claim("up", "positive", [0.3, 0.2], 10000), still_rising=False, asserted=True)]
    shown = ev.claims_frame(rows).data
    assert list(shown.index) == ["up"] and list(shown.columns) == ["claim", "mean", "se", "verdict",
                                                                    "accuracy still rising"]
    assert "+0.250" in ev.claims_frame(rows).to_html()
    assert set(ev.CLAIM_COLUMNS) <= set(rows[0].table_row()) | {"depth", "learned", "accuracy shallow/deep"}
    full = dataclasses.replace(rows[0], depth="2", learned="5 of 5", accuracy_shallow_deep="0.9 / 0.8")
    assert list(full.table_row()) == ["name", *ev.CLAIM_COLUMNS]      # every column maps to a field


def test_complete_depths_keeps_the_depths_with_every_architecture():
    u = {"gaps": {}}
    complete = {"No PE|2": [u], "decay|2": [u], "RoPE|2": [u], "No PE|10": [u], "decay|10": [u],
                "RoPE|10": [u], "No PE|6": [u], "decay|6": [u], "other|6": [u]}
    depths, res = ev.complete_depths(complete)
    assert depths == [2, 10] and list(res) == [f"{pe}|{d}" for d in (2, 10) for pe in ev.FIG2_PES]
    assert ev.complete_depths(complete, ("No PE", "decay"))[0] == [2, 6, 10]
    assert ev.complete_depths({}) == ([], {})
    depths, res = ev.complete_depths(complete, within=[2, 4, 6])        # a chapter's `depths`
    assert depths == [2] and list(res) == [f"{pe}|2" for pe in ev.FIG2_PES]


def test_residual_paper_section_on_trained_smoke_units(fresh, monkeypatch):
    """The paper section of the residual study on real (tiny) trained units: a depth is drawn and
    judged once its three architectures are stored with every seed; the bars are the stored gaps;
    its claims are the scoreboard's for that depth, 'not comparable' on networks that did not learn."""
    import matplotlib.pyplot as plt
    import numpy as np

    from posbias import figures, report, scoreboard, train

    monkeypatch.setenv("POSBIAS_CACHE", str(fresh / "cache"))
    monkeypatch.delenv("POSBIAS_WRITE_DATA", raising=False)
    kw = dict(steps=20, eval_every=10, n_test=64, n_sweep=32, n_sink=32)
    stored = lambda seeds: train.stored_campaign("wu-residual-depth", "smoke", depths=[2, 6],  # noqa: E731
                                                 seeds=seeds, **kw)
    assert ev.complete_depths(ev.coverage(stored([0])).complete) == ([], {})     # nothing trained
    ev.publish_claims([], prefix="empty_")                # no depth yet: the prose's counts are 0
    assert all(report.record()["values"][f"empty_n_{k}"] == 0
               for k in ("claims", "reproduced", "inconclusive", "contradicted", "not_comparable"))
    train.run_campaign("wu-residual-depth", "smoke", progress=False, log=lambda s: None, seeds=[0],
                       depths=[2], **kw)
    assert ev.complete_depths(ev.coverage(stored([0, 1])).complete)[0] == []    # seed 1 missing
    cov = ev.coverage(stored([0]))
    assert (cov.statement, cov.n_units, cov.n_total) == ("3 of 6 units committed", 3, 6)
    depths, pres = ev.complete_depths(cov.complete)
    assert depths == [2] and set(pres) == {"No PE|2", "decay|2", "RoPE|2"}
    assert all(u["params"]["depth"] == 2 and u["params"]["steps"] == 20 for us in pres.values() for u in us)
    status = train.campaign_status("wu-residual-depth", "smoke", depths=[2, 6], seeds=[0], **kw)
    text = train.progress_text(status, train.fig2_name)
    assert "depth 6, No PE and decay (2 units) not started" in text and "depth 2" not in text

    fig = figures.gap_bars_figure(pres, list(ev.FIG2_PES), depths, kw["n_test"])
    assert len(fig.axes) == 1 and fig.axes[0].get_title() == "2 layers" and not fig.axes[0].texts
    stored_gaps = [pres[f"{pe}|2"][0]["gaps"][f"{a}-{b}"] for pe in ev.FIG2_PES for a, b in ev.GAP_PAIRS]
    assert np.allclose([p.get_height() for p in fig.axes[0].patches], stored_gaps)
    plt.close("all")

    rows = ev.fig2_study_claims(pres, [2, 6, 10], kw["n_test"], judge_learning=True)
    expected = [n for n, _ in scoreboard.expected_claims("wu-residual-depth") if n.endswith("-2")]
    assert [r.name for r in rows] == expected and len(rows) == 5       # no depth claim from one depth
    assert not any(ev.learned([u for us in pres.values() for u in us]))    # 20 iterations: chance level
    assert {r.verdict for r in rows} == {"not comparable"} and rows[0].learned == "0 of 1"
    nope_fl = pres["No PE|2"][0]["gaps"]["first-last"]
    assert abs(rows[0].mean - nope_fl) < 1e-12 and rows[0].name == "nope-early-2"
    judged = ev.fig2_claims(pres, depths, kw["n_test"], per_depth=True, judge_learning=False)
    assert "not comparable" not in {r.verdict for r in judged}
    ev.publish_claims(rows, prefix="paper_")
    v = report.record()["values"]
    assert (v["paper_n_claims"], v["paper_n_not_comparable"], v["paper_n_reproduced"]) == (5, 5, 0)
    assert v["paper_v_nope-early-2"] == "not comparable" and v["paper_n_tested"] == 0
    assert list(ev.claims_frame(rows).data.index) == expected


def test_ic_accuracy_by_set_and_slot_preference_curve():
    """The six IC accuracies as a (seeds, 6) table in IC_SETS order; the preference for a slot along
    training is slot_preference's formula on the stored curves (its last point = the final one)."""
    accs = [{n: 0.1 * (i + 1) + 0.01 * s for i, n in enumerate(_NAMES)} for s in range(2)]
    units = [_unit(a) for a in accs]
    table = ev.ic_accuracy_by_set(units)
    assert ev.IC_SETS == tuple(_NAMES) and table.shape == (2, 6)
    assert torch.allclose(table[1], torch.tensor([0.1 * (i + 1) + 0.01 for i in range(6)], dtype=torch.float64))
    for w in ("first", "middle", "last"):
        curve = ev.slot_preference_curve(units, w)
        assert curve.shape == (2, 3) and torch.allclose(curve[:, -1], ev.slot_preference(units, w), atol=1e-6)
    # middle: (-(first-middle) + (middle-last)) / 2 = (-(0.1 - 0.2) + (0.5 - 0.6)) / 2 = 0
    assert torch.allclose(ev.slot_preference_curve(units, "middle"), torch.zeros(2, 3, dtype=torch.float64))
    # last: (-(first-last) - (middle-last)) / 2 = (-(0.3 - 0.4) - (0.5 - 0.6)) / 2 = 0.1
    assert abs(float(ev.slot_preference_curve(units, "last")[0, 0]) - 0.1) < 1e-12


def test_measurable_claims_are_the_full_rows_of_the_complete_configurations():
    """On every configuration the measurable claims are fig3_claims/fig4_claims row for row; on some,
    exactly the claims whose configurations are all there, with the same numbers; on none, no claim."""
    cfgs = list(ev.FIG3_NAMES)
    acc = {n: 0.5 for n in _NAMES}
    acc["IC_first_middle"], acc["IC_middle_last"] = 0.6, 0.4
    res3 = {c: [_unit(dict(acc), gap_shift=0.01 * k * s) for s in range(3)] for k, c in enumerate(cfgs)}
    full = ev.fig3_claims(res3, 1000, judge_learning=True)
    assert ev.fig3_measurable_claims(res3, 1000, judge_learning=True) == full
    assert ev.fig3_measurable_claims({}, 1000) == []
    nope = {c: res3[c] for c in ["full|none", "causal|none"]}
    got = ev.fig3_measurable_claims(nope, 1000, judge_learning=True)
    assert [r.name for r in got] == ["causal-nope-early", "causal-nope-first", "causal-nope-not-last"]
    assert got == [r for r in full if r.name in {g.name for g in got}]
    only_causal = ev.fig3_measurable_claims({"causal|none": res3["causal|none"]}, 1000)
    assert [r.name for r in only_causal] == ["causal-nope-first", "causal-nope-not-last"]
    res4 = {f"{w}|{c}": res3[c] for w in ["first", "middle", "last"] for c in cfgs}
    assert ev.fig4_measurable_claims(res4, 1000) == ev.fig4_claims(res4, 1000)
    sin = {k: v for k, v in res4.items() if k.endswith("|sin")}
    assert [r.name for r in ev.fig4_measurable_claims(sin, 1000)] == [
        f"{w}-{m}-sin" for w in ["first", "middle", "last"] for m in ["full", "causal"]]
    assert [r.name for r in ev.fig4_measurable_claims(sin, 1000, ("middle",))] == ["middle-full-sin",
                                                                                      "middle-causal-sin"]


def test_fig3_names_label_exactly_the_trained_configurations():
    from posbias import train
    from posbias.training.campaigns import FIG3_CONFIGS

    assert list(ev.FIG3_NAMES) == [f"{m}|{p}" for m, p in FIG3_CONFIGS]
    assert [ev.fig3_name(m, p) for m, p in FIG3_CONFIGS] == [
        "no-mask No PE", "no-mask sin", "no-mask RoPE", "causal No PE", "causal sin", "causal RoPE"]
    st = train.CampaignStatus(30, 0, [train.EnsembleStatus(2, "full/causal", "none", 15, 100_000, step=15_726),
                                      train.EnsembleStatus(2, "causal/full", "none", 15, 100_000)])
    assert train.progress_text(st, ev.fig3_name) == ("depth 2, no-mask No PE and causal No PE (15 units) at step "
                                                     "15,726; depth 2, no-mask No PE and causal No PE (15 units) "
                                                     "not started")


def test_excess_peaks_find_the_first_token_and_the_top_key():
    e = torch.zeros(2, 17, dtype=torch.float64)
    e[:, 0], e[:, 3], e[:, 16] = -0.1, 0.2, 9.0          # key 4 (a label) tops; the last key is excluded
    e[1, 6] = 0.3                                         # key 7 (an item) tops in one run, not on average
    peak = ev.excess_peaks({"causal": e})["causal"]
    assert peak == ev.ExcessPeak(first=-0.1, top_key=4, top_is_label=True)
    e[:, 6] = 0.5
    assert ev.excess_peaks({"w": e})["w"] == ev.ExcessPeak(-0.1, 7, False)


def test_at_most_zero_phrase_reads_the_interval_and_the_verdict():
    row = ev.Claim("c", "x <= 0", 0.004, 0.009, "inconclusive", -1, 5, 2.78, 0.69)
    text = ev.at_most_zero_phrase(row, "The gap")
    assert text.startswith("The gap is +0.004 ± 0.009, 0.4 standard errors from zero")
    assert "-0.021 to +0.029, holds 0" in text and "reads inconclusive" in text
    assert "against the claim" in ev.at_most_zero_phrase(
        ev.Claim("c", "x <= 0", 0.1, 0.01, "contradicted", -1, 5, 2.78, 0.0), "The gap")
