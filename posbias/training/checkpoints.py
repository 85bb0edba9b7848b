"""Checkpoints of a training ensemble: saving and loading them exactly, finding the furthest one a
part can resume from (in the user cache, committed in ``data/checkpoints``, or inside a larger
ensemble's), cutting a part out of a larger ensemble, parking unfinished ones into ``data/``, and
the guard lock a process training an ensemble holds.

A checkpoint (``format`` 2) holds the weights, the AdamW state, the step, the curves so far, the loss
accumulators, the global RNG states (torch, CUDA, numpy, Python), the wall time, the torch threads
and the sittings (the provenance of every process that trained it). Training batches come from
generators keyed by ``(seed, step)``, so they need no state.
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import io
import os
import random
import signal
import threading
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

import numpy as np
import torch

from posbias.storage import parking, store
from posbias.storage.provenance import collect
from posbias.training.units import UNIT_EXPERIMENT, VERSION, Unit, unit_key

Log = Callable[[str], None]


def checkpoint_interval() -> float:
    """Seconds between checkpoints of a running ensemble: ``$POSBIAS_CHECKPOINT_SECONDS``, else 60."""
    raw = os.environ.get("POSBIAS_CHECKPOINT_SECONDS", "").strip()
    if not raw:
        return 60.0
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    if not value >= 0:
        raise ValueError(f"POSBIAS_CHECKPOINT_SECONDS={raw!r}: give a number of seconds >= 0 (unset = 60)")
    return value


class Interrupted(KeyboardInterrupt):
    """Training stopped by SIGINT or SIGTERM (``signum``), or by its campaign's driver (``signum`` 0),
    at a step boundary, after saving its checkpoint."""

    def __init__(self, signum: int, step: int, steps: int, checkpoint: Path | None):
        name = signal.Signals(signum).name if signum else "the driver's stop"
        where = (f"checkpoint saved to {checkpoint}; run the same command again to resume"
                 if checkpoint is not None else "no checkpoint folder, nothing saved")
        super().__init__(f"{name} at step {step}/{steps}: {where}")
        self.signum, self.step, self.steps, self.checkpoint = signum, step, steps, checkpoint


def save(path: Path, obj: Any) -> None:
    """Write a checkpoint atomically (:func:`posbias.storage.store.atomic_write`)."""
    store.atomic_write(path, lambda f: torch.save(obj, f))


def rng_state() -> dict[str, Any]:
    """The global random states a resumed run must continue from."""
    return {"torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
            "numpy": np.random.get_state(), "python": random.getstate()}


def set_rng_state(st: dict[str, Any]) -> None:
    """Restore :func:`rng_state`'s states. They are byte tensors on the CPU whatever device the checkpoint
    was loaded onto (a checkpoint loaded with ``map_location=cuda`` carries them there)."""
    torch.set_rng_state(st["torch"].cpu())
    if st.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in st["cuda"]])
    np.random.set_state(st["numpy"])
    random.setstate(st["python"])


@contextlib.contextmanager
def deferred_signals() -> Iterator[list[int]]:
    """For the block, SIGINT and SIGTERM only append their number to the yielded list (main thread only)."""
    got: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield got
        return

    def handler(signum: int, frame: Any) -> None:
        got.append(signum)

    saved = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield got
    finally:
        for s, h in saved.items():
            signal.signal(s, signal.SIG_DFL if h is None else h)


def load(ckpt: Path | bytes | None, units: list[Unit] | None, dev: torch.device, log: Log) -> dict | None:
    """The checkpoint of exactly these units (of any units with ``units=None``), or None (missing,
    unreadable, or another run's). ``ckpt`` is a file or the bytes of a committed checkpoint
    (:func:`posbias.storage.store.parked_checkpoint`)."""
    if ckpt is None or (isinstance(ckpt, Path) and not ckpt.exists()):
        return None
    if isinstance(ckpt, bytes):
        ckpt_src: Any = io.BytesIO(ckpt)
        ckpt = Path("<committed checkpoint>")
    else:
        ckpt_src = ckpt
    try:
        st = torch.load(ckpt_src, map_location=dev, weights_only=False)
    except Exception as e:  # noqa: BLE001 - a damaged file is reported and ignored
        log(f"warning: checkpoint {ckpt} is unreadable ({type(e).__name__}: {e}); starting from step 0")
        return None
    if units is not None and "units" in st and st["units"] != [u.params() for u in units]:
        log(f"warning: checkpoint {ckpt} belongs to other units; starting from step 0")
        return None
    return st


def quiet(s: str) -> None:
    """A log that says nothing."""


# --------------------------------------------------------------------------- where a part's files live

def params_of(part: Sequence[Unit | dict[str, Any]]) -> list[dict[str, Any]]:
    """The params of an ensemble's units, given as units or as params (as a checkpoint lists them)."""
    return [u.params() if isinstance(u, Unit) else u for u in part]


def checkpoint_of(part: Sequence[Unit | dict[str, Any]], create: bool = True) -> Path:
    """The folder of the part's checkpoint in the user cache (``state.pt`` inside)."""
    return store.checkpoint_dir(UNIT_EXPERIMENT, {"units": params_of(part)}, VERSION, create=create)


def lock_of(part: Sequence[Unit | dict[str, Any]]) -> Path:
    """The lock a process training this ensemble holds, beside its checkpoint directory."""
    ck = checkpoint_of(part, create=False)
    return ck.parent / f"{ck.name}.lock"


def parked_of(part: Sequence[Unit | dict[str, Any]]) -> Path:
    """Where the part's checkpoint is committed in ``data/checkpoints``."""
    return parking.parked_path(UNIT_EXPERIMENT, {"units": params_of(part)}, VERSION)


_NO_FLOCK = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL)


@contextlib.contextmanager
def guard(lock: Path, wait: Log | None = None) -> Iterator[bool]:
    """An exclusive lock on ``lock``; yields whether it is held. Without ``wait`` it does not block
    (False: another process holds it); with it, says so through ``wait`` and waits. A filesystem
    without ``flock`` (Lustre without the option, NFS ``nolock``) yields True with a warning: the
    guard against a duplicate task is then off."""
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a+") as f:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if wait is None:
                yield False
                return
            wait(f"waiting for another process training the same units (lock {lock})")
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        except OSError as e:
            if e.errno not in _NO_FLOCK:
                raise
            warnings.warn(f"{lock.parent} does not support flock ({e.strerror}); training without the guard "
                          "against a duplicate task: make sure no two workers train the same units", stacklevel=3)
            yield True
            return
        try:
            yield True
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


# --------------------------------------------------------------------------- the furthest checkpoint

def step_of(ckpt: Path | bytes | None, part: list[Unit]) -> int | None:
    """The step of ``ckpt`` (a file or a committed checkpoint's bytes) if it is a readable
    checkpoint of exactly ``part``, else None."""
    st = load(ckpt, part, torch.device("cpu"), log=quiet)
    return None if st is None else int(st["step"])


@dataclass(frozen=True)
class Found:
    """A checkpoint found on this machine or in ``data/``: its units' params, its step, where it is
    (the cache file, or the committed checkpoint's name, :func:`posbias.storage.parking.parked_path`),
    whether it is ``committed``, and its ``state`` as loaded on the CPU."""

    units: list[dict[str, Any]]
    step: int
    path: Path
    committed: bool
    state: dict[str, Any] = field(repr=False)


def checkpoints() -> list[Found]:
    """Every readable checkpoint of this code version (:data:`VERSION`), in the user cache and in
    ``data/checkpoints``, furthest first (at the same step: fewer units, then the cache's first)."""
    cpu, found = torch.device("cpu"), []
    root = store.cache_dir() / UNIT_EXPERIMENT
    for f in sorted(root.glob("*.ckpt/state.pt")) if root.is_dir() else []:
        st = load(f, None, cpu, quiet)
        if st is not None and "units" in st and checkpoint_of(st["units"], create=False) == f.parent:
            found.append(Found(st["units"], int(st["step"]), f, False, st))
    for target in parking.parked_checkpoints():
        if target.parent.name != UNIT_EXPERIMENT:
            continue
        st = load(parking.parked_checkpoint(target), None, cpu, quiet)
        if st is not None and "units" in st and parked_of(st["units"]) == target:
            found.append(Found(st["units"], int(st["step"]), target, True, st))
    return sorted(found, key=lambda c: (-c.step, len(c.units), c.committed))


def source(part: list[Unit], found: list[Found]) -> Found | None:
    """The checkpoint ``part`` resumes from: the furthest of its own (in the cache or committed) and
    those of larger ensembles holding all its units; at the same step its own, then the cache's."""
    want = [u.params() for u in part]
    cands = [c for c in found if c.units == want or all(p in c.units for p in want)]
    return min(cands, key=lambda c: (-c.step, c.units != want, c.committed), default=None)


def split_state(st: dict[str, Any], part: list[Unit]) -> dict[str, Any]:
    """The checkpoint of the ensemble ``part`` cut out of the checkpoint ``st`` of a larger ensemble
    holding all its units: every weight and AdamW moment taken along the ensemble axis (axis 0 of
    each, which must have one entry per member), the members' curves, loss sums and best weights (units
    with a held-out set); the step, wall
    time, random states and sittings as they were, and the split recorded in ``splits``. Exact:
    the members of an ensemble never interact (``test_ensemble_result_equals_alone``), so training
    the part on from here gives what training the larger ensemble on would have given its units."""
    E, idx = len(st["units"]), [st["units"].index(u.params()) for u in part]
    ix = torch.tensor(idx)

    def cut(name: str, t: Any) -> Any:
        if not torch.is_tensor(t) or t.dim() == 0:
            return t                            # AdamW's step count, shared by every member
        if t.shape[0] != E:
            raise ValueError(f"checkpoint tensor {name} of shape {tuple(t.shape)} has no ensemble axis of {E}")
        return t[ix].clone()

    opt = {**st["opt"], "state": {i: {k: cut(f"opt.{i}.{k}", v) for k, v in s.items()}
                                  for i, s in st["opt"]["state"].items()}}
    split = {"members": E, "key": store.key_of(UNIT_EXPERIMENT, {"units": st["units"]}, VERSION),
             "step": int(st["step"]), "wall": float(st["wall"]),
             "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    return {**{k: v for k, v in st.items() if k != "parked"}, "units": [u.params() for u in part],
            "net": {k: cut(k, v) for k, v in st["net"].items()}, "opt": opt,
            "curves": {k: v if k == "step" else [[row[i] for i in idx] for row in v] for k, v in st["curves"].items()},
            "loss_acc": cut("loss_acc", st["loss_acc"]), "splits": st.get("splits", []) + [split],
            **({"best": {"step": [st["best"]["step"][i] for i in idx], "loss": [st["best"]["loss"][i] for i in idx],
                         "net": {k: cut(f"best.{k}", v) for k, v in st["best"]["net"].items()}}}
               if "best" in st else {})}


def take_furthest(part: list[Unit], ckpt: Path, log: Log) -> None:
    """Before ``part`` trains: write to its cache checkpoint ``ckpt`` the furthest checkpoint it can
    resume from (:func:`source`) when that is not ``ckpt`` itself: its committed copy in
    ``data/checkpoints``, or its units cut out of a larger ensemble's checkpoint (:func:`split_state`).
    A larger ensemble another process is training is not cut: RuntimeError, naming the fix."""
    src = source(part, checkpoints())
    if src is None or src.path == ckpt:
        return
    where = f"data/{src.path.relative_to(store.DATA)}" if src.committed else str(src.path)
    if src.units == [u.params() for u in part]:
        blob = parking.parked_checkpoint(src.path)
        if blob is not None:
            store.atomic_write(ckpt, lambda f: f.write(blob))
            log(f"continuing from the committed checkpoint {where} (step {src.step}, "
                f"{len(parking.parked_parts(src.path))} part(s))")
        return
    with guard(lock_of(src.units)) as free:
        if not free and not src.committed:
            raise RuntimeError(
                f"the {len(src.units)}-unit ensemble whose checkpoint these {len(part)} units would be split from "
                f"({where}) is being trained by another process (it holds {lock_of(src.units)}): stop that "
                f"process first (Ctrl-C or SIGTERM; it saves a checkpoint), then start the campaign again")
        # a cache checkpoint is read again under the lock (it may have moved on); a committed one cannot have
        st = src.state if src.committed else load(src.path, None, torch.device("cpu"), log)
        if st is None:
            return
        save(ckpt, split_state(st, part))
    log(f"continuing from step {st['step']} of the checkpoint of a larger ensemble "
        f"({len(st['units'])} units, {where}): "
        f"its {len(part)} units split off")


def park(plan: list[list[Unit]], stored: Callable[[Any], bool], log: Log) -> dict[str, int]:
    """Commit the checkpoints of the unfinished ensembles ``plan`` (as the campaign splits them) so
    another machine can continue; trains nothing. Each cache checkpoint further along than its
    committed copy is copied to ``data/checkpoints/`` and listed in the manifest; committed
    checkpoints all of whose units are ``stored`` are removed with their manifest entries, and so is
    a committed checkpoint of a larger ensemble once every unit of it is stored or in a smaller
    ensemble split from it whose committed checkpoint is at least as far. Returns counts
    ``{"parked", "kept", "removed"}``."""
    counts = {"parked": 0, "kept": 0, "removed": 0}
    committed_step: dict[str, int] = {}     # unit -> step of its part's committed checkpoint, after parking
    for part in plan:
        ckpt, target = checkpoint_of(part, create=False) / "state.pt", parked_of(part)
        st = load(ckpt, part, torch.device("cpu"), log=quiet)
        theirs = step_of(parking.parked_checkpoint(target), part)
        ours = None if st is None else int(st["step"])
        at = [step for step in (ours, theirs) if step is not None]      # parked below when ours is further
        if at:
            committed_step.update({unit_key(u): max(at) for u in part})
        if ours is None:
            continue
        if theirs is not None and theirs >= ours:
            counts["kept"] += 1
            continue
        st["parked"] = {**collect(wall_seconds=round(float(st["wall"]), 3), seeds=[u.seed for u in part],
                                  device=st.get("device")), "step": ours}     # who committed it, when
        files = parking.park(target, lambda f, st=st: torch.save(st, f))
        counts["parked"] += 1
        log(f"committed data/{target.relative_to(store.DATA)} ({len(files)} part(s), "
            f"{sum(p.stat().st_size for p in files) / 1e6:.1f} MB): depth {part[0].depth}, {part[0].config.pe} PE, "
            f"{len(part)} units at step {ours}/{part[0].steps}")
    own = {parked_of(part) for part in plan}
    for path in parking.parked_checkpoints():
        if path.parent.name != UNIT_EXPERIMENT:     # others' (kept weights' retraining) are parked by their owner
            continue
        try:
            st = torch.load(io.BytesIO(parking.parked_checkpoint(path)), map_location="cpu", weights_only=False)
            params = st["units"]
        except Exception:  # noqa: BLE001 - a damaged committed checkpoint is left for check-data to report
            continue
        if all(stored(p) for p in params):
            why = "its units are all stored"
        elif path not in own and path.parent.name == UNIT_EXPERIMENT and all(
                stored(p) or committed_step.get(unit_key(p), -1) >= int(st["step"]) for p in params):
            why = "its units are stored or committed further along in the smaller ensembles split from it"
        else:
            continue
        parking.unpark(path)
        counts["removed"] += 1
        log(f"removed data/{path.relative_to(store.DATA)}: {why}")
    return counts
