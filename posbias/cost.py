"""What a run will cost, before it starts: seconds on one CPU core and peak memory.

Each chapter declares a rough cost model in its front matter, expressions in its parameters (the
safe language of its constraints, :mod:`posbias.chapters`), calibrated from a measured run::

    cost:
      seconds: "20 + 3e-9 * samples * depth * sum(n ** 3 for n in n_grid)"   # one core, nothing stored
      memory_mb: "300 + 16 * samples * depth * sum(n * n for n in n_grid) / 2 ** 20"
      network_step: "0.002 + 0.003 * depth"      # trained chapters: seconds per network and step
      calibration: "default profile: 14 s, 420 MiB peak on one core (AMD family 25)"

The name ``defaults`` is True for the chapter's default parameters, whose expensive results are
committed: ``seconds: "25 if defaults else 25 + 5e-9 * sims * ..."``. A chapter that trains networks
(:data:`posbias.training.CHAPTER_CAMPAIGNS`) adds, for every unit it
reads that is not stored yet (``data/`` or the user cache), its steps times ``network_step`` at the
unit's depth, and to the declared peak the attention maps its largest ensemble holds at the end of
training (:func:`maps_mb`). ``posbias run`` prints the estimate first, asks for ``--yes`` above :data:`LONG_SECONDS`
on a terminal, and refuses a run whose peak exceeds the memory available (:func:`available_mb`).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from .chapters import _FUNCS, Chapter, _compile_rule

__all__ = ["Estimate", "estimate", "available_mb", "human_seconds", "LONG_SECONDS", "CampaignCost",
           "campaign_cost", "cost_frame", "network_step"]

LONG_SECONDS = 3600.0           # above this, `posbias run` asks for --yes on a terminal


@dataclass(frozen=True)
class Estimate:
    """A run's estimated cost: ``seconds`` on one core (training included), ``memory_mb`` peak,
    ``train_seconds`` of it for units not stored yet, ``units_stored`` of ``units`` (0 of 0: no training)."""

    seconds: float
    memory_mb: float
    train_seconds: float = 0.0
    units_stored: int = 0
    units: int = 0
    declared: bool = True

    def describe(self) -> str:
        """One line: ``about 2.1 h on one CPU core (2.0 h training 30 of 45 units not stored), peak 600 MiB``."""
        if not self.declared:
            return "no estimate (the chapter declares no cost model)"
        train = ""
        if self.units:
            missing = self.units - self.units_stored
            nets = "network" if self.units == 1 else "networks"
            train = (f" ({human_seconds(self.train_seconds)} of it training the {missing} of {self.units} "
                     f"{nets} not stored yet)" if missing else f" (all {self.units} {nets} stored)")
        return (f"about {human_seconds(self.seconds)} on one CPU core{train}, "
                f"peak memory about {self.memory_mb:,.0f} MiB")


def human_seconds(s: float) -> str:
    """``45 s``, ``12 min``, ``3.4 h``, ``2.5 days``."""
    if s < 90:
        return f"{s:.0f} s"
    if s < 5400:
        return f"{s / 60:.0f} min"
    if s < 2 * 86400:
        return f"{s / 3600:.1f} h"
    return f"{s / 86400:,.1f} days"


def _eval(chapter: Chapter, key: str, values: dict[str, Any]) -> float:
    """The front matter's ``cost[key]`` at ``values``; the name ``defaults`` is True when the chapter's
    own parameters are its defaults (whose expensive results are committed in ``data/``)."""
    expr = (chapter.meta.get("cost") or {}).get(key)
    if expr is None:
        return 0.0
    own = {k: values[k] for k in chapter.params if k in values}
    defaults = own == {name: p.default for name, p in chapter.params.items()}
    names = {"__builtins__": {}, **_FUNCS, **values, "defaults": defaults}   # globals: generator expressions see them
    return float(eval(_compile_rule(str(expr)), names))  # noqa: S307 - vetted AST


def network_step(chapter: Chapter, params: dict[str, Any]) -> Callable[[int], float] | None:
    """The chapter's ``network_step`` model at ``params``: depth -> seconds per network and training
    step on one core; ``None`` for a chapter that declares none (it trains nothing)."""
    if not (chapter.meta.get("cost") or {}).get("network_step"):
        return None
    return lambda depth: _eval(chapter, "network_step", {**params, "depth": depth})


def _training(chapter: Chapter, params: dict[str, Any]) -> tuple[float, float, int, int]:
    """Seconds to train the units ``chapter`` reads with ``params`` that are not stored, the peak MiB
    of their attention maps (:func:`maps_mb`), and (stored, total) units; zeros for a chapter that
    trains nothing."""
    model = network_step(chapter, params)
    if model is None:
        return 0.0, 0.0, 0, 0
    from .training import campaigns, planning

    experiment, profile, overrides = campaigns.chapter_campaign(chapter.id, params)
    units = campaigns.distinct(campaigns.units_of(experiment, profile, overrides))
    missing = [u for u in units if not campaigns.stored(u)]
    seconds = sum(u.steps * model(u.depth) for u in missing)
    parts = planning.ensembles(missing, planning.auto_members(missing, 1), []) if missing else []
    return seconds, max((maps_mb(p) for p in parts), default=0.0), len(units) - len(missing), len(units)


def maps_mb(part: list[Any]) -> float:
    """MiB an ensemble ``part`` of units holds at the end of training for its attention maps on
    ``n_sink`` sequences (``evaluate.attention_maps``: ``(E, depth, n_sink, T, T)`` float32, built from
    chunks and concatenated, so twice that at once), plus one member's copy for its sink statistics."""
    from .task import TaskConfig

    u, t = part[0], TaskConfig().n_tokens
    return (2 * len(part) + 1) * u.depth * u.n_sink * t * t * 4 / 2 ** 20


def estimate(chapter: Chapter, params: dict[str, Any]) -> Estimate:
    """The cost of running ``chapter`` with the resolved ``params`` (see the module docstring): the
    declared peak memory plus, for a chapter that trains, its largest ensemble's attention maps."""
    train, maps, stored, total = _training(chapter, params)
    return Estimate(_eval(chapter, "seconds", params) + train, _eval(chapter, "memory_mb", params) + maps,
                    train, stored, total, declared=bool(chapter.meta.get("cost")))


def available_mb(meminfo: Path = Path("/proc/meminfo")) -> float | None:
    """The memory available to a new process (``MemAvailable``), in MiB; None where it cannot be read."""
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


@dataclass(frozen=True)
class CampaignCost:
    """What a trained chapter's campaign under ``profile`` has cost so far and has left, in hours of
    one-thread training: ``units`` it needs, ``stored`` of them; ``hours_trained``, measured (the
    ensembles that trained the stored units, each counted once, and the unfinished ensembles'
    checkpoints); ``hours_to_go``, the unfinished ensembles at their latest measured pace and the
    ensembles not started at the pace per network of the campaign's started ensembles of their depth
    (``borrowed`` of them; the machine that trains the campaign, as measured), or else at the
    chapter's ``network_step`` model (``modelled`` of them); ``ensembles`` left in all."""

    chapter: str
    units: int
    stored: int
    hours_trained: float
    hours_to_go: float
    ensembles: int
    modelled: int
    borrowed: int = 0


def campaign_cost(chapter_id: str, profile: str = "paper") -> CampaignCost:
    """:class:`CampaignCost` of ``chapter_id``'s campaign with its ``profile`` parameters; reads
    ``data/``, the user cache and the checkpoints, trains and writes nothing."""
    from . import training
    from .runner import prepare
    from .training import status as st

    chapter, params = prepare(chapter_id, {}, profile)
    experiment, prof, settings = training.chapter_campaign(chapter.id, params)
    status = training.campaign_status(experiment, prof, **settings)
    stored = [r for us in training.stored_campaign(experiment, prof, **settings).values() for r in us
              if r is not None]
    trained = training.training_time(stored).seconds if stored else 0.0
    done, per_net, model = st.measured(status), st.network_pace(status), network_step(chapter, params)
    to_go, modelled, borrowed = 0.0, 0, 0
    for e in done:
        trained += e.wall or 0.0
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
                        len(status.ensembles), modelled, borrowed)


def cost_frame(chapters: list[str], profile: str = "paper"):
    """:func:`campaign_cost` of each chapter as a ``pandas.DataFrame``, one row per chapter, with the
    columns a reader needs: chapter, networks committed / needed, hours trained, hours to go, and
    how the hours to go were found: "measured pace" (each unfinished ensemble's own), "measured pace of
    each depth" (ensembles not started too, at their depth's), "cost model", or "measured pace and
    cost model"."""
    import pandas as pd

    rows = []
    for ch in chapters:
        c = campaign_cost(ch, profile)
        how = ("-" if not c.ensembles else "cost model" if c.modelled == c.ensembles
               else "measured pace and cost model" if c.modelled
               else "measured pace of each depth" if c.borrowed else "measured pace")
        rows.append({"chapter": c.chapter, "networks": f"{c.stored} of {c.units}",
                     "hours trained": c.hours_trained, "hours to go": c.hours_to_go, "to go from": how})
    return pd.DataFrame(rows)
