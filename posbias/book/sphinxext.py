"""A small Sphinx extension for the book: every script once per page, and no script from the network.

Jupyter Book 1 (with Sphinx 7) registers sphinx-thebe's configuration script twice, which makes the
browser throw "Identifier 'THEBE_JS_URL' has already been declared" on every page; and thebe itself is
fetched from a CDN when a reader presses "launch". The book is read offline, so drop both duplicates
and remote scripts.

The chapters are rendered from executed notebooks under ``book/_executed/`` that are built, not
committed, so the theme's "launch" links (Binder, ...) would point at files the repository does not
have: they are redirected to the chapter's source, ``notebooks/<id>.md`` (jupytext opens it as a
notebook). The download button keeps giving the executed ``.ipynb``.

It also adds the book's stylesheet, ``posbias/book/static/posbias.css`` (code cells that fit a laptop's
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
    """Serve ``posbias/book/static`` (the book's stylesheet) beside the theme's files."""
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


#: Where a glossary term is never linked automatically: code, math, links, headings, captions, a cell's input or
#: output, and the glossary's own entries.
_NO_LINK = (nodes.literal, nodes.literal_block, nodes.reference, nodes.title, nodes.caption, nodes.math,
            nodes.math_block, nodes.raw, nodes.term, nodes.definition_list, nodes.rubric, nodes.field_name)


def _term_pattern(term: str) -> re.Pattern:
    """A term as a whole word, in the singular or with a plain ending (``retrieves``, ``units``, ``branches``);
    a term of one or two characters (``U``) only in its own case."""
    body = r"\s+".join(re.escape(w) for w in term.split())
    return re.compile(rf"(?<![\w-]){body}(?:s|es|d|ed)?(?![\w-])", 0 if len(term) <= 2 else re.IGNORECASE)


def link_terms(doctree: nodes.Node, terms: dict[str, str]) -> list[str]:
    """Link the first use of each glossary term in ``doctree``'s prose to its entry: ``terms`` maps a term to its
    URI. A term the page already links (a ``{term}`` role, resolved to a reference with that URI) is left alone;
    text under :data:`_NO_LINK` or inside a notebook cell is never touched. Longer terms first, so "after Holm"
    wins over a shorter term inside it. Returns the terms linked, in the order linked."""
    linked = {n.get("refuri", "").split("#")[-1] for n in doctree.findall(nodes.reference)}
    todo = sorted((t for t, uri in terms.items() if uri.split("#")[-1] not in linked), key=len, reverse=True)
    done: list[str] = []

    def allowed(node: nodes.Node) -> bool:
        p = node.parent
        while p is not None:
            if isinstance(p, _NO_LINK) or (isinstance(p, nodes.container) and
                                           any(c.startswith("cell") for c in p.get("classes", []))):
                return False
            p = p.parent
        return True

    for term in todo:
        pat = _term_pattern(term)
        for text in list(doctree.findall(nodes.Text)):
            if text.parent is None or not allowed(text):
                continue
            m = pat.search(str(text))
            if m is None:
                continue
            s = str(text)
            ref = nodes.reference("", m.group(0), refuri=terms[term], internal=True, classes=["glossary-term"],
                                  reftitle=f"glossary: {term}")
            new = [nodes.Text(s[:m.start()]), ref, nodes.Text(s[m.end():])]
            text.parent.replace(text, [n for n in new if not (isinstance(n, nodes.Text) and not str(n))])
            done.append(term)
            break
    return done


def _link_glossary(app, doctree: nodes.document, docname: str) -> None:
    """:func:`link_terms` with the book's glossary (the ``std`` domain's terms), on every page but the glossary."""
    std = app.env.get_domain("std")
    terms = {name: (doc, label) for (kind, name), (doc, label) in std.objects.items() if kind == "term"}
    if not terms or all(doc == docname for doc, _ in terms.values()):
        return
    uri = {name: app.builder.get_relative_uri(docname, doc) + "#" + label for name, (doc, label) in terms.items()
           if doc != docname}
    link_terms(doctree, uri)


def setup(app):
    app.connect("builder-inited", _add_static)
    app.add_css_file("posbias.css")
    app.connect("html-page-context", _dedupe_scripts, priority=900)
    app.connect("html-page-context", _launch_from_source, priority=900)
    app.connect("doctree-resolved", _figure_alt_texts)
    app.connect("doctree-resolved", _link_glossary)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
