"""``make mutants``: mutmut over the science modules and the measurement code the verdicts read, with
the chapters' smoke checks (``tests/mutmut_smoke.py``) and the modules' unit tests (:data:`UNIT_TESTS`)
as the test.

Copies the sources into a work folder (``--work``, default ``runs/mutmut-work``; mutmut writes its
``mutants/`` tree there, never into the working tree) and keeps it between sittings: a run resumes
where the last stopped, testing only the sampled mutants without a result. With ``--sample N`` the
mutants are drawn once, uniformly with ``--seed`` (the Makefile's, written before the run), and the
list is written to ``--sample-file`` (default ``data/mutants/mutmut-sample.json``) before any is tested; a
later sitting reads that list and refuses another seed or size. Runs ``mutmut run`` for at most
``--budget`` seconds on ``--jobs`` cores and writes the score with its 95% Wilson interval and the
survivors to ``--out`` (default ``runs/mutmut.json``).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from posbias.storage.provenance import suite_record_provenance
from posbias.storage.store import atomic_write_text

ROOT = Path(__file__).resolve().parent.parent
MODULES = ["posbias/science/theory.py", "posbias/science/masks.py", "posbias/science/rollout.py",
           "posbias/science/attention.py", "posbias/science/lnsim.py", "posbias/science/lntheory.py",
           # the measurement code every trained-figure verdict rests on (issue 70)
           "posbias/measures/evaluate.py", "posbias/analysis/claims/quantities.py", "posbias/measures/stats.py",
           "posbias/llm/sinks.py"]
#: The unit tests of the mutated modules, run beside the chapters' smoke checks.
UNIT_TESTS = ["tests/test_theory.py", "tests/test_masks.py", "tests/test_rollout.py", "tests/test_attention.py",
              "tests/test_lnsim.py", "tests/test_lnsim_checks.py", "tests/test_lntheory.py", "tests/test_evaluate.py",
              "tests/test_evaluate_checks.py", "tests/test_quantities.py", "tests/test_stats.py",
              "tests/test_llm_sinks.py", "tests/test_claims.py"]
#: The science core (issue 96), tested whole: every mutant of these modules, not a sample. The modules the
#: book's derivations and the networks rest on: masks, attention, rollout, the closed forms, the LayerNorm
#: formulas and simulator, the task, the model and the retrieval baselines.
CORE = ["posbias/science/masks.py", "posbias/science/attention.py", "posbias/science/rollout.py",
        "posbias/science/theory.py", "posbias/science/lntheory.py", "posbias/science/lnsim.py",
        "posbias/science/task.py", "posbias/science/model.py", "posbias/science/retrieval.py"]
CORE_TESTS = ["tests/test_masks.py", "tests/test_attention.py", "tests/test_rollout.py", "tests/test_theory.py",
              "tests/test_lntheory.py", "tests/test_lnsim.py", "tests/test_lnsim_checks.py", "tests/test_task.py",
              "tests/test_model.py", "tests/test_retrieval.py"]
#: ``--modules``: which modules are mutated and which unit tests run beside the chapters' smoke checks.
SETS: dict[str, tuple[list[str], list[str]]] = {"sample": (MODULES, UNIT_TESTS), "core": (CORE, CORE_TESTS)}
CONFIG = """[mutmut]
only_mutate =
{paths}
source_paths = posbias
tests_dir =
{tests}
also_copy =
    notebooks
    book
    data
    references.bib
    tests
"""


def wilson(k: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """The 95% Wilson score interval of ``k`` killed in ``n`` tested."""
    if n == 0:
        return (0.0, 1.0)
    p, d = k / n, 1 + z * z / n
    mid, half = (p + z * z / (2 * n)) / d, z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return (max(0.0, mid - half), min(1.0, mid + half))


def _statuses(mutmut: list[str], work: Path, env: dict) -> dict[str, str]:
    res = subprocess.run([*mutmut, "results", "--all", "true"], cwd=work, env=env, capture_output=True, text=True)
    out: dict[str, str] = {}
    for line in res.stdout.splitlines():
        m = re.match(r"\s*(posbias\.[\w.]+__mutmut_\d+):\s*(\w[\w ]*)", line)
        if m:
            out[m.group(1)] = m.group(2).strip()
    return out


def _head() -> str:
    """The commit of the sources copied (``POSBIAS_GIT_COMMIT`` where they come from an archive of it)."""
    return os.environ.get("POSBIAS_GIT_COMMIT") or subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()


def _prepare_from_commit(work: Path, commit: str) -> None:
    """Fill a fresh work folder with the sources and tests of ``commit`` (``git archive``): a run continued on
    another machine tests the code its committed record was made from, not today's."""
    work.mkdir(parents=True, exist_ok=True)
    names = ["posbias", "notebooks", "tests", "book", "references.bib", "pyproject.toml"]
    archive = subprocess.run(["git", "archive", commit, *names], cwd=ROOT, capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(work)], input=archive, check=True)


def merged_results(committed: dict, fresh: dict) -> dict:
    """Per mutant, the verdict of the committed record's earlier sittings, else this work folder's: a mutant
    tested in an earlier sitting (on any machine) keeps its verdict and is not tested again."""
    tested = {k: v for k, v in fresh.items() if v not in (None, "not checked", "skipped")}
    return {**tested, **committed}


def _prepare(work: Path, modules: str = "sample", commit: str | None = None) -> None:
    """Copy the sources into ``work`` (once: a later sitting keeps mutmut's state there, and tests the
    sources it copied; the commit they came from is kept in ``work/COMMIT``, the module set in ``work/SET``)."""
    if (work / "setup.cfg").exists():
        had = (work / "SET").read_text().strip() if (work / "SET").exists() else "sample"
        if had != modules:
            raise SystemExit(f"{work} holds a run over the {had!r} modules, not {modules!r}: give each set its "
                             "own --work folder")
        return
    work.mkdir(parents=True, exist_ok=True)
    if commit:                                      # continuing a committed run: its own sources and tests
        _prepare_from_commit(work, commit)
    else:
        for name in ("posbias", "notebooks", "tests", "book", "references.bib", "pyproject.toml"):
            src = ROOT / name
            if src.is_dir():
                shutil.copytree(src, work / name, ignore=shutil.ignore_patterns("__pycache__", "_executed"))
            elif src.exists():
                shutil.copy2(src, work / name)
    (work / "data").symlink_to(ROOT / "data")       # read-only use: results are recomputed fresh
    (work / "COMMIT").write_text((commit or _head()) + "\n")
    (work / "SET").write_text(modules + "\n")
    (work / "setup.cfg").write_text(_config(modules, _sets_at(work / "tests" / "mutmut_run.py") if commit else None))


def _sets_at(script: Path) -> dict[str, tuple[list[str], list[str]]]:
    """The module sets (:data:`SETS`) as ``script``, this file at another commit, lists them: a run continued from
    a record made before modules moved (issue 97) mutates the paths its commit has."""
    import ast

    lists = {}
    for node in ast.parse(script.read_text()).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                lists[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                pass
    return {"sample": (lists["MODULES"], lists["UNIT_TESTS"]),
            "core": (lists.get("CORE", []), lists.get("CORE_TESTS", []))}


def _config(modules: str = "sample", sets: dict[str, tuple[list[str], list[str]]] | None = None) -> str:
    """mutmut's configuration: the mutated modules and the test files of the set ``modules`` (:data:`SETS`, or
    ``sets``)."""
    paths, tests = (sets or SETS)[modules]
    return CONFIG.format(paths="\n".join("    " + m for m in paths),
                         tests="\n".join("    " + t for t in ["tests/mutmut_smoke.py", *tests]))


def _sample(args, mutmut: list[str], work: Path, env: dict) -> list[str]:
    """The sampled mutants: read from ``--sample-file`` when it exists (same seed and size, or refused),
    else drawn now and written there before any is tested."""
    path = Path(args.sample_file)
    if path.exists():
        fixed = json.loads(path.read_text())
        if (fixed["seed"], fixed["size"], fixed["modules"]) != (args.seed, args.sample, MODULES):
            raise SystemExit(f"{path} holds the sample of seed {fixed['seed']}, size {fixed['size']} over its own "
                             f"modules; this run asks for seed {args.seed}, size {args.sample} over MODULES as "
                             "they are now. A sample is drawn once: remove the file only "
                             "to start a new, separately reported study")
        return fixed["mutants"]
    every = _generate(mutmut, work, env, args.budget)
    if len(every) < args.sample:
        raise SystemExit(f"mutmut generated {len(every)} mutants, fewer than the sample of {args.sample} asked for: "
                         "nothing written; check `mutmut run` in the work folder")
    if args.exclude:            # a later sample: none of the earlier ones' (whose survivors were seen)
        seen = {n for f in args.exclude for n in json.loads(Path(f).read_text())["mutants"]}
        every = [n for n in every if n not in seen]
        if len(every) < args.sample:
            raise SystemExit(f"only {len(every)} mutants are left outside {', '.join(args.exclude)}; ask for fewer")
    names = sorted(random.Random(args.seed).sample(every, args.sample))
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps({"seed": args.seed, "size": args.sample, "generated": len(every),
                                        "commit": _head(), "modules": MODULES, "excluded": args.exclude,
                                        "tests": ["tests/mutmut_smoke.py", *UNIT_TESTS], "mutants": names,
                                        "provenance": suite_record_provenance(" ".join(["tests/mutmut_run.py",
                                                                                       *sys.argv[1:]]))},
                                       indent=1) + "\n")
    print(f"{len(every)} mutants generated; a sample of {len(names)} drawn with seed {args.seed} -> {path}",
          flush=True)
    return names


def _generate(mutmut: list[str], work: Path, env: dict, budget: int) -> list[str]:
    """Have mutmut (re)generate its mutants without testing any; every mutant's name."""
    try:
        subprocess.run([*mutmut, "run", "--max-children", "1", "__none__"], cwd=work, env=env,
                       capture_output=True, text=True, timeout=max(60, budget))
    except subprocess.TimeoutExpired:
        raise SystemExit(f"mutmut did not finish generating mutants within {max(60, budget)} s: raise --budget")
    return sorted(_statuses(mutmut, work, env))


def moved_name(name: str, moves: list[str] | None) -> str:
    """A mutant's name after its module moved: ``moves`` holds ``OLD=NEW`` module paths (``--moved
    posbias.theory=posbias.science.theory``); the longest OLD that is the name's whole module path wins."""
    hits = [m.split("=", 1) for m in moves or [] if name.startswith(m.split("=", 1)[0] + ".")]
    if not hits:
        return name
    old, new = max(hits, key=lambda h: len(h[0]))
    return new + name[len(old):]


def _change(diff: str) -> list[str]:
    """A mutant's changed lines (``mutmut show``), stripped: what it is, whatever its number."""
    return [ln[0] + ln[1:].strip() for ln in diff.splitlines() if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]


def source_changes(work: Path) -> dict[str, list[str]]:
    """Every mutant's changed lines (as :func:`_change` gives them from ``mutmut show``), read straight from the
    mutated sources mutmut wrote in ``work/mutants/``: each mutant function diffed against its ``__mutmut_orig``.
    One pass over the files instead of one ``mutmut show`` process (about a second) per mutant."""
    import ast
    import difflib

    out: dict[str, list[str]] = {}
    for path in sorted((work / "mutants" / "posbias").rglob("*.py")):
        text = path.read_text()
        lines = text.splitlines()
        module = ".".join(path.relative_to(work / "mutants").with_suffix("").parts)
        funcs = {node.name: "\n".join(lines[node.lineno - 1:node.end_lineno]).strip()
                 for node in ast.walk(ast.parse(text))
                 if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and "__mutmut_" in node.name}
        for name, src in funcs.items():
            stem, _, tag = name.rpartition("__mutmut_")
            orig = funcs.get(f"{stem}__mutmut_orig")
            if tag == "orig" or orig is None or src is None:
                continue
            public = stem[2:] if stem.startswith("x_") else stem.rsplit("ǁ", 1)[-1]     # the name mutmut shows
            before = orig.replace(f"def {stem}__mutmut_orig(", f"def {public}(", 1)
            after = src.replace(f"def {name}(", f"def {public}(", 1)
            diff = difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm="", n=0)
            out[f"{module}.{name}"] = _change("\n".join(diff))
    return out


def rerun(args, mutmut: list[str], work: Path, env: dict) -> int:
    """Test survivors again on today's library and tests (issue 70's triage: a kill since the run is
    mutmut's verdict, not ours). Copies ``posbias/`` and ``tests/`` into the work folder, lets mutmut
    regenerate the mutants of changed code, finds each named mutant again by its change (its number
    moves when code above it changes; none found: the code it changed is gone), tests those, and
    appends the verdicts with the commit, date and machine to ``reruns`` in ``--triage``."""
    triage_path = Path(args.triage)
    triage = json.loads(triage_path.read_text())
    asked = args.rerun
    unknown = [n for n in asked if n not in triage["survivors"]]
    if unknown:
        raise SystemExit(f"not survivors of {triage_path}: {', '.join(unknown)}; name survivors of that run")
    for name in ("posbias", "tests"):
        for dest in (work / name, work / "mutants" / name):
            if dest.exists():
                shutil.rmtree(dest)
                shutil.copytree(ROOT / name, dest, ignore=shutil.ignore_patterns("__pycache__", "_executed"))
    (work / "mutants" / "mutmut-stats.json").unlink(missing_ok=True)      # the tests changed: collect again
    (work / "setup.cfg").write_text(_config(args.modules))               # today's unit tests, new files too
    (work / "COMMIT").write_text(_head() + "\n")
    every = _generate(mutmut, work, env, args.budget)
    shown: dict[str, list[str]] = source_changes(work)

    def change(name: str) -> list[str]:
        if name not in shown:
            shown[name] = _change(subprocess.run([*mutmut, "show", name], cwd=work, env=env,
                                                 capture_output=True, text=True).stdout)
        return shown[name]

    found: dict[str, str | None] = {}
    for old in asked:
        want = _change(triage["survivors"][old])
        func = moved_name(old, args.moved).rsplit("__mutmut_", 1)[0] + "__mutmut_"
        same = [old] if old in every and change(old) == want else []
        found[old] = (same or [n for n in every if n.startswith(func) and change(n) == want] or [None])[0]
    todo = sorted({n for n in found.values() if n})
    t0 = time.time()
    try:
        subprocess.run([*mutmut, "run", "--max-children", str(args.jobs), *todo], cwd=work, env=env,
                       timeout=max(60, args.budget))
    except subprocess.TimeoutExpired:
        print(f"stopped after the budget of {args.budget} s; the verdicts so far are recorded", flush=True)
    status = _statuses(mutmut, work, env)
    record = {"date": time.strftime("%Y-%m-%d", time.gmtime()), "commit": _head(), "machine": _machine(),
              "wall_seconds": round(time.time() - t0),
              "how": "tests/mutmut_run.py --rerun: today's posbias/ and tests/ copied into the work folder, "
                     "mutants regenerated, each found again by its change, test statistics collected again",
              "mutants": {old: {"as": new, "status": status.get(new, "not checked") if new else "code removed"}
                          for old, new in found.items()}}
    triage = json.loads(triage_path.read_text())         # read again: triage may have been added meanwhile
    triage.setdefault("reruns", []).append(record)
    atomic_write_text(triage_path, json.dumps(triage, indent=1, ensure_ascii=False) + "\n")
    for old, r in record["mutants"].items():
        print(f"{old}: {r['status']}" + (f" (now {r['as']})" if r["as"] not in (old, None) else ""))
    return 0


def reach(args, work: Path) -> int:
    """Which sampled mutants each chapter's smoke run reaches (mutmut's test statistics: the tests that
    call each mutated function), written to ``--triage`` as ``reach`` (chapter -> mutant names) with the
    commit the statistics were collected at. A mutant that reaches a chapter is not necessarily killed
    by it: mutmut stops at the first failing test, so kills are the whole test's, not a chapter's."""
    stats_path = work / "mutants" / "mutmut-stats.json"
    if not stats_path.exists():
        raise SystemExit(f"no test statistics in {stats_path}: run --rerun (or make mutants) first")
    by_func = json.loads(stats_path.read_text())["tests_by_mangled_function_name"]
    sample = json.loads(Path(args.sample_file).read_text())["mutants"]
    out: dict[str, list[str]] = {}
    for name in sample:
        for test in by_func.get(name.rsplit("__mutmut_", 1)[0], []):
            m = re.match(r"tests/mutmut_smoke\.py::\w+\[(.+)\]$", test)
            if m:
                out.setdefault(m.group(1), []).append(name)
    triage_path = Path(args.triage)
    triage = json.loads(triage_path.read_text())
    copied = (work / "COMMIT").read_text().strip() if (work / "COMMIT").exists() else "not recorded"
    triage["reach"] = {c: sorted(set(v)) for c, v in sorted(out.items())}
    triage["reach_source"] = (f"mutmut's test statistics (tests_by_mangled_function_name) of the work folder, "
                              f"sources and tests of {copied[:12]}")
    atomic_write_text(triage_path, json.dumps(triage, indent=1, ensure_ascii=False) + "\n")
    print({c: len(v) for c, v in triage["reach"].items()})
    return 0


def _machine() -> str:
    info = Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []
    cpu = next((ln.split(":", 1)[1].strip() for ln in info if ln.startswith("model name")), platform.machine())
    return f"{cpu}, {os.cpu_count()} cores"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--budget", type=int, default=900, help="seconds mutmut may run in this sitting")
    ap.add_argument("--jobs", type=int, default=1, help="mutants tested at once")
    ap.add_argument("--sample", type=int, default=0, help="test this many mutants, drawn at random once (0: all)")
    ap.add_argument("--modules", choices=sorted(SETS), default="sample",
                    help="the modules mutated: 'sample' (the samples' ten) or 'core' (the science core, issue 96)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work", default=str(ROOT / "runs" / "mutmut-work"), help="kept between sittings")
    ap.add_argument("--sample-file", default=str(ROOT / "data" / "mutants" / "mutmut-sample.json"))
    ap.add_argument("--draw-only", action="store_true", help="draw and write the sample, test nothing")
    ap.add_argument("--exclude", action="append", default=[],
                    help="a sample file whose mutants the draw leaves out (a later sample; repeatable)")
    ap.add_argument("--out", default=str(ROOT / "runs" / "mutmut.json"))
    ap.add_argument("--record", help="a committed record of this run (every mutant's verdict): its mutants are not "
                                     "tested again, and a fresh work folder is made from its commit")
    ap.add_argument("--rerun", nargs="+", metavar="MUTANT", help="test these survivors again on today's code")
    ap.add_argument("--moved", action="append", metavar="OLD=NEW", default=[],
                    help="--rerun: a module that moved since the run, e.g. posbias.theory=posbias.science.theory "
                         "(repeatable): its survivors are found under the new name by their change")
    ap.add_argument("--reach", action="store_true", help="record which sampled mutants each chapter reaches")
    ap.add_argument("--triage", default=str(ROOT / "data" / "mutants" / "mutmut-400.json"),
                    help="the committed run whose survivors --rerun names; its verdicts are appended there")
    args = ap.parse_args()
    if args.sample < 0 or args.jobs < 1 or args.budget < 1:
        ap.error("--sample must be >= 0, --jobs >= 1 and --budget >= 1 (seconds)")
    if any(m.count("=") != 1 or not all(m.split("=")) for m in args.moved):
        ap.error("--moved takes OLD=NEW module paths, e.g. posbias.theory=posbias.science.theory")
    if args.draw_only and not args.sample:
        ap.error("--draw-only draws a sample: give its size with --sample N (the Makefile's is 400)")
    mutmut = [str(Path(sys.executable).with_name("mutmut"))]
    if not Path(mutmut[0]).exists():
        print(f"mutmut is not installed beside {sys.executable}: run `make mutants`, which installs the "
              "`mutants` extra (mutmut 3.8.1) first", file=sys.stderr)
        return 2
    work = Path(args.work)
    record = json.loads(Path(args.record).read_text()) if args.record and Path(args.record).exists() else None
    if record is not None and "results" not in record:
        raise SystemExit(f"{args.record} lists no verdict per mutant (results): it cannot be continued elsewhere")
    _prepare(work, args.modules,
             None if record is None or args.rerun else record.get("commit_full") or record["commit"])
    env = dict(os.environ, MPLBACKEND="Agg", PYTHONPATH=str(work))
    if args.rerun:
        return rerun(args, mutmut, work, env)
    if args.reach:
        return reach(args, work)
    t0 = time.time()
    names = _sample(args, mutmut, work, env) if args.sample else []
    if args.draw_only:
        return 0
    done = _statuses(mutmut, work, env)
    todo = [n for n in names if done.get(n) in (None, "not checked")] if names else []
    known = record["results"] if record is not None else {}
    if known and not names:                         # the whole set, continued: only what no sitting has tested
        every = _generate(mutmut, work, env, args.budget) if not done else sorted(done)
        todo = [n for n in every if n not in known and done.get(n) in (None, "not checked")]
        print(f"{len(every) - len(todo)} of {len(every)} mutants already tested; testing the rest", flush=True)
        if not todo:
            print("every mutant has a verdict: nothing to test", flush=True)
    print(f"{len(names) - len(todo)} of {len(names)} sampled mutants already tested; testing the rest", flush=True)
    copied = (work / "COMMIT").read_text().strip() if (work / "COMMIT").exists() else None
    drawn = json.loads(Path(args.sample_file).read_text()).get("commit") if names else None
    if todo and copied and drawn and copied != drawn:
        raise SystemExit(f"{work} holds the sources of {copied[:12]} (a --rerun put them there), not those of "
                         f"{drawn[:12]} the sample was drawn from: its untested mutants would be tested on other "
                         "code. Finish the sample in a work folder made from its commit.")
    try:
        if todo or not (names or known):
            subprocess.run([*mutmut, "run", "--max-children", str(args.jobs), *todo], cwd=work, env=env,
                           timeout=max(60, args.budget - int(time.time() - t0)))
    except subprocess.TimeoutExpired:
        print(f"stopped after the budget of {args.budget} s; run it again to go on", flush=True)
    wall = time.time() - t0
    status = _statuses(mutmut, work, env)
    scope = names or sorted(status)
    # tested: every verdict mutmut gives; a mutant no test reaches ("no tests") survives, it is not left out
    tested = {k: status[k] for k in scope if status.get(k) not in (None, "not checked", "skipped")}
    if not names:
        tested = merged_results(known, tested)
    killed = sum(v in ("killed", "timeout") for v in tested.values())
    survivors = sorted(k for k, v in tested.items() if v not in ("killed", "timeout"))
    prev = json.loads(Path(args.out).read_text()) if Path(args.out).exists() else {}
    same = prev.get("commit") == copied[:7] if (copied := (work / "COMMIT").read_text().strip()
                                                if (work / "COMMIT").exists() else "") else False
    shown = {**(prev.get("survivors", {}) if same else {}), **(record or {}).get("survivors", {})}
    diffs = {k: shown.get(k) or subprocess.run([*mutmut, "show", k], cwd=work, env=env, capture_output=True,
                                               text=True).stdout for k in survivors}
    copied = (work / "COMMIT").read_text().strip() if (work / "COMMIT").exists() else "not recorded"
    before = (json.loads(Path(args.out).read_text()).get("sittings", []) if Path(args.out).exists()
              else (record or {}).get("sittings", []))
    sittings = [*before, {"date": time.strftime("%Y-%m-%d", time.gmtime()), "wall_seconds": round(wall),
                          "machine": _machine()}]
    lo, hi = wilson(killed, len(tested))
    summary = {"date": time.strftime("%Y-%m-%d", time.gmtime()), "machine": _machine(),
               "commit": copied[:7], "commit_full": copied, "modules": SETS[args.modules][0],
               "generated": max(len(status), len(tested)),
               "sample": len(names), "seed": args.seed,
               "tested": len(tested), "killed": killed, "score": killed / len(tested) if tested else None,
               "score_95": [lo, hi], "wall_seconds": sum(x["wall_seconds"] for x in sittings),
               "sittings": sittings, "command": " ".join(["tests/mutmut_run.py", *sys.argv[1:]]), "jobs": args.jobs,
               "statuses": {v: sum(x == v for x in tested.values()) for v in sorted(set(tested.values()))},
               "survivors": diffs, **({"results": tested} if not names else {}),
               "provenance": suite_record_provenance(" ".join(["tests/mutmut_run.py", *sys.argv[1:]]), wall,
                                                    sources=f"the work folder's copy of {copied}")}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(Path(args.out), json.dumps(summary, indent=1) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k != "survivors"}), flush=True)
    if names or len(tested) >= summary["generated"]:     # an unfinished whole run keeps its survivors unread
        print("\n".join(survivors))
    else:
        print(f"{len(survivors)} survivors so far, not shown: the run is not finished", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
