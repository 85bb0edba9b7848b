"""``posbias check-data``: every committed result matches its manifest hash, and a cheap sample recomputes."""
from __future__ import annotations

import importlib
import json
import math
from typing import Any

from .store import DATA, RECOMPUTE, verify_data

__all__ = ["check_data", "close"]

# modules that register recomputations with @store.recomputable
_MODULES = ("posbias.theory", "posbias.lnsim", "posbias.evaluate", "posbias.train", "posbias.llm")


def close(a: Any, b: Any, rtol: float = 1e-6, atol: float = 1e-9) -> bool:
    """Nested lists/dicts of numbers equal within tolerance (same shape and keys)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(close(a[k], b[k], rtol, atol) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(close(x, y, rtol, atol) for x, y in zip(a, b))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)) and not isinstance(a, bool):
        if math.isnan(a) and math.isnan(b):
            return True
        return math.isclose(a, b, rel_tol=rtol, abs_tol=atol)
    return a == b


def check_data(sample: int = 2) -> int:
    problems = verify_data()
    for p in problems:
        print(f"BAD {p}")
    for name in _MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    candidates = []
    for path in sorted(DATA.rglob("*.json")):
        if path.name == "manifest.json":
            continue
        rec = json.loads(path.read_text())
        if rec.get("experiment") in RECOMPUTE:
            candidates.append((rec["provenance"].get("wall_seconds") or 0.0, path, rec))
    candidates.sort(key=lambda c: c[0])
    for _, path, rec in candidates[:sample]:
        fresh = json.loads(json.dumps(RECOMPUTE[rec["experiment"]](rec["params"])))
        if close(fresh, rec["result"], rtol=1e-5, atol=1e-7):
            print(f"recomputed and matches: {path.relative_to(DATA)}")
        else:
            problems.append(f"{path.relative_to(DATA)}: recomputation with the committed code differs")
            print(f"BAD {problems[-1]}")
    if not candidates and sample:
        print("no committed result has a registered cheap recomputation")
    print(f"check-data: {len(problems)} problem(s)")
    return 0 if not problems else 3
