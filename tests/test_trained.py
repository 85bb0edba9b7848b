"""posbias.trained: each trained chapter's networks are declared once, as typed configurations; a new
trained chapter is its notebook and its declaration, nothing else."""
import json
import os
import shutil
import subprocess
import sys

import pytest
from conftest import IGNORE, ROOT, posbias_cmd

from posbias.measures import evaluate as ev
from posbias import training as train
from posbias.book.chapters import chapter_ids, get_chapter
from posbias.science.model import MemberConfig
from posbias.trained import (FIG2_ARCHITECTURES, Config, TrainedChapter, declaration, fig2_config, parse_fig2,
                             trained_chapters)
from posbias.trained.wu_fig_3 import ARCHITECTURES as FIG3_ARCHITECTURES


def test_every_declaration_belongs_to_a_chapter_and_is_typed():
    assert set(trained_chapters()) <= set(chapter_ids())
    assert {"wu-fig-2", "wu-fig-6", "wu-bias-over-training", "sinks-synthetic-vs-real"} <= set(trained_chapters())
    for ch in trained_chapters():
        decl = declaration(ch)
        assert isinstance(decl, TrainedChapter)
        if decl.configs is not None:
            configs = decl.configs(train.settings(ch, "paper"))
            assert configs and all(isinstance(c, Config) and isinstance(c.member, MemberConfig) for c in configs)
            assert len({c.label for c in configs}) == len(configs), f"{ch}: two configurations share a label"


def test_a_chapter_without_networks_is_refused_by_name():
    with pytest.raises(KeyError, match="'wu-thm-4-1' trains no networks; chapters with a campaign: .*wu-fig-2"):
        declaration("wu-thm-4-1")
    with pytest.raises(ValueError, match="either its configs or the networks it reads"):
        TrainedChapter()


def test_labels_are_written_from_typed_fields():
    """Figure 2's label is built from the architecture's name and the depth, and the typed fields are
    what a unit is made of (the label is only a name)."""
    c = fig2_config("RoPE", 6, residual=True)
    assert (c.label, c.depth, c.member) == ("RoPE|6", 6, MemberConfig("causal", "rope", residual=True))
    assert parse_fig2("No PE|2") == ("No PE", 2)
    for bad in ("NoPE|2", "decay|", "decay|two"):
        with pytest.raises(ValueError, match="give '<No PE|decay|RoPE>|<depth>'"):
            parse_fig2(bad)
    assert list(FIG2_ARCHITECTURES) == list(ev.FIG2_PES)      # the names the frozen judge reads


def test_fig3_names_label_exactly_the_trained_configurations():
    assert list(ev.FIG3_NAMES) == [f"{m}|{p}" for m, p in FIG3_ARCHITECTURES]
    assert [ev.fig3_name(m, p) for m, p in FIG3_ARCHITECTURES] == [
        "no-mask No PE", "no-mask sin", "no-mask RoPE", "causal No PE", "causal sin", "causal RoPE"]
    st = train.CampaignStatus(30, 0, [train.EnsembleStatus(2, "full/causal", "none", 15, 100_000, step=15_726),
                                      train.EnsembleStatus(2, "causal/full", "none", 15, 100_000)])
    assert train.progress_text(st, ev.fig3_name) == ("depth 2, no-mask No PE and causal No PE (15 units) at step "
                                                     "15,726; depth 2, no-mask No PE and causal No PE (15 units) "
                                                     "not started")


def test_units_take_the_chapters_settings_and_the_configs_own():
    """A unit's settings are the chapter's parameters of the same names; a configuration's own budget,
    extra seeds and held-out set override them (the fixed-budget study's depth-6 budget and wide seeds)."""
    (u,) = train.units_of("wu-fig-5", "confirm", {"seeds": [7]})["causal|none"]
    p = get_chapter("wu-fig-5").resolve("confirm")
    assert (u.seed, u.steps, u.eval_every, u.n_test, u.n_sweep, u.n_sink, u.test_seed) == (
        7, p["steps"], p["eval_every"], p["n_test"], p["n_sweep"], p["n_sink"], p["test_seed"])
    b = train.units_of("wu-bias-over-training", "budget", {}, admit=False)
    assert [x.seed for x in b["decay|2"]] == list(range(10)) and [x.seed for x in b["RoPE|2"]] == list(range(5))
    assert {x.steps for x in b["No PE|6"]} == {300_000} and {x.steps for x in b["No PE|2"]} == {500_000}
    assert {x.n_heldout for us in b.values() for x in us} == {10_000}
    conv = train.units_of("wu-bias-over-training", "converged", {})
    assert {x.stop_rule for us in conv.values() for x in us} == {"plateau-50k"}
    assert {x.n_heldout for us in conv.values() for x in us} == {None}
    # the budget study leaves out the networks whose committed converged record its design admits
    admitted = {(label, s) for label, rows in train.budget_study().items() for s, src, _ in rows if src == "admitted"}
    trained = {(label, x.seed) for label, us in train.units_of("wu-bias-over-training", "budget", {}).items()
               for x in us}
    assert admitted and not admitted & trained
    assert admitted | trained == {(label, x.seed) for label, us in b.items() for x in us}


def test_a_reading_chapter_reads_the_other_chapters_networks():
    got = train.units_of("sinks-synthetic-vs-real", "paper", {})
    want = train.units_of("wu-fig-6", "paper", {"seeds": get_chapter("sinks-synthetic-vs-real").resolve("paper")[
        "toy_seeds"]})
    assert got == want and set(got) == {"causal", "window|4", "window|8", "window|12", "prefix|2", "prefix|4",
                                        "prefix|8"}


TOY_NOTEBOOK = """---
kernelspec: {display_name: Python 3, language: python, name: python3}
posbias:
  title: "A toy trained chapter"
  parameters:
    depth: {type: int, default: 1, min: 1, max: 4, help: "attention layers"}
    steps: {type: int, default: 4, min: 2, max: 100, help: "training iterations"}
    seeds: {type: int_list, default: [0, 1], min: 0, unique: true, max: 99, help: "runs per configuration"}
    eval_every: {type: int, default: 2, min: 1, help: "iterations between evaluations"}
    n_test: {type: int, default: 8, min: 8, max: 64, help: "sequences per IC test set"}
    n_sweep: {type: int, default: 8, min: 8, max: 64, help: "sequences per slot of the sweep"}
    n_sink: {type: int, default: 8, min: 8, max: 64, help: "sequences for attention maps"}
  profiles:
    smoke: {seeds: [0]}
  cost:
    seconds: "5 + 0.01 * steps * len(seeds) * depth"
    memory_mb: "600"
    calibration: "a toy: a few seconds of start-up and four steps a network"
---
# A toy trained chapter

```{code-cell} ipython3
:tags: [parameters]
depth = 1
steps = 4
seeds = [0, 1]
eval_every = 2
n_test = 8
n_sweep = 8
n_sink = 8
```

```{code-cell} ipython3
from posbias import training as train
from posbias.storage import report
res = train.run_chapter_campaign("toy-trained", globals())
runs = [r for us in res.values() for r in us]
report.check("toy-trained", "every network of the declaration trained and was evaluated",
             value=sorted(res), expected=["causal|none", "decay|none"],
             passed=sorted(res) == ["causal|none", "decay|none"] and len(runs) == 2 * len(seeds)
             and all(len(r["curves"]["step"]) == steps // eval_every + 1 for r in runs))
```
"""

TOY_DECLARATION = '''"""A toy trained chapter: the causal and decay masks without PE at ``depth``."""
from posbias.science.model import MemberConfig
from posbias.trained import Config, TrainedChapter


def configs(p) -> list[Config]:
    return [Config(f"{mask}|none", p["depth"], MemberConfig(mask, "none")) for mask in ("causal", "decay")]


DECLARATION = TrainedChapter(configs)
'''


#: The toy's two wrong versions of the library (CONTRIBUTING: a check comes with mutants that it catches).
TOY_MUTANTS = '''

def _toy_drops_decay(orig):
    def run_chapter_campaign(chapter, params):
        out = orig(chapter, params)
        out.pop("decay|none", None)                              # one configuration's networks lost
        return out
    return run_chapter_campaign


def _toy_last_eval_lost(orig):
    def run_chapter_campaign(chapter, params):
        out = orig(chapter, params)
        for runs in out.values():
            for r in runs:
                r["curves"] = {k: v[:-1] for k, v in r["curves"].items()}   # the last evaluation dropped
        return out
    return run_chapter_campaign


TRAINED_MUTANTS += [
    Mutant("toy-drops-decay", "posbias.training.run_chapter_campaign", "the decay networks lost", _toy_drops_decay,
           ("toy-trained",)),
    Mutant("toy-last-eval-lost", "posbias.training.run_chapter_campaign", "curves without their last evaluation",
           _toy_last_eval_lost, ("toy-trained",)),
]
'''


def test_a_toy_trained_chapter_is_its_notebook_and_its_declaration(tmp_path):
    """Adding a trained chapter as CONTRIBUTING says: its notebook (front matter with its `cost:`), its
    declaration, its line in `_toc.yml`, and its mutants with its name in the suite. On a copy of the repository
    with only those added, the layout, chapter, table-of-contents and mutation checks pass on it, `posbias
    campaign` trains its networks and `posbias run` executes it reading them from the cache, its check passing;
    nothing else needs to know of it (issue 97: the module map covers every declaration with one row)."""
    root = tmp_path / "posbias"
    shutil.copytree(ROOT, root, ignore=IGNORE)
    (root / "notebooks" / "toy-trained.md").write_text(TOY_NOTEBOOK)
    (root / "posbias" / "trained" / "toy_trained.py").write_text(TOY_DECLARATION)
    toc = (root / "_toc.yml").read_text()
    entry = "      - file: book/_executed/wu-residual-depth/wu-residual-depth\n"
    assert entry in toc
    (root / "_toc.yml").write_text(toc.replace(entry, entry + "      - file: book/_executed/toy-trained/toy-trained\n"))
    with open(root / "tests" / "mutants_trained.py", "a") as f:
        f.write(TOY_MUTANTS)
    suite = (root / "tests" / "test_mutations.py").read_text()
    assert '"sinks-real-decoder", "sinks-streaming"]' in suite
    (root / "tests" / "test_mutations.py").write_text(
        suite.replace('"sinks-real-decoder", "sinks-streaming"]', '"sinks-real-decoder", "sinks-streaming", '
                      '"toy-trained"]', 1))
    checks = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/test_layout.py",
         "tests/test_build.py::test_every_chapter_is_in_the_table_of_contents_and_every_entry_is_a_chapter_or_page",
         "tests/test_chapters.py", "-k",
         "toy-trained or module or job or table_of_contents or suite_or_named or catalogue",
         "tests/test_mutations.py::test_every_chapter_is_in_the_suite_or_named_outside_it",
         "tests/test_mutations.py::test_catalogue_covers_every_theory_chapter_three_times_and_every_trained_one_twice",
         "tests/test_mutations.py::test_every_mutant_fails_a_check[toy-trained]"],
        cwd=root, env=dict(os.environ, PYTHONPATH=str(root), POSBIAS_CACHE=str(tmp_path / "checks-cache")),
        capture_output=True, text=True)
    assert checks.returncode == 0, checks.stdout[-3000:]
    import re
    passed = int(re.search(r"(\d+) passed", checks.stdout).group(1))
    assert passed >= 2 + 1 + 3 + 5, checks.stdout[-1000:]      # layout, toc, mutations, the chapter's own checks
    cache = tmp_path / "cache"
    env = dict(os.environ, PYTHONPATH=str(root), POSBIAS_CACHE=str(cache), POSBIAS_GIT_COMMIT="test")

    def run(*args):
        return subprocess.run(posbias_cmd(*args), cwd=root, env=env, capture_output=True, text=True)

    proc = run("campaign", "toy-trained", "--profile", "smoke", "-p", "depth", "2")
    assert proc.returncode == 0, proc.stderr
    stored = sorted(p.name for p in (cache / "wu-units").glob("*.json"))
    assert len(stored) == 2                      # causal and decay, one seed
    proc = run("run", "toy-trained", "--profile", "smoke", "-p", "depth", "2", "--out", str(tmp_path / "o"))
    assert proc.returncode == 0, proc.stderr
    results = json.loads((tmp_path / "o" / "results.json").read_text())
    assert [(c["name"], c["passed"]) for c in results["checks"]] == [("toy-trained", True)]
    assert sorted(p.name for p in (cache / "wu-units").glob("*.json")) == stored     # it trained nothing new
    assert {d["source"] for d in results["data"] if "/wu-units/" in d["path"]} == {"cache"}
