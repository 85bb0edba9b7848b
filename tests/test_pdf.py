"""The PDF of the book (`make pdf`): XeLaTeX over the smoke executions of the session's book build.

Needs Debian's TeX packages (`make tex` installs them); without `xelatex` the tests are skipped, also in CI.
The chapters are not executed again: the PDF is built in the tree of the `smoke_book` fixture with the same
function `posbias build --builder pdflatex` calls after its executions.
"""
import json
import re
import shutil
import subprocess
import sys
import time

import pytest

from posbias.book.build import latex_problems, toc_chapters

NO_TEX = [t for t in ("xelatex", "latexmk") if shutil.which(t) is None]
pytestmark = [
    pytest.mark.book,
    pytest.mark.skipif(bool(NO_TEX), reason=f"{' and '.join(NO_TEX)} not on PATH: the PDF needs Debian's TeX "
                                            "packages (`make tex` installs them)"),
]

MIN_PAGES = 100          # the smoke book is about 215 pages


@pytest.fixture(scope="module")
def smoke_pdf(smoke_book) -> dict:
    root = smoke_book["root"]
    if not (root / "book" / "_executed" / "status.md").exists():
        pytest.skip("the smoke book build did not execute the chapters (see test_book.py)")
    t0 = time.perf_counter()
    code = "import sys; from posbias.book.build import build_pdf; sys.exit(build_pdf())"
    proc = subprocess.run([sys.executable, "-c", code],
                          cwd=root, env=smoke_book["env"], capture_output=True, text=True, timeout=900)
    pdf = root / "_build" / "latex" / "posbias.pdf"
    return {"root": root, "code": proc.returncode, "log": proc.stdout + proc.stderr, "pdf": pdf,
            "texlog": pdf.with_suffix(".log"), "seconds": time.perf_counter() - t0}


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} (Debian's poppler-utils) not on PATH")
    return path


def _text(smoke_pdf) -> str:
    return subprocess.run([_tool("pdftotext"), "-enc", "UTF-8", str(smoke_pdf["pdf"]), "-"],
                          capture_output=True, text=True, check=True).stdout


def _squash(s: str) -> str:
    """Compare text across line breaks, hyphenation and typographic quotes (TeX turns ' into a right quote)."""
    s = s.translate(str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"'}))
    return re.sub(r"[\s\-\u00ad\u2010\u2011]+", "", s)


def test_pdf_builds(smoke_pdf):
    print(f"PDF build from the smoke executions took {smoke_pdf['seconds']:.0f} s")
    assert smoke_pdf["code"] == 0, smoke_pdf["log"][-6000:]
    assert smoke_pdf["pdf"].exists() and smoke_pdf["pdf"].stat().st_size > 100_000
    assert "PDF written" in smoke_pdf["log"] and str(smoke_pdf["pdf"]) in smoke_pdf["log"]


def test_pdf_has_pages_chapters_and_glued_numbers(smoke_pdf):
    assert smoke_pdf["pdf"].exists(), smoke_pdf["log"][-3000:]
    info = subprocess.run([_tool("pdfinfo"), str(smoke_pdf["pdf"])], capture_output=True, text=True, check=True).stdout
    pages = int(re.search(r"^Pages:\s+(\d+)", info, re.M).group(1))
    assert pages > MIN_PAGES, info
    text = _text(smoke_pdf)
    flat = _squash(text)
    titles = {}
    for cid in toc_chapters():
        res = json.loads((smoke_pdf["root"] / "book" / "_executed" / cid / "results.json").read_text())
        titles[cid] = res["title"]
    plain = {cid: t for cid, t in titles.items() if not re.search(r"[$`\\*_]", t)}
    assert len(plain) >= len(titles) // 2, titles
    missing = [t for t in plain.values() if _squash(t) not in flat]
    assert not missing, f"chapter titles not in the PDF text: {missing}"
    # Numbers glued into the prose ({glue:text}`name:.3f`) show the values of results.json.
    src = (smoke_pdf["root"] / "notebooks" / "wu-thm-4-1.md").read_text()
    results = smoke_pdf["root"] / "book" / "_executed" / "wu-thm-4-1" / "results.json"
    values = json.loads(results.read_text())["values"]
    glued = re.findall(r"\{glue:text\}`([\w-]+):(\.\d+f)`", src)
    assert glued, "wu-thm-4-1 glues no formatted float"
    for name, fmt in glued:
        assert format(values[name], fmt) in text, f"glued {name} = {format(values[name], fmt)} not in the PDF"
    assert "PASS" in text            # the check badges, as text


def test_pdf_shows_every_figure_as_an_image(smoke_pdf):
    """Every {glue:figure} is in the PDF as the saved vector file (figures.save glues its PDF for LaTeX and
    its PNG for HTML), not as the text of a matplotlib repr."""
    assert smoke_pdf["pdf"].exists(), smoke_pdf["log"][-3000:]
    notebooks = smoke_pdf["root"] / "notebooks"
    n_fig = sum(len(re.findall(r"^```\{glue:figure\}", (notebooks / f"{cid}.md").read_text(), re.M))
                for cid in toc_chapters())
    tex = smoke_pdf["pdf"].with_suffix(".tex").read_text()
    included = re.findall(r"\\sphinxincludegraphics(?:\[[^\]]*\])?\{\{?([^}]+?)\}?\}", tex)
    vector = [f for f in included if f.endswith(".pdf") or (smoke_pdf["pdf"].parent / (f + ".pdf")).exists()]
    assert len(vector) >= n_fig, f"{len(vector)} vector figures in the LaTeX for {n_fig} glued figures: {included[:5]}"
    assert "<Figure size" not in _text(smoke_pdf)


def test_latex_log_is_clean(smoke_pdf):
    assert smoke_pdf["texlog"].exists(), smoke_pdf["log"][-3000:]
    problems = latex_problems(smoke_pdf["texlog"])
    assert not problems["errors"], problems["errors"][:10]
    assert not problems["missing characters"], problems["missing characters"][:10]
    assert not problems["undefined references"], problems["undefined references"][:10]


def test_no_content_cut_off_a_page(smoke_pdf):
    """A table that cannot break (tabulary, not longtable) and is taller than a page loses its last rows."""
    assert smoke_pdf["texlog"].exists(), smoke_pdf["log"][-3000:]
    assert not latex_problems(smoke_pdf["texlog"])["content cut off a page"]
