"""One figure style and one ``save`` that writes PNG, SVG and PDF with their provenance embedded.

Files are byte-identical across builds of the same commit and parameters: no dates in the metadata,
a fixed SVG hash salt, and ``SOURCE_DATE_EPOCH`` honoured by the PDF backend.

A figure's caption is written once, in the chapter's ``{glue:figure}`` directive: ``posbias run`` passes
the chapter's captions as ``POSBIAS_CAPTIONS`` (JSON, :func:`posbias.book.chapters.figure_captions`) and
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

from posbias.analysis import evidence  # noqa: E402
from posbias.storage.provenance import git_state, sha256_file  # noqa: E402

__all__ = ["style", "save", "caption_for", "resolve_glue", "FORMATS", "SavedFigure", "smallest_text_px",
           "fit_to_column", "COLUMN_PX", "MIN_TEXT_PX", "overlapping_text"]

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
    from posbias.storage import report  # lazy: posbias.storage.report costs ~0.1s and hooks the store

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


#: The width a page shows a figure at, in CSS pixels: at 1280 px the book shows a figure 764 px wide in its content
#: column and 729 px inside a dropdown (measured in the built book), less a margin. :data:`MIN_TEXT_PX`: the smallest
#: text a reader should see there.
COLUMN_PX, MIN_TEXT_PX = 720, 9.0


def _dpi(fig: matplotlib.figure.Figure) -> float:
    return float(plt.rcParams["savefig.dpi"]) if plt.rcParams["savefig.dpi"] != "figure" else fig.dpi


def fit_to_column(fig: matplotlib.figure.Figure, column_px: float = COLUMN_PX, min_px: float = MIN_TEXT_PX) -> float:
    """Shrink ``fig`` (its size in inches, both sides by one factor; text keeps its size in points) until its
    smallest text, shown ``column_px`` wide, is at least ``min_px`` high: a wide figure of many panels would
    otherwise be scaled down by the page until its labels cannot be read. Returns the factor (1.0: unchanged)."""
    total = 1.0
    for _ in range(4):
        px = smallest_text_px(fig)
        width = fig.get_tightbbox(fig.canvas.get_renderer()).width * _dpi(fig)     # the saved PNG's width
        shown = px * min(1.0, column_px / width)
        if shown >= min_px * 0.995 or px == float("inf"):
            break
        f = shown / min_px
        w, h = fig.get_size_inches()
        fig.set_size_inches(w * f, h * f)
        total *= f
    return round(total, 4)


def _drawn_texts(fig: matplotlib.figure.Figure) -> list:
    """The texts a drawn ``fig`` shows: its own (suptitle, figure texts, legends), and per axes its titles, axis
    labels, legend and the tick labels of ticks inside the view (matplotlib keeps labels of other ticks, undrawn)."""
    from matplotlib.text import Text

    out = [t for t in fig.texts] + [t for leg in fig.legends for t in leg.get_texts()]
    if fig._suptitle is not None:
        out.append(fig._suptitle)
    for ax in fig.axes:
        if not ax.get_visible():
            continue
        out += [ax.title, ax._left_title, ax._right_title, ax.xaxis.label, ax.yaxis.label]
        out += [t for t in ax.texts]
        if ax.get_legend() is not None:
            out += list(ax.get_legend().get_texts())
        for axis, (lo, hi) in ((ax.xaxis, sorted(ax.get_xlim())), (ax.yaxis, sorted(ax.get_ylim()))):
            for tick in axis.get_major_ticks():
                if lo - 1e-9 * abs(hi - lo) <= tick.get_loc() <= hi + 1e-9 * abs(hi - lo):
                    out += [tick.label1, tick.label2]
    seen: set[int] = set()                                # a suptitle is among the figure's texts too
    return [t for t in out if isinstance(t, Text) and t.get_visible() and t.get_text().strip()
            and not (id(t) in seen or seen.add(id(t)))]


def overlapping_text(fig: matplotlib.figure.Figure) -> list[tuple[str, str]]:
    """Pairs of texts ``fig`` shows (:func:`_drawn_texts`: titles, labels, tick labels, legend entries) whose boxes
    overlap by more than a pixel each way once drawn: two titles run into each other when a row of panels is too
    narrow for them. Each pair by its two strings."""
    from matplotlib.transforms import Bbox

    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    boxes = [(t.get_text(), t.get_window_extent(r)) for t in _drawn_texts(fig)]
    out = []
    for i, (a, ba) in enumerate(boxes):
        for b, bb in boxes[i + 1:]:
            inter = Bbox.intersection(ba, bb)
            if inter is not None and inter.width > 1 and inter.height > 1:
                out.append((a, b))
    return out


def smallest_text_px(fig: matplotlib.figure.Figure) -> float:
    """The height in pixels of the smallest visible text of ``fig`` in its saved PNG (font size in points times
    ``savefig.dpi`` / 72): tick labels, titles, legends, annotations. A page that shows the PNG narrower than its
    natural width shrinks it by the same factor (``tests/page_heights.py`` checks what a reader sees)."""
    from matplotlib.text import Text

    fig.canvas.draw()                                     # tick labels exist once the figure is drawn
    dpi = _dpi(fig)
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
    from posbias.storage import report  # lazy: posbias.storage.report costs ~0.1s and hooks the store

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
    (:mod:`posbias.analysis.evidence`), and the figure is cited by them. Without it, the provenance lists every
    file the run had read so far.

    The figure is also glued under ``name`` for a ``{glue:figure}`` directive in the chapter (which
    gives it a number, a caption and a stable anchor) and closed, so it is not shown twice. In a
    chapter run the caption is that directive's body (:func:`caption_for`): pass no ``caption``;
    interactively ``caption`` is optional. Returns the figure's record: files with SHA-256, the
    caption and the provenance; ending a cell, it shows nothing.
    """
    from posbias.storage import report  # lazy: posbias.storage.report costs ~0.1s and hooks the store

    caption = caption_for(name, caption)
    run_dir = Path(os.environ.get("POSBIAS_RUN_DIR", "."))
    out = run_dir / "figures"
    out.mkdir(parents=True, exist_ok=True)
    prov = _provenance(name, caption, data)
    prov["shrunk_to_column"] = fit_to_column(fig)
    prov["smallest_text_px"] = smallest_text_px(fig)
    prov["overlapping_text"] = [list(p) for p in overlapping_text(fig)]
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
