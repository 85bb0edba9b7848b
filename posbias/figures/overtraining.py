"""The figure of the chapter on position bias over training: the three gaps of every configuration of
a study against iterations (mean ± SE over runs), with the training loss beside them."""
from __future__ import annotations

import math
from typing import Mapping, Sequence

import matplotlib.figure
import matplotlib.pyplot as plt

from .. import budget as bd
from .. import convergence as cv


def bias_over_training_figure(study: Mapping[str, Sequence[dict | None]], title: str,
                              mark: int | None = 100_000) -> matplotlib.figure.Figure:
    """One panel per configuration of ``study`` (label -> stored runs; incomplete labels skipped): the
    gaps first-middle, first-last and middle-last against iterations (thousands), mean over runs with
    a band of one standard error (:func:`posbias.overtraining.curve_stats`), and the seed-mean training
    loss on a second axis (grey). ``mark``: a vertical line at that iteration (the paper's 100,000)."""
    from ..overtraining import curve_stats  # lazy: posbias.overtraining (torch) costs ~1.5s at import

    labels = [lb for lb, us in study.items() if us and all(u is not None for u in us)]
    n = max(len(labels), 1)
    cols = min(n, 3 if n % 3 == 0 or n > 6 else n)
    rows = math.ceil(n / cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.4 * cols, 2.5 * rows), sharex=True, squeeze=False)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, label in zip(axes.flat, labels):
        for pair, c in zip(cv.GAP_NAMES, colours):
            s = curve_stats(study[label], pair)
            x = s["step"] / 1000
            ax.plot(x, s["mean"], color=c, lw=1.2, label=pair.replace("-", " vs "))
            ax.fill_between(x, s["mean"] - s["se"], s["mean"] + s["se"], color=c, alpha=0.2, lw=0)
        ax.axhline(0, color="k", lw=0.5)
        if mark is not None and x[-1] >= mark / 1000:
            ax.axvline(mark / 1000, color="k", lw=0.5, ls=":")
        twin = ax.twinx()
        twin.plot(x[1:], s["loss"][1:], color="0.55", lw=0.9, ls="--")
        twin.tick_params(labelsize=7, colors="0.45")
        twin.grid(False)
        ax.set_title(label.replace("|", ", "), fontsize=9)
    for ax in list(axes.flat)[len(labels):]:
        ax.axis("off")
    for ax in axes[-1]:
        ax.set_xlabel("iteration (thousands)")
    for ax in axes[:, 0]:
        ax.set_ylabel("accuracy gap")
    if labels:
        axes.flat[0].legend(fontsize=7, frameon=False, loc="best")
    else:
        axes.flat[0].text(0.5, 0.5, "no complete configuration yet", ha="center", transform=axes.flat[0].transAxes)
    fig.suptitle(f"{title} (dashed grey: training loss, right axis)", fontsize=10)
    return fig


def budget_trajectories_figure(study: Mapping[str, Sequence[tuple[int, str, dict | None]]],
                               mark: int | None = 100_000) -> matplotlib.figure.Figure:
    """The fixed-budget study, every network drawn: one column per configuration, the mean IC accuracy
    (top) and the first-last gap (bottom) of each stored network against iterations (thousands), one
    line per network, coloured by its branch (:func:`posbias.budget_read.branches_of`; solid: trained
    under the design, dashed: admitted). A configuration with no network stored says ``not yet``."""
    from ..budget_read import branches_of, done  # lazy: posbias.budget_read (torch) costs ~1.5s at import

    labels = list(study)
    fig, axes = plt.subplots(2, max(len(labels), 1), figsize=(2.6 * max(len(labels), 1), 4.6), sharex="col",
                             sharey="row", squeeze=False)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    source = {(label, s): src for label, rows in study.items() for s, src, _ in rows}
    for k, label in enumerate(labels):
        top, bottom = axes[0, k], axes[1, k]
        runs = done(study)[label]
        top.set_title(f"{label.replace('|', ', depth ')} ({len(runs)} of {len(study[label])})", fontsize=8)
        if not runs:
            top.text(0.5, 0.5, "not yet", ha="center", va="center", transform=top.transAxes, fontsize=9)
            bottom.text(0.5, 0.5, "not yet", ha="center", va="center", transform=bottom.transAxes, fontsize=9)
            continue
        for b, branch in enumerate(branches_of(runs)):
            for seed, r in branch:
                c = r["curves"]
                x = [s / 1000 for s in c["step"]]
                ls = "-" if source[(label, seed)] == "design" else "--"
                top.plot(x, bd.mean_accuracy(c), color=colours[b % len(colours)], lw=0.9, ls=ls)
                bottom.plot(x, cv.gap_curve(c, "first-last"), color=colours[b % len(colours)], lw=0.9, ls=ls)
        for ax in (top, bottom):
            if mark is not None:
                ax.axvline(mark / 1000, color="k", lw=0.5, ls=":")
        bottom.axhline(0, color="k", lw=0.5)
        bottom.set_xlabel("iteration (thousands)", fontsize=8)
    axes[0, 0].set_ylabel("mean IC accuracy")
    axes[1, 0].set_ylabel("first-last gap")
    fig.suptitle("Every network of the fixed-budget study (colour: branch; dashed: admitted record)", fontsize=9)
    return fig
