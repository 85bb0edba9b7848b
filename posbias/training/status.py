"""Where a campaign stands (read from ``data/``, the user cache and the checkpoints; trains,
locks and writes nothing), and how long its units took to train."""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, Callable

from .. import convergence as cv
from .. import parking
from ..cost import human_seconds
from . import checkpoints as ck
from .campaigns import distinct, stored, units_of
from .planning import plan


@dataclass(frozen=True)
class EnsembleStatus:
    """One ensemble still to train, as the campaign would split it: its ``depth``, its members'
    ``masks`` (e.g. ``causal/decay``), ``pe``, ``members``, ``steps``; from its checkpoint (``None``
    when it has none yet) the ``step`` done, ``wall`` (training seconds over every sitting),
    ``sitting_pace`` (seconds per step in the latest sitting; ``None`` before a step or for a
    checkpoint that predates the record) and ``age`` (seconds since it was saved); ``committed``
    when the furthest checkpoint is the one in ``data/checkpoints``; ``split_from``: the member
    count of the larger ensemble whose checkpoint it will be cut from, or ``None``; ``reading``: for a
    unit trained until a stopping rule holds, how far each part of the rule is from holding at its last
    evaluation (:func:`~posbias.convergence.describe_reading`), else ``None``."""

    depth: int
    masks: str
    pe: str
    members: int
    steps: int
    step: int | None = None
    wall: float | None = None
    sitting_pace: float | None = None
    age: float | None = None
    committed: bool = False
    split_from: int | None = None
    reading: str | None = None


def _reading(state: dict[str, Any], unit: Any) -> str | None:
    """The stopping rule's reading on the one unit of a rule-stopped checkpoint ``state``."""
    if unit.stop_rule is None or not state.get("curves", {}).get("step"):
        return None
    curves = cv.member_curves(state["curves"])
    r = cv.rule(unit.stop_rule)
    return cv.describe_reading(cv.rule_reading(curves, unit.n_test, r), r, curves["step"][-1])


@dataclass(frozen=True)
class CampaignStatus:
    """A campaign's unit count, how many are stored, and its unfinished ensembles."""

    units: int
    stored: int
    ensembles: list[EnsembleStatus]


def campaign_status(experiment: str, profile: str = "paper", *, max_members: int | str = "auto",
                    workers: int = 1, **overrides: Any) -> CampaignStatus:
    """Where a campaign stands. Same arguments as :func:`~.engine.run_campaign`; ``workers`` is how
    many train at a time, which ``max_members="auto"`` sizes the ensembles not yet started for."""
    units = distinct(units_of(experiment, profile, overrides))
    missing = [u for u in units if not stored(u)]
    rows = []
    parts, found = plan(missing, max_members, workers)
    for part in parts:
        src = ck.source(part, found)
        u = part[0]
        row = EnsembleStatus(u.depth, "/".join(dict.fromkeys(v.config.mask for v in part)), u.config.pe,
                             len(part), u.steps)
        if src is None:
            rows.append(row)
            continue
        st, split = src.state, None if src.units == [v.params() for v in part] else len(src.units)
        path = (parking.parked_parts(src.path) or [src.path])[0] if src.committed else src.path
        try:
            age = max(0.0, time.time() - path.stat().st_mtime)
        except FileNotFoundError:       # the ensemble finished just now
            age = None
        last, pace = (st.get("sittings") or [{}])[-1], None
        if split is None and "from_wall" in last and st["step"] > last["from_step"]:
            pace = (float(st["wall"]) - last["from_wall"]) / (st["step"] - last["from_step"])
        rows.append(replace(row, step=int(st["step"]), wall=float(st["wall"]), sitting_pace=pace, age=age,
                            committed=src.committed, split_from=split,
                            reading=_reading(st, u) if split is None and len(part) == 1 else None))
    return CampaignStatus(len(units), len(units) - len(missing), rows)


def measured(status: CampaignStatus) -> list[EnsembleStatus]:
    """The unfinished ensembles that have trained steps of their own (not only a larger ensemble's
    checkpoint to be split), whose pace is therefore measured."""
    return [e for e in status.ensembles if e.step is not None and e.split_from is None and e.step > 0]


def pace(e: EnsembleStatus) -> float:
    """Seconds per step of a :func:`measured` ensemble: its latest sitting's, else over all sittings."""
    return e.sitting_pace or (e.wall or 0.0) / max(e.step or 0, 1)


def network_pace(status: CampaignStatus) -> dict[int, float]:
    """Depth -> seconds per network and step, the mean over the :func:`measured` ensembles of that
    depth of their :func:`pace` divided by their members: how an ensemble not started yet will train
    on the machine training the campaign (the ensemble's size and encodings aside)."""
    by_depth: dict[int, list[float]] = {}
    for e in measured(status):
        by_depth.setdefault(e.depth, []).append(pace(e) / e.members)
    return {d: sum(v) / len(v) for d, v in by_depth.items()}


def format_status(status: CampaignStatus, model: Callable[[int], float] | None = None) -> str:
    """:func:`campaign_status` as lines of text: each ensemble's step, its pace over every sitting and
    in the latest one, and the time to go at the latest sitting's pace (the machine as it is now).
    Ensembles not started are priced at the pace per network of the started ensembles of their depth,
    else at ``model`` (depth -> seconds per network-step, the chapter's cost model) where given; alike
    ones in a row share a line (``5 x 1 unit``)."""
    lines = [f"{status.stored} of {status.units} units stored; {status.units - status.stored} to train "
             f"in {len(status.ensembles)} ensemble(s)"]
    per_net = network_pace(status)

    def units(n: int) -> str:
        return f"{n} unit" if n == 1 else f"{n} units"

    rows = status.ensembles
    i = 0
    while i < len(rows):
        r = rows[i]
        head = f"  depth {r.depth}, " + (f"{r.masks} mask, " if r.masks else "") + f"{r.pe} PE, "
        if r.step is None:
            n = 1
            while i + n < len(rows) and rows[i + n] == r:
                n += 1
            i += n
            if r.depth in per_net:
                how, step = f"the pace per network of the started depth-{r.depth} ensembles", per_net[r.depth]
            elif model is not None:
                step = model(r.depth)
                how = f"the chapter's cost model ({1e3 * step:.0f} ms per network-step on one core)"
            else:
                how, step = "", 0.0
            seconds = n * r.members * r.steps * step
            lines.append(head + (f"{units(r.members)}: not started (0/{r.steps} steps)" if n == 1 else
                                 f"{n} x {units(r.members)}: not started (0/{r.steps} steps each)")
                         + (f", about {human_seconds(seconds)}{' in all' if n > 1 else ''} at {how}" if how else ""))
            continue
        i += 1
        head += f"{units(r.members)}: "
        done = f"step {r.step}/{r.steps} ({100 * r.step / r.steps:.1f}%)"
        if r.split_from:         # its pace is the larger ensemble's, not its own
            lines.append(head + f"{done} in the checkpoint of the larger ensemble ({r.split_from} units) it will "
                         "be split from" + ("; committed" if r.committed else ""))
            continue
        pace, now = r.wall / max(r.step, 1), r.sitting_pace
        lines.append(head + f"{done}, {1e3 * pace:.0f} ms/step over all sittings"
                     + ("" if now is None else f", {1e3 * now:.0f} ms/step in the latest")
                     + f", about {human_seconds((r.steps - r.step) * (now or pace))} to go at "
                     + ("that pace" if now is None else "the latest pace")
                     + ("; from the committed checkpoint" if r.committed else
                        "" if r.age is None else f"; checkpoint saved {r.age:.0f} s ago")
                     + ("" if r.reading is None else f"\n    stopping rule: {r.reading}"))
    return "\n".join(lines)


@dataclass(frozen=True)
class TrainingTime:
    """How long units took to train (:func:`training_time`): ``seconds``, the wall time of their
    ensembles, each counted once; ``ensembles``, how many ensembles that time covers (an ensemble
    trained up to a split and then cut into parts counts once, and so does each part)."""

    seconds: float
    ensembles: int

    @property
    def hours(self) -> float:
        """``seconds`` in hours."""
        return self.seconds / 3600


def training_time(results: list[dict[str, Any]]) -> TrainingTime:
    """How long the units' ``results`` took to train, as a :class:`TrainingTime`. Each ensemble's
    wall time counts once (its members share ``train_seconds_ensemble``); an ensemble split from a
    larger one (``splits``) carries the larger one's time up to the split, which counts once however
    many parts were split from it."""
    leaves: dict[tuple, float] = {}
    nodes: dict[str, float] = {}
    for r in results:
        splits = r.get("splits", [])
        leaves[(r["params"]["depth"], r["ensemble_size"], r["train_seconds_ensemble"])] = \
            r["train_seconds_ensemble"] - (splits[-1]["wall"] if splits else 0.0)
        for i, sp in enumerate(splits):
            nodes[sp["key"]] = sp["wall"] - (splits[i - 1]["wall"] if i else 0.0)
    return TrainingTime(float(sum(leaves.values()) + sum(nodes.values())), len(leaves) + len(nodes))


def progress_text(status: CampaignStatus, name: Callable[[str, str], str] | None = None) -> str:
    """One phrase for a chapter: each started ensemble's depth, architectures (``name(mask, pe)``, by
    default ``mask PE``) and step, then the units not started, summed per architecture, or that the
    campaign is complete. Units not started are counted, not planned: how a campaign will cut them
    into ensembles depends on its workers (``--workers``), which a chapter cannot know."""
    name = name or (lambda mask, pe: f"{mask} {pe} PE")
    order = list(dict.fromkeys(m for r in status.ensembles for m in r.masks.split("/")))

    def arch(r: EnsembleStatus) -> str:
        masks = sorted(set(r.masks.split("/")), key=order.index)
        return f"depth {r.depth}, " + " and ".join(name(m, r.pe) for m in masks)

    def count(n: int) -> str:
        return f"{n} unit" if n == 1 else f"{n} units"

    rows = [f"{arch(r)} ({count(r.members)}) at step {r.step:,}" for r in status.ensembles if r.step is not None]
    waiting: dict[str, int] = {}
    for r in status.ensembles:
        if r.step is None:
            waiting[arch(r)] = waiting.get(arch(r), 0) + r.members
    rows += [f"{a} ({count(n)}) not started" for a, n in waiting.items()]
    return "; ".join(rows) or "nothing, the campaign is complete"
