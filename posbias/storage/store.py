"""One cache for expensive results, with provenance, that never lies.

A result is keyed by ``(experiment, canonical JSON of its parameters, code version)``. Lookup order:

1. ``data/<experiment>/<key>.json``: committed results, listed with their SHA-256 in
   ``data/manifest.json``. Every read is verified at the point of reading: a committed file that is
   missing, not listed, or whose SHA-256 (or embedded result hash) differs is a :class:`DataError`
   naming the file and the fix, never "not stored". A chapter that reads it stops.
2. ``$POSBIAS_CACHE`` (default ``~/.cache/posbias``)``/<experiment>/<key>.json``: the user cache.
   Each entry has its SHA-256 beside it (``<key>.sha256``); an entry that does not match it (or,
   written before these hashes, whose embedded result hash does not match) is recomputed, with a warning.
3. Otherwise the result is computed (under a lock per key, so two processes never compute or write
   the same key at once) and written atomically to the user cache; with ``POSBIAS_WRITE_DATA=1``
   (``posbias run --write-data``) it goes to ``data/`` and the manifest instead. With that switch
   a result already in the user cache is *promoted*: copied to ``data/`` as it is (its provenance
   still names the commit, machine and wall time that computed it) and listed in the manifest.

A file is hashed once per process (memoised by path, size and modification time), so verifying every
read costs one pass over each file. Checkpoints of unfinished work live in the user cache
(:func:`checkpoint_dir`); those committed to ``data/checkpoints`` are :mod:`posbias.storage.parking`'s, and
the recomputations ``posbias check-data`` runs are registered in :mod:`posbias.storage.recompute`.
"""
from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import json
import math
import os
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator

from posbias.storage.provenance import ROOT, canonical_json, collect, now_iso, sha256_bytes, sha256_file

__all__ = ["DATA", "MANIFEST", "DataError", "WriteError", "write_error", "cache_dir", "key_of", "cached",
           "checkpoint_dir", "atomic_write", "atomic_write_text", "umask", "new_file_mode", "to_jsonable",
           "load_manifest", "update_manifest", "locked", "READ_HOOKS", "on_read", "lookup", "lookup_record",
           "result_name", "is_stored", "usable_entry", "file_hash", "result_hash", "shown_path", "CACHE_PREFIX",
           "changed", "data_version"]

DATA = ROOT / "data"
MANIFEST = DATA / "manifest.json"


class DataError(RuntimeError):
    """A file of ``data/`` that the manifest does not vouch for (missing, not listed, or altered)."""


class WriteError(OSError):
    """A write into the cache, ``data/`` or a run's folder that failed (no space left, no permission):
    its message is one line naming the path and the cause; nothing half-written is left behind."""

    def __str__(self) -> str:
        return str(self.args[0])


def write_error(path: Path, e: BaseException) -> WriteError:
    """``e`` (an ``OSError``) as a :class:`WriteError` naming ``path`` and the cause in words."""
    cause = os.strerror(e.errno) if isinstance(e, OSError) and e.errno else (str(e).splitlines() or ["?"])[0][:200]
    err = e if isinstance(e, WriteError) else WriteError(f"cannot write {path}: {cause}")
    err.errno = getattr(e, "errno", None)
    return err


class _Recording:
    """A file that remembers the first ``OSError`` of its ``write`` (torch's writer replaces it by
    "unexpected pos"; this keeps the cause, e.g. no space left on device)."""

    def __init__(self, f: BinaryIO) -> None:
        self._f, self.error = f, None

    def write(self, b: Any) -> int:
        try:
            return self._f.write(b)
        except OSError as e:
            self.error = self.error or e
            raise

    def __getattr__(self, name: str) -> Any:
        return getattr(self._f, name)


def cache_dir() -> Path:
    return Path(os.environ.get("POSBIAS_CACHE") or Path.home() / ".cache" / "posbias")


_GENERATION = [0]


def changed() -> None:
    """Note that what a reading of the stored data would give may have changed in this process (a record
    written, the manifest updated, the library patched by the mutation suite): readings memoised on
    :func:`data_version` are made again."""
    _GENERATION[0] += 1


def data_version() -> tuple:
    """What a reading of the stored data depends on in this process: the manifest's version, the user cache
    in use and the count of :func:`changed`. A reading memoised under one value is valid while it lasts."""
    return (_stat_key(MANIFEST) if MANIFEST.exists() else None, str(cache_dir()), _GENERATION[0])


def to_jsonable(obj: Any) -> Any:
    """numpy/torch arrays and scalars to lists and Python numbers; tuples to lists; paths to str;
    dataclass instances to dicts of their fields."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return to_jsonable(dataclasses.asdict(obj))
    try:
        import numpy as np  # lazy: numpy costs ~0.1s at import (and is optional here)
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


_PROC_STATUS = Path("/proc/self/status")


def umask() -> int:
    """The process's umask, read without changing it where Linux's ``/proc`` says it (elsewhere it is
    set and restored at once)."""
    try:
        for line in _PROC_STATUS.read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def new_file_mode() -> int:
    """The permission bits ``open(path, "w")`` gives a new file: ``0o666`` less the umask."""
    return 0o666 & ~umask()


def atomic_write(path: Path, write: Callable[[BinaryIO], None]) -> None:
    """Call ``write(f)`` on a temporary file in ``path``'s folder, fsync it, then ``os.replace`` it onto
    ``path``: a reader sees the old file or the whole new one, never a part. The temporary file is
    removed if ``write`` raises or the process is interrupted. A failed write (no space, no permission,
    also inside torch's writer) is a :class:`WriteError` naming ``path`` and the cause.

    The file gets the mode an ordinary write of a new file would (:func:`new_file_mode`), not the
    temporary file's private ``0o600``: a run folder or a built book stays readable by whom the umask
    lets read it."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as e:
        raise write_error(path, e) from e
    rec = None
    try:
        with os.fdopen(fd, "wb") as f:
            os.fchmod(f.fileno(), new_file_mode())
            rec = _Recording(f)
            write(rec)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError) or (rec is not None and rec.error is not None and isinstance(e, RuntimeError)):
            raise write_error(path, rec.error if rec is not None and rec.error is not None else e) from e
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
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        f = open(path, "a+")
    except OSError as e:
        raise write_error(path, e) from e
    with f:
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
    """Is this result stored: a committed file in ``data/`` (whose read verifies it against the manifest,
    and stops on a mismatch), or a user-cache entry that :func:`usable_entry` accepts (a damaged one is
    not stored: it is recomputed, with a warning)?"""
    name = result_name(experiment, params, version, device)
    return (DATA / name).exists() or usable_entry(cache_dir() / name) is not None


_HASHES: dict[tuple[str, int, int], str] = {}
_MANIFESTS: dict[tuple[str, int, int], dict[str, str]] = {}


def _stat_key(path: Path) -> tuple[str, int, int]:
    st = path.stat()
    return str(path), st.st_size, st.st_mtime_ns


def file_hash(path: Path) -> str:
    """The SHA-256 of ``path``, computed once per process for each (path, size, modification time)."""
    k = _stat_key(Path(path))
    if k not in _HASHES:
        _HASHES[k] = sha256_file(Path(path))
    return _HASHES[k]


def load_manifest() -> dict[str, str]:
    """``data/manifest.json``: name relative to ``data/`` -> SHA-256 (read once per version of the file)."""
    if not MANIFEST.exists():
        return {}
    k = _stat_key(MANIFEST)
    if k not in _MANIFESTS:
        _MANIFESTS.clear()
        _MANIFESTS[k] = json.loads(MANIFEST.read_text())
    return dict(_MANIFESTS[k])


def result_hash(result: Any) -> str:
    """The SHA-256 a stored record keeps of its result (``result_sha256``): canonical JSON of the result."""
    return sha256_bytes(canonical_json(to_jsonable(result)).encode())


def _sidecar(path: Path) -> Path:
    """Where the SHA-256 of the user-cache entry ``path`` is kept: ``<key>.sha256`` beside it."""
    return path.with_suffix(".sha256")


_WARNED: set[tuple] = set()
#: Versions of stored records whose embedded result hash has been verified in this process: ``(path, size,
#: mtime)`` with the hash that vouches for the file (the manifest's, or the one stored beside a cache entry).
#: A record is verified once per process and version; every read still parses the file afresh.
_VERIFIED: set[tuple] = set()


def _check_entry(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """``(record, None)`` when the user-cache entry ``path`` verifies (its SHA-256 against the hash
    stored beside it, when there is one; it parses; its embedded result hash), else ``(None, why)``."""
    side = _sidecar(path)
    try:
        expected = side.read_text().strip() if side.exists() else None
        if expected is not None and file_hash(path) != expected:
            return None, "SHA-256 differs from the hash stored with it"
        version = (_stat_key(path), expected)
        rec = json.loads(path.read_text())
        if version not in _VERIFIED and result_hash(rec["result"]) != rec["result_sha256"]:
            raise ValueError("embedded result hash mismatch")
        _VERIFIED.add(version)
    except (ValueError, KeyError, TypeError) as e:
        return None, f"damaged or edited result ({type(e).__name__}: {str(e)[:120]})"
    except FileNotFoundError:
        return None, "missing"
    return rec, None


def usable_entry(path: Path) -> dict[str, Any] | None:
    """The one judge of a user-cache entry: its record when it exists, matches the SHA-256 stored
    beside it (entries written before these hashes: their embedded result hash) and parses; None
    otherwise. A damaged entry is warned about (once per process and version of the file) and
    counts as not stored, so the planner, the cost estimate, ``--status`` and the read all recompute it."""
    path, side = Path(path), _sidecar(Path(path))
    try:            # one version of the entry: its and its hash file's (path, size, mtime)
        version = _stat_key(path), (_stat_key(side) if side.exists() else None)
    except FileNotFoundError:
        return None
    rec, why = _check_entry(path)
    if why is not None and version not in _WARNED:
        _WARNED.add(version)
        warnings.warn(f"{path}: {why}; not reading it, recomputing", stacklevel=2)
    return rec


def _fix(name: str) -> str:
    return (f"restore the committed file with `git checkout -- data/{name}` (and `git status data/`), "
            "then `posbias check-data` verifies every file of data/")


def _read_committed(name: str) -> dict[str, Any] | None:
    """The committed record ``data/<name>``, verified against the manifest; None when the file is
    neither on disk nor listed. Raises :class:`DataError` when it is missing, unlisted or altered."""
    path, listed = DATA / name, load_manifest().get(name)
    if listed is None and not path.exists():
        return None
    if listed is None:
        raise DataError(f"data/{name} is not listed in data/manifest.json, so nothing vouches for it; remove "
                        f"it, or {_fix(name)}")
    if not path.exists():
        raise DataError(f"data/{name} is listed in data/manifest.json but missing; {_fix(name)}")
    if file_hash(path) != listed:
        raise DataError(f"data/{name}: SHA-256 differs from data/manifest.json (the file was altered or "
                        f"truncated); {_fix(name)}")
    version = (_stat_key(path), listed)
    try:
        rec = json.loads(path.read_text())
        ok = version in _VERIFIED or result_hash(rec["result"]) == rec["result_sha256"]
    except (ValueError, KeyError, TypeError):
        ok = False
    if not ok:
        raise DataError(f"data/{name}: damaged record (its embedded result hash does not match); {_fix(name)}")
    _VERIFIED.add(version)
    return rec


def _write_cache_entry(path: Path, rec: dict[str, Any]) -> None:
    """Write a user-cache record and its SHA-256 beside it (the old hash first removed, so that an
    interruption between the two writes leaves a record checked by its embedded hash alone)."""
    _sidecar(path).unlink(missing_ok=True)
    atomic_write_text(path, json.dumps(rec, indent=None, sort_keys=True, separators=(",", ":")) + "\n")
    atomic_write_text(_sidecar(path), file_hash(path) + "\n")
    changed()


#: How a page names a file of the user cache: relative to the cache, never by the machine's path.
CACHE_PREFIX = "<cache>/"


#: Called as ``hook(path, sha256, source)`` for every stored result read or written (``source``:
#: committed, cache, promoted or computed): how a run's record learns which files it read
#: (:mod:`posbias.storage.report` registers one) without this floor importing anything above it.
READ_HOOKS: list[Callable[[str, str, str], None]] = []


def on_read(hook: Callable[[str, str, str], None]) -> None:
    """Register ``hook`` for every read of a stored result (once: registering it again does nothing)."""
    if hook not in READ_HOOKS:
        READ_HOOKS.append(hook)


def _noted(path: Path, source: str) -> None:
    for hook in READ_HOOKS:
        hook(shown_path(path), file_hash(path), source)


def shown_path(path: Path | str) -> str:
    """``path`` as pages and records name it: relative to the repository, or ``<cache>/...`` for the
    user cache (a published page never shows a home folder); any other path as given."""
    p = Path(path).resolve()
    for base, prefix in ((ROOT, ""), (cache_dir().resolve(), CACHE_PREFIX)):
        try:
            return prefix + str(p.relative_to(base))
        except ValueError:
            pass
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
    the result dict (arrays come back as nested lists). Raises :class:`DataError` when ``data/`` holds
    or lists this result but the file does not verify (it is never recomputed over, nor around).
    """
    params = _keyed(params, device)
    key = key_of(experiment, params, version)
    name = _name(experiment, key)
    write_data = os.environ.get("POSBIAS_WRITE_DATA") == "1"

    committed = DATA / name
    rec = _read_committed(name)
    if rec is not None:
        _noted(committed, "committed")
        return rec["result"]

    user = cache_dir() / name
    target = committed if write_data else user
    with locked(cache_dir() / f"{experiment}/{key}.lock"):
        # another process may have finished it meanwhile
        rec = _read_committed(name) if write_data else usable_entry(target)
        promoted = False
        if rec is None and write_data:      # computed earlier into the user cache: commit it as it is
            rec = usable_entry(user)
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
                "result_sha256": result_hash(result),
                "provenance": {**collect(started=started,
                                         wall_seconds=round(wall if wall_seconds is None else wall_seconds, 3),
                                         seeds=seeds, device=device), **to_jsonable(extra_provenance or {})},
            }
            source = "computed"
        else:
            source = "promoted" if promoted else "cache"
        if source == "promoted":            # byte for byte: the provenance still names who computed it
            atomic_write(target, lambda f: f.write(user.read_bytes()))
        elif source == "computed" and write_data:
            atomic_write_text(target, json.dumps(rec, indent=None, sort_keys=True, separators=(",", ":")) + "\n")
        elif source == "computed":
            _write_cache_entry(target, rec)
        if write_data and source != "cache":
            update_manifest({name: file_hash(target)})
    _noted(target, source)
    return rec["result"]


def lookup(experiment: str, params: dict[str, Any], *, version: int | str = 1,
           device: str | None = None) -> dict[str, Any] | None:
    """The stored result of ``(experiment, params, version)`` from ``data/`` or the user cache, or
    None; never computes. Same keys and checks as :func:`cached`: a committed file that does not
    verify raises :class:`DataError`; a user-cache entry that does not is None, with a warning."""
    rec = lookup_record(experiment, params, version=version, device=device)
    return None if rec is None else rec["result"]


def lookup_record(experiment: str, params: dict[str, Any], *, version: int | str = 1,
                  device: str | None = None) -> dict[str, Any] | None:
    """The whole stored record (``params``, ``provenance``, ``result``, ...) of :func:`lookup`, or None."""
    name = result_name(experiment, params, version, device)
    rec = _read_committed(name)
    if rec is not None:
        _noted(DATA / name, "committed")
        return rec
    path = cache_dir() / name
    rec = usable_entry(path)
    if rec is not None:
        _noted(path, "cache")
        return rec
    return None


def _set_manifest(name: str, file_hash: str | None) -> None:
    update_manifest({name: file_hash})      # list ``name`` with ``file_hash``, or drop it (None)


def update_manifest(changes: dict[str, str | None]) -> None:
    """Set (hash) or drop (None) several manifest entries (names relative to ``data/``) in one write."""
    with locked(cache_dir() / "manifest.lock"):
        manifest = load_manifest()
        for name, file_hash in changes.items():
            if file_hash is None:
                manifest.pop(name, None)
            else:
                manifest[name] = file_hash
        atomic_write_text(MANIFEST, json.dumps(dict(sorted(manifest.items())), indent=1) + "\n")
    changed()


def checkpoint_dir(experiment: str, params: dict[str, Any], version: int | str = 1, *, create: bool = True) -> Path:
    """A folder in the user cache for the checkpoints of one resumable unit of work (made unless
    ``create=False``, for a look that must leave no trace)."""
    d = cache_dir() / experiment / f"{key_of(experiment, params, version)}.ckpt"
    if create:
        d.mkdir(parents=True, exist_ok=True)
    return d
