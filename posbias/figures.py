"""One figure style and one ``save`` that writes PNG, SVG and PDF with their provenance embedded.

Files are byte-identical across builds of the same commit and parameters: no dates in the metadata,
a fixed SVG hash salt, and ``SOURCE_DATE_EPOCH`` honoured by the PDF backend.

A figure's caption is written once, in the chapter's ``{glue:figure}`` directive: ``posbias run`` passes
the chapter's captions as ``POSBIAS_CAPTIONS`` (JSON, :func:`posbias.chapters.figure_captions`) and
``save`` takes the figure's from there, its ``{glue:text}`` roles filled in (:func:`caption_for`).
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg") if not os.environ.get("MPLBACKEND") else None
import matplotlib.pyplot as plt  # noqa: E402

from .provenance import git_state, sha256_file  # noqa: E402

__all__ = ["style", "save", "caption_for", "resolve_glue", "FORMATS"]

FORMATS = ("png", "svg", "pdf")


def style() -> None:
    """The book's one figure style (seaborn, colour-blind palette, deterministic SVG ids)."""
    import seaborn as sns

    sns.set_theme(context="notebook", style="whitegrid", palette="colorblind")
    plt.rcParams.update({
        "figure.dpi": 100,
        "savefig.dpi": 150,
        "savefig.bbox": "tight",
        "svg.hashsalt": "posbias",
        "svg.fonttype": "path",
        "pdf.compression": 6,
        "font.size": 10,
        "axes.titlesize": 10,
        "figure.constrained_layout.use": True,
    })


def _provenance(name: str, caption: str) -> dict[str, Any]:
    from . import report

    rec = report.record()
    return {
        "figure": name,
        "chapter": os.environ.get("POSBIAS_CHAPTER", "interactive"),
        "caption": caption,
        "parameters": json.loads(os.environ.get("POSBIAS_PARAMS", "{}")),
        "profile": os.environ.get("POSBIAS_PROFILE", ""),
        "commit": git_state()["commit"],
        "data": [{"path": d["path"], "sha256": d["sha256"]} for d in rec["data"]],
    }


class SavedFigure(dict):
    """A saved figure's record (a plain dict). A cell ending in ``figures.save(...)`` shows nothing (the
    figure appears where its ``{glue:figure}`` directive is); ``pretty`` gives one line."""

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(f"saved figure {self['name']!r}: " + ", ".join(f["path"] for f in self["files"].values()))

    def _ipython_display_(self) -> None:
        """IPython's display hook calls this instead of publishing a representation: no output."""
        return None


_GLUE_ROLE = re.compile(r"\{glue(?::(?P<kind>[\w-]*))?\}`(?P<content>[^`]*)`")


def _format_glued(value: Any, fmt: str) -> str:
    """``value`` as ``{glue:text}`name:fmt``` shows it: myst-nb's own ``format_plain_text`` applied to
    the value's plain-text form, ``repr`` (what the glued output holds)."""
    from myst_nb.core.variables import format_plain_text

    return format_plain_text(repr(value), fmt)


def resolve_glue(caption: str, values: dict[str, Any], where: str = "the caption") -> str:
    """``caption`` with each ``{glue:text}`NAME``` / ``{glue:text}`NAME:FMT``` role replaced by the
    value recorded under NAME (``report.value``), formatted with FMT. A name not in ``values`` (not
    glued yet), a format that does not apply, or another glue role is a ValueError naming it; math
    and any other markup are kept as written."""

    def one(m: re.Match) -> str:
        role = m.group(0)
        if m["kind"] != "text":
            raise ValueError(f"{where}: {role} cannot be filled in a figure's caption; use {{glue:text}}")
        if "::" in m["content"]:
            raise ValueError(f"{where}: {role} glues from another page; a caption glues its own chapter's values")
        name, _, fmt = m["content"].partition(":")
        if name not in values:
            raise ValueError(f"{where}: {role} names {name!r}, which is not glued yet; call "
                             f"report.value({name!r}, ...) before saving the figure")
        try:
            return _format_glued(values[name], fmt)
        except (TypeError, ValueError) as e:
            raise ValueError(f"{where}: {role}: cannot format {values[name]!r} with {fmt!r} ({e})") from None

    return _GLUE_ROLE.sub(one, caption)


def caption_for(name: str, caption: str | None = None) -> str:
    """The caption ``save`` embeds for figure ``name``.

    In a chapter run (``POSBIAS_CAPTIONS`` set by ``posbias run``) it is the body of the chapter's
    ```` ```{glue:figure} name ```` directive, its ``{glue:text}`` roles filled in from the values
    recorded so far (:func:`resolve_glue`); a figure without a directive, or a ``caption`` given as
    well, is a ValueError: a caption has one source. Outside a run (interactive use) it is
    ``caption``, or empty."""
    from . import report

    raw = os.environ.get("POSBIAS_CAPTIONS")
    if raw is None:
        return caption or ""
    chapter = os.environ.get("POSBIAS_CHAPTER", "this chapter")
    if caption is not None:
        raise ValueError(f"figures.save({name!r}, caption=...) in chapter {chapter!r}: a figure's caption is the "
                         f"body of its ```{{glue:figure}} {name} directive; remove caption= (one source)")
    captions = json.loads(raw)
    if name not in captions:
        raise ValueError(f"figure {name!r} has no ```{{glue:figure}} {name} directive in chapter {chapter!r} "
                         f"(notebooks/{chapter}.md); add one below the cell that saves it: its body is the caption")
    return resolve_glue(captions[name], report.record()["values"], f"the caption of figure {name!r}")


class _Glued:
    """What is glued for ``{glue:figure}``: the saved PNG itself (the book shows the exact file that is
    cited, whatever matplotlib backend the kernel runs), with the caption as its plain-text form."""

    def __init__(self, png: Path, caption: str) -> None:
        self.png, self.caption = png, caption

    def _repr_png_(self) -> bytes:
        return self.png.read_bytes()

    def _repr_pdf_(self) -> bytes:  # the PDF book takes the vector file (HTML shows the PNG)
        return self.png.with_suffix(".pdf").read_bytes()

    def __repr__(self) -> str:
        return self.caption or self.png.name


def gap_curves_figure(results: dict[str, list[dict]], pes: list[str], depths: list[int],
                      spread: bool = False) -> matplotlib.figure.Figure:
    """The three gaps of Wu et al. against training iteration, one panel per gap: the mean over
    seeds of ``results[f"{pe}|{depth}"]`` (stored units with ``curves``), line style = PE, colour
    = depth, and with ``spread`` a band of one standard deviation over seeds."""
    from . import evaluate as ev

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
        ax.set_xlabel("training iteration (thousands)")
    axes[0].set_ylabel("accuracy gap")
    if depths:
        axes[-1].legend(fontsize=7, frameon=False, bbox_to_anchor=(1.02, 1), loc="upper left")
    else:
        axes[1].text(0.5, 0.5, "no complete depth yet", ha="center", transform=axes[1].transAxes)
    return fig


def save(fig: matplotlib.figure.Figure, name: str, caption: str | None = None) -> SavedFigure:
    """Write ``fig`` as ``<run dir>/figures/<name>.{png,svg,pdf}`` with embedded provenance.

    The figure is also glued under ``name`` for a ``{glue:figure}`` directive in the chapter (which
    gives it a number, a caption and a stable anchor) and closed, so it is not shown twice. In a
    chapter run the caption is that directive's body (:func:`caption_for`): pass no ``caption``;
    interactively ``caption`` is optional. Returns the figure's record: files with SHA-256, the
    caption and the provenance; ending a cell, it shows nothing.
    """
    from . import report

    caption = caption_for(name, caption)
    run_dir = Path(os.environ.get("POSBIAS_RUN_DIR", "."))
    out = run_dir / "figures"
    out.mkdir(parents=True, exist_ok=True)
    prov = _provenance(name, caption)
    desc = json.dumps(prov, sort_keys=True)
    title = f"{prov['chapter']}: {name}"
    meta = {
        "png": {"Title": title, "Description": desc, "Software": "posbias"},
        "svg": {"Title": title, "Description": desc, "Date": None, "Creator": "posbias"},
        "pdf": {"Title": title, "Subject": desc, "Creator": "posbias", "Producer": "posbias",
                "CreationDate": None, "ModDate": None},
    }
    files = {}
    for ext in FORMATS:
        path = out / f"{name}.{ext}"
        tmp = out / f".{name}.{os.getpid()}.tmp.{ext}"     # unique per process: runs may share a folder
        fig.savefig(tmp, format=ext, metadata=meta[ext])
        os.replace(tmp, path)
        files[ext] = {"path": f"figures/{name}.{ext}", "sha256": sha256_file(path)}
    entry = SavedFigure(name=name, caption=caption, files=files, provenance=prov)
    report.note_figure(entry)
    try:
        from myst_nb import glue

        if report._in_notebook():
            glue(name, _Glued(out / f"{name}.png", caption), display=False)
    except ImportError:  # pragma: no cover
        pass
    plt.close(fig)
    return entry


def gap_bars_figure(results: dict[str, list[dict]], pes: list[str], depths: list[int],
                    n_test: int) -> matplotlib.figure.Figure:
    """Wu et al.'s Figure 2 as the paper draws it: one panel per depth, the three gaps as bars grouped
    by gap, one bar per PE; each bar the mean over the seeds of ``results[f"{pe}|{depth}"]`` with an
    error bar of one standard error (:func:`posbias.evaluate.seed_mean_se`, ``n_test`` sequences)."""
    from . import evaluate as ev

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
    import numpy as np

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


def sink_comparison_figure(toy: dict[str, Any], real: dict[str, Any], table: Any) -> matplotlib.figure.Figure:
    """Toy networks beside a real decoder on one sink metric. Left: the sink rate against the relative
    position ``(k - 1) / (n - 2)`` of keys ``1..n-1`` (the last key, the query itself, left out), one
    line per curve of ``toy`` (marked) and of ``real`` (plain), each ``label -> (n,)`` rates. Right:
    one bar per row of ``table`` (a DataFrame with columns ``network``, ``rate at the sink`` and
    ``max elsewhere``): the rate at the sink position beside the largest rate elsewhere."""
    import itertools

    import numpy as np

    fig, axes = plt.subplots(1, 2, figsize=(12, 3.8), gridspec_kw={"width_ratios": [1.2, 1]})
    for curves, styles in ((toy, ("o-", "s--", "^-.", "d:")), (real, ("-", ":", "--", "-."))):
        for (label, rate), style in zip(curves.items(), itertools.cycle(styles)):
            r = np.asarray(rate, dtype=float)[:-1]
            axes[0].plot(np.arange(len(r)) / max(len(r) - 1, 1), r, style, label=label)
    axes[0].set(xlabel="(k - 1) / (n - 2)", ylabel="sink rate", ylim=(-0.02, 1.02))
    axes[0].legend(fontsize=7)
    y = np.arange(len(table))
    axes[1].barh(y, table["rate at the sink"], color="C0", label="at the sink")
    axes[1].barh(y, table["max elsewhere"], color="C3", alpha=0.6, height=0.4, label="elsewhere")
    axes[1].set_yticks(y, table["network"], fontsize=7)
    axes[1].invert_yaxis()
    axes[1].set(xlim=(0, 1), xlabel="sink rate")
    axes[1].legend(fontsize=7)
    return fig


def attention_maps_figure(maps: Any, mask: Any, title: str = "") -> matplotlib.figure.Figure:
    """Wu et al.'s Figure 5 layout: one heat map per layer of a mean attention map ``(depth, T, T)``
    (rows: queries, columns: keys), masked entries blank, tokens labelled ``x1 l1 ... x8 l8 xq``."""
    import numpy as np

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
        ax.set_xticks(range(T), labels, fontsize=6, rotation=90)
        ax.set_yticks(range(T), labels, fontsize=6)
        fig.colorbar(im, ax=ax, fraction=0.046)
    return fig


def alpha_profile_figure(alpha: Any, alpha_unif: Any) -> matplotlib.figure.Figure:
    """``alpha_k`` of each layer against key position, mean over seeds with one standard deviation,
    from ``alpha`` ``(seeds, depth, T)``, beside the uniform-attention baseline ``alpha_unif`` ``(T,)``."""
    import numpy as np

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


def hero_figure(h: Any) -> matplotlib.figure.Figure:
    """The front page's figure from :class:`posbias.scoreboard.HeroData`: the pull toward the first
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


# --------------------------------------------------------------------------- Figures 3 and 4 (Wu et al.)
# Architectures are labelled ``mask|pe`` (masks ``full`` and ``causal``, PEs ``none``, ``sin``, ``rope``:
# :data:`posbias.evaluate.FIG3_NAMES`), prefixed with ``w|`` (``first``, ``middle``, ``last``: the slot
# biased in training) in Figure 4. A label missing from the input is not drawn, so a figure can be
# drawn from the configurations stored so far; a panel with nothing to draw says so.

_EMPTY = "no configuration complete yet"


def _masks_pes() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The masks and the PEs of Figures 3 and 4, in the order of :data:`posbias.evaluate.FIG3_NAMES`."""
    from . import evaluate as ev

    labels = [k.split("|") for k in ev.FIG3_NAMES]
    return tuple(dict.fromkeys(m for m, _ in labels)), tuple(dict.fromkeys(p for _, p in labels))


def _pe_name(label: str) -> str:
    """``"causal|rope"`` -> ``"RoPE"``: the PE part of :data:`posbias.evaluate.FIG3_NAMES`."""
    from . import evaluate as ev

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
    import numpy as np

    from . import evaluate as ev

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
    :data:`posbias.evaluate.IC_SETS` (:func:`posbias.evaluate.ic_accuracy_by_set` of the units);
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

    ``acc["w|mask|pe"]`` is ``(seeds, 6)`` in the order of :data:`posbias.evaluate.IC_SETS`;
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
    import numpy as np

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
    import numpy as np

    from . import evaluate as ev

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
    _legend(axes[0][::-1], fontsize=7, bbox_to_anchor=(1.02, 1), loc="upper left")
    return fig


def fig3_gap_curves_figure(results: dict[str, list[dict]]) -> matplotlib.figure.Figure:
    """Figure 3's three gaps against training iteration, one panel per gap, one line per architecture
    (``results["mask|pe"]``: stored units with ``curves``) at the mean over seeds."""
    from . import evaluate as ev

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
    _legend(axes[::-1], fontsize=7, bbox_to_anchor=(1.02, 1), loc="upper left")
    return fig


def fig4_preference_curves_figure(results: dict[str, list[dict]],
                                  wheres: tuple[str, ...] = ("first", "middle", "last")
                                  ) -> matplotlib.figure.Figure:
    """Figure 4's networks during training: one panel per slot ``w`` biased in training, one line per
    architecture (``results["w|mask|pe"]``: stored units with ``curves``), the preference for ``w``
    (:func:`posbias.evaluate.slot_preference_curve`: the mean of the two gaps involving ``w``,
    signed toward it) at the mean over seeds."""
    from . import evaluate as ev

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
    _legend(axes[0][::-1], fontsize=7, bbox_to_anchor=(1.02, 1), loc="upper left")
    return fig
