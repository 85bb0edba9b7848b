"""The figure of the chapter on position bias over training: the three gaps of every configuration of
a study against iterations (mean ± SE over runs), with the training loss beside them."""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import matplotlib.figure
import matplotlib.pyplot as plt
import numpy as np


def bias_over_training_figure(bands: Mapping[str, Mapping[str, Any]], title: str,
                              mark: int | None = 100_000) -> matplotlib.figure.Figure:
    """One panel per configuration of ``bands`` (:func:`posbias.analysis.overtraining.gap_bands`: label ->
    ``step``, ``loss`` and ``gaps``, pair -> ``(mean, se)``): the gaps first-middle, first-last and
    middle-last against iterations (thousands), the mean over runs with a band of one standard error, and
    the seed-mean training loss on a second axis (grey). ``mark``: a vertical line at that iteration (the
    paper's 100,000)."""
    labels = list(bands)
    n = max(len(labels), 1)
    cols = min(n, 3 if n % 3 == 0 or n > 6 else n)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.4 * cols, 2.5 * rows), sharex=True, squeeze=False)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, label in zip(axes.flat, labels):
        b = bands[label]
        x = np.asarray(b["step"]) / 1000
        for (pair, (mean, se)), c in zip(b["gaps"].items(), colours):
            ax.plot(x, mean, color=c, lw=1.2, label=pair.replace("-", " vs "))
            ax.fill_between(x, mean - se, mean + se, color=c, alpha=0.2, lw=0)
        ax.axhline(0, color="k", lw=0.5)
        if mark is not None and x[-1] >= mark / 1000:
            ax.axvline(mark / 1000, color="k", lw=0.5, ls=":")
        twin = ax.twinx()
        twin.plot(x[1:], b["loss"][1:], color="0.55", lw=0.9, ls="--")
        twin.tick_params(labelsize=8, colors="0.45")
        twin.grid(False)
        ax.set_title(label.replace("|", ", "), fontsize=9)
    for ax in list(axes.flat)[len(labels):]:
        ax.axis("off")
    for ax in axes[-1]:
        ax.set_xlabel("iteration (thousands)")
    for ax in axes[:, 0]:
        ax.set_ylabel("accuracy gap")
    if labels:
        axes.flat[0].legend(fontsize=8, frameon=False, loc="best")
    else:
        axes.flat[0].text(0.5, 0.5, "no complete configuration yet", ha="center", transform=axes.flat[0].transAxes)
    fig.suptitle(f"{title} (dashed grey: training loss, right axis)", fontsize=10)
    return fig


def budget_trajectories_figure(lines: Mapping[str, Any], mark: int | None = 100_000) -> matplotlib.figure.Figure:
    """The fixed-budget study, every network drawn (:func:`posbias.analysis.budget_read.trajectories`): one column
    per configuration, the mean IC accuracy (top) and the first-last gap (bottom) of each stored network against
    iterations (thousands), one line per network. One colour means one thing in every panel: orange, the network
    left a plateau after 100,000 iterations; blue, it never did. Solid: trained under the design; dashed: an
    admitted record. Grey lines in the top row: what copying a random context label scores and the best any network
    that ignores the query scores. A legend under the panels; a configuration with no network stored says
    ``not yet``."""
    from matplotlib.lines import Line2D

    configs = lines["configs"]
    labels = list(configs)
    fig, axes = plt.subplots(2, max(len(labels), 1), figsize=(2.6 * max(len(labels), 1), 5.2), sharex="col",
                             sharey="row", squeeze=False)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    left, stayed = colours[1], colours[0]
    refs = ((lines["copy_random"], ":"), (lines["ignore_best"], "--"))
    for k, label in enumerate(labels):
        top, bottom = axes[0, k], axes[1, k]
        runs = configs[label]["lines"]
        top.set_title(f"{label.replace('|', ', depth ')} ({len(runs)} of {configs[label]['designed']})", fontsize=9)
        for y, ls in refs:
            top.axhline(y, color="0.6", lw=0.7, ls=ls)
        if not runs:
            top.text(0.5, 0.5, "not yet", ha="center", va="center", transform=top.transAxes, fontsize=9)
            bottom.text(0.5, 0.5, "not yet", ha="center", va="center", transform=bottom.transAxes, fontsize=9)
            continue
        for r in runs:
            x = np.asarray(r["step"]) / 1000
            ls = "-" if r["design"] else "--"
            colour = left if r["left"] else stayed
            top.plot(x, r["accuracy"], color=colour, lw=0.9, ls=ls)
            bottom.plot(x, r["first_last"], color=colour, lw=0.9, ls=ls)
        for ax in (top, bottom):
            if mark is not None:
                ax.axvline(mark / 1000, color="k", lw=0.5, ls=":")
            ax.tick_params(labelsize=8)
        bottom.axhline(0, color="k", lw=0.5)
        bottom.set_xlabel("iteration (thousands)", fontsize=9)
    axes[0, 0].set_ylabel("mean IC accuracy", fontsize=9)
    axes[1, 0].set_ylabel("first-last gap", fontsize=9)
    handles = [Line2D([], [], color=left, lw=1.2, label="left a plateau after 100k"),
               Line2D([], [], color=stayed, lw=1.2, label="never left it"),
               Line2D([], [], color="0.3", lw=1.0, ls="--", label="admitted record"),
               Line2D([], [], color="0.6", lw=0.9, ls=":", label=f"copying a random context label ({refs[0][0]:.3f})"),
               Line2D([], [], color="0.6", lw=0.9, ls="--",
                      label=f"best while ignoring the query ({refs[1][0]:.3f})"),
               Line2D([], [], color="k", lw=0.6, ls=":", label="the paper's 100,000 iterations")]
    fig.legend(handles=handles, loc="outside lower center", ncol=2, fontsize=8, frameon=False)
    return fig


def jump_figure(series: Mapping[str, Mapping[str, Sequence]], ceiling: float, mark: int | None = 100_000,
                attention: Mapping[str, Mapping[str, Sequence]] | None = None) -> matplotlib.figure.Figure:
    """The jump study's probes along training (:func:`posbias.analysis.jump.probe_series`, one per role): 2 x 2
    panels against iterations (thousands), the jumper orange and the non-jumper blue as in the study's trajectories.
    (a) accuracy on fresh IC sets (solid) and on a fresh position sweep (dashed), with ``ceiling``, the sweep's
    ceiling for any network that ignores the query (grey; :func:`posbias.science.retrieval.closed_forms`); (b) the
    last layer's attention on the query's own class over what position alone predicts, on its items (solid) and,
    with ``attention`` (:func:`posbias.analysis.jump.attention_series`), on the label tokens that follow them
    (dashed; exploratory); (c) accuracy on training classes (solid) and on novel ones (dashed); (d) of the wrong
    answers, the share that is the label at the first (solid), middle (dashed) or last (dotted) slot. A role with
    nothing kept yet is left out; the legend says how far each has trained."""
    from matplotlib.lines import Line2D

    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    colour = {"jumper": colours[1], "non-jumper": colours[0]}
    fig, axes = plt.subplots(2, 2, figsize=(8, 5.8))
    ax = axes.flatten()
    ax[0].axhline(ceiling, color="0.6", lw=0.7, ls="--")
    ax[1].axhline(1.0, color="0.6", lw=0.7, ls="--")
    handles = []
    for role, s in series.items():
        if not s["step"]:
            continue
        x, c = [v / 1000 for v in s["step"]], colour.get(role, "k")
        ax[0].plot(x, s["ic"], color=c, lw=1.2)
        ax[0].plot(x, s["sweep"], color=c, lw=1.2, ls="--")
        ax[1].plot(x, s["ratio"], color=c, lw=1.2, marker=".", ms=3)
        a = (attention or {}).get(role)
        if a and a["step"]:
            last = max(int(k.rsplit("_", 1)[1]) for k in a if k.startswith("label_ratio_"))
            ax[1].plot([v / 1000 for v in a["step"]], a[f"label_ratio_{last}"], color=c, lw=1.2, ls="--",
                       marker=".", ms=3)
        ax[2].plot(x, s["training_classes"], color=c, lw=1.2)
        ax[2].plot(x, s["novel_classes"], color=c, lw=1.2, ls="--")
        for key, ls in (("wrong_first", "-"), ("wrong_middle", "--"), ("wrong_last", ":")):
            ax[3].plot(x, s[key], color=c, lw=1.2, ls=ls)
        handles.append(Line2D([], [], color=c, lw=1.5, label=f"{role} (to {max(s['step']):,})"))
    titles = ("(a) accuracy: IC sets, sweep (dashed)", "(b) own class / position: items, labels --",
              "(c) training classes, novel (dashed)", "(d) wrong answers: first, middle --, last :")
    for a, t in zip(ax, titles):
        a.set_title(t, fontsize=9)
        a.set_xlabel("iteration (thousands)", fontsize=9)
        a.tick_params(labelsize=8)
        if mark is not None:
            a.axvline(mark / 1000, color="k", lw=0.5, ls=":")
    handles.append(Line2D([], [], color="0.6", lw=0.9, ls="--",
                          label=f"sweep ceiling without the query ({ceiling:.3f})"))
    fig.legend(handles=handles, loc="outside lower center", ncol=2, fontsize=8, frameon=False)
    return fig
