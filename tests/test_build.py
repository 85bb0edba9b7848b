"""`posbias build` when a chapter fails: it stops with that chapter's message, exits non-zero, and
leaves no _build/html whose status page could claim success (issue 23)."""
import os
import shutil
import subprocess
import sys

import pytest

from conftest import IGNORE, ROOT

RAISES = """---
kernelspec: {display_name: Python 3, language: python, name: python3}
posbias:
  title: "Raises"
  parameters:
    x: {type: int, default: 1, min: 0, max: 10, help: "a number"}
---
# Raises

```{code-cell} ipython3
:tags: [parameters]
x = 1
```

```{code-cell} ipython3
raise RuntimeError("zz-broken fails on purpose")
```
"""


def test_a_failing_chapter_stops_the_build_and_leaves_no_book(tmp_path):
    tree = tmp_path / "posbias"
    shutil.copytree(ROOT, tree, ignore=IGNORE)
    (tree / "notebooks" / "zz-broken.md").write_text(RAISES)
    stale = tree / "_build" / "html"
    stale.mkdir(parents=True)
    (stale / "index.html").write_text("an older book whose status page says every chapter passed")
    code = ("import sys; from posbias.book.build import build; "
            "sys.exit(build(profile='smoke', chapters=['zz-broken', 'wu-thm-4-1']))")
    env = dict(os.environ, PYTHONPATH=str(tree), POSBIAS_CACHE=str(tmp_path / "cache"), POSBIAS_GIT_COMMIT="test")
    proc = subprocess.run([sys.executable, "-c", code], cwd=tree, env=env, capture_output=True, text=True,
                          timeout=600)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 1, log
    assert "zz-broken fails on purpose" in log and "stopped, no book built" in log, log
    assert "not run: wu-thm-4-1" in log                     # chapters after the failure are not started
    assert not stale.exists()                                # no book claims success
    assert not (tree / "book" / "_executed" / "wu-thm-4-1").exists()


def test_each_chapter_gets_a_short_address_that_redirects_to_its_page(tmp_path):
    from posbias.book.build import write_redirects
    from posbias.book.cite import chapter_url

    for cid in ("wu-fig-2", "kim-thm-1"):
        page = tmp_path / "book" / "_executed" / cid / f"{cid}.html"
        page.parent.mkdir(parents=True)
        page.write_text("<html></html>")
    paths = write_redirects(["wu-fig-2", "kim-thm-1"], tmp_path)
    assert [p.relative_to(tmp_path).as_posix() for p in paths] == ["c/wu-fig-2.html", "c/kim-thm-1.html"]
    text = paths[0].read_text()
    assert 'url=../book/_executed/wu-fig-2/wu-fig-2.html"' in text
    assert (paths[0].parent / "../book/_executed/wu-fig-2/wu-fig-2.html").resolve().exists()
    assert chapter_url("wu-fig-2").endswith("/c/wu-fig-2.html")
    with pytest.raises(FileNotFoundError, match=r"no built page for chapter\(s\) wu-fig-3"):
        write_redirects(["wu-fig-3"], tmp_path)


def test_every_chapter_is_in_the_table_of_contents_and_every_entry_is_a_chapter_or_page():
    """A notebook missing from _toc.yml would silently leave the book (issue 97): the toc's chapters are exactly
    the notebooks, and every other toc entry is a page in book/ or one `posbias build` generates."""
    from posbias.book.build import GENERATED, toc_chapters, toc_files
    from posbias.book.chapters import chapter_ids

    chapters = toc_chapters()
    assert sorted(chapters) == chapter_ids() and len(chapters) == len(set(chapters))
    generated = {f"book/_executed/{g}" for g in GENERATED}
    pages = [f for f in toc_files() if not f.startswith("book/_executed/") or f in generated]
    assert all(f in generated or (ROOT / f"{f}.md").exists() for f in pages), pages
