"""Where a campaign stands (read from ``data/``, the user cache and the checkpoints; trains,
locks and writes nothing), and how long its units took to train."""
from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any, Callable

from posbias.measures import convergence as cv
from posbias.storage import parking
from posbias.storage.provenance import is_gpu, sitting_device
from posbias.storage.report import human_seconds
from posbias.training import checkpoints as ck
from posbias.training.campaigns import distinct, stored, units_of
from posbias.training.planning import plan


@dataclass(frozen=True)
class EnsembleStatus:
    """One ensemble still to train, as the campaign would split it: its ``depth``, its members'
    ``masks`` (e.g. ``causal/decay``), ``pe``, ``members``, ``steps``; from its checkpoint (``None``
    when it has none yet) the ``step`` done, ``wall`` (training seconds over every sitting), of them
    ``gpu_steps`` and ``gpu_wall`` trained on a GPU, ``on``, the kind of device its paces are for
    (``"cpu"`` or ``"gpu"``: the one a campaign trains on here), ``sitting_pace`` (seconds per step in
    the latest sittings on that kind, back until they hold :data:`PACE_STEPS` steps (:func:`recent`);
    ``None`` before such a step or for a checkpoint that predates the record), ``paced_steps`` (the
    steps it is read over) and ``age`` (seconds since it was saved); ``committed``
    when the furthest checkpoint is the one in ``data/checkpoints``; ``split_from``: the member
    count of the larger ensemble whose checkpoint it will be cut from, or ``None``; ``reading``: for a
    unit trained until a stopping rule holds, how far each part of the rule is from holding at its last
    evaluation (:func:`~posbias.measures.convergence.describe_reading`), else ``None``."""

    depth: int
    masks: str
    pe: str
    members: int
    steps: int
    step: int | None = None
    wall: float | None = None
    sitting_pace: float | None = None
    paced_steps: int | None = None
    age: float | None = None
    committed: bool = False
    split_from: int | None = None
    reading: str | None = None
    gpu_steps: int = 0
    gpu_wall: float = 0.0
    on: str = "cpu"

    @property
    def own_steps(self) -> int:
        """Steps trained on the kind of device its paces are for (``on``)."""
        return self.gpu_steps if self.on == "gpu" else (self.step or 0) - self.gpu_steps

    @property
    def own_wall(self) -> float:
        """Training seconds on the kind of device its paces are for (``on``)."""
        return self.gpu_wall if self.on == "gpu" else (self.wall or 0.0) - self.gpu_wall


def kind(device: Any) -> str:
    """``"gpu"`` for a sitting on an accelerator (:func:`posbias.storage.provenance.is_gpu`), else ``"cpu"``."""
    return "gpu" if is_gpu(str(device) if device else None) else "cpu"


@dataclass(frozen=True)
class Segment:
    """One sitting's share of an ensemble's training: the ``kind`` of device it ran on (``"cpu"`` or
    ``"gpu"``), its ``steps`` and its training ``seconds``."""

    kind: str
    steps: int
    seconds: float


def segments(sittings: list[dict[str, Any]], step: int, wall: float, device: str | None = None) -> list[Segment]:
    """The ``sittings`` of a checkpoint or record as :class:`Segment` s, each from its ``from_step`` and
    ``from_wall`` to the next sitting's (the last to ``step`` and ``wall``); a sitting that names no
    device ran on the checkpoint's or record's own ``device`` (:func:`~posbias.storage.provenance.sitting_device`).
    Training before the first sitting that records where it began (checkpoints older than the record)
    ran on the CPU: every campaign trained there until a GPU sitting named its device."""
    own = {"device": device}
    marks = [(int(s["from_step"]), float(s["from_wall"]), kind(sitting_device(s, own))) for s in sittings
             if "from_step" in s and "from_wall" in s]
    if not marks or marks[0][0] > 0:
        marks.insert(0, (0, 0.0, "cpu"))
    ends = [(m[0], m[1]) for m in marks[1:]] + [(int(step), float(wall))]
    return [Segment(k, e[0] - s0, e[1] - w0) for (s0, w0, k), e in zip(marks, ends)]


#: The fewest steps a sitting pace is read over: the latest sittings are taken back until they hold
#: this many (one evaluation period at the paper's settings), so that a sitting minutes old, whose first
#: steps may include an evaluation or share the cores with other work, does not price the rest alone.
PACE_STEPS = 5000


def recent(segs: list[Segment], min_steps: int = PACE_STEPS) -> Segment | None:
    """The last of ``segs`` (one kind of device's sittings, oldest first) as one :class:`Segment`: taken
    back from the latest until they hold ``min_steps`` steps or there are none left; ``None`` for none."""
    out = None
    for g in reversed(segs):
        out = g if out is None else Segment(g.kind, out.steps + g.steps, out.seconds + g.seconds)
        if out.steps >= min_steps:
            break
    return out


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
                    workers: int = 1, on: str | None = None, **overrides: Any) -> CampaignStatus:
    """Where a campaign stands. Same arguments as :func:`~.engine.run_campaign`; ``workers`` is how
    many train at a time, which ``max_members="auto"`` sizes the ensembles not yet started for; ``on``
    (``"cpu"`` or ``"gpu"``) the kind of device its paces are for, by default the one training here
    would use (:func:`~.units.device`)."""
    if on is None:
        from posbias.training.units import device
        on = kind(device().type)
    if on not in ("cpu", "gpu"):
        raise ValueError(f"on={on!r}: give 'cpu' or 'gpu'")
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
        sittings, pace, paced = st.get("sittings") or [], None, None
        segs = segments(sittings, int(st["step"]), float(st["wall"]), st.get("device"))
        gpu = [g for g in segs if g.kind == "gpu"]
        recorded = segs[len(segs) - sum("from_step" in x and "from_wall" in x for x in sittings):]
        latest = [g for g in recorded if g.kind == on and g.steps > 0]     # not the training before the record
        last = recent(latest) if split is None else None
        if last is not None:
            pace, paced = last.seconds / last.steps, last.steps
        rows.append(replace(row, step=int(st["step"]), wall=float(st["wall"]), sitting_pace=pace,
                            paced_steps=paced, age=age,
                            gpu_steps=sum(g.steps for g in gpu), gpu_wall=sum(g.seconds for g in gpu), on=on,
                            committed=src.committed, split_from=split,
                            reading=_reading(st, u) if split is None and len(part) == 1 else None))
    return CampaignStatus(len(units), len(units) - len(missing), rows)


def measured(status: CampaignStatus) -> list[EnsembleStatus]:
    """The unfinished ensembles that have trained steps of their own (not only a larger ensemble's
    checkpoint to be split) on the kind of device their paces are for, whose pace is therefore
    measured (an ensemble trained so far only on a GPU has no CPU pace)."""
    return [e for e in status.ensembles if e.step is not None and e.split_from is None and e.own_steps > 0]


def pace(e: EnsembleStatus) -> float:
    """Seconds per step of a :func:`measured` ensemble: its latest sittings' (:func:`recent`) on the
    kind of device its paces are for, else over all its sittings on that kind."""
    return e.sitting_pace or e.own_wall / max(e.own_steps, 1)


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
    in the latest ones (:func:`recent`), and the time to go at that pace (the machine as it is now),
    paces counting only the sittings on the kind of device they are for (the steps trained on the other
    kind are named). Ensembles not started, or started only on the other kind, are priced at the pace
    per network of the started ensembles of their depth, else at ``model`` (depth -> seconds per
    network-step, the chapter's cost model) where given; alike ones in a row share a line (``5 x 1
    unit``)."""
    lines = [f"{status.stored} of {status.units} units stored; {status.units - status.stored} to train "
             f"in {len(status.ensembles)} ensemble(s)"]
    per_net = network_pace(status)
    where = {"cpu": "the CPU", "gpu": "a GPU"}

    def units(n: int) -> str:
        return f"{n} unit" if n == 1 else f"{n} units"

    def priced(depth: int) -> tuple[str, float]:
        """How an ensemble without a pace of its own is priced, and the seconds per network-step."""
        if depth in per_net:
            return f"the pace per network of the started depth-{depth} ensembles", per_net[depth]
        if model is not None:
            step = model(depth)
            return f"the chapter's cost model ({1e3 * step:.0f} ms per network-step on one core)", step
        return "", 0.0

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
            how, step = priced(r.depth)
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
        other = r.step - r.own_steps                # steps trained on the other kind of device
        done += f", {other} of them on {where['gpu' if r.on == 'cpu' else 'cpu']}" if other else ""
        tail = (("; from the committed checkpoint" if r.committed else
                 "" if r.age is None else f"; checkpoint saved {r.age:.0f} s ago")
                + ("" if r.reading is None else f"\n    stopping rule: {r.reading}"))
        if r.own_steps <= 0:                        # no pace of its own here: priced as one not started
            how, step = priced(r.depth)
            lines.append(head + done + (f", about {human_seconds(r.members * (r.steps - r.step) * step)} to go "
                                        f"on {where[r.on]} at {how}" if how else "") + tail)
            continue
        pace, now = r.own_wall / r.own_steps, r.sitting_pace
        lines.append(head + f"{done}, {1e3 * pace:.0f} ms/step over "
                     + ("all sittings" if not other else f"its sittings on {where[r.on]}")
                     + ("" if now is None else f", {1e3 * now:.0f} ms/step in the latest" + (
                         "" if r.paced_steps is None else f" {r.paced_steps:,} steps"))
                     + f", about {human_seconds((r.steps - r.step) * (now or pace))} to go at "
                     + ("that pace" if now is None else "the latest pace") + tail)
    return "\n".join(lines)


@dataclass(frozen=True)
class TrainingTime:
    """How long units took to train (:func:`training_time`): ``seconds``, the wall time of their
    ensembles, each counted once; ``ensembles``, how many ensembles that time covers (an ensemble
    trained up to a split and then cut into parts counts once, and so does each part);
    ``gpu_seconds``, the part of ``seconds`` trained on a GPU."""

    seconds: float
    ensembles: int
    gpu_seconds: float = 0.0

    @property
    def hours(self) -> float:
        """``seconds`` in hours."""
        return self.seconds / 3600


def _gpu_between(segs: list[Segment], lo: float, hi: float) -> float:
    """The seconds of ``segs`` (one after another in wall time from 0) trained on a GPU between the
    wall times ``lo`` and ``hi``."""
    out, t = 0.0, 0.0
    for g in segs:
        if g.kind == "gpu":
            out += max(0.0, min(hi, t + g.seconds) - max(lo, t))
        t += g.seconds
    return out


def training_time(results: list[dict[str, Any]],
                  provenances: list[dict[str, Any] | None] | None = None) -> TrainingTime:
    """How long the units' ``results`` took to train, as a :class:`TrainingTime`. Each ensemble's
    wall time counts once (its members share ``train_seconds_ensemble``); an ensemble split from a
    larger one (``splits``) carries the larger one's time up to the split, which counts once however
    many parts were split from it. ``provenances``, one per result (its record's, ``None`` where it has
    none), say by their sittings and device which of that time ran on a GPU; without them all of it
    ran on a CPU."""
    leaves: dict[tuple, tuple[float, float]] = {}
    nodes: dict[str, tuple[float, float]] = {}
    for r, prov in zip(results, provenances or [None] * len(results)):
        splits, wall, sit = r.get("splits", []), r["train_seconds_ensemble"], (prov or {}).get("sittings")
        segs = segments(sit, r["params"].get("steps", 0), wall, prov.get("device")) if sit else []
        lo = splits[-1]["wall"] if splits else 0.0
        leaves[(r["params"]["depth"], r["ensemble_size"], wall)] = (wall - lo, _gpu_between(segs, lo, wall))
        for i, sp in enumerate(splits):
            start = splits[i - 1]["wall"] if i else 0.0
            nodes[sp["key"]] = (sp["wall"] - start, _gpu_between(segs, start, sp["wall"]))
    both = list(leaves.values()) + list(nodes.values())
    return TrainingTime(float(sum(t for t, _ in both)), len(both), float(sum(g for _, g in both)))


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
