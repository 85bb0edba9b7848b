"""The training loop: an ensemble of units trained as one :class:`~posbias.science.model.EnsembleNet`,
evaluated every ``eval_every`` steps, checkpointed and resumable exactly."""
from __future__ import annotations

import contextlib
import ctypes
import os
import platform
import time
from pathlib import Path
from typing import Any, Callable, Iterator

import torch
import torch.nn.functional as F

from posbias.measures import evaluate as ev
from posbias.storage import parking
from posbias.measures.convergence import member_curves, rule, rule_holds
from posbias.science.model import EnsembleNet
from posbias.storage.provenance import collect
from posbias.science.task import TaskConfig, ensemble_batch, make_task
from posbias.training import checkpoints as ck
from posbias.training import heldout as ho
from posbias.training.units import Unit, default_threads, device, test_sets

__all__ = ["Ensemble", "flushed_denormals", "set_flush_denormal", "train_units", "tune_allocator"]

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
    if platform.libc_ver()[0] != "glibc":
        return False
    mallopt = ctypes.CDLL(None).mallopt
    _allocator_tuned = all(mallopt(ctypes.c_int(k), ctypes.c_int(v)) == 1 for k, v in _MALLOPT.items())
    return _allocator_tuned


_libgomp_lib: Any = False       # not looked for yet


def _libgomp() -> Any:
    """The OpenMP runtime this process has loaded for torch (GNU libgomp, or an LLVM/Intel runtime with
    its ``GOMP_parallel`` entry point), as a ``ctypes`` library; None where there is none (not Linux,
    another parallel backend)."""
    global _libgomp_lib
    if _libgomp_lib is False:
        _libgomp_lib = None
        try:
            with open("/proc/self/maps") as maps:
                paths = dict.fromkeys(line.split()[-1] for line in maps
                                      if any(n in line for n in ("libgomp", "libomp", "libiomp5")))
        except OSError:
            paths = {}
        for path in paths:
            try:
                lib = ctypes.CDLL(path)
                fn = lib.GOMP_parallel
            except (OSError, AttributeError):
                continue
            fn.argtypes, fn.restype = [ctypes.CFUNCTYPE(None, ctypes.c_void_p), ctypes.c_void_p,
                                       ctypes.c_uint, ctypes.c_uint], None
            _libgomp_lib = lib
            break
    return _libgomp_lib


def set_flush_denormal(on: bool) -> bool:
    """``torch.set_flush_denormal(on)`` on the calling thread and on every thread of its OpenMP team,
    the threads torch's parallel operations run on; returns whether the CPU can flush.

    The flag lives in each thread's MXCSR register: a thread of the team copies the caller's when it
    is created and keeps its own afterwards, so with more than one torch thread ``torch.set_flush_denormal``
    alone leaves the team's threads as they were (flushing partly, or still flushing after it is turned
    off). The team is reached through one parallel region of ``torch.get_num_threads()`` threads, each
    setting its own flag (the OpenMP runtime keeps that team for torch's next regions of that size).
    """
    ok = torch.set_flush_denormal(on)
    n, lib = torch.get_num_threads(), _libgomp()
    if ok and n > 1 and lib is not None:
        def on_each_thread(_: Any) -> None:
            torch.set_flush_denormal(on)

        lib.GOMP_parallel(lib.GOMP_parallel.argtypes[0](on_each_thread), None, n, 0)
    return ok


@contextlib.contextmanager
def flushed_denormals() -> Iterator[bool]:
    """Within the block, the CPU flushes subnormal floats (below 2^-126, about 1.2e-38) to zero; yields
    whether it does. On by default; ``$POSBIAS_FLUSH_DENORMAL=0`` turns it off; False where the CPU
    cannot (``torch.set_flush_denormal``). Flushing is off again after the block. It acts on the calling
    thread and on the threads of its torch thread pool (:func:`set_flush_denormal`).

    Why: late in training the attention of the sinusoidal and RoPE networks gives probabilities, and
    their gradients, below 2^-126, and every operation on such a number takes the x86 microcode path:
    a RoPE ensemble at step 35,729 of 100,000 ran 1.9x faster with flushing (benchmarks/README.md).
    Why results are unchanged: a flushed number is below 2^-126, and it can move a normal result only
    where it is added to a number below about 2^-101 (4e-31). In these networks every such path ends
    in a sum with weights, activations or Adam's epsilon (1e-8) far larger, where it is lost in
    rounding: the weights, losses and accuracies stay the same to the last bit, and only AdamW's
    moments differ, in entries that are subnormal on one side and 0 on the other. Measured, not only
    argued: tests/test_training_loop.py trains on from a paper-run RoPE network, and 4,300 steps of its
    ensemble (an evaluation included) end in identical weights and curves both ways.
    """
    on = os.environ.get("POSBIAS_FLUSH_DENORMAL", "1").strip() != "0" and set_flush_denormal(True)
    try:
        yield bool(on)
    finally:
        if on:
            set_flush_denormal(False)


class Ensemble:
    """The state of one ensemble in training: its network, optimizer, tasks, test sets and curves.

    :func:`train_units` drives it (checkpoints, signals, progress); a study of training itself (a
    benchmark, a test) loads one with :meth:`from_checkpoint` and calls :meth:`step` from ``start``.
    """

    def __init__(self, units: list[Unit], dev: torch.device):
        u0, cfg = units[0], TaskConfig()
        self.units, self.dev, self.E = units, dev, len(units)
        self.tasks = [make_task(u.seed, cfg) for u in units]
        self.seeds = [u.seed for u in units]
        self.slots = [u.target_slots for u in units]
        self.net = EnsembleNet([u.config for u in units], self.seeds, u0.depth, n_tokens=cfg.n_tokens).to(dev)
        self.opt = torch.optim.AdamW(self.net.parameters(), lr=u0.lr, weight_decay=u0.weight_decay)
        self.ic_sets, self.sweeps = test_sets(u0.n_test, u0.n_sweep, cfg, u0.test_seed)
        self.curves: dict[str, list] = {"step": [], "loss": [], **{name: [] for name in self.ic_sets}}
        # a unit under a budget: the held-out loss and the sweep at every evaluation, the best weights kept
        self.heldout = None if u0.n_heldout is None else ho.heldout_sets(self.tasks, self.seeds, self.slots,
                                                                          u0.n_heldout)
        self.best = None if self.heldout is None else ho.BestWeights(self.net)
        if self.heldout is not None:
            self.curves.update({"heldout_loss": [], "sweep": []})
        self.start, self.loss_acc, self.n_acc, self.wall = 0, torch.zeros(self.E), 0, 0.0
        self.splits: list[dict[str, Any]] = []      # the larger ensembles it was split from
        self.sittings: list[dict[str, Any]] = []

    @classmethod
    def from_checkpoint(cls, path: Path, dev: torch.device | None = None, log: ck.Log = ck.quiet) -> "Ensemble":
        """The ensemble saved in the checkpoint ``path``, resumed exactly on ``dev`` (default the CPU):
        ``step(start)``, ``step(start + 1)``, ... continue its run. ``path`` is a checkpoint file (a
        campaign's ``state.pt``) or a checkpoint committed to ``data/checkpoints`` in parts (named by any
        part, or by ``<key>.pt``; its parts joined and checked against the manifest). Raises
        ``ValueError`` when ``path`` holds none."""
        dev, path = torch.device("cpu") if dev is None else dev, Path(path).resolve()
        whole = parking.whole_of(path) or path
        src = parking.parked_checkpoint(whole) if parking.parked_parts(whole) else path
        st = ck.load(src, None, dev, log)
        if st is None:
            raise ValueError(f"{path}: not a readable training checkpoint")
        run = cls([Unit.from_params(p) for p in st["units"]], dev)
        run.resume(st, path, log)
        return run

    def resume(self, st: dict[str, Any], ckpt: Path, log: ck.Log) -> None:
        """Continue from the checkpoint ``st``: weights, optimizer, curves, accumulators, RNG states."""
        self.net.load_state_dict(st["net"])
        self.opt.load_state_dict(st["opt"])
        self.start, self.curves, self.loss_acc, self.n_acc, self.wall = (      # the accumulator lives on the CPU
            st["step"], st["curves"], st["loss_acc"].cpu(), st["n_acc"], st["wall"])
        if st.get("rng") is not None:
            ck.set_rng_state(st["rng"])
        if self.best is not None:
            self.best = ho.BestWeights.from_state(self.net, st["best"])
        self.splits, self.sittings = st.get("splits", []), st.get("sittings", [])
        log(f"resumed from step {self.start}/{self.units[0].steps} ({ckpt}); "
            f"{self.units[0].steps - self.start} steps to go")
        if st.get("threads") not in (None, torch.get_num_threads()):
            log(f"warning: the checkpoint was written with {st['threads']} torch threads, this run uses "
                f"{torch.get_num_threads()}; for a result bit-identical to an uninterrupted run set "
                f"POSBIAS_THREADS={st['threads']}")

    def state(self, done: int, t0: float) -> dict[str, Any]:
        """The checkpoint after ``done`` steps (format 2; see :mod:`.checkpoints`)."""
        return {"format": 2, "units": [u.params() for u in self.units], "net": self.net.state_dict(),
                "opt": self.opt.state_dict(), "step": done, "curves": self.curves, "loss_acc": self.loss_acc,
                "n_acc": self.n_acc, "wall": time.perf_counter() - t0, "rng": ck.rng_state(),
                "threads": torch.get_num_threads(), "device": str(self.dev), "sittings": self.sittings,
                **({"best": self.best.state()} if self.best is not None else {}),
                **({"splits": self.splits} if self.splits else {})}

    def evaluate(self, step: int) -> None:
        """Append the mean loss since the last evaluation and the six ``IC`` accuracies at ``step``; for
        units with a held-out set also the held-out loss and the sweep, and keep the best weights."""
        self.net.eval()
        accs = ev.ic_accuracies(self.net, self.tasks, self.ic_sets)
        if self.heldout is not None:
            held = ho.heldout_loss(self.net, self.heldout)
            sweep = ev.sweep_accuracies(self.net, self.tasks, self.sweeps)
        self.net.train()
        self.curves["step"].append(step)
        self.curves["loss"].append((self.loss_acc / max(self.n_acc, 1)).tolist())
        for name, a in accs.items():
            self.curves[name].append(a.tolist())
        if self.heldout is not None:
            self.curves["heldout_loss"].append(held.tolist())
            self.curves["sweep"].append(sweep.tolist())
            self.best.update(self.net, step, held)

    def step(self, step: int, autocast_bf16: bool) -> None:
        """One AdamW step on the batch ``step`` of every member; evaluates on the evaluation steps."""
        u0 = self.units[0]
        x, y = ensemble_batch(self.tasks, self.seeds, self.slots, step, u0.batch_size)
        x, y = x.to(self.dev), y.to(self.dev)
        with torch.autocast(self.dev.type, dtype=torch.bfloat16, enabled=autocast_bf16):
            logits = self.net(x)
        loss = F.cross_entropy(logits.float().flatten(0, 1), y.flatten(), reduction="none").view(self.E, -1).mean(1)
        self.opt.zero_grad(set_to_none=True)
        loss.sum().backward()
        self.opt.step()
        self.loss_acc += loss.detach().cpu()
        self.n_acc += 1
        if (step + 1) % u0.eval_every == 0 or step + 1 == u0.steps:
            self.evaluate(step + 1)
            self.loss_acc, self.n_acc = torch.zeros(self.E), 0

    def results(self, train_seconds: float) -> list[dict[str, Any]]:
        """One result dict per unit: curves, final accuracies and gaps, sweep, attention maps, sinks."""
        self.net.eval()
        final = ev.ic_accuracies(self.net, self.tasks, self.ic_sets)
        sweep = ev.sweep_accuracies(self.net, self.tasks, self.sweeps)
        u0 = self.units[0]
        maps = ev.attention_maps(self.net, self.tasks, u0.n_sink, u0.sink_seed)  # (E, depth, n, T, T)
        gaps = ev.gaps(dict(final.items()))
        out = []
        for e, u in enumerate(self.units):
            mask = self.net.mask[e, 0].cpu()
            out.append({
                "params": u.params(),
                "curves": {"step": self.curves["step"],
                           **{name: [row[e] for row in v] for name, v in self.curves.items() if name != "step"}},
                "ic_accuracy": {name: float(a[e]) for name, a in final.items()},
                "gaps": {k: float(v[e]) for k, v in gaps.items()},
                "sweep_accuracy": sweep[e].tolist(),
                "mean_attention": maps[e].mean(1).tolist(),                  # (depth, T, T)
                "sink_share": ev.sink_share(maps[e], mask).tolist(),         # (T,)
                "sink_alpha": ev.sink_alpha(maps[e], mask).mean(1).tolist(),  # (depth, T)
                "train_seconds_ensemble": train_seconds,
                "ensemble_size": self.E,
                **({"splits": self.splits} if self.splits else {}),
                **({"best": self.best.member(e)} if self.best is not None else {}),
            })
        return out


def _stop_rule(units: list[Unit]) -> Any:
    """The :class:`~posbias.measures.convergence.StopRule` the units train under, or None (a fixed number of
    steps). A unit with a rule trains alone: its stop must depend on its own curves only."""
    if units[0].stop_rule is None:
        return None
    if len(units) != 1:
        raise ValueError(f"a unit with the stopping rule {units[0].stop_rule!r} trains alone, got {len(units)}")
    return rule(units[0].stop_rule)


def _rule_holds(run: "Ensemble", rule: Any) -> bool:
    """Does ``rule`` hold on the one member's curves at its last evaluation?"""
    return bool(rule_holds(member_curves(run.curves), run.units[0].n_test, rule))


def _resume(run: "Ensemble", ckpt: Path, log: ck.Log, flush: bool) -> Path:
    """Resume ``run`` from the checkpoint file ``ckpt`` when it holds these units (exactly), and
    record this sitting (``flush``: whether subnormals are flushed); returns ``ckpt``. Temporary files
    a killed save left are removed."""
    ckpt.parent.mkdir(parents=True, exist_ok=True)
    for stale in ckpt.parent.glob(f".{ckpt.name}.*.tmp"):     # left by a process killed while saving
        stale.unlink(missing_ok=True)
    st = ck.load(ckpt, run.units, run.dev, log)
    if st is not None:
        run.resume(st, ckpt, log)
    run.sittings = run.sittings + [{**collect(device=str(run.dev)), "from_step": run.start,
                                    "from_wall": run.wall, "torch_threads": torch.get_num_threads(),
                                    "flush_denormal": flush}]
    return ckpt


def train_units(units: list[Unit], *, checkpoint_dir: Path | None = None, checkpoint_seconds: float | None = None,
                progress: bool = True, threads: int | None = None, autocast_bf16: bool = False,
                keep_checkpoint: bool = False, log: ck.Log = print,
                on_step: Callable[[int], None] | None = None,
                stop: Callable[[], bool] | None = None,
                snapshot_every: int = 0,
                on_snapshot: Callable[[int, "Ensemble"], None] | None = None) -> list[dict[str, Any]]:
    """Train ``units`` (all of one :meth:`Unit.shape_key`) as one ensemble; one result dict per unit.

    Every ``eval_every`` steps (and at the end) the six ``IC`` accuracies are measured on the fixed
    test sets. With ``checkpoint_dir`` the state is saved every ``checkpoint_seconds`` (default
    :func:`~.checkpoints.checkpoint_interval`), when the last step is done, and on SIGINT/SIGTERM
    (which then raise :class:`~.checkpoints.Interrupted`); a run finding a checkpoint of the same
    units resumes from it, exactly. The checkpoint is deleted once the results exist unless
    ``keep_checkpoint``. ``curves["loss"]`` holds the mean training loss over each interval (its
    first entry, at step 0, is 0). ``autocast_bf16`` runs the forward pass under bfloat16 autocast
    (results then differ from fp32). Subnormal floats are flushed to zero while it trains
    (:func:`flushed_denormals`; results unchanged). ``on_step(done)`` is called after every step (progress reports).
    ``stop()`` is asked before every step: True stops the training as a signal does (a Dask
    worker's task, whose thread receives no signals, is stopped this way by its driver).
    ``on_snapshot(done, run)`` is called at step 0 and after every ``snapshot_every``-th step (weights along
    training, :mod:`.snapshots`), before any checkpoint of that step, so a resumed run misses none.
    """
    if len({u.shape_key() for u in units}) != 1:
        raise ValueError("units of one ensemble must share depth and training settings")
    interval = ck.checkpoint_interval() if checkpoint_seconds is None else float(checkpoint_seconds)
    torch.set_num_threads(threads or default_threads())
    tune_allocator()
    with flushed_denormals() as flush:    # faster late in training, results unchanged
        run, steps = Ensemble(units, device()), units[0].steps
        ckpt = None if checkpoint_dir is None else _resume(run, Path(checkpoint_dir) / "state.pt", log, flush)
        rule = _stop_rule(units)
        if rule is not None and run.start and _rule_holds(run, rule):
            steps = run.start               # it stopped here already (killed before its results were written)
        bar = None
        if progress:
            # lazy: posbias.storage.report costs ~0.1s and hooks the store
            from posbias.storage.report import progress as _progress
            bar = _progress(total=steps, initial=run.start, desc=f"depth {units[0].depth} x {run.E} members",
                            leave=False)
        t_last, t0, t_run, done = time.monotonic(), time.perf_counter() - run.wall, time.perf_counter(), run.start
        with ck.deferred_signals() as got:    # a signal stops training between two steps, never inside one
            if run.start == 0 and not run.curves["step"]:
                run.evaluate(0)
            if run.start == 0 and on_snapshot is not None and snapshot_every:
                on_snapshot(0, run)
            for step in range(run.start, steps):
                if done == steps:
                    break
                if not got and stop is not None and stop():
                    got.append(0)           # not a signal: the Interrupted says the driver stopped it
                if got:
                    break
                run.step(step, autocast_bf16)
                done = step + 1
                if rule is not None and done % units[0].eval_every == 0 and _rule_holds(run, rule):
                    steps = done            # the stopping rule holds: this is the last step
                if bar is not None:
                    bar.update(1)
                if on_step is not None:
                    on_step(done)
                if on_snapshot is not None and snapshot_every and done % snapshot_every == 0:
                    on_snapshot(done, run)
                if ckpt is not None and (time.monotonic() - t_last > interval) and done < steps:
                    ck.save(ckpt, run.state(done, t0))
                    t_last = time.monotonic()
            if ckpt is not None and (got or (done == steps and done > run.start)):
                # on a signal, and at the end: a stop in the final evaluation keeps it
                ck.save(ckpt, run.state(done, t0))
            if bar is not None:
                bar.close()
            if got:
                err = ck.Interrupted(got[0], done, steps, None if ckpt is None else ckpt.parent)
                log(str(err))
                raise err
        train_seconds = time.perf_counter() - t0
        log(f"trained {steps - run.start} of {steps} steps (steps {run.start}..{steps}) in "
            f"{time.perf_counter() - t_run:.1f} s")
        results = run.results(train_seconds)
        if rule is not None:
            for r in results:
                r["stop"] = {"rule": rule.to_dict(), "stopped_at": steps,
                             "reason": "rule" if steps < units[0].steps or _rule_holds(run, rule) else "cap"}
        if ckpt is not None and not keep_checkpoint:
            ckpt.unlink(missing_ok=True)
        return results
