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

from .. import evidence  # noqa: E402
from ..provenance import git_state, sha256_file  # noqa: E402

__all__ = ["style", "save", "caption_for", "resolve_glue", "FORMATS", "SavedFigure", "smallest_text_px"]

FORMATS = ("png", "svg", "pdf")


def style() -> None:
    """The book's one figure style (seaborn, colour-blind palette, deterministic SVG ids)."""
    import seaborn as sns  # lazy: seaborn costs ~1.7s at import

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


def _provenance(name: str, caption: str, data: Any = None) -> dict[str, Any]:
    from .. import report  # lazy: posbias.report costs ~0.1s and hooks the store

    if data is None:        # every file the run had read when the figure was saved
        files, scope = evidence.portable(report.record()["data"]), "read by the run"
    else:                   # the stored results the figure draws, named by the chapter
        files, scope = evidence.data_files(data), "drawn"
    return {
        "figure": name,
        "chapter": os.environ.get("POSBIAS_CHAPTER", "interactive"),
        "caption": caption,
        "parameters": json.loads(os.environ.get("POSBIAS_PARAMS", "{}")),
        "profile": os.environ.get("POSBIAS_PROFILE", ""),
        "commit": git_state()["commit"],
        "data": files,
        "data_scope": scope,
        "evidence": evidence.record(files),
    }


def smallest_text_px(fig: matplotlib.figure.Figure) -> float:
    """The height in pixels of the smallest visible text of ``fig`` in its saved PNG (font size in points times
    ``savefig.dpi`` / 72): tick labels, titles, legends, annotations. A page that shows the PNG narrower than its
    natural width shrinks it by the same factor (``tests/page_heights.py`` checks what a reader sees)."""
    from matplotlib.text import Text

    fig.canvas.draw()                                     # tick labels exist once the figure is drawn
    dpi = float(plt.rcParams["savefig.dpi"]) if plt.rcParams["savefig.dpi"] != "figure" else fig.dpi
    sizes = [t.get_fontsize() for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
    return round(min(sizes) * dpi / 72, 2) if sizes else float("inf")


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
    from myst_nb.core.variables import format_plain_text  # lazy: myst_nb.core.variables costs ~0.9s at import

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
    from .. import report  # lazy: posbias.report costs ~0.1s and hooks the store

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


def save(fig: matplotlib.figure.Figure, name: str, caption: str | None = None, data: Any = None) -> SavedFigure:
    """Write ``fig`` as ``<run dir>/figures/<name>.{png,svg,pdf}`` with embedded provenance.

    ``data``: the stored trained-network results the figure draws (a campaign's label -> results, or
    any nesting of results); their files, settings and a hash of their list go into the provenance
    (:mod:`posbias.evidence`), and the figure is cited by them. Without it, the provenance lists every
    file the run had read so far.

    The figure is also glued under ``name`` for a ``{glue:figure}`` directive in the chapter (which
    gives it a number, a caption and a stable anchor) and closed, so it is not shown twice. In a
    chapter run the caption is that directive's body (:func:`caption_for`): pass no ``caption``;
    interactively ``caption`` is optional. Returns the figure's record: files with SHA-256, the
    caption and the provenance; ending a cell, it shows nothing.
    """
    from .. import report  # lazy: posbias.report costs ~0.1s and hooks the store

    caption = caption_for(name, caption)
    run_dir = Path(os.environ.get("POSBIAS_RUN_DIR", "."))
    out = run_dir / "figures"
    out.mkdir(parents=True, exist_ok=True)
    prov = _provenance(name, caption, data)
    prov["smallest_text_px"] = smallest_text_px(fig)
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
        from myst_nb import glue  # optional dependency

        if report._in_notebook():
            glue(name, _Glued(out / f"{name}.png", caption), display=False)
    except ImportError:  # pragma: no cover
        pass
    plt.close(fig)
    return entry
