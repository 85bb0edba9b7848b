"""The claim register: every quote is the paper's, one quantity is one claim, and the judge gives
the right verdicts on synthetic units with a known effect (present, absent, reversed)."""
from pathlib import Path

import pytest
import yaml

from posbias.analysis import claims
from posbias.analysis.claims import tables

PAPER = Path(__file__).resolve().parents[1].parent / "shared" / "papers" / "wu2025-emergence-of-position-bias.txt"
N_TEST = 10_000


def test_every_quote_is_in_the_papers_text():
    if not PAPER.is_file():
        pytest.skip(f"the paper's text is not beside this checkout ({PAPER})")
    reg = claims.register()
    assert claims.quotes_missing(reg, PAPER.read_text()) == []
    assert len(reg.entries) >= 50


def test_every_trained_network_sentence_is_covered():
    """The coverage list: each sentence is the paper's, each names entries of the register or why none,
    every register entry is listed under exactly one sentence, and its quote lies inside that sentence."""
    reg = claims.register()
    cov = tables.coverage()
    ids = [i for c in cov for i in c.get("entries", [])]
    assert sorted(ids) == sorted(e.id for e in reg.entries)                 # each entry once
    assert all(("entries" in c) != ("none" in c) for c in cov)
    quote = {e.id: claims.normalise(e.quote) for e in reg.entries}
    for c in cov:
        assert all(quote[i] in claims.normalise(c["sentence"]) for i in c.get("entries", [])), c["sentence"]
    if PAPER.is_file():
        text = claims.normalise(PAPER.read_text())
        assert [c["sentence"] for c in cov if claims.normalise(c["sentence"]) not in text] == []
    tab = tables.coverage_table(claims.judge_register())
    assert len(tab) == len(cov) and (tab["entries"] == 0).sum() == sum("none" in c for c in cov)


def test_a_quote_not_in_the_paper_is_found_missing():
    reg = claims.register()
    first = reg.entries[0]
    same = [e.id for e in reg.entries if claims.normalise(e.quote) == claims.normalise(first.quote)]
    text = " ".join(e.quote for e in reg.entries if e.id not in same)      # the first quote left out
    assert same and claims.quotes_missing(reg, text) == same
    spaced = first.quote.replace(" ", "\n  ")                              # whitespace does not matter
    assert claims.quotes_missing(reg, text + " " + spaced) == []


def _write(tmp_path, entries):
    raw = yaml.safe_load(claims.REGISTER.read_text())
    raw["claims"] = entries
    p = tmp_path / "reg.yml"
    p.write_text(yaml.safe_dump(raw, allow_unicode=True))
    return p


def _raw(id_):
    return next(e for e in yaml.safe_load(claims.REGISTER.read_text())["claims"] if e["id"] == id_)


def test_one_quantity_on_the_same_units_is_refused(tmp_path):
    a = _raw("fig2-nope-early-2")
    b = {**a, "id": "fig2-nope-early-2-again", "quote": "a second reading"}
    with pytest.raises(ValueError, match="same quantity"):
        claims.load(_write(tmp_path, [a, b]))
    # Figure 5's and Figure 6's causal sink is one measurement: the same units under two campaigns
    s = _raw("fig6-causal-first")
    dup = {**s, "id": "fig2-sink", "setting": {**s["setting"], "campaign": "wu-fig-5", "configs": ["causal|none"]},
           "args": {"config": "causal|none"},
           "second": {"label": "excess over uniform", "quantity": "sink_margin", "args": {"config": "causal|none"}}}
    with pytest.raises(ValueError, match="same quantity"):
        claims.load(_write(tmp_path, [s, dup]))


def test_a_register_refuses_bad_entries(tmp_path):
    a = _raw("fig2-nope-early-2")
    for bad, msg in [({**a, "quantity": "gapp"}, "unknown quantity"),
                     ({**a, "args": {"config": "No PE|2"}}, "takes"),
                     ({**a, "direction": ">= 0"}, "direction"),
                     ({**a, "setting": {**a["setting"], "residual": True}}, "residual"),
                     ({**a, "setting": {**a["setting"], "configs": ["No PE|3"]},
                       "args": {"config": "No PE|3", "pair": "first-last"}}, "not in campaign"),
                     ({**_raw("fig3-causal-nope-early"), "excludes": None}, "needs 'excludes'"),
                     ({**a, "direction": "< margin"}, "margin"),
                     ({**a, "margin": 0.05}, "margin"),
                     ({**_raw("fig3-causal-nope-not-last"), "margin": -0.05}, "positive"),
                     ({**_raw("fig6-causal-first"), "second": {**_raw("fig6-causal-first")["second"], "label": ""}},
                      "label"),
                     ({**_raw("fig6-causal-first"), "second": {**_raw("fig6-causal-first")["second"],
                                                                "direction": ">= 0"}}, "direction")]:
        with pytest.raises(ValueError, match=msg):
            claims.load(_write(tmp_path, [bad]))
    with pytest.raises(ValueError, match="two entries with this id"):
        other = {"config": "No PE|2", "larger": "first-last", "smaller": "middle-last"}
        claims.load(_write(tmp_path, [a, {**a, "quantity": "gap_contrast", "args": other}]))


# --------------------------------------------------------------------------- synthetic units

def _unit(gaps: dict[str, float], depth: int = 2, acc: float = 0.5, alpha1: float = 0.0):
    """A stored-unit stand-in with these three gaps (accuracies 0.5 +- gap/2) and final accuracy ``acc``."""
    ic = {}
    for pair, g in gaps.items():
        a, b = pair.split("-")
        ic[f"IC_{a}_{b}"], ic[f"IC_{b}_{a}"] = acc + g / 2, acc - g / 2
    curves = {"step": [0, 50, 100], **{k: [acc, acc, v] for k, v in ic.items()}, "loss": [0.0, 1.0, 1.0]}
    return {"params": {"n_test": N_TEST, "n_sweep": 2000, "n_sink": 10000, "depth": depth},
            "gaps": dict(gaps), "ic_accuracy": ic, "curves": curves}


def _seeds(fl: float, ml: float = 0.0, spread: float = 0.005, **kw):
    jitter = [-2, -1, 0, 1, 2]
    return [_unit({"first-middle": fl - ml, "first-last": fl + spread * j, "middle-last": ml}, **kw) for j in jitter]


def _judge(id_, units):
    reg = claims.register()
    (j,) = claims.judge([e for e in reg.entries if e.id == id_], {"wu-fig-2": units})
    return j


@pytest.mark.parametrize("effect,verdict", [(0.10, "reproduced"), (0.0, "inconclusive"), (-0.10, "contradicted")])
def test_a_known_effect_gets_its_verdict(effect, verdict):
    """The decay mask lowers No PE's first-vs-last gap: present (+0.10), absent (0), reversed (-0.10)."""
    units = {"No PE|2": _seeds(0.10), "decay|2": _seeds(0.10 - effect)}
    j = _judge("fig2-decay-reduces-2", units)
    assert j.status == verdict and j.holm == verdict
    assert j.mean == pytest.approx(effect, abs=1e-12) and j.n_runs == 5


def test_a_verdict_on_networks_trained_from_uncommitted_code_says_so_beside_it(tmp_path, monkeypatch):
    """Two of decay|2's five networks have a stored record with a sitting from a dirty tree (issue 95): the
    verdict is the same, and the entry says beside it, in the judge's record and in the table's networks
    column, which configuration's networks trained partly from uncommitted code and how many."""
    import json

    from posbias.storage import store
    from posbias.training.units import UNIT_EXPERIMENT, VERSION

    monkeypatch.setenv("POSBIAS_CACHE", str(tmp_path))
    units = {"No PE|2": _seeds(0.10), "decay|2": _seeds(0.0)}
    for i, u in enumerate(units["decay|2"]):
        u["params"] = {**u["params"], "seed": i}
    clean = _judge("fig2-decay-reduces-2", units)
    assert clean.uncommitted == {} and tables.uncommitted_words(clean) == ""
    for u in units["decay|2"][:2]:
        path = tmp_path / store.result_name(UNIT_EXPERIMENT, u["params"], VERSION)
        path.parent.mkdir(parents=True, exist_ok=True)
        sittings = [{"git": {"commit": "d" * 40, "dirty": True}}, {"git": {"commit": "a" * 40, "dirty": False}}]
        path.write_text(json.dumps({"params": u["params"], "provenance": {"sittings": sittings}}))
    j = _judge("fig2-decay-reduces-2", units)
    assert (j.status, j.mean) == (clean.status, clean.mean)             # descriptive: the verdict is the same
    assert j.uncommitted == {"decay|2": 2}
    assert tables.uncommitted_words(j) == "trained partly from uncommitted code: decay|2 (2 of 5)"
    assert tables.table([j])["networks"][0].endswith("; trained partly from uncommitted code: decay|2 (2 of 5)")


def _guarded(tmp_path, guard_effect: float):
    """Judge fig3-causal-nope-early on a main difference of +0.2 with its guard (causal No PE's own
    first-vs-last gap) at ``guard_effect``."""
    def unit(fl, k):
        return {**_unit({"first-middle": 0.0, "first-last": fl + 0.002 * k, "middle-last": 0.0}),
                "sweep_accuracy": [0.5] * 8}
    jit = [-2, -1, 0, 1, 2]
    units = {"causal|none": [unit(guard_effect, k) for k in jit],
             "full|none": [unit(guard_effect - 0.2, k) for k in jit]}
    for us in units.values():
        for u in us:
            u["params"]["target_slots"] = [0, 7]
    (j,) = claims.judge([e for e in claims.register().entries if e.id == "fig3-causal-nope-early"], {"wu-fig-3": units})
    return j


@pytest.mark.parametrize("guard_effect,verdict", [(0.1, "reproduced"), (0.0, "inconclusive"), (-0.1, "contradicted")])
def test_the_guard_rule(tmp_path, guard_effect, verdict):
    """The register's guard rule: the main quantity holds (+0.2) in all three cases; the guard holding
    gives reproduced, the guard undecided inconclusive, the guard significantly the other way
    contradicted (a guard can contradict, not only downgrade)."""
    j = _guarded(tmp_path, guard_effect)
    assert j.main_status == "reproduced" and j.mean == pytest.approx(0.2)
    assert j.guards[0][2] == verdict and j.status == verdict
    assert "significantly the other way makes the entry contradicted" in claims.register().judge.text["guards"]


def test_an_entry_without_its_units_is_not_yet_and_never_judged_on_others():
    units = {"No PE|4": _seeds(0.10), "decay|4": _seeds(0.0)}         # depth 4 only
    j = _judge("fig2-decay-reduces-2", units)
    assert (j.status, j.holm, j.mean, j.units_missing) == ("not yet", "not yet", None, ["No PE|2", "decay|2"])
    partial = {"No PE|2": _seeds(0.10), "decay|2": _seeds(0.0)[:4] + [None]}
    assert _judge("fig2-decay-reduces-2", partial).status == "not yet"


def test_holm_runs_over_every_entry_judged_together():
    reg = claims.register()
    es = [e for e in reg.entries if e.id in ("fig2-decay-reduces-2", "fig2-rope-reduces-2", "fig2-nope-early-2")]
    # three effects each just beyond t's critical value at 5 runs: reproduced alone, not all after Holm
    units = {"No PE|2": _seeds(0.10, spread=1e-7), "decay|2": _seeds(0.10 - 0.030, spread=1e-7),
             "RoPE|2": _seeds(0.10 - 0.030, spread=1e-7)}
    js = claims.judge(es, {"wu-fig-2": units})
    by = {j.entry.id: j for j in js}
    assert by["fig2-decay-reduces-2"].status == "reproduced" and by["fig2-decay-reduces-2"].holm == "inconclusive"
    assert by["fig2-nope-early-2"].holm == "reproduced"
    assert claims.counts(js)["reproduced"] == 1 and claims.counts(js, holm=False)["reproduced"] == 3


def test_convergence_is_a_column_not_a_verdict():
    """A network at 40% of the setting's ceiling is marked not converged, and still judged."""
    units = {"No PE|2": _seeds(0.10, acc=0.2), "decay|2": _seeds(0.0, acc=0.5), "RoPE|2": _seeds(0.0, acc=0.5)}
    j = _judge("fig2-decay-reduces-2", units)
    assert j.status == "reproduced" and j.share == pytest.approx(0.4) and j.converged is False
    assert claims.share_counts([j], 0.3) == {"reproduced": 0, "inconclusive": 0, "contradicted": 0, "not converged": 0}
    assert claims.share_counts([j], 0.5)["not converged"] == 1


def test_the_judge_is_written_before_the_claims():
    reg = claims.register()
    assert reg.judge.level == 0.05 and reg.judge.share == 0.9 and reg.judge.other_shares == (0.8, 0.95)
    head = claims.REGISTER.read_text().split("\nclaims:")[0]
    assert "Holm over every entry" in head and "paired by seed" in head


def test_the_residual_study_is_not_judged_against_claims_about_networks_without_residual():
    reg = claims.register()
    assert not [e for e in reg.entries if e.campaign == "wu-residual-depth"]
    assert all(not e.setting["residual"] for e in reg.select(campaign="wu-fig-2"))


def test_sink_entries_are_judged_on_the_papers_metric():
    """Appendix K.2 uses Gu et al.'s sink rate: every K.2 entry's quantity is a rate, with the excess
    over uniform attention as its named second reading, and every window and prefix the campaign
    trains appears in some entry."""
    from posbias.training.campaigns import units_of

    rates = {"sink_rate", "rate_margin", "rate_trend", "prefix_rate_margin", "prefix_rate_vs_causal"}
    k2 = [e for e in claims.register().entries if e.where.startswith("Appendix K.2")]
    assert k2 and all(e.quantity in rates for e in k2)
    assert all(e.second and e.second["label"] == "excess over uniform" for e in k2)
    trained = set(units_of("wu-fig-6", "paper", {}))
    assert trained == {c for e in k2 for c in e.configs}


def test_the_register_says_its_verdicts_are_exploratory():
    head = claims.REGISTER.read_text().split("\njudge:")[0]
    assert "exploratory" in head and "after" in head
    for key in ("guards", "distinct_runs", "absence", "metric", "shortcut"):
        assert claims.register().judge.text[key]


def test_a_two_seed_register_gives_the_t_computed_by_hand():
    """Two runs whose decay-mask contrast is 0.10 and 0.14 (issue 70, item 4): mean 0.12; the spread
    between runs sd^2 / n = 0.0008 / 2 and the contrast's binomial bound: two gaps, four accuracies of
    coefficient +-1 on distinct test sets of 10,000, 4 / (4 * 10,000); t = 0.12 / SE on one degree of
    freedom, its two-sided p from scipy, inconclusive at the 5% level (critical t 12.706)."""
    from scipy import stats as sps

    def unit(fl):
        return _unit({"first-middle": 0.0, "first-last": fl, "middle-last": 0.0})

    units = {"No PE|2": [unit(0.10), unit(0.14)], "decay|2": [unit(0.0), unit(0.0)]}
    j = _judge("fig2-decay-reduces-2", units)
    se = (0.0008 / 2 + 4 / (4 * N_TEST)) ** 0.5
    assert (j.n_runs, j.mean, j.se) == (2, pytest.approx(0.12, abs=1e-12), pytest.approx(se, rel=1e-9))
    assert j.p == pytest.approx(2 * sps.t.sf(0.12 / se, 1), rel=1e-6)
    assert j.crit == pytest.approx(sps.t.ppf(0.975, 1), rel=1e-6) and j.status == "inconclusive"
