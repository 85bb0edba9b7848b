"""tests/mutmut_run.py's score interval and its fixed sample (the run itself is `make mutants`, not a test)."""
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import mutmut_run  # noqa: E402


@pytest.mark.parametrize("k,n", [(90, 100), (380, 400), (0, 10), (400, 400)])
def test_wilson_interval_is_the_roots_of_the_score_equation(k, n):
    """The interval's ends solve |p_hat - p| = z sqrt(p (1 - p) / n): the roots of
    (1 + z^2/n) p^2 - (2 p_hat + z^2/n) p + p_hat^2 = 0, computed here with the quadratic formula."""
    z, ph = 1.959964, k / n
    a, b, c = 1 + z * z / n, -(2 * ph + z * z / n), ph * ph
    disc = math.sqrt(b * b - 4 * a * c)
    want = ((-b - disc) / (2 * a), (-b + disc) / (2 * a))
    assert mutmut_run.wilson(k, n) == pytest.approx(want, abs=1e-9)


def test_a_committed_sample_is_fixed_and_drawn_from_the_declared_seed():
    """Where data/mutants/mutmut-sample.json is committed it holds 400 distinct mutants of the declared modules,
    drawn with the Makefile's seed."""
    path = Path(__file__).resolve().parents[1] / "data" / "mutants" / "mutmut-sample.json"
    if not path.exists():
        pytest.skip("no sample drawn yet")
    s = json.loads(path.read_text())
    make = (path.parents[2] / "Makefile").read_text()
    assert f"--sample {s['size']} --seed {s['seed']}" in make and s["size"] == 400
    assert len(s["mutants"]) == len(set(s["mutants"])) == min(400, s["generated"])
    mods = {m.removesuffix(".py").replace("/", ".") for m in s["modules"]}
    assert all(any(name.startswith(m + ".") for m in mods) for name in s["mutants"])


def test_a_mutant_is_known_by_its_change_whatever_its_number():
    diff = ("--- posbias/science/theory.py\n+++ posbias/science/theory.py\n@@ -1,3 +1,3 @@\n def f(x):\n"
            "-    return x + 1\n+    return x + 2\n")
    assert mutmut_run._change(diff) == ["-return x + 1", "+return x + 2"]
    assert mutmut_run._change(diff.replace("    return", "        return")) == mutmut_run._change(diff)


@pytest.mark.parametrize("argv,message", [(["--draw-only"], "--draw-only draws a sample"),
                                          (["--jobs", "0"], "--jobs >= 1"),
                                          (["--sample", "-3"], "--sample must be >= 0")])
def test_impossible_options_are_refused_before_any_work(argv, message, monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(sys, "argv", ["mutmut_run.py", "--work", str(tmp_path / "w"), *argv])
    with pytest.raises(SystemExit) as e:
        mutmut_run.main()
    assert e.value.code == 2 and message in capsys.readouterr().err
    assert not (tmp_path / "w").exists()


def test_the_second_sample_is_declared_and_shares_no_mutant_with_the_first():
    """data/mutants/mutmut-sample-2.json (where drawn) holds 400 mutants drawn with the seed the Makefile declares
    for it, none of them in the first sample."""
    root = Path(__file__).resolve().parents[1]
    make = (root / "Makefile").read_text()
    assert "--sample 400 --seed 20261204 --exclude data/mutants/mutmut-sample.json" in make
    path = root / "data" / "mutants" / "mutmut-sample-2.json"
    if not path.exists():
        pytest.skip("the second sample is not drawn yet")
    s2, s1 = json.loads(path.read_text()), json.loads((root / "data" / "mutants" / "mutmut-sample.json").read_text())
    assert (s2["seed"], s2["size"], s2["excluded"]) == (20261204, 400, "book/mutmut-sample.json")
    assert len(set(s2["mutants"])) == 400 and not set(s2["mutants"]) & set(s1["mutants"])


def test_the_third_sample_is_declared_and_shares_no_mutant_with_the_earlier_two():
    """data/mutants/mutmut-sample-3.json (where drawn) holds 400 mutants drawn with the seed the Makefile declares
    for it, none of them in either earlier sample."""
    root = Path(__file__).resolve().parents[1]
    make = (root / "Makefile").read_text()
    assert ("--sample 400 --seed 20261205 --exclude data/mutants/mutmut-sample.json \\\n"
            "                    --exclude data/mutants/mutmut-sample-2.json") in make
    path = root / "data" / "mutants" / "mutmut-sample-3.json"
    if not path.exists():
        pytest.skip("the third sample is not drawn yet")
    s3 = json.loads(path.read_text())
    earlier = {n for f in ("mutmut-sample.json", "mutmut-sample-2.json")
               for n in json.loads((root / "data" / "mutants" / f).read_text())["mutants"]}
    assert (s3["seed"], s3["size"]) == (20261205, 400)
    assert s3["excluded"] == ["book/mutmut-sample.json", "book/mutmut-sample-2.json"]
    assert len(set(s3["mutants"])) == 400 and not set(s3["mutants"]) & earlier


def test_the_core_set_mutates_the_science_core_with_its_own_tests():
    """`make mutants-core` (issue 96) mutates every module of the core and runs only test files that exist."""
    root = Path(__file__).resolve().parents[1]
    paths, tests = mutmut_run.SETS["core"]
    assert {Path(p).stem for p in paths} == {"masks", "attention", "rollout", "theory", "lntheory", "lnsim", "task",
                                             "model", "retrieval"}
    assert all((root / p).exists() for p in [*paths, *tests])
    cfg = mutmut_run._config("core")
    assert all(f"    {p}\n" in cfg for p in paths) and "posbias/measures/evaluate.py" not in cfg
    assert "--modules core --work runs/mutmut-work-core" in (root / "Makefile").read_text()


def test_a_work_folder_keeps_its_module_set(tmp_path):
    work = tmp_path / "w"
    work.mkdir()
    (work / "setup.cfg").write_text(mutmut_run._config("sample"))
    (work / "SET").write_text("sample\n")
    mutmut_run._prepare(work, "sample")                     # the same set: resumes
    with pytest.raises(SystemExit, match="holds a run over the 'sample' modules, not 'core'"):
        mutmut_run._prepare(work, "core")


@pytest.mark.skipif(not (Path(__file__).resolve().parents[1] / ".git").exists(), reason="needs git history")
def test_a_run_continued_from_a_commit_before_the_move_mutates_that_commits_paths(tmp_path):
    """A committed record made before issue 97 moved the core (d9bb5b2, the core's first sittings) is continued
    in a work folder of its own commit's sources: its setup.cfg names the paths that commit has, not today's."""
    root = Path(__file__).resolve().parents[1]
    if subprocess.run(["git", "cat-file", "-e", "d9bb5b2^{commit}"], cwd=root).returncode:
        pytest.skip("a shallow clone without the commit")
    work = tmp_path / "w"
    mutmut_run._prepare(work, "core", "d9bb5b2")
    cfg = (work / "setup.cfg").read_text()
    assert "    posbias/masks.py\n" in cfg and "posbias/science/" not in cfg
    assert all((work / line.strip()).exists() for line in cfg.splitlines() if line.strip().startswith("posbias/"))
    assert "    posbias/science/masks.py\n" in mutmut_run._config("core")         # today's run: today's paths


def test_a_moved_module_names_its_survivors_anew():
    """--rerun --moved OLD=NEW: a survivor of a module that moved since the run is looked for under its new
    module path (the longest matching path wins; a module whose name only starts the same is not moved)."""
    moves = ["posbias.theory=posbias.science.theory", "posbias=posbias_old", "posbias.claims=posbias.analysis.claims"]
    assert mutmut_run.moved_name("posbias.theory.x_f__mutmut_3", moves) == "posbias.science.theory.x_f__mutmut_3"
    assert mutmut_run.moved_name("posbias.theoryx.x_f__mutmut_3", moves[:1]) == "posbias.theoryx.x_f__mutmut_3"
    assert mutmut_run.moved_name("posbias.claims.quantities.x_g__mutmut_1", moves) == \
        "posbias.analysis.claims.quantities.x_g__mutmut_1"
    assert mutmut_run.moved_name("posbias.masks.x_h__mutmut_2", moves[:1]) == "posbias.masks.x_h__mutmut_2"


def test_a_move_without_its_new_name_is_refused(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(sys, "argv", ["mutmut_run.py", "--work", str(tmp_path / "w"), "--moved", "posbias.theory"])
    with pytest.raises(SystemExit) as e:
        mutmut_run.main()
    assert e.value.code == 2 and "--moved takes OLD=NEW" in capsys.readouterr().err
    assert not (tmp_path / "w").exists()


def test_a_run_continued_elsewhere_keeps_every_earlier_verdict():
    """merged_results: a mutant the committed record has a verdict for keeps it (it is not tested again);
    this sitting adds the verdicts of the others; unchecked and skipped mutants are not verdicts."""
    committed = {"m.x_f__mutmut_1": "killed", "m.x_f__mutmut_2": "survived"}
    fresh = {"m.x_f__mutmut_1": "not checked", "m.x_f__mutmut_2": "killed", "m.x_f__mutmut_3": "timeout",
             "m.x_f__mutmut_4": "not checked", "m.x_f__mutmut_5": "skipped", "m.x_f__mutmut_6": "no tests"}
    assert mutmut_run.merged_results(committed, fresh) == {"m.x_f__mutmut_1": "killed", "m.x_f__mutmut_2": "survived",
                                                           "m.x_f__mutmut_3": "timeout", "m.x_f__mutmut_6": "no tests"}
