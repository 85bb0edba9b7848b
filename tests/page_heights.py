"""How a page reads at 1280 x 900 in Chromium (issue 93): its visible height in screens, where its first figure
starts, and which tables are wider than the content column. Collapsed content (a closed dropdown, a hidden cell
output) is not counted: it is one click away, not in front of the reader.

Used by ``tests/test_browser.py`` on the smoke-built book, and by hand on any built page while reworking one::

    .venv/bin/jupyter-book build runs/x/<chapter>.ipynb --path-output runs/x/site
    .venv/bin/python tests/page_heights.py runs/x/site/_build/_page/<chapter>/html <chapter>.html
"""
from __future__ import annotations

import functools
import http.server
import shutil
import sys
import threading
from pathlib import Path

SCREEN = {"width": 1280, "height": 900}
#: The smallest text a figure may show a reader at :data:`SCREEN`, in CSS pixels (its PNG's
#: ``smallest_text_px`` times the width it is shown at over its natural width).
MIN_TEXT_PX = 9.0
#: A chapter's visible body is at most this many screens, and its first figure starts within the first 1.5.
MAX_SCREENS, FIRST_FIGURE = 8.0, 1.5
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"

MEASURE_JS = """() => {
  const art = document.querySelector('article.bd-article') || document.querySelector('main');
  if (!art) return null;
  const top = art.getBoundingClientRect().top + window.scrollY;
  // collapsed content (a closed dropdown, a toggled-off cell output) is laid out but not visible
  const shown = e => e.checkVisibility({checkOpacity: true, checkVisibilityCSS: true})
      && e.getBoundingClientRect().height > 0;
  const figs = Array.from(art.querySelectorAll('figure, img')).filter(shown);
  const first = figs.length ? figs[0].getBoundingClientRect().top + window.scrollY - top : null;
  const col = art.getBoundingClientRect().width;
  const wide = Array.from(art.querySelectorAll('table')).filter(shown)
      .map(t => Math.round(t.getBoundingClientRect().width)).filter(w => w > col + 1);
  const imgs = Array.from(art.querySelectorAll('figure img, img')).filter(shown).filter(i => i.naturalWidth > 0)
      .map(i => ({src: i.currentSrc || i.src, shown: i.getBoundingClientRect().width, natural: i.naturalWidth}));
  return {height: art.scrollHeight, first_figure: first, column: Math.round(col), wide_tables: wide, images: imgs};
}"""


def text_px(root: Path | None, base_url: str, images: list[dict]) -> list[tuple[str, float]]:
    """Per shown PNG image with a ``smallest_text_px`` in its provenance (a figure saved by ``posbias.figures.save``):
    its file name and the height of its smallest text as shown, in CSS pixels. Read from the files under ``root``."""
    import json
    from urllib.parse import unquote, urlparse

    from PIL import Image

    out = []
    for im in images if root is not None else []:
        rel = unquote(urlparse(im["src"]).path).lstrip("/")
        base = urlparse(base_url).path.lstrip("/")
        path = root / (rel[len(base):] if base and rel.startswith(base) else rel)
        if path.suffix.lower() != ".png" or not path.is_file():
            continue
        try:
            prov = json.loads(Image.open(path).text.get("Description", "{}"))
        except (ValueError, OSError):
            continue
        if "smallest_text_px" in prov:
            out.append((path.name, prov["smallest_text_px"] * min(1.0, im["shown"] / im["natural"])))
    return out


def measure(base_url: str, pages: list[str], wait_ms: int = 300, root: Path | None = None) -> dict[str, dict]:
    """Each page (a path under ``base_url``) measured at :data:`SCREEN`: ``{"screens", "first_figure"}`` (in
    screens from the top of the content; None without a figure), ``"column"`` (px), ``"wide_tables"``
    (widths of the tables wider than the column) and, with the site's ``root``, ``"text_px"``
    (:func:`text_px`: each shown figure's smallest text as the reader sees it)."""
    from playwright.sync_api import sync_playwright

    out = {}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=["--headless", "--no-sandbox"], headless=True)
        page = browser.new_page(viewport=SCREEN)
        for rel in pages:
            page.goto(base_url.rstrip("/") + "/" + rel, wait_until="load")
            page.wait_for_timeout(wait_ms)
            r = page.evaluate(MEASURE_JS)
            if r is None:
                out[rel] = {"screens": None, "first_figure": None, "column": None, "wide_tables": [], "text_px": []}
                continue
            h = SCREEN["height"]
            out[rel] = {"screens": r["height"] / h,
                        "first_figure": None if r["first_figure"] is None else r["first_figure"] / h,
                        "column": r["column"], "wide_tables": r["wide_tables"],
                        "text_px": text_px(root, base_url, r["images"])}
        browser.close()
    return out


def problems(rel: str, m: dict) -> list[str]:
    """What breaks the rule of :data:`MAX_SCREENS` and :data:`FIRST_FIGURE` on one measured chapter."""
    if m["screens"] is None:
        return [f"{rel}: no content column to measure"]
    out = []
    if m["screens"] > MAX_SCREENS:
        out.append(f"{rel}: {m['screens']:.1f} screens visible, more than {MAX_SCREENS:g}")
    if m["first_figure"] is None or m["first_figure"] > FIRST_FIGURE:
        where = "no figure" if m["first_figure"] is None else f"its first figure at {m['first_figure']:.2f} screens"
        out.append(f"{rel}: {where}, not within the first {FIRST_FIGURE:g}")
    if m["wide_tables"]:
        out.append(f"{rel}: tables wider than the {m['column']} px column: {m['wide_tables']}")
    small = [f"{name} ({px:.1f} px)" for name, px in m.get("text_px", []) if px < MIN_TEXT_PX]
    if small:
        out.append(f"{rel}: figure text smaller than {MIN_TEXT_PX:g} px at {SCREEN['width']} px: {', '.join(small)}")
    return out


def line(rel: str, m: dict) -> str:
    """One printed row: screens, first figure, wide tables, page."""
    ff = "-" if m["first_figure"] is None else f"{m['first_figure']:.2f}"
    sc = "-" if m["screens"] is None else f"{m['screens']:.1f}"
    tx = min((px for _, px in m.get("text_px", [])), default=None)
    tx = "-" if tx is None else f"{tx:.1f}"
    return (f"{sc:>6} screens  first figure {ff:>5}  wide tables {len(m['wide_tables'])}  "
            f"smallest text {tx:>5} px  {rel}")


def serve(root: Path) -> tuple[str, http.server.ThreadingHTTPServer]:
    """Serve ``root`` on a free local port; returns the base URL and the server (call ``shutdown``)."""
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(root)))
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{httpd.server_address[1]}/", httpd


if __name__ == "__main__":
    root = Path(sys.argv[1])
    rels = sys.argv[2:] or sorted(str(p.relative_to(root)) for p in root.rglob("*.html")
                                  if "_static" not in p.parts and p.name not in ("genindex.html", "search.html"))
    url, httpd = serve(root)
    try:
        got = measure(url, rels, root=root)
    finally:
        httpd.shutdown()
    bad = False
    for rel, m in got.items():
        print(line(rel, m))
        for p in problems(rel, m):
            print("   ", p)
            bad = True
    sys.exit(1 if bad else 0)
