"""What a figure is made of: the stored results it draws and the settings they were made with.

A figure drawn from stored results is cited by the settings of those results (iterations, seeds,
test sizes, how many networks), not by the parameters of the run that drew it. :func:`data_files`
names the files of the results a figure draws; :func:`settings` reads those files and summarises
their parameters per experiment; :func:`describe` writes that summary as the words a citation
carries; :func:`list_hash` is a short SHA-256 of the list of files. ``figures.save`` embeds all three
in the figure's metadata and the citation entry is written from that one record.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Iterable

from posbias.storage import store
from posbias.storage.provenance import ROOT
from posbias.storage.store import CACHE_PREFIX

__all__ = ["data_files", "stored_file", "settings", "describe", "list_hash", "portable", "record", "CACHE_PREFIX"]

#: Parameters of a trained network that say what it is made of, in the order a citation gives them.
_UNIT_SETTINGS = (("steps", "iterations"), ("seed", "seeds"), ("n_test", "test sequences per set"),
                  ("n_sweep", "sequences per sweep slot"), ("n_sink", "sequences for attention"),
                  ("test_seed", "test draw"), ("depth", "layers"))


def _results(obj: Any) -> Iterable[dict[str, Any]]:
    """Every stored unit result (or file entry, :func:`stored_file`) inside ``obj`` (a result, or
    lists/dicts of them; None skipped)."""
    if isinstance(obj, dict) and (isinstance(obj.get("params"), dict) or {"path", "sha256"} <= set(obj)):
        yield obj
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _results(v)
    elif isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _results(v)


def data_files(results: Any) -> list[dict[str, str]]:
    """The stored files (``{"path", "sha256"}``, committed ones as ``data/...``, cached ones as
    ``<cache>/...``) of the trained-network results in ``results`` (a result, a campaign's
    label -> results mapping, or any nesting of them), each once, in a stable order."""
    from posbias.training.units import UNIT_EXPERIMENT, VERSION  # lazy: posbias.training (torch) costs ~1.5s at import

    out: dict[str, dict[str, str]] = {}
    for r in _results(results):
        if "params" not in r:                       # a file entry already
            out[r["path"]] = {"path": r["path"], "sha256": r["sha256"]}
            continue
        name = store.result_name(UNIT_EXPERIMENT, r["params"], VERSION)
        committed = store.DATA / name
        path, shown = (committed, f"data/{name}") if committed.exists() else (store.cache_dir() / name,
                                                                              CACHE_PREFIX + name)
        if not path.exists():
            raise FileNotFoundError(f"a figure draws a result whose file is neither in data/ nor in the cache: {name}")
        out[shown] = {"path": shown, "sha256": store.file_hash(path)}
    return [out[k] for k in sorted(out)]


def stored_file(experiment: str, params: dict[str, Any], version: int | str = 1) -> dict[str, str]:
    """The file entry of the stored result ``(experiment, params, version)`` (``data/...`` when committed,
    else ``<cache>/...``): for a figure that draws another experiment's result beside trained networks
    (``data_files`` passes such entries through). A result that is not stored is an error: a figure
    must not claim a file it cannot name."""
    name = store.result_name(experiment, params, version)
    for path, shown in ((store.DATA / name, f"data/{name}"), (store.cache_dir() / name, CACHE_PREFIX + name)):
        if path.exists():
            return {"path": shown, "sha256": store.file_hash(path)}
    raise FileNotFoundError(f"a figure draws {experiment} ({name}), which is neither in data/ nor in the cache: "
                            "compute and store it before the figure is saved")


def portable(entries: list[dict[str, str]]) -> list[dict[str, str]]:
    """``entries`` (a run's data list) with user-cache paths written as ``<cache>/...``, ``path`` and
    ``sha256`` only: what a figure's metadata may publish."""
    return [{"path": store.shown_path(e["path"]), "sha256": e["sha256"]} for e in entries]


def record(entries: list[dict[str, str]]) -> dict[str, Any] | None:
    """What a figure's metadata says it is made of: ``files`` (count), ``list_sha256``, ``settings``
    and their ``words``; None when it draws no stored result."""
    if not entries:
        return None
    s = settings(entries)
    return {"files": len(entries), "list_sha256": list_hash(entries), "settings": s, "words": describe(s)}


def _read(entry: dict[str, str]) -> dict[str, Any] | None:
    p = entry["path"]
    path = store.cache_dir() / p[len(CACHE_PREFIX):] if p.startswith(CACHE_PREFIX) else Path(p)
    path = path if path.is_absolute() else ROOT / path
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _values(vs: list[Any]) -> list[Any]:
    return sorted({json.dumps(v, sort_keys=True) for v in vs})


def settings(entries: list[dict[str, str]]) -> dict[str, dict[str, Any]]:
    """Per experiment of the files in ``entries`` (``data_files`` or a run's data list): ``records``
    (how many files) and, per parameter, the sorted list of distinct values (JSON), so that a mix of
    settings shows as more than one value."""
    out: dict[str, dict[str, Any]] = {}
    for e in entries:
        rec = _read(e)
        if rec is None or not isinstance(rec.get("params"), dict):
            continue
        exp = out.setdefault(rec.get("experiment", "?"), {"records": 0, "params": {}})
        exp["records"] += 1
        for k, v in rec["params"].items():
            exp["params"].setdefault(k, []).append(v)
    return {x: {"records": s["records"], "params": {k: _values(v) for k, v in sorted(s["params"].items())}}
            for x, s in sorted(out.items())}


def _fmt(v: str) -> str:
    x = json.loads(v)
    return f"{x:,}" if isinstance(x, int) and not isinstance(x, bool) else json.dumps(x)


def _seeds(vs: list[str]) -> str:
    """Integers as a range ``0-4`` when consecutive (three or more), else listed."""
    xs = sorted(json.loads(v) for v in vs)
    if xs == list(range(xs[0], xs[-1] + 1)) and len(xs) > 2:
        return f"{xs[0]}-{xs[-1]}"
    return ", ".join(map(str, xs))


def describe(summary: dict[str, dict[str, Any]]) -> str:
    """``settings`` in words: for trained networks "N networks: 100,000 iterations; seeds 0-4; 10,000
    test sequences per set; ..."; "mixed: A or B" where the files differ; for other experiments the
    number of records and each parameter's value(s)."""
    parts = []
    for exp, s in summary.items():
        ps = s["params"]
        if exp == "wu-units":
            bits = []
            for key, words in _UNIT_SETTINGS:
                vs = ps.get(key)
                if not vs:
                    continue
                if key == "seed":
                    bits.append(f"seed{'s' if len(vs) > 1 else ''} {_seeds(vs)}")
                elif key == "depth":                # a design dimension, not a setting that can be mixed
                    bits.append(f"{_seeds(vs)} layers")
                elif key == "test_seed":
                    bits.append("test draw " + " or ".join(json.dumps(json.loads(v)) for v in vs)
                                + (" (mixed)" if len(vs) > 1 else ""))
                elif len(vs) == 1:
                    bits.append(f"{_fmt(vs[0])} {words}")
                else:
                    bits.append(f"{words} mixed: {' or '.join(_fmt(v) for v in vs)}")
            parts.append(f"{s['records']} trained network{'s' if s['records'] != 1 else ''}: " + "; ".join(bits))
        else:
            kv = "; ".join(f"{k} {' or '.join(_fmt(v) for v in vs)}" for k, vs in ps.items())
            parts.append(f"{exp}, {s['records']} stored result{'s' if s['records'] != 1 else ''}: {kv}")
    return " | ".join(parts)


def list_hash(entries: list[dict[str, str]]) -> str:
    """A short SHA-256 (12 hex) of the list of files (path and content hash, sorted)."""
    text = "\n".join(sorted(f"{e['path']} {e['sha256']}" for e in entries))
    return hashlib.sha256(text.encode()).hexdigest()[:12]
