"""The declared parameter space is tested, not trusted: every chapter at each parameter's declared
minimum and maximum (lists: one item at each end; ``max_len`` items where declared), the other
parameters at the smoke profile's values, ends in exit 0 or 3, or is refused before any work (exit 2:
validation, or the cost guard), never 1.

Cost (two shared cores): validating and costing all ~340 edges takes seconds. Executing them is what
costs, so the chapters run in this process (:mod:`posbias.book.mutation`, no kernel start-up) and only the
edges the cost model puts at most ``$POSBIAS_EDGE_SECONDS`` (default 8 s) are executed: the theory
chapters' edges (about 90). Chapters that train networks, and the real-LLM and simulation chapters
(30 s and more even at smoke size), are covered at their edges by validation and the cost guard
here, and by ``make fuzz`` / ``POSBIAS_EDGE_SECONDS=60`` when there is time.
"""
from __future__ import annotations

import os

import pytest

from param_space import edges, trains, try_point
from posbias.book.chapters import chapter_ids, get_chapter

BUDGET = float(os.environ.get("POSBIAS_EDGE_SECONDS", "8"))
#: Edges found to exit 1 and not fixed yet (issue 47's closing note): each must still fail, so that the
#: entry is removed when it is fixed. Executed under a cap on the address space (param_space.memory_cap).
KNOWN: dict[tuple[str, str], str] = {}     # wu-thm-4-7's three (theta 1e-4, beta 0.1, base 2) are fixed


@pytest.fixture(autouse=True)
def _scratch_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("POSBIAS_CACHE", str(tmp_path_factory.getbasetemp() / "edge-cache"))


@pytest.mark.parametrize("cid", chapter_ids())
def test_every_edge_is_valid_or_refused_before_any_work(cid):
    ch = get_chapter(cid)
    results = {label: try_point(ch, over, float("inf"), execute=False) for label, over in edges(ch)}
    assert results, f"{cid}: no declared edge to try"
    assert all(code in (0, 2) for code, _ in results.values()), results


@pytest.mark.parametrize("cid", [c for c in chapter_ids() if not trains(get_chapter(c))])
def test_every_edge_within_the_budget_runs_to_a_verdict(cid):
    ch = get_chapter(cid)
    outcomes = {label: try_point(ch, over, BUDGET, execute=not trains(ch)) for label, over in edges(ch)}
    crashed = {label: what for label, (code, what) in outcomes.items() if code not in (0, 2, 3)}
    known = {label for c, label in KNOWN if c == cid}
    assert set(crashed) == known, f"{cid}: exit 1 at declared edges: {crashed} (known: {sorted(known)})"
