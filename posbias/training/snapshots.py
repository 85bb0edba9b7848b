"""Weights along training: one unit trained from its seed with its weights kept every ``every`` iterations.

A study of *how* a network learns (issue 92: the decay | 2 jump read as the learning of retrieval) probes the
same network at many points of its training. :func:`train` trains one unit alone (a one-member ensemble, as the
fixed-budget study trained it), resumably, and keeps its weights at step 0 and every ``every`` iterations as
``<experiment>/<key>/<step>.safetensors`` (``key``: the run's key, :func:`run_key`), in ``data/`` and the
manifest with ``POSBIAS_WRITE_DATA=1``, else in the user cache; at the end its result is stored as the record
``<experiment>/<key>.json`` with the provenance of every sitting and whether it reproduces the unit's
stored result bit for bit. :func:`park` commits an unfinished run's checkpoint to ``data/checkpoints`` so
another machine continues it; snapshots already written stay where they are.
"""
from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path
from typing import Any, Callable

import torch

from posbias.storage import parking, store
from posbias.science.model import EnsembleNet
from posbias.storage.provenance import sha256_bytes, with_summary
from posbias.training import checkpoints as ck
from posbias.training.units import UNIT_EXPERIMENT, VERSION, Unit

__all__ = ["EXPERIMENT", "run_key", "snapshot_path", "steps_kept", "load", "train", "record", "park", "file_problem"]

EXPERIMENT = "wu-jump"
_STEP = re.compile(r"^(\d{7})\.safetensors$")


def _params(unit: Unit, every: int) -> dict[str, Any]:
    return {"unit": unit.params(), "every": int(every)}


def run_key(unit: Unit, every: int) -> str:
    """The key of ``unit`` trained with weights kept every ``every`` iterations (its record and folder)."""
    return store.key_of(EXPERIMENT, _params(unit, every), VERSION)


def _name(unit: Unit, every: int, step: int) -> str:
    return f"{EXPERIMENT}/{run_key(unit, every)}/{step:07d}.safetensors"


def snapshot_path(unit: Unit, every: int, step: int, *, committed: bool) -> Path:
    """Where the weights of ``unit`` at ``step`` are kept: under ``data/`` or the user cache."""
    return (store.DATA if committed else store.cache_dir()) / _name(unit, every, step)


def steps_kept(unit: Unit, every: int) -> list[int]:
    """The steps at which ``unit``'s weights are kept (``data/`` and the user cache together), ascending."""
    out: set[int] = set()
    for root in (store.DATA, store.cache_dir()):
        d = root / EXPERIMENT / run_key(unit, every)
        if d.is_dir():
            out |= {int(m.group(1)) for p in d.iterdir() if (m := _STEP.match(p.name))}
    return sorted(out)


def _save(unit: Unit, every: int, step: int, state: dict[str, torch.Tensor]) -> Path:
    from safetensors.torch import save as to_bytes

    committed = os.environ.get("POSBIAS_WRITE_DATA") == "1"
    blob = to_bytes({k: v.contiguous() for k, v in state.items()},
                    metadata={"unit": json.dumps(unit.params(), sort_keys=True), "step": str(step),
                              "every": str(every)})
    path = snapshot_path(unit, every, step, committed=committed)
    store.atomic_write(path, lambda f: f.write(blob))
    if committed:
        store.update_manifest({_name(unit, every, step): sha256_bytes(blob)})
    return path


def load(unit: Unit, every: int, step: int, device: torch.device | str = "cpu") -> EnsembleNet:
    """``unit``'s network at ``step`` (a one-member :class:`EnsembleNet` in eval mode); a committed file is
    verified against the manifest. FileNotFoundError naming the fix when that step is not kept."""
    from safetensors.torch import load_file

    from posbias.science.task import TaskConfig

    name = _name(unit, every, step)
    path = store.DATA / name
    if path.exists():
        want = store.load_manifest().get(name)
        if want is None or store.file_hash(path) != want:
            raise store.DataError(f"data/{name}: not as data/manifest.json lists it; restore it with git checkout")
    else:
        path = store.cache_dir() / name
    if not path.exists():
        raise FileNotFoundError(f"no weights of {unit.config.mask}/{unit.config.pe} depth {unit.depth} seed "
                                f"{unit.seed} at step {step:,} (every {every:,}): train them with `posbias jump`")
    cfg = TaskConfig()
    net = EnsembleNet([unit.config], [unit.seed], unit.depth, dim=cfg.dim, n_labels=cfg.n_labels,
                      n_tokens=cfg.n_tokens)
    net.load_state_dict({k: v.unsqueeze(0) for k, v in load_file(str(path)).items()})
    return net.to(device).eval()


def record(unit: Unit, every: int) -> dict[str, Any] | None:
    """The stored record (result and provenance) of ``unit`` trained with snapshots, or None."""
    return store.lookup_record(EXPERIMENT, _params(unit, every), version=VERSION)


def _ckdir(unit: Unit, every: int) -> Path:
    return store.checkpoint_dir(EXPERIMENT, _params(unit, every), VERSION)


def _parked(unit: Unit, every: int) -> Path:
    return parking.parked_path(EXPERIMENT, _params(unit, every), VERSION)


def train(unit: Unit, every: int, *, stored: dict[str, Any] | None = None, threads: int = 1,
          log: Callable[[str], None] = print) -> dict[str, Any]:
    """Train ``unit`` alone from its seed, keeping its weights at step 0 and every ``every`` iterations, and
    store its result (:func:`record`). ``stored``: the unit's result as committed before (its design record or
    an admitted one), compared bit for bit on the fields both have; the comparison goes into the provenance.
    Resumable (a checkpoint in the cache, a parked one in ``data/checkpoints`` first). Returns the result."""
    from posbias.training.loop import train_units
    from posbias.training.weights import compare_results, member_states

    if every <= 0 or unit.steps % every:
        raise ValueError(f"every must be a positive divisor of the unit's {unit.steps:,} steps, not {every}")
    have = record(unit, every)
    if have is not None:
        return have["result"]
    ckdir = _ckdir(unit, every)
    blob = parking.parked_checkpoint(_parked(unit, every))
    if blob is not None and not (ckdir / "state.pt").exists():
        store.atomic_write(ckdir / "state.pt", lambda f: f.write(blob))
        log(f"continuing from the parked checkpoint data/{_parked(unit, every).relative_to(store.DATA)}")

    def keep(step: int, run: Any) -> None:
        _save(unit, every, step, member_states(run.net.state_dict(), 1)[0])

    (fresh,) = train_units([unit], checkpoint_dir=ckdir, keep_checkpoint=True, threads=threads, log=log,
                           progress=False, snapshot_every=every, on_snapshot=keep)
    st = ck.load(ckdir / "state.pt", [unit], torch.device("cpu"), log=ck.quiet) or {}
    # the fields both have (an admitted record of the earlier campaign has no held-out loss or sweep curves)
    shared = None if stored is None else {k: v for k, v in stored.items() if k in fresh}
    fresh_cmp = None if shared is None else {k: fresh[k] for k in shared}
    if shared is not None and "curves" in shared:
        fresh_cmp["curves"] = {k: v for k, v in fresh["curves"].items() if k in shared["curves"]}
    diff = None if shared is None else compare_results(fresh_cmp, shared)
    # the summary is its sittings' (provenance.summary, issue 95), never the storing process's alone
    prov = with_summary({"trained_again": stored is not None,
                         "reproduces": None if diff is None else not diff, "differs_in": diff or [],
                         "unit_record": store.key_of(UNIT_EXPERIMENT, unit.params(), VERSION),
                         "snapshot_every": every, "snapshots": steps_kept(unit, every)}, st.get("sittings", []))
    out = store.cached(EXPERIMENT, _params(unit, every), lambda: fresh, version=VERSION, seeds=[unit.seed],
                       wall_seconds=round(float(fresh["train_seconds_ensemble"]), 3), extra_provenance=prov)
    shutil.rmtree(ckdir, ignore_errors=True)
    if parking.parked_parts(_parked(unit, every)):
        parking.unpark(_parked(unit, every))
    return out


def park(unit: Unit, every: int, log: Callable[[str], None] = print) -> bool:
    """Commit the cache checkpoint of an unfinished :func:`train` to ``data/checkpoints`` (when further than a
    committed one), so another machine continues it. True when one was parked."""
    st = ck.load(_ckdir(unit, every) / "state.pt", [unit], torch.device("cpu"), log=ck.quiet)
    if st is None:
        return False
    theirs = ck.step_of(parking.parked_checkpoint(_parked(unit, every)), [unit])
    if theirs is not None and theirs >= int(st["step"]):
        return False
    parking.park(_parked(unit, every), lambda f, st=st: torch.save(st, f))
    log(f"parked data/{_parked(unit, every).relative_to(store.DATA)}: at step {st['step']:,}/{unit.steps:,}")
    return True


def file_problem(name: str) -> str | None:
    """Why the weights ``name`` kept along training (``wu-jump/<run key>/<step>.safetensors``,
    :mod:`posbias.training.snapshots`) are not what they say, or None: their metadata must name the unit, the
    step and the interval, the unit and interval must have the run key of their folder, and the step their
    file name's."""
    from posbias.training.weights import metadata

    try:
        meta = metadata(store.DATA / name)
        unit, step, every = Unit.from_params(meta["unit"]), int(meta["step"]), int(meta["every"])
    except (OSError, ValueError, KeyError, TypeError) as e:
        return f"weights kept along training without a readable unit, step and interval ({type(e).__name__}: {e})"
    _, folder, file = name.split("/")
    if run_key(unit, every) != folder:
        return f"their unit and interval have the run key {run_key(unit, every)}, not their folder's {folder}"
    if file != f"{step:07d}.safetensors" or step % every:
        return f"their step {step:,} is not their file name's, or not a multiple of the interval {every:,}"
    return None
