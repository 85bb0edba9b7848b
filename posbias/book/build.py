"""Build the book: run every chapter of ``_toc.yml``, write the generated pages, call Jupyter Book 1."""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

from posbias.book.cite import SHORT, citation_page, status_page
from posbias.storage.provenance import ROOT, canonical_json, git_state, source_date_epoch
from posbias.storage.store import atomic_write_text

__all__ = ["EXECUTED", "toc_chapters", "run_all", "write_generated_pages", "jupyter_book", "build", "build_pdf",
           "pdf_path", "latex_problems"]

EXECUTED = ROOT / "book" / "_executed"
GENERATED = ("status", "how-to-cite")


def _walk(node: Any) -> list[str]:
    files: list[str] = []
    if isinstance(node, dict):
        if "file" in node:
            files.append(str(node["file"]))
        for key in ("root", "parts", "chapters", "sections"):
            if key in node:
                if key == "root":
                    files.append(str(node["root"]))
                else:
                    for child in node[key]:
                        files.extend(_walk(child))
    elif isinstance(node, list):
        for child in node:
            files.extend(_walk(child))
    return files


def toc_files() -> list[str]:
    return _walk(yaml.safe_load((ROOT / "_toc.yml").read_text()))


def toc_chapters() -> list[str]:
    """Chapter ids in book order: toc entries of the form ``book/_executed/<id>/<id>``."""
    out = []
    for f in toc_files():
        parts = Path(f).parts
        if len(parts) == 4 and parts[:2] == ("book", "_executed") and parts[2] == parts[3]:
            out.append(parts[2])
    return out


SKIPPED = -1                    # run_all's code for a chapter not started because another had failed


def run_all(profile: str, chapters: list[str], jobs: int = 1, timeout: int = 3600,
            stop_on_failure: bool = True) -> dict[str, int]:
    """Run each chapter in its own ``posbias run`` process into ``book/_executed/<id>/``; returns each
    chapter's exit code. Once one fails, chapters not yet started are skipped (:data:`SKIPPED`)."""
    failed = threading.Event()

    def one(cid: str) -> tuple[str, int]:
        if stop_on_failure and failed.is_set():
            return cid, SKIPPED
        t0 = time.perf_counter()
        cmd = [sys.executable, "-m", "posbias.book.cli", "run", cid, "--profile", profile,
               "--out", str(EXECUTED / cid), "--timeout", str(timeout), "--quiet"]
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "running over TCP" not in ln]
        summary = next((ln for ln in reversed(lines) if ln.startswith(f"{cid}:")), lines[-1] if lines else cid)
        print(f"[{time.perf_counter() - t0:6.1f} s] exit {proc.returncode}  {summary}", flush=True)
        if proc.returncode != 0:
            failed.set()
            print("\n".join(lines[-25:]), file=sys.stderr, flush=True)
        return cid, proc.returncode

    EXECUTED.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return dict(pool.map(one, chapters))


def _results(cid: str) -> dict[str, Any] | None:
    p = EXECUTED / cid / "results.json"
    return json.loads(p.read_text()) if p.exists() else None


def write_generated_pages(chapters: list[str], profile: str) -> None:
    """``book/_executed/status.md`` and ``how-to-cite.md`` from the runs' results, and the schematics of the page on
    what position bias is (:mod:`posbias.figures.schematics`)."""
    from posbias.figures import schematics  # lazy: matplotlib

    results = {cid: _results(cid) for cid in chapters}
    schematics.write(EXECUTED / "schematics")      # the page on what position bias is draws them
    (EXECUTED / "status.md").write_text(status_page(results, profile), encoding="utf-8")
    (EXECUTED / "how-to-cite.md").write_text(citation_page(results), encoding="utf-8")
    manifest = {}
    for cid, res in results.items():
        for fig in (res or {}).get("figures", []):
            manifest[f"{cid}/{fig['name']}"] = {
                "chapter": cid, "caption": fig["caption"],
                "files": {ext: {"path": f"book/_executed/{cid}/{f['path']}", "sha256": f["sha256"]}
                          for ext, f in fig["files"].items()},
                "parameters": fig["provenance"]["parameters"], "commit": fig["provenance"]["commit"],
                "data": fig["provenance"]["data"],
            }
    (EXECUTED / "figures-manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")


def jupyter_book(builder: str = "html") -> int:
    exe = Path(sys.executable).parent / "jupyter-book"
    cmd = [str(exe), "build", str(ROOT), "--builder", builder, "-W", "-n", "--keep-going"]
    env = dict(os.environ, SOURCE_DATE_EPOCH=source_date_epoch(), PYTHONHASHSEED="0")
    if builder == "pdflatex":
        # latexmk (run by Sphinx's Makefile) passes $LATEXOPTS to xelatex: never stop at TeX's prompt; a real
        # error still makes xelatex, latexmk and jupyter-book exit non-zero.
        env["LATEXOPTS"] = "-interaction=nonstopmode -file-line-error -halt-on-error"
        # latexmk keeps the state of a failed run in _build/latex and would not run again ("nothing to do").
        shutil.rmtree(ROOT / "_build" / "latex", ignore_errors=True)
    return subprocess.run(cmd, cwd=ROOT, env=env).returncode


# ---------------------------------------------------------------- the PDF (XeLaTeX, `make pdf`)

PDF_TOOLS = ("xelatex", "latexmk")
TEX_DEBS = ("texlive-xetex texlive-latex-recommended texlive-latex-extra texlive-fonts-recommended "
            "fonts-freefont-otf latexmk")


def pdf_path() -> Path:
    """``_build/latex/<targetname>.pdf``, the target name from ``latex.latex_documents`` of ``_config.yml``."""
    cfg = yaml.safe_load((ROOT / "_config.yml").read_text()) or {}
    target = ((cfg.get("latex") or {}).get("latex_documents") or {}).get("targetname", "book.tex")
    return ROOT / "_build" / "latex" / (Path(target).stem + ".pdf")


def latex_problems(log: Path) -> dict[str, list[str]]:
    """What went wrong in a XeLaTeX log: errors, glyphs missing from the fonts, undefined references, content
    cut off a page. Only errors fail the build; the rest is printed (and tests/test_pdf.py asserts on it)."""
    lines: list[str] = []
    wrapped = False
    for line in (log.read_text(encoding="utf-8", errors="replace") if log.exists() else "").splitlines():
        if wrapped:                 # TeX breaks the lines of its log at 79 characters: join them again
            lines[-1] += line
        else:
            lines.append(line)
        wrapped = len(line) == 79
    text = "\n".join(lines)
    return {
        "errors": re.findall(r"^(?:! .*|\S+\.tex:\d+: .*)$", text, flags=re.M),
        "missing characters": sorted(set(re.findall(r"^Missing character: There is no .*$", text, flags=re.M))),
        "undefined references": sorted(set(
            re.findall(r"^LaTeX Warning: (?:Hyper )?[Rr]eference `[^']*' .*undefined.*$", text, flags=re.M)
            + re.findall(r"^LaTeX Warning: Citation `[^']*' .*undefined.*$", text, flags=re.M)
            + re.findall(r"^LaTeX Warning: There were undefined references\.$", text, flags=re.M))),
        # a box taller than the page (a table that cannot break): what does not fit is cut off
        "content cut off a page": re.findall(r"^Overfull \\vbox .* has occurred while \\output is active.*$",
                                             text, flags=re.M),
    }


def build_pdf() -> int:
    """Build ``_build/latex/posbias.pdf`` from the executed chapters already in ``book/_executed``."""
    missing = [t for t in PDF_TOOLS if shutil.which(t) is None]
    if missing:
        print(f"posbias build: {' and '.join(missing)} not found; the PDF needs Debian's {TEX_DEBS} "
              "(`make pdf` installs them with apt-get)", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    code = jupyter_book("pdflatex")
    pdf = pdf_path()
    problems = latex_problems(pdf.with_suffix(".log"))
    for kind, lines in problems.items():
        if lines:
            print(f"posbias build: LaTeX {kind} ({len(lines)}):\n  " + "\n  ".join(lines[:20]), file=sys.stderr)
    if code != 0 or not pdf.exists():
        print(f"posbias build: the PDF build failed (exit {code}); see {pdf.with_suffix('.log')}", file=sys.stderr)
        return code or 1
    print(f"posbias build: PDF written in {time.perf_counter() - t0:.0f} s: {pdf}", flush=True)
    return 0


def build(profile: str = "default", jobs: int = 1, builder: str = "html", chapters: list[str] | None = None) -> int:
    """Run the chapters of the table of contents and build the book. Returns an exit status.

    ``builder`` is ``html`` (``_build/html``), ``latex`` (the LaTeX sources in ``_build/latex``) or ``pdflatex``
    (those sources through XeLaTeX into ``_build/latex/posbias.pdf``).
    """
    if builder == "pdflatex" and any(shutil.which(t) is None for t in PDF_TOOLS):
        return build_pdf()          # says what is missing, before hours of execution
    all_chapters = toc_chapters()
    todo = chapters or all_chapters
    t0 = time.perf_counter()
    print(f"posbias build: {len(todo)} chapters, profile {profile}, commit {git_state()['commit']}", flush=True)
    codes = run_all(profile, todo, jobs=jobs)
    bad = {c: k for c, k in codes.items() if k not in (0, SKIPPED)}
    if bad:
        # no book from failed chapters: an older _build/html would still claim they passed, so it goes too
        shutil.rmtree(ROOT / "_build" / "html", ignore_errors=True)
        skipped = [c for c, k in codes.items() if k == SKIPPED]
        print(f"posbias build: stopped, no book built: chapters that did not pass: {bad} (1 = raised, 2 = refused, "
              f"3 = a check failed)" + (f"; not run: {', '.join(skipped)}" if skipped else ""), file=sys.stderr)
        return 3 if all(k == 3 for k in bad.values()) else 1
    write_generated_pages(all_chapters, profile)
    code = build_pdf() if builder == "pdflatex" else jupyter_book(builder)
    wall = time.perf_counter() - t0
    if code != 0:
        print(f"posbias build: jupyter-book failed (exit {code}) after {wall:.0f} s", file=sys.stderr)
        return code
    if builder == "html":
        try:
            write_redirects(all_chapters)
        except FileNotFoundError as e:
            print(f"posbias build: the book built, but its short addresses could not be written: {e}",
                  file=sys.stderr)
            return 1
    where = {"html": ROOT / "_build" / "html" / "index.html", "pdflatex": pdf_path()}.get(
        builder, ROOT / "_build" / builder)
    what = "Open the PDF" if builder == "pdflatex" else "Open the book"
    print(f"posbias build: done in {wall:.0f} s. {what}: {where}", flush=True)
    return 0


def write_redirects(chapters: list[str], html: Path | None = None) -> list[Path]:
    """``<html>/c/<chapter>.html`` for every chapter: a redirect to its page, so that the address a
    citation prints (:func:`posbias.book.cite.chapter_url`) stays valid whatever the build's layout."""
    html = html or ROOT / "_build" / "html"
    missing = [cid for cid in chapters if not (html / "book" / "_executed" / cid / f"{cid}.html").exists()]
    if missing:                                        # checked before any is written
        raise FileNotFoundError(f"no built page for chapter(s) {', '.join(missing)} under {html}; build the book first")
    out = []
    for cid in chapters:
        target = f"../book/_executed/{cid}/{cid}.html"
        path = html / SHORT / f"{cid}.html"
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>{cid}</title>\n'
                        f'<meta http-equiv="refresh" content="0; url={target}">\n'
                        f'<link rel="canonical" href="{target}">\n'
                        f'</head><body><p>This chapter is at <a href="{target}">{target}</a>.</p></body></html>\n')
        out.append(path)
    return out


def params_of(cid: str) -> str:
    res = _results(cid)
    return canonical_json(res["parameters"]) if res else "{}"
