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
main column).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any


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


def setup(app):
    app.connect("builder-inited", _add_static)
    app.add_css_file("posbias.css")
    app.connect("html-page-context", _dedupe_scripts, priority=900)
    app.connect("html-page-context", _launch_from_source, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
