"""A reader's scan of every page of the built book: nothing stray is published.

Fails on a cell output that is only a number (a cell's last expression left showing), any
``Warning`` or ``Traceback`` text in an output, a progress bar's text or any other output on
stderr, an absolute path of the machine that built the book, a literal ``\\_`` in math or prose,
and a code line longer than 100 characters (it scrolls sideways on a laptop): a line of a code
cell or of a code block in the prose (not of a cell's output, nor of a BibTeX entry, which is
copied whole). The rules are tested on small pages first, then run over the smoke build that
``tests/test_book.py`` makes (the ``smoke_book`` fixture: one build per session). Beyond the
pages, every file the site publishes (downloadable notebooks, images, scripts) is read for the
build machine's paths and must be readable by whom the umask lets read an ordinary file.
"""
from __future__ import annotations

import os
import re
import stat
import sys
from pathlib import Path

import pytest
from bs4 import BeautifulSoup

from conftest import ROOT

MAX_CODE_LINE = 100
NUMBER = r"[-+]?(?:\d[\d_]*\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf)"
# a bare number, or one wrapped the way numpy/torch print a scalar: np.float64(1.5), tensor(2.)
BARE_NUMBER = re.compile(rf"^\(?(?:{NUMBER})\)?$|^[\w.]+\(\s*(?:{NUMBER})\s*(?:,\s*dtype=[\w.]+)?\s*\)$")
WARNING = re.compile(r"Warning\b|Traceback")
# tqdm's text: "(N, w): 100%|##########| 16/16 [00:41<00:00, 2.59s/it]"
PROGRESS = re.compile(r"\d{1,3}%\|[^|\n]{0,100}\|\s*\d+/\d+|\[\d+:\d\d<[\d:?]+|\d(?:\.\d+)?(?:s/it|it/s)\]")
MACHINE_PATHS = (r"(?<![\w.~])/root\b", r"(?<![\w.~])/home/", r"site-packages", r"(?<![\w.~])/tmp/")


def _machine_path_patterns(roots: list[Path]) -> list[re.Pattern]:
    literal = [re.escape(str(r).rstrip("/")) for r in roots]
    return [re.compile(p) for p in (*literal, *MACHINE_PATHS)]


def scan_page(text: str, roots: list[Path]) -> list[str]:
    """Problems a reader would see on one built HTML page: ``["rule: excerpt", ...]``, empty when clean."""
    soup = BeautifulSoup(text, "html.parser")
    for tag in soup(["script", "style", "noscript"]):
        tag.decompose()
    main = soup.find("main") or soup.find("article") or soup
    problems: list[str] = []
    for out in main.select("div.cell_output div.output, div.cell_output > div"):
        body = out.get_text().strip()
        if BARE_NUMBER.match(body):
            problems.append(f"bare number output: {body!r}")
    for out in main.select("div.cell_output"):
        body = out.get_text()
        for line in body.splitlines():
            if WARNING.search(line):
                problems.append(f"warning or traceback in an output: {line.strip()[:160]!r}")
            if PROGRESS.search(line):
                problems.append(f"progress bar in an output: {line.strip()[:160]!r}")
    for out in main.select("div.output.stderr"):
        problems.append(f"output on stderr: {out.get_text().strip()[:160]!r}")
    visible = main.get_text("\n")
    for pat in _machine_path_patterns(roots):
        for m in pat.finditer(visible):
            problems.append(f"path of the build machine: {visible[max(0, m.start() - 40): m.end() + 40]!r}")
    for math in main.select(".math"):
        if "\\_" in math.get_text():
            problems.append(f"literal \\_ in math: {math.get_text()[:160]!r}")
    prose = BeautifulSoup(str(main), "html.parser")
    for tag in prose(["pre", "code"]) + prose.select(".math"):
        tag.decompose()
    for m in re.finditer(r"\\_", prose.get_text()):
        txt = prose.get_text()
        problems.append(f"literal \\_ in the text: {txt[max(0, m.start() - 40): m.end() + 40]!r}")
    for pre in main.find_all("pre"):
        # outputs are judged above; a BibTeX entry is copied whole (with its button), not read as code
        if pre.find_parent("div", class_="cell_output") or pre.find_parent("div", class_="highlight-bibtex"):
            continue
        for line in pre.get_text().splitlines():
            if len(line) > MAX_CODE_LINE:
                problems.append(f"code line of {len(line)} characters: {line[:80]!r}...")
    return problems


def book_pages(html_root: Path) -> list[Path]:
    """The reader's pages of a built book (not Sphinx's search and index pages, nor its static files)."""
    return sorted(p for p in html_root.rglob("*.html")
                  if not {"_static", "_sources", "_images"} & set(p.relative_to(html_root).parts)
                  and p.name not in ("genindex.html", "search.html"))


def scan_book(html_root: Path, roots: list[Path]) -> dict[str, list[str]]:
    """``{page relative to html_root: problems}`` for every page that has any."""
    found = {}
    for page in book_pages(html_root):
        problems = scan_page(page.read_text(errors="replace"), roots)
        if problems:
            found[str(page.relative_to(html_root))] = problems
    return found


def site_path_patterns(roots: list[Path]) -> list[re.Pattern[bytes]]:
    """The build machine's own absolute paths, as bytes: the trees it built in, its Python, its home."""
    places = {str(r).rstrip("/") for r in roots} | {sys.prefix, os.path.realpath(sys.prefix)}
    home = os.path.expanduser("~").rstrip("/")
    pats = [re.compile(rb"(?<![\w.~/-])" + re.escape(p.encode()) + rb"(?![\w.-])") for p in sorted(places) if p]
    if len(home) > 1:
        pats.append(re.compile(rb"(?<![\w.~/:-])" + re.escape(home.encode()) + rb"/[\w.-]"))
    return pats


def scan_site_files(html_root: Path, roots: list[Path], umask: int) -> dict[str, list[str]]:
    """``{file relative to html_root: problems}`` over every file and folder the site publishes (not only
    its pages): an absolute path of the build machine in its bytes, or a mode that lets fewer people read
    it than an ordinary file (``0o666``) or folder (``0o777``) made under ``umask``."""
    pats = site_path_patterns(roots)
    readable = {False: 0o666 & ~umask & 0o444, True: 0o777 & ~umask & 0o555}
    found: dict[str, list[str]] = {}
    for path in sorted(html_root.rglob("*")):
        problems = []
        mode = stat.S_IMODE(path.lstat().st_mode)
        want = readable[path.is_dir()]
        if mode & want != want:
            problems.append(f"mode {oct(mode)}: not readable by all whom the umask {oct(umask)} lets read it")
        if path.is_file():
            data = path.read_bytes()
            for pat in pats:
                for m in pat.finditer(data):
                    context = data[max(0, m.start() - 40): m.end() + 40].decode("utf-8", "replace")
                    problems.append(f"path of the build machine: {context!r}")
        if problems:
            found[str(path.relative_to(html_root))] = problems
    return found


# ---------------------------------------------------------------- the rules, on small pages

def _page(body: str) -> str:
    return f"<html><body><main>{body}</main></body></html>"


def _cell(code: str, output: str = "", kind: str = "text_plain") -> str:
    out = (f'<div class="cell_output docutils container"><div class="output {kind} highlight-myst-ansi">'
           f'<div class="highlight"><pre><span></span>{output}</pre></div></div></div>') if output else ""
    return (f'<div class="cell docutils container"><div class="cell_input docutils container">'
            f'<div class="highlight-ipython3"><div class="highlight"><pre>{code}</pre></div></div></div>{out}</div>')


ROOTS = [Path("/build/tree/posbias")]


def test_a_clean_page_passes():
    page = _page("<p>The mass on position 1 is 0.999 after 64 layers; see <code>a\\_b</code>.</p>"
                 '<span class="math notranslate">\\(P^{(t)}_{i1}\\)</span>'
                 + _cell("x = 1\nprint(f'x = {x}')", "x = 1", kind="stream")
                 + _cell("fig = plot()", "<pre>PASS rows-are-distributions: 1.2e-16</pre>"))
    assert scan_page(page, ROOTS) == []


@pytest.mark.parametrize("output", ["1846.7734375", "21.457672119140625", "-3", "1e-05", "nan",
                                    "np.float64(0.25)", "tensor(2.5000, dtype=torch.float64)", "(0.5)"])
def test_a_bare_number_output_fails(output):
    problems = scan_page(_page(_cell("sum(xs)", output)), ROOTS)
    assert problems and problems[0].startswith("bare number output"), problems


def test_a_sentence_with_a_number_is_not_a_bare_number():
    assert scan_page(_page(_cell("print(B)", "logit bound B = 1.5", kind="stream")), ROOTS) == []


@pytest.mark.parametrize("output", [".../tqdm/auto.py:21: TqdmWarning: IProgress not found",
                                    "UserWarning: the figure is empty",
                                    "Traceback (most recent call last):\n  File x"])
def test_warnings_and_tracebacks_in_outputs_fail(output):
    problems = scan_page(_page(_cell("run()", output, kind="stderr")), ROOTS)
    assert any(p.startswith("warning or traceback") for p in problems), problems


@pytest.mark.parametrize("text", ["/build/tree/posbias/data/x.json", "/root/.cache/posbias/unit.pt",
                                  "/home/alice/book", "lib/python3.11/site-packages/tqdm/auto.py",
                                  "written to /tmp/xyz/results.json"])
def test_paths_of_the_build_machine_fail(text):
    for page in (_page(f"<p>{text}</p>"), _page(_cell("print(p)", text, kind="stream"))):
        assert any(p.startswith("path of the build machine") for p in scan_page(page, ROOTS)), page


def test_relative_paths_and_urls_pass():
    page = _page("<p>Read data/wu-units/ and runs/wu-thm-4-1/; see https://example.org/home/x and ~/tmp/.</p>")
    assert scan_page(page, ROOTS) == []


def test_an_escaped_underscore_in_math_or_prose_fails():
    math = scan_page(_page('<span class="math">\\(\\mathrm{acc}(IC\\_a\\_b)\\)</span>'), ROOTS)
    prose = scan_page(_page("<td>acc(IC\\_a\\_b)</td>"), ROOTS)
    assert math and math[0].startswith("literal \\_ in math"), math
    assert prose and prose[0].startswith("literal \\_ in the text"), prose


def test_a_long_code_line_fails_but_a_long_output_line_does_not():
    long = "x = " + "1 + " * 30 + "1"
    assert len(long) > MAX_CODE_LINE
    problems = scan_page(_page(_cell(long)), ROOTS)
    assert problems and problems[0].startswith("code line of"), problems
    assert scan_page(_page(_cell("x", "word " * 40, kind="stream")), ROOTS) == []
    prose_block = f'<div class="highlight-bash"><div class="highlight"><pre>{long}</pre></div></div>'
    assert scan_page(_page(prose_block), ROOTS)[0].startswith("code line of")
    bibtex = f'<div class="highlight-bibtex"><div class="highlight"><pre>{long}</pre></div></div>'
    assert scan_page(_page(bibtex), ROOTS) == []
    exactly = "y = " + "1+" * 47 + "12"
    assert len(exactly) == MAX_CODE_LINE and scan_page(_page(_cell(exactly)), ROOTS) == []


@pytest.mark.parametrize("output", ["(N, w): 100%|##########| 16/16 [00:41<00:00,  2.59s/it]",
                                    "(N, K):  25%|##5       | 1/4 [00:00<?, ?it/s]",
                                    "steps: 40%|████      | 400/1000 [01:02<01:33, 6.41it/s]"])
def test_a_progress_bar_in_an_output_fails(output):
    problems = scan_page(_page(_cell("for x in report.progress(grid): ...", output, kind="stream")), ROOTS)
    assert any(p.startswith("progress bar in an output") for p in problems), problems


def test_any_output_on_stderr_fails_and_a_table_with_bars_passes():
    assert scan_page(_page(_cell("run()", "resumed from step 3/10", kind="stderr")), ROOTS)[0].startswith(
        "output on stderr")
    assert scan_page(_page(_cell("show()", "| 50% | 1/2 |\n| mass | 0.5 |", kind="stream")), ROOTS) == []


def test_the_site_scan_reads_every_file_for_machine_paths_and_modes(tmp_path):
    tree = Path("/build/tree/posbias")
    site = tmp_path / "html"
    (site / "_sources" / "c").mkdir(parents=True)
    (site / "_images").mkdir()
    (site / "index.html").write_text("<p>see book/_executed/x/x.ipynb and https://example.org/build/tree/posbias</p>")
    (site / "_sources" / "c" / "x.ipynb").write_text('{"output_path": "/build/tree/posbias/book/x.ipynb"}')
    (site / "_images" / "a.png").write_bytes(b"\x89PNG\x00tEXt\x00" + str(sys.prefix).encode() + b"/lib\x00")
    (site / "_images" / "b.png").write_bytes(b"\x89PNG\x00")
    (site / "c" / "x.html").parent.mkdir()
    (site / "c" / "x.html").write_text("redirect")
    for p in site.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    (site / "c" / "x.html").chmod(0o600)
    found = scan_site_files(site, [tree], umask=0o022)
    assert sorted(found) == ["_images/a.png", "_sources/c/x.ipynb", "c/x.html"], found
    assert found["c/x.html"][0].startswith("mode 0o600")
    assert found["_sources/c/x.ipynb"][0].startswith("path of the build machine")
    assert scan_site_files(site, [tree], umask=0o077).keys() == {"_images/a.png", "_sources/c/x.ipynb"}


# ---------------------------------------------------------------- the built book

@pytest.mark.book
def test_no_stray_output_on_any_built_page(smoke_book):
    assert smoke_book["code"] == 0, "the smoke build failed; see test_book"
    pages = book_pages(smoke_book["html"])
    assert len(pages) > 20, "the scan found too few pages to be the whole book"
    found = scan_book(smoke_book["html"], [smoke_book["root"], ROOT])
    report = "\n".join(f"{page}:\n  " + "\n  ".join(problems[:12]) for page, problems in found.items())
    assert not found, f"{len(found)} pages publish stray output:\n{report}"


@pytest.mark.book
def test_every_published_file_is_readable_and_names_no_path_of_the_build_machine(smoke_book):
    """Issue 98: the downloadable notebooks carried papermill's absolute output_path, and the short
    addresses c/<chapter>.html were written 0600. Every file of the site, not only its pages."""
    from posbias.storage.store import umask

    assert smoke_book["code"] == 0, "the smoke build failed; see test_book"
    html = smoke_book["html"]
    assert len(list(html.glob("_sources/**/*.ipynb"))) >= 20, "the scan should see the downloadable notebooks"
    found = scan_site_files(html, [smoke_book["root"], ROOT], umask())
    report = "\n".join(f"{f}:\n  " + "\n  ".join(problems[:6]) for f, problems in list(found.items())[:40])
    assert not found, f"{len(found)} published files are unreadable or name the build machine:\n{report}"
