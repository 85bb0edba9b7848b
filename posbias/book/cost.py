"""What a run will cost, before it starts: seconds on one CPU core and peak memory.

Each chapter declares a rough cost model in its front matter, expressions in its parameters (the
safe language of its constraints, :mod:`posbias.book.chapters`), calibrated from a measured run::

    cost:
      seconds: "20 + 3e-9 * samples * depth * sum(n ** 3 for n in n_grid)"   # one core, nothing stored
      memory_mb: "300 + 16 * samples * depth * sum(n * n for n in n_grid) / 2 ** 20"
      network_step: "0.002 + 0.003 * depth"      # trained chapters: seconds per network and step
      calibration: "default profile: 14 s, 420 MiB peak on one core (AMD family 25)"

The name ``defaults`` is True for the chapter's default parameters, whose expensive results are
committed: ``seconds: "25 if defaults else 25 + 5e-9 * sims * ..."``. A chapter that trains networks
(a declaration in :mod:`posbias.trained`) adds, for every unit it
reads that is not stored yet (``data/`` or the user cache), its steps times ``network_step`` at the
unit's depth, and to the declared peak the attention maps its largest ensemble holds at the end of
training (:func:`maps_mb`). ``posbias run`` prints the estimate first, asks for ``--yes`` above :data:`LONG_SECONDS`
on a terminal, and refuses a run whose peak exceeds the memory available (:func:`available_mb`).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from posbias.book.chapters import RULE_FUNCS, Chapter, compile_rule
from posbias.storage.report import human_seconds

__all__ = ["Estimate", "estimate", "available_mb", "LONG_SECONDS", "network_step"]

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


def _eval(chapter: Chapter, key: str, values: dict[str, Any]) -> float:
    """The front matter's ``cost[key]`` at ``values``; the name ``defaults`` is True when the chapter's
    own parameters are its defaults (whose expensive results are committed in ``data/``)."""
    expr = (chapter.meta.get("cost") or {}).get(key)
    if expr is None:
        return 0.0
    own = {k: values[k] for k in chapter.params if k in values}
    defaults = own == {name: p.default for name, p in chapter.params.items()}
    # globals, so that generator expressions see them
    names = {"__builtins__": {}, **RULE_FUNCS, **values, "defaults": defaults}
    return float(eval(compile_rule(str(expr)), names))  # noqa: S307 - vetted AST


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
    from posbias.training import campaigns, planning  # lazy: posbias.training (torch) costs ~1.5s at import

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
    from posbias.science.task import TaskConfig  # lazy: posbias.science.task (torch) costs ~1.4s at import

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
