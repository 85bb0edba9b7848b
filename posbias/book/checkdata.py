"""``posbias check-data``: every committed result matches its manifest hash, and a cheap sample recomputes.

Every result of ``data/`` (all but the test suite's run records in ``data/mutants/``) is checked against
``data/manifest.json`` and its embedded result hash (:func:`verify_data`), its parameters must hash to its
file name, and a trained unit's summary must be what its sittings say (:func:`summary_problem`). Then, per
experiment with a registered recomputation (:data:`posbias.storage.recompute.RECOMPUTE`, filled by
``@recomputable`` in the module that owns the compute), the ``sample`` cheapest records by estimated cost (the
stored wall time; ties by file name, so the choice is deterministic) are recomputed with the committed code,
cheapest first, while the estimated total stays within ``budget_seconds`` (``recompute_all`` lifts both
limits). A recomputation runs with the torch thread count its record was made with
(``provenance.torch_threads``, also exported as ``$POSBIAS_THREADS``) and is compared with the stored result
within the experiment's stated tolerance.

Exit status 0 when every hash verifies and every recomputed record agrees, else 3.
"""
from __future__ import annotations

import contextlib
import importlib
import json
import math
import os
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Iterator

from posbias.storage import parking, store
from posbias.storage.recompute import RECOMPUTE, Recompute, recomputable
from posbias.storage.provenance import (SUMMARY_PROBLEM, cpu_info, host_kind, is_gpu, record_threads, sitting_device,
                                        summary_contradictions, summary_problem)

__all__ = ["check_data", "run_checks", "compare", "close", "Row", "NOT_RECOMPUTABLE", "wu_unit_record", "host_kinds",
           "summary_problem", "SUMMARY_PROBLEM", "RECORDS_DIR", "result_files"]

#: The folder of ``data/`` that holds run records of the test suite (mutmut's runs and the mutation suite's kill
#: table, :mod:`posbias.book.teeth`), not results: no manifest entry, no provenance, nothing to recompute.
RECORDS_DIR = "mutants"

# modules that register recomputations with @recompute.recomputable (importing them registers)
_MODULES = ("posbias.analysis.lnruns", "posbias.llm", "posbias.analysis.jump")

#: Experiments in data/ without a registered recomputation, and why. (sinks-streaming and
#: lost-in-the-middle are recomputed through llm.streaming_chapter and llm.retrieval_chapter.)
NOT_RECOMPUTABLE: dict[str, str] = {
    "wu-weights": "kept weights (and parked retrainings of them): hash-checked, and tied by their metadata to the "
                  "committed wu-units record of the network they keep, which is recomputed as a record",
    "wu-jump": "a network trained again with its weights kept every 25,000 iterations (posbias.analysis.jump): "
               "hash-checked, each file's metadata tied to its folder's run key; `posbias jump` trains it again from "
               "its seed"}


# --------------------------------------------------------------------------- wu-units


def _wall_time_consistent(rec: dict[str, Any]) -> bool:
    """A result that measured its own training (``train_seconds_ensemble``, work done before
    :func:`cached` was called) must carry that time as its provenance's ``wall_seconds``."""
    res, wall = rec.get("result"), rec["provenance"].get("wall_seconds")
    if not isinstance(res, dict) or "train_seconds_ensemble" not in res:
        return True
    return isinstance(wall, (int, float)) and abs(wall - round(float(res["train_seconds_ensemble"]), 3)) < 1e-9


def result_files(data: Path) -> list[str]:
    """The stored results' JSON files under ``data`` (paths relative to it, sorted): every ``*.json`` but the
    manifest and the test suite's run records in :data:`RECORDS_DIR`."""
    return sorted(str(p.relative_to(data)) for p in Path(data).rglob("*.json")
                  if p.name != "manifest.json" and p.relative_to(data).parts[0] != RECORDS_DIR)


def verify_data(log=print) -> list[str]:
    """Check every file of ``data/`` against the manifest; returns the list of problems (empty = fine).

    Files present but not in the manifest, manifest entries without a file, hash mismatches,
    committed checkpoints missing a part, damaged records, a provenance wall time other than the
    training time the result measured, and a summary that contradicts its sittings
    (:func:`summary_problem`) are problems. (``posbias check-data`` then recomputes a sample:
    :mod:`posbias.book.checkdata`.)
    """
    problems = []
    manifest = store.load_manifest()
    on_disk = set(result_files(store.DATA))
    on_disk |= {str(p.relative_to(store.DATA)) for p in parking.parked_files()}
    on_disk |= {str(p.relative_to(store.DATA)) for p in store.DATA.rglob("*.safetensors")}
    for name in sorted(set(manifest) | on_disk):
        path = store.DATA / name
        if name not in manifest:
            problems.append(f"{name}: not in data/manifest.json")
        elif not path.exists():
            problems.append(f"{name}: listed in the manifest but missing")
        elif store.file_hash(path) != manifest[name]:
            problems.append(f"{name}: SHA-256 differs from the manifest")
        elif name.startswith(f"{parking.PARKED_DIR}/"):
            if parking.whole_of(path) is None:
                problems.append(f"{name}: not a part of a committed checkpoint (<key>.<i>-of-<n>.pt)")
            else:               # a part of a parked checkpoint: its hash is all there is to check
                log(f"ok  {name} (part of a checkpoint of unfinished work)")
        elif name.endswith(".safetensors") and name.startswith("wu-jump/"):
            from posbias.training import snapshots  # lazy: torch

            if (why := snapshots.file_problem(name)) is not None:
                problems.append(f"{name}: {why}")
            else:
                log(f"ok  {name} (weights kept along training)")
        elif name.endswith(".safetensors"):
            from posbias.training import weights  # lazy: torch

            if (why := weights.file_problem(name)) is not None:
                problems.append(f"{name}: {why}")
            else:
                log(f"ok  {name} (kept weights)")
        else:
            rec = json.loads(path.read_text())
            if store.result_hash(rec.get("result")) != rec.get("result_sha256"):
                problems.append(f"{name}: embedded result hash mismatch")
            elif "provenance" not in rec:
                problems.append(f"{name}: no provenance")
            elif not _wall_time_consistent(rec):
                problems.append(f"{name}: provenance wall_seconds {rec['provenance'].get('wall_seconds')} is not the "
                                f"training time the result measured ({rec['result']['train_seconds_ensemble']} s)")
            elif (why := summary_problem(rec)) is not None:
                problems.append(f"{name}: {why}")
            else:
                log(f"ok  {name}")
    reported = {p.partition(": ")[0] for p in problems}
    for target in parking.parked_checkpoints():  # each committed checkpoint must be whole: all its parts, all listed
        if any(parking.whole_of(store.DATA / name) == target for name in reported):
            continue                         # a part's own problem says it already
        if (why := parking.parts_problem(target, manifest)) is not None:
            problems.append(f"{target.relative_to(store.DATA)}: {why}")
    return problems


def _weights_summary(path: Path) -> str | None:
    """A note where kept weights' provenance contradicts its sittings: told, not failed, since the
    weights kept before issue 95 carry the keeping process's summary and are left as they are."""
    from posbias.training.weights import metadata

    try:
        found = summary_contradictions(metadata(path)["provenance"])
    except (OSError, ValueError, KeyError):
        return None                     # unreadable weights are verify_data's problem
    if not found:
        return None
    return ("the summary in their provenance is the keeping process's, not their sittings' (kept before "
            "summaries were derived, issue 95): " + ", ".join(dict.fromkeys(f for f, _ in found)))


def wu_unit_record(params: dict[str, Any]) -> dict[str, Any]:
    """The stored result of one ``wu-units`` record: ``train.train_units([unit])[0]``.

    This is the compute ``train.run_campaign`` stores (a unit trained alone; an ensemble of several
    units gives each member bit-for-bit the same result). The unit is rebuilt from its stored
    parameters and must give them back exactly (``Unit.params``), else it cannot be recomputed.
    """
    from posbias import training as train  # lazy: posbias.training (torch) costs ~1.5s at import
    try:
        unit = train.Unit.from_params(params)
    except ValueError as e:
        raise ValueError(f"{e}: this record cannot be recomputed") from None
    return train.train_units([unit], progress=False)[0]


def host_kinds(experiment: str = "wu-units", data: Path | None = None) -> dict[str, int]:
    """How many of ``experiment``'s committed records (``data/<experiment>/*.json``) were computed on
    each kind of host (:func:`posbias.storage.provenance.host_kind`), most first: a record reproduces bit
    for bit only on a host of its kind, at its thread count."""
    folder = (store.DATA if data is None else data) / experiment
    counts = Counter(host_kind(json.loads(p.read_text(encoding="utf-8")).get("provenance") or {})
                     for p in sorted(folder.glob("*.json")))
    return dict(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))


def _wu_cost(record: dict[str, Any]) -> float:
    # A unit is recomputed alone: charge it its share of the ensemble it trained in (the provenance's
    # wall time is the whole ensemble's, or ~0 for units stored before store.cached took wall_seconds).
    res = record.get("result", {})
    return float(res.get("train_seconds_ensemble", 0.0)) / max(1, res.get("ensemble_size", 1))


recomputable(
    "wu-units", atol=1e-6, ignore=("train_seconds_ensemble", "ensemble_size", "splits"), cost=_wu_cost,
    tolerance_note=("bit-identical at the stored thread count (1); on 2 threads the float32 attention maps "
                    "differ by <= 3e-8 (reduction order), so 1e-6 absolute"),
    other_cpu_atol=0.05,
    other_cpu_note=("training amplifies the last-bit roundings of another CPU's kernels step by step: two CPUs "
                    "give two slightly different networks, whose accuracies agree only to the sampling noise "
                    "of the test sets (1 SE is 0.011 at 2,000 sequences); 0.05 absolute is a sanity bound"),
)(wu_unit_record)


# --------------------------------------------------------------------------- comparison

def _is_num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


@dataclass
class Comparison:
    max_abs: float = 0.0
    ok: bool = True
    notes: list[str] = field(default_factory=list)

    def fail(self, note: str) -> None:
        self.ok = False
        if len(self.notes) < 5:
            self.notes.append(note)


def compare(fresh: Any, stored: Any, atol: float = 0.0, rtol: float = 0.0,
            ignore: Iterable[str] = ()) -> Comparison:
    """Compare a fresh result with a stored one: numbers within ``atol + rtol |stored|``, all else equal.

    Keys and list lengths must match; NaN equals NaN. Top-level keys in ``ignore`` are skipped. Keys
    the fresh result has and the stored one lacks (fields added later, additively) are noted, not failed.
    """
    out = Comparison()
    ignore = set(ignore)

    def walk(f: Any, s: Any, where: str, top: bool = False) -> None:
        if isinstance(s, dict) and isinstance(f, dict):
            skip = ignore if top else set()
            for k in s:
                if k in skip:
                    continue
                if k not in f:
                    out.fail(f"{where}.{k}: missing from the fresh result")
                else:
                    walk(f[k], s[k], f"{where}.{k}")
            extra = sorted(set(f) - set(s) - skip)
            if extra:
                out.notes.append(f"fresh result adds {', '.join(where + '.' + k for k in extra)} (not stored)")
        elif isinstance(s, list) and isinstance(f, list):
            if len(f) != len(s):
                out.fail(f"{where}: length {len(f)} vs stored {len(s)}")
                out.max_abs = math.inf
                return
            for i, (a, b) in enumerate(zip(f, s)):
                walk(a, b, f"{where}[{i}]")
        elif _is_num(s) and _is_num(f):
            if isinstance(s, float) and isinstance(f, float) and math.isnan(s) and math.isnan(f):
                return
            if s == f:
                return
            d = abs(f - s)
            if math.isnan(d):
                d = math.inf
            out.max_abs = max(out.max_abs, d)
            if not d <= atol + rtol * abs(s):
                out.fail(f"{where}: {f!r} vs stored {s!r}")
        elif f != s:
            out.max_abs = math.inf if _is_num(s) or _is_num(f) else out.max_abs
            out.fail(f"{where}: {f!r} vs stored {s!r}")

    walk(fresh, stored, "result", top=True)
    return out


def close(a: Any, b: Any, rtol: float = 1e-6, atol: float = 1e-9) -> bool:
    """Nested lists/dicts of numbers equal within tolerance (same shape and keys)."""
    c = compare(a, b, atol=atol, rtol=rtol)
    return c.ok and not any(n.startswith("fresh result adds") for n in c.notes)


# --------------------------------------------------------------------------- the checks

@dataclass
class Row:
    file: str
    experiment: str
    recomputed: str = "no"          # yes | no | budget | unregistered | device | checkpoint | weights | error
    max_abs: float | None = None
    tolerance: str = "-"
    verdict: str = "ok"
    seconds: float | None = None
    estimate: float | None = None
    hash_ok: bool = True
    notes: list[str] = field(default_factory=list)

    @property
    def bad(self) -> bool:
        return not self.verdict.startswith("ok")


def _cpu_name(cpu: dict[str, Any]) -> str:
    return (f"{cpu.get('model_name')}, family {cpu.get('family')} model {cpu.get('model')}, "
            f"torch {cpu.get('torch_capability')}")


def _tolerance(spec: Recompute) -> str:
    if spec.atol == 0 and spec.rtol == 0:
        return "exact"
    parts = ([f"abs {spec.atol:g}"] if spec.atol else []) + ([f"rel {spec.rtol:g}"] if spec.rtol else [])
    return " + ".join(parts)


def _import_registrations() -> None:
    for name in _MODULES:
        try:
            importlib.import_module(name)
        except ImportError as e:  # pragma: no cover - a broken module is reported, not fatal
            print(f"warning: cannot import {name} ({e}); its experiments are not recomputed", file=sys.stderr)


@contextlib.contextmanager
def _threads(n: int | None) -> Iterator[None]:
    """Run with ``n`` torch threads (and ``$POSBIAS_THREADS``), restoring both afterwards."""
    import torch  # lazy: torch costs ~1.4s at import

    before, env = torch.get_num_threads(), os.environ.get("POSBIAS_THREADS")
    try:
        if n:
            torch.set_num_threads(int(n))
            os.environ["POSBIAS_THREADS"] = str(int(n))
        yield
    finally:
        torch.set_num_threads(before)
        if env is None:
            os.environ.pop("POSBIAS_THREADS", None)
        else:
            os.environ["POSBIAS_THREADS"] = env


def _elsewhere(prov: dict[str, Any]) -> str | None:
    """Why a record's bits need not be this CPU's, or None where all of it was computed on this CPU:
    every sitting counts (a unit may begin on a GPU or another host and finish here), and a record
    without sittings is one sitting, its provenance's."""
    here, sittings = cpu_info(), prov.get("sittings") or [prov]

    def of(k: int) -> str:
        return "" if k == len(sittings) else f" in {k} of its {len(sittings)} sittings"

    gpu = [s for s in sittings if is_gpu(sitting_device(s, prov))]
    if gpu:
        name = gpu[0].get("device_name") or prov.get("device_name") or "a GPU"
        return f"computed on {sitting_device(gpu[0], prov)} ({name}){of(len(gpu))}, recomputed on this CPU"
    cpus = [s.get("cpu", prov.get("cpu")) for s in sittings]
    if any(c is None for c in cpus):
        return "computed on a CPU its provenance does not name"
    other = [c for c in cpus if c != here]
    if other:
        return f"computed on another CPU ({_cpu_name(other[0])}; this one: {_cpu_name(here)}){of(len(other))}"
    return None


def _recompute(row: Row, rec: dict[str, Any], spec: Recompute) -> None:
    why = _elsewhere(rec.get("provenance", {}))
    if why is not None:
        spec = spec.across_cpus()       # a GPU's kernels round differently too: the same, stated tolerance
        row.tolerance = _tolerance(spec)
        row.notes.append(why + f": compared within {row.tolerance}"
                         + (f" ({spec.tolerance_note})" if spec.tolerance_note else ""))
    t0 = time.perf_counter()
    try:
        with _threads(record_threads(rec.get("provenance", {}))):
            fresh = json.loads(json.dumps(store.to_jsonable(spec(rec["params"]))))
    except Exception as e:  # noqa: BLE001 - any failure to reproduce is reported
        row.recomputed, row.verdict = "error", f"FAIL: recomputation raised {type(e).__name__}: {e}"
        row.seconds = time.perf_counter() - t0
        return
    row.seconds = time.perf_counter() - t0
    row.recomputed = "yes"
    c = compare(fresh, rec["result"], atol=spec.atol, rtol=spec.rtol, ignore=spec.ignore)
    row.max_abs = c.max_abs
    row.notes += c.notes
    row.verdict = "ok" if c.ok else "FAIL: differs from the committed result"


def run_checks(sample: int = 2, budget_seconds: float = 120.0, recompute_all: bool = False,
               experiments: Iterable[str] | None = None, log=print) -> list[Row]:
    """Verify every file of ``data/`` and recompute the chosen sample; one :class:`Row` per file."""
    _import_registrations()
    wanted = set(experiments) if experiments else None
    data = Path(store.DATA)
    problems = verify_data(log=lambda *a: None)
    bad_hash: dict[str, str] = {}
    rows: list[Row] = []
    for p in problems:
        name, _, why = p.partition(": ")
        bad_hash[name] = why
    names = sorted(set(result_files(data)) | {str(p.relative_to(data)) for p in parking.parked_files()}
                   | {str(p.relative_to(data)) for p in data.rglob("*.safetensors")} | set(bad_hash))
    records: dict[str, dict[str, Any]] = {}
    for name in names:
        exp = name.split("/", 1)[0]
        row = Row(name, exp)
        rows.append(row)
        if name in bad_hash:        # a summary that contradicts its sittings is no fault of the file's hash
            row.verdict, row.hash_ok = f"FAIL: {bad_hash[name]}", bad_hash[name].startswith(SUMMARY_PROBLEM)
            continue
        if name.endswith(".pt"):        # a parked checkpoint of unfinished training: nothing to recompute
            row.recomputed = "checkpoint"
            row.notes.append("checkpoint of unfinished work; hash-checked only")
            continue
        if name.endswith(".safetensors"):   # kept weights: hash, metadata and record checked above
            row.recomputed = "weights"
            row.notes.append("kept weights; their record is recomputed as a record")
            if (why := _weights_summary(data / name)) is not None:
                row.notes.append(why)
            continue
        rec = json.loads((data / name).read_text())
        row.experiment = exp = rec.get("experiment", exp)
        expected = f"{exp}/{store.key_of(exp, rec.get('params', {}), rec.get('version', ''))}.json"
        if expected != name:
            row.verdict, row.hash_ok = (
                f"FAIL: its experiment, params and version hash to {expected}, not to its file name", False)
            continue
        spec = RECOMPUTE.get(exp)
        if spec is None:
            row.recomputed = "unregistered"
            continue
        row.tolerance = _tolerance(spec)
        row.estimate = spec.estimate(rec)
        if rec["params"].get("_device") not in (None, "cpu"):
            row.recomputed = "device"
            row.notes.append(f"computed on {rec['params']['_device']}; check-data recomputes CPU records only")
            continue
        if wanted is None or exp in wanted:
            records[name] = rec

    # the plan: per experiment its `sample` cheapest records, then cheapest first within the budget
    by_exp: dict[str, list[Row]] = {}
    for row in rows:
        if row.file in records:
            by_exp.setdefault(row.experiment, []).append(row)
    ranked = []
    for exp, rs in by_exp.items():
        rs.sort(key=lambda r: (r.estimate, r.file))
        for rank, r in enumerate(rs if recompute_all else rs[:max(0, sample)]):
            ranked.append((rank, r.estimate, r.file, r))
    ranked.sort(key=lambda t: t[:3])
    spent, chosen = 0.0, []
    for _, est, _, r in ranked:
        if recompute_all or spent + est <= budget_seconds:
            chosen.append(r)
            spent += est
        else:
            r.recomputed = "budget"
            r.notes.append(f"estimated {est:.0f} s; {max(0.0, budget_seconds - spent):.0f} s of the budget left")
    for i, r in enumerate(chosen, 1):
        log(f"[{i}/{len(chosen)}] recomputing {r.file} (estimated {r.estimate:.1f} s) ...")
        _recompute(r, records[r.file], RECOMPUTE[r.experiment])
    return rows


def _fmt_diff(x: float | None) -> str:
    if x is None:
        return "-"
    return "0" if x == 0 else f"{x:.2e}"


def print_table(rows: list[Row], out=None, brief: bool = False) -> None:
    out = out or sys.stdout
    head = ("file", "experiment", "recomputed", "max|diff|", "tolerance", "verdict", "seconds")
    shown = [r for r in rows if not brief or r.recomputed != "no" or r.bad]
    cells = [(r.file, r.experiment, r.recomputed, _fmt_diff(r.max_abs), r.tolerance, r.verdict,
              "-" if r.seconds is None else f"{r.seconds:.1f}") for r in shown]
    width = [max(len(c[i]) for c in [head, *cells]) for i in range(len(head))]
    line = lambda c: "  ".join(x.ljust(w) for x, w in zip(c, width)).rstrip()  # noqa: E731
    print(line(head), file=out)
    print(line(tuple("-" * w for w in width)), file=out)
    for c in cells:
        print(line(c), file=out)
    if brief and len(shown) < len(rows):
        print(f"... and {len(rows) - len(shown)} more files whose hashes verify (not recomputed)", file=out)


def check_data(sample: int = 2, budget_seconds: float = 120.0, recompute_all: bool = False,
               experiments: Iterable[str] | None = None, brief: bool = False) -> int:
    """``posbias check-data``: print the table and a summary; 0 if everything verifies and agrees, else 3."""
    t0 = time.perf_counter()
    rows = run_checks(sample, budget_seconds, recompute_all, experiments,
                      log=lambda m: print(m, file=sys.stderr, flush=True))
    print_table(rows, brief=brief)
    print()
    for r in rows:
        for n in r.notes:
            print(f"note: {r.file}: {n}")
    for exp in sorted({r.experiment for r in rows if r.recomputed == "unregistered"}):
        print(f"note: {exp}: not recomputable: {NOT_RECOMPUTABLE.get(exp, 'no @recomputable registration')}")
    for exp, spec in sorted(RECOMPUTE.items()):
        if spec.tolerance_note and any(r.experiment == exp and r.recomputed == "yes" and r.tolerance == _tolerance(spec)
                                       for r in rows):      # rows from another CPU explain their tolerance in a note
            print(f"tolerance: {exp}: {_tolerance(spec)} ({spec.tolerance_note})")
    bad = [r for r in rows if r.bad]
    n_re = sum(r.recomputed == "yes" for r in rows)
    print(f"check-data: {sum(r.hash_ok for r in rows)} of {len(rows)} files verify against the manifest, "
          f"{n_re} recomputed, {len(bad)} problem(s), {time.perf_counter() - t0:.0f} s")
    if bad:
        print("check-data FAILED:", file=sys.stderr)
        for r in bad:
            print(f"  {r.file}: {r.verdict}" + (f" ({'; '.join(r.notes)})" if r.notes else ""), file=sys.stderr)
        return 3
    return 0
