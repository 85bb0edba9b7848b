"""Figures that set one setting beside another: the front page's (theory, trained networks, a real
model) and toy networks beside a real decoder on one sink metric.

Each function returns a matplotlib figure in the book's style, for :func:`posbias.figures.save`.
"""
from __future__ import annotations

import itertools
from typing import Any

import matplotlib
import matplotlib.pyplot as plt  # the backend is chosen by posbias.figures.saving, imported first
import numpy as np

__all__ = ["sink_comparison_figure", "hero_figure"]


def sink_comparison_figure(toy: dict[str, Any], real: dict[str, Any], table: Any) -> matplotlib.figure.Figure:
    """Toy networks beside a real decoder on one sink metric. Left: the sink rate against the relative
    position ``(k - 1) / (n - 2)`` of keys ``1..n-1`` (the last key, the query itself, left out), one
    line per curve of ``toy`` (marked) and of ``real`` (plain), each ``label -> (n,)`` rates. Right:
    one bar per row of ``table`` (a DataFrame with columns ``network``, ``rate at the sink`` and
    ``max elsewhere``): the rate at the sink position beside the largest rate elsewhere."""
    fig, axes = plt.subplots(1, 2, figsize=(12, 3.8), gridspec_kw={"width_ratios": [1.2, 1]})
    for curves, styles in ((toy, ("o-", "s--", "^-.", "d:")), (real, ("-", ":", "--", "-."))):
        for (label, rate), style in zip(curves.items(), itertools.cycle(styles)):
            r = np.asarray(rate, dtype=float)[:-1]
            axes[0].plot(np.arange(len(r)) / max(len(r) - 1, 1), r, style, label=label)
    axes[0].set(xlabel="(k - 1) / (n - 2)", ylabel="sink rate", ylim=(-0.02, 1.02))
    axes[0].legend(fontsize=8)
    y = np.arange(len(table))
    axes[1].barh(y, table["rate at the sink"], color="C0", label="at the sink")
    axes[1].barh(y, table["max elsewhere"], color="C3", alpha=0.6, height=0.4, label="elsewhere")
    axes[1].set_yticks(y, table["network"], fontsize=8)
    axes[1].invert_yaxis()
    axes[1].set(xlim=(0, 1), xlabel="sink rate")
    axes[1].legend(fontsize=8)
    return fig


def hero_figure(h: Any) -> matplotlib.figure.Figure:
    """The front page's figure from :class:`posbias.book.scoreboard.HeroData`: the pull toward the first
    token in theory (uniform causal attention's rollout: the last token's share of context on token 1
    against depth), in trained networks (Figure 2's first-vs-last gap at the paper's settings, by
    PE, mean ± SE) and in a real model (SmolLM2: token 1's attention over its uniform share, per layer)."""
    fig, axes = plt.subplots(1, 3, figsize=(11, 3.1))
    ax = axes[0]
    ax.plot(h.layers, h.first_mass, marker="o", ms=2.5)
    ax.axhline(h.uniform, color="k", lw=0.6, ls=":")
    ax.set(xlabel="layers of uniform causal attention", ylabel="context on token 1", ylim=(0, 1.02),
           title=f"theory: last of {h.n_tokens} tokens")
    ax = axes[1]
    ax.bar(range(len(h.pes)), h.gap_mean, yerr=h.gap_se, capsize=3, color=["C0", "C1", "C2"][:len(h.pes)])
    ax.axhline(0, color="k", lw=0.6)
    ax.set_xticks(range(len(h.pes)), list(h.pes))
    ax.set(ylabel="acc(first) - acc(last)", title=f"trained: {h.gap_depth} layers, paper settings")
    ax = axes[2]
    if h.sink_multiple is not None:
        ax.bar(range(1, len(h.sink_multiple) + 1), h.sink_multiple, color="C3")
        ax.axhline(1, color="k", lw=0.6, ls=":")
        ax.set(xlabel="layer of SmolLM2", ylabel="token 1 / uniform share", title=f"real: {h.sink_tokens} tokens")
    else:
        ax.text(0.5, 0.5, "SmolLM2 survey not stored", ha="center", transform=ax.transAxes)
        ax.set_axis_off()
    return fig
