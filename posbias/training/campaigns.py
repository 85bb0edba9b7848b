"""Which units each chapter's campaign trains, under which profile, and what of it is stored.

The settings of the profiles (:data:`PROFILES`) repeat the trained chapters' front matter, which is
their one source: ``tests/test_training.py`` fails when the two disagree.
"""
from __future__ import annotations

import json
from typing import Any, Callable, Mapping

from .. import store
from ..budget import admitted
from ..model import MemberConfig
from ..task import TaskConfig, slot_index
from .units import CONFIRM_TEST_SEED, TEST_SEED, UNIT_EXPERIMENT, VERSION, Unit, device

#: Training settings of the profiles; chapters may override ``seeds`` and ``steps``.
PROFILES: dict[str, dict[str, Any]] = {
    "smoke": {"steps": 20, "seeds": [0], "eval_every": 10, "n_test": 64, "n_sweep": 32, "n_sink": 32},
    "default": {"steps": 1000, "seeds": [0, 1, 2, 3, 4], "eval_every": 250, "n_test": 2000, "n_sweep": 500,
                "n_sink": 500},
    "paper": {"steps": 100_000, "seeds": [0, 1, 2, 3, 4], "eval_every": 5000, "n_test": 10000,
              "n_sweep": 2000, "n_sink": 10000},
    # the paper's settings, trained until the stopping rule holds, at most `steps` (the cap)
    "converged": {"steps": 500_000, "seeds": [0, 1, 2, 3, 4], "eval_every": 5000, "n_test": 10000,
                  "n_sweep": 2000, "n_sink": 10000, "stop_rule": "plateau-50k"},
    # the fixed-budget study (posbias.budget.DESIGN): every network trains exactly its depth's budget
    "budget": {"steps": 500_000, "steps_deep": 300_000, "seeds": [0, 1, 2, 3, 4], "wide_configs": ["decay|2"],
               "wide_seeds": [5, 6, 7, 8, 9], "eval_every": 5000, "n_test": 10000, "n_sweep": 2000,
               "n_sink": 10000, "n_heldout": 10000},
    # the confirmation campaign (issue 68): the paper's settings on fresh seeds and a fresh test draw,
    # judged by the register as frozen before any of its networks trained (claims.FROZEN)
    "confirm": {"steps": 100_000, "seeds": [5, 6, 7, 8, 9], "eval_every": 5000, "n_test": 10000,
                "n_sweep": 2000, "n_sink": 10000, "test_seed": CONFIRM_TEST_SEED},
}

#: The configurations of the ``budget`` study, in the order it trains them: the decay mask at depth 2,
#: whose outcome splits; No PE and RoPE at depth 2; No PE and RoPE at depth 6.
BUDGET_CONFIGS = ("decay|2", "No PE|2", "RoPE|2", "No PE|6", "RoPE|6")

#: The Figure 2 configurations of the ``converged`` campaign, in the order it trains them: the decay mask
#: at depth 2, whose bias still moves; No PE and RoPE at depth 6, the networks the depth claims rest on;
#: No PE and RoPE at depth 2, without which no depth-2 claim (the decay mask's included) and no depth
#: claim can be judged at convergence; then at depth 4.
CONVERGED_CONFIGS = ("decay|2", "No PE|6", "RoPE|6", "No PE|2", "RoPE|2", "No PE|4", "RoPE|4")

FIG2_PES = (("causal", "none"), ("decay", "none"), ("causal", "rope"))
FIG3_CONFIGS = tuple((m, p) for m in ("full", "causal") for p in ("none", "sin", "rope"))


def fig2_name(mask: str, pe: str) -> str:
    """The name Figure 2 gives the architecture ``(mask, pe)`` of :data:`FIG2_PES`: No PE, decay or RoPE."""
    return "decay" if mask == "decay" else ("RoPE" if pe == "rope" else "No PE")


def campaign_units(experiment: str, *, steps: int, seeds: list[int], eval_every: int, n_test: int,
                   n_sweep: int, n_sink: int, depths: list[int] | None = None,
                   windows: list[int] | None = None, prefixes: list[int] | None = None,
                   configs: list[str] | None = None, stop_rule: str | None = None,
                   steps_deep: int | None = None, wide_configs: list[str] | None = None,
                   wide_seeds: list[int] | None = None, n_heldout: int | None = None,
                   admit: bool = True, test_seed: int = TEST_SEED) -> dict[str, list[Unit]]:
    """The units of a chapter's campaign, grouped by the label of their configuration.

    ``wu-fig-2``: unbiased data, no residual, depths x (causal No PE, decay, causal RoPE).
    ``wu-fig-3``: targets at first or last, 2 layers with residual, masks full/causal x PEs none/sin/rope.
    ``wu-fig-4``: the same six architectures with targets at first, middle or last only.
    ``wu-fig-5``: 2 layers, causal, No PE, no residual, unbiased (shared with ``wu-fig-2``).
    ``wu-fig-6``: unbiased, causal / windows / prefixes, No PE, no residual, ``depths[0]`` layers.
    ``wu-residual-depth``: unbiased, with residual, depths x (causal No PE, decay, causal RoPE).
    ``wu-converged``: Figure 2's networks of ``configs`` (labels ``"<name>|<depth>"``, default
    :data:`CONVERGED_CONFIGS`), each trained alone until ``stop_rule`` holds, ``steps`` at most.
    ``wu-budget``: Figure 2's networks of ``configs`` (default :data:`BUDGET_CONFIGS`), each trained
    exactly ``steps`` (depth below 6) or ``steps_deep`` (depth 6 and more) with a held-out set of
    ``n_heldout`` sequences; seeds ``seeds``, and ``wide_seeds`` as well for ``wide_configs``. With
    ``admit``, a (configuration, seed) whose committed ``converged`` record the design admits
    (:func:`posbias.budget.admitted`) is left out: that record is its trajectory.
    ``test_seed``: the test draw of every unit (:data:`TEST_SEED`, or the confirmation campaign's
    :data:`CONFIRM_TEST_SEED`; the budget and converged studies keep the fixed one).
    """
    common = dict(steps=steps, eval_every=eval_every, n_test=n_test, n_sweep=n_sweep, n_sink=n_sink,
                  stop_rule=stop_rule, test_seed=test_seed)
    if test_seed != TEST_SEED and experiment in ("wu-converged", "wu-budget"):
        raise ValueError(f"{experiment} extends the exploratory networks and reads them on the fixed test draw "
                         f"(test_seed {TEST_SEED}); got {test_seed}")
    N = TaskConfig().n_items
    out: dict[str, list[Unit]] = {}

    def add(label: str, depth: int, cfg: MemberConfig, slots) -> None:
        out[label] = [Unit(depth, cfg, slots, s, **common) for s in seeds]

    if experiment in ("wu-fig-2", "wu-residual-depth"):
        res = experiment == "wu-residual-depth"
        for d in depths or ([2, 4, 6] if not res else [2, 6, 10]):
            for mask, pe in FIG2_PES:
                add(f"{fig2_name(mask, pe)}|{d}", d, MemberConfig(mask, pe, residual=res), None)
    elif experiment == "wu-converged":
        names = {fig2_name(m, p): (m, p) for m, p in FIG2_PES}
        for label in configs or CONVERGED_CONFIGS:
            name, _, d = label.partition("|")
            if name not in names or not d.isdigit():
                raise ValueError(f"configuration {label!r}: give '<{'|'.join(names)}>|<depth>'")
            mask, pe = names[name]
            add(label, int(d), MemberConfig(mask, pe), None)
    elif experiment == "wu-budget":
        names = {fig2_name(m, p): (m, p) for m, p in FIG2_PES}
        for label in configs or BUDGET_CONFIGS:
            name, _, d = label.partition("|")
            if name not in names or not d.isdigit():
                raise ValueError(f"configuration {label!r}: give '<{'|'.join(names)}>|<depth>'")
            mask, pe = names[name]
            depth = int(d)
            n = steps if depth < 6 or steps_deep is None else steps_deep
            ss = list(seeds) + [s for s in (wide_seeds or []) if label in (wide_configs or []) and s not in seeds]
            if admit:
                ss = [s for s in ss if admitted_record(label, s, n, eval_every, n_test, n_sweep, n_sink) is None]
            out[label] = [Unit(depth, MemberConfig(mask, pe), None, s, steps=n, eval_every=eval_every,
                               n_test=n_test, n_sweep=n_sweep, n_sink=n_sink, n_heldout=n_heldout) for s in ss]
    elif experiment == "wu-fig-3":
        for mask, pe in FIG3_CONFIGS:
            add(f"{mask}|{pe}", 2, MemberConfig(mask, pe, residual=True), (0, N - 1))
    elif experiment == "wu-fig-4":
        for where in ("first", "middle", "last"):
            for mask, pe in FIG3_CONFIGS:
                add(f"{where}|{mask}|{pe}", 2, MemberConfig(mask, pe, residual=True), (slot_index(where, N),))
    elif experiment == "wu-fig-5":
        add("causal|none", (depths or [2])[0], MemberConfig("causal", "none"), None)
    elif experiment == "wu-fig-6":
        d = (depths or [2])[0]
        add("causal", d, MemberConfig("causal", "none"), None)
        for w in windows or [4, 8, 12]:
            add(f"window|{w}", d, MemberConfig("window", "none", window=w), None)
        for k in prefixes or [2, 4, 8]:
            add(f"prefix|{k}", d, MemberConfig("prefix", "none", prefix=k), None)
    else:
        raise ValueError(f"unknown experiment {experiment!r}")
    return out


def admitted_record(label: str, seed: int, steps: int, eval_every: int, n_test: int, n_sweep: int,
                    n_sink: int) -> dict[str, Any] | None:
    """The committed record of the ``converged`` campaign (the plateau rule, capped at 500,000) of
    ``label`` and ``seed`` under these evaluation settings that the budget design admits as the
    trajectory of a network trained exactly ``steps`` (:func:`posbias.budget.admitted`), or None."""
    name, _, d = label.partition("|")
    names = {fig2_name(m, p): (m, p) for m, p in FIG2_PES}
    if name not in names or not d.isdigit():
        return None
    mask, pe = names[name]
    unit = Unit(int(d), MemberConfig(mask, pe), None, seed, steps=PROFILES["converged"]["steps"],
                eval_every=eval_every, n_test=n_test, n_sweep=n_sweep, n_sink=n_sink,
                stop_rule=PROFILES["converged"]["stop_rule"])
    rec = lookup(unit)
    return rec if rec is not None and int(d) in (2, 6) and rec["curves"]["step"][-1] == steps \
        and admitted(rec, int(d)) \
        else None


def budget_study(profile: str = "budget", **overrides: Any) -> dict[str, list[tuple[int, str, dict[str, Any] | None]]]:
    """The fixed-budget study as stored, read from ``data/`` and the user cache only (never trains):
    label -> one ``(seed, source, record)`` per seed of the design, ``source`` ``"design"`` (trained
    under it), ``"admitted"`` (a committed ``converged`` record it admits, :func:`admitted_record`) or
    ``"not yet"`` (record None)."""
    settings = {**PROFILES[profile], **overrides, "admit": False}
    out: dict[str, list[tuple[int, str, dict[str, Any] | None]]] = {}
    for label, us in campaign_units("wu-budget", **settings).items():
        rows = []
        for u in us:
            rec = lookup(u)
            adm = None if rec is not None else admitted_record(label, u.seed, u.steps, u.eval_every, u.n_test,
                                                               u.n_sweep, u.n_sink)
            rows.append((u.seed, "design", rec) if rec is not None else
                        (u.seed, "admitted", adm) if adm is not None else (u.seed, "not yet", None))
        out[label] = rows
    return out


def units_of(experiment: str, profile: str, overrides: Mapping[str, Any]) -> dict[str, list[Unit]]:
    """:func:`campaign_units` of ``experiment`` under ``profile``'s settings with ``overrides``."""
    return campaign_units(experiment, **{**PROFILES[profile], **overrides})


def distinct(groups: dict[str, list[Unit]]) -> list[Unit]:
    """The units of a campaign's groups, each once (chapters' groups may share units), in order."""
    return list(dict.fromkeys(u for us in groups.values() for u in us))


# --------------------------------------------------------------------------- what is stored
# The device a unit trained on is provenance, not identity: a unit trained on a GPU is stored under
# the key of the same unit trained on the CPU (its provenance names the device), so that a book built
# on a CPU reads units a GPU trained. `posbias check-data` recomputes such records on the CPU and
# compares them within the tolerance stated for records made on other hardware.

_WHERE = ("device_name", "machine", "cpu", "cpu_count", "torch_threads")


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


def store_unit(unit: Unit, result: dict[str, Any] | None, sittings: list[dict[str, Any]] | None = None
               ) -> dict[str, Any]:
    """Store ``result`` (fresh from training; None: it must be stored already) as ``unit``'s record, its
    provenance naming the device it trained on and its sittings; returns the stored result."""
    def fresh() -> dict[str, Any]:
        if result is None:
            raise RuntimeError(f"unit {unit} is neither stored nor trained")
        return result

    last = (sittings or [{}])[-1]       # the process that finished it: a Dask worker, maybe on another machine
    kinds = [json.dumps(s.get("numerics"), sort_keys=True) for s in sittings or [] if "numerics" in s]
    extra = None if result is None else {
        "device": last.get("device") or str(device()),
        **{k: last[k] for k in _WHERE if k in last}, **({"sittings": sittings} if sittings else {}),
        # the training's numerics, never the storing process's (a campaign driver trains nothing)
        "numerics": last.get("numerics"),
        # the numerics name a unit's bits only where every sitting trained under the same ones
        **({"numerics_uniform": len(set(kinds)) == 1 and len(kinds) == len(sittings or [])} if kinds else {})}
    return store.cached(UNIT_EXPERIMENT, unit.params(), fresh, version=VERSION, seeds=[unit.seed],
                        wall_seconds=None if result is None else result["train_seconds_ensemble"],
                        extra_provenance=extra)


def stored_campaign(experiment: str, profile: str = "paper",
                    **overrides: Any) -> dict[str, list[dict[str, Any] | None]]:
    """What :func:`~.engine.run_campaign` would return, read from ``data/`` and the user cache only:
    label -> one result per seed, ``None`` where that unit has not been trained. Never trains."""
    return {label: [lookup(u) for u in us] for label, us in units_of(experiment, profile, overrides).items()}


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

_SETTINGS = ("steps", "seeds", "eval_every", "n_test", "n_sweep", "n_sink")


def _settings(p: Mapping[str, Any]) -> dict[str, Any]:
    """The training settings every trained chapter declares, and the test draw where it declares one."""
    return {k: p[k] for k in _SETTINGS} | ({"test_seed": p["test_seed"]} if "test_seed" in p else {})


def _converged(p: Mapping[str, Any]) -> tuple[str, str, dict[str, Any]]:
    """The chapter's networks: under a stopping rule the earlier ``converged`` campaign; with
    ``stop_rule`` none the fixed-budget study (``wu-budget``)."""
    if p["stop_rule"] != "none":
        return "wu-converged", "default", {"configs": list(p["configs"]), "stop_rule": p["stop_rule"], **_settings(p)}
    return "wu-budget", "default", {"configs": list(p["configs"]), "steps_deep": p["steps_deep"],
                                    "wide_configs": list(p["wide_configs"]), "wide_seeds": list(p["wide_seeds"]),
                                    "n_heldout": p["n_heldout"], **_settings(p)}


def _fig2(p: Mapping[str, Any]) -> tuple[str, str, dict[str, Any]]:
    return "wu-fig-2", "default", {"depths": list(p["depths"]), **_settings(p)}


def _residual(p: Mapping[str, Any]) -> tuple[str, str, dict[str, Any]]:
    return "wu-residual-depth", "default", {"depths": list(p["depths"]), **_settings(p)}


def _fig3(p: Mapping[str, Any]) -> tuple[str, str, dict[str, Any]]:
    return "wu-fig-3", "default", _settings(p)


def _fig4(p: Mapping[str, Any]) -> tuple[str, str, dict[str, Any]]:
    return "wu-fig-4", "default", _settings(p)


def _fig5(p: Mapping[str, Any]) -> tuple[str, str, dict[str, Any]]:
    return "wu-fig-5", "default", {"depths": [p["depth"]], **_settings(p)}


def _fig6(p: Mapping[str, Any]) -> tuple[str, str, dict[str, Any]]:
    return "wu-fig-6", "default", {"depths": [p["depth"]], "windows": list(p["windows"]),
                                   "prefixes": list(p["prefixes"]), **_settings(p)}


def _synthetic(p: Mapping[str, Any]) -> tuple[str, str, dict[str, Any]]:
    """The toy networks of wu-fig-6 under the settings of the profile named by ``campaign``."""
    return "wu-fig-6", p["campaign"], {"depths": [p["depth"]], "windows": list(p["windows"]),
                                       "prefixes": list(p["prefixes"]), "seeds": list(p["toy_seeds"])}


#: Chapter id -> ``params -> (experiment, profile, overrides)``: the one place that says which
#: units a chapter with given parameters reads. ``posbias campaign`` trains them; a chapter calls
#: :func:`~.engine.run_chapter_campaign` to read them.
CHAPTER_CAMPAIGNS: dict[str, Callable[[Mapping[str, Any]], tuple[str, str, dict[str, Any]]]] = {
    "wu-fig-2": _fig2, "wu-residual-depth": _residual, "wu-fig-3": _fig3, "wu-fig-4": _fig4,
    "wu-fig-5": _fig5, "wu-fig-6": _fig6, "sinks-synthetic-vs-real": _synthetic,
    "wu-bias-over-training": _converged,
}


def chapter_campaign(chapter: str, params: Mapping[str, Any]) -> tuple[str, str, dict[str, Any]]:
    """``(experiment, profile, overrides)`` of the campaign ``chapter`` reads with ``params``.

    ``params`` holds (at least) the chapter's parameters by name, e.g. its resolved parameters or a
    notebook's ``globals()``. Raises ``KeyError`` for a chapter that trains no networks.
    """
    if chapter not in CHAPTER_CAMPAIGNS:
        raise KeyError(f"chapter {chapter!r} trains no networks; chapters with a campaign: "
                       + ", ".join(CHAPTER_CAMPAIGNS))
    return CHAPTER_CAMPAIGNS[chapter](params)
