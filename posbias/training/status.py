"""Where a campaign stands (read from ``data/``, the user cache and the checkpoints; trains,
locks and writes nothing), and how long its units took to train."""
from __future__ import annotations

import time
from typing import Any

from .. import store
from . import checkpoints as ck
from .campaigns import distinct, stored, units_of
from .planning import plan


def campaign_status(experiment: str, profile: str = "paper", *, max_members: int | str = "auto",
                    **overrides: Any) -> dict[str, Any]:
    """Where a campaign stands. Same arguments as :func:`~.engine.run_campaign`.

    Returns ``{"units", "stored", "ensembles"}``: the campaign's unit count, how many are stored, and
    one dict per ensemble still to train, as the campaign would split them, with ``depth``, ``masks``
    (its members' masks, e.g. ``causal/decay``), ``pe``, ``members``, ``steps``, ``split_from`` (the
    member count of the larger ensemble whose checkpoint it will be cut from, or ``None``), and from
    its checkpoint (``None`` when it has none yet) ``step`` (done), ``wall`` (training seconds so far,
    over every sitting), ``sitting_pace`` (seconds per step in the latest sitting, ``None`` when that
    sitting has no step yet or its checkpoint predates the record) and ``age`` (seconds since the
    checkpoint was saved); ``committed`` says the furthest checkpoint is the one in
    ``data/checkpoints``.
    """
    units = distinct(units_of(experiment, profile, overrides))
    missing = [u for u in units if not stored(u)]
    rows = []
    parts, found = plan(missing, max_members)
    for part in parts:
        src = ck.source(part, found)
        st, committed = (None, False) if src is None else (src["state"], src["committed"])
        split = None if src is None or src["units"] == [u.params() for u in part] else len(src["units"])
        path = None if src is None else (store.parked_parts(src["path"]) or [src["path"]])[0] if committed \
            else src["path"]
        try:
            age = None if path is None else max(0.0, time.time() - path.stat().st_mtime)
        except FileNotFoundError:       # the ensemble finished just now
            age = None
        u, last = part[0], ((st or {}).get("sittings") or [{}])[-1]
        sitting_pace = None
        if st is not None and split is None and "from_wall" in last and st["step"] > last["from_step"]:
            sitting_pace = (float(st["wall"]) - last["from_wall"]) / (st["step"] - last["from_step"])
        rows.append({"depth": u.depth, "masks": "/".join(dict.fromkeys(v.config.mask for v in part)),
                     "pe": u.config.pe, "members": len(part), "steps": u.steps,
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
    return {"seconds": sum(leaves.values()) + sum(nodes.values()), "ensembles": len(leaves) + len(nodes)}
