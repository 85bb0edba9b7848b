"""The figure of the chapter on position bias over training: the three gaps of every configuration of
a study against iterations (mean ± SE over runs), with the training loss beside them."""
from __future__ import annotations

import math
from typing import Mapping, Sequence

import matplotlib.figure
import matplotlib.pyplot as plt


def bias_over_training_figure(study: Mapping[str, Sequence[dict | None]], title: str,
                              mark: int | None = 100_000) -> matplotlib.figure.Figure:
    """One panel per configuration of ``study`` (label -> stored runs; incomplete labels skipped): the
    gaps first-middle, first-last and middle-last against iterations (thousands), mean over runs with
    a band of one standard error (:func:`posbias.overtraining.curve_stats`), and the seed-mean training
    loss on a second axis (grey). ``mark``: a vertical line at that iteration (the paper's 100,000)."""
    from .. import convergence as cv
    from ..overtraining import curve_stats

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
