"""The declared parameter space of every chapter, and one way to try a point of it.

``edges(chapter)``: each parameter at its declared minimum and maximum (lists: one item at each end,
and ``max_len`` distinct items where declared), the other parameters at the smoke profile's values.
``strategy(chapter)``: hypothesis draws of valid-looking points (every parameter within its declared
type and range). ``try_point`` does what ``posbias run --profile smoke`` does before and during a run:
validate (exit 2), the cost guard with a budget in estimated seconds (exit 2, as ``POSBIAS_MAX_SECONDS``
makes ``posbias run`` refuse), then execute the chapter in this process (:mod:`posbias.book.mutation`):
0 every check passed, 3 a check failed, 1 it raised. Used by ``tests/test_param_edges.py`` and
``make fuzz`` (``tests/fuzz_params.py``).
"""
from __future__ import annotations

import math

import contextlib
import os
import resource
import traceback
from typing import Any, Iterator

from posbias.book import cost, mutation
from posbias.book.chapters import Chapter, ParamError, Param

BIG = 2**32 - 1
#: address space a point may use (MiB): a cost model that underestimates memory then shows as a
#: MemoryError (exit 1, named), not as the kernel's OOM killer taking the machine's other work with it
CAP_MB = int(os.environ.get("PARAM_SPACE_MAX_MB", "8192"))


@contextlib.contextmanager
def memory_cap(mb: int = CAP_MB) -> Iterator[None]:
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (mb * 2**20, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))


def trains(ch: Chapter) -> bool:
    """Does the chapter train networks (its cost model has a ``network_step``)?"""
    return bool((ch.meta.get("cost") or {}).get("network_step"))


def _ends(p: Param) -> list[Any]:
    base = p.type.removesuffix("_list")
    if p.choices is not None:
        return [p.choices[0], p.choices[-1]]
    if base == "bool":
        return [False, True]
    if base == "str":
        return []
    return [v if base == "float" else int(v) for v in (p.min, p.max) if v is not None]


def edges(ch: Chapter) -> list[tuple[str, dict[str, Any]]]:
    """``(label, overrides)`` for each declared end of each parameter (see the module docstring)."""
    out = []
    for p in ch.params.values():
        for v in _ends(p):
            if p.type.endswith("_list"):
                out.append((f"{p.name}=[{v}]", {p.name: [v]}))
            else:
                out.append((f"{p.name}={v}", {p.name: v}))
        if p.type.endswith("_list") and p.max_len and p.min is not None and p.max is not None:
            lo, hi = p.min, p.max
            items = sorted({lo + (hi - lo) * i / max(1, p.max_len - 1) for i in range(p.max_len)})
            items = [int(round(x)) if p.type == "int_list" else x for x in items]
            out.append((f"{p.name}: {len(items)} items", {p.name: items}))
    return out


def strategy(ch: Chapter):
    """A hypothesis strategy of override dicts within the declared types and ranges."""
    from hypothesis import strategies as st

    def scalar(p: Param):
        base = p.type.removesuffix("_list")
        if p.choices is not None:
            return st.sampled_from(list(p.choices))
        if base == "bool":
            return st.booleans()
        if base == "int":
            return st.integers(int(p.min) if p.min is not None else -BIG, int(p.max) if p.max is not None else BIG)
        if base == "float":
            return st.floats(p.min if p.min is not None else -1e9, p.max if p.max is not None else 1e9,
                             allow_nan=False, allow_infinity=False)
        return st.text(min_size=1, max_size=8)

    smoke = ch.resolve("smoke")

    def near(p: Param, v: Any):
        """Values around the smoke profile's ``v`` (a quarter to four times it, within the range):
        most of the declared space is far too costly for a fuzz run, and the guard would refuse it all."""
        base = p.type.removesuffix("_list")
        if p.choices is not None or base not in ("int", "float") or not isinstance(v, (int, float)) or v == 0:
            return scalar(p)
        lo, hi = (p.min if p.min is not None else -math.inf), (p.max if p.max is not None else math.inf)

        def scale(f: float) -> Any:
            x = min(max(v * f, lo), hi)
            return int(round(x)) if base == "int" else float(x)
        return st.floats(0.25, 4.0).map(scale)

    fields = {}
    for p in ch.params.values():
        v = smoke[p.name]
        if p.type.endswith("_list"):
            item = st.one_of(near(p, v[0]) if v else scalar(p), scalar(p)) if v else scalar(p)
            s = st.lists(item, min_size=1, max_size=p.max_len or max(len(v), 1) + 2, unique=p.unique)
        else:
            s = st.one_of(near(p, v), near(p, v), near(p, v), scalar(p))     # mostly near smoke, sometimes anywhere
        fields[p.name] = s
    return st.fixed_dictionaries({}, optional=fields)


def try_point(ch: Chapter, overrides: dict[str, Any], budget_seconds: float, execute: bool = True) -> tuple[int, str]:
    """``(exit code, what happened)`` of the smoke profile with ``overrides`` (module docstring); with
    ``execute=False`` a point that passes validation and the guard is ``(0, "validated only")``."""
    try:
        params = ch.resolve("smoke", overrides)
    except ParamError as e:
        return 2, f"refused: {str(e)[:160]}"
    est = cost.estimate(ch, params)
    avail = cost.available_mb()
    if est.seconds > budget_seconds or (avail is not None and est.memory_mb > avail):
        return 2, f"cost guard: {est.describe()}"
    if execute and est.memory_mb > CAP_MB / 2:        # the address space holds more than the data: keep room
        return 2, f"above this harness's memory cap ({CAP_MB} MiB address space): {est.describe()}"
    if not execute:
        return 0, "validated only"
    try:
        with memory_cap():
            checks = mutation.execute_chapter(ch.id, "smoke", overrides)
    except MemoryError:
        return 1, f"MemoryError: above {CAP_MB} MiB, where the cost model estimated {est.memory_mb:,.0f} MiB"
    except Exception as e:  # noqa: BLE001 - what `posbias run` reports as exit 1
        where = traceback.extract_tb(e.__traceback__)[-1]
        return 1, f"raised {type(e).__name__}: {str(e)[:200]} at {where.filename}:{where.lineno}"
    failed = mutation.failed_checks(checks)
    return (3 if failed else 0), ("failed " + ", ".join(failed) if failed else f"{len(checks)} checks passed")
