"""A small Sphinx extension for the book: every script once per page, and no script from the network.

Jupyter Book 1 (with Sphinx 7) registers sphinx-thebe's configuration script twice, which makes the
browser throw "Identifier 'THEBE_JS_URL' has already been declared" on every page; and thebe itself is
fetched from a CDN when a reader presses "launch". The book is read offline, so drop both duplicates
and remote scripts.
"""
from __future__ import annotations

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


def setup(app):
    app.connect("html-page-context", _dedupe_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
