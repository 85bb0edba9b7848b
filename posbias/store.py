"""One cache for expensive results, with provenance, that never lies.

A result is keyed by ``(experiment, canonical JSON of its parameters, code version)``. Lookup order:

1. ``data/<experiment>/<key>.json``: committed results, listed with their SHA-256 in
   ``data/manifest.json``. Read only when both the manifest hash and the embedded result hash match.
2. ``$POSBIAS_CACHE`` (default ``~/.cache/posbias``)``/<experiment>/<key>.json``: the user cache.
3. Otherwise the result is computed (under a lock, so two processes never compute or write the same
   key at once) and written atomically to the user cache; with ``POSBIAS_WRITE_DATA=1``
   (``posbias run --write-data``) it goes to ``data/`` and the manifest instead. With that switch
   a result already in the user cache is *promoted*: copied to ``data/`` as it is (its provenance
   still names the commit, machine and wall time that computed it) and listed in the manifest.

A file whose hash does not match is never read: it is reported and recomputed.

Checkpoints of unfinished work live in the user cache (:func:`checkpoint_dir`). So that a campaign
longer than one sitting can continue on another machine, a checkpoint can be *parked* in
``data/checkpoints/<experiment>/`` (:func:`park`) as parts of at most 4 MiB (``<key>.001-of-003.pt``, ...),
each listed in the manifest like a result; :func:`parked_checkpoint` joins them back only when every
part is there and every hash matches.
"""
from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import io
import json
import math
import os
import re
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator

from .provenance import ROOT, canonical_json, collect, now_iso, sha256_bytes, sha256_file

__all__ = ["DATA", "MANIFEST", "cache_dir", "key_of", "cached", "checkpoint_dir", "atomic_write_text",
           "to_jsonable", "load_manifest", "verify_data", "locked", "RECOMPUTE", "Recompute",
           "recomputable", "lookup", "result_name", "is_stored", "parked_path", "parked_checkpoint", "park",
           "unpark", "parked_files", "parked_parts", "parked_checkpoints", "PART_BYTES"]

DATA = ROOT / "data"
MANIFEST = DATA / "manifest.json"


def cache_dir() -> Path:
    return Path(os.environ.get("POSBIAS_CACHE") or Path.home() / ".cache" / "posbias")


def to_jsonable(obj: Any) -> Any:
    """numpy/torch arrays and scalars to lists and Python numbers; tuples to lists; paths to str."""
    try:
        import numpy as np
    except ImportError:  # pragma: no cover
        np = None
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    if np is not None:
        if isinstance(obj, np.ndarray):
            return to_jsonable(obj.tolist())
        if isinstance(obj, np.generic):
            return obj.item()
    if type(obj).__module__ == "torch" and hasattr(obj, "tolist"):
        return to_jsonable(obj.detach().cpu().tolist())
    if isinstance(obj, float) and not math.isfinite(obj):
        return obj
    return obj


def atomic_write(path: Path, write: Callable[[BinaryIO], None]) -> None:
    """Call ``write(f)`` on a temporary file in ``path``'s folder, fsync it, then ``os.replace`` it onto
    ``path``: a reader sees the old file or the whole new one, never a part. The temporary file is
    removed if ``write`` raises or the process is interrupted."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically (:func:`atomic_write`)."""
    def write(f: BinaryIO) -> None:
        if not isinstance(text, str):
            raise TypeError(f"atomic_write_text writes a str, not {type(text).__name__}")
        f.write(text.encode("utf-8"))

    atomic_write(path, write)


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive advisory lock on ``path`` (created if needed), held for the ``with`` block."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def key_of(experiment: str, params: dict[str, Any], version: int | str) -> str:
    """16 hex digits of the SHA-256 of the canonical ``{experiment, params, version}``."""
    payload = canonical_json({"experiment": experiment, "params": to_jsonable(params), "version": str(version)})
    return sha256_bytes(payload.encode())[:16]


def _keyed(params: dict[str, Any], device: str | None) -> dict[str, Any]:
    """``params`` as they enter the key: a device other than the CPU is part of it."""
    return params if device in (None, "cpu") else {**params, "_device": device}


def _name(experiment: str, key: str) -> str:
    return f"{experiment}/{key}.json"


def result_name(experiment: str, params: dict[str, Any], version: int | str = 1, device: str | None = None) -> str:
    """Where a result lives, relative to ``data/`` and to the user cache: ``<experiment>/<key>.json``."""
    return _name(experiment, key_of(experiment, _keyed(params, device), version))


def is_stored(experiment: str, params: dict[str, Any], *, version: int | str = 1, device: str | None = None) -> bool:
    """Does a file for this result exist in ``data/`` or the user cache? Cheap: nothing is read or
    verified (:func:`lookup` does that)."""
    name = result_name(experiment, params, version, device)
    return (DATA / name).exists() or (cache_dir() / name).exists()


def load_manifest() -> dict[str, str]:
    if MANIFEST.exists():
        return json.loads(MANIFEST.read_text())
    return {}


def _result_hash(result: Any) -> str:
    return sha256_bytes(canonical_json(to_jsonable(result)).encode())


def _read_verified(path: Path, expected_file_hash: str | None) -> dict[str, Any] | None:
    """The stored record if the file and its embedded result hash check out, else None (with a warning)."""
    if not path.exists():
        return None
    if expected_file_hash is not None and sha256_file(path) != expected_file_hash:
        warnings.warn(f"{path}: file hash differs from the manifest; not reading it, recomputing", stacklevel=3)
        return None
    try:
        rec = json.loads(path.read_text())
        if _result_hash(rec["result"]) != rec["result_sha256"]:
            raise ValueError("embedded result hash mismatch")
    except (ValueError, KeyError, json.JSONDecodeError) as e:
        warnings.warn(f"{path}: damaged or edited result ({e}); not reading it, recomputing", stacklevel=3)
        return None
    return rec


def _relative(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def cached(
    experiment: str,
    params: dict[str, Any],
    compute: Callable[[], dict[str, Any]],
    *,
    version: int | str = 1,
    seeds: list[int] | None = None,
    device: str | None = None,
    wall_seconds: float | None = None,
    extra_provenance: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The result of ``compute()`` for ``(experiment, params, version)``, from data/, the cache, or fresh.

    ``params`` must hold everything the result depends on; bump ``version`` whenever the code that
    computes it changes its output. ``device`` other than ``cpu``/None enters the key, so results from
    different devices never mix. The provenance records the time ``compute()`` took, or
    ``wall_seconds`` when the work was done before the call (a unit trained in an ensemble), and
    ``extra_provenance`` (e.g. the sittings of a resumed training) when it is computed now. Returns
    the result dict (arrays come back as nested lists).
    """
    from . import report

    params = _keyed(params, device)
    key = key_of(experiment, params, version)
    name = _name(experiment, key)
    write_data = os.environ.get("POSBIAS_WRITE_DATA") == "1"

    committed = DATA / name
    rec = _read_verified(committed, load_manifest().get(name, "missing")) if committed.exists() else None
    if rec is not None:
        report.note_data(_relative(committed), sha256_file(committed), "committed")
        return rec["result"]

    user = cache_dir() / name
    target = committed if write_data else user
    with locked(cache_dir() / f"{experiment}/{key}.lock"):
        rec = _read_verified(target, None)  # another process may have finished it meanwhile
        promoted = False
        if rec is None and write_data:      # computed earlier into the user cache: commit it as it is
            rec = _read_verified(user, None) if user.exists() else None
            promoted = rec is not None
        if rec is None:
            started, t0 = now_iso(), time.perf_counter()
            result = to_jsonable(compute())
            wall = time.perf_counter() - t0
            rec = {
                "experiment": experiment,
                "key": key,
                "version": str(version),
                "params": to_jsonable(params),
                "result": result,
                "result_sha256": _result_hash(result),
                "provenance": {**collect(started=started, wall_seconds=round(wall if wall_seconds is None else wall_seconds, 3),
                                         seeds=seeds, device=device), **to_jsonable(extra_provenance or {})},
            }
            source = "computed"
        else:
            source = "promoted" if promoted else "cache"
        if source != "cache":
            atomic_write_text(target, json.dumps(rec, indent=None, sort_keys=True, separators=(",", ":")) + "\n")
            if write_data:
                _set_manifest(name, sha256_file(target))
    report.note_data(_relative(target), sha256_file(target), source)
    return rec["result"]


def lookup(experiment: str, params: dict[str, Any], *, version: int | str = 1,
           device: str | None = None) -> dict[str, Any] | None:
    """The stored result of ``(experiment, params, version)`` from ``data/`` or the user cache, or
    None; never computes. Same keys and checks as :func:`cached`."""
    from . import report

    name = result_name(experiment, params, version, device)
    for path, expected, source in ((DATA / name, "manifest", "committed"), (cache_dir() / name, None, "cache")):
        if path.exists():
            rec = _read_verified(path, load_manifest().get(name, "missing") if expected else None)
            if rec is not None:
                report.note_data(_relative(path), sha256_file(path), source)
                return rec["result"]
    return None


def _set_manifest(name: str, file_hash: str | None) -> None:
    """List ``name`` (relative to ``data/``) in the manifest with ``file_hash``, or drop it (None)."""
    _update_manifest({name: file_hash})


PARKED_DIR = "checkpoints"      # data/checkpoints/<experiment>/<key>.<i>-of-<n>.pt: unfinished work, not an experiment
PART_BYTES = 4 * 2**20          # a committed checkpoint is split into parts of at most 4 MiB (no tracked file over 5 MB)
_PART = re.compile(r"^(?P<key>.+)\.(?P<i>\d{3})-of-(?P<n>\d{3})\.pt$")


def parked_path(experiment: str, params: dict[str, Any], version: int | str = 1) -> Path:
    """The name of the committed checkpoint of the unit of work ``(experiment, params, version)``:
    ``data/checkpoints/<experiment>/<key>.pt`` (same key as :func:`checkpoint_dir`). No file has this
    name: the checkpoint is stored as its parts (:func:`parked_parts`)."""
    return DATA / PARKED_DIR / experiment / f"{key_of(experiment, params, version)}.pt"


def _part_path(target: Path, i: int, n: int) -> Path:
    """Part ``i`` (1-based) of ``n`` of the committed checkpoint ``target``: ``<key>.001-of-003.pt``."""
    return target.with_name(f"{target.name[:-len('.pt')]}.{i:03d}-of-{n:03d}.pt")


def _whole_of(part: Path) -> Path | None:
    """The committed checkpoint (its :func:`parked_path` name) that ``part`` is a part of, or None."""
    m = _PART.match(part.name)
    return None if m is None else part.with_name(f"{m['key']}.pt")


def parked_parts(target: Path) -> list[Path]:
    """The part files of the committed checkpoint ``target`` (a :func:`parked_path`) on disk, in order."""
    return sorted(p for p in target.parent.glob(f"{target.name[:-len('.pt')]}.*-of-*.pt") if _whole_of(p) == target)


def parked_files() -> list[Path]:
    """Every file in ``data/checkpoints`` (the parts of the committed checkpoints, and anything else)."""
    root = DATA / PARKED_DIR
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


def parked_checkpoints() -> list[Path]:
    """The committed checkpoints (their :func:`parked_path` names), one per set of parts."""
    return sorted({w for p in parked_files() if (w := _whole_of(p)) is not None})


def _parts_problem(target: Path, manifest: dict[str, str]) -> str | None:
    """Why the parts of ``target`` on disk and in the manifest do not make one whole checkpoint, or None."""
    parts = parked_parts(target)
    listed = sorted(name for name in manifest if _whole_of(DATA / name) == target)
    counts = {int(_PART.match(p.name)["n"]) for p in parts}
    if len(counts) != 1:
        return f"parts of {'different counts' if counts else 'none'} on disk ({', '.join(p.name for p in parts)})"
    (n,) = counts
    want = [_part_path(target, i, n) for i in range(1, n + 1)]
    if parts != want:
        return f"has {len(parts)} of its {n} parts"
    if listed != [str(p.relative_to(DATA)) for p in want]:
        return f"the manifest lists {len(listed)} parts, not its {n}"
    return None


def parked_checkpoint(target: Path) -> bytes | None:
    """The bytes of the committed checkpoint ``target`` (a :func:`parked_path`), its parts joined in
    order, if every part is present and its SHA-256 matches the manifest; else None (nothing parked
    silently; an incomplete, mismatching or unlisted one with a warning)."""
    if not parked_parts(target):
        return None
    manifest = load_manifest()
    problem = _parts_problem(target, manifest)
    blob = b""
    if problem is None:
        chunks = []
        for p in parked_parts(target):
            data = p.read_bytes()
            if sha256_bytes(data) != manifest[str(p.relative_to(DATA))]:
                problem = f"{p.name}: SHA-256 differs from the manifest"
                break
            chunks.append(data)
        blob = b"".join(chunks)
    if problem is not None:
        warnings.warn(f"{target}: {problem}; not using this committed checkpoint", stacklevel=2)
        return None
    return blob


def _update_manifest(changes: dict[str, str | None]) -> None:
    """Set (hash) or drop (None) several manifest entries (names relative to ``data/``) in one write."""
    with locked(cache_dir() / "manifest.lock"):
        manifest = load_manifest()
        for name, file_hash in changes.items():
            if file_hash is None:
                manifest.pop(name, None)
            else:
                manifest[name] = file_hash
        atomic_write_text(MANIFEST, json.dumps(dict(sorted(manifest.items())), indent=1) + "\n")


def park(target: Path, write: Callable[[BinaryIO], None]) -> list[Path]:
    """Commit a checkpoint: ``write(f)`` it to memory, store it as parts of at most :data:`PART_BYTES`
    next to ``target`` (a :func:`parked_path`), each written atomically, list them in the manifest
    (one write) and remove the parts of an earlier commit that are no longer listed. Returns the parts."""
    buf = io.BytesIO()
    write(buf)
    blob = buf.getvalue()
    n = max(1, math.ceil(len(blob) / PART_BYTES))
    if n > 999:
        raise ValueError(f"{target}: {len(blob)} bytes would need {n} parts of {PART_BYTES}; at most 999")
    old = parked_parts(target) + ([target] if target.exists() else [])
    new = [_part_path(target, i, n) for i in range(1, n + 1)]
    for i, p in enumerate(new):
        atomic_write(p, lambda f, i=i: f.write(blob[i * PART_BYTES:(i + 1) * PART_BYTES]))
    changes: dict[str, str | None] = {str(p.relative_to(DATA)): None for p in old if p not in new}
    changes |= {str(p.relative_to(DATA)): sha256_file(p) for p in new}
    _update_manifest(changes)
    for p in old:
        if p not in new:
            p.unlink(missing_ok=True)
    return new


def unpark(target: Path) -> None:
    """Remove a committed checkpoint (every part) and its manifest entries (its work is finished and stored)."""
    files = parked_parts(target) + ([target] if target.exists() else [])
    _update_manifest({str(p.relative_to(DATA)): None for p in files})
    for p in files:
        p.unlink(missing_ok=True)


def checkpoint_dir(experiment: str, params: dict[str, Any], version: int | str = 1, *, create: bool = True) -> Path:
    """A folder in the user cache for the checkpoints of one resumable unit of work (made unless
    ``create=False``, for a look that must leave no trace)."""
    d = cache_dir() / experiment / f"{key_of(experiment, params, version)}.ckpt"
    if create:
        d.mkdir(parents=True, exist_ok=True)
    return d


def _wall_time_consistent(rec: dict[str, Any]) -> bool:
    """A result that measured its own training (``train_seconds_ensemble``, work done before
    :func:`cached` was called) must carry that time as its provenance's ``wall_seconds``."""
    res, wall = rec.get("result"), rec["provenance"].get("wall_seconds")
    if not isinstance(res, dict) or "train_seconds_ensemble" not in res:
        return True
    return isinstance(wall, (int, float)) and abs(wall - round(float(res["train_seconds_ensemble"]), 3)) < 1e-9


def verify_data(recompute_sample: int = 0, log=print) -> list[str]:
    """Check every file of ``data/`` against the manifest; returns the list of problems (empty = fine).

    Files present but not in the manifest, manifest entries without a file, hash mismatches,
    committed checkpoints missing a part, damaged records and a provenance wall time other than the
    training time the result measured are problems. ``recompute_sample`` > 0 is handled by the CLI
    (it needs the registry of cheap recomputations, :data:`RECOMPUTE`).
    """
    problems = []
    manifest = load_manifest()
    on_disk = {str(p.relative_to(DATA)) for p in DATA.rglob("*.json") if p.name != "manifest.json"}
    on_disk |= {str(p.relative_to(DATA)) for p in parked_files()}
    for name in sorted(set(manifest) | on_disk):
        path = DATA / name
        if name not in manifest:
            problems.append(f"{name}: not in data/manifest.json")
        elif not path.exists():
            problems.append(f"{name}: listed in the manifest but missing")
        elif sha256_file(path) != manifest[name]:
            problems.append(f"{name}: SHA-256 differs from the manifest")
        elif name.startswith(f"{PARKED_DIR}/"):
            if _whole_of(path) is None:
                problems.append(f"{name}: not a part of a committed checkpoint (<key>.<i>-of-<n>.pt)")
            else:               # a part of a parked checkpoint: its hash is all there is to check
                log(f"ok  {name} (part of a checkpoint of unfinished work)")
        else:
            rec = json.loads(path.read_text())
            if _result_hash(rec.get("result")) != rec.get("result_sha256"):
                problems.append(f"{name}: embedded result hash mismatch")
            elif "provenance" not in rec:
                problems.append(f"{name}: no provenance")
            elif not _wall_time_consistent(rec):
                problems.append(f"{name}: provenance wall_seconds {rec['provenance'].get('wall_seconds')} is not the "
                                f"training time the result measured ({rec['result']['train_seconds_ensemble']} s)")
            else:
                log(f"ok  {name}")
    reported = {p.partition(": ")[0] for p in problems}
    for target in parked_checkpoints():      # each committed checkpoint must be whole: all its parts, all listed
        if any(_whole_of(DATA / name) == target for name in reported):
            continue                         # a part's own problem says it already
        if (why := _parts_problem(target, manifest)) is not None:
            problems.append(f"{target.relative_to(DATA)}: {why}")
    return problems


# Recomputations for `posbias check-data`: experiment name -> how to recompute one stored record.
@dataclass(frozen=True)
class Recompute:
    """How ``posbias check-data`` recomputes a stored record of one experiment and compares it.

    ``fn(params) -> result`` must call the very function whose output ``store.cached`` stored.
    A fresh number ``f`` agrees with the stored ``s`` when ``|f - s| <= atol + rtol |s|`` (both zero:
    bit-identical); non-numbers must be equal, shapes and keys must match. ``ignore`` names top-level
    result keys that are measurements of the run, not results (wall times, memory, ensemble size).
    ``cost(record)`` estimates the seconds a recomputation takes (default: the stored wall time).

    The tolerance holds on the CPU that computed the record (its provenance's ``cpu``). Another
    processor may dispatch other vector kernels and round differently, so a record computed on another
    CPU, or on one its provenance does not name, is compared within ``other_cpu_atol`` /
    ``other_cpu_rtol`` (None: the same tolerance), explained by ``other_cpu_note``.
    """

    fn: Callable[[dict[str, Any]], dict[str, Any]]
    atol: float = 0.0
    rtol: float = 0.0
    ignore: tuple[str, ...] = ()
    cost: Callable[[dict[str, Any]], float] | None = None
    tolerance_note: str = ""
    other_cpu_atol: float | None = None
    other_cpu_rtol: float = 0.0
    other_cpu_note: str = ""

    def across_cpus(self) -> "Recompute":
        """This recomputation with the tolerance for a record from another (or an unnamed) CPU."""
        if self.other_cpu_atol is None:
            return self
        return dataclasses.replace(self, atol=self.other_cpu_atol, rtol=self.other_cpu_rtol,
                                   tolerance_note=self.other_cpu_note)

    def __call__(self, params: dict[str, Any]) -> dict[str, Any]:
        return self.fn(params)

    def estimate(self, record: dict[str, Any]) -> float:
        """Estimated seconds to recompute ``record``."""
        if self.cost is not None:
            return float(self.cost(record))
        return float(record.get("provenance", {}).get("wall_seconds") or 0.0)


RECOMPUTE: dict[str, Recompute] = {}


def recomputable(experiment: str, *, atol: float = 0.0, rtol: float = 0.0, ignore: tuple[str, ...] = (),
                 cost: Callable[[dict[str, Any]], float] | None = None, tolerance_note: str = "",
                 other_cpu_atol: float | None = None, other_cpu_rtol: float = 0.0, other_cpu_note: str = ""):
    """Register ``fn(params) -> result`` as the way to recompute ``experiment`` (used by check-data).

    Returns ``fn`` unchanged; see :class:`Recompute` for the tolerances and the other options.
    """
    def deco(fn):
        RECOMPUTE[experiment] = Recompute(fn, float(atol), float(rtol), tuple(ignore), cost, tolerance_note,
                                          other_cpu_atol, float(other_cpu_rtol), other_cpu_note)
        return fn
    return deco


def _eprint(*a: Any) -> None:
    print(*a, file=sys.stderr)
