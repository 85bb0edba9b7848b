"""Parking: checkpoints of unfinished work committed to ``data/checkpoints`` so that a campaign longer
than one sitting can continue on another machine.

A checkpoint is parked (:func:`park`) in ``data/checkpoints/<experiment>/`` as parts of at most
:data:`PART_BYTES` (``<key>.001-of-003.pt``, ...), each listed in ``data/manifest.json`` like a
result; :func:`parked_checkpoint` joins them back only when every part is there and every hash
matches (else it warns and returns None: training then starts from step 0 and ends with the same
result, so a damaged checkpoint costs time, never correctness). The key is the store's
(:func:`posbias.storage.store.key_of`), the same as the user cache's :func:`posbias.storage.store.checkpoint_dir`.
"""
from __future__ import annotations

import io
import math
import re
import warnings
from pathlib import Path
from typing import Any, BinaryIO, Callable

from posbias.storage import store

__all__ = ["PARKED_DIR", "PART_BYTES", "parked_path", "parked_parts", "parked_files", "parked_checkpoints",
           "parked_checkpoint", "park", "unpark", "parts_problem", "whole_of"]

# data/checkpoints/<experiment>/<key>.<i>-of-<n>.pt: unfinished work, not an experiment
PARKED_DIR = "checkpoints"
# a committed checkpoint is split into parts of at most 4 MiB (no tracked file over 5 MB)
PART_BYTES = 4 * 2**20
_PART = re.compile(r"^(?P<key>.+)\.(?P<i>\d{3})-of-(?P<n>\d{3})\.pt$")


def parked_path(experiment: str, params: dict[str, Any], version: int | str = 1) -> Path:
    """The name of the committed checkpoint of the unit of work ``(experiment, params, version)``:
    ``data/checkpoints/<experiment>/<key>.pt`` (same key as :func:`posbias.storage.store.checkpoint_dir`). No file has
    this name: the checkpoint is stored as its parts (:func:`parked_parts`)."""
    return store.DATA / PARKED_DIR / experiment / f"{store.key_of(experiment, params, version)}.pt"


def _part_path(target: Path, i: int, n: int) -> Path:
    """Part ``i`` (1-based) of ``n`` of the committed checkpoint ``target``: ``<key>.001-of-003.pt``."""
    return target.with_name(f"{target.name[:-len('.pt')]}.{i:03d}-of-{n:03d}.pt")


def whole_of(part: Path) -> Path | None:
    """The committed checkpoint (its :func:`parked_path` name) that ``part`` is a part of, or None."""
    m = _PART.match(part.name)
    return None if m is None else part.with_name(f"{m['key']}.pt")


def parked_parts(target: Path) -> list[Path]:
    """The part files of the committed checkpoint ``target`` (a :func:`parked_path`) on disk, in order."""
    return sorted(p for p in target.parent.glob(f"{target.name[:-len('.pt')]}.*-of-*.pt") if whole_of(p) == target)


def parked_files() -> list[Path]:
    """Every file in ``data/checkpoints`` (the parts of the committed checkpoints, and anything else)."""
    root = store.DATA / PARKED_DIR
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


def parked_checkpoints() -> list[Path]:
    """The committed checkpoints (their :func:`parked_path` names), one per set of parts."""
    return sorted({w for p in parked_files() if (w := whole_of(p)) is not None})


def parts_problem(target: Path, manifest: dict[str, str]) -> str | None:
    """Why the parts of ``target`` on disk and in the manifest do not make one whole checkpoint, or None."""
    parts = parked_parts(target)
    listed = sorted(name for name in manifest if whole_of(store.DATA / name) == target)
    counts = {int(_PART.match(p.name)["n"]) for p in parts}
    if len(counts) != 1:
        return f"parts of {'different counts' if counts else 'none'} on disk ({', '.join(p.name for p in parts)})"
    (n,) = counts
    want = [_part_path(target, i, n) for i in range(1, n + 1)]
    if parts != want:
        return f"has {len(parts)} of its {n} parts"
    if listed != [str(p.relative_to(store.DATA)) for p in want]:
        return f"the manifest lists {len(listed)} parts, not its {n}"
    return None


def parked_checkpoint(target: Path) -> bytes | None:
    """The bytes of the committed checkpoint ``target`` (a :func:`parked_path`), its parts joined in
    order, if every part is present and its SHA-256 matches the manifest; else None (nothing parked
    silently; an incomplete, mismatching or unlisted one with a warning)."""
    if not parked_parts(target):
        return None
    manifest = store.load_manifest()
    problem = parts_problem(target, manifest)
    blob = b""
    if problem is None:
        chunks = []
        for p in parked_parts(target):
            data = p.read_bytes()
            if store.sha256_bytes(data) != manifest[str(p.relative_to(store.DATA))]:
                problem = f"{p.name}: SHA-256 differs from the manifest"
                break
            chunks.append(data)
        blob = b"".join(chunks)
    if problem is not None:
        warnings.warn(f"{target}: {problem}; not using this committed checkpoint", stacklevel=2)
        return None
    return blob


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
        store.atomic_write(p, lambda f, i=i: f.write(blob[i * PART_BYTES:(i + 1) * PART_BYTES]))
    changes: dict[str, str | None] = {str(p.relative_to(store.DATA)): None for p in old if p not in new}
    changes |= {str(p.relative_to(store.DATA)): store.sha256_file(p) for p in new}
    store.update_manifest(changes)
    for p in old:
        if p not in new:
            p.unlink(missing_ok=True)
    return new


def unpark(target: Path) -> None:
    """Remove a committed checkpoint (every part) and its manifest entries (its work is finished and stored)."""
    files = parked_parts(target) + ([target] if target.exists() else [])
    store.update_manifest({str(p.relative_to(store.DATA)): None for p in files})
    for p in files:
        p.unlink(missing_ok=True)
