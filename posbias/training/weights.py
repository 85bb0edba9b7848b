"""Kept weights: every network trained from now on stores its final weights beside its result.

A unit's weights are one safetensors file, ``<experiment>/<key>.safetensors`` with the key of its record
(:data:`WEIGHTS` = ``wu-weights``, the key of the unit in ``wu-units``), in ``data/`` (listed in the manifest,
its hash verified at every read) or in the user cache; the file's metadata hold the unit's parameters and
the provenance of the training that made it (its sittings among it). :func:`load` gives the network back
(a one-member :class:`~posbias.science.model.EnsembleNet`), ready for :func:`posbias.science.task.accuracy` and probes.

Networks stored before weights were kept are trained again by :func:`retrain` (``posbias keep-weights``): the
same unit, from the same seed, must end on its stored result bit for bit on a host of its numerics kind;
whether it did is written into the weights' provenance (``reproduces`` and the fields that differ).
"""
from __future__ import annotations

import json
import os
import shutil
import struct
import time
from pathlib import Path
from typing import Any, Callable

import torch

from posbias.storage import parking, store
from posbias.science.model import EnsembleNet
from posbias.storage.provenance import collect, sha256_bytes, with_summary
from posbias.training import checkpoints as ck
from posbias.training.units import UNIT_EXPERIMENT, VERSION, Unit, default_threads

__all__ = ["WEIGHTS", "weights_path", "kept", "save", "load", "load_state", "member_states", "metadata",
           "compare_results", "difference", "retrain", "park", "file_problem"]

WEIGHTS = "wu-weights"
#: Fields of a result that depend on the machine's clock or on the ensemble it trained in, not on the network.
_NOT_NETWORK = ("train_seconds_ensemble", "ensemble_size")


def _name(unit: Unit) -> str:
    return f"{WEIGHTS}/{store.key_of(UNIT_EXPERIMENT, unit.params(), VERSION)}.safetensors"


def weights_path(unit: Unit, *, committed: bool) -> Path:
    """Where ``unit``'s weights are kept: ``data/wu-weights/<key>.safetensors`` or the same in the user cache."""
    return (store.DATA if committed else store.cache_dir()) / _name(unit)


def kept(unit: Unit) -> Path | None:
    """The file of ``unit``'s kept weights (``data/`` first, verified against the manifest), or None.
    A committed file the manifest does not vouch for is a :class:`~posbias.storage.store.DataError`."""
    path = weights_path(unit, committed=True)
    if path.exists():
        want = store.load_manifest().get(_name(unit))
        if want is None or store.file_hash(path) != want:
            raise store.DataError(f"data/{_name(unit)}: {'not listed in' if want is None else 'differs from'} "
                                  "data/manifest.json; restore it with git checkout, or run posbias check-data")
        return path
    path = weights_path(unit, committed=False)
    return path if path.exists() else None


def member_states(net_state: dict[str, torch.Tensor], n: int) -> list[dict[str, torch.Tensor]]:
    """An ensemble's state dict ``{name: (E, ...)}`` cut into ``n`` members' ``{name: (...)}``."""
    return [{k: v[e].detach().cpu().contiguous().clone() for k, v in net_state.items()} for e in range(n)]


def save(unit: Unit, state: dict[str, torch.Tensor], provenance: dict[str, Any]) -> Path:
    """Keep ``unit``'s final weights ``state`` (one member's parameters) with ``provenance``, atomically: in
    ``data/`` and the manifest with ``POSBIAS_WRITE_DATA=1``, else in the user cache. Returns the path."""
    from safetensors.torch import save as to_bytes

    committed = os.environ.get("POSBIAS_WRITE_DATA") == "1"
    blob = to_bytes({k: v.contiguous() for k, v in state.items()},
                    metadata={"unit": json.dumps(unit.params(), sort_keys=True),
                              "provenance": json.dumps(store.to_jsonable(provenance), sort_keys=True)})
    path = weights_path(unit, committed=committed)
    store.atomic_write(path, lambda f: f.write(blob))
    if committed:
        store.update_manifest({_name(unit): sha256_bytes(blob)})
    return path


def metadata(path: Path) -> dict[str, Any]:
    """The metadata of a kept-weights file: ``{"unit": params, "provenance": {...}}``."""
    with open(path, "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
        head = json.loads(f.read(n))
    meta = head.get("__metadata__", {})
    return {k: json.loads(v) for k, v in meta.items()}


def load_state(unit: Unit) -> dict[str, torch.Tensor]:
    """``unit``'s kept parameters ``{name: tensor}``; FileNotFoundError naming the fix when none are kept."""
    from safetensors.torch import load_file

    path = kept(unit)
    if path is None:
        raise FileNotFoundError(f"no weights are kept for the unit {unit.params()}: train it again with "
                                "`posbias keep-weights` (networks stored before weights were kept have none)")
    if metadata(path)["unit"] != unit.params():
        raise store.DataError(f"{path}: its metadata name another unit")
    return load_file(str(path))


def load(unit: Unit, device: torch.device | str = "cpu") -> EnsembleNet:
    """``unit``'s network with its kept weights: a one-member :class:`EnsembleNet` in eval mode."""
    from posbias.science.task import TaskConfig

    cfg = TaskConfig()
    net = EnsembleNet([unit.config], [unit.seed], unit.depth, dim=cfg.dim, n_labels=cfg.n_labels,
                      n_tokens=cfg.n_tokens)
    net.load_state_dict({k: v.unsqueeze(0) for k, v in load_state(unit).items()})
    return net.to(device).eval()


def compare_results(fresh: dict[str, Any], stored: dict[str, Any]) -> list[str]:
    """The fields of a unit's result in which ``fresh`` differs from ``stored`` (exact equality of the JSON
    values), the clock and the ensemble size left out; ``[]``: bit for bit the same network."""
    keys = sorted((set(fresh) | set(stored)) - set(_NOT_NETWORK))
    return [k for k in keys if json.dumps(store.to_jsonable(fresh.get(k)), sort_keys=True)
            != json.dumps(store.to_jsonable(stored.get(k)), sort_keys=True)]


def difference(fresh: dict[str, Any], stored: dict[str, Any]) -> dict[str, Any]:
    """How far a retrained unit's result is from its stored one: the first evaluation step at which an IC curve
    differs (None if none does), the largest difference of a final IC accuracy, and both mean IC and sweep
    accuracies."""
    steps = fresh["curves"]["step"]
    names = [k for k in fresh["curves"] if k.startswith("IC_")]
    first = next((s for i, s in enumerate(steps)
                  if any(fresh["curves"][k][i] != stored["curves"][k][i] for k in names)), None)
    mean = {w: {k: sum(r["ic_accuracy"].values()) / len(r["ic_accuracy"]) if k == "ic"
                else sum(r["sweep_accuracy"]) / len(r["sweep_accuracy"]) for k in ("ic", "sweep")}
            for w, r in (("fresh", fresh), ("stored", stored))}
    most = max(abs(fresh["ic_accuracy"][k] - stored["ic_accuracy"][k]) for k in fresh["ic_accuracy"])
    return {"first_differing_evaluation": first, "mean_accuracy": mean, "max_ic_difference": most}


def _ckdir(part: list[Unit]) -> Path:
    return store.checkpoint_dir(WEIGHTS, {"units": ck.params_of(part)}, VERSION)


def _parked(part: list[Unit]) -> Path:
    return parking.parked_path(WEIGHTS, {"units": ck.params_of(part)}, VERSION)


def retrain(part: list[Unit], *, threads: int | None = None, log: Callable[[str], None] = print,
            progress: bool = False) -> list[Path]:
    """Train the stored units ``part`` (one ensemble: one depth and training settings) again from their seeds,
    resumably (its own checkpoints, a parked one in ``data/checkpoints/wu-weights`` first), keep each one's
    final weights and say in their provenance whether the fresh result equals the stored one bit for bit.
    Units whose weights are kept already are left out. Returns the paths written."""
    from posbias.training.campaigns import lookup
    from posbias.training.loop import train_units

    todo = [u for u in part if kept(u) is None]
    if not todo:
        return []
    records = [lookup(u) for u in todo]
    if any(r is None for r in records):
        raise ValueError("keep-weights trains again networks that are stored; a unit here is not: "
                         "train it with `posbias campaign`, which keeps its weights")
    ckdir = _ckdir(todo)
    blob = parking.parked_checkpoint(_parked(todo))
    if blob is not None and not (ckdir / "state.pt").exists():
        store.atomic_write(ckdir / "state.pt", lambda f: f.write(blob))
        log(f"continuing from the parked checkpoint data/{_parked(todo).relative_to(store.DATA)}")
    t0, started = time.perf_counter(), time.strftime("%Y-%m-%dT%H:%M:%S+00:00", time.gmtime())
    results = train_units(todo, checkpoint_dir=ckdir, keep_checkpoint=True, threads=threads or default_threads(),
                          log=log, progress=progress)
    st = ck.load(ckdir / "state.pt", todo, torch.device("cpu"), log=ck.quiet) or {}
    states = member_states(st["net"], len(todo))
    paths = []
    for u, fresh, stored, w in zip(todo, results, records, states):
        diff = compare_results(fresh, stored)
        prov = {**with_summary(collect(started=started, wall_seconds=round(time.perf_counter() - t0, 3),
                                       seeds=[u.seed]), st.get("sittings", [])),
                "trained_again": True, "reproduces": not diff,
                "differs_in": diff, "record": store.key_of(UNIT_EXPERIMENT, u.params(), VERSION),
                **({"difference": difference(fresh, stored)} if diff else {})}
        paths.append(save(u, w, prov))
        log(f"kept the weights of depth {u.depth} {u.config.mask}/{u.config.pe} seed {u.seed}: "
            + ("reproduces its stored result bit for bit" if not diff else f"differs in {', '.join(diff)}"))
    shutil.rmtree(ckdir, ignore_errors=True)
    if parking.parked_parts(_parked(todo)):
        parking.unpark(_parked(todo))
    return paths


def park(parts: list[list[Unit]], log: Callable[[str], None] = print) -> int:
    """Commit the cache checkpoints of unfinished :func:`retrain` parts to ``data/checkpoints/wu-weights`` (when
    further than a committed one), so another machine continues them. Returns how many were parked."""
    n = 0
    for part in parts:
        todo = [u for u in part if kept(u) is None]
        st = ck.load(_ckdir(todo) / "state.pt", todo, torch.device("cpu"), log=ck.quiet) if todo else None
        if st is None:
            continue
        theirs = ck.step_of(parking.parked_checkpoint(_parked(todo)), todo)
        if theirs is not None and theirs >= int(st["step"]):
            continue
        parking.park(_parked(todo), lambda f, st=st: torch.save(st, f))
        n += 1
        log(f"parked data/{_parked(todo).relative_to(store.DATA)}: depth {todo[0].depth}, {len(todo)} units "
            f"at step {st['step']}/{todo[0].steps}")
    return n


def file_problem(name: str) -> str | None:
    """Why the kept weights ``name`` (``wu-weights/<key>.safetensors``) are not what they say, or None: their
    metadata must name the unit whose record key is their file name, that record must be committed, and their
    provenance must be there."""
    try:
        meta = metadata(store.DATA / name)
    except (OSError, ValueError, KeyError) as e:
        return f"unreadable kept weights ({type(e).__name__}: {e})"
    if "unit" not in meta or "provenance" not in meta:
        return "kept weights without the unit or the provenance in their metadata"
    key = store.key_of(UNIT_EXPERIMENT, meta["unit"], VERSION)
    if name.rsplit("/", 1)[-1] != f"{key}.safetensors":
        return f"the unit in their metadata has the key {key}, not their file name"
    if not (store.DATA / UNIT_EXPERIMENT / f"{key}.json").exists():
        return f"no committed record {UNIT_EXPERIMENT}/{key}.json for the network they keep"
    return None
