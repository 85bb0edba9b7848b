"""What the pages say about the mutation suite: the committed kill table (``data/mutants/teeth.json``, written
by ``tests/test_mutations.py``) and mutmut's committed runs (``data/mutants/mutmut*.json``). Run records live
with the data, not among the pages. Read-only: the engine that measures them is :mod:`posbias.book.mutation`."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

from posbias.storage.provenance import ROOT

__all__ = ["TEETH_PATH", "SAMPLES", "CORE_RUN", "read_teeth", "mutmut_frame", "sample_result", "sample_runs",
           "core_result"]

TEETH_PATH = ROOT / "data" / "mutants" / "teeth.json"

# The Makefile's samples of mutmut's mutants, in the order they were declared (each drawn from the mutants
# no earlier one drew): make target -> committed result in data/mutants/.
SAMPLES: dict[str, str] = {"mutants": "mutmut-400.json", "mutants-2": "mutmut-2.json",
                           "mutants-3": "mutmut-3.json", "mutants-4": "mutmut-4.json"}
#: ``make mutants-core``'s run (issue 96): every mutant of the science core, no sample, committed in data/mutants/.
CORE_RUN = "mutmut-core.json"


def read_teeth(path: Path = TEETH_PATH) -> dict[str, Any] | None:
    """The committed kill table (``data/mutants/teeth.json``), or None where it does not exist."""
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else None


def mutmut_frame(path: Path | None = None):
    """``make mutants``' committed run (``data/mutants/mutmut.json``) as ``(summary, survivors)``: the summary
    dict (date, machine, generated, tested, killed, score, wall_seconds, command) and a
    ``pandas.DataFrame`` with one row per surviving mutant: its name, its diff's changed lines, and
    why it survives (equivalent for the checks), which unit test now kills it, or that the code it changed
    is gone. None when absent."""
    import pandas as pd

    path = path or TEETH_PATH.with_name("mutmut.json")
    if not path.exists():
        return None
    d = json.loads(path.read_text(encoding="utf-8"))
    again = {name: r["status"] for run in d.get("reruns", []) for name, r in run["mutants"].items()}   # latest
    rows = []
    for name, diff in d["survivors"].items():
        change = " / ".join(ln[1:].strip() for ln in diff.splitlines()
                            if ln[:1] in "+-" and not ln.startswith(("+++", "---")))
        rows.append({"mutant": name, "change": change, "status": _why(d, name, again.get(name))})
    frame = pd.DataFrame(rows, columns=["mutant", "change", "status"])          # no survivors: no rows
    return {k: v for k, v in d.items() if not isinstance(v, dict) and k != "reruns"}, frame


def sample_result(path: Path, target: float, shown: str) -> str:
    """A later sample's run and triage in one sentence (the reproduction notes glue it): killed of tested,
    date, machine, commit, score with its 95% interval against ``target``, and what became of each
    survivor; ``shown`` is the file's name as the page prints it. "not run yet" when ``path`` is absent."""
    got = mutmut_frame(path)
    if got is None:
        return f"not run yet (`{shown}` is absent)"
    m, s = got
    n = standing_counts(s["status"])
    return (f"{m['killed']} of {m['tested']} killed ({m['date']}, {m['machine']}, sources and tests of "
            f"{m['commit']}), a score of {m['score']:.3f} with a 95% interval of "
            "{:.3f} to {:.3f}, ".format(*m["score_95"])
            + f"{'at or above' if m['score'] >= target else 'short of'} the {target:.0%} asked for"
            + (" (its interval reaches below it: the run does not exclude a true score under the bar)"
               if m["score"] >= target > m["score_95"][0] else "") + ". Of its "
            f"{len(s)} survivors, triaged after the run, {n['unit']} are killed since by new tests (each "
            f"confirmed by mutmut run again), {n['equivalent']} argued equivalent and {n['open']} not explained "
            f"(`{shown}`)")


#: How a survivor stands after its run: the count's name -> the start of the status :func:`_why` words.
STANDINGS: dict[str, str] = {"unit": "killed since", "equivalent": "equivalent", "removed": "code removed",
                             "open": "not explained"}


#: How a kill that ``tests/mutmut_run.py --rerun`` confirmed ends its standing.
_CONFIRMED = " (mutmut, run again: killed)"


def standing_counts(statuses: Iterable[str]) -> dict[str, int]:
    """How many of a run's survivors stand each way (``statuses`` as :func:`mutmut_frame` words them):
    ``unit`` (killed since by a unit test), ``equivalent``, ``removed`` (its code is gone) and ``open``
    (not explained), in the order of :data:`STANDINGS`."""
    statuses = list(statuses)
    return {key: sum(s.startswith(start) for s in statuses) for key, start in STANDINGS.items()}


def _why(d: dict, name: str, rerun: str | None) -> str:
    """A survivor's standing after the run: equivalent (argued), killed since (a named test, and mutmut's
    own verdict on today's code where ``tests/mutmut_run.py --rerun`` gave one), its code removed, or not
    explained. A kill that mutmut, run again, does not confirm is not counted as one."""
    if name in d.get("equivalent", {}):
        return f"equivalent: {d['equivalent'][name]}"
    if name in d.get("removed", {}) and rerun in (None, "code removed"):
        return f"code removed since: {d['removed'][name]}"
    if name in d.get("killed_by_unit_tests", {}):
        test = d["killed_by_unit_tests"][name]
        if rerun in (None, "killed", "timeout"):
            return f"killed since: {test}" + (_CONFIRMED if rerun else "")
        return f"not explained: mutmut, run again, says {rerun} (expected {test} to kill it)"
    return "not explained"


def sample_runs(book: Path = TEETH_PATH.parent) -> list[tuple[str, dict[str, Any]]]:
    """``(make target, summary)`` of every declared sample whose result is committed in ``book``, in the
    order declared; the summary as :func:`mutmut_frame` gives it, plus ``has_reach`` (whether the file
    says which chapters' smoke runs reach its mutants)."""
    out = []
    for target, name in SAMPLES.items():
        got = mutmut_frame(book / name)
        if got is not None:
            reach = bool(json.loads((book / name).read_text(encoding="utf-8")).get("reach"))
            out.append((target, {**got[0], "has_reach": reach}))
    return out


def sampled_by_chapter(path: Path | None = None) -> tuple[dict[str, Any], dict[str, dict[str, int]]] | None:
    """A sample's run (``path``; default the first sample, ``data/mutants/mutmut-400.json``) as the Status page
    shows it: the run's summary (score, interval, seed) and, per chapter whose smoke run reaches sampled
    mutants (``reach``), ``reached``, ``survived`` (the run's whole test let them live) and, of those, their
    :func:`standing_counts`. None when absent.
    Kills are the whole test's (the chapters' checks and the unit tests together), not one chapter's."""
    path = path or TEETH_PATH.with_name("mutmut-400.json")
    framed = mutmut_frame(path)
    if framed is None:
        return None
    summary, frame = framed
    status = dict(zip(frame["mutant"], frame["status"])) if len(frame) else {}
    reach = json.loads(path.read_text(encoding="utf-8")).get("reach", {})
    out = {}
    for chapter, names in reach.items():
        lived = [status[n] for n in names if n in status]
        out[chapter] = {"reached": len(names), "survived": len(lived), **standing_counts(lived)}
    return summary, out


def _triage_words(statuses: Iterable[str]) -> str:
    """What became of a run's survivors, in words: killed since (and how many of those kills mutmut, run again,
    has confirmed), argued equivalent, in code that has since left the core or changed, not explained."""
    statuses = list(statuses)
    n = standing_counts(statuses)
    confirmed = sum(st.startswith(STANDINGS["unit"]) and st.endswith(_CONFIRMED) for st in statuses)
    waiting = f", {n['unit'] - confirmed} of them not yet confirmed by mutmut run again" if n["unit"] > confirmed \
        else (" (each confirmed by mutmut run again)" if n["unit"] else "")
    return (f"{n['unit']} are killed since by new tests{waiting}, {n['equivalent']} argued equivalent, "
            f"{n['removed']} in code that has since left the core or changed and {n['open']} not explained")


def core_result(path: Path | None = None, shown: str = f"data/mutants/{CORE_RUN}") -> str:
    """``make mutants-core``'s run in one sentence (the Status page and the reproduction notes print it): while
    unfinished, how many of the core's mutants it has tested and its count so far, and, once any survivor of the
    committed sittings is triaged, what became of them; once every mutant is tested, the score with its 95%
    interval and what became of each survivor. "not run yet" when ``path`` (default ``data/mutants/mutmut-core.json``)
    is absent. Survivors are read only from a committed record of the sittings that found them."""
    path = path or TEETH_PATH.with_name(CORE_RUN)
    got = mutmut_frame(path)
    if got is None:
        return f"not run yet (`{shown}` is absent)"
    m, s = got
    where = (f"{len(m.get('sittings', []))} sitting(s), {m['wall_seconds']:,} s on {m.get('jobs', 1)} core(s), "
             f"{m['machine']}, sources and tests of {m['commit']}")
    if m["tested"] < m["generated"]:
        rate = f", {m['killed'] / m['tested']:.3f} of those" if m["tested"] else ""
        triaged = any(not st.startswith(STANDINGS["open"]) for st in s["status"])
        then = (f"; of the {len(s)} survivors of those sittings, triaged from their committed record, "
                f"{_triage_words(s['status'])}" if triaged else ", and no survivor is triaged yet")
        return (f"{m['tested']:,} of the core's {m['generated']:,} mutants tested so far ({where}): {m['killed']:,} "
                f"killed{rate}; the run is not finished{then} (`{shown}`)")
    return (f"all {m['generated']:,} of the core's mutants tested ({where}): {m['killed']:,} killed, a score of "
            f"{m['score']:.3f} with a 95% interval of " + "{:.3f} to {:.3f}".format(*m["score_95"])
            + f". Of its {len(s)} survivors, each read only from a committed record of the sitting that found it, "
            f"{_triage_words(s['status'])} (`{shown}`)")
