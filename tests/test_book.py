"""The whole book, built from smoke-profile executions of every chapter (one build per session)."""
import html
import json
import re
import subprocess

import pytest

from posbias.book.build import toc_chapters
from conftest import posbias_cmd

pytestmark = pytest.mark.book


def test_build_succeeds(smoke_book):
    print(f"smoke build took {smoke_book['seconds']:.0f} s")
    assert smoke_book["code"] == 0, smoke_book["log"][-6000:]
    assert (smoke_book["html"] / "index.html").exists()


@pytest.mark.parametrize("cid", toc_chapters())
def test_chapter_ran_and_every_check_passed(smoke_book, cid):
    res_path = smoke_book["root"] / "book" / "_executed" / cid / "results.json"
    assert res_path.exists(), f"{cid} did not run"
    res = json.loads(res_path.read_text())
    assert res["status"] == "ok", res.get("error") or [c for c in res["checks"] if not c["passed"]]
    assert res["profile"] == "smoke"
    assert res["checks"], f"{cid} records no checks"
    for fig in res["figures"]:
        for ext in ("png", "svg", "pdf"):
            assert (smoke_book["root"] / "book" / "_executed" / cid / fig["files"][ext]["path"]).exists()
    assert (smoke_book["html"] / "book" / "_executed" / cid / f"{cid}.html").exists()


def test_generated_pages(smoke_book):
    html = smoke_book["html"] / "book" / "_executed"
    status = (html / "status.html").read_text()
    for cid in toc_chapters():
        assert cid in status
    cite = re.sub(r"<[^>]+>", "", (html / "how-to-cite.html").read_text())
    assert "@misc{posbias:wu-thm-4-1:wu-thm-4-1-rollout" in cite
    manifest = json.loads((smoke_book["root"] / "book" / "_executed" / "figures-manifest.json").read_text())
    assert "wu-thm-4-1/wu-thm-4-1-rollout" in manifest


def test_figure_files_carry_provenance(smoke_book):
    figdir = smoke_book["root"] / "book" / "_executed" / "wu-thm-4-1" / "figures"
    from PIL import Image

    desc = json.loads(Image.open(figdir / "wu-thm-4-1-rollout.png").text["Description"])
    assert desc["chapter"] == "wu-thm-4-1" and desc["profile"] == "smoke" and desc["parameters"]["depth"] > 0
    assert desc["commit"]
    svg = (figdir / "wu-thm-4-1-rollout.svg").read_text()
    assert '"chapter": "wu-thm-4-1"' in svg.replace("&quot;", '"')
    assert b"wu-thm-4-1" in (figdir / "wu-thm-4-1-rollout.pdf").read_bytes()


def test_every_figure_entry_states_the_settings_of_what_it_draws(smoke_book, monkeypatch):
    """Figure by figure over the whole smoke build: the provenance embedded in the PNG is the record
    the citation entry is written from (the entry on the chapter's page and on the how-to-cite page
    carries its note), and the settings in it are those of the data files it lists, read again here.
    Figure 2's paper-settings figure names the committed networks' settings, not the smoke run's."""
    from PIL import Image

    from posbias.analysis import evidence
    from posbias.book.cite import figure_note

    monkeypatch.setenv("POSBIAS_CACHE", str(smoke_book["root"] / ".cache"))
    monkeypatch.setattr("posbias.storage.provenance.ROOT", smoke_book["root"])
    executed = smoke_book["root"] / "book" / "_executed"
    cite_page = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", (smoke_book["html"] / "book" / "_executed" /
                                                           "how-to-cite.html").read_text()))
    n_drawn = 0
    for res_path in sorted(executed.glob("*/results.json")):
        cid = res_path.parent.name
        page = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", (smoke_book["html"] / "book" / "_executed" / cid /
                                                           f"{cid}.html").read_text()))
        for fig in json.loads(res_path.read_text())["figures"]:
            prov = json.loads(Image.open(executed / cid / fig["files"]["png"]["path"]).text["Description"])
            assert prov == fig["provenance"], f"{cid}/{fig['name']}: the PNG and the run record disagree"
            note = html.unescape(figure_note(prov))
            assert note in html.unescape(cite_page), f"{cid}/{fig['name']}: not on the how-to-cite page"
            if "Cite this figure" in page:          # a chapter with the footer's boxes prints it too
                assert note in html.unescape(page), f"{cid}/{fig['name']}: not on its chapter's page"
            assert all(not d["path"].startswith("/") for d in prov["data"]), f"{cid}/{fig['name']}: a machine path"
            if prov["evidence"] is None:
                assert not prov["data"] and "computed in the run" in note
                continue
            again = evidence.settings(prov["data"])
            assert again == prov["evidence"]["settings"] and evidence.describe(again) in note, f"{cid}/{fig['name']}"
            assert prov["evidence"]["files"] == len(prov["data"]) > 0
            n_drawn += prov["data_scope"] == "drawn"
    assert n_drawn >= 20
    fig2 = json.loads((executed / "wu-fig-2" / "results.json").read_text())["figures"]
    paper = figure_note(next(f for f in fig2 if f["name"] == "wu-fig-2-paper-gaps")["provenance"])
    # (the smoke profile draws the depths it runs, [1, 2], of which the committed networks have depth 2)
    assert "15 trained networks: 100,000 iterations; seeds 0-4; 10,000 test sequences per set" in paper
    smoke = figure_note(next(f for f in fig2 if f["name"] == "wu-fig-2-gaps")["provenance"])
    assert "20 iterations; seed 0; 64 test sequences per set" in smoke


def test_every_address_the_book_prints_exists_in_the_built_site(smoke_book):
    """Every URL under the book's address on any built page (the citation entries above all) is short,
    ``<site>/c/<chapter>.html`` or the site itself, and resolves in the built site: the short address
    is a redirect whose target page exists."""
    from posbias.book.cite import BOOK_URL, SHORT

    html_dir = smoke_book["html"]
    urls = set()
    for page in html_dir.rglob("*.html"):
        urls |= set(re.findall(re.escape(BOOK_URL) + r"[^\s}<\"'&`]*", html.unescape(page.read_text())))
    # the how-to-cite page spells the pattern out as .../c/<chapter>.html: a placeholder, not an address
    chapter_urls = {u for u in urls if u.rstrip("/") != BOOK_URL and not u.endswith(f"/{SHORT}/")}
    assert len(chapter_urls) >= 20
    for u in sorted(chapter_urls):
        rel = u[len(BOOK_URL) + 1:]
        assert re.fullmatch(r"c/[\w-]+\.html", rel), f"{u}: not a short chapter address"
        short = html_dir / rel
        assert short.exists(), f"{u} does not exist in the built site"
        target = re.search(r'url=([^"]+)"', short.read_text())[1]
        assert (short.parent / target).resolve().exists(), f"{u} redirects to a missing page {target}"


def test_figures_are_byte_identical_across_runs(smoke_book, tmp_path):
    """Re-running a chapter with the same commit and parameters reproduces its figure files exactly."""
    first = json.loads((smoke_book["root"] / "book" / "_executed" / "wu-thm-4-1" / "results.json").read_text())
    proc = subprocess.run(posbias_cmd("run", "wu-thm-4-1", "--profile", "smoke", "--out", str(tmp_path / "again")),
                          cwd=smoke_book["root"], env=smoke_book["env"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    again = json.loads((tmp_path / "again" / "results.json").read_text())
    assert first["figures"] and [f["name"] for f in first["figures"]] == [f["name"] for f in again["figures"]]
    for a, b in zip(first["figures"], again["figures"]):
        assert {k: v["sha256"] for k, v in a["files"].items()} == {k: v["sha256"] for k, v in b["files"].items()}


def test_no_raw_errors_in_html(smoke_book):
    for page in smoke_book["html"].rglob("*.html"):
        text = page.read_text(errors="replace")
        assert "Traceback (most recent call last)" not in text, page
        assert not re.search(r"sd-bg-danger[^>]*>\s*FAIL", text), page
        assert "&lt;Figure size" not in text, f"{page}: a figure rendered as its text form"
        assert not re.search(r"\w+Warning: ", text), f"{page}: a warning in an output"


def test_checks_render_as_badges_and_footer_boxes(smoke_book):
    page = (smoke_book["html"] / "book" / "_executed" / "wu-thm-4-1" / "wu-thm-4-1.html").read_text()
    assert re.search(r"sd-bg-success[^>]*>\s*PASS", page)
    assert "Re-run this chapter" in page and "Cite this figure" in page
    # Pygments splits the bash block into spans: compare the visible text.
    text = html.unescape(re.sub(r"<[^>]+>", "", page))
    assert "posbias run wu-thm-4-1 -p" in text


def test_launch_opens_the_source_and_download_gives_the_executed_notebook(smoke_book):
    root, site = smoke_book["root"], smoke_book["html"]
    for cid in toc_chapters():
        page = (site / "book" / "_executed" / cid / f"{cid}.html").read_text()
        launch = re.findall(r'href="(https://mybinder\.org/[^"]+)"', page)
        assert launch, f"{cid}: no Binder launch link"
        assert all(u.endswith(f"urlpath=tree/notebooks/{cid}.md") for u in launch), launch
        assert (root / "notebooks" / f"{cid}.md").is_file()
        hrefs = re.findall(r'href="([^"]+\.ipynb)"', page)
        downloads = [h for h in hrefs if "_sources" in h]
        assert downloads, f"{cid}: no download link to the executed notebook"
        nb = json.loads(((site / "book" / "_executed" / cid) / downloads[0]).resolve().read_text())
        outputs = [o for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])]
        assert outputs, f"{cid}: the downloadable notebook has no outputs"


def test_every_saved_figure_is_shown_on_its_page(smoke_book):
    """The PNG the page shows is byte-for-byte the file whose hash the "Cite this figure" box gives."""
    import hashlib

    site = smoke_book["html"]
    for cid in toc_chapters():
        res = json.loads((smoke_book["root"] / "book" / "_executed" / cid / "results.json").read_text())
        page_dir = site / "book" / "_executed" / cid
        srcs = re.findall(r'<img[^>]+src="([^"]+\.png)"', (page_dir / f"{cid}.html").read_text())
        shown = {hashlib.sha256((page_dir / s).resolve().read_bytes()).hexdigest() for s in srcs
                 if (page_dir / s).resolve().is_file()}
        for fig in res["figures"]:
            assert fig["files"]["png"]["sha256"] in shown, f"{cid}: figure {fig['name']} is not shown on its page"


def test_one_parameters_cell_is_shown(smoke_book):
    """Papermill's cell with this run's values is shown; the chapter's own cell of defaults is not."""
    for cid in toc_chapters():
        page = (smoke_book["html"] / "book" / "_executed" / cid / f"{cid}.html").read_text()
        assert page.count("tag_injected-parameters") == 1, cid
        assert "tag_parameters" not in page.replace("tag_injected-parameters", ""), cid


def test_glossary_terms_are_linked_from_their_first_use_on_every_page(smoke_book):
    """Issue 93: every page that uses a glossary term in its prose links its first use to the glossary, once."""
    html_root = smoke_book["html"]
    glossary = (smoke_book["root"] / "book" / "glossary.md").read_text().split("```{glossary}")[1].split("```")[0]
    assert len(re.findall(r"^(\S.*)$", glossary, re.M)) >= 15
    pages = [html_root / "book" / "what-we-found.html", html_root / "book" / "position-bias.html"]
    pages += [html_root / "book" / "_executed" / c / f"{c}.html" for c in toc_chapters()]
    linked = {}
    for page in pages:
        links = re.findall(r'class="glossary-term[^"]*" href="[^"]*glossary\.html#term-([^"]+)"', page.read_text())
        assert len(links) == len(set(links)), f"{page.name}: a term linked twice automatically"
        linked[page.stem] = set(links)
    print({k: len(v) for k, v in linked.items()})
    assert "claim" in linked["what-we-found"] and "register" in linked["scoreboard"]


def test_no_figure_of_the_book_shows_text_over_text(smoke_book):
    """Issue 93: every saved figure records, once drawn, the pairs of its texts whose boxes overlap (titles that
    run into each other, tick labels on top of a legend); the book's have none, and every one records its smallest
    text (which tests/test_browser.py holds to 9 px as the page shows it)."""
    from PIL import Image

    pngs = sorted((smoke_book["root"] / "book" / "_executed").glob("*/figures/*.png"))
    assert len(pngs) >= 30
    bad, missing = {}, []
    for png in pngs:
        prov = json.loads(Image.open(png).text["Description"])
        if "smallest_text_px" not in prov:
            missing.append(png.name)
        if prov.get("overlapping_text"):
            bad[png.name] = prov["overlapping_text"][:3]
    assert not missing and not bad, (missing, bad)
