"""The CLI contract: outputs of a run, exit codes 0/1/2/3, refusals that write nothing."""
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from conftest import IGNORE, ROOT, network_step_seconds, posbias_cmd

HEADER = """---
kernelspec: {{display_name: Python 3, language: python, name: python3}}
posbias:
  title: "{title}"
  parameters:
    x: {{type: int, default: 1, min: 0, max: 10, help: "a number"}}
---
# {title}

```{{code-cell}} ipython3
:tags: [parameters]
x = 1
```

```{{code-cell}} ipython3
from posbias.storage import report
report.check("x-is-one", "x equals one", value=x, expected=1, passed=(x == 1))
```

```{{code-cell}} ipython3
{body}
```
"""


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    root = tmp_path_factory.mktemp("cli") / "posbias"
    shutil.copytree(ROOT, root, ignore=IGNORE)
    (root / "notebooks" / "zz-raises.md").write_text(HEADER.format(title="Raises", body="1 / (x - x)"))
    (root / "notebooks" / "zz-plain.md").write_text(HEADER.format(title="Plain", body="print('done')"))
    return root


def run(tree, *args, cwd=None, cache=None):
    env = dict(os.environ, PYTHONPATH=str(tree), POSBIAS_CACHE=str(cache or tree / ".cache"), POSBIAS_GIT_COMMIT="test")
    return subprocess.run(posbias_cmd(*args), cwd=cwd or tree, env=env, capture_output=True, text=True)


def test_run_writes_notebook_figures_and_results(tree, tmp_path):
    out = tmp_path / "some" / "dir"
    proc = run(tree, "run", "wu-thm-4-1", "--profile", "smoke", "-p", "n_tokens", "20", "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "wu-thm-4-1: estimated about" in proc.stderr          # the cost estimate comes first
    assert "without encryption" not in proc.stderr  # the kernel is reached over local IPC, not open TCP ports
    assert not [p for p in (tree / "notebooks").iterdir() if p.suffix != ".md"], "the run left files in notebooks/"
    assert (out / "wu-thm-4-1.ipynb").exists()
    for ext in ("png", "svg", "pdf"):
        assert (out / "figures" / f"wu-thm-4-1-rollout.{ext}").stat().st_size > 1000
    res = json.loads((out / "results.json").read_text())
    assert res["chapter"] == "wu-thm-4-1" and res["profile"] == "smoke" and res["parameters"]["n_tokens"] == 20
    assert res["checks"] and all(set(c) == {"name", "claim", "passed", "value", "expected"} for c in res["checks"])
    assert all(c["passed"] for c in res["checks"])
    prov = res["provenance"]
    for key in ("git", "packages", "device", "python", "started", "wall_seconds", "seeds"):
        assert key in prov, key
    assert prov["seeds"] == [0] and prov["git"]["commit"] == "test" and prov["wall_seconds"] > 0
    assert "ratio_generic" in res["values"]


@pytest.mark.parametrize("args, message", [
    (["run", "wu-thm-4-1", "-p", "n_tokens", "-3"], "below the minimum"),
    (["run", "wu-thm-4-1", "-p", "n_tokens", "many"], "expected an integer"),
    (["run", "wu-thm-4-1", "-p", "nonsense", "1"], "no parameter 'nonsense'"),
    (["run", "wu-thm-4-1", "-p", "n_tokens", "8", "-p", "n_tokens", "9"], "given twice"),
    (["run", "no-such-chapter"], "unknown chapter 'no-such-chapter'"),
    (["run", "wu-thm-4-1", "--profile", "huge"], "invalid choice"),
    (["list", "no-such-chapter"], "unknown chapter"),
])
def test_bad_input_exits_2_and_writes_nothing(tree, tmp_path, args, message):
    out = tmp_path / "out"
    before = sorted(p.name for p in tree.iterdir())
    proc = run(tree, *args, "--out", str(out)) if args[0] == "run" else run(tree, *args)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr
    assert not out.exists()
    assert sorted(p.name for p in tree.iterdir()) == before  # no runs/ folder either


def test_check_failure_exits_3(tree, tmp_path):
    proc = run(tree, "run", "zz-plain", "-p", "x", "2", "--out", str(tmp_path / "o"))
    assert proc.returncode == 3, proc.stderr
    assert "FAILED: x-is-one" in proc.stderr
    res = json.loads((tmp_path / "o" / "results.json").read_text())
    assert res["status"] == "failed-checks" and res["checks"][0]["passed"] is False


def test_raising_notebook_exits_1_and_keeps_partial_notebook(tree, tmp_path):
    proc = run(tree, "run", "zz-raises", "--out", str(tmp_path / "o"))
    assert proc.returncode == 1
    assert "ZeroDivisionError" in proc.stderr and "cell [" in proc.stderr
    assert (tmp_path / "o" / "zz-raises.ipynb").exists()
    res = json.loads((tmp_path / "o" / "results.json").read_text())
    assert res["status"] == "error" and res["checks"][0]["passed"] is True


def test_default_out_is_runs_chapter_hash(tree):
    proc = run(tree, "run", "zz-plain")
    assert proc.returncode == 0, proc.stderr
    dirs = list((tree / "runs").glob("zz-plain-*"))
    assert len(dirs) == 1 and len(dirs[0].name.split("-")[-1]) == 8


def test_list(tree):
    proc = run(tree, "list")
    assert proc.returncode == 0 and "wu-thm-4-1" in proc.stdout and "n_tokens" in proc.stdout
    proc = run(tree, "list", "wu-thm-4-1")
    assert "sequence length" in proc.stdout and "profile smoke" in proc.stdout


@pytest.mark.parametrize("args, message", [
    (["campaign", "no-such-chapter"], "unknown chapter 'no-such-chapter'"),
    (["campaign", "wu-fig-5", "-p", "nonsense", "1"], "no parameter 'nonsense'"),
    (["campaign", "wu-fig-5", "-p", "steps", "0"], "below the minimum"),
    (["campaign", "wu-fig-5", "-p", "steps", "5", "-p", "eval_every", "10"], "impossible combination"),
    (["campaign", "wu-fig-5", "--profile", "huge"], "invalid choice"),
    (["campaign", "wu-thm-4-1"], "trains no networks"),
    (["campaign", "wu-fig-5", "--max-members", "0"], "give a number of units of at least 1, or auto"),
    (["campaign", "wu-fig-5", "--max-members", "two"], "give a number of units of at least 1, or auto"),
    (["campaign", "wu-fig-5", "--workers", "0"], "give a number of worker processes of at least 1, or auto"),
    (["campaign", "wu-fig-5", "--workers", "2", "--scheduler", "tcp://127.0.0.1:1"], "not allowed with"),
    (["campaign", "wu-fig-5", "--cluster", "pbs"], "invalid choice"),
    (["campaign", "wu-fig-5", "--cluster", "slurm", "--cluster-config", "/nonexistent.yaml"], "no such file"),
    (["campaign", "wu-fig-5", "--threads", "0"], "at least 1 torch thread"),
    (["jump", "--role", "leaper"], "no role 'leaper'; the study has 'jumper', 'non-jumper', 'No PE|2'"),
    (["jump", "--threads", "0"], "--threads must be at least 1"),
])
def test_campaign_bad_input_exits_2_and_writes_nothing(tree, tmp_path, args, message):
    cache = tmp_path / "cache"
    before = sorted(p.name for p in tree.iterdir())
    proc = run(tree, *args, cache=cache)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr
    assert not cache.exists() and sorted(p.name for p in tree.iterdir()) == before


def test_campaign_trains_exactly_what_the_chapter_reads(tree, tmp_path):
    """`posbias campaign` with the chapter's parameters fills the cache; `posbias run` then only reads it."""
    cache, params = tmp_path / "cache", ["--profile", "smoke", "-p", "windows", "4,8", "-p", "prefixes", "2"]
    proc = run(tree, "campaign", "wu-fig-6", *params, cache=cache)
    assert proc.returncode == 0, proc.stderr
    assert "posbias run wu-fig-6 --profile smoke -p windows 4,8 -p prefixes 2" in proc.stdout
    stored = sorted(p.name for p in (cache / "wu-units").glob("*.json"))
    assert len(stored) == 4                     # causal, window 4, window 8, prefix 2 (one seed)
    assert not list(cache.rglob("*.ckpt"))      # checkpoints removed once the units are stored

    proc = run(tree, "run", "wu-fig-6", *params, "--out", str(tmp_path / "o"), cache=cache)
    assert proc.returncode in (0, 3), proc.stderr
    data = json.loads((tmp_path / "o" / "results.json").read_text())["data"]
    # (the chapter also reads the paper-settings units committed in data/: not the campaign's business)
    units = [d for d in data if "/wu-units/" in d["path"] and d["source"] != "committed"]
    assert sorted(Path(d["path"]).name for d in units) == stored
    assert {d["source"] for d in units} == {"cache"}
    assert sorted(p.name for p in (cache / "wu-units").glob("*.json")) == stored   # nothing new trained

    proc = run(tree, "campaign", "wu-fig-6", *params, cache=cache)   # again: nothing left to train
    assert proc.returncode == 0 and "training" not in proc.stderr.replace("training the units", "")


def test_campaign_max_members_sets_the_ensembles(tree, tmp_path):
    """`--max-members N` reaches the campaign: wu-fig-6's five smoke units (one PE, so one ensemble)
    in ensembles of at most 3 (the split itself: test_train's splits test); `--status --workers 2`
    shows the split two workers would train."""
    cache = tmp_path / "cache"
    for extra, want in (([], "5 to train in 1 ensemble(s)"), (["--max-members", "3"], "5 to train in 2 ensemble(s)"),
                        (["--workers", "2"], "5 to train in 2 ensemble(s)")):     # auto: 3 + 2 on 2 workers
        proc = run(tree, "campaign", "wu-fig-6", "--profile", "smoke", "--status", *extra, cache=cache)
        assert proc.returncode == 0 and want in proc.stdout, proc.stdout + proc.stderr
    assert not cache.exists()


def test_campaign_no_train_commits_finished_units_unchanged(tree, tmp_path):
    """`--no-train --write-data` trains nothing and copies finished units from the cache to data/ as they are."""
    import hashlib

    own = tmp_path / "tree"
    shutil.copytree(tree, own, ignore=IGNORE)           # this test writes data/
    cache, params = tmp_path / "cache", ["--profile", "smoke"]
    before = sorted((own / "data" / "wu-units").glob("*.json"))
    parked = lambda: sorted((own / "data" / "checkpoints").rglob("*"))          # noqa: E731
    parked_before = parked()
    proc = run(own, "campaign", "wu-fig-5", *params, "--status", cache=cache)
    assert proc.returncode == 0 and "0 of 1 units stored; 1 to train in 1 ensemble(s)" in proc.stdout, proc.stdout
    assert "not started (0/20 steps)" in proc.stdout and not cache.exists()     # a look leaves no trace
    # priced at the chapter's cost model: 20 steps x network_step(2) s for the one depth-2 network
    ms = 1000 * network_step_seconds("wu-fig-5", 2)
    assert f"about 0 s at the chapter's cost model ({ms:.0f} ms per network-step on one core)" in proc.stdout
    proc = run(own, "campaign", "wu-fig-5", *params, "--no-train", "--write-data", cache=cache)
    assert proc.returncode == 0, proc.stderr
    assert "0 finished units" in proc.stdout and "1 not trained yet" in proc.stdout
    assert "checkpoints of unfinished ensembles: 0 committed to data/checkpoints" in proc.stdout, proc.stdout
    assert parked() == parked_before          # nothing had started: nothing to commit
    assert not list(cache.rglob("*.json")) and sorted((own / "data" / "wu-units").glob("*.json")) == before
    assert run(own, "campaign", "wu-fig-5", *params, "--quiet", cache=cache).returncode == 0
    (cached,) = (cache / "wu-units").glob("*.json")
    proc = run(own, "campaign", "wu-fig-5", *params, "--status", cache=cache)
    assert "1 of 1 units stored; 0 to train" in proc.stdout, proc.stdout
    proc = run(own, "campaign", "wu-fig-5", *params, "--no-train", "--write-data", cache=cache)
    assert proc.returncode == 0 and "1 finished units committed" in proc.stdout, proc.stdout + proc.stderr
    committed = own / "data" / "wu-units" / cached.name
    assert committed.read_bytes() == cached.read_bytes()
    manifest = json.loads((own / "data" / "manifest.json").read_text())
    assert manifest[f"wu-units/{cached.name}"] == hashlib.sha256(committed.read_bytes()).hexdigest()


# --------------------------------------------------------------------------- issue 23: bad --out, locks, cost

@pytest.mark.parametrize("where, message", [
    ("file", "is an existing file"),
    ("under-file", "is a file, so no folder can be made under it"),
    ("data", "inside the repository's own files"),
    ("notebooks", "inside the repository's own files"),
    ("unwritable", "cannot write in"),
])
def test_every_out_problem_is_bad_input_writing_nothing(tree, tmp_path, where, message):
    target = {"file": tmp_path / "f.txt", "under-file": tmp_path / "f.txt" / "sub",
              "data": tree / "data" / "my-run", "notebooks": tree / "notebooks" / "x",
              "unwritable": Path("/sys/posbias-run")}[where]
    (tmp_path / "f.txt").write_text("mine")
    before = sorted(str(p) for p in tree.rglob("*")), sorted(p.name for p in tmp_path.iterdir())
    proc = run(tree, "run", "zz-plain", "--out", str(target))
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert message in proc.stderr and proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert (sorted(str(p) for p in tree.rglob("*")), sorted(p.name for p in tmp_path.iterdir())) == before
    assert (tmp_path / "f.txt").read_text() == "mine"


FIGURE_BODY = """import matplotlib.pyplot as plt
from posbias import figures
report.value("n_layers", 3 * x)
report.value("worst", 1 / 3)
fig, ax = plt.subplots()
ax.plot([0, 1], [1, 0])
figures.save(fig, "zz-fig")"""


def test_a_figures_caption_is_its_directive_with_the_glued_values_and_the_save_cell_shows_nothing(tree, tmp_path):
    """The runner hands the chapter's {glue:figure} captions to the kernel (POSBIAS_CAPTIONS): the figure's
    record and files carry the directive's body with its {glue:text} roles filled in, math kept."""
    directive = ("\n```{glue:figure} zz-fig\n:name: fig-zz\n\nMass after {glue:text}`n_layers` layers,\n"
                 "$\\alpha \\to 1$; worst {glue:text}`worst:.3f`.\n```\n")
    (tree / "notebooks" / "zz-figure.md").write_text(HEADER.format(title="Figure", body=FIGURE_BODY) + directive)
    (tree / "notebooks" / "zz-nodirective.md").write_text(HEADER.format(title="No directive", body=FIGURE_BODY))
    try:
        proc = run(tree, "run", "zz-figure", "--out", str(tmp_path / "o"))
        missing = run(tree, "run", "zz-nodirective", "--out", str(tmp_path / "m"))
    finally:
        (tree / "notebooks" / "zz-figure.md").unlink()
        (tree / "notebooks" / "zz-nodirective.md").unlink()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    want = "Mass after 3 layers, $\\alpha \\to 1$; worst 0.333."
    fig = json.loads((tmp_path / "o" / "results.json").read_text())["figures"][0]
    assert fig["caption"] == want and fig["provenance"]["caption"] == want
    from PIL import Image

    assert json.loads(Image.open(tmp_path / "o" / "figures" / "zz-fig.png").text["Description"])["caption"] == want
    nb = json.loads((tmp_path / "o" / "zz-figure.ipynb").read_text())
    save_cell = next(c for c in nb["cells"] if "figures.save" in "".join(c["source"]))
    shown = [o for o in save_cell["outputs"] if o["output_type"] != "display_data"
             or not all(k.startswith("application/papermill.record/") for k in o["data"])]   # glue records aside
    assert shown == [], shown                                        # no "saved figure ..." line on the page
    assert missing.returncode == 1
    assert "figure 'zz-fig' has no ```{glue:figure} zz-fig directive in chapter 'zz-nodirective'" in missing.stderr


def test_a_run_that_records_no_check_is_not_ok(tree, tmp_path):
    (tree / "notebooks" / "zz-nocheck.md").write_text(HEADER.format(title="No check", body="print(1)").replace(
        'report.check("x-is-one", "x equals one", value=x, expected=1, passed=(x == 1))',
        "from posbias.storage import report"))
    try:
        proc = run(tree, "run", "zz-nocheck", "--out", str(tmp_path / "o"))
    finally:
        (tree / "notebooks" / "zz-nocheck.md").unlink()
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert "recorded no checks" in proc.stderr
    assert json.loads((tmp_path / "o" / "results.json").read_text())["status"] == "no-checks"


def test_two_runs_into_one_out_cannot_interleave_and_two_outs_share_a_cache(tree, tmp_path):
    """Same --out: the second is refused (exit 2) while the first holds the folder; different --out on
    one cache: both finish ok with their own figures, and the cache holds each unit once."""
    env = dict(os.environ, PYTHONPATH=str(tree), POSBIAS_CACHE=str(tmp_path / "cache"), POSBIAS_GIT_COMMIT="test")
    args = ["run", "wu-fig-5", "--profile", "smoke", "--quiet"]
    first = subprocess.Popen(posbias_cmd(*args, "--out", str(tmp_path / "same")), cwd=tree, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while not (tmp_path / "same" / "wu-fig-5.ipynb").exists() and time.monotonic() < deadline:
        time.sleep(0.1)                             # the first run holds the folder (it writes the notebook)
    second = run(tree, *args, "--out", str(tmp_path / "same"), cache=tmp_path / "cache")
    other = subprocess.Popen(posbias_cmd(*args, "--out", str(tmp_path / "other")), cwd=tree, env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out1, err1 = first.communicate(timeout=600)
    out2, err2 = other.communicate(timeout=600)
    assert second.returncode == 2 and "another `posbias run` is writing into" in second.stderr, second.stderr
    assert first.returncode == 0 and other.returncode == 0, err1 + err2
    for d in ("same", "other"):
        res = json.loads((tmp_path / d / "results.json").read_text())
        assert res["status"] == "ok" and res["checks"]
        assert all((tmp_path / d / f["files"]["png"]["path"]).exists() for f in res["figures"])
    units = sorted(p.name for p in (tmp_path / "cache" / "wu-units").glob("*.json"))
    assert len(units) == 1 and not list((tmp_path / "cache").rglob("*.tmp"))


def test_cost_is_shown_and_absurd_parameters_are_refused_before_work(tree, tmp_path):
    proc = run(tree, "list", "wu-thm-4-1")
    assert proc.returncode == 0 and "cost with the defaults: about" in proc.stdout and "seconds = " in proc.stdout
    proc = run(tree, "list", "wu-fig-2")
    assert "networks" in proc.stdout, proc.stdout            # trained chapters count the stored networks
    out = tmp_path / "absurd"
    proc = run(tree, "run", "wu-thm-4-1", "-p", "n_tokens", "2048", "-p", "depth", "2000", "-p", "samples", "256",
               "--out", str(out))
    assert proc.returncode == 2 and "MiB of memory" in proc.stderr and not out.exists(), proc.stderr
    proc = run(tree, "run", "zz-plain", "--out", str(tmp_path / "o"))      # a chapter without a cost model runs
    assert proc.returncode == 0 and "zz-plain: no cost estimate" in proc.stderr, proc.stderr


def test_a_damaged_committed_unit_stops_the_chapter_that_reads_it(tree, tmp_path):
    """Issue 23's report: truncating one committed unit made wu-fig-2 quietly draw from fewer units.
    Now the chapter raises (exit 1) with the file and the fix, and writes nothing over data/."""
    own = tmp_path / "tree"
    shutil.copytree(tree, own, ignore=IGNORE)
    from posbias import training
    from posbias.storage import store

    paper = training.units_of("wu-fig-2", "paper", dict(depths=[2, 4, 6]))
    name = store.result_name(training.UNIT_EXPERIMENT, paper["decay|2"][0].params(), training.VERSION)
    assert name in json.loads((own / "data" / "manifest.json").read_text())
    unit = own / "data" / name
    unit.write_bytes(unit.read_bytes()[: unit.stat().st_size // 2])
    proc = run(own, "run", "wu-fig-2", "--out", str(tmp_path / "o"), cache=tmp_path / "cache")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "DataError" in proc.stderr and f"git checkout -- data/{name}" in proc.stderr, proc.stderr


def test_the_readme_examples_write_under_folders_git_ignores():
    """Issue 98: the README's `--out my-run` left an untracked folder at the root. Every folder its
    commands write a run into (given with --out, or the default) is ignored, so `git status` stays
    clean; and the README says how long its two commands take."""
    import re

    from posbias.book import runner

    readme = (ROOT / "README.md").read_text()
    commands = "\n".join(re.findall(r"```bash\n(.*?)```", readme, re.S))
    outs = re.findall(r"^posbias run .*?--out\s+(\S+)", commands, re.M)
    assert outs, "the README's examples should show --out"
    default = str(runner.default_out("wu-thm-4-1", {"n_tokens": 64}))
    for out in [*outs, default]:
        for written in ("results.json", "wu-thm-4-1.ipynb", "figures/x.png"):
            ignored = subprocess.run(["git", "check-ignore", "-q", "--no-index", f"{out}/{written}"], cwd=ROOT)
            assert ignored.returncode == 0, f"the README's run into {out}/ leaves {out}/{written} untracked"
    assert re.search(r"`make test` takes about (?:half an hour|an hour|\d+ minutes)", readme)
    assert re.search(r"`make book` about \d+ minutes", readme)
