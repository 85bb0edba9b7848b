"""Where a campaign trains, as one typed value: :class:`EngineSpec`.

``posbias campaign`` reads its flags (``--workers``, ``--threads``, ``--scheduler``,
``--scheduler-file``, ``--cluster`` and its options, ``--max-members``) into one spec, checked as
it is built, and hands it over; the spec alone decides what it means: how many ensembles train at a
time, which :class:`~.engine.Engine` to start (or none: this process), what its workers are doing.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from posbias.training.engine import Engine, workers_status

__all__ = ["EngineSpec"]

_MEMBERS_AUTO = "default: 64 in one process, else the size that finishes soonest with every worker busy"


def _count_or_auto(raw: int | str | None, flag: str, what: str, auto: str) -> int | str | None:
    """``raw`` as a count of at least 1, or ``auto`` (or None) as it is; else a ValueError naming ``flag``."""
    if raw in (None, "auto"):
        return raw
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n < 1:
        raise ValueError(f"{flag} {raw}: give a number of {what} of at least 1, or auto ({auto})")
    return n


@dataclass(frozen=True)
class EngineSpec:
    """Where and how a campaign trains. Built from the command line's values (counts may be given as
    strings, ``"auto"`` or digits) and checked then: a bad value is a ValueError naming its flag.

    At most one of ``workers`` (a ``LocalCluster`` of N processes, ``"auto"``: one per core),
    ``scheduler`` / ``scheduler_file`` (an existing Dask scheduler) and ``cluster`` (``"slurm"``, with
    ``cluster_config``, ``max_jobs``, ``gpus_per_worker``); none of them: this process. ``threads``:
    torch threads per task (None: the cores divided among the local workers; 1 elsewhere).
    ``max_members``: the most units in one ensemble (``"auto"``: :func:`~.planning.plan` decides).
    """

    workers: int | str | None = None
    threads: int | None = None
    scheduler: str | None = None
    scheduler_file: str | None = None
    cluster: str | None = None
    cluster_config: str | None = None
    max_jobs: int = 4
    gpus_per_worker: int = 0
    dashboard: bool = False
    max_members: int | str = "auto"

    def __post_init__(self) -> None:
        set_ = object.__setattr__          # frozen: the parsed counts replace the raw ones once, here
        set_(self, "workers", _count_or_auto(self.workers, "--workers", "worker processes", "one per core"))
        set_(self, "max_members", _count_or_auto(self.max_members, "--max-members", "units", _MEMBERS_AUTO))
        if self.max_members is None:
            raise ValueError("--max-members: give a number of units of at least 1, or auto")
        if self.threads is not None and self.threads < 1:
            raise ValueError(f"--threads {self.threads}: give at least 1 torch thread per task")
        where = [f for f, v in (("--workers", self.workers), ("--scheduler", self.scheduler),
                                ("--scheduler-file", self.scheduler_file), ("--cluster", self.cluster)) if v]
        if len(where) > 1:
            raise ValueError(f"{' and '.join(where)}: give one place to train")
        if self.cluster not in (None, "slurm"):
            raise ValueError(f"--cluster {self.cluster}: the one cluster supported is slurm")
        if self.cluster_config and not Path(self.cluster_config).is_file():
            raise ValueError(f"--cluster-config {self.cluster_config}: no such file; give a jobqueue.yaml")
        if self.max_jobs < 1:
            raise ValueError(f"--max-jobs {self.max_jobs}: give at least 1 Slurm job")
        if self.gpus_per_worker < 0:
            raise ValueError(f"--gpus-per-worker {self.gpus_per_worker}: give 0 or more GPUs per job")

    @property
    def remote(self) -> bool:
        """An existing scheduler: its workers were started elsewhere, and may be asked what they do."""
        return bool(self.scheduler or self.scheduler_file)

    def local_workers(self) -> int:
        """How many ensembles train at a time as far as this machine can tell: ``workers`` (``auto``: as
        :meth:`Engine.local` counts them); 1 in one process, and for a cluster, whose size is not asked."""
        if self.workers == "auto":
            return max(1, len(os.sched_getaffinity(0)) // (self.threads or 1))
        return int(self.workers or 1)

    def start(self) -> Engine | None:
        """The Dask engine this spec asks for, started (the caller closes it), or None: this process."""
        if self.remote:
            return Engine.connect(self.scheduler, self.scheduler_file, threads=self.threads or 1)
        if self.cluster == "slurm":
            return Engine.slurm(self.cluster_config, max_jobs=self.max_jobs, gpus=self.gpus_per_worker,
                                threads=self.threads or 1, dashboard=self.dashboard)
        if self.workers is not None:
            return Engine.local(self.workers, threads=self.threads, dashboard=self.dashboard)
        return None

    def workers_status(self) -> list[str]:
        """One line per worker of the existing scheduler and the campaign tasks it is processing
        (:func:`~.engine.workers_status`); nothing when the spec names no scheduler."""
        if not self.remote:
            return []
        engine = self.start()
        try:
            return workers_status(engine)
        finally:
            engine.close()
