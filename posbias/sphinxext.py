"""A small Sphinx extension for the book: every script once per page, and no script from the network.

Jupyter Book 1 (with Sphinx 7) registers sphinx-thebe's configuration script twice, which makes the
browser throw "Identifier 'THEBE_JS_URL' has already been declared" on every page; and thebe itself is
fetched from a CDN when a reader presses "launch". The book is read offline, so drop both duplicates
and remote scripts.

The chapters are rendered from executed notebooks under ``book/_executed/`` that are built, not
committed, so the theme's "launch" links (Binder, ...) would point at files the repository does not
have: they are redirected to the chapter's source, ``notebooks/<id>.md`` (jupytext opens it as a
notebook). The download button keeps giving the executed ``.ipynb``.

It also adds the book's stylesheet, ``posbias/static/posbias.css`` (code cells that fit a laptop's
main column), and gives every figure without a written alt text its caption's first sentence as one
(:func:`figure_alt`): a glued figure would otherwise have its image's file path as its alt text.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from docutils import nodes


def _dedupe_scripts(app, pagename: str, templatename: str, context: dict[str, Any], doctree) -> None:
    scripts = context.get("script_files")
    if not scripts:
        return
    seen, kept = set(), []
    for s in scripts:
        filename = getattr(s, "filename", s)
        body = getattr(s, "attributes", {}).get("body", "") if hasattr(s, "attributes") else ""
        key = (str(filename or ""), body)
        if key in seen or str(filename).startswith(("http://", "https://")):
            continue
        seen.add(key)
        kept.append(s)
    context["script_files"] = kept


def launch_path(pagename: str) -> str | None:
    """``book/_executed/<id>/<id>`` -> ``notebooks/<id>.md``; None for pages that are not chapters."""
    parts = pagename.split("/")
    if len(parts) == 4 and parts[:2] == ["book", "_executed"] and parts[2] == parts[3]:
        return f"notebooks/{parts[2]}.md"
    return None


def _launch_from_source(app, pagename: str, templatename: str, context: dict[str, Any], doctree) -> None:
    target = launch_path(pagename)
    if target is None:
        return
    executed = f"{pagename}.ipynb"
    for group in context.get("header_buttons", []):
        for button in group.get("buttons", []) if isinstance(group, dict) else []:
            url = str(button.get("url", "")) if isinstance(button, dict) else ""
            if url.startswith(("http://", "https://")) and executed in url:  # launch, not download
                button["url"] = button["url"].replace(executed, target)


STATIC = Path(__file__).parent / "static"


def _add_static(app) -> None:
    """Serve ``posbias/static`` (the book's stylesheet) beside the theme's files."""
    app.config.html_static_path = [*app.config.html_static_path, str(STATIC)]


_TEX_WORDS = re.compile(r"\\(?:mathrm|mathbf|mathit|mathsf|text|textrm|operatorname)\b\s*")
_SENTENCE_END = re.compile(r"[.!?](?=\s+[^a-z\s]|\s*$)")
SHORT_SENTENCE = 60         # a first sentence shorter than this ("Wu et al., Figure 2, reproduced.") takes the next
_A_PATH = re.compile(r"\S*\.(?:png|svg|jpe?g|gif|pdf)", re.I)


def plain_math(tex: str) -> str:
    """TeX as a screen reader can say it: ``\\mathrm{acc}(\\mathrm{IC}_{a,b})`` -> ``acc(IC_a,b)``."""
    text = _TEX_WORDS.sub("", tex).replace("\\,", " ").replace("\\;", " ")
    text = re.sub(r"\\([A-Za-z]+)\s*", r" \1 ", text)
    return re.sub(r"\s+([_^])", r"\1", " ".join(re.sub(r"[{}]", "", text).split()))


def _plain_text(node: nodes.Node) -> str:
    if isinstance(node, nodes.math):
        return plain_math(node.astext())
    if isinstance(node, nodes.Text):
        return str(node)
    return "".join(_plain_text(child) for child in node.children)


def figure_alt(caption: str) -> str:
    """A figure's alt text from its caption: the first sentence, with the second when the first is short."""
    text = " ".join(caption.split())
    ends = [m.end() for m in _SENTENCE_END.finditer(text)] or [len(text)]
    cut = ends[1] if ends[0] < SHORT_SENTENCE and len(ends) > 1 else ends[0]
    return text[:cut].strip()


def _figure_alt_texts(app, doctree: nodes.document, docname: str) -> None:
    """Every image in a captioned figure whose alt text is missing (the HTML writer then writes its file
    path) or is that path gets :func:`figure_alt` of the caption; an alt text the author wrote stays."""
    for figure in doctree.findall(nodes.figure):
        caption = next(iter(figure.findall(nodes.caption)), None)
        if caption is None or not caption.astext().strip():
            continue
        alt = figure_alt(_plain_text(caption))
        for image in figure.findall(nodes.image):
            if not image.get("alt") or image["alt"] == image.get("uri") or _A_PATH.fullmatch(image["alt"]):
                image["alt"] = alt


def setup(app):
    app.connect("builder-inited", _add_static)
    app.add_css_file("posbias.css")
    app.connect("html-page-context", _dedupe_scripts, priority=900)
    app.connect("html-page-context", _launch_from_source, priority=900)
    app.connect("doctree-resolved", _figure_alt_texts)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
