"""One figure style and one ``save`` that writes PNG, SVG and PDF with their provenance embedded.

Files are byte-identical across builds of the same commit and parameters: no dates in the metadata,
a fixed SVG hash salt, and ``SOURCE_DATE_EPOCH`` honoured by the PDF backend.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg") if not os.environ.get("MPLBACKEND") else None
import matplotlib.pyplot as plt  # noqa: E402

from .provenance import git_state, sha256_file  # noqa: E402

__all__ = ["style", "save", "FORMATS"]

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
    """A saved figure's record (a plain dict) that shows as one line when it ends a notebook cell."""

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(f"saved figure {self['name']!r}: " + ", ".join(f["path"] for f in self["files"].values()))


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


def save(fig: matplotlib.figure.Figure, name: str, caption: str = "") -> SavedFigure:
    """Write ``fig`` as ``<run dir>/figures/<name>.{png,svg,pdf}`` with embedded provenance.

    The figure is also glued under ``name`` for a ``{glue:figure}`` directive in the chapter (which
    gives it a number, a caption and a stable anchor) and closed, so it is not shown twice. Returns the
    figure's record: files with SHA-256, and the provenance.
    """
    from . import report

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
        tmp = out / f".{name}.tmp.{ext}"
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
