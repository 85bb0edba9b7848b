"""The registry of recomputations that ``posbias check-data`` runs: experiment -> how to recompute one
stored record of it and how close the fresh result must come.

The module that computes an experiment registers it (``@recomputable("kim-sim", ...)`` on the very
function whose output :func:`posbias.storage.store.cached` stores); :mod:`posbias.book.checkdata` imports those
modules and recomputes a sample of the committed records.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

__all__ = ["Recompute", "RECOMPUTE", "recomputable"]


@dataclass(frozen=True)
class Recompute:
    """How ``posbias check-data`` recomputes a stored record of one experiment and compares it.

    ``fn(params) -> result`` must call the very function whose output ``store.cached`` stored.
    A fresh number ``f`` agrees with the stored ``s`` when ``|f - s| <= atol + rtol |s|`` (both zero:
    bit-identical); non-numbers must be equal, shapes and keys must match. ``ignore`` names top-level
    result keys that are measurements of the run, not results (wall times, memory, ensemble size).
    ``cost(record)`` estimates the seconds a recomputation takes (default: the stored wall time).

    The tolerance holds on the CPU that computed the record (its provenance's ``cpu``). Another
    processor may dispatch other vector kernels and round differently, so a record computed on another
    CPU, or on one its provenance does not name, is compared within ``other_cpu_atol`` /
    ``other_cpu_rtol`` (None: the same tolerance), explained by ``other_cpu_note``.
    """

    fn: Callable[[dict[str, Any]], dict[str, Any]]
    atol: float = 0.0
    rtol: float = 0.0
    ignore: tuple[str, ...] = ()
    cost: Callable[[dict[str, Any]], float] | None = None
    tolerance_note: str = ""
    other_cpu_atol: float | None = None
    other_cpu_rtol: float = 0.0
    other_cpu_note: str = ""

    def across_cpus(self) -> "Recompute":
        """This recomputation with the tolerance for a record from another (or an unnamed) CPU."""
        if self.other_cpu_atol is None:
            return self
        return dataclasses.replace(self, atol=self.other_cpu_atol, rtol=self.other_cpu_rtol,
                                   tolerance_note=self.other_cpu_note)

    def __call__(self, params: dict[str, Any]) -> dict[str, Any]:
        return self.fn(params)

    def estimate(self, record: dict[str, Any]) -> float:
        """Estimated seconds to recompute ``record``."""
        if self.cost is not None:
            return float(self.cost(record))
        return float(record.get("provenance", {}).get("wall_seconds") or 0.0)


RECOMPUTE: dict[str, Recompute] = {}


def recomputable(experiment: str, *, atol: float = 0.0, rtol: float = 0.0, ignore: tuple[str, ...] = (),
                 cost: Callable[[dict[str, Any]], float] | None = None, tolerance_note: str = "",
                 other_cpu_atol: float | None = None, other_cpu_rtol: float = 0.0, other_cpu_note: str = ""):
    """Register ``fn(params) -> result`` as the way to recompute ``experiment`` (used by check-data).

    Returns ``fn`` unchanged; see :class:`Recompute` for the tolerances and the other options.
    """
    def deco(fn):
        RECOMPUTE[experiment] = Recompute(fn, float(atol), float(rtol), tuple(ignore), cost, tolerance_note,
                                          other_cpu_atol, float(other_cpu_rtol), other_cpu_note)
        return fn
    return deco
