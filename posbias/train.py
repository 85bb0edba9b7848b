"""Training the ensembles of Wu et al.'s experiments, resumably, and the campaigns of the chapters.

A *unit* is one (configuration, seed): its result (training curves, final accuracies on the six
``IC`` sets, position sweeps, mean attention maps, sink shares) is stored on its own with
``store.cached`` under the experiment ``wu-units``, so a unit shared by two chapters is trained once
and a campaign stopped half way keeps every finished unit. Units still missing are grouped by
depth and trained as one :class:`~posbias.model.EnsembleNet`; since the ensemble is bit-for-bit
equivalent to training each member alone, the grouping never changes a unit's result.

Resuming. A running ensemble saves a checkpoint every ``$POSBIAS_CHECKPOINT_SECONDS`` (default 60)
seconds, atomically (temporary file, fsync, ``os.replace``), in ``store.checkpoint_dir``: weights,
AdamW state, the step, the curves so far, the loss accumulators and the global RNG states (torch,
CUDA, numpy, Python; the training batches themselves come from generators keyed by
``(seed, step)``, so they need no state). SIGINT and SIGTERM during training finish the current
step, save a checkpoint and raise :class:`Interrupted`; a killed process loses at most the steps
since the last checkpoint. The next identical run resumes from it and ends with bit-for-bit the
result of an uninterrupted run (on the same device and number of torch threads), except the
measured wall time ``train_seconds_ensemble``. Each checkpoint lists its sittings (the provenance of
every process that trained it: commit, packages, device, threads, start).

Across machines. The user cache stays on one machine; a campaign longer than one sitting on a
machine that does not last is carried over by committing its checkpoints: :func:`park_campaign`
(``posbias campaign CHAPTER --no-train --write-data``) copies the checkpoint of every unfinished
ensemble to ``data/checkpoints/`` and lists it in the manifest, and :func:`run_campaign` on a fresh
clone continues from a committed checkpoint that is further along than its own.

Splitting. Processes share out ensembles, not steps, so when fewer ensembles are left than cores a
core idles. Started again with a smaller ``max_members`` (``posbias campaign --max-members N``), a
campaign cuts a started ensemble into parts (:func:`_split_state`: weights, AdamW moments, curves
and loss sums taken along the ensemble axis), each resuming from the larger checkpoint; since the
members of an ensemble never interact, the parts end bit-identical to the whole. The checkpoints
then fix the partition (:func:`_ensembles`), so every later command keeps the split, and the
results record it (``splits``) so that :func:`training_time` counts the shared time once.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
import random
import shutil
import signal
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from . import evaluate as ev
from .model import EnsembleNet, MemberConfig
from .provenance import collect
from .task import (IC_PAIRS, TaskConfig, TestSet, ensemble_batch, ic_test_sets, make_task, slot_index,
                   sweep_test_sets)

__all__ = ["device", "default_threads", "tune_allocator", "checkpoint_interval", "Interrupted", "Unit", "train_units",
           "run_campaign", "park_campaign", "campaign_status", "training_time", "fig2_name", "stored_campaign", "store_finished", "campaign_units", "CHAPTER_CAMPAIGNS", "chapter_campaign", "run_chapter_campaign",
           "PROFILES", "UNIT_EXPERIMENT", "VERSION", "TEST_SEED", "SINK_SEED"]

UNIT_EXPERIMENT = "wu-units"
VERSION = 2                 # 2: fused softmax, complex RoPE, O(m^2) class draws (1 gave other roundings)
TEST_SEED = 20250201        # the fixed test sets shared by every unit
SINK_SEED = 10**9           # batches for attention maps; far from any training seed


def device() -> torch.device:
    """CUDA when present, else the CPU."""
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


def default_threads() -> int:
    """Torch threads: ``$POSBIAS_THREADS`` if set, else half the cores this process may use (>= 1).

    On two shared cores, oversubscribed torch threads run several times slower than one thread.
    """
    if os.environ.get("POSBIAS_THREADS"):
        return max(1, int(os.environ["POSBIAS_THREADS"]))
    return max(1, len(os.sched_getaffinity(0)) // 2)


@dataclass(frozen=True)
class Unit:
    """One (configuration, seed) and the training settings it needs: a pure function of these."""

    depth: int
    config: MemberConfig
    target_slots: tuple[int, ...] | None
    seed: int
    steps: int
    batch_size: int = 128
    lr: float = 1e-3
    weight_decay: float = 1e-6
    eval_every: int = 1000
    n_test: int = 10000
    n_sweep: int = 2000
    n_sink: int = 1000

    def params(self) -> dict[str, Any]:
        """The store key: everything the result depends on."""
        return {"depth": self.depth, **self.config.to_dict(),
                "target_slots": None if self.target_slots is None else list(self.target_slots),
                "seed": self.seed, "steps": self.steps, "batch_size": self.batch_size, "lr": self.lr,
                "weight_decay": self.weight_decay, "eval_every": self.eval_every, "n_test": self.n_test,
                "n_sweep": self.n_sweep, "n_sink": self.n_sink, "test_seed": TEST_SEED}

    def shape_key(self) -> tuple:
        """Units with equal keys can share one ensemble."""
        return (self.depth, self.steps, self.batch_size, self.lr, self.weight_decay, self.eval_every,
                self.n_test, self.n_sweep, self.n_sink, self.config.rope_base)

    def group_key(self) -> tuple:
        """How :func:`run_campaign` groups units into ensembles: by :meth:`shape_key` and PE, so that
        RoPE and the sinusoidal PE act on whole ensembles (a mixed one pays a gather and a scatter;
        measured in ``benchmarks/train_throughput.py``). Grouping never changes a unit's result."""
        return (*self.shape_key(), self.config.pe)


_TEST_CACHE: dict[tuple, Any] = {}


def _tests(n_test: int, n_sweep: int, cfg: TaskConfig) -> tuple[dict[str, TestSet], list[TestSet]]:
    key = (n_test, n_sweep, cfg)
    if key not in _TEST_CACHE:
        _TEST_CACHE[key] = (ic_test_sets(n_test, TEST_SEED, cfg), sweep_test_sets(n_sweep, TEST_SEED + 1, cfg))
    return _TEST_CACHE[key]


# glibc's malloc returns every freed block above a moving threshold to the kernel, so the few-MB
# activations of each step come back as fresh pages that fault and are zeroed again on every step.
# A fixed 32 MiB mmap threshold, 1 GiB trim threshold and 256 MiB top pad keep them in the heap.
# Results are unaffected (torch's CPU allocator aligns every tensor to 64 bytes either way; tested
# bit for bit); the steps are faster (benchmarks/train_throughput.py measures by how much).
_MALLOPT = {-3: 32 << 20, -1: 1 << 30, -2: 256 << 20}    # M_MMAP_THRESHOLD, M_TRIM_THRESHOLD, M_TOP_PAD
_allocator_tuned = False


def tune_allocator() -> bool:
    """Keep training's short-lived buffers in glibc's heap (see ``_MALLOPT``); once per process.

    Returns whether the allocator is tuned: False off glibc, or with ``$POSBIAS_TUNE_MALLOC=0``.
    """
    global _allocator_tuned
    if _allocator_tuned or os.environ.get("POSBIAS_TUNE_MALLOC", "1").strip() == "0":
        return _allocator_tuned
    import ctypes
    import platform

    if platform.libc_ver()[0] != "glibc":
        return False
    mallopt = ctypes.CDLL(None).mallopt
    _allocator_tuned = all(mallopt(ctypes.c_int(k), ctypes.c_int(v)) == 1 for k, v in _MALLOPT.items())
    return _allocator_tuned


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
    """Training stopped by SIGINT or SIGTERM at a step boundary, after saving its checkpoint."""

    def __init__(self, signum: int, step: int, steps: int, checkpoint: Path | None):
        name = signal.Signals(signum).name
        where = (f"checkpoint saved to {checkpoint}; run the same command again to resume"
                 if checkpoint is not None else "no checkpoint folder, nothing saved")
        super().__init__(f"{name} at step {step}/{steps}: {where}")
        self.signum, self.step, self.steps, self.checkpoint = signum, step, steps, checkpoint


def _save(path: Path, obj: Any) -> None:
    """Write a checkpoint atomically (:func:`posbias.store.atomic_write`)."""
    from . import store

    store.atomic_write(path, lambda f: torch.save(obj, f))


def _rng_state() -> dict[str, Any]:
    return {"torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
            "numpy": np.random.get_state(), "python": random.getstate()}


def _set_rng_state(st: dict[str, Any]) -> None:
    torch.set_rng_state(st["torch"])
    if st.get("cuda") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(st["cuda"])
    np.random.set_state(st["numpy"])
    random.setstate(st["python"])


@contextlib.contextmanager
def _deferred_signals() -> Iterator[list[int]]:
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


def _load_checkpoint(ckpt: Path | bytes | None, units: list["Unit"] | None, dev: torch.device,
                     log: Callable[[str], None]) -> dict | None:
    """The checkpoint of exactly these units (of any units with ``units=None``), or None (missing,
    unreadable, or another run's). ``ckpt`` is a file or the bytes of a committed checkpoint
    (:func:`posbias.store.parked_checkpoint`)."""
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


def train_units(units: list[Unit], *, checkpoint_dir: Path | None = None, checkpoint_seconds: float | None = None,
                progress: bool = True, threads: int | None = None, autocast_bf16: bool = False,
                keep_checkpoint: bool = False, log: Callable[[str], None] = print) -> list[dict[str, Any]]:
    """Train ``units`` (all of one :meth:`Unit.shape_key`) as one ensemble; one result dict per unit.

    Every ``eval_every`` steps (and at the end) the six ``IC`` accuracies are measured on the fixed
    test sets. With ``checkpoint_dir`` the state is saved every ``checkpoint_seconds`` (default
    :func:`checkpoint_interval`, i.e. ``$POSBIAS_CHECKPOINT_SECONDS`` or 60), when the last step is
    done, and on SIGINT/SIGTERM (which then raise :class:`Interrupted`); a run finding a checkpoint of
    the same units resumes from it, exactly. The checkpoint is deleted once the results exist unless
    ``keep_checkpoint`` (:func:`run_campaign` deletes it after storing them). ``curves["loss"]``
    holds the mean training loss over each interval (its first entry, at step 0, is 0: no step
    yet). ``autocast_bf16`` runs the forward pass under bfloat16 autocast (an experiment: results
    then differ from fp32). ``log`` gets one line on resuming, on an interruption and at the end.
    """
    if len({u.shape_key() for u in units}) != 1:
        raise ValueError("units of one ensemble must share depth and training settings")
    interval = checkpoint_interval() if checkpoint_seconds is None else float(checkpoint_seconds)
    torch.set_num_threads(threads or default_threads())
    tune_allocator()
    u0, E, dev = units[0], len(units), device()
    cfg = TaskConfig()
    tasks = [make_task(u.seed, cfg) for u in units]
    seeds = [u.seed for u in units]
    slots = [u.target_slots for u in units]
    net = EnsembleNet([u.config for u in units], seeds, u0.depth, n_tokens=cfg.n_tokens).to(dev)
    opt = torch.optim.AdamW(net.parameters(), lr=u0.lr, weight_decay=u0.weight_decay)
    ic_sets, sweeps = _tests(u0.n_test, u0.n_sweep, cfg)
    curves: dict[str, list] = {"step": [], "loss": [], **{name: [] for name in ic_sets}}
    start, loss_acc, n_acc, wall = 0, torch.zeros(E), 0, 0.0
    ckpt = None if checkpoint_dir is None else Path(checkpoint_dir) / "state.pt"
    st = None
    if ckpt is not None:
        ckpt.parent.mkdir(parents=True, exist_ok=True)
        for stale in ckpt.parent.glob(f".{ckpt.name}.*.tmp"):     # left by a process killed while saving
            stale.unlink(missing_ok=True)
        st = _load_checkpoint(ckpt, units, dev, log)
    if st is not None:
        net.load_state_dict(st["net"])
        opt.load_state_dict(st["opt"])
        start, curves, loss_acc, n_acc, wall = st["step"], st["curves"], st["loss_acc"], st["n_acc"], st["wall"]
        if st.get("rng") is not None:
            _set_rng_state(st["rng"])
        log(f"resumed from step {start}/{u0.steps} ({ckpt}); {u0.steps - start} steps to go")
        if st.get("threads") not in (None, torch.get_num_threads()):
            log(f"warning: the checkpoint was written with {st['threads']} torch threads, this run uses "
                f"{torch.get_num_threads()}; for a result bit-identical to an uninterrupted run set "
                f"POSBIAS_THREADS={st['threads']}")

    splits = (st or {}).get("splits", [])     # the larger ensembles it was split from (:func:`_split_state`)
    sittings = (st or {}).get("sittings", []) + [
        {**collect(device=str(dev)), "from_step": start, "from_wall": wall, "torch_threads": torch.get_num_threads()}] \
        if ckpt else []

    def state(done: int) -> dict[str, Any]:
        return {"format": 2, "units": [u.params() for u in units], "net": net.state_dict(), "opt": opt.state_dict(),
                "step": done, "curves": curves, "loss_acc": loss_acc, "n_acc": n_acc,
                "wall": time.perf_counter() - t0, "rng": _rng_state(), "threads": torch.get_num_threads(),
                "device": str(dev), "sittings": sittings, **({"splits": splits} if splits else {})}

    def evaluate(step: int) -> None:
        net.eval()
        accs = ev.ic_accuracies(net, tasks, ic_sets)
        net.train()
        curves["step"].append(step)
        curves["loss"].append((loss_acc / max(n_acc, 1)).tolist())
        for name, a in accs.items():
            curves[name].append(a.tolist())

    bar = None
    if progress:
        from .report import progress as _progress  # rare plain-text updates inside an executed notebook
        bar = _progress(total=u0.steps, initial=start, desc=f"depth {u0.depth} x {E} members", leave=False)
    t_last, t0 = time.monotonic(), time.perf_counter() - wall
    t_run = time.perf_counter()
    done = start
    with _deferred_signals() as got:    # a signal stops training between two steps, never inside one
        if start == 0 and not curves["step"]:
            evaluate(0)
        for step in range(start, u0.steps):
            if got:
                break
            x, y = ensemble_batch(tasks, seeds, slots, step, u0.batch_size)
            x, y = x.to(dev), y.to(dev)
            with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=autocast_bf16):
                logits = net(x)
            loss = F.cross_entropy(logits.float().flatten(0, 1), y.flatten(), reduction="none").view(E, -1).mean(1)
            opt.zero_grad(set_to_none=True)
            loss.sum().backward()
            opt.step()
            loss_acc += loss.detach().cpu()
            n_acc += 1
            done = step + 1
            if done % u0.eval_every == 0 or done == u0.steps:
                evaluate(done)
                loss_acc, n_acc = torch.zeros(E), 0
            if bar is not None:
                bar.update(1)
            if ckpt is not None and (time.monotonic() - t_last > interval) and done < u0.steps:
                _save(ckpt, state(done))
                t_last = time.monotonic()
        if ckpt is not None and (got or (done == u0.steps and done > start)):
            _save(ckpt, state(done))    # on a signal; and at the end, so a stop in the final evaluation keeps it
        if bar is not None:
            bar.close()
        if got:
            err = Interrupted(got[0], done, u0.steps, None if ckpt is None else ckpt.parent)
            log(str(err))
            raise err
    train_seconds = time.perf_counter() - t0
    log(f"trained {u0.steps - start} of {u0.steps} steps (steps {start}..{u0.steps}) in "
        f"{time.perf_counter() - t_run:.1f} s")

    net.eval()
    final = ev.ic_accuracies(net, tasks, ic_sets)
    sweep = ev.sweep_accuracies(net, tasks, sweeps)
    maps = ev.attention_maps(net, tasks, u0.n_sink, SINK_SEED)          # (E, depth, n, T, T)
    results = []
    for e, u in enumerate(units):
        mask = net.mask[e, 0].cpu()
        results.append({
            "params": u.params(),
            "curves": {"step": curves["step"], "loss": [row[e] for row in curves["loss"]],
                       **{name: [row[e] for row in curves[name]] for name in ic_sets}},
            "ic_accuracy": {name: float(a[e]) for name, a in final.items()},
            "gaps": {k: float(v[e]) for k, v in ev.gaps({n: a for n, a in final.items()}).items()},
            "sweep_accuracy": sweep[e].tolist(),
            "mean_attention": maps[e].mean(1).tolist(),                  # (depth, T, T)
            "sink_share": ev.sink_share(maps[e], mask).tolist(),         # (T,)
            "sink_alpha": ev.sink_alpha(maps[e], mask).mean(1).tolist(),  # (depth, T)
            "train_seconds_ensemble": train_seconds,
            "ensemble_size": E,
            **({"splits": splits} if splits else {}),
        })
    if ckpt is not None and not keep_checkpoint:
        ckpt.unlink(missing_ok=True)
    return results


# --------------------------------------------------------------------------- campaigns

#: Training settings of the profiles; chapters may override ``seeds`` and ``steps``.
PROFILES: dict[str, dict[str, Any]] = {
    "smoke": {"steps": 20, "seeds": [0], "eval_every": 10, "n_test": 64, "n_sweep": 32, "n_sink": 32},
    "default": {"steps": 1000, "seeds": [0, 1, 2, 3, 4], "eval_every": 250, "n_test": 2000, "n_sweep": 500, "n_sink": 500},
    "paper": {"steps": 100_000, "seeds": [0, 1, 2, 3, 4], "eval_every": 5000, "n_test": 10000,
              "n_sweep": 2000, "n_sink": 10000},
}

FIG2_PES = (("causal", "none"), ("decay", "none"), ("causal", "rope"))


def fig2_name(mask: str, pe: str) -> str:
    """The name Figure 2 gives the architecture ``(mask, pe)`` of :data:`FIG2_PES`: No PE, decay or RoPE."""
    return "decay" if mask == "decay" else ("RoPE" if pe == "rope" else "No PE")
FIG3_CONFIGS = tuple((m, p) for m in ("full", "causal") for p in ("none", "sin", "rope"))


def campaign_units(experiment: str, *, steps: int, seeds: list[int], eval_every: int, n_test: int,
                   n_sweep: int, n_sink: int, depths: list[int] | None = None,
                   windows: list[int] | None = None, prefixes: list[int] | None = None) -> dict[str, list[Unit]]:
    """The units of a chapter's campaign, grouped by the label of their configuration.

    ``wu-fig-2``: unbiased data, no residual, depths x (causal No PE, decay, causal RoPE).
    ``wu-fig-3``: targets at first or last, 2 layers with residual, masks full/causal x PEs none/sin/rope.
    ``wu-fig-4``: the same six architectures with targets at first, middle or last only.
    ``wu-fig-5``: 2 layers, causal, No PE, no residual, unbiased (shared with ``wu-fig-2``).
    ``wu-fig-6``: unbiased, causal / windows / prefixes, No PE, no residual, ``depths[0]`` layers.
    ``wu-residual-depth``: unbiased, with residual, depths x (causal No PE, decay, causal RoPE).
    """
    common = dict(steps=steps, eval_every=eval_every, n_test=n_test, n_sweep=n_sweep, n_sink=n_sink)
    N = TaskConfig().n_items
    out: dict[str, list[Unit]] = {}

    def add(label: str, depth: int, cfg: MemberConfig, slots) -> None:
        out[label] = [Unit(depth, cfg, slots, s, **common) for s in seeds]

    if experiment in ("wu-fig-2", "wu-residual-depth"):
        res = experiment == "wu-residual-depth"
        for d in depths or ([2, 4, 6] if not res else [2, 6, 10]):
            for mask, pe in FIG2_PES:
                add(f"{fig2_name(mask, pe)}|{d}", d, MemberConfig(mask, pe, residual=res), None)
    elif experiment == "wu-fig-3":
        for mask, pe in FIG3_CONFIGS:
            add(f"{mask}|{pe}", 2, MemberConfig(mask, pe, residual=True), (0, N - 1))
    elif experiment == "wu-fig-4":
        for where in ("first", "middle", "last"):
            for mask, pe in FIG3_CONFIGS:
                add(f"{where}|{mask}|{pe}", 2, MemberConfig(mask, pe, residual=True), (slot_index(where, N),))
    elif experiment == "wu-fig-5":
        add("causal|none", (depths or [2])[0], MemberConfig("causal", "none"), None)
    elif experiment == "wu-fig-6":
        d = (depths or [2])[0]
        add("causal", d, MemberConfig("causal", "none"), None)
        for w in windows or [4, 8, 12]:
            add(f"window|{w}", d, MemberConfig("window", "none", window=w), None)
        for k in prefixes or [2, 4, 8]:
            add(f"prefix|{k}", d, MemberConfig("prefix", "none", prefix=k), None)
    else:
        raise ValueError(f"unknown experiment {experiment!r}")
    return out


def _store_device() -> str | None:
    """The device entering a unit's store key: None on the CPU, else e.g. ``cuda`` (see ``store.cached``)."""
    return str(device()) if device().type != "cpu" else None


def _stored(unit: Unit | dict[str, Any]) -> bool:
    """Is ``unit`` (or the unit of these params) in ``data/`` or the user cache (under the key
    :func:`store.cached` uses on this device)?"""
    from . import store
    return store.is_stored(UNIT_EXPERIMENT, _params_of([unit])[0], version=VERSION, device=_store_device())


@contextlib.contextmanager
def _exclusive(lock: Path, log: Callable[[str], None], wait: bool = True) -> Iterator[bool]:
    """An exclusive lock on ``lock``; yields whether it is held. Without ``wait``, a lock held by
    another process is not waited for (yields False); with it, says so and waits."""
    import fcntl

    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a+") as f:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if not wait:
                yield False
                return
            log(f"waiting for another process training the same units (lock {lock})")
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield True
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def run_campaign(experiment: str, profile: str = "default", *, progress: bool = True,
                 max_members: int = 64, log: Callable[[str], None] = print,
                 **overrides: Any) -> dict[str, list[dict[str, Any]]]:
    """Train (or load) every unit of ``experiment`` under ``profile``; results grouped by label.

    ``profile`` is ``smoke``, ``default`` or ``paper`` (:data:`PROFILES`); ``overrides`` replace any
    of its settings or pass ``depths``/``windows``/``prefixes`` to :func:`campaign_units`. Finished
    units come from ``data/`` or the user cache; missing ones are trained in ensembles of at most
    ``max_members`` grouped by :meth:`Unit.group_key` (:func:`_ensembles`: an ensemble already started
    keeps its members, and a smaller ``max_members`` splits it, exactly; checkpointed in ``store.checkpoint_dir``, one
    process per ensemble at a time: a second process running the same campaign trains the ensembles
    the first has not locked, then waits for the rest), then stored one by one and the checkpoint removed. Run it again after an interruption (SIGINT,
    SIGTERM, a killed process) and it resumes from the last checkpoint; see the module docstring.
    """
    from . import store

    groups = campaign_units(experiment, **{**PROFILES[profile], **overrides})
    missing = [u for u in _distinct(groups) if not _stored(u)]
    fresh: dict[Unit, dict[str, Any]] = {}

    sittings: dict[Unit, list[dict[str, Any]]] = {}

    def _store(u: Unit) -> dict[str, Any]:
        compute = (lambda: fresh[u]) if u in fresh else (lambda: train_units([u], progress=progress, log=log)[0])
        return store.cached(UNIT_EXPERIMENT, u.params(), compute, version=VERSION, seeds=[u.seed],
                            device=_store_device(), wall_seconds=fresh[u]["train_seconds_ensemble"] if u in fresh else None,
                            extra_provenance={"sittings": sittings[u]} if sittings.get(u) else None)

    parts, _ = _plan(missing, max_members)
    # First pass: ensembles no other process is training; second pass: wait for the others. So the
    # same campaign started once per core trains different ensembles side by side.
    for wait in (False, True):
        for part in [p for p in parts if not all(_stored(u) for u in p)]:
            ck = _checkpoint_of(part)
            with _exclusive(_lock_of(part), log, wait=wait) as held:
                if not held:
                    continue
                if not all(_stored(u) for u in part):       # else another process finished them meanwhile
                    _take_furthest(part, ck / "state.pt", log)
                    log(f"{experiment}: training {len(part)} units of depth {part[0].depth} ({part[0].config.pe} PE) "
                        f"for {part[0].steps} steps")
                    results = train_units(part, checkpoint_dir=ck, progress=progress, keep_checkpoint=True, log=log)
                    st = _load_checkpoint(ck / "state.pt", part, torch.device("cpu"), log=lambda s: None) or {}
                    for u, r in zip(part, results):
                        fresh[u] = r
                        sittings[u] = st.get("sittings", [])     # who trained it, where, from which step
                        _store(u)       # at once: a later interruption keeps this group's units
                shutil.rmtree(ck, ignore_errors=True)
            for c in _checkpoints():    # larger ensembles this one was split from, once all their units are stored
                if not c["committed"] and all(_stored(p) for p in c["units"]):
                    shutil.rmtree(c["path"].parent, ignore_errors=True)

    return {label: [_store(u) for u in us] for label, us in groups.items()}


def _distinct(groups: dict[str, list[Unit]]) -> list[Unit]:
    """The units of a campaign's groups, each once (chapters' groups may share units), in order."""
    return list(dict.fromkeys(u for us in groups.values() for u in us))


def _key(params: dict[str, Any]) -> str:
    return json.dumps(params, sort_keys=True)


def _ensembles(missing: list[Unit], max_members: int, started: Sequence[list[dict[str, Any]]] = ()) -> list[list[Unit]]:
    """How :func:`run_campaign` splits the units it has to train into ensembles; the split fixes each
    checkpoint's key. An ensemble already started (``started``: the unit lists of the checkpoints,
    furthest first, as :func:`_checkpoints` gives them) is kept when it has at most ``max_members``
    units, all in ``missing``, of one :meth:`Unit.group_key`, none placed yet; the other units are
    grouped by :meth:`Unit.group_key`, at most ``max_members`` each. So a smaller ``max_members``
    splits a started ensemble (each part resumes from its checkpoint: :func:`_split_state`), and once
    the parts have checkpoints of their own, every later command keeps them, whatever its ``max_members``.
    Parts come in the order of their first unit in ``missing``."""
    if max_members < 1:
        raise ValueError(f"max_members must be at least 1, got {max_members}")
    by_key = {_key(u.params()): u for u in missing}
    parts: list[list[Unit]] = []
    placed: set[str] = set()
    for ps in started:
        ks = [_key(p) for p in ps]
        us = [by_key.get(k) for k in ks]
        if (len(ks) <= max_members and all(u is not None for u in us) and not placed & set(ks)
                and len({u.group_key() for u in us}) == 1):
            parts.append(us)
            placed |= set(ks)
    by_group: dict[tuple, list[Unit]] = {}
    for u in missing:
        if _key(u.params()) not in placed:
            by_group.setdefault(u.group_key(), []).append(u)
    parts += [us[lo:lo + max_members] for us in by_group.values() for lo in range(0, len(us), max_members)]
    order = {u: i for i, u in enumerate(missing)}
    return sorted(parts, key=lambda us: order[us[0]])


def _plan(missing: list[Unit], max_members: int) -> tuple[list[list[Unit]], list[dict[str, Any]]]:
    """:func:`_ensembles` of ``missing`` with the checkpoints on this machine and in ``data/``, and
    those checkpoints (:func:`_checkpoints`; none read when nothing is missing)."""
    cks = _checkpoints() if missing else []
    return _ensembles(missing, max_members, [c["units"] for c in cks]), cks


def _params_of(part: Sequence[Unit | dict[str, Any]]) -> list[dict[str, Any]]:
    """The params of an ensemble's units, given as units or as params (as a checkpoint lists them)."""
    return [u.params() if isinstance(u, Unit) else u for u in part]


def _checkpoint_of(part: Sequence[Unit | dict[str, Any]], create: bool = True) -> Path:
    from . import store
    return store.checkpoint_dir(UNIT_EXPERIMENT, {"units": _params_of(part)}, VERSION, create=create)


def _lock_of(part: Sequence[Unit | dict[str, Any]]) -> Path:
    """The lock a process training this ensemble holds, beside its checkpoint directory."""
    ck = _checkpoint_of(part, create=False)
    return ck.parent / f"{ck.name}.lock"


def _parked_of(part: Sequence[Unit | dict[str, Any]]) -> Path:
    from . import store
    return store.parked_path(UNIT_EXPERIMENT, {"units": _params_of(part)}, VERSION)


def _step_of(ckpt: Path | bytes | None, part: list[Unit]) -> int | None:
    """The step of ``ckpt`` (a file or a committed checkpoint's bytes) if it is a readable
    checkpoint of exactly ``part``, else None."""
    st = _load_checkpoint(ckpt, part, torch.device("cpu"), log=lambda s: None)
    return None if st is None else int(st["step"])


def _checkpoints() -> list[dict[str, Any]]:
    """Every readable checkpoint of this code version (:data:`VERSION`), in the user cache and in
    ``data/checkpoints``, furthest first (at the same step: fewer units, then the cache's first).
    Each is ``{"units": [params, ...], "step", "path", "committed", "state"}``; ``path`` is the cache
    file or the committed checkpoint's name (:func:`posbias.store.parked_path`)."""
    from . import store

    cpu, quiet, found = torch.device("cpu"), (lambda s: None), []
    root = store.cache_dir() / UNIT_EXPERIMENT
    for f in sorted(root.glob("*.ckpt/state.pt")) if root.is_dir() else []:
        st = _load_checkpoint(f, None, cpu, quiet)
        if st is not None and "units" in st and _checkpoint_of(st["units"], create=False) == f.parent:  # else another version's
            found.append({"units": st["units"], "step": int(st["step"]), "path": f, "committed": False, "state": st})
    for target in store.parked_checkpoints():
        if target.parent.name != UNIT_EXPERIMENT:
            continue
        st = _load_checkpoint(store.parked_checkpoint(target), None, cpu, quiet)
        if st is not None and "units" in st and _parked_of(st["units"]) == target:
            found.append({"units": st["units"], "step": int(st["step"]), "path": target, "committed": True, "state": st})
    return sorted(found, key=lambda c: (-c["step"], len(c["units"]), c["committed"]))


def _source(part: list[Unit], checkpoints: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The checkpoint ``part`` resumes from: the furthest of its own (in the cache or committed) and
    those of larger ensembles holding all its units; at the same step its own, then the cache's."""
    want = [u.params() for u in part]
    cands = [c for c in checkpoints if c["units"] == want or all(p in c["units"] for p in want)]
    return min(cands, key=lambda c: (-c["step"], c["units"] != want, c["committed"]), default=None)


def _split_state(st: dict[str, Any], part: list[Unit]) -> dict[str, Any]:
    """The checkpoint of the ensemble ``part`` cut out of the checkpoint ``st`` of a larger ensemble
    holding all its units: every weight and AdamW moment taken along the ensemble axis (axis 0 of
    each, which must have one entry per member), the members' curves and loss sums; the step, wall
    time, random states and sittings as they were, and the split recorded in ``splits``. Exact:
    the members of an ensemble never interact (``test_ensemble_result_equals_alone``), so training
    the part on from here gives what training the larger ensemble on would have given its units."""
    from . import store

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
             "step": int(st["step"]), "wall": float(st["wall"]), "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    return {**{k: v for k, v in st.items() if k != "parked"}, "units": [u.params() for u in part],
            "net": {k: cut(k, v) for k, v in st["net"].items()}, "opt": opt,
            "curves": {k: v if k == "step" else [[row[i] for i in idx] for row in v] for k, v in st["curves"].items()},
            "loss_acc": cut("loss_acc", st["loss_acc"]), "splits": st.get("splits", []) + [split]}


def _take_furthest(part: list[Unit], ckpt: Path, log: Callable[[str], None]) -> None:
    """Before ``part`` trains: write to its cache checkpoint ``ckpt`` the furthest checkpoint it can
    resume from (:func:`_source`) when that is not ``ckpt`` itself: its committed copy in
    ``data/checkpoints``, or its units cut out of a larger ensemble's checkpoint (:func:`_split_state`).
    A larger ensemble another process is training is not cut: RuntimeError, naming the fix."""
    from . import store

    src = _source(part, _checkpoints())
    if src is None or src["path"] == ckpt:
        return
    where = f"data/{src['path'].relative_to(store.DATA)}" if src["committed"] else str(src["path"])
    if src["units"] == [u.params() for u in part]:
        blob = store.parked_checkpoint(src["path"])
        if blob is not None:
            store.atomic_write(ckpt, lambda f: f.write(blob))
            log(f"continuing from the committed checkpoint {where} (step {src['step']}, "
                f"{len(store.parked_parts(src['path']))} part(s))")
        return
    with _exclusive(_lock_of(src["units"]), log, wait=False) as free:
        if not free and not src["committed"]:
            raise RuntimeError(
                f"the {len(src['units'])}-unit ensemble whose checkpoint these {len(part)} units would be split from "
                f"({where}) is being trained by another process (it holds {_lock_of(src['units'])}): stop that "
                f"process first (Ctrl-C or SIGTERM; it saves a checkpoint), then start the campaign again")
        # a cache checkpoint is read again under the lock (it may have moved on); a committed one cannot have
        st = src["state"] if src["committed"] else _load_checkpoint(src["path"], None, torch.device("cpu"), log)
        if st is None:
            return
        _save(ckpt, _split_state(st, part))
    log(f"continuing from step {st['step']} of the checkpoint of a larger ensemble ({len(st['units'])} units, {where}): "
        f"its {len(part)} units split off")


def park_campaign(experiment: str, profile: str = "paper", *, max_members: int = 64,
                  log: Callable[[str], None] = print, **overrides: Any) -> dict[str, int]:
    """Commit the state of an unfinished campaign so another machine can continue it; trains nothing.

    The cache checkpoint of every unfinished ensemble (as :func:`run_campaign` splits them) that is
    further along than its committed copy is copied to ``data/checkpoints/`` and listed in the
    manifest; committed checkpoints all of whose units are now stored (of any campaign) are removed
    with their manifest entries, and so is a committed checkpoint of a larger ensemble once every
    unit of it is stored or in a smaller ensemble split from it whose committed checkpoint is at
    least as far. Returns counts ``{"parked", "kept", "removed"}``.
    """
    from . import store

    units = _distinct(campaign_units(experiment, **{**PROFILES[profile], **overrides}))
    counts = {"parked": 0, "kept": 0, "removed": 0}
    plan, _ = _plan([u for u in units if not _stored(u)], max_members)
    committed_step: dict[str, int] = {}     # unit -> step of its part's committed checkpoint, after parking
    for part in plan:
        ckpt, target = _checkpoint_of(part, create=False) / "state.pt", _parked_of(part)
        st = _load_checkpoint(ckpt, part, torch.device("cpu"), log=lambda s: None)
        theirs = _step_of(store.parked_checkpoint(target), part)
        ours = None if st is None else int(st["step"])
        at = [step for step in (ours, theirs) if step is not None]      # parked below when ours is further
        if at:
            committed_step.update({_key(u.params()): max(at) for u in part})
        if ours is None:
            continue
        if theirs is not None and theirs >= ours:
            counts["kept"] += 1
            continue
        st["parked"] = {**collect(wall_seconds=round(float(st["wall"]), 3), seeds=[u.seed for u in part],
                                  device=st.get("device")), "step": ours}     # who committed it, when
        files = store.park(target, lambda f, st=st: torch.save(st, f))
        counts["parked"] += 1
        log(f"committed data/{target.relative_to(store.DATA)} ({len(files)} part(s), "
            f"{sum(p.stat().st_size for p in files) / 1e6:.1f} MB): depth {part[0].depth}, {part[0].config.pe} PE, "
            f"{len(part)} units at step {ours}/{part[0].steps}")
    own = {_parked_of(part) for part in plan}
    for path in store.parked_checkpoints():
        try:
            st = torch.load(io.BytesIO(store.parked_checkpoint(path)), map_location="cpu", weights_only=False)
            params = st["units"]
        except Exception:  # noqa: BLE001 - a damaged committed checkpoint is left for check-data to report
            continue
        if all(_stored(p) for p in params):
            why = "its units are all stored"
        elif path not in own and path.parent.name == UNIT_EXPERIMENT and all(
                _stored(p) or committed_step.get(_key(p), -1) >= int(st["step"]) for p in params):
            why = "its units are stored or committed further along in the smaller ensembles split from it"
        else:
            continue
        store.unpark(path)
        counts["removed"] += 1
        log(f"removed data/{path.relative_to(store.DATA)}: {why}")
    return counts


def campaign_status(experiment: str, profile: str = "paper", *, max_members: int = 64,
                    **overrides: Any) -> dict[str, Any]:
    """Where a campaign stands, read from ``data/``, the user cache and the checkpoints; trains,
    locks and writes nothing. Same arguments as :func:`run_campaign`.

    Returns ``{"units", "stored", "ensembles"}``: the campaign's unit count, how many are stored, and
    one dict per ensemble still to train, as :func:`run_campaign` would split them, with ``depth``,
    ``masks`` (its members' masks, e.g. ``causal/decay``), ``pe``, ``members``, ``steps``, ``split_from`` (the member count of the larger ensemble whose
    checkpoint it will be cut from, or ``None``), and from its checkpoint (``None`` when it has none yet) ``step``
    (done), ``wall`` (training seconds so far, over every sitting), ``sitting_pace`` (seconds per
    step in the latest sitting, ``None`` when that sitting has no step yet or its checkpoint predates
    the record) and ``age`` (seconds since the checkpoint was saved: a few minutes at most while a
    process is training it); ``committed`` says the furthest checkpoint is the one in
    ``data/checkpoints`` (:func:`park_campaign`).
    """
    from . import store

    units = _distinct(campaign_units(experiment, **{**PROFILES[profile], **overrides}))
    missing = [u for u in units if not _stored(u)]
    rows = []
    parts, cks = _plan(missing, max_members)
    for part in parts:
        src = _source(part, cks)
        st, committed = (None, False) if src is None else (src["state"], src["committed"])
        split = None if src is None or src["units"] == [u.params() for u in part] else len(src["units"])
        ckpt = None if src is None else (store.parked_parts(src["path"]) or [src["path"]])[0] if committed else src["path"]
        try:
            age = None if ckpt is None else max(0.0, time.time() - ckpt.stat().st_mtime)
        except FileNotFoundError:       # the ensemble finished just now
            age = None
        u, last = part[0], ((st or {}).get("sittings") or [{}])[-1]
        sitting_pace = None
        if st is not None and split is None and "from_wall" in last and st["step"] > last["from_step"]:
            sitting_pace = (float(st["wall"]) - last["from_wall"]) / (st["step"] - last["from_step"])
        rows.append({"depth": u.depth, "masks": "/".join(dict.fromkeys(v.config.mask for v in part)), "pe": u.config.pe,
                     "members": len(part), "steps": u.steps,
                     "step": None if st is None else int(st["step"]),
                     "wall": None if st is None else float(st["wall"]), "sitting_pace": sitting_pace,
                     "age": age, "committed": committed, "split_from": split})
    return {"units": len(units), "stored": len(units) - len(missing), "ensembles": rows}


def format_status(status: dict[str, Any]) -> str:
    """:func:`campaign_status` as lines of text: each ensemble's step, its pace over every sitting and
    in the latest one, and the time to go at the latest sitting's pace (the machine as it is now)."""
    lines = [f"{status['stored']} of {status['units']} units stored; {status['units'] - status['stored']} to train "
             f"in {len(status['ensembles'])} ensemble(s)"]
    for r in status["ensembles"]:
        head = f"  depth {r['depth']}, " + (f"{r['masks']} mask, " if r.get("masks") else "") + \
            f"{r['pe']} PE, {r['members']} units: "
        if r["step"] is None:
            lines.append(head + f"not started (0/{r['steps']} steps)")
            continue
        if r.get("split_from"):         # its pace is the larger ensemble's, not its own
            lines.append(head + f"step {r['step']}/{r['steps']} ({100 * r['step'] / r['steps']:.1f}%) in the "
                         f"checkpoint of the larger ensemble ({r['split_from']} units) it will be split from"
                         + ("; committed" if r.get("committed") else ""))
            continue
        pace, now = r["wall"] / max(r["step"], 1), r.get("sitting_pace")
        lines.append(head + f"step {r['step']}/{r['steps']} ({100 * r['step'] / r['steps']:.1f}%), "
                     f"{1e3 * pace:.0f} ms/step over all sittings"
                     + ("" if now is None else f", {1e3 * now:.0f} ms/step in the latest")
                     + f", about {(r['steps'] - r['step']) * (now or pace) / 3600:.1f} h to go at "
                     + ("that pace" if now is None else "the latest pace")
                     + ("; from the committed checkpoint" if r.get("committed") else
                        "" if r["age"] is None else f"; checkpoint saved {r['age']:.0f} s ago"))
    return "\n".join(lines)


def training_time(results: list[dict[str, Any]]) -> dict[str, float]:
    """How long the units' ``results`` took to train: ``{"seconds", "ensembles"}``. Each ensemble's
    wall time counts once (its members share ``train_seconds_ensemble``); an ensemble split from a
    larger one (``splits``, :func:`_split_state`) carries the larger one's time up to the split,
    which counts once however many parts were split from it."""
    leaves: dict[tuple, float] = {}
    nodes: dict[str, float] = {}
    for r in results:
        splits = r.get("splits", [])
        leaves[(r["params"]["depth"], r["ensemble_size"], r["train_seconds_ensemble"])] = \
            r["train_seconds_ensemble"] - (splits[-1]["wall"] if splits else 0.0)
        for i, sp in enumerate(splits):
            nodes[sp["key"]] = sp["wall"] - (splits[i - 1]["wall"] if i else 0.0)
    return {"seconds": sum(leaves.values()) + sum(nodes.values()), "ensembles": len(leaves) + len(nodes)}


def stored_campaign(experiment: str, profile: str = "paper", **overrides: Any) -> dict[str, list[dict[str, Any] | None]]:
    """What :func:`run_campaign` would return, read from ``data/`` and the user cache only: label ->
    one result per seed, ``None`` where that unit has not been trained. Never trains."""
    from . import store

    settings = {**PROFILES[profile], **overrides}
    dev = _store_device()
    return {label: [store.lookup(UNIT_EXPERIMENT, u.params(), version=VERSION, device=dev) for u in us]
            for label, us in campaign_units(experiment, **settings).items()}


def store_finished(experiment: str, profile: str = "paper", **overrides: Any) -> tuple[int, int]:
    """Pass every finished unit of a campaign through ``store.cached`` and train nothing; returns
    ``(finished, missing)``. With ``POSBIAS_WRITE_DATA=1`` this commits finished units from the user
    cache to ``data/`` unchanged (``posbias campaign CHAPTER --no-train --write-data``), so a campaign
    spread over several sittings can be committed part by part."""
    from . import store

    units = _distinct(campaign_units(experiment, **{**PROFILES[profile], **overrides}))
    dev = _store_device()
    done = [u for u in units if store.lookup(UNIT_EXPERIMENT, u.params(), version=VERSION, device=dev) is not None]
    for u in done:
        store.cached(UNIT_EXPERIMENT, u.params(), lambda: (_ for _ in ()).throw(RuntimeError("vanished")),
                     version=VERSION, seeds=[u.seed], device=dev)
    return len(done), len(units) - len(done)


# --------------------------------------------------------------------------- chapters' campaigns

_SETTINGS = ("steps", "seeds", "eval_every", "n_test", "n_sweep", "n_sink")


def _settings(p: Mapping[str, Any]) -> dict[str, Any]:
    return {k: p[k] for k in _SETTINGS}


#: Chapter id -> ``params -> (experiment, profile, overrides)``: the one place that says which
#: units a chapter with given parameters reads. ``posbias campaign`` trains them; a chapter calls
#: :func:`run_chapter_campaign` (or ``run_campaign`` with the same arguments) to read them.
CHAPTER_CAMPAIGNS: dict[str, Callable[[Mapping[str, Any]], tuple[str, str, dict[str, Any]]]] = {
    "wu-fig-2": lambda p: ("wu-fig-2", "default", {"depths": list(p["depths"]), **_settings(p)}),
    "wu-residual-depth": lambda p: ("wu-residual-depth", "default", {"depths": list(p["depths"]), **_settings(p)}),
    "wu-fig-3": lambda p: ("wu-fig-3", "default", _settings(p)),
    "wu-fig-4": lambda p: ("wu-fig-4", "default", _settings(p)),
    "wu-fig-5": lambda p: ("wu-fig-5", "default", {"depths": [p["depth"]], **_settings(p)}),
    "wu-fig-6": lambda p: ("wu-fig-6", "default", {"depths": [p["depth"]], "windows": list(p["windows"]),
                                                   "prefixes": list(p["prefixes"]), **_settings(p)}),
    # the toy networks of wu-fig-6 under the settings of the profile named by `campaign`
    "sinks-synthetic-vs-real": lambda p: ("wu-fig-6", p["campaign"], {
        "depths": [p["depth"]], "windows": list(p["windows"]), "prefixes": list(p["prefixes"]),
        "seeds": list(p["toy_seeds"])}),
}


def chapter_campaign(chapter: str, params: Mapping[str, Any]) -> tuple[str, str, dict[str, Any]]:
    """``(experiment, profile, overrides)`` of :func:`run_campaign` for ``chapter`` with ``params``.

    ``params`` holds (at least) the chapter's parameters by name, e.g. its resolved parameters or a
    notebook's ``globals()``. Raises ``KeyError`` for a chapter that trains no networks.
    """
    if chapter not in CHAPTER_CAMPAIGNS:
        raise KeyError(f"chapter {chapter!r} trains no networks; chapters with a campaign: "
                       + ", ".join(CHAPTER_CAMPAIGNS))
    return CHAPTER_CAMPAIGNS[chapter](params)


def run_chapter_campaign(chapter: str, params: Mapping[str, Any], **kwargs: Any) -> dict[str, list[dict[str, Any]]]:
    """Train (or load) the units ``chapter`` reads with ``params``: :func:`run_campaign` of :func:`chapter_campaign`.

    ``kwargs`` go to :func:`run_campaign` (``progress``, ``log``, ``max_members``).
    """
    experiment, profile, overrides = chapter_campaign(chapter, params)
    return run_campaign(experiment, profile, **overrides, **kwargs)
