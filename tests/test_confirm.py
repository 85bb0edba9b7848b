"""The confirmatory judge (posbias/analysis/claims/confirm.py): the frozen register only, fresh seeds only,
units trained after the freeze only; and the committed freeze precedes every confirmation unit."""
import dataclasses
import subprocess
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
import torch

from posbias.analysis import claims
from posbias.book.chapters import ParamError
from posbias.analysis.claims import confirm
from posbias.training import campaigns
from posbias.training.units import CONFIRM_TEST_SEED, SINK_SEED, TEST_SEED, Unit, unit_key

from test_claims import _seeds

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture
def frozen_copy(tmp_path):
    """A freeze of today's register in a temporary file, dated an hour ago."""
    path = tmp_path / "frozen.yml"
    return path, confirm.freeze(path, now=datetime.now(timezone.utc) - timedelta(hours=1))


def _fake_lookup(units_by_seed, started):
    """A ``lookup_record`` that returns, for a unit of wu-fig-2's No PE|2 and decay|2, the synthetic
    unit of its seed with a provenance whose training began at ``started``; None for every other unit."""
    def lookup_record(u: Unit):
        label = "decay|2" if u.config.mask == "decay" else ("No PE|2" if u.config.pe == "none" else None)
        if u.depth != 2 or label is None or u.target_slots is not None or u.config.residual:
            return None
        res = dict(units_by_seed[label][u.seed - 5])
        res["params"] = {**u.params(), **res["params"]}
        return {"params": u.params(), "result": res,
                "provenance": {"started": started.isoformat(), "sittings": [{"started": started.isoformat()}]}}
    return lookup_record


def test_the_frozen_copy_round_trips_and_is_never_rewritten(frozen_copy):
    path, fz = frozen_copy
    assert fz.text == claims.REGISTER.read_text() and fz.register() == claims.register()
    assert fz.test_seed == CONFIRM_TEST_SEED and fz.first_seed == 5
    assert fz.seen == {"wu-fig-2 decay|2": (5, 6, 7, 8, 9)}
    e = next(e for e in fz.register().entries if e.id == "fig2-decay-reduces-2")
    assert fz.partly_seen(e) == ["decay|2"]
    assert fz.partly_seen(next(e for e in fz.register().entries if e.campaign == "wu-fig-6")) == []
    with pytest.raises(confirm.ConfirmationError, match="never rewritten"):
        confirm.freeze(path)


def test_an_edited_frozen_register_is_refused(frozen_copy):
    path, _ = frozen_copy
    path.write_text(path.read_text().replace("level: 0.05", "level: 0.10"))
    with pytest.raises(confirm.ConfirmationError, match="no longer matches"):
        confirm.frozen(path)


def test_a_label_with_spaces_reads_back_and_a_header_without_its_date_is_refused(frozen_copy, monkeypatch):
    path, _ = frozen_copy
    spaced = path.with_name("spaced.yml")
    monkeypatch.setattr(confirm, "SEEN", {"wu-fig-2": {"No PE|2": (5, 6)}})
    assert confirm.freeze(spaced).seen == {"wu-fig-2 No PE|2": (5, 6)}
    path.write_text("\n".join(ln for ln in path.read_text().splitlines() if not ln.startswith("# frozen_at")) + "\n")
    with pytest.raises(confirm.ConfirmationError, match="header lacks frozen_at"):
        confirm.frozen(path)


def test_a_register_that_differs_from_the_frozen_one_gets_no_confirmatory_verdict(frozen_copy, monkeypatch):
    path, fz = frozen_copy
    monkeypatch.setattr(campaigns, "lookup_record", lambda u: None)     # no stored unit: every entry waits
    changed = fz.text.replace("level: 0.05", "level: 0.10")
    with pytest.raises(confirm.ConfirmationError, match="differs from the one frozen"):
        confirm.judge_confirmatory(changed, path=path)
    other = claims.load(text=changed)
    with pytest.raises(confirm.ConfirmationError, match="differs from the one frozen"):
        confirm.judge_confirmatory(other, path=path)
    assert all(j.holm == claims.NOT_YET for j in confirm.judge_confirmatory(fz.text, path=path))


def test_seeds_below_five_and_other_test_draws_never_enter(frozen_copy):
    path, _ = frozen_copy
    with pytest.raises(confirm.ConfirmationError, match="seed 4: below the first confirmation seed 5"):
        confirm.judge_confirmatory(path=path, seeds=[4, 5, 6, 7, 8])
    with pytest.raises(confirm.ConfirmationError, match=f"test draw {TEST_SEED}"):
        confirm.judge_confirmatory(path=path, test_seed=TEST_SEED)


def test_units_trained_before_the_freeze_are_refused_and_after_it_judged(frozen_copy, monkeypatch):
    """Synthetic confirmation units with a known effect (the decay mask lowers No PE's first-last gap
    by 0.10): refused when their training began before the freeze, and judged, with the verdict the
    exploratory judge gives the same units, when it began after."""
    path, fz = frozen_copy
    units = {"No PE|2": _seeds(0.10), "decay|2": _seeds(0.0)}
    monkeypatch.setattr(campaigns, "lookup_record", _fake_lookup(units, fz.frozen_at - timedelta(minutes=1)))
    with pytest.raises(confirm.ConfirmationError, match="before the freeze"):
        confirm.judge_confirmatory(path=path)
    undated = _fake_lookup(units, fz.frozen_at)
    monkeypatch.setattr(campaigns, "lookup_record", lambda u: (lambda r: r and {**r, "provenance": {}})(undated(u)))
    with pytest.raises(confirm.ConfirmationError, match="records no start of training"):
        confirm.judge_confirmatory(path=path)
    monkeypatch.setattr(campaigns, "lookup_record", _fake_lookup(units, fz.frozen_at + timedelta(minutes=1)))
    got = confirm.confirmation_units(fz, ["wu-fig-2"])
    assert got["wu-fig-2"]["No PE|4"] == [None] * 5
    assert got["wu-fig-2"]["decay|2"][0]["gaps"] == units["decay|2"][0]["gaps"]
    frozen_reg = fz.register()
    pick = [e for e in frozen_reg.entries if e.id in ("fig2-decay-reduces-2", "fig2-depth-nope-first-middle")]
    js = {j.entry.id: j for j in claims.judge(pick, got, reg=frozen_reg)}
    j = js["fig2-decay-reduces-2"]
    assert j.status == "reproduced" and j.mean == pytest.approx(0.10, abs=1e-12) and j.n_runs == 5
    assert js["fig2-depth-nope-first-middle"].holm == claims.NOT_YET       # depth 4 and 6 are not stored


def test_agreement_compares_verdicts_after_holm():
    reg = claims.register()
    e1, e2, e3 = reg.entries[:3]
    ex = [claims.Judged(e1, "reproduced", "reproduced"), claims.Judged(e2, "inconclusive", "inconclusive")]
    co = [claims.Judged(e1, "reproduced", "reproduced"), claims.Judged(e2, "reproduced", "contradicted"),
          claims.Judged(e3, claims.NOT_YET, claims.NOT_YET)]
    co[1].uncommitted, co[1].n_seeds = {"decay|2": 5}, 5
    rows = confirm.agreement(ex, co, seen=lambda e: ["decay|2"] if e is e2 else [])
    assert [r["agree"] for r in rows] == [True, False, None]
    assert [r["partly seen"] for r in rows] == ["", "decay|2", ""]
    assert [r["uncommitted code"] for r in rows] == ["", "decay|2 (5 of 5)", ""]
    assert rows[2]["exploratory"] == "(not in the register)"


def test_a_confirmation_unit_draws_fresh_test_sequences():
    """The confirm profile's units: seeds 5-9, the fresh test draw (another key, other IC sets, sweep and
    attention batches), the paper's settings; the exploratory units keep their keys and draws."""
    from posbias.science.task import TaskConfig
    from posbias.training.units import test_sets

    paper = campaigns.units_of("wu-fig-2", "paper", {})["No PE|2"][0]
    conf = campaigns.units_of("wu-fig-2", "confirm", {})["No PE|2"][0]
    assert paper.params()["test_seed"] == TEST_SEED and paper.sink_seed == SINK_SEED
    assert conf.test_seed == CONFIRM_TEST_SEED and conf.sink_seed != SINK_SEED and conf.seed == 5
    assert {k: v for k, v in conf.params().items() if k not in ("seed", "test_seed")} == \
        {k: v for k, v in paper.params().items() if k not in ("seed", "test_seed")}
    assert Unit.from_params(conf.params()) == conf and conf.shape_key() != paper.shape_key()
    cfg = TaskConfig()
    (ic0, sw0), (ic1, sw1) = test_sets(16, 8, cfg), test_sets(16, 8, cfg, CONFIRM_TEST_SEED)
    name = sorted(ic0)[0]
    assert not torch.equal(ic0[name].items, ic1[name].items) and not torch.equal(sw0[0].items, sw1[0].items)
    assert torch.equal(ic0[name].items, test_sets(16, 8, cfg, TEST_SEED)[0][name].items)
    with pytest.raises(ParamError, match="no parameter 'test_seed'"):    # the budget study reads the fixed draw
        campaigns.units_of("wu-bias-over-training", "budget", {"test_seed": CONFIRM_TEST_SEED})


def test_the_committed_freeze_precedes_every_confirmation_unit():
    """The committed frozen register verifies, and every committed confirmation unit trained after it:
    the judge accepts them (no refusal), and where git history is here, the commit that added the
    frozen file is an ancestor of every commit a confirmation unit records."""
    fz = confirm.frozen()
    assert fz.first_seed == 5 and fz.test_seed == CONFIRM_TEST_SEED
    confirm.judge_confirmatory()                                # raises on a unit the freeze does not allow
    git = subprocess.run(["git", "log", "--no-renames", "--diff-filter=A", "--format=%H", "--",
                          "posbias/analysis/claims/wu2025.frozen.yml", "posbias/claims/wu2025.frozen.yml"],
                         cwd=ROOT, capture_output=True, text=True)
    if git.returncode != 0 or not git.stdout.strip():
        pytest.skip("no git history here to order the freeze and the units")
    freeze_commit = git.stdout.split()[-1]
    commits, stored = set(), 0
    for c in ("wu-fig-2", "wu-fig-5", "wu-fig-6"):
        for us in campaigns.units_of(c, "confirm", {}).values():
            for u in us:
                rec = campaigns.lookup_record(u)
                if rec is None:
                    continue
                stored += 1
                mine = {(s.get("git") or {}).get("commit") for s in rec["provenance"].get("sittings") or []} - {None}
                assert mine, f"confirmation unit {unit_key(u)} records no commit for any of its sittings"
                commits |= mine
    if not stored:
        pytest.skip("no confirmation unit is stored yet: nothing to order against the freeze")
    for c in commits:
        anc = subprocess.run(["git", "merge-base", "--is-ancestor", freeze_commit, c], cwd=ROOT)
        assert anc.returncode == 0, f"a confirmation unit trained at {c}, which does not descend from the freeze"


def test_the_plan_prices_each_new_unit_once_at_its_depths_pace():
    """At 10 ms per member-step everywhere a 100,000-step unit costs 1,000 s: Figure 2's 45 units are
    12.5 core-hours; Figure 5's five are Figure 2's (none new, 0 h); Figure 6 adds 30 (8.3 h)."""
    bench = {"depths": {str(d): {"ensemble_step_s": 0.15, "members": 15} for d in (2, 4, 6)}}
    rows = {r["campaign"]: r for r in confirm.plan(bench)}
    assert (rows["wu-fig-2"]["units"], rows["wu-fig-2"]["new units"], rows["wu-fig-2"]["core-hours"]) == (45, 45, 12.5)
    assert (rows["wu-fig-5"]["new units"], rows["wu-fig-5"]["core-hours"]) == (0, 0)
    assert (rows["wu-fig-6"]["units"], rows["wu-fig-6"]["new units"], rows["wu-fig-6"]["core-hours"]) == (35, 30, 8.3)
    with pytest.raises(ValueError, match="no pace at depth"):
        confirm.plan({"depths": {"2": {"ensemble_step_s": 0.15, "members": 15}}})


def test_code_changes_name_each_file_whose_hash_moved_since_the_freeze(frozen_copy):
    _, fz = frozen_copy
    assert confirm.code_changes(fz) == [] and confirm.code_change_log(fz) == {}
    moved = dataclasses.replace(fz, code={**fz.code, "posbias/measures/stats.py": "0" * 64})
    assert confirm.code_changes(moved) == ["posbias/measures/stats.py"]
    # the committed freeze names the files where they were before issue 97 moved them: read through AT_FREEZE
    before = dataclasses.replace(fz, code={confirm.AT_FREEZE[p]: h for p, h in fz.code.items()})
    assert confirm.code_changes(before) == []
    before.code["posbias/stats.py"] = "0" * 64
    assert confirm.code_changes(before) == ["posbias/measures/stats.py"]


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="needs the repository's git history")
def test_code_change_log_gives_the_commits_since_the_freeze_oldest_first():
    log = confirm.code_change_log()
    assert "posbias/analysis/claims/__init__.py" in log
    first = log["posbias/analysis/claims/__init__.py"][0]
    assert first.endswith(" claims: the package no longer re-exports its tables; no import cycle")
    # issue 97 moved the file: the log reads its history at both paths, and names the commit that moved it
    commits = log["posbias/analysis/claims/__init__.py"]
    assert len([c for c in commits if c.split(" ", 1)[1].startswith("house: the library")]) == 1 and len(commits) > 2


def test_live_differences_name_the_rules_and_entries_that_moved():
    import dataclasses

    import yaml

    fz = confirm.frozen()
    live = yaml.safe_load(confirm.REGISTER.read_text())
    same = dataclasses.replace(fz, text=confirm.REGISTER.read_text())
    assert confirm.live_differences(same) == []
    old = dict(live, judge={k: v for k, v in live["judge"].items() if k != "absent"},
               claims=[dict(live["claims"][0], direction="< 0")] + live["claims"][2:])
    got = confirm.live_differences(dataclasses.replace(fz, text=yaml.safe_dump(old)))
    assert got == ["judge rule absent added", f"entry {live['claims'][1]['id']} added",
                   f"entry {live['claims'][0]['id']} changed"]
