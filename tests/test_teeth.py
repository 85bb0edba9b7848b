"""posbias.book.teeth: the committed mutation results as the book reads them."""
import json
from pathlib import Path

from posbias.book.teeth import mutmut_frame, sample_result, standing_counts

DIFF = "--- a\n+++ b\n@@ -1 +1 @@\n-    x = 1\n+    x = 2\n"


def test_a_survivors_standing_counts_a_kill_only_where_mutmut_confirms_it(tmp_path):
    """Five survivors: argued equivalent; killed by a named test and confirmed by mutmut run again;
    a named test that mutmut, run again, does not confirm; code removed; nothing said."""
    run = {"date": "2026-12-03", "tested": 5, "killed": 0, "survivors": {f"m{i}": DIFF for i in range(5)},
           "equivalent": {"m0": "same numbers"},
           "killed_by_unit_tests": {"m1": "tests/test_x.py::t1", "m2": "tests/test_x.py::t2"},
           "removed": {"m3": "branch gone"},
           "reruns": [{"mutants": {"m1": {"as": "m1", "status": "survived"}}},
                      {"mutants": {"m1": {"as": "m1", "status": "killed"}, "m2": {"as": "m2", "status": "survived"},
                                   "m3": {"as": None, "status": "code removed"}}}]}
    path = tmp_path / "run.json"
    path.write_text(json.dumps(run))
    summary, frame = mutmut_frame(path)
    status = dict(zip(frame["mutant"], frame["status"]))
    assert status["m0"] == "equivalent: same numbers"
    assert status["m1"] == "killed since: tests/test_x.py::t1 (mutmut, run again: killed)"      # the latest rerun
    assert status["m2"].startswith("not explained: mutmut, run again, says survived")
    assert status["m3"] == "code removed since: branch gone" and status["m4"] == "not explained"
    assert set(frame["change"]) == {"x = 1 / x = 2"} and summary["tested"] == 5 and "reruns" not in summary
    assert mutmut_frame(tmp_path / "absent.json") is None


def test_the_sample_by_chapter_counts_what_each_smoke_run_reaches_and_what_lived(tmp_path):
    from posbias.book.cite import _sampled_note
    from posbias.book.teeth import sampled_by_chapter

    run = {"date": "2026-12-03", "tested": 4, "killed": 2, "score": 0.5, "score_95": [0.15, 0.85], "seed": 7,
           "survivors": {"m2": DIFF, "m3": DIFF}, "equivalent": {"m2": "same"}, "killed_by_unit_tests": {},
           "reach": {"ch-a": ["m0", "m2", "m3"], "ch-b": ["m1"]}}
    path = tmp_path / "run.json"
    path.write_text(json.dumps(run))
    summary, per = sampled_by_chapter(path)
    assert summary["seed"] == 7 and summary["score"] == 0.5
    assert per["ch-a"] == {"reached": 3, "survived": 2, "unit": 0, "equivalent": 1, "removed": 0, "open": 1}
    assert per["ch-b"]["survived"] == 0
    assert _sampled_note(per["ch-a"]) == ["Sampled mutants (`make mutants`): 3 reach this chapter's smoke run; "
                                          "1 were killed at the run, 2 survived it (1 equivalent, 1 open).", ""]
    assert _sampled_note(None) == [] and sampled_by_chapter(tmp_path / "none.json") is None


def test_sample_result_states_the_run_and_its_triage(tmp_path):
    """The notes' sentence for a later sample: the run's counts and score from the file, the target
    compared, and the triage counted from the file's own triage keys; absent file: not run yet."""
    path = Path(__file__).resolve().parents[1] / "data" / "mutants" / "mutmut-3.json"
    d = json.loads(path.read_text())
    text = sample_result(path, 0.90, "data/mutants/mutmut-3.json")
    assert text.startswith(f"{d['killed']} of {d['tested']} killed (") and f"a score of {d['score']:.3f}" in text
    assert "short of the 90% asked for" in text and "at or above the 85% asked for" in sample_result(path, 0.85, "x")
    assert (f"Of its {len(d['survivors'])} survivors" in text
            and f"{len(d['killed_by_unit_tests'])} are killed since" in text
            and f"{len(d['equivalent'])} argued equivalent and 0 not explained" in text)
    assert sample_result(tmp_path / "none.json", 0.9, "book/x.json") == "not run yet (`book/x.json` is absent)"


def test_sample_runs_lists_the_committed_samples_in_declared_order_and_the_status_page_shows_each(
        tmp_path, monkeypatch):
    """Two of the declared samples committed (the first and the third): both listed, in the Makefile's
    order, with whether each says which chapters reach it; the Status page prints a line per sample and
    reads the chapters' counts from the latest sample that has them."""
    from posbias.book import cite, teeth

    def run(score, seed, reach=None):
        return {"date": "2026-12-03", "commit": f"c{seed}", "tested": 4, "killed": int(4 * score), "score": score,
                "score_95": [score - 0.2, score + 0.1], "seed": seed, "survivors": {"m9": DIFF},
                **({"reach": reach} if reach else {})}

    (tmp_path / "mutmut-3.json").write_text(json.dumps(run(0.75, 3, {"ch-a": ["m9", "m1"]})))
    (tmp_path / "mutmut-400.json").write_text(json.dumps(run(0.5, 1)))
    runs = teeth.sample_runs(tmp_path)
    assert [(t, r["seed"], r["has_reach"]) for t, r in runs] == [("mutants", 1, False), ("mutants-3", 3, True)]
    monkeypatch.setattr(cite, "TEETH_PATH", tmp_path / "teeth.json")
    monkeypatch.setattr(cite, "sample_runs", lambda: runs)
    page = cite.status_page({"ch-a": {"checks": [], "profile": "smoke", "status": "ok",
                                      "provenance": {"wall_seconds": 1}}}, "smoke")
    assert "- `make mutants` (seed 1, 2026-12-03, sources and tests of c1): 2 of 4, 0.500 (0.300 to 0.600)" in page
    assert "- `make mutants-3` (seed 3, 2026-12-03, sources and tests of c3): 3 of 4, 0.750" in page
    assert ("Sampled mutants (`make mutants-3`): 2 reach this chapter's smoke run; 1 were killed at the run, "
            "1 survived it (1 open).") in page


def test_sample_result_says_when_the_interval_reaches_below_a_bar_the_score_meets(tmp_path):
    """A score at the bar whose 95% interval reaches below it is said to be so; one whose interval
    lies above the bar, or a score short of it, is not."""
    run = {"date": "d", "machine": "m", "commit": "c", "tested": 400, "killed": 361, "score": 0.9025,
           "score_95": [0.869, 0.928], "survivors": {}}
    path = tmp_path / "run.json"
    path.write_text(json.dumps(run))
    caveat = "(its interval reaches below it: the run does not exclude a true score under the bar)"
    assert f"at or above the 90% asked for {caveat}. Of its 0 survivors" in sample_result(path, 0.90, "x")
    assert caveat not in sample_result(path, 0.86, "x") and caveat not in sample_result(path, 0.95, "x")


def test_every_mutant_sample_the_makefile_declares_is_listed_in_samples():
    """A sample declared in the Makefile but missing from teeth.SAMPLES would never reach the Status page."""
    import re

    from posbias.book.teeth import SAMPLES

    makefile = (Path(__file__).resolve().parents[1] / "Makefile").read_text()
    targets = set(re.findall(r"^(mutants(?:-\d+)?):", makefile, flags=re.M))
    assert targets == set(SAMPLES) and len(targets) >= 4


def test_standing_counts_reads_each_status_by_its_start():
    """Each survivor is counted once, by the start of its status; an unknown status counts nowhere."""
    statuses = ["killed since: tests/t.py::a", "killed since: tests/t.py::b (mutmut, run again: killed)",
                "equivalent: same numbers", "code removed since: gone", "not explained",
                "not explained: mutmut, run again, says survived (expected tests/t.py::c to kill it)", "other"]
    assert standing_counts(statuses) == {"unit": 2, "equivalent": 1, "removed": 1, "open": 2}
    assert list(standing_counts([])) == ["unit", "equivalent", "removed", "open"]


def test_core_result_says_how_far_an_unfinished_run_is_and_scores_a_finished_one(tmp_path):
    """`make mutants-core`'s sentence: unfinished, how many tested and killed so far (no score, survivors
    unread); finished, the score, its interval and the triage; absent, not run yet."""
    from posbias.book.teeth import core_result

    run = {"date": "d", "machine": "m", "commit": "c", "generated": 5154, "tested": 1200, "killed": 1000,
           "score": 1000 / 1200, "score_95": [0.81, 0.85], "wall_seconds": 4000, "jobs": 1,
           "sittings": [{"wall_seconds": 4000}], "survivors": {"m9": DIFF}}
    path = tmp_path / "core.json"
    path.write_text(json.dumps(run))
    text = core_result(path, "x")
    assert text.startswith("1,200 of the core's 5,154 mutants tested so far (1 sitting(s), 4,000 s on 1 core(s)")
    assert "1,000 killed, 0.833 of those; the run is not finished, and no survivor is triaged yet" in text
    path.write_text(json.dumps({**run, "equivalent": {"m9": "same numbers"}}))
    assert "the run is not finished; of the 1 survivors of those sittings, triaged from their committed record, 0 " \
        "are killed since by new tests, 1 argued equivalent, 0 in code" in core_result(path, "x")
    path.write_text(json.dumps({**run, "tested": 5154, "killed": 5000, "score": 5000 / 5154,
                                "equivalent": {"m9": "same numbers"}}))
    done = core_result(path, "x")
    assert done.startswith("all 5,154 of the core's mutants tested") and "a score of 0.970 with a 95% interval of " \
        "0.810 to 0.850. Of its 1 survivors, each read only from a committed record of the sitting that found it, " \
        "0 are killed since by new tests" in done
    assert "1 argued equivalent, 0 in code that has since left the core or changed and 0 not explained" in done
    two = {"m9": DIFF, "m10": DIFF, "m11": DIFF}
    path.write_text(json.dumps({**run, "tested": 5154, "killed": 5000, "score": 5000 / 5154, "survivors": two,
                                "killed_by_unit_tests": {"m9": "tests/t.py::a", "m10": "tests/t.py::b"},
                                "removed": {"m11": "moved to analysis"},
                                "reruns": [{"mutants": {"m9": {"as": "m9", "status": "killed"},
                                                        "m11": {"as": None, "status": "code removed"}}}]}))
    both = core_result(path, "x")
    assert "2 are killed since by new tests, 1 of them not yet confirmed by mutmut run again, 0 argued " \
        "equivalent, 1 in code that has since left the core or changed and 0 not explained" in both
    assert core_result(tmp_path / "none.json", shown="b") == "not run yet (`b` is absent)"
