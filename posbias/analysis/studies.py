"""Studies beyond the paper: what the book measures where the paper's text makes no claim.

The residual-depth study trains Figure 2's three architectures with the residual connection. The
paper's text says nothing about residual networks, so the claim register (:mod:`posbias.analysis.claims`)
judges nothing there; this module describes what is measured: how the gap between two slots changes
with depth, per architecture, paired by seed, with its standard error, and sentences that say so
from the numbers. "Beyond its noise" means beyond Student's t critical value at ``level`` (the
register's judge uses 0.05): a description of the measurement, not a verdict on a claim.

``results`` is a Figure-2-shaped campaign's stored units, ``f"{pe}|{depth}"`` -> one result per seed
(:func:`posbias.measures.evaluate.complete_depths`).
"""
from __future__ import annotations

from dataclasses import dataclass

from posbias.measures.evaluate import FIG2_PES, stack
from posbias.measures.stats import seed_mean_se, t_critical

__all__ = ["DepthChange", "depth_changes", "changes_table", "trend_sentence", "ordering_sentence"]


@dataclass(frozen=True)
class DepthChange:
    """The gap ``pair`` of architecture ``pe`` at ``deep`` layers minus at ``shallow`` layers: mean over
    seeds of the per-seed difference, its standard error (spread between seeds plus the binomial bound
    of four accuracies on the shared test sets) and the critical value for ``runs`` seeds."""

    pe: str
    pair: str
    shallow: int
    deep: int
    mean: float
    se: float
    runs: int
    crit: float

    @property
    def direction(self) -> str:
        """``"rises"`` or ``"falls"`` when the change is beyond ``crit`` standard errors, else ``"flat"``."""
        if self.mean > self.crit * self.se:
            return "rises"
        return "falls" if self.mean < -self.crit * self.se else "flat"


def _gap(results: dict[str, list[dict]], pe: str, depth: int, pair: str):
    return stack(results[f"{pe}|{depth}"], "gaps", pair)                      # (seeds,)


def depth_changes(results: dict[str, list[dict]], depths: list[int], n_test: int, *,
                  pes: tuple[str, ...] = FIG2_PES, pair: str = "first-last",
                  level: float = 0.05) -> list[DepthChange]:
    """For each architecture of ``pes``: the change of its gap ``pair`` from each depth of ``depths``
    (sorted) to the next, then from the shallowest to the deepest (when there are more than two),
    paired by seed. Test sets of ``n_test`` sequences, shared by every depth and seed."""
    ds = sorted(depths)
    steps = list(zip(ds, ds[1:])) + ([(ds[0], ds[-1])] if len(ds) > 2 else [])
    out = []
    for pe in pes:
        for lo, hi in steps:
            diff = _gap(results, pe, hi, pair) - _gap(results, pe, lo, pair)
            mean, se = seed_mean_se(diff, n_test, coef2=4.0)    # a difference of two gaps: four accuracies
            out.append(DepthChange(pe, pair, lo, hi, mean, se, diff.numel(), t_critical(diff.numel(), level)))
    return out


def changes_table(changes: list[DepthChange]):
    """:func:`depth_changes` as a ``pandas.DataFrame``: architecture, from, to, change (``mean ± SE``),
    runs, and the direction (``rises``/``falls`` beyond its noise, or ``flat``)."""
    import pandas as pd  # lazy: pandas costs ~0.5s at import

    return pd.DataFrame([{"PE": c.pe, "from": c.shallow, "to": c.deep,
                          f"change of {c.pair}": f"{c.mean:+.3f} ± {c.se:.3f}", "runs": c.runs,
                          "direction": c.direction if c.direction != "flat" else "flat (within its noise)"}
                         for c in changes])


def _layers(d: int) -> str:
    return f"{d} layer" + ("" if d == 1 else "s")


def _and(items: list[str]) -> str:
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def trend_sentence(results: dict[str, list[dict]], depths: list[int], n_test: int, *,
                   pes: tuple[str, ...] = FIG2_PES, pair: str = "first-last", level: float = 0.05) -> str:
    """Does depth amplify the early bias? One sentence from the numbers: the first architecture's gap
    ``pair`` at each depth (mean ± SE), then each architecture's change from the shallowest to the
    deepest depth with its direction. Fewer than two depths: says so."""
    ds = sorted(depths)
    if len(ds) < 2:
        return "fewer than two depths are complete, so no change with depth is measured yet"
    at = [f"{m:+.3f} ± {s:.3f} at {_layers(d)}"
          for d in ds for m, s in [seed_mean_se(_gap(results, pes[0], d, pair), n_test)]]
    whole = [c for c in depth_changes(results, ds, n_test, pes=pes, pair=pair, level=level)
             if (c.shallow, c.deep) == (ds[0], ds[-1])]
    word = {"rises": "rises beyond its noise", "falls": "falls beyond its noise", "flat": "stays within its noise"}
    moves = [f"{word[c.direction]} for {c.pe} ({c.mean:+.3f} ± {c.se:.3f})" for c in whole]
    return (f"{pes[0]}'s {pair.replace('-', '-vs-')} gap is " + _and(at)
            + f"; from {ds[0]} to {_layers(ds[-1])} the gap " + _and(moves))


def ordering_sentence(results: dict[str, list[dict]], depths: list[int], n_test: int, *,
                      pes: tuple[str, ...] = FIG2_PES, pair: str = "first-last") -> str:
    """The architectures ordered by their mean gap ``pair`` at each depth, largest first, e.g.
    ``"at 2 layers No PE (+0.105 ± 0.008), RoPE (...), decay (...)"``, one clause per depth."""
    parts = []
    for d in sorted(depths):
        ms = {pe: seed_mean_se(_gap(results, pe, d, pair), n_test) for pe in pes}
        order = sorted(pes, key=lambda pe: -ms[pe][0])
        parts.append(f"at {_layers(d)} " + ", ".join(f"{pe} ({ms[pe][0]:+.3f} ± {ms[pe][1]:.3f})" for pe in order))
    return "; ".join(parts) if parts else "no depth is complete yet"
