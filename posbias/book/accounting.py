"""What each trained chapter's campaign has cost and has left, in hours of one-thread training: read
from ``data/``, the user cache and the checkpoints (the reproduction notes print it). The estimate of
a run before it starts is :mod:`posbias.book.cost`'s."""
from __future__ import annotations

from dataclasses import dataclass

from posbias import training
from posbias.book.cost import network_step
from posbias.book.runner import prepare
from posbias.training import status as st

__all__ = ["CampaignCost", "campaign_cost", "cost_frame"]


@dataclass(frozen=True)
class CampaignCost:
    """What a trained chapter's campaign under ``profile`` has cost so far and has left, in hours of
    one-thread training on a CPU: ``units`` it needs, ``stored`` of them; ``hours_trained``, measured
    (the ensembles that trained the stored units, each counted once, and the unfinished ensembles'
    checkpoints), on a CPU; ``gpu_hours``, the same ensembles' hours on a GPU (a process's wall time,
    beside others sharing the GPU: not comparable with the CPU's hours); ``hours_to_go``, on a CPU, the
    unfinished ensembles at their latest measured CPU pace and the ensembles not started (or trained
    so far only on a GPU) at the pace per network of the campaign's ensembles of their depth measured
    on a CPU (``borrowed`` of them; the machine that trains the campaign, as measured), or else at the
    chapter's ``network_step`` model (``modelled`` of them); ``ensembles`` left in all."""

    chapter: str
    units: int
    stored: int
    hours_trained: float
    hours_to_go: float
    ensembles: int
    modelled: int
    borrowed: int = 0
    gpu_hours: float = 0.0


def campaign_cost(chapter_id: str, profile: str = "paper") -> CampaignCost:
    """:class:`CampaignCost` of ``chapter_id``'s campaign with its ``profile`` parameters; reads
    ``data/``, the user cache and the checkpoints, trains and writes nothing."""
    chapter, params = prepare(chapter_id, {}, profile)
    experiment, prof, settings = training.chapter_campaign(chapter.id, params)
    status = training.campaign_status(experiment, prof, on="cpu", **settings)
    records = [r for rs in training.stored_records(experiment, prof, **settings).values() for r in rs
               if r is not None]
    took = training.training_time([r["result"] for r in records],
                                  [r.get("provenance") for r in records])
    trained, gpu = took.seconds - took.gpu_seconds, took.gpu_seconds
    done, per_net, model = st.measured(status), st.network_pace(status), network_step(chapter, params)
    to_go, modelled, borrowed = 0.0, 0, 0
    for e in status.ensembles:
        if e.split_from is None:        # a part still to be cut from a larger checkpoint: counted there
            trained, gpu = trained + e.own_wall, gpu + e.gpu_wall
    for e in done:
        to_go += (e.steps - (e.step or 0)) * st.pace(e)
    for e in status.ensembles:
        if any(e is m for m in done):
            continue
        if e.depth in per_net:
            step, borrowed = per_net[e.depth], borrowed + 1
        else:
            step, modelled = model(e.depth) if model else 0.0, modelled + 1
        to_go += e.members * (e.steps - (e.step or 0)) * step
    return CampaignCost(chapter.id, status.units, status.stored, trained / 3600, to_go / 3600,
                        len(status.ensembles), modelled, borrowed, gpu / 3600)


def cost_frame(chapters: list[str], profile: str = "paper"):
    """:func:`campaign_cost` of each chapter as a ``pandas.DataFrame``, one row per chapter, with the
    columns a reader needs: chapter, networks committed / needed, hours trained (on a CPU), hours to
    go, and how the hours to go were found: "measured pace" (each unfinished ensemble's own), "measured
    pace of each depth" (ensembles not started too, at their depth's), "cost model", or "measured pace
    and cost model"; where any chapter trained on a GPU, its GPU hours beside them."""
    import pandas as pd  # lazy: pandas costs ~0.5s at import

    rows, gpu = [], []
    for ch in chapters:
        c = campaign_cost(ch, profile)
        gpu.append(c.gpu_hours)
        how = ("-" if not c.ensembles else "cost model" if c.modelled == c.ensembles
               else "measured pace and cost model" if c.modelled
               else "measured pace of each depth" if c.borrowed else "measured pace")
        rows.append({"chapter": c.chapter, "networks": f"{c.stored} of {c.units}",
                     "hours trained": c.hours_trained, "hours to go": c.hours_to_go, "to go from": how})
    frame = pd.DataFrame(rows)
    if any(gpu):
        frame.insert(3, "GPU hours", gpu)
    return frame
