"""posbias.measures.evaluate: gaps, sink metric and accuracies on hand-made inputs."""
import dataclasses

import pytest
import torch
from hypothesis import given, settings, strategies as st

from posbias.measures import evaluate as ev
from posbias.measures.evaluate import gaps, sink_alpha, sink_share
from posbias.science.task import accuracy
from posbias.science.masks import make_mask
from posbias.science.model import EnsembleNet, MemberConfig
from posbias.science.task import TaskConfig, ic_test_set, make_task


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


def test_rising_detects_accuracy_still_rising_beyond_its_noise():
    names = ["IC_first_middle", "IC_middle_first", "IC_first_last", "IC_last_first", "IC_middle_last", "IC_last_middle"]
    curve = lambda *a: [{"curves": {"step": list(range(len(a))), **{n: list(a) for n in names}}}] * 2  # noqa: E731
    assert ev.rising(curve(0.1, 0.3, 0.6), 1000) and not ev.rising(curve(0.1, 0.6, 0.6), 1000)
    assert not ev.rising(curve(0.1, 0.6, 0.55), 1000)                # falling is not rising
    # one evaluation interval's rise of 0.01 over 6 x 1000 sequences: 1.5 binomial SE, not beyond t(1 df)
    assert not ev.rising(curve(0.5, 0.51), 1000) and ev.rising(curve(0.5, 0.51), 10**7)
    assert not ev.rising(curve(0.5), 1000)                           # one evaluation: nothing to compare
    # the level is the one asked for: 1.5 SE is beyond t(1 df) at level 0.5 (1.0), not at 0.05 (12.7)
    assert ev.rising(curve(0.5, 0.51), 1000, level=0.5) and not ev.rising(curve(0.5, 0.51), 1000, level=0.05)
    # units stopped by a rule at different steps: each compared with its own previous evaluation
    ragged = curve(0.1, 0.3, 0.6)[:1] + [{"curves": {"step": [0, 1, 2, 3, 4], **{n: [0.1, 0.2, 0.3, 0.4, 0.7]
                                                                               for n in names}}}]
    assert ev.rising(ragged, 1000)
    assert not ev.rising(ragged[:1] + [{"curves": {"step": [0, 1, 2, 3], **{n: [0.1, 0.6, 0.6, 0.5]
                                                                         for n in names}}}], 1000)


def _unit(acc, loss=(0.0, 3.4, 3.2), gap_shift=0.0):
    from posbias.measures.evaluate import gaps
    g = {k: float(v) + gap_shift for k, v in gaps(acc).items()}
    return {"ic_accuracy": acc, "gaps": g, "params": {"depth": 2},
            "curves": {"step": [0, 1, 2], "loss": list(loss), **{n: [a, a, a] for n, a in acc.items()}}}


def test_training_sanity_passes_on_a_sound_unit_and_flags_each_defect():
    from posbias.measures.evaluate import training_sanity
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
    from posbias.measures.evaluate import loss_rose
    assert loss_rose([_unit(acc, loss=(0.0, 3.2, 3.0, 2.9)), _unit(acc, loss=(0.0, 3.2, 2.5, 3.4))]) == [1]
    assert training_sanity([_unit(acc)], 1024)["count_residual"] > 0.1                       # wrong set size
    assert training_sanity([_unit(acc, gap_shift=0.01)], 1000)["gap_residual"] > 0.009       # stale gaps
    at_chance = {n: 1 / 32 for n in names}
    assert abs(training_sanity([_unit(at_chance)], 1024)["z_chance"]) < 1e-9


def test_check_training_late_rise_ok_refuses_only_a_network_that_never_learned(fresh):
    from posbias.storage import report
    from posbias.measures.evaluate import check_training
    names = ["IC_first_middle", "IC_middle_first", "IC_first_last", "IC_last_first", "IC_middle_last", "IC_last_middle"]
    acc = {n: k / 1000 for n, k in zip(names, [300, 250, 280, 260, 270, 240])}
    sound, unstable, never = (_unit(acc, loss=L) for L in [(0.0, 3.2, 3.0, 2.9), (0.0, 3.2, 2.5, 3.4),
                                                           (0.0, 3.2, 3.3, 3.4)])
    verdicts = {}
    for prefix, units, ok in [("a-", [sound, unstable], False), ("b-", [sound, unstable], True),
                              ("c-", [sound, never], True)]:
        check_training(units, 1000, steps=1000, prefix=prefix, late_rise_ok=ok)
        verdicts[prefix] = next(c["passed"] for c in report.record()["checks"] if c["name"] == f"{prefix}loss-falls")
    assert verdicts == {"a-": False, "b-": True, "c-": False}
    assert report.record()["values"]["b_n_loss_rose"] == 1


def test_check_training_returns_and_glues_the_median_and_the_margin_over_chance(fresh):
    """Three sound networks with mean accuracies 0.2, 0.3 and 0.5 (all judged): the median is 0.3, the worst
    is 0.2 and its margin over chance is (0.2 - 1/32) / sqrt(p (1 - p) / (6 n_test)), p = 1/32."""
    from posbias.storage import report
    from posbias.measures.evaluate import check_training
    names = ["IC_first_middle", "IC_middle_first", "IC_first_last", "IC_last_first", "IC_middle_last", "IC_last_middle"]
    units = [_unit({n: a for n in names}, loss=(0.0, 3.2, 3.0, 2.9)) for a in (0.5, 0.2, 0.3)]
    s, values, p = check_training(units, 1000, steps=1000), report.record()["values"], 1 / 32
    z = (0.2 - p) / (p * (1 - p) / 6000) ** 0.5
    assert s["accuracy_median"] == pytest.approx(0.3, abs=1e-12) and values["acc_median"] == pytest.approx(0.3)
    assert values["acc_min"] == pytest.approx(0.2) and values["z_chance"] == pytest.approx(z, rel=1e-9)


def test_attention_residual_sees_mass_outside_the_mask():
    from posbias.measures.evaluate import attention_residual
    T = 5
    causal = make_mask("causal", T)
    uniform = causal.double() / causal.double().sum(-1, keepdim=True)
    assert attention_residual(uniform, causal) < 1e-12
    full = torch.full((T, T), 1 / T, dtype=torch.float64)
    assert abs(attention_residual(full, causal) - 1 / T) < 1e-12                           # leaks past the mask
    assert abs(attention_residual(0.5 * uniform, causal) - 0.5) < 1e-12                    # rows not stochastic


def test_uniform_sink_alpha_is_the_harmonic_baseline():
    from posbias.science.masks import causal_mask, sliding_window_mask

    T = 9
    harmonic = lambda n: sum(1 / i for i in range(1, n + 1))  # noqa: E731
    a = ev.uniform_sink_alpha(causal_mask(T))
    assert a.dtype == torch.float64 and a.shape == (T,)
    # key k is seen by queries k..T, query i spreads 1/i over its keys
    want = torch.tensor([(harmonic(T) - harmonic(k - 1)) / (T - k + 1) for k in range(1, T + 1)], dtype=torch.float64)
    assert torch.allclose(a, want, atol=1e-12, rtol=0)
    w = 3
    assert abs(float(ev.uniform_sink_alpha(sliding_window_mask(T, w))[0]) - harmonic(w) / w) < 1e-12


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


def test_fig2_table_rows_and_standard_errors():
    res = _fig2_results([2, 4])
    t = ev.fig2_table(res, [2, 4], 1000)
    assert list(t["PE"]) == list(ev.FIG2_PES) * 2 and list(t["depth"]) == [2, 2, 2, 4, 4, 4]
    m, se = ev.seed_mean_se(ev.stack(res["No PE|4"], "gaps", "first-last"), 1000)
    assert t.loc[3, "first-last"] == f"{m:+.3f} ± {se:.3f}" == "+0.040 ± 0.022"
    assert abs(t.loc[0, "accuracy"] - round((0.52 + 5 * 0.5) / 6, 3)) < 1e-12
    assert set(t["still rising"]) <= {"yes", "no"}          # words, not booleans, on a page
    assert ev.fig2_table(res, [], 1000).empty


def _sink_unit(attn: torch.Tensor, mask: torch.Tensor) -> dict:
    """A unit whose every layer (2) has the mean attention ``attn``."""
    alpha = ev.sink_alpha(attn, mask)
    return {"sink_alpha": [alpha.tolist()] * 2, "sink_share": (alpha > 0.3).double().tolist()}


def test_sink_summary_on_uniform_attention_and_on_a_first_token_sink():
    T = 6
    mask = make_mask("causal", T)
    uniform = mask.double() / mask.double().sum(-1, keepdim=True)
    s = ev.sink_summary([_sink_unit(uniform, mask)] * 2, mask)
    assert abs(s["alpha1"] - s["alpha1_unif"]) < 1e-12
    assert abs(s["alpha1_unif"] - sum(1 / i for i in range(1, 7)) / 6) < 1e-12          # H_T / T
    sink = torch.zeros(T, T, dtype=torch.float64)
    sink[:, 0] = 1.0                                      # every query on token 1
    s = ev.sink_summary([_sink_unit(sink, mask)] * 2, mask)
    assert s["alpha1"] == 1.0 and s["share1"] == 1.0 and s["share_other"] == 0.0
    last = sink.clone()
    last[-1] = 0.0
    last[-1, -1] = 1.0                                    # the last key sees only itself: never counted
    assert ev.sink_summary([_sink_unit(last, mask)], mask)["share_other"] == 0.0


def test_check_attention_records_fails_on_a_leak_and_on_stale_alpha(fresh):
    from posbias.storage import report

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


def _learning_unit(acc: float, last_loss: float):
    return _unit({n: acc for n in _NAMES}, loss=(0.0, 3.4, last_loss))


def test_check_training_judges_learning_only_where_networks_have_learned(fresh):
    """learning_judged: none below LEARNING_STEPS (a loss that rose by batch noise on the chance plateau is
    not a failure), those of depth <= LEARNING_DEPTH from it on, every one from PAPER_STEPS; each skip and
    partial judgement says why."""
    from posbias.storage import report
    flat = _unit({n: 31 / 1000 for n in _NAMES}, loss=(0.0, 3.466, 3.470))      # depth 2, at chance
    good = _learning_unit(0.5, 0.7)
    deep = {**flat, "params": {"depth": 16}}                 # at chance, as depth 16 is after 500 iterations
    ev.check_training([flat], 1000, steps=ev.LEARNING_STEPS - 1, prefix="a-")
    ev.check_training([flat], 1000, steps=ev.LEARNING_STEPS, prefix="b-")
    ev.check_training([good, deep], 1000, steps=ev.LEARNING_STEPS, prefix="c-")
    ev.check_training([good, deep], 1000, steps=ev.PAPER_STEPS, prefix="d-")
    ev.check_training([deep], 1000, steps=ev.LEARNING_STEPS, prefix="e-")
    rec = report.record()
    checks = {c["name"]: c["passed"] for c in rec["checks"]}
    for p in "ae":
        assert f"{p}-loss-falls" not in checks and f"{p}-above-chance" not in checks
        assert {f"{p}-loss-falls-skipped", f"{p}-above-chance-skipped"} <= set(rec["values"])
    assert "plateau" in rec["values"]["a-loss-falls-skipped"] and "depth 16" in rec["values"]["e-loss-falls-skipped"]
    assert checks["b-loss-falls"] is False and checks["b-above-chance"] is False
    assert checks["c-loss-falls"] is True and checks["c-above-chance"] is True
    assert "depth 16" in rec["values"]["c_learning_not_judged"] and rec["values"]["c_acc_min"] == 0.5
    assert checks["d-loss-falls"] is False and checks["d-above-chance"] is False


def test_learning_rule_holds_on_every_committed_run_it_judges():
    """The rule's evidence, recomputed from data/wu-units: every committed configuration judged at 1,000
    iterations (depth <= LEARNING_DEPTH) and at 100,000 (every depth) has its worst network beyond 3 SE
    above chance and its median at four times chance; at 1,000 iterations depth 6 without the residual
    does not, which is why it is not judged there."""
    import collections
    import json
    import statistics
    from pathlib import Path

    groups = collections.defaultdict(list)
    for rec in (json.loads(f.read_text()) for f in (Path(__file__).parents[1] / "data" / "wu-units").glob("*.json")):
        p, r = rec["params"], rec["result"]
        if p["steps"] in (ev.LEARNING_STEPS, ev.PAPER_STEPS):
            key = (p["steps"], p["depth"], p["residual"], p["pe"], p["mask"], p["window"], p["prefix"])
            groups[key].append((sum(r["ic_accuracy"].values()) / 6, p["n_test"]))
    judged = {k: v for k, v in groups.items() if k[0] == ev.PAPER_STEPS or k[1] <= ev.LEARNING_DEPTH}
    assert len(judged) >= 40
    for k, v in judged.items():
        acc, n = [a for a, _ in v], v[0][1]
        se = (1 / 32 * 31 / 32 / (6 * n)) ** 0.5
        assert (min(acc) - 1 / 32) / se > 3 and statistics.median(acc) >= 4 / 32, k
    deep = [statistics.median(a for a, _ in v) for k, v in groups.items()
            if k[:5] == (ev.LEARNING_STEPS, 6, False, "none", "causal")]
    assert deep and deep[0] < 4 / 32


def test_check_training_median_and_no_learned_threshold(fresh):
    """The median network must reach four times chance; how far networks learned is never a check
    (the register reports it beside each claim), however long they trained."""
    from posbias.storage import report
    good, weak = _learning_unit(0.5, 0.7), _learning_unit(0.1, 3.0)   # 0.1: 21 SE above chance at n_test 1000
    ev.check_training([good, weak, weak], 1000, steps=1000, prefix="a-")       # median 0.1 < 4/32
    ev.check_training([good, good, weak], 1000, steps=1000, prefix="b-")
    ev.check_training([good, weak, weak], 1000, steps=100_000, prefix="c-", gaps=False)
    checks = {c["name"]: c["passed"] for c in report.record()["checks"]}
    assert checks["a-above-chance"] is False and checks["b-above-chance"] is True
    assert checks["c-above-chance"] is False
    assert set(checks) == {f"{p}-{c}" for p in "abc" for c in ("loss-falls", "test-set-size", "above-chance")} | {
        "a-gaps-recomputed", "b-gaps-recomputed"}
    v = report.record()["values"]
    assert v["c_n_networks"] == 3 and abs(v["c_acc_median"] - 0.1) < 1e-12


def test_fig6_mask_reads_the_label():
    from posbias.science.masks import causal_mask

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
    measured once its three architectures are stored with every seed; the bars are the stored gaps;
    the paper's text says nothing of residual networks, so nothing is judged: the report describes."""
    import matplotlib.pyplot as plt
    import numpy as np

    from posbias import figures, training as train
    from posbias.analysis import claims, studies

    monkeypatch.setenv("POSBIAS_CACHE", str(fresh / "cache"))
    monkeypatch.delenv("POSBIAS_WRITE_DATA", raising=False)
    kw = dict(steps=20, eval_every=10, n_test=64, n_sweep=32, n_sink=32)
    stored = lambda seeds: train.stored_campaign("wu-residual-depth", "smoke", depths=[2, 6],  # noqa: E731
                                                 seeds=seeds, **kw)
    assert ev.complete_depths(ev.coverage(stored([0])).complete) == ([], {})     # nothing trained
    assert studies.ordering_sentence({}, [], kw["n_test"]) == "no depth is complete yet"
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

    assert not claims.register().select(campaign="wu-residual-depth")       # no claim of the paper here
    assert studies.depth_changes(pres, depths, kw["n_test"]) == []            # one depth: no change yet
    assert studies.trend_sentence(pres, depths, kw["n_test"]).startswith("fewer than two depths")
    order = studies.ordering_sentence(pres, depths, kw["n_test"])
    nope_fl = pres["No PE|2"][0]["gaps"]["first-last"]
    assert order.startswith("at 2 layers ") and f"No PE ({nope_fl:+.3f} ± " in order


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


def test_excess_peaks_find_the_first_token_and_the_top_key():
    e = torch.zeros(2, 17, dtype=torch.float64)
    e[:, 0], e[:, 3], e[:, 16] = -0.1, 0.2, 9.0          # key 4 (a label) tops; the last key is excluded
    e[1, 6] = 0.3                                         # key 7 (an item) tops in one run, not on average
    peak = ev.excess_peaks({"causal": e})["causal"]
    assert peak == ev.ExcessPeak(first=-0.1, top_key=4, top_is_label=True)
    e[:, 6] = 0.5
    assert ev.excess_peaks({"w": e})["w"] == ev.ExcessPeak(-0.1, 7, False)




# --- measurements against values computed another way (issue 70, item 4) ---------------------------


class _Constant:
    """A stand-in ensemble whose member ``e`` always answers label ``answers[e]``."""

    def __init__(self, answers, n_labels):
        self.answers, self.n_labels, self.n_members = answers, n_labels, len(answers)
        self.w_q = torch.zeros(1)

    def __call__(self, x):
        out = torch.zeros(x.shape[0], x.shape[1], self.n_labels)
        for e, a in enumerate(self.answers):
            out[e, :, a] = 1.0
        return out


def test_accuracy_is_the_share_of_targets_each_member_names_counted_by_hand():
    cfg = TaskConfig()
    ts = ic_test_set("first", "last", 23, 5, cfg)
    targets = [int(t) for t in ts.target]
    answers = [targets[0], targets[1], (targets[0] + 1) % cfg.n_labels]
    net = _Constant(answers, cfg.n_labels)
    got = accuracy(net, [make_task(0, cfg)] * 3, ts, chunk=7)        # chunks of 7, 7, 7, 2
    want = [sum(t == a for t in targets) / len(targets) for a in answers]
    assert got.tolist() == pytest.approx(want, abs=1e-7)


def test_the_u_is_the_lower_end_minus_the_middle_mean_by_hand():
    sweep = [[0.9, 0.4, 0.5, 0.6, 0.5, 0.4, 0.6, 0.8],      # a U: min(0.9, 0.8) - 3.0 / 6 = 0.3
             [0.3, 0.7, 0.7, 0.7, 0.7, 0.7, 0.7, 0.9]]      # an arch: 0.3 - 0.7 = -0.4
    assert ev.u_statistic(torch.tensor(sweep, dtype=torch.float64)).tolist() == pytest.approx([0.3, -0.4], abs=1e-12)


def test_sink_share_counts_sequences_and_layers_whose_alpha_passes_the_threshold_by_hand():
    """Two layers, two sequences, three tokens, causal: key k's alpha is the mean of column k over the
    queries that see it. Per (layer, sequence) map, alpha = (key 0, key 1, key 2):
    a (2.8/3, 0.075, 0.05), b (1/3, 0.75, 0.5), c (1/3, 0.5, 1), d (1/3, 1, 0). Above 0.3: key 0 in 4 of 4,
    key 1 in 3 (b, c, d), key 2 in 2 (b, c); above 0.34 key 0 only in a."""
    T = 3
    mask = make_mask("causal", T)
    a = [[1, 0, 0], [0.9, 0.1, 0], [0.9, 0.05, 0.05]]
    b = [[1, 0, 0], [0.0, 1.0, 0], [0.0, 0.5, 0.5]]
    c = [[1, 0, 0], [0.0, 1.0, 0], [0.0, 0.0, 1.0]]
    d = [[1, 0, 0], [0.0, 1.0, 0], [0.0, 1.0, 0.0]]
    attn = torch.tensor([[a, b], [c, d]], dtype=torch.float64)                  # (layers, sequences, T, T)
    assert sink_share(attn, mask).tolist() == pytest.approx([1.0, 0.75, 0.5])
    assert sink_share(attn, mask, threshold=0.34).tolist() == pytest.approx([0.25, 0.75, 0.5])


def test_training_sanity_and_loss_rose_against_hand_values():
    """A unit whose loss is 1.0 over the first interval, 0.5 over the second and 0.8 at the end: it fell
    (loss_drop 0.2, best_drop 0.5) and did not end above its first interval (loss_rose is empty; the
    second interval is not the first). Its worst accuracy 0.25 against chance 1/32 over 6 x 1,000
    sequences: z = (0.25 - 1/32) / sqrt((1/32)(31/32) / 6000)."""
    ic = {f"IC_{a}_{b}": 0.25 for a in ("first", "middle", "last") for b in ("first", "middle", "last") if a != b}
    unit = {"curves": {"step": [0, 10, 20, 30], "loss": [3.4, 1.0, 0.5, 0.8]}, "ic_accuracy": ic,
            "gaps": {"first-middle": 0.0, "first-last": 0.0, "middle-last": 0.0}}
    s = ev.training_sanity([unit], 1000)
    assert (s["loss_drop"], s["best_drop"], s["n_loss_rose"]) == (pytest.approx(0.2), pytest.approx(0.5), 0.0)
    z = (0.25 - 1 / 32) / ((1 / 32) * (31 / 32) / 6000) ** 0.5
    assert s["z_chance"] == pytest.approx(z, rel=1e-9) and s["chance"] == 1 / 32
    assert ev.loss_rose([unit]) == [] and ev.loss_rose([{"curves": {"loss": [3.4, 1.0, 0.5, 1.2]}}]) == [0]


def test_training_sanity_with_one_interval_has_no_later_best():
    """With evaluations at step 0 and one more only, there is no later interval: best_drop is the drop
    from the first interval to the last, the same interval, 0."""
    ic = {f"IC_{a}_{b}": 0.25 for a in ("first", "middle", "last") for b in ("first", "middle", "last") if a != b}
    unit = {"curves": {"step": [0, 10], "loss": [3.4, 1.0]}, "ic_accuracy": ic,
            "gaps": {"first-middle": 0.0, "first-last": 0.0, "middle-last": 0.0}}
    s = ev.training_sanity([unit], 1000)
    assert (s["loss_drop"], s["best_drop"]) == (0.0, 0.0)


def test_rising_reads_the_curves_in_float64():
    """A rise of 2^-26 (1.5e-8) from 0.5 over 6 x 10^16 sequences: the binomial SE is
    sqrt(0.5 / 6e16) = 2.9e-9, so one unit's rise is 5.2 SE, beyond the normal 1.96 (one run): rising.
    Read in float32 (torch's default dtype for Python floats), 0.5 + 2^-26 rounds to 0.5 (a quarter of
    float32's spacing 2^-24 there), the rise is 0 and the networks would be called not rising."""
    names = ["IC_first_middle", "IC_middle_first", "IC_first_last", "IC_last_first", "IC_middle_last", "IC_last_middle"]
    unit = {"curves": {"step": [0, 1], **{n: [0.5, 0.5 + 2 ** -26] for n in names}}}
    assert torch.tensor(0.5 + 2 ** -26, dtype=torch.float32).item() == 0.5    # the case float32 loses
    assert ev.rising([unit], 10 ** 16)
    assert not ev.rising([unit], 10 ** 15)     # SE 9.1e-9: 1.6 SE, within the noise
