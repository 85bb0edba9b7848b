"""What the pages say about the mutation suite: the committed kill table (``book/teeth.json``, written by
``tests/test_mutations.py``) and ``make mutants``' committed run (``book/mutmut.json``). Read-only: the
engine that measures them is :mod:`posbias.mutation`."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .provenance import ROOT

__all__ = ["TEETH_PATH", "read_teeth", "mutmut_frame"]

TEETH_PATH = ROOT / "book" / "teeth.json"


def read_teeth(path: Path = TEETH_PATH) -> dict[str, Any] | None:
    """The committed kill table (``book/teeth.json``), or None where it does not exist."""
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def mutmut_frame(path: Path | None = None):
    """``make mutants``' committed run (``book/mutmut.json``) as ``(summary, survivors)``: the summary
    dict (date, machine, generated, tested, killed, score, wall_seconds, command) and a
    ``pandas.DataFrame`` with one row per surviving mutant: its name, its diff's changed lines, and
    why it survives (equivalent for the checks), which unit test now kills it, or that the code it changed
    is gone. None when absent."""
    import pandas as pd

    path = path or TEETH_PATH.with_name("mutmut.json")
    if not path.exists():
        return None
    d = json.loads(path.read_text(encoding="utf-8"))
    rows = []
    for name, diff in d["survivors"].items():
        change = " / ".join(ln[1:].strip() for ln in diff.splitlines()
                            if ln[:1] in "+-" and not ln.startswith(("+++", "---")))
        why = (f"equivalent: {d['equivalent'][name]}" if name in d.get("equivalent", {}) else
               f"killed since: {d['killed_by_unit_tests'][name]}" if name in d.get("killed_by_unit_tests", {})
               else f"code removed since: {d['removed'][name]}" if name in d.get("removed", {})
               else "not explained")
        rows.append({"mutant": name, "change": change, "status": why})
    return {k: v for k, v in d.items() if not isinstance(v, dict)}, pd.DataFrame(rows)
