"""Chapters executed in-process with the library patched: the engine of the mutation suite.

``posbias run`` executes a chapter in a Jupyter kernel (seconds of start-up per run). A mutation suite
runs each chapter once per wrong version of the library, so here a chapter's code cells are
executed in this Python process instead: the notebook is read with jupytext, its ``parameters`` cell
is replaced by the resolved parameters of a profile, figures are closed instead of written, and the
checks recorded by :mod:`posbias.storage.report` are returned. A *mutant* replaces one library function (in
every ``posbias`` module that imported it) for the length of one execution.

``tests/mutants.py`` (theory chapters) and ``tests/mutants_trained.py`` (chapters that train networks)
hold the curated catalogue; ``tests/test_mutations.py`` asserts every mutant
makes a check fail and keeps ``data/mutants/teeth.json`` (which check kills which mutant, read by the Status
page) up to date.
"""
from __future__ import annotations

import contextlib
import importlib
import io
import os
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from posbias.book.chapters import get_chapter
from posbias.storage.provenance import ROOT
from posbias.storage.store import to_jsonable

__all__ = ["Mutant", "patched", "execute_chapter", "failed_checks"]


@dataclass(frozen=True)
class Mutant:
    """A wrong version of one library function.

    ``target``: ``"posbias.module.name"``; ``make``: called with the original function, returns the wrong
    one; ``chapters``: the chapters that must catch it; ``profile``: the profile they run under
    (``smoke``; ``default`` only for closed forms whose check is decided by committed data);
    ``fresh``: bypass the result cache and data/ (the mutant changes a stored simulation);
    ``own_cache``: execute with an empty result cache of its own, data/ read as usual (the mutant
    changes what training records: the smoke networks are trained again under it, while the committed
    networks a chapter reads stay as committed)."""

    id: str
    target: str
    description: str
    make: Callable[[Callable], Callable]
    chapters: tuple[str, ...]
    profile: str = "smoke"
    fresh: bool = False
    own_cache: bool = False
    overrides: dict[str, Any] = field(default_factory=dict)


@contextlib.contextmanager
def patched(target: str, replacement: Any) -> Iterator[None]:
    """Replace ``posbias.mod.name`` by ``replacement`` in ``mod`` and in every loaded ``posbias``
    module that bound the same object by ``from mod import name``; restored on exit, also in a module
    first imported meanwhile that bound the replacement."""
    from posbias.storage import store

    mod_name, name = target.rsplit(".", 1)
    mod = importlib.import_module(mod_name)
    original = getattr(mod, name)
    store.changed()                  # readings memoised on the stored data are made again under the mutant
    touched = []
    for m in list(sys.modules.values()):
        if m is not None and getattr(m, "__name__", "").startswith("posbias") and getattr(m, name, None) is original:
            touched.append(m)
            setattr(m, name, replacement)
    try:
        yield
    finally:
        store.changed()
        for m in touched:
            setattr(m, name, original)
        late = [m for m in list(sys.modules.values())      # imported during the execution, bound to the mutant
                if m is not None and getattr(m, "__name__", "").startswith("posbias")
                and getattr(m, name, None) is replacement]
        for m in late:
            setattr(m, name, original)


def _code_cells(chapter_id: str) -> list[tuple[list[str], str]]:
    import jupytext  # lazy: jupytext costs ~0.3s at import

    nb = jupytext.read(ROOT / "notebooks" / f"{chapter_id}.md")
    return [(c.metadata.get("tags", []), c.source) for c in nb.cells if c.cell_type == "code"]


def execute_chapter(chapter_id: str, profile: str = "smoke", overrides: dict[str, Any] | None = None,
                    mutant: Mutant | None = None, fresh: bool | None = None) -> list[dict[str, Any]]:
    """Execute the code cells of ``notebooks/<chapter_id>.md`` in this process and return its checks.

    Parameters are resolved as ``posbias run`` resolves them (``profile``, ``overrides``). With
    ``mutant`` its wrong function is patched in for the execution. ``fresh`` (default: the mutant's)
    makes ``store.cached`` compute every result instead of reading data/ or the cache, so a mutant of
    the simulation is not hidden by a stored result. Figures are closed unsaved; an exception in a
    cell propagates. Returns ``report.check``'s records ``{name, claim, passed, value, expected}``.
    """
    import matplotlib  # lazy: matplotlib costs ~0.2s at import (and the backend is set before pyplot)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # lazy: matplotlib.pyplot costs ~0.9s at import

    from posbias.storage import report  # lazy: posbias.storage.report costs ~0.1s and hooks the store

    params = get_chapter(chapter_id).resolve(profile, overrides)
    fresh = (mutant.fresh if mutant else False) if fresh is None else fresh
    saved_record = report._RECORD
    report._RECORD = {"checks": [], "values": {}, "data": [], "figures": []}

    def save(fig, name, caption=None, data=None):      # figures.save's signature; nothing is written
        plt.close(fig)

    def compute_only(experiment, params_, compute, **kw):
        return to_jsonable(compute())

    stack = contextlib.ExitStack()
    env = {"POSBIAS_RUN_DIR": None, "POSBIAS_NO_PROGRESS": "1", "POSBIAS_CHAPTER": None}
    if mutant is not None and mutant.own_cache:
        env["POSBIAS_CACHE"] = stack.enter_context(tempfile.TemporaryDirectory(prefix="posbias-mutant-cache-"))
    old_env = {k: os.environ.get(k) for k in env}
    try:
        for k, v in env.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
        stack.enter_context(patched("posbias.figures.save", save))
        stack.enter_context(patched("posbias.book.cite.footer", lambda: None))
        stack.enter_context(patched("posbias.storage.report.progress", lambda iterable=None, **kw: iterable))
        stack.enter_context(contextlib.redirect_stdout(io.StringIO()))
        if fresh:
            stack.enter_context(patched("posbias.storage.store.cached", compute_only))
        if mutant is not None:
            original = _resolve(mutant.target)
            stack.enter_context(patched(mutant.target, mutant.make(original)))
        ns: dict[str, Any] = {"__name__": "__chapter__"}
        cwd = os.getcwd()
        os.chdir(ROOT / "notebooks")
        try:
            for tags, src in _code_cells(chapter_id):
                if "parameters" in tags:
                    ns.update(params)
                    continue
                exec(compile(src, f"<{chapter_id}>", "exec"), ns)  # noqa: S102 - the chapter's own code
        finally:
            os.chdir(cwd)
            plt.close("all")
        return [dict(c) for c in report._RECORD["checks"]]
    finally:
        stack.close()
        for k, v in old_env.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
        report._RECORD = saved_record


def _resolve(target: str) -> Any:
    mod_name, name = target.rsplit(".", 1)
    return getattr(importlib.import_module(mod_name), name)


def failed_checks(checks: list[dict[str, Any]]) -> list[str]:
    """Names of the checks that failed (an execution with no check at all counts as ``<no checks>``)."""
    return [c["name"] for c in checks if not c["passed"]] or ([] if checks else ["<no checks>"])


def _scratch_cache() -> str:
    """A private result cache for executions outside a test (``python -m posbias.book.mutation``)."""
    return tempfile.mkdtemp(prefix="posbias-mutation-cache-")


if __name__ == "__main__":       # python -m posbias.book.mutation CHAPTER...: exit 3 when a check fails
    os.environ.setdefault("POSBIAS_CACHE", _scratch_cache())
    bad = 0
    for cid in sys.argv[1:]:
        failed = failed_checks(execute_chapter(cid))
        print(f"{cid}: {'FAILED ' + ', '.join(failed) if failed else 'ok'}")
        bad += bool(failed)
    sys.exit(3 if bad else 0)
