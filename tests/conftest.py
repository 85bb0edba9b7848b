"""Shared fixtures. The smoke build of the whole book runs once per session, in a copy of the tree."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
IGNORE = shutil.ignore_patterns(".venv", "_build", "runs", "_executed", ".git", "__pycache__", ".pytest_cache",
                                ".hypothesis", "*.egg-info")


def posbias_cmd(*args: str) -> list[str]:
    return [sys.executable, "-m", "posbias.book.cli", *args]


def network_step_seconds(chapter: str, depth: int) -> float:
    """The chapter's front-matter ``network_step`` expression, evaluated here by Python at ``depth``:
    the oracle the cost model is checked against."""
    from posbias.book.chapters import get_chapter

    return float(eval(get_chapter(chapter).meta["cost"]["network_step"], {}, {"depth": depth}))


@pytest.fixture
def fresh(monkeypatch, tmp_path) -> Path:
    """An empty ``posbias.storage.report`` record written to ``tmp_path``, as inside ``posbias run``."""
    from posbias.storage import report

    monkeypatch.setenv("POSBIAS_RUN_DIR", str(tmp_path))
    monkeypatch.setattr(report, "_RECORD", {"checks": [], "values": {}, "data": [], "figures": []})
    return tmp_path


@pytest.fixture(scope="session")
def smoke_book(tmp_path_factory) -> dict:
    """``posbias build --profile smoke`` in a copy of the repository; returns paths, exit code, log and time."""
    tree = tmp_path_factory.mktemp("book") / "posbias"
    shutil.copytree(ROOT, tree, ignore=IGNORE)
    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    from posbias.storage.provenance import source_date_epoch

    env = dict(os.environ, PYTHONPATH=str(tree), POSBIAS_GIT_COMMIT=commit or "unknown",
               SOURCE_DATE_EPOCH=source_date_epoch(ROOT),
               POSBIAS_CACHE=str(tree / ".cache"), MPLBACKEND="Agg")
    t0 = time.perf_counter()
    proc = subprocess.run(posbias_cmd("build", "--profile", "smoke", "--jobs", "2"), cwd=tree, env=env,
                          capture_output=True, text=True)
    return {"root": tree, "code": proc.returncode, "log": proc.stdout + proc.stderr,
            "seconds": time.perf_counter() - t0, "html": tree / "_build" / "html", "env": env}


# --- a tiny randomly initialised Llama: the real model's code path, for tests/test_llm*.py ---------------


@pytest.fixture(scope="module")
def one_layer():
    from posbias import llm

    return llm.tiny_llama(n_layers=1, seed=0)


@pytest.fixture(scope="module")
def two_layers():
    from posbias import llm

    return llm.tiny_llama(n_layers=2, seed=1)


@pytest.fixture
def run_dir(fresh, monkeypatch, tmp_path):
    """A chapter run's environment for saving figures (tests/test_figures*.py): the book's style, a chapter, its
    parameters and a fixed source date."""
    import json

    from posbias import figures

    monkeypatch.setenv("POSBIAS_CHAPTER", "wu-thm-4-1")
    monkeypatch.setenv("POSBIAS_PARAMS", json.dumps({"depth": 3}))
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    figures.style()
    return tmp_path


@pytest.fixture()
def empty_store(tmp_path, monkeypatch) -> Path:
    """An empty ``data/`` (its manifest ``{}``) and cache under ``tmp_path``, outside any run and not writing to
    ``data/``: the store as a fresh clone with nothing computed sees it."""
    from posbias.storage import store

    data = tmp_path / "data"
    data.mkdir()
    (data / "manifest.json").write_text("{}")
    monkeypatch.setattr(store, "DATA", data)
    monkeypatch.setattr(store, "MANIFEST", data / "manifest.json")
    monkeypatch.setenv("POSBIAS_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("POSBIAS_WRITE_DATA", raising=False)
    monkeypatch.delenv("POSBIAS_RUN_DIR", raising=False)
    return tmp_path
