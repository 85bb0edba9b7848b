"""How a campaign's missing units are cut into ensemble parts: one task each for the engine.

Units of one :meth:`~.units.Unit.group_key` train together as one ensemble of at most
``max_members``. An ensemble already started (it has a checkpoint) keeps its members, except that a
smaller ``max_members`` splits it: each part resumes from the larger checkpoint cut along the
ensemble axis (:func:`~.checkpoints.split_state`), exact since members never interact. The
checkpoints then fix the partition, so every later command keeps the split.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

from posbias.training import checkpoints as ck
from posbias.training.units import Unit, unit_key


def ensembles(missing: list[Unit], max_members: int, started: Sequence[list[dict[str, Any]]] = ()) -> list[list[Unit]]:
    """The parts ``missing`` trains in. An ensemble already started (``started``: the unit lists of
    the checkpoints, furthest first, as :func:`~.checkpoints.checkpoints` gives them) is kept when it
    has at most ``max_members`` units, all in ``missing``, of one group key, none placed yet; the
    other units are grouped by group key, at most ``max_members`` each. Parts come in the order of
    their first unit in ``missing``."""
    if max_members < 1:
        raise ValueError(f"max_members must be at least 1, got {max_members}")
    by_key = {unit_key(u): u for u in missing}
    parts: list[list[Unit]] = []
    placed: set[str] = set()
    for ps in started:
        ks = [unit_key(p) for p in ps]
        us = [by_key.get(k) for k in ks]
        if (len(ks) <= max_members and all(u is not None for u in us) and not placed & set(ks)
                and len({u.group_key() for u in us}) == 1):
            parts.append(us)
            placed |= set(ks)
    by_group: dict[tuple, list[Unit]] = {}
    for u in missing:
        if unit_key(u) not in placed:
            by_group.setdefault(u.group_key(), []).append(u)
    parts += [us[lo:lo + max_members] for us in by_group.values() for lo in range(0, len(us), max_members)]
    order = {u: i for i, u in enumerate(missing)}
    return sorted(parts, key=lambda us: order[us[0]])


def plan(missing: list[Unit], max_members: int | str, workers: int = 1
         ) -> tuple[list[list[Unit]], list[ck.Found]]:
    """:func:`ensembles` of ``missing`` with the checkpoints on this machine and in ``data/``, and
    those checkpoints (none read when nothing is missing). ``max_members="auto"`` is
    :func:`auto_members` for ``workers``."""
    n = auto_members(missing, workers) if max_members == "auto" else int(max_members)
    found = ck.checkpoints() if missing else []
    return ensembles(missing, n, [c.units for c in found]), found


def auto_members(missing: list[Unit], workers: int, cap: int = 64) -> int:
    """``--max-members auto``: the ensemble size (at most ``cap``) that should finish soonest when the
    units are cut by group key into parts of at most that size and ``workers`` parts train at a
    time: the fewest rounds (``ceil(parts / workers)``) times the largest part, and of the sizes that
    tie, the largest (an ensemble trains more networks per second than its members one by one).
    Every worker gets a part where there are units enough: 6 units on 2 workers train in 3 + 3, and
    three groups of 10 on 2 workers in six parts of 5 (3 rounds of 5 units, not 2 rounds of 10).
    With one worker: ``cap``."""
    groups: dict[tuple, int] = {}
    for u in missing:
        groups[u.group_key()] = groups.get(u.group_key(), 0) + 1
    if workers <= 1 or not groups:
        return cap
    largest = max(groups.values())

    def finish(n: int) -> tuple[int, int]:
        parts = sum(math.ceil(c / n) for c in groups.values())
        return math.ceil(parts / workers) * n, -n
    return min(range(1, min(cap, largest) + 1), key=finish)
