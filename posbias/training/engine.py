"""Running a campaign: one task per ensemble part, in this process or on a Dask cluster.

The driver (this process) plans the parts (:mod:`.planning`), submits one :func:`train_part` task
per part, and is the only writer of the store: results come back over the wire and the driver
stores each unit (``data/`` or the user cache) and removes the part's checkpoint. Only checkpoints
need storage the workers share (the user cache, ``$POSBIAS_CACHE``).

- no engine: the parts run one after the other in this process (chapters run this way);
- ``Engine.local(n)``: a ``LocalCluster`` of ``n`` worker processes, one thread each, and the torch
  thread count given to every task explicitly;
- ``Engine.connect(address | scheduler_file)``: an existing Dask scheduler and its workers;
- ``Engine.slurm(config)``: ``dask_jobqueue.SLURMCluster``, adaptive, workers retiring before the
  walltime (``--lifetime``), GPUs as a Dask resource.

Stopping. A Dask task's thread receives no signals, so an interrupted driver (SIGINT, SIGTERM) sets
a Dask event of its own run that every task asks about once a second: each running part finishes
its step, saves its checkpoint and returns, parts not started return at once, and the driver waits
for them (at most ``STOP_SECONDS``) before it closes the cluster.

Faults. A worker that dies mid-task loses at most the steps since its last checkpoint; Dask runs the
task again and it resumes from the checkpoint, so the results are bit-identical to an uninterrupted
run (same device and thread count). A non-blocking lock inside the task refuses a duplicate (a task
the scheduler gave up on that is still running somewhere). Workers whose code or packages differ
from the driver's are refused when connecting and, for workers joining later, inside the task.
"""
from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shutil
import signal
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy
import torch
import yaml
from tqdm import tqdm

from posbias.training import checkpoints as ck
from posbias.training import weights
from posbias.storage.provenance import collect, with_summary
from posbias.training.campaigns import chapter_campaign, distinct, store_unit, stored, units_of
from posbias.training.loop import train_units
from posbias.training.planning import plan
from posbias.training.units import Unit, default_threads

PROGRESS_TOPIC = "posbias-progress"
LOG_TOPIC = "posbias-log"
STOP_SECONDS = 60.0     # how long an interrupted driver waits for its workers to save their checkpoints


class PartBusy(RuntimeError):
    """Another process holds the part's lock: it is training these units already."""


class VersionMismatch(RuntimeError):
    """A worker runs other code or other package versions than the driver."""


class SchedulerLost(RuntimeError):
    """The Dask scheduler went away (or cannot be reached): finished units are stored, unfinished
    parts keep their checkpoints, and the same command resumes once a scheduler is back."""

    def __init__(self, address: str, cause: BaseException | str):
        self.address = address
        why = str(cause).splitlines()[0] if str(cause) else type(cause).__name__
        super().__init__(f"lost the Dask scheduler {address} ({why[:160]}); finished units are stored and "
                         "unfinished parts keep their checkpoints")


def _scheduler_gone(client: Any, exc: BaseException) -> bool:
    """Did ``exc`` come from losing the scheduler (not from a task)?"""
    text = f"{type(exc).__name__}: {exc}"
    return (getattr(client, "status", "running") not in ("running", "connecting")
            or "connection-lost" in text or "CommClosedError" in text or "scheduler" in text.lower()
            and "lost" in text.lower())


# --------------------------------------------------------------------------- what a worker runs

def fingerprint() -> dict[str, str]:
    """What must agree between the driver and every worker for results to be identical: the hash
    of the ``posbias`` sources, and the Python, torch and numpy versions. Computed once per process,
    as this module is imported: it describes the code the process runs, so editing the checkout
    while a campaign runs does not make its long-lived workers look different from its driver
    (a fresh worker started after the edit does, and is refused)."""
    return dict(_LOADED)


def _read_fingerprint() -> tuple[tuple[str, str], ...]:
    h = hashlib.sha256()
    root = Path(__file__).resolve().parent.parent
    for f in sorted(root.rglob("*.py")):
        h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes())
    return (("posbias_sources", h.hexdigest()[:16]), ("python", sys.version.split()[0]),
            ("torch", torch.__version__), ("numpy", numpy.__version__))


_LOADED = _read_fingerprint()


def _mismatch(theirs: dict[str, str], ours: dict[str, str]) -> str:
    return ", ".join(f"{k} {theirs.get(k)} (driver: {v})" for k, v in ours.items() if theirs.get(k) != v)


@dataclass
class PartResult:
    """What a :func:`train_part` task sends back: one result per unit and the part's sittings."""

    results: list[dict[str, Any]]
    sittings: list[dict[str, Any]] = field(default_factory=list)
    #: each unit's final weights (one member's parameters), kept by the driver (:mod:`.weights`)
    weights: list[dict[str, Any]] = field(default_factory=list)


def part_key(part: list[Unit]) -> str:
    """A readable, unique task name for ``part``: depth, PE, size and the checkpoint's key."""
    return f"posbias-depth{part[0].depth}-{part[0].config.pe}-{len(part)}units-{ck.checkpoint_of(part, False).stem}"


def _worker():
    """The Dask worker running this task, or None in a plain process."""
    try:
        from distributed import get_worker  # lazy: distributed costs ~0.3s at import
        return get_worker()
    except (ImportError, ValueError):
        return None


def _stop_flag(name: str) -> Callable[[], bool]:
    """On a worker: True once the driver has set the Dask event ``name`` (asked at most once a second;
    a scheduler out of reach stops nothing)."""
    from distributed import Event  # lazy: distributed costs ~0.3s at import

    event, state = Event(name), {"asked": 0.0, "set": False}

    def stop() -> bool:
        if not state["set"] and time.monotonic() - state["asked"] >= 1.0:
            state["asked"] = time.monotonic()
            with contextlib.suppress(Exception):
                state["set"] = bool(event.is_set())
        return state["set"]
    return stop


def train_part(part: list[Unit], *, threads: int, expect: dict[str, str] | None = None,
               progress: bool = False, log: ck.Log | None = None, wait: bool = False,
               stop_event: str | None = None) -> PartResult | None:
    """The task of one ensemble part: resume from the furthest checkpoint it can (its own, a
    committed one, or a larger ensemble's), train to the end keeping the checkpoint, and return the
    results with the sittings. Stores nothing: the driver does. ``expect`` is the driver's
    :func:`fingerprint` (refused with :class:`VersionMismatch` when this process differs). A part
    another process is training raises :class:`PartBusy`, or with ``wait`` is waited for, and then
    None is returned if that process stored every unit meanwhile. On a worker, once the driver sets
    the Dask event ``stop_event``, the part saves its checkpoint and None is returned."""
    worker, key = _worker(), part_key(part)
    stop = _stop_flag(stop_event) if stop_event is not None and worker is not None else None
    if stop is not None and stop():         # the driver stopped before this part began
        return None
    if expect is not None and (bad := _mismatch(fingerprint(), expect)):
        raise VersionMismatch(f"worker {getattr(worker, 'address', os.getpid())} differs from the driver: {bad}; "
                              "start the workers from the same checkout and environment as the driver")

    def say(msg: str) -> None:       # on a worker, to the driver's log; here, to ours
        if worker is not None:
            worker.log_event(LOG_TOPIC, f"[{worker.address}] {msg}")
        else:
            (log or print)(msg)

    last = [0.0]

    def on_step(done: int) -> None:         # at most every 2 s to the driver
        if worker is not None and (time.monotonic() - last[0] > 2 or done == part[0].steps):
            last[0] = time.monotonic()
            worker.log_event(PROGRESS_TOPIC, {"part": key, "done": done})

    ckdir = ck.checkpoint_of(part)
    with ck.guard(ck.lock_of(part), wait=say if wait else None) as held:
        if not held:
            raise PartBusy(f"another process is training these {len(part)} units (it holds {ck.lock_of(part)}); "
                           "wait for it to finish or stop it (it saves a checkpoint), then run the campaign again")
        if all(stored(u) for u in part):        # the other process finished them meanwhile
            return None
        ck.take_furthest(part, ckdir / "state.pt", say)
        say(f"training {len(part)} units of depth {part[0].depth} ({part[0].config.pe} PE) for {part[0].steps} steps")
        try:
            results = train_units(part, checkpoint_dir=ckdir, progress=progress, keep_checkpoint=True,
                                  threads=threads, log=say, on_step=on_step, stop=stop)
        except ck.Interrupted:
            if stop is None or not stop():
                raise
            return None                     # stopped by the driver, checkpoint saved: nothing to store
        st = ck.load(ckdir / "state.pt", part, torch.device("cpu"), log=ck.quiet) or {}
    return PartResult(results, st.get("sittings", []),
                      weights.member_states(st["net"], len(part)) if "net" in st else [])


# --------------------------------------------------------------------------- engines

@dataclass
class Engine:
    """A Dask client and what it runs on: ``workers`` (for ``--max-members auto``), the torch
    ``threads`` each task uses, ``resources`` each task asks for (``{"GPU": 1}``), and what to close."""

    client: Any
    workers: int
    threads: int
    resources: dict[str, float] | None = None
    closers: list[Callable[[], None]] = field(default_factory=list)

    @classmethod
    def local(cls, n_workers: int | str = "auto", threads: int | None = None, dashboard: bool = False) -> "Engine":
        """A ``LocalCluster``: ``n_workers`` processes (``auto``: one per usable core, divided by
        ``threads``) of one Dask thread each; every task uses ``threads`` torch threads (default: the
        cores divided among the workers, at least 1)."""
        from distributed import Client, LocalCluster  # lazy: distributed costs ~0.3s at import

        cores = len(os.sched_getaffinity(0))
        n = max(1, cores // (threads or 1)) if n_workers == "auto" else int(n_workers)
        threads = threads or max(1, cores // n)
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                               dashboard_address=_dashboard(dashboard), silence_logs=40)
        client = Client(cluster)
        client.register_plugin(_ignore_sigint())    # Ctrl-C reaches the workers too: the driver stops them
        return cls(client, n, threads, None, [client.close, cluster.close])

    @classmethod
    def connect(cls, address: str | None = None, scheduler_file: str | None = None, threads: int = 1) -> "Engine":
        """An existing scheduler (``tcp://host:port``, or the file ``dask scheduler --scheduler-file``
        wrote); its workers are checked against the driver (:func:`check_workers`)."""
        from distributed import Client  # lazy: distributed costs ~0.3s at import

        try:
            client = (Client(address, timeout="30s") if address
                      else Client(scheduler_file=scheduler_file, timeout="30s"))
        except (OSError, TimeoutError) as e:
            raise SchedulerLost(address or f"in {scheduler_file}", e) from e
        engine = cls(client, max(1, len(client.scheduler_info()["workers"])), threads, None, [client.close])
        try:
            check_workers(client)
        except Exception:
            engine.close()
            raise
        return engine

    @classmethod
    def slurm(cls, config: str | None = None, max_jobs: int = 4, gpus: int = 0, threads: int = 1,
              dashboard: bool = False) -> "Engine":
        """A Slurm cluster through dask-jobqueue (:func:`slurm_cluster`), scaled adaptively to at most
        ``max_jobs`` jobs."""
        from distributed import Client  # lazy: distributed costs ~0.3s at import

        cluster = slurm_cluster(config, gpus=gpus, threads=threads, dashboard=dashboard)
        cluster.adapt(minimum_jobs=0, maximum_jobs=max_jobs)
        client = Client(cluster)
        per_job = int(getattr(cluster, "_job_kwargs", {}).get("processes") or 1)
        return cls(client, max_jobs * per_job, threads, {"GPU": 1} if gpus else None, [client.close, cluster.close])

    def close(self) -> None:
        for c in self.closers:
            with contextlib.suppress(Exception):
                c()


def _ignore_sigint() -> Any:
    """A worker plugin: the worker process ignores SIGINT. A terminal's Ctrl-C goes to the whole
    process group, a local cluster's workers included; ignoring it lets them live until the driver
    has asked them to save their checkpoints (:func:`_stop_workers`)."""
    from distributed import WorkerPlugin  # lazy: distributed costs ~0.3s at import

    class IgnoreSigint(WorkerPlugin):
        name = "posbias-ignore-sigint"

        def setup(self, worker: Any) -> None:
            if threading.current_thread() is threading.main_thread():
                signal.signal(signal.SIGINT, signal.SIG_IGN)
    return IgnoreSigint()


def _dashboard(on: bool) -> str:
    """The scheduler's HTTP address: ``:8787`` with the dashboard when asked for (needs ``bokeh``).

    Without it Dask still serves its health and metrics routes; ``:0`` puts them on a free port, so
    a second campaign on the machine neither collides with the first nor warns about port 8787."""
    if not on:
        return ":0"
    try:
        import bokeh  # noqa: F401  # optional dependency
    except ImportError as e:
        raise RuntimeError("--dashboard needs the bokeh package: pip install 'bokeh>=3.1'") from e
    return ":8787"


def check_workers(client: Any, ours: dict[str, str] | None = None) -> None:
    """Refuse (:class:`VersionMismatch`) workers whose :func:`fingerprint` differs from the driver's
    (``ours``, by default this process's)."""
    ours = ours or fingerprint()
    bad = {addr: _mismatch(theirs, ours) for addr, theirs in client.run(fingerprint).items()}
    bad = {a: m for a, m in bad.items() if m}
    if bad:
        raise VersionMismatch("workers that run other code or packages than this driver: "
                              + "; ".join(f"{a}: {m}" for a, m in bad.items())
                              + ". Start the workers from the same checkout and environment as the driver")


def _seconds(walltime: str) -> int:
    """``[D-]HH:MM:SS`` (or ``MM:SS``, or minutes) as seconds."""
    days, _, rest = walltime.rpartition("-")
    parts = [int(p) for p in rest.split(":")]
    parts = [0] * (3 - len(parts)) + parts if len(parts) > 1 else [0, parts[0], 0]
    return int(days or 0) * 86400 + parts[0] * 3600 + parts[1] * 60 + parts[2]


def slurm_cluster(config: str | None = None, *, gpus: int = 0, threads: int = 1, dashboard: bool = False) -> Any:
    """``dask_jobqueue.SLURMCluster`` from the ``jobqueue: slurm:`` section of the YAML file ``config``
    (or Dask's own configuration): one Dask thread per worker, ``--lifetime`` ending each worker 10%
    of the walltime (at least 5 minutes) before it (staggered), so a task's last checkpoint is saved
    and the task moves to a fresh job, and with ``gpus`` a ``--gres=gpu:N`` request and the Dask
    resource ``GPU=N`` that every task asks for. Submits nothing until scaled."""
    import dask.config  # lazy: dask costs ~0.2s at import
    from dask_jobqueue import SLURMCluster  # lazy: dask_jobqueue costs ~0.3s at import

    if config:
        dask.config.update(dask.config.config, yaml.safe_load(Path(config).read_text()), priority="new")
    walltime = dask.config.get("jobqueue.slurm.walltime", None) or "01:00:00"
    total = _seconds(walltime)
    margin = max(300, total // 10)
    lifetime = max(60, total - margin)
    extra = list(dask.config.get("jobqueue.slurm.worker-extra-args", None) or [])
    if "--lifetime" not in extra:
        extra += ["--lifetime", f"{lifetime}s", "--lifetime-stagger", f"{min(120, margin // 4)}s",
                  "--lifetime-restart"]
    directives = list(dask.config.get("jobqueue.slurm.job-extra-directives", None) or [])
    if gpus:
        extra += ["--resources", f"GPU={gpus}"]
        directives += [f"--gres=gpu:{gpus}"]
    env = list(dask.config.get("jobqueue.slurm.job-script-prologue", None) or [])
    env += [f"export POSBIAS_THREADS={threads}", f"export OMP_NUM_THREADS={threads}"]
    scheduler = {**(dask.config.get("jobqueue.slurm.scheduler-options", None) or {}),
                 "dashboard_address": _dashboard(dashboard)}    # dask-jobqueue takes it only here
    return SLURMCluster(walltime=walltime, worker_extra_args=extra, job_extra_directives=directives,
                        job_script_prologue=env, scheduler_options=scheduler,
                        **({} if dask.config.get("jobqueue.slurm.cores", None) else {"cores": 1}),
                        **({} if dask.config.get("jobqueue.slurm.memory", None) else {"memory": "4GB"}))


# --------------------------------------------------------------------------- the campaign

def run_campaign(experiment: str, profile: str = "default", *, progress: bool = True,
                 max_members: int | str = "auto", log: ck.Log = print, engine: Engine | None = None,
                 **overrides: Any) -> dict[str, list[dict[str, Any]]]:
    """Train (or load) every unit of the trained chapter ``experiment`` under ``profile``; results
    grouped by label (:func:`~.campaigns.units_of`).

    ``profile`` is one of the chapter's profiles; ``overrides`` are its parameters by name. Finished
    units come from ``data/`` or the user cache; missing ones are trained in ensemble parts
    (:func:`~.planning.plan`; ``max_members="auto"``: 64 in this process, else small enough that every
    worker of ``engine`` has a part), one :func:`train_part` task each, and stored by this process as
    each part ends. Run it again after an interruption and it resumes from the last checkpoints.
    """
    groups = units_of(experiment, profile, overrides)
    missing = [u for u in distinct(groups) if not stored(u)]
    parts, found = plan(missing, max_members, engine.workers if engine else 1)
    # closed on the way out of an interruption here too, so the workers save before the cluster closes
    with contextlib.closing(_run_parts(parts, found, engine, progress=progress, log=log)) as finished:
        for part, done in finished:
            if done is None:
                continue
            for i, (u, r) in enumerate(zip(part, done.results)):
                store_unit(u, r, done.sittings)
                if done.weights:
                    prov = collect(seeds=[u.seed], wall_seconds=r["train_seconds_ensemble"])
                    weights.save(u, done.weights[i], with_summary(prov, done.sittings))
            shutil.rmtree(ck.checkpoint_of(part, create=False), ignore_errors=True)
            for c in ck.checkpoints():  # larger ensembles this one was split from, once all their units are stored
                if not c.committed and all(stored(p) for p in c.units):
                    shutil.rmtree(c.path.parent, ignore_errors=True)
    return {label: [store_unit(u, None) for u in us] for label, us in groups.items()}


def _run_parts(parts: list[list[Unit]], found: list[ck.Found], engine: Engine | None, *,
               progress: bool, log: ck.Log) -> Iterator[tuple[list[Unit], PartResult | None]]:
    """Each part with its :class:`PartResult`, as the parts finish (here, or on ``engine``)."""
    if engine is None:
        for part in parts:
            if not all(stored(u) for u in part):
                yield part, train_part(part, threads=default_threads(), progress=progress, log=log, wait=True)
        return
    from distributed import Event, as_completed  # lazy: distributed costs ~0.3s at import

    expect = fingerprint()
    bar = _Progress(parts, found, progress, log)
    engine.client.subscribe_topic(PROGRESS_TOPIC, bar.on_event)
    engine.client.subscribe_topic(LOG_TOPIC, bar.on_log)
    stop = Event(f"posbias-stop-{uuid.uuid4().hex}", client=engine.client)     # this run's, never another's
    futures = {engine.client.submit(train_part, part, threads=engine.threads, expect=expect, key=part_key(part),
                                    pure=False, retries=3, resources=engine.resources, stop_event=stop.name): part
               for part in parts}
    address = str(getattr(engine.client.scheduler, "address", "") or "")
    try:
        for fut in as_completed(futures):
            part = futures[fut]
            yield part, fut.result()
            bar.finished(part)
    except Exception as e:
        if _scheduler_gone(engine.client, e):   # nobody left to ask the workers to save: their last checkpoints stand
            raise SchedulerLost(address, e) from e
        _stop_workers(stop, [f for f in futures if not f.done()], log)
        raise
    except BaseException:       # interrupted, or closed by the caller on its way out: let the workers save first
        _stop_workers(stop, [f for f in futures if not f.done()], log)
        raise
    finally:
        for fut in futures:
            fut.cancel()
        bar.close()


def _stop_workers(stop: Any, running: list[Any], log: ck.Log) -> None:
    """Set the run's stop event and wait (at most ``STOP_SECONDS``) for the ``running`` futures: each
    part saves its checkpoint at its next step boundary and returns."""
    if not running:
        return
    from distributed import wait  # lazy: distributed costs ~0.3s at import

    log(f"stopping: {len(running)} part(s) save their checkpoints first (waiting at most {STOP_SECONDS:.0f} s)")
    with contextlib.suppress(Exception):
        stop.set()
        wait(running, timeout=STOP_SECONDS)


class _Progress:
    """The driver's progress over the steps and units of the parts a cluster trains."""

    def __init__(self, parts: list[list[Unit]], found: list[ck.Found], show: bool, log: ck.Log):
        self.log, self.lock = log, threading.Lock()
        self.done = {part_key(p): (s.step if (s := ck.source(p, found)) else 0) for p in parts}
        self.units, self.stored = sum(len(p) for p in parts), 0
        total = sum(p[0].steps for p in parts)
        self.bar = None
        if show:
            self.bar = tqdm(total=total, initial=sum(self.done.values()), desc="steps", unit="step", file=sys.stderr)
            self.bar.set_postfix_str(f"units 0/{self.units}")

    def on_event(self, event: tuple[float, dict[str, Any]]) -> None:
        msg = event[1]
        with self.lock:
            before = self.done.get(msg["part"], 0)
            self.done[msg["part"]] = max(before, int(msg["done"]))
            if self.bar is not None:
                self.bar.update(self.done[msg["part"]] - before)

    def on_log(self, event: tuple[float, str]) -> None:
        self.log(event[1])

    def finished(self, part: list[Unit]) -> None:
        with self.lock:
            self.stored += len(part)
            if self.bar is not None:
                self.bar.set_postfix_str(f"units {self.stored}/{self.units}")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def workers_status(engine: Engine) -> list[str]:
    """What each worker of ``engine`` is doing: the campaign tasks it is processing."""
    info = engine.client.scheduler_info()["workers"]
    doing = engine.client.processing()
    lines = [f"{len(info)} worker(s) on {engine.client.scheduler.address}"]
    for addr in sorted(info):
        tasks = [re.sub(r"^posbias-", "", str(t)) for t in doing.get(addr, ())]
        lines.append(f"  {addr}: " + (", ".join(tasks) if tasks else "idle"))
    return lines


def run_chapter_campaign(chapter: str, params: Any, **kwargs: Any) -> dict[str, list[dict[str, Any]]]:
    """Train (or load) the units ``chapter`` reads with ``params``, in this process:
    :func:`run_campaign` of :func:`~.campaigns.chapter_campaign`. ``kwargs`` go to :func:`run_campaign`."""
    experiment, profile, overrides = chapter_campaign(chapter, params)
    return run_campaign(experiment, profile, **overrides, **kwargs)
