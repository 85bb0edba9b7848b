"""Which units a trained chapter reads, under which profile, and what of it is stored.

A chapter's networks are declared once, in ``posbias/trained/<chapter>.py`` (:mod:`posbias.trained`);
their settings are the chapter's parameters, resolved from its front matter's profiles. The driver
(``posbias campaign``), the notebook (:func:`~.engine.run_chapter_campaign`), the status, the cost and
the judge all read them through :func:`units_of`.
"""
from __future__ import annotations

import dataclasses
import json
from typing import Any, Mapping

from posbias.storage import store
from posbias.analysis.budget import admitted
from posbias.book.chapters import get_chapter
from posbias.storage.provenance import uncommitted_sittings, with_summary
from posbias.trained import Config, declaration, fig2_name
from posbias.training.units import TEST_SEED, UNIT_EXPERIMENT, VERSION, Unit, device

__all__ = ["settings", "units_of", "distinct", "chapter_campaign", "budget_study", "admitted_record", "stored",
           "lookup", "lookup_record", "store_unit", "stored_campaign", "store_finished", "fig2_name",
           "stored_provenance", "from_uncommitted_code"]


def settings(chapter: str, profile: str = "paper", **overrides: Any) -> dict[str, Any]:
    """``chapter``'s parameters under ``profile`` (its front matter) with ``overrides``, the page's
    cross-parameter rules left out: what its networks are trained with."""
    return get_chapter(chapter).resolve(profile, overrides, constraints=False)


def _unit(p: Mapping[str, Any], c: Config, seed: int) -> Unit:
    return Unit(c.depth, c.member, c.target_slots, seed, steps=c.steps or p["steps"], eval_every=p["eval_every"],
                n_test=p["n_test"], n_sweep=p["n_sweep"], n_sink=p["n_sink"], stop_rule=c.stop_rule,
                n_heldout=c.n_heldout, test_seed=p.get("test_seed", TEST_SEED))


def units_of(chapter: str, profile: str, overrides: Mapping[str, Any], *, admit: bool = True
             ) -> dict[str, list[Unit]]:
    """The units ``chapter`` reads under ``profile`` with ``overrides`` (its parameters by name), grouped
    by configuration label in the declaration's order, one per seed. With ``admit``, a network whose
    committed record the declaration admits in its place (:func:`admitted_record`) is left out: that
    record is its trajectory. ``KeyError`` for a chapter that trains nothing; ``ParamError`` for a bad
    parameter."""
    decl = declaration(chapter)
    p = settings(chapter, profile, **overrides)
    if decl.reads is not None:
        other, prof, over = decl.reads(p)
        return units_of(other, prof, over, admit=admit)
    out: dict[str, list[Unit]] = {}
    for c in decl.configs(p):
        seeds = list(p["seeds"]) + [s for s in c.more_seeds if s not in p["seeds"]]
        units = [_unit(p, c, s) for s in seeds]
        if admit and decl.admits_from is not None:
            units = [u for u in units if admitted_record(chapter, c.label, u) is None]
        out[c.label] = units
    return out


def admitted_record(chapter: str, label: str, unit: Unit) -> dict[str, Any] | None:
    """The committed record that ``chapter``'s declaration admits in place of ``unit`` (of configuration
    ``label``), or None: the same network trained under the profile ``admits_from`` (the fixed-budget
    study admits the ``converged`` campaign's, the plateau rule capped at 500,000), when
    :func:`posbias.analysis.budget.admitted` accepts it and it ended at ``unit``'s budget."""
    decl = declaration(chapter)
    if decl.admits_from is None:
        return None
    p = settings(chapter, decl.admits_from)
    same = {c.label: c for c in decl.configs(p)}.get(label)
    if same is None:
        return None
    stand_in = dataclasses.replace(unit, steps=same.steps or p["steps"], stop_rule=same.stop_rule, n_heldout=None)
    if stand_in == unit:
        return None
    rec = lookup(stand_in)
    return rec if rec is not None and rec["curves"]["step"][-1] == unit.steps and admitted(rec, unit.depth) else None


def budget_study(profile: str = "budget", **overrides: Any) -> dict[str, list[tuple[int, str, dict[str, Any] | None]]]:
    """The fixed-budget study as stored, read from ``data/`` and the user cache only (never trains):
    label -> one ``(seed, source, record)`` per seed of the design, ``source`` ``"design"`` (trained
    under it), ``"admitted"`` (a committed ``converged`` record it admits, :func:`admitted_record`) or
    ``"not yet"`` (record None)."""
    out: dict[str, list[tuple[int, str, dict[str, Any] | None]]] = {}
    for label, us in units_of("wu-bias-over-training", profile, overrides, admit=False).items():
        rows = []
        for u in us:
            rec = lookup(u)
            adm = None if rec is not None else admitted_record("wu-bias-over-training", label, u)
            rows.append((u.seed, "design", rec) if rec is not None else
                        (u.seed, "admitted", adm) if adm is not None else (u.seed, "not yet", None))
        out[label] = rows
    return out


def distinct(groups: dict[str, list[Unit]]) -> list[Unit]:
    """The units of a campaign's groups, each once (chapters' groups may share units), in order."""
    return list(dict.fromkeys(u for us in groups.values() for u in us))


# --------------------------------------------------------------------------- what is stored
# The device a unit trained on is provenance, not identity: a unit trained on a GPU is stored under
# the key of the same unit trained on the CPU (its provenance names the device), so that a book built
# on a CPU reads units a GPU trained. `posbias check-data` recomputes such records on the CPU and
# compares them within the tolerance stated for records made on other hardware.


def stored(unit: Unit | dict[str, Any]) -> bool:
    """Is ``unit`` (or the unit of these params) in ``data/`` or the user cache?"""
    params = unit.params() if isinstance(unit, Unit) else unit
    return store.is_stored(UNIT_EXPERIMENT, params, version=VERSION)


def lookup(unit: Unit) -> dict[str, Any] | None:
    """The stored result of ``unit``, or None; never trains."""
    return store.lookup(UNIT_EXPERIMENT, unit.params(), version=VERSION)


def lookup_record(unit: Unit) -> dict[str, Any] | None:
    """The whole stored record of ``unit`` (its provenance with it), or None; never trains."""
    return store.lookup_record(UNIT_EXPERIMENT, unit.params(), version=VERSION)


_PROVENANCES: dict[tuple[str, int, int], dict[str, Any]] = {}


def stored_provenance(result: Mapping[str, Any]) -> dict[str, Any] | None:
    """The provenance of the stored record a unit's ``result`` came from (``data/``, else the user cache),
    found by the ``params`` the result carries; None where there are none or no record. Read without
    noting a read (the result itself was read already) and once per version of the file."""
    params = result.get("params") if isinstance(result, Mapping) else None
    if not isinstance(params, dict):
        return None
    name = store.result_name(UNIT_EXPERIMENT, params, VERSION)
    for path in (store.DATA / name, store.cache_dir() / name):
        try:
            st = path.stat()
        except OSError:
            continue
        key = (str(path), st.st_size, st.st_mtime_ns)
        if key not in _PROVENANCES:
            try:
                _PROVENANCES[key] = json.loads(path.read_text()).get("provenance") or {}
            except (OSError, ValueError):
                return None
        return _PROVENANCES[key]
    return None


def from_uncommitted_code(result: Mapping[str, Any]) -> bool:
    """Did the unit of ``result`` train partly from uncommitted code: does a sitting of its stored record
    (:func:`~posbias.storage.provenance.uncommitted_sittings`) say its tree had uncommitted changes?"""
    prov = stored_provenance(result)
    return bool(prov and uncommitted_sittings(prov))


def store_unit(unit: Unit, result: dict[str, Any] | None, sittings: list[dict[str, Any]] | None = None
               ) -> dict[str, Any]:
    """Store ``result`` (fresh from training; None: it must be stored already) as ``unit``'s record, its
    provenance its sittings and their summary (:func:`~posbias.storage.provenance.with_summary`; without sittings,
    the device this process trains on); returns the stored result."""
    def fresh() -> dict[str, Any]:
        if result is None:
            raise RuntimeError(f"unit {unit} is neither stored nor trained")
        return result

    # The summary is derived from the sittings (the processes that trained it: Dask workers, maybe on other
    # machines and devices), never from the storing process's (a campaign driver trains nothing): each of its
    # fields is their common value or "mixed" with the list (provenance.summary, issue 95).
    extra = None if result is None else with_summary({"device": str(device())}, sittings or [])
    return store.cached(UNIT_EXPERIMENT, unit.params(), fresh, version=VERSION, seeds=[unit.seed],
                        wall_seconds=None if result is None else result["train_seconds_ensemble"],
                        extra_provenance=extra)


def stored_campaign(experiment: str, profile: str = "paper",
                    **overrides: Any) -> dict[str, list[dict[str, Any] | None]]:
    """What :func:`~.engine.run_campaign` would return, read from ``data/`` and the user cache only:
    label -> one result per seed, ``None`` where that unit has not been trained. Never trains."""
    return {label: [lookup(u) for u in us] for label, us in units_of(experiment, profile, overrides).items()}


def stored_records(experiment: str, profile: str = "paper",
                   **overrides: Any) -> dict[str, list[dict[str, Any] | None]]:
    """:func:`stored_campaign` with each unit's whole record (its provenance with it) for its result."""
    return {label: [lookup_record(u) for u in us] for label, us in units_of(experiment, profile, overrides).items()}


def store_finished(experiment: str, profile: str = "paper", **overrides: Any) -> tuple[int, int]:
    """Pass every finished unit of a campaign through ``store.cached`` and train nothing; returns
    ``(finished, missing)``. With ``POSBIAS_WRITE_DATA=1`` this commits finished units from the user
    cache to ``data/`` unchanged (``posbias campaign CHAPTER --no-train --write-data``), so a campaign
    spread over several sittings can be committed part by part."""
    units = distinct(units_of(experiment, profile, overrides))
    done = [u for u in units if lookup(u) is not None]
    for u in done:
        store_unit(u, None)
    return len(done), len(units) - len(done)


# --------------------------------------------------------------------------- chapters' campaigns

def chapter_campaign(chapter: str, params: Mapping[str, Any]) -> tuple[str, str, dict[str, Any]]:
    """``(chapter, profile, overrides)`` of the networks ``chapter`` reads with ``params``, for
    :func:`units_of`: its own, or those of the chapter its declaration ``reads``.

    ``params`` holds (at least) the chapter's parameters by name, e.g. its resolved parameters or a
    notebook's ``globals()``. Raises ``KeyError`` for a chapter that trains no networks.
    """
    decl = declaration(chapter)
    own = {name: params[name] for name in get_chapter(chapter).params}
    if decl.reads is not None:
        return decl.reads(settings(chapter, "default", **own))
    return chapter, "default", own
