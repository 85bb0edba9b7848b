"""Where trained networks stand among the strategies they could be using (:mod:`posbias.science.retrieval`)."""
from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt

__all__ = ["standing_figure"]

#: How each strategy is named on the figure.
STRATEGY_NAMES = {"copy_random": "copy a random label", "copy_slot": "copy one fixed slot",
                  "ignore_best": "best without the query", "match_worst": "find the query's item",
                  "match_nearest": "nearest item"}


def standing_figure(groups: Mapping[str, Sequence[tuple[str, float, float]]],
                    baselines: Mapping[str, Mapping[str, float]]) -> plt.Figure:
    """Mean sweep accuracy (x) against mean IC accuracy (y), one point per trained configuration, coloured by
    the figure it belongs to (``groups``: figure -> ``(label, ic, sweep)`` per configuration), with the strategies
    of ``baselines`` (``{"ic": {...}, "sweep": {...}}``) as labelled landmarks and the query-ignoring ceiling of
    the sweep as a vertical line."""
    fig, ax = plt.subplots(figsize=(8.6, 5.2))
    ceiling = baselines["sweep"]["ignore_best"]
    ax.axvspan(0, ceiling, color="0.92", zorder=0)
    ax.axvline(ceiling, color="0.4", lw=1, ls="--", zorder=1)
    ax.text(ceiling / 2, 0.02, "a network that\nignores the\nquery stays\nleft of the\ndashed line", ha="center",
            va="bottom",
            fontsize=9, color="0.3")
    markers = "osD^vP*X"
    for i, (name, pts) in enumerate(groups.items()):
        xs, ys = [p[2] for p in pts], [p[1] for p in pts]
        ax.scatter(xs, ys, s=42, marker=markers[i % len(markers)], label=name, alpha=0.85, zorder=3)
    for key, text in STRATEGY_NAMES.items():
        x, y = baselines["sweep"][key], baselines["ic"][key]
        ax.scatter([x], [y], s=110, marker="*", color="black", zorder=4)
        ax.annotate(text, (x, y), textcoords="offset points", xytext=(6, 5 if key != "copy_slot" else 7),
                    fontsize=9, ha="left" if x < 0.8 else "right")
    ax.set_xlim(0, 1.04)
    ax.set_ylim(0, 1.0)
    ax.set_xlabel("mean accuracy on the position sweep (one item per class: needs the query)")
    ax.set_ylabel("mean accuracy on the six IC test sets")
    ax.legend(loc="lower right", fontsize=9, title="configurations of", title_fontsize=9)
    return fig
