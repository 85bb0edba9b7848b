"""The executed notebook tidied for the book (:func:`finish_notebook`, after papermill): one parameters cell shown,
collapsed; cells that show only check lines collapsed; no absolute path of the machine that ran it.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from posbias.storage.provenance import ROOT
from posbias.storage.store import atomic_write_text

__all__ = ["repo_relative", "show_one_parameters_cell", "portable_paths", "collapse_checks", "finish_notebook"]


def repo_relative(path: Path | str) -> str:
    """``path`` relative to the repository when it lies inside it, else its file name alone: what a run
    writes names no absolute path of the machine it ran on (an executed notebook is a page's download)."""
    p = Path(os.path.abspath(path))
    try:
        return p.resolve().relative_to(ROOT.resolve()).as_posix()
    except ValueError:
        return p.name


def show_one_parameters_cell(nb: Any) -> bool:
    """Papermill keeps the chapter's ``parameters`` cell (the defaults) and adds an
    ``injected-parameters`` cell (this run's values) after it; the book shows only the latter, collapsed.
    Returns whether ``nb`` changed."""
    tags = [c.get("metadata", {}).get("tags", []) for c in nb.cells]
    if not any("injected-parameters" in t for t in tags):
        return False
    changed = False
    for cell, t in zip(nb.cells, tags):
        if "parameters" in t and "remove-cell" not in t:
            cell.setdefault("metadata", {})["tags"] = [*t, "remove-cell"]
            changed = True
        if "injected-parameters" in t and not cell.source.startswith("# Parameters of this run"):
            cell.source = cell.source.replace("# Parameters",
                                              "# Parameters of this run (defaults: the box at the end)", 1)
            changed = True
        if "injected-parameters" in t and "hide-input" not in cell.metadata.get("tags", []):
            cell.metadata["tags"] = [*cell.metadata.get("tags", []), "hide-input"]   # collapsed on the page
            changed = True
    return changed


def portable_paths(nb: Any, source: Path, nb_path: Path) -> bool:
    """Papermill's record of where the notebook came from and went: ``input_path`` (here the whole
    source notebook, handed over in memory) becomes the chapter's source file and ``output_path``
    (absolute in a book build) the notebook's path, both relative to the repository
    (:func:`repo_relative`). Returns whether ``nb`` changed."""
    pm = nb.metadata.get("papermill")
    if pm is None:
        return False
    want = {"input_path": repo_relative(source), "output_path": repo_relative(nb_path)}
    if all(pm.get(k) == v for k, v in want.items()):
        return False
    pm.update(want)
    return True


#: How :func:`posbias.storage.report.check` shows a check: a badge, then the check's name.
_CHECK_LINE = re.compile(r"^\{bdg-(success|danger)\}`(PASS|FAIL)`")


def collapse_checks(nb: Any) -> bool:
    """A cell whose every output is a check's line (:func:`posbias.storage.report.check`) is collapsed on the page
    (``hide-output``): the checks ran and would have stopped the build; their lines are one click away. A cell
    whose checks sit beside a table or a figure is left as it is. Returns whether ``nb`` changed."""
    changed = False
    for cell in nb.cells:
        outs = cell.get("outputs", []) if cell.get("cell_type") == "code" else []
        texts = [o.get("data", {}).get("text/markdown") for o in outs]
        if not outs or not all(isinstance(t, str) and _CHECK_LINE.match(t) for t in texts):
            continue
        tags = cell.setdefault("metadata", {}).setdefault("tags", [])
        if "hide-output" not in tags and "remove-output" not in tags:
            tags.append("hide-output")
            changed = True
    return changed


def finish_notebook(nb_path: Path, source: Path) -> None:
    """Tidy the executed notebook for the book: one parameters cell shown (collapsed), check lines collapsed
    (:func:`collapse_checks`), no machine paths."""
    import nbformat  # lazy: nbformat costs ~0.05s at import

    if not nb_path.exists():
        return
    nb = nbformat.read(nb_path, as_version=4)
    if show_one_parameters_cell(nb) | collapse_checks(nb) | portable_paths(nb, source, nb_path):
        atomic_write_text(nb_path, nbformat.writes(nb))
