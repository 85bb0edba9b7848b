"""posbias.scoreboard: every claim of every trained figure, judged or pending, accounted for."""
import math

import pytest

from posbias import evaluate as ev, scoreboard as sb

_NAMES = ["IC_first_middle", "IC_middle_first", "IC_first_last", "IC_last_first", "IC_middle_last", "IC_last_middle"]


def _unit(acc: dict[str, float], last_loss: float = 0.6, bump: float = 0.0) -> dict:
    acc = {k: v + bump for k, v in acc.items()}
    return {"ic_accuracy": acc, "gaps": {k: float(v) for k, v in ev.gaps(acc).items()},
            "curves": {"step": [0, 1, 2], "loss": [0.0, 3.4, last_loss], **{n: [a, a, a] for n, a in acc.items()}}}


def _fig3_stored(missing: int = 0, weak: str | None = None) -> dict:
    acc = {n: 0.45 for n in _NAMES}
    acc["IC_first_middle"], acc["IC_middle_last"] = 0.55, 0.40       # first over middle, last over middle
    out = {}
    for c in ev.FIG3_NAMES:
        us = [_unit(acc, 3.3 if c == weak else 0.6, bump=0.002 * s) for s in range(5)]
        out[c] = us
    out["full|none"][:missing] = [None] * missing
    return out


def test_expected_claims_count_every_figure():
    counts = {c: len(sb.expected_claims(c)) for c in sb.FIGURES}
    assert counts == {"wu-fig-2": 18, "wu-fig-3": 15, "wu-fig-4": 15, "wu-fig-5": 2, "wu-fig-6": 8,
                      "wu-residual-depth": 18}
    with pytest.raises(KeyError, match="no trained figure"):
        sb.expected_claims("wu-thm-4-1")


def test_a_complete_figure_is_judged_with_holm_and_learning():
    f = sb.figure_result("wu-fig-3", _fig3_stored(), {"n_test": 10000, "n_sink": 10000})
    assert (f.n_units, f.n_needed, len(f.claims)) == (30, 30, 15)
    c = {x.name: x for x in f.claims}
    first = c["causal-nope-first"]
    assert first.status == "reproduced" and math.isclose(first.mean, 0.1, abs_tol=1e-6)
    assert c["causal-nope-not-last"].status == "contradicted"       # last over middle is 0.05 > 0, claimed <= 0
    assert c["causal-nope-early"].status == "inconclusive"           # both masks have the same gaps
    assert c["causal-nope-first"].n_networks == 5 and c["causal-nope-early"].n_networks == 10
    assert all(x.holm in sb.STATUSES for x in f.claims) and f.n_tested == 15
    weak = sb.figure_result("wu-fig-3", _fig3_stored(weak="causal|none"), {"n_test": 10000, "n_sink": 10000})
    w = {x.name: x for x in weak.claims}
    assert w["causal-nope-first"].status == w["causal-nope-early"].status == "not comparable"
    assert w["causal-nope-early"].n_learned == 5 and w["full-sin-first"].status == "reproduced"
    assert weak.n_tested == 12 and sb.Scoreboard((weak,)).accounted() == []


def test_a_missing_unit_leaves_the_claims_that_read_it_pending_with_its_count():
    """Two full-mask No-PE runs missing: the claims comparing that configuration wait (as the chapter's
    measurable claims do), every other claim is judged exactly as on the complete figure."""
    f = sb.figure_result("wu-fig-3", _fig3_stored(missing=2), {"n_test": 10000, "n_sink": 10000})
    zero = lambda *_: ev.torch.zeros(1)  # noqa: E731
    reads = {name for name, _, used, *_ in ev.fig3_specs(zero, zero) if "full|none" in used}
    assert (f.n_units, f.n_needed) == (28, 30) and reads == {"causal-nope-early"}
    assert {x.name for x in f.claims if x.status == sb.PENDING} == reads
    whole = sb.figure_result("wu-fig-3", _fig3_stored(), {"n_test": 10000, "n_sink": 10000})
    same = {x.name: (x.status, x.mean) for x in whole.claims}
    assert all((x.status, x.mean) == same[x.name] for x in f.claims if x.name not in reads)
    board = sb.Scoreboard((f,), units_committed=28, units_needed=30)
    assert board.totals()[sb.PENDING] == 1 and board.totals()["total"] == 15 and board.accounted() == []
    t = board.table()
    assert (t.loc[t["verdict"] == sb.PENDING, "mean ± SE"] == "28 of 30 units committed").all()
    broken = sb.Scoreboard((sb.FigureResult("wu-fig-3", "Figure 3", 0, 30, f.claims[1:], f.expected),))
    assert broken.accounted() and "causal-nope-early" in broken.accounted()[0]


def test_a_depth_study_in_progress_judges_its_complete_depths():
    """The residual study with only depth 2 committed: that depth's five claims are judged (as the
    chapter's paper section judges them), the rest wait; with depths 2 and 10 the depth claims, which
    compare those two, are judged too, and depth 6's five still wait."""
    acc = {n: 0.45 for n in _NAMES}
    nope = {**acc, "IC_first_last": 0.55}                       # No PE prefers the first slot to the last

    def stored(done):
        return {f"{pe}|{d}": ([_unit(nope if pe == "No PE" else acc, bump=0.002 * s) for s in range(5)]
                              if d in done else [None] * 5) for pe in ev.FIG2_PES for d in (2, 6, 10)}

    n = {"n_test": 10000, "n_sink": 10000}
    f = sb.figure_result("wu-residual-depth", stored({2}), n)
    assert (f.n_units, f.n_needed, len(f.claims)) == (15, 45, 18)
    judged = {c.name: c for c in f.claims if c.status != sb.PENDING}
    assert set(judged) == {name for name, _ in sb.expected_claims("wu-residual-depth") if name.endswith("-2")}
    assert judged["nope-early-2"].status == "reproduced" and judged["nope-early-2"].n_networks == 5
    assert sb.Scoreboard((f,)).accounted() == []
    ends = sb.figure_result("wu-residual-depth", stored({2, 10}), n)
    waiting = {c.name for c in ends.claims if c.status == sb.PENDING}
    assert waiting == {name for name, _ in sb.expected_claims("wu-residual-depth") if name.endswith("-6")}
    assert {c.name: c.status for c in ends.claims}["depth-nope"] == "inconclusive"   # same gap at 2 and 10


def test_scoreboard_on_the_committed_paper_units():
    """Figure 2's 45 committed units (and Figure 5 on its depth-2 No-PE ones) are judged; the
    figures without paper-profile units are pending; every claim is accounted for."""
    board = sb.build(["wu-fig-2", "wu-fig-5", "wu-fig-3"])
    assert board.accounted() == []
    fig2, fig5, fig3 = board.figures
    assert (fig2.n_units, fig2.n_needed, len(fig2.claims)) == (45, 45, 18)
    assert all(c.status != sb.PENDING and c.n_runs == 5 for c in fig2.claims)
    st = {c.name: c for c in fig2.claims}
    assert st["depth-nope"].status == "not comparable" and st["nope-early-2"].status == "reproduced"
    assert abs(ev.t_critical(5) - st["nope-early-2"].crit) < 1e-12
    assert {c.status for c in fig5.claims} == {"contradicted"}       # issue 25 item 1: no first-token sink
    from posbias import train

    done = ev.coverage(train.stored_campaign("wu-fig-3", "paper")).complete     # judged as the chapter does
    measurable = {r.name for r in ev.fig3_measurable_claims(done, 10000)} if done else set()
    assert {c.name for c in fig3.claims if c.status != sb.PENDING} == measurable
    t = board.totals()
    assert sum(t[s] for s in sb.STATUSES) == t["total"] == 18 + 2 + 15
    s = board.summary()
    assert s["units_needed"] == 45 + 30 and s["units_committed"] >= 45  # Figure 5 shares Figure 2's units


def test_hero_data_and_figure_from_committed_data():
    from posbias import figures

    h = sb.hero_data()
    mass = list(h.first_mass)
    assert mass[0] == pytest.approx(1 / h.n_tokens) and all(b > a for a, b in zip(mass, mass[1:20]))
    assert mass[-1] > 0.99 and h.uniform == 1 / h.n_tokens          # Theorem 4.1: the mass goes to token 1
    assert h.pes == ev.FIG2_PES and h.n_runs == 5 and h.n_learned == h.n_networks == 15
    assert h.gap_mean[0] > 3 * h.gap_se[0]                           # No PE, 2 layers: first beats last
    fig = figures.hero_figure(h)
    assert len(fig.axes) == 3 and len(fig.axes[1].patches) == 3
    if h.sink_multiple is not None:
        assert len(h.sink_multiple) == len(fig.axes[2].patches) and max(h.sink_multiple) > 1
