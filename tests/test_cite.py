"""posbias.book.cite: the Re-run and Cite boxes, and the generated status and how-to-cite pages."""
import shlex

import pytest

from posbias.book.chapters import chapter_ids, get_chapter
from posbias.book.cite import code_gaps_section, figure_bibtex, footer_markdown, rerun_command, status_page


@pytest.mark.parametrize("cid", chapter_ids())
@pytest.mark.parametrize("profile", ["smoke", "default"])
def test_the_rerun_command_reproduces_the_parameters(cid, profile):
    """Typing the printed command resolves to exactly the parameters of the run it was printed for."""
    ch = get_chapter(cid)
    if profile not in ch.profiles and profile != "default":
        pytest.skip(f"{cid} has no {profile} profile")
    params = ch.resolve(profile)
    words = shlex.split(rerun_command(cid, params, {n: p.default for n, p in ch.params.items()}))
    assert words[:3] == ["posbias", "run", cid]
    overrides = {}
    for i in range(3, len(words), 3):
        assert words[i] == "-p"
        overrides[words[i + 1]] = words[i + 2]
    assert ch.resolve("default", overrides) == params


def _result(cid, passed=True, data=()):
    return {"title": cid, "profile": "smoke", "status": "ok" if passed else "failed-checks",
            "checks": [{"name": "c1", "claim": "a claim", "passed": passed, "value": 1, "expected": 1}],
            "figures": [], "data": list(data),
            "provenance": {"wall_seconds": 1.5, "device": "cpu"}}


def test_status_page_lists_every_chapter_its_checks_and_data():
    data = [{"path": "data/x/1.json", "sha256": "a" * 64, "source": "committed"}]
    page = status_page({"wu-thm-4-1": _result("wu-thm-4-1"), "wu-fig-2": _result("wu-fig-2", False, data),
                        "kim-thm-1": None}, "smoke")
    assert page.startswith("# Status of this build")
    assert ":class: longtable" in page and "<br>" not in page  # breaks across PDF pages
    assert "* - [wu-thm-4-1](./wu-thm-4-1/wu-thm-4-1.ipynb)" in page
    assert "  - not run" in page
    assert "{bdg-danger}`FAIL` `c1`" in page and "{bdg-success}`pass` `c1`" in page
    assert "`data/x/1.json` (committed, `aaaaaaaaaaaaaaaa`)" in page


def test_status_page_shows_how_many_mutants_each_check_kills():
    """Counts come from data/mutants/teeth.json (what tests/test_mutations.py measured), never typed."""
    from posbias.book.teeth import read_teeth

    teeth = read_teeth()["chapters"]
    res = _result("wu-thm-4-5")
    names = list(teeth["wu-thm-4-5"])
    res["checks"] = [dict(res["checks"][0], name=n) for n in names]
    page = status_page({"wu-thm-4-5": res}, "smoke")
    total = len({m for ms in teeth["wu-thm-4-5"].values() for m in ms})
    for n in names:
        k = len(teeth["wu-thm-4-5"][n])
        note = f"*(kills {k} of {total} mutants)*" if k else "*(descriptive: kills no mutant)*"
        assert f"`{n}`: a claim {note}" in page
    assert "`critical-distance-exact`: a claim *(kills 1 of" in page      # the kappa mutant of issue 46
    # a chapter the table does not know gets no note
    assert "`c1`: a claim\n" in status_page({"wu-fig-2": _result("wu-fig-2")}, "smoke")


def test_figure_entry_pins_commit_and_hash():
    fig = {"name": "wu-thm-4-1-rollout", "caption": "c",
           "files": {"png": {"path": "figures/wu-thm-4-1-rollout.png", "sha256": "b" * 64}},
           "provenance": {"commit": "c" * 40, "parameters": {"depth": 3}}}
    entry = figure_bibtex("wu-thm-4-1", fig, "Theorem 4.1")
    assert entry.startswith("@misc{") and entry.rstrip().endswith("}")
    assert "b" * 16 in entry and "c" * 12 in entry


def test_footer_shows_the_command_and_every_parameter():
    ch = get_chapter("wu-thm-4-1")
    params = ch.resolve("smoke")
    md = footer_markdown("wu-thm-4-1", params, [], "smoke")
    defaults = {n: p.default for n, p in ch.params.items()}
    assert "Re-run this chapter" in md and rerun_command("wu-thm-4-1", params, defaults) in md
    for name in ch.params:
        assert f"| `{name}` |" in md


def test_figure_note_says_what_a_figure_is_made_of_and_keeps_bibtex_braces_out():
    from posbias.book.cite import figure_note

    ev = {"words": 'a setting {"x": 1}', "files": 1, "list_sha256": "abc"}
    drawn = figure_note({"evidence": ev, "data_scope": "drawn"})
    assert drawn == 'Reproduced figure drawn from stored results: a setting ("x": 1); 1 data file (list sha256 abc)'
    empty = figure_note({"evidence": None, "data_scope": "drawn", "profile": "smoke", "parameters": {"a": {"b": 2}}})
    assert empty.startswith("Reproduced figure drawing no stored result") and "{" not in empty
    assert figure_note({"profile": "smoke", "parameters": {}}).startswith("Reproduced figure computed in the run")


def test_a_figure_cannot_name_a_stored_result_that_is_not_there(tmp_path, monkeypatch):
    from posbias.analysis import evidence

    monkeypatch.setenv("POSBIAS_CACHE", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="neither in data/ nor in the cache"):
        evidence.stored_file("sinks-streaming", {"no": "such"})


def test_the_status_page_names_networks_trained_from_uncommitted_code(tmp_path):
    """Issue 95: every committed network with a sitting from a dirty tree is named, by commit and
    configuration, and every one with a sitting that records no commit, with why."""
    import json

    from posbias.storage import provenance, store

    folder = tmp_path / "wu-units"
    folder.mkdir()
    p = {"mask": "decay", "pe": "none", "depth": 4, "steps": 100000, "test_seed": 20261203}
    dirty = {"commit": "dafd79baa417", "dirty": True}
    clean = {"commit": "b5344c594390", "dirty": False}
    recs = {"a": ({**p, "seed": 5}, {"sittings": [{"git": dirty}, {"git": clean}]}),
            "b": ({**p, "seed": 6}, {"sittings": [{"git": dirty}, {"git": clean}]}),
            "c": ({**p, "seed": 7}, {"sittings": [{"git": clean}]}),
            "d": ({**p, "seed": 8}, {"git": {"commit": "8eca67f52ce1", "dirty": True}}),
            "e": ({**p, "seed": 9}, {"sittings": [{"git": {"commit": None}}, {"git": clean}],
                                     "commit_missing_reason": "not recorded by the code at the time"})}
    for name, (params, prov) in recs.items():
        (folder / f"{name}.json").write_text(json.dumps({"params": params, "provenance": prov}))
    gaps = provenance.code_gaps(tmp_path)
    assert [d["file"] for d in gaps["uncommitted"]] == ["wu-units/a.json", "wu-units/b.json", "wu-units/d.json"]
    assert [d["file"] for d in gaps["no commit"]] == ["wu-units/e.json"]
    text = "\n".join(code_gaps_section(gaps))
    assert text.startswith("## Networks trained from uncommitted code")
    assert "3 committed networks trained partly from uncommitted code" in text
    assert ("- at `dafd79b` with uncommitted changes: decay/none depth 4, 100,000 steps (test draw 20261203), "
            "seeds 5, 6; in 1 of 2 sittings") in text
    assert "- at `8eca67f` with uncommitted changes: decay/none depth 4, 100,000 steps (test draw 20261203), " \
           "seed 8; all of its training" in text
    assert ("- decay/none depth 4 seed 9, 100,000 steps (test draw 20261203): 1 of 2 sittings; not recorded by "
            "the code at the time") in text
    assert code_gaps_section({"uncommitted": [], "no commit": []}) == []
    page = status_page({"wu-fig-2": _result("wu-fig-2")}, "smoke")     # the committed data's, on the page
    listed = bool(provenance.code_gaps(store.DATA)["uncommitted"])
    assert ("## Networks trained from uncommitted code" in page) == listed
    assert page.index("## Networks trained from uncommitted code") < page.index("## Checks and data")
