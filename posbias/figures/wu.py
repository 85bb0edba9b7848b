"""Wu et al.'s Figures 2-6 as the paper draws them, from stored units: the gaps (2), accuracy on the IC
test sets and against the answer's slot (3, 4), attention maps and the sink metric (5, 6).

Each function returns a matplotlib figure in the book's style (:func:`posbias.figures.style`), for
:func:`posbias.figures.save`; it saves and shows nothing itself.
"""
from __future__ import annotations

from typing import Any

import matplotlib
import matplotlib.pyplot as plt  # the backend is chosen by posbias.figures.saving, imported first
import numpy as np

__all__ = ["gap_curves_figure", "gap_bars_figure", "attention_maps_figure", "alpha_profile_figure",
           "sink_panels_figure", "fig3_accuracy_figure", "fig4_accuracy_figure", "fig3_sweep_figure",
           "fig4_sweep_figure", "fig3_gap_curves_figure", "fig4_preference_curves_figure"]


def gap_curves_figure(results: dict[str, list[dict]], pes: list[str], depths: list[int],
                      spread: bool = False) -> matplotlib.figure.Figure:
    """The three gaps of Wu et al. against training iteration, one panel per gap: the mean over
    seeds of ``results[f"{pe}|{depth}"]`` (stored units with ``curves``), line style = PE, colour
    = depth, and with ``spread`` a band of one standard deviation over seeds."""
    from posbias.measures import evaluate as ev  # lazy: posbias.measures.evaluate (torch) costs ~1.3s at import

    fig, axes = plt.subplots(1, 3, figsize=(11, 3), sharey=True)
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, p in zip(axes, [f"{a}-{b}" for a, b in ev.GAP_PAIRS]):
        for pe, ls in zip(pes, ["-", "--", ":"]):
            for d, c in zip(depths, colours):
                units = results[f"{pe}|{d}"]
                g, x = ev.gap_curves(units)[p], [step / 1000 for step in units[0]["curves"]["step"]]
                m = g.mean(0)
                ax.plot(x, m, ls=ls, color=c, label=f"{pe}, {d} layers")
                if spread:
                    e = g.std(0, unbiased=False)
                    ax.fill_between(x, m - e, m + e, color=c, alpha=0.15, lw=0)
        ax.axhline(0, color="k", lw=0.6)
        ax.set_title(p.replace("-", " vs "))
    fig.supxlabel("training iteration (thousands)", fontsize=10)
    axes[0].set_ylabel("accuracy gap")
    if depths:
        axes[-1].legend(fontsize=8, frameon=False, bbox_to_anchor=(1.02, 1), loc="upper left")
    else:
        axes[1].text(0.5, 0.5, "no complete depth yet", ha="center", transform=axes[1].transAxes)
    return fig


def gap_bars_figure(results: dict[str, list[dict]], pes: list[str], depths: list[int],
                    n_test: int) -> matplotlib.figure.Figure:
    """Wu et al.'s Figure 2 as the paper draws it: one panel per depth, the three gaps as bars grouped
    by gap, one bar per PE; each bar the mean over the seeds of ``results[f"{pe}|{depth}"]`` with an
    error bar of one standard error (:func:`posbias.measures.evaluate.seed_mean_se`, ``n_test`` sequences)."""
    from posbias.measures import evaluate as ev  # lazy: posbias.measures.evaluate (torch) costs ~1.3s at import

    n = max(len(depths), 1)
    fig, axes = plt.subplots(1, n, figsize=(3.6 * n, 3.2), sharey=True, squeeze=False)
    pairs = [f"{a}-{b}" for a, b in ev.GAP_PAIRS]
    w = 0.8 / max(len(pes), 1)
    for ax, d in zip(axes[0], depths):
        for k, pe in enumerate(pes):
            ms = [ev.seed_mean_se(ev.stack(results[f"{pe}|{d}"], "gaps", p), n_test) for p in pairs]
            ax.bar([i + (k - (len(pes) - 1) / 2) * w for i in range(3)], [m for m, _ in ms], w,
                   yerr=[s for _, s in ms], label=pe, capsize=2)
        ax.axhline(0, color="k", lw=0.6)
        ax.set_xticks(range(3), [p.replace("-", "\nvs ") for p in pairs])
        ax.set_title(f"{d} layers")
    axes[0, 0].set_ylabel("accuracy gap")
    if depths:
        axes[0, 0].legend(frameon=False)
    else:
        axes[0, 0].text(0.5, 0.5, "no complete depth yet", ha="center", transform=axes[0, 0].transAxes)
    return fig


def sink_panels_figure(values: dict[str, Any], windows: list[int], prefixes: list[int],
                       ylabel: str) -> matplotlib.figure.Figure:
    """Wu et al.'s Figure 6 layout: causal, sliding-window and prefix panels of a per-key quantity.

    ``values[label]`` is ``(seeds, T)`` (labels ``causal``, ``window|w``, ``prefix|K``; missing ones
    are skipped): the causal panel shows bars of the mean over seeds with one standard deviation,
    the others one line per width or prefix size."""
    fig, axes = plt.subplots(1, 3, figsize=(12, 3.2), sharey=True)
    if "causal" in values:
        v = np.asarray(values["causal"])
        axes[0].bar(np.arange(1, v.shape[1] + 1), v.mean(0), yerr=v.std(0), capsize=2)
    for ax, labels in ((axes[1], [(f"window|{w}", f"w = {w}") for w in windows]),
                       (axes[2], [(f"prefix|{K}", f"K = {K}") for K in prefixes])):
        for label, text in labels:
            if label in values:
                v = np.asarray(values[label])
                ax.plot(np.arange(1, v.shape[1] + 1), v.mean(0), marker="o", ms=3, label=text)
        if ax.lines:
            ax.legend(frameon=False)
    for ax, title in zip(axes, ["causal", "sliding window", "prefix"]):
        ax.axhline(0, color="k", lw=0.6)
        ax.set_title(title)
        ax.set_xlabel("key position k")
    axes[0].set_ylabel(ylabel)
    return fig


def attention_maps_figure(maps: Any, mask: Any, title: str = "") -> matplotlib.figure.Figure:
    """Wu et al.'s Figure 5 layout: one heat map per layer of a mean attention map ``(depth, T, T)``
    (rows: queries, columns: keys), masked entries blank, tokens labelled ``x1 l1 ... x8 l8 xq``."""
    maps = np.array(maps, dtype=float)
    depth, T = maps.shape[0], maps.shape[-1]
    fig, axes = plt.subplots(1, depth, figsize=(4 * depth, 3.6), squeeze=False)
    labels = [f"x{i // 2 + 1}" if i % 2 == 0 else f"l{i // 2 + 1}" for i in range(T - 1)] + ["xq"]
    for t, ax in enumerate(axes[0]):
        m = maps[t].copy()
        m[~np.asarray(mask, dtype=bool)] = np.nan
        im = ax.imshow(m, cmap="viridis", vmin=0)
        ax.grid(False)
        ax.set_title(f"layer {t + 1}{title}")
        ax.set_xticks(range(T), labels, fontsize=8, rotation=90)
        ax.set_yticks(range(T), labels, fontsize=8)
        fig.colorbar(im, ax=ax, fraction=0.046)
    return fig


def alpha_profile_figure(alpha: Any, alpha_unif: Any) -> matplotlib.figure.Figure:
    """``alpha_k`` of each layer against key position, mean over seeds with one standard deviation,
    from ``alpha`` ``(seeds, depth, T)``, beside the uniform-attention baseline ``alpha_unif`` ``(T,)``."""
    alpha = np.asarray(alpha, dtype=float)
    k = np.arange(1, alpha.shape[-1] + 1)
    fig, ax = plt.subplots(figsize=(6, 3))
    for t in range(alpha.shape[1]):
        ax.errorbar(k, alpha[:, t].mean(0), yerr=alpha[:, t].std(0), marker="o", ms=3, capsize=2,
                    label=f"layer {t + 1}")
    ax.plot(k, np.asarray(alpha_unif, dtype=float), "k--", lw=1, label="uniform attention")
    ax.set_xlabel("key position k")
    ax.set_ylabel(r"$\alpha_k$")
    ax.legend(frameon=False)
    return fig


# --------------------------------------------------------------------------- Figures 3 and 4 (Wu et al.)
# Architectures are labelled ``mask|pe`` (masks ``full`` and ``causal``, PEs ``none``, ``sin``, ``rope``:
# :data:`posbias.measures.evaluate.FIG3_NAMES`), prefixed with ``w|`` (``first``, ``middle``, ``last``: the slot
# biased in training) in Figure 4. A label missing from the input is not drawn, so a figure can be
# drawn from the configurations stored so far; a panel with nothing to draw says so.

_EMPTY = "no configuration complete yet"


def _masks_pes() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The masks and the PEs of Figures 3 and 4, in the order of :data:`posbias.measures.evaluate.FIG3_NAMES`."""
    from posbias.measures import evaluate as ev  # lazy: posbias.measures.evaluate (torch) costs ~1.3s at import

    labels = [k.split("|") for k in ev.FIG3_NAMES]
    return tuple(dict.fromkeys(m for m, _ in labels)), tuple(dict.fromkeys(p for _, p in labels))


def _pe_name(label: str) -> str:
    """``"causal|rope"`` -> ``"RoPE"``: the PE part of :data:`posbias.measures.evaluate.FIG3_NAMES`."""
    from posbias.measures import evaluate as ev  # lazy: posbias.measures.evaluate (torch) costs ~1.3s at import

    return ev.FIG3_NAMES[label].split(", ")[1]


def _mask_title(mask: str) -> str:
    return "no mask" if mask == "full" else "causal mask"


def _say_empty(ax: Any) -> None:
    if not ax.lines and not ax.patches:
        ax.text(0.5, 0.5, _EMPTY, ha="center", va="center", transform=ax.transAxes)


def _legend(axes: Any, **kw: Any) -> None:
    """A legend on the first of ``axes`` that has labelled artists (none when none has: no warning)."""
    for ax in axes:
        if ax.get_legend_handles_labels()[0]:
            ax.legend(frameon=False, **kw)
            return


def _ic_bars(ax: Any, acc: dict[str, Any], prefix: str, mask: str, fontsize: int) -> None:
    """One panel of Figures 3/4: for each PE, bars of the mean over seeds of ``acc[prefix + mask|pe]``
    ``(seeds, 6)`` on the six IC sets, with one standard deviation over seeds."""
    from posbias.measures import evaluate as ev  # lazy: posbias.measures.evaluate (torch) costs ~1.3s at import

    pes = _masks_pes()[1]
    w = 0.8 / len(pes)
    for k, pe in enumerate(pes):
        if f"{prefix}{mask}|{pe}" not in acc:
            continue
        a = np.asarray(acc[f"{prefix}{mask}|{pe}"], dtype=float)
        ax.bar(np.arange(len(ev.IC_SETS)) + (k - 1) * w, a.mean(0), w, yerr=a.std(0), capsize=2,
               label=_pe_name(f"{mask}|{pe}"))
    ax.set_xticks(range(len(ev.IC_SETS)), [s[3:].replace("_", "\nvs ") for s in ev.IC_SETS],
                  fontsize=fontsize)
    _say_empty(ax)


def fig3_accuracy_figure(acc: dict[str, Any]) -> matplotlib.figure.Figure:
    """Wu et al.'s Figure 3: accuracy on the six IC test sets, one panel per mask (no mask, causal),
    one bar per PE (No PE, sin, RoPE) and test set at the mean over seeds, with one standard
    deviation over seeds.

    ``acc["mask|pe"]`` is ``(seeds, 6)``, columns in the order of
    :data:`posbias.measures.evaluate.IC_SETS` (:func:`posbias.measures.evaluate.ic_accuracy_by_set` of the units);
    missing labels are not drawn."""
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.3), sharey=True)
    for ax, mask in zip(axes, _masks_pes()[0]):
        _ic_bars(ax, acc, "", mask, 8)
        ax.set_title(_mask_title(mask))
    axes[0].set_ylabel("accuracy")
    _legend(axes)
    return fig


def fig4_accuracy_figure(acc: dict[str, Any], wheres: tuple[str, ...] = ("first", "middle", "last")
                         ) -> matplotlib.figure.Figure:
    """Wu et al.'s Figure 4(a-c): Figure 3's panels (:func:`fig3_accuracy_figure`) once per slot
    biased in training, one row per ``w`` of ``wheres`` (columns: no mask, causal).

    ``acc["w|mask|pe"]`` is ``(seeds, 6)`` in the order of :data:`posbias.measures.evaluate.IC_SETS`;
    missing labels are not drawn."""
    fig, axes = plt.subplots(len(wheres), 2, figsize=(11, 2.7 * len(wheres)), sharey=True, squeeze=False)
    for row, w in zip(axes, wheres):
        for ax, mask in zip(row, _masks_pes()[0]):
            _ic_bars(ax, acc, f"{w}|", mask, 7)
            ax.set_title(f"answer at {w} in training, {'no' if mask == 'full' else 'causal'} mask",
                         fontsize=9)
        row[0].set_ylabel("accuracy")
    _legend(axes.flat)
    return fig


def fig3_sweep_figure(sweeps: dict[str, Any]) -> matplotlib.figure.Figure:
    """Figure 3's networks against the slot of the answer: one panel per mask, one line per PE, the
    mean over seeds with one standard deviation. ``sweeps["mask|pe"]`` is ``(seeds, N)``: the stored
    ``sweep_accuracy`` (the answer at item ``1..N``); missing labels are not drawn."""
    masks, pes = _masks_pes()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.2), sharey=True)
    for ax, mask in zip(axes, masks):
        for pe in pes:
            if f"{mask}|{pe}" in sweeps:
                s = np.asarray(sweeps[f"{mask}|{pe}"], dtype=float)
                ax.errorbar(np.arange(1, s.shape[1] + 1), s.mean(0), yerr=s.std(0), marker="o", ms=3,
                            capsize=2, label=_pe_name(f"{mask}|{pe}"))
        ax.set_xlabel("item holding the answer")
        ax.set_title(_mask_title(mask))
        _say_empty(ax)
    axes[0].set_ylabel("accuracy")
    _legend(axes)
    return fig


def fig4_sweep_figure(sweeps: dict[str, Any], wheres: tuple[str, ...] = ("first", "middle", "last")
                      ) -> matplotlib.figure.Figure:
    """Figure 4's networks against the slot of the answer: one panel per slot ``w`` biased in training,
    one line per architecture at the mean over seeds (solid: causal mask, dashed: no mask).
    ``sweeps["w|mask|pe"]`` is ``(seeds, N)``; missing labels are not drawn."""
    from posbias.measures import evaluate as ev  # lazy: posbias.measures.evaluate (torch) costs ~1.3s at import

    fig, axes = plt.subplots(1, len(wheres), figsize=(4 * len(wheres), 3.2), sharey=True, squeeze=False)
    for ax, w in zip(axes[0], wheres):
        for c in ev.FIG3_NAMES:
            if f"{w}|{c}" in sweeps:
                s = np.asarray(sweeps[f"{w}|{c}"], dtype=float).mean(0)
                ax.plot(np.arange(1, s.shape[0] + 1), s, marker="o", ms=3, label=ev.FIG3_NAMES[c],
                        ls="-" if c.startswith("causal") else "--")
        ax.set_title(f"answer at {w} in training")
        ax.set_xlabel("item holding the answer")
        _say_empty(ax)
    axes[0, 0].set_ylabel("accuracy")
    _legend(axes[0][::-1], fontsize=8, bbox_to_anchor=(1.02, 1), loc="upper left")
    return fig


def fig3_gap_curves_figure(results: dict[str, list[dict]]) -> matplotlib.figure.Figure:
    """Figure 3's three gaps against training iteration, one panel per gap, one line per architecture
    (``results["mask|pe"]``: stored units with ``curves``) at the mean over seeds."""
    from posbias.measures import evaluate as ev  # lazy: posbias.measures.evaluate (torch) costs ~1.3s at import

    fig, axes = plt.subplots(1, 3, figsize=(11, 3), sharey=True)
    for ax, p in zip(axes, [f"{a}-{b}" for a, b in ev.GAP_PAIRS]):
        for c in ev.FIG3_NAMES:
            if c in results:
                ax.plot(results[c][0]["curves"]["step"], ev.gap_curves(results[c])[p].mean(0),
                        label=ev.FIG3_NAMES[c])
        ax.axhline(0, color="k", lw=0.6)
        ax.set_title(p.replace("-", " vs "))
        ax.set_xlabel("training iteration")
        if len(ax.lines) == 1:
            ax.text(0.5, 0.5, _EMPTY, ha="center", va="center", transform=ax.transAxes)
    axes[0].set_ylabel("accuracy gap")
    _legend(axes[::-1], fontsize=8, bbox_to_anchor=(1.02, 1), loc="upper left")
    return fig


def fig4_preference_curves_figure(results: dict[str, list[dict]],
                                  wheres: tuple[str, ...] = ("first", "middle", "last")
                                  ) -> matplotlib.figure.Figure:
    """Figure 4's networks during training: one panel per slot ``w`` biased in training, one line per
    architecture (``results["w|mask|pe"]``: stored units with ``curves``), the preference for ``w``
    (:func:`posbias.measures.evaluate.slot_preference_curve`: the mean of the two gaps involving ``w``,
    signed toward it) at the mean over seeds."""
    from posbias.measures import evaluate as ev  # lazy: posbias.measures.evaluate (torch) costs ~1.3s at import

    fig, axes = plt.subplots(1, len(wheres), figsize=(4 * len(wheres), 3), sharey=True, squeeze=False)
    for ax, w in zip(axes[0], wheres):
        for c in ev.FIG3_NAMES:
            if f"{w}|{c}" in results:
                units = results[f"{w}|{c}"]
                ax.plot(units[0]["curves"]["step"], ev.slot_preference_curve(units, w).mean(0),
                        label=ev.FIG3_NAMES[c])
        ax.axhline(0, color="k", lw=0.6)
        ax.set(title=f"preference for the {w} slot", xlabel="training iteration")
        if len(ax.lines) == 1:
            ax.text(0.5, 0.5, _EMPTY, ha="center", va="center", transform=ax.transAxes)
    axes[0, 0].set_ylabel("mean of its two gaps")
    _legend(axes[0][::-1], fontsize=8, bbox_to_anchor=(1.02, 1), loc="upper left")
    return fig
