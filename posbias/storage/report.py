"""What a chapter reports: numerical checks, glued values, data it read, progress bars.

Inside ``posbias run`` the kernel has ``POSBIAS_RUN_DIR`` set; every call here is also written to
``$POSBIAS_RUN_DIR/_record.json``, from which the runner assembles ``results.json``. Outside a run
(an interactive session) the calls only display.
"""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any, Iterable

from tqdm import tqdm as plain

from posbias.storage import store
from posbias.storage.store import atomic_write_text, to_jsonable

__all__ = ["check", "value", "note_data", "progress", "record", "summary", "plain_table", "show_markdown",
           "human_seconds"]

_RECORD: dict[str, Any] = {"checks": [], "values": {}, "data": [], "figures": []}


def _run_dir() -> Path | None:
    d = os.environ.get("POSBIAS_RUN_DIR")
    return Path(d) if d else None


def _flush() -> None:
    d = _run_dir()
    if d is not None:
        atomic_write_text(d / "_record.json", json.dumps(to_jsonable(_RECORD), indent=1, sort_keys=True))


def record() -> dict[str, Any]:
    """The checks, values, data files and figures recorded so far in this process."""
    return _RECORD


def _in_notebook() -> bool:
    try:
        from IPython import get_ipython  # optional dependency

        return get_ipython() is not None and "IPKernelApp" in get_ipython().config
    except Exception:  # noqa: BLE001
        return False


def show_markdown(text: str) -> None:
    """``text`` as Markdown in a notebook, printed elsewhere."""
    if _in_notebook():
        from IPython.display import Markdown, display  # optional dependency

        display(Markdown(text))
    else:
        print(text)


def _short(v: Any) -> str:
    if isinstance(v, dict):
        return "; ".join(f"{k} = {_short(x)}" for k, x in v.items())
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, (list, tuple)) and len(v) > 6:
        return "[" + ", ".join(_short(x) for x in v[:6]) + ", ...]"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_short(x) for x in v) + "]"
    return str(v)


def check(name: str, claim: str, value: Any, expected: Any, passed: bool) -> None:
    """Record a numerical check and show a pass/fail line.

    ``value`` is what was measured, ``expected`` what the derivation predicts (a number, a bound such
    as ``"< 1e-9"``, or a description), ``passed`` the comparison the caller made. A failure does not
    raise: the chapter finishes, ``posbias run`` exits 3 and ``posbias build`` stops.
    """
    passed = bool(passed)
    if any(c["name"] == name for c in _RECORD["checks"]):
        raise ValueError(f"check {name!r} recorded twice; give each check its own name")
    entry = {"name": name, "claim": claim, "passed": passed, "value": to_jsonable(value),
             "expected": to_jsonable(expected)}
    _RECORD["checks"].append(entry)
    _flush()
    mark = "{bdg-success}`PASS`" if passed else "{bdg-danger}`FAIL`"
    show_markdown(f"{mark} `{name}`: {claim}. Measured {_short(entry['value'])}; "
                      f"expected {_short(entry['expected'])}.")


def value(name: str, v: Any, display: bool = False) -> Any:
    """Record a number for ``results.json`` and glue it for the prose (``{glue:text}`name```)."""
    if getattr(v, "ndim", None) == 0 and hasattr(v, "item"):
        v = v.item()  # numpy/torch scalars glue as plain numbers, so {glue:text}`name:.3f` formats them
    _RECORD["values"][name] = to_jsonable(v)
    _flush()
    if _in_notebook():
        from myst_nb import glue  # optional dependency

        glue(name, v, display=display)
    return v


def skipped(name: str, why: str) -> None:
    """A check that cannot be decided at these settings: its reason is recorded as ``<name>-skipped`` and
    printed, and nothing is passed."""
    value(f"{name}-skipped", why)
    print(f"SKIPPED {name}: {why}")


def note_data(path: str, sha256: str, source: str) -> None:
    """Record that the chapter read a stored result (``source`` is ``committed`` or ``cache`` or ``computed``)."""
    # One entry per file: a result computed and then read back from the cache is listed once, as computed.
    if any(d["path"] == path and d["sha256"] == sha256 for d in _RECORD["data"]):
        return
    _RECORD["data"].append({"path": path, "sha256": sha256, "source": source})
    _flush()


store.on_read(note_data)            # the store reports its reads here; it imports nothing above itself


def note_figure(entry: dict[str, Any]) -> None:
    _RECORD["figures"].append(entry)
    _flush()


def _watched(stream: Any) -> bool:
    """Whether someone watches ``stream``: a terminal (not a file, a pipe or a log)."""
    try:
        return stream is not None and stream.isatty()
    except (AttributeError, ValueError):   # no isatty, or a closed stream
        return False


def progress(iterable: Iterable | None = None, *, total: int | None = None, desc: str = "", **kw: Any):
    """A tqdm bar with an estimate where someone watches it: a widget in Jupyter, text on a terminal's stderr.

    Elsewhere it is a disabled bar (iterating, ``update`` and ``close`` work; nothing is shown): inside
    ``posbias run`` (its executed notebook is a page of the book, and the runner's terminal shows
    papermill's bar over the cells), with ``POSBIAS_NO_PROGRESS=1``, and when stderr is no terminal
    (a log, a pipe, CI). So no progress text reaches a built page or a log.
    """
    silent = (bool(os.environ.get("POSBIAS_RUN_DIR")) or os.environ.get("POSBIAS_NO_PROGRESS") == "1"
              or not (_in_notebook() or _watched(sys.stderr)))
    if silent:
        return plain(iterable, total=total, desc=desc, disable=True, **kw)
    from tqdm.auto import tqdm  # a widget in Jupyter; imported only here (it warns when widgets are missing)

    return tqdm(iterable, total=total, desc=desc, **kw)


def summary() -> str:
    """One line: how many checks passed."""
    n = len(_RECORD["checks"])
    ok = sum(c["passed"] for c in _RECORD["checks"])
    return f"{ok}/{n} checks passed"


def table(rows: Any, precision: int = 3) -> Any:
    """A table for a page: a ``DataFrame`` (or a list of row dicts) styled without its index, floats shown to
    ``precision`` decimals (the HTML book shows it styled, the PDF book as :func:`plain_table`)."""
    import pandas as pd  # lazy: pandas costs ~0.5s at import

    df = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    return df.style.hide(axis="index").format(precision=precision)


def plain_table(styler: Any) -> str:
    """A pandas ``Styler`` as aligned plain text, with its formats and hidden index applied: what a
    table shows where HTML cannot be used (the PDF book). Columns are left-aligned, two spaces apart."""
    rows = [line.split("\t") for line in styler.to_string(delimiter="\t").splitlines()]
    width = [max(len(r[i]) if i < len(r) else 0 for r in rows) for i in range(max(map(len, rows), default=0))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, width)).rstrip() for r in rows)


def _plain_styler_in_notebooks() -> None:
    """Give pandas ``Styler`` a plain-text form in a notebook kernel (:func:`plain_table`) instead of
    ``<pandas.io.formats.style.Styler at 0x...>``: the HTML book shows the styled table, the PDF book
    (which drops HTML) this text. Registered lazily, without importing pandas."""
    try:
        from IPython import get_ipython  # optional dependency
    except ImportError:
        return
    ip = get_ipython()
    if ip is None:
        return
    ip.display_formatter.formatters["text/plain"].for_type_by_name(
        "pandas.io.formats.style", "Styler", lambda obj, p, cycle: p.text(plain_table(obj)))


_plain_styler_in_notebooks()


def human_seconds(s: float) -> str:
    """``45 s``, ``12 min``, ``3.4 h``, ``2.5 days``."""
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.0f} min"
    if s < 2 * 86400:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:,.1f} days"
