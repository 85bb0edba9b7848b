"""Training the networks of Wu et al.'s experiments, resumably, and the campaigns of the chapters.

A *unit* (:mod:`.units`) is one (configuration, seed): its result (training curves, final accuracies
on the six ``IC`` sets, position sweeps, mean attention maps, sink shares) is stored on its own under
the experiment ``wu-units``, so a unit shared by two chapters is trained once and a campaign stopped
half way keeps every finished unit. Units still missing are grouped into ensemble parts
(:mod:`.planning`) and each part trained as one :class:`~posbias.science.model.EnsembleNet` (:mod:`.loop`);
since the ensemble is bit-for-bit equivalent to training each member alone, the grouping never
changes a unit's result.

Resuming (:mod:`.checkpoints`). A running ensemble saves a checkpoint every
``$POSBIAS_CHECKPOINT_SECONDS`` (default 60) seconds, atomically, in ``store.checkpoint_dir``;
SIGINT and SIGTERM finish the current step, save a checkpoint and raise ``Interrupted`` (on Dask workers,
whose tasks receive no signals, the interrupted driver asks them to: :mod:`.engine`); a killed
process loses at most the steps since the last checkpoint. The next identical run resumes from it
and ends with bit-for-bit the result of an uninterrupted run (same device and torch threads),
except the measured wall time. A campaign longer than one machine's life is carried over by
committing its checkpoints to ``data/checkpoints`` (:func:`park_campaign`).

Running (:mod:`.engine`). One task per part, in this process (chapters) or on Dask (a local cluster,
a scheduler, Slurm: which one, an :class:`EngineSpec` of :mod:`.spec` says); the driver alone writes
the store. :mod:`.campaigns` says which units each chapter reads (from its declaration,
:mod:`posbias.trained`); :mod:`.status` says how far a campaign is.
"""
from __future__ import annotations

from typing import Any

from posbias.training import checkpoints, planning
from posbias.training.campaigns import (budget_study, chapter_campaign, distinct, fig2_name, settings, stored,
                                        stored_campaign, stored_records, store_finished, units_of)
from posbias.training.checkpoints import Interrupted, checkpoint_interval
from posbias.training.engine import (Engine, PartBusy, SchedulerLost, VersionMismatch, run_campaign,
                                     run_chapter_campaign, train_part)
from posbias.training.loop import Ensemble, flushed_denormals, set_flush_denormal, train_units, tune_allocator
from posbias.training.spec import EngineSpec
from posbias.training.status import (CampaignStatus, EnsembleStatus, TrainingTime, campaign_status, format_status,
                                     progress_text, training_time)
from posbias.training.units import SINK_SEED, TEST_SEED, UNIT_EXPERIMENT, VERSION, Unit, default_threads, device

__all__ = [
           "CampaignStatus", "Engine", "EngineSpec", "Ensemble", "EnsembleStatus", "Interrupted", "PartBusy",
           "SchedulerLost", "SINK_SEED", "TEST_SEED", "TrainingTime", "UNIT_EXPERIMENT", "Unit", "VERSION",
           "VersionMismatch", "budget_study", "campaign_status", "chapter_campaign", "checkpoint_interval",
           "default_threads", "device", "fig2_name", "flushed_denormals", "format_status", "park_campaign",
           "progress_text", "run_campaign", "run_chapter_campaign", "set_flush_denormal", "settings",
           "store_finished", "stored_campaign", "stored_records", "train_part", "train_units", "training_time",
           "tune_allocator", "units_of"]


def park_campaign(experiment: str, profile: str = "paper", *, max_members: int | str = "auto",
                  log=print, workers: int = 1, **overrides: Any) -> dict[str, int]:
    """Commit the checkpoints of an unfinished campaign (:func:`.checkpoints.park`) as the campaign
    with these arguments would split it; trains nothing. Returns ``{"parked", "kept", "removed"}``."""
    missing = [u for u in distinct(units_of(experiment, profile, overrides)) if not stored(u)]
    parts, _ = planning.plan(missing, max_members, workers)
    return checkpoints.park(parts, stored, log)
