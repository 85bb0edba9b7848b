"""posbias.book.scoreboard: the claim register judged on the committed paper-profile units."""
import pytest

from posbias.measures import evaluate as ev
from posbias.analysis import claims
from posbias.book import scoreboard as sb


@pytest.fixture(scope="module")
def board():
    return sb.build()


def test_the_board_is_the_register_judged_once(board):
    reg = claims.register()
    assert [j.entry.id for j in board.judged] == [e.id for e in reg.entries]
    direct = {j.entry.id: (j.status, j.holm, j.mean) for j in claims.judge_register()}
    assert {j.entry.id: (j.status, j.holm, j.mean) for j in board.judged} == direct
    t, h = board.totals(False), board.totals(True)
    assert sum(t[s] for s in claims.STATUSES) == t["total"] == len(reg.entries)
    # Holm over the whole register can only turn decided verdicts into inconclusive ones
    assert h["reproduced"] <= t["reproduced"] and h["contradicted"] <= t["contradicted"]
    assert all(j.holm in (j.status, "inconclusive") for j in board.judged)


def test_every_setting_is_committed_at_the_papers_settings(board):
    s = board.summary()
    assert s["units_committed"] == s["units_needed"] == 195       # Figure 5 and 6 share Figure 2's units
    assert s["holm_not_yet"] == 0 and s["tested"] == s["total"]
    assert {j.n_seeds for j in board.judged} == {5}
    # runs that repeat each other count once, and the critical value is the distinct runs'
    fewer = [j for j in board.judged if j.n_runs < 5]
    assert fewer and all(j.copies for j in fewer)
    assert all(abs(j.crit - ev.t_critical(j.n_runs)) < 1e-12 for j in board.judged)


def test_the_share_rule_is_shown_at_three_shares(board):
    tab = board.share_table()
    assert len(tab) == 3 and tab["share of ceiling"].str.contains("the rule").sum() == 1
    counts = tab["not converged"].tolist()
    assert counts == sorted(counts)                 # a higher share marks at least as many entries
    fig = board.figure_table()
    assert fig["claims"].sum() == len(board.judged)
    assert "Figure 5" in board.by_figure()


def test_hero_data_and_figure_from_committed_data():
    from posbias import figures

    h = sb.hero_data()
    mass = list(h.first_mass)
    assert mass[0] == pytest.approx(1 / h.n_tokens) and all(b > a for a, b in zip(mass, mass[1:20]))
    assert mass[-1] > 0.99 and h.uniform == 1 / h.n_tokens          # Theorem 4.1: the mass goes to token 1
    assert h.pes == ev.FIG2_PES and h.n_runs == 5 and h.n_networks == 15
    assert h.gap_mean[0] > 3 * h.gap_se[0]                           # No PE, 2 layers: first beats last
    fig = figures.hero_figure(h)
    assert len(fig.axes) == 3 and len(fig.axes[1].patches) == 3
    if h.sink_multiple is not None:
        assert len(h.sink_multiple) == len(fig.axes[2].patches) and max(h.sink_multiple) > 1


def test_the_readme_and_front_page_words_are_the_registers_counts(board):
    """The README's per-figure line is the one the scoreboard computes (a stale count fails here), and
    the front page glues each figure's words from the scoreboard rather than saying "reproduced"."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    assert board.readme_line() in (root / "README.md").read_text()
    # the README's sentences on retrieval, as the library writes them
    from posbias.analysis import learned
    assert learned.fig2_headline() in (root / "README.md").read_text()
    assert learned.others_headline() in (root / "README.md").read_text()
    intro = (root / "book" / "intro.md").read_text()
    assert "sb_fig2_retrieval" in intro
    assert all(f"sb_words_{n}" in intro for n in (2, 3, 4, 5, 6))
    assert "experiments, reproduced" not in intro
    phrase = board.figure_phrase("Figure 6")
    js = [j for j in board.judged if j.entry.figure == "Figure 6"]
    assert phrase.startswith(f"{sum(j.holm == 'reproduced' for j in js)} of {len(js)} claims reproduced")


def test_no_page_says_the_rules_came_before_the_data():
    """The register's rules were written after the networks were read: no page may say otherwise."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    pages = list((root / "notebooks").glob("*.md")) + list((root / "book").glob("*.md")) + [root / "README.md"]
    wrong = ("before it was run", "fixed in advance", "chosen before the verdicts", "written before the verdicts")
    said = [(p.name, w) for p in pages for w in wrong if w in p.read_text()]
    assert said == []


def _judged(entry, holm):
    return claims.Judged(entry, holm, holm)


def test_the_confirmatory_column_names_what_differs_and_counts_the_judged_only():
    """A board with two Figure 2 claims judged on fresh networks (one agrees, one does not), the rest
    not yet: the figure's words name the one that differs, the counts are of the two judged only."""
    reg = claims.register()
    f2 = reg.select(figure="Figure 2")
    a, b, rest = f2[0], f2[1], f2[2:]
    ex = [_judged(a, "reproduced"), _judged(b, "inconclusive")] + [_judged(e, "inconclusive") for e in rest]
    co = [_judged(a, "reproduced"), _judged(b, "contradicted")] + [_judged(e, claims.NOT_YET) for e in rest]
    board = sb.Scoreboard(tuple(ex), confirmatory=tuple(co), confirm_committed=15, confirm_needed=45,
                          partly_seen={b.id: ["decay|2"]}, confirm_units={"Figure 2": (15, 45)})
    words = board.confirm_words("Figure 2")
    assert words.startswith(f"2 of Figure 2's {len(f2)} claims are judged on them so far (Holm over the 2 entries "
                            "of the register judged yet): 1 reproduced, 1 contradicted, 0 inconclusive")
    assert "Holm's correction runs over the 2 judged so far" in board.confirm_phrase()
    assert board.disagreements("Figure 2") == [f"{b.id} (exploratory inconclusive, confirmatory contradicted)"]
    assert b.id in words and a.id not in words
    assert "1 of the judged rest partly on networks read before the freeze; Holm" in board.confirm_phrase()
    co[0].uncommitted, co[0].n_seeds = {"No PE|2": 5}, 5     # issue 95: its networks trained partly from a dirty tree
    assert ("1 of the judged rest partly on networks read before the freeze, 1 on networks trained partly from "
            "uncommitted code;") in board.confirm_phrase()
    tab = board.confirm_table()
    assert list(tab.columns) == ["claim", "figure", "exploratory", "confirmatory", "partly seen",
                                 "trained partly from uncommitted code", "agree"]
    assert tab["trained partly from uncommitted code"].tolist()[:2] == ["No PE|2 (5 of 5)", ""]
    co[0].uncommitted = {}
    row = board.confirm_figure_table().iloc[0]
    assert (row["judged"], row["reproduced (confirmatory)"], row["contradicted (confirmatory)"], row["agree"]) == \
        (2, 1, 1, 1)
    assert row["inconclusive (exploratory)"] == 1
    s = board.summary()
    assert (s["conf_judged"], s["conf_reproduced"], s["conf_contradicted"], s["conf_agree"]) == (2, 1, 1, 1)
    whole = sb.Scoreboard(tuple(ex), confirmatory=tuple(co[:2]) + tuple(_judged(e, "inconclusive") for e in rest),
                          confirm_units={"Figure 2": (45, 45)})
    assert whole.confirm_words("Figure 2").startswith(
        f"all {len(f2)} of Figure 2's claims are judged on them, its 45 networks all committed (Holm over the "
        f"{len(f2)} entries of the register judged yet, so a verdict can still move if more entries are judged): "
        f"1 reproduced, 1 contradicted, {len(rest)} inconclusive")
    one = sb.Scoreboard(tuple(ex), confirmatory=tuple(co[:1]), confirm_units={"Figure 2": (45, 45)})
    assert one.confirm_words("Figure 2").startswith("Figure 2's one claim is judged on them, its 45 networks all")
    partial = sb.Scoreboard(tuple(ex), confirmatory=whole.confirmatory, confirm_units={"Figure 2": (44, 45)})
    assert partial.confirm_words("Figure 2").startswith(
        f"{len(f2)} of Figure 2's {len(f2)} claims are judged on them so far")
    assert whole.confirm_waiting({"wu-fig-2": 20.4}) == "none"
    assert partial.confirm_waiting({"wu-fig-2": 20.4}) == "Figure 2 (44 of 45 networks, 20.4 core-hours in the plan; " \
        "0 claims wait)"
    assert board.confirm_waiting({"wu-fig-2": 20.4}) == (f"Figure 2 (15 of 45 networks, 20.4 core-hours in the plan; "
                                                        f"{len(rest)} claims wait)")
    empty = sb.Scoreboard(tuple(ex), confirmatory=tuple(_judged(e, claims.NOT_YET) for e in f2),
                          confirm_needed=45, confirm_units={"Figure 2": (0, 45)})
    assert empty.confirm_words("Figure 2") == ("no claim of Figure 2 is judged on them yet (0 of the 45 "
                                               "confirmation networks its claims need are committed)")
    assert empty.confirm_phrase().startswith("none yet: 0 of the 45 confirmation networks are committed")


def test_the_board_judges_the_frozen_register_on_confirmation_networks_only(board):
    from posbias.analysis.claims import confirm

    fz = confirm.frozen()
    assert [j.entry.id for j in board.confirmatory] == [e.id for e in fz.register().entries]
    assert board.confirm_needed == board.units_needed == 195          # the same design on seeds 5-9
    assert board.confirm_units["Figure 2"][1] == 45 and board.confirm_units["Figure 5"][1] == 5
    tab = board.confirm_table()
    assert len(tab) == len(fz.register().entries)
    # declared at the freeze: decay|2 seeds 5-9 were read by the budget study, so every Figure 2 entry
    # that reads decay|2 is partly seen, and no other
    on_decay2 = {e.id for e in fz.register().entries if e.campaign == "wu-fig-2" and "decay|2" in e.configs}
    assert set(tab.loc[tab["partly seen"] != "", "claim"]) == on_decay2 == set(board.partly_seen)
    assert all("decay|2" in v for v in board.partly_seen.values())


def test_the_absent_and_power_columns_partition_the_judged_claims(board):
    """Issue 94: every judged claim gets one of the four verdicts; absent only where the 90% interval lies inside
    the register's margin; one power row per judged claim, with 'floor' exactly where no number of runs can decide."""
    from posbias.analysis.claims import power

    c = board.absent_counts()
    assert sum(c[v] for v in power.VERDICTS) == c["total"] == len(board.judged)
    assert c["reproduced"] == board.totals(True)["reproduced"]
    tab = board.absent_table()
    margin = claims.register().judge.absent[0]
    tested = [(j, a) for j in board.judged if (a := power.absent(j)) is not None]
    assert len(tested) == len(tab) and all(j.holm == "inconclusive" for j, _ in tested)
    for j, a in tested:
        assert a["absent"] == (-margin < a["lower"] and a["upper"] < margin), j.entry.id
    assert (tab["verdict"] == "absent").sum() == c["absent"]
    figs = board.absent_figure_table()
    assert figs["absent"].sum() == c["absent"] and figs["claims"].sum() == c["total"]
    assert len(board.power) == sum(j.holm != claims.NOT_YET for j in board.judged)
    pt = board.power_table()
    assert ((pt["runs needed"] == "floor: none can") == [r["floor binds"] for r in board.power]).all()
    assert "floor binds" in board.power_words()
