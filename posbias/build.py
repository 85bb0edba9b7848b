"""Build the book: run every chapter of ``_toc.yml``, write the generated pages, call Jupyter Book 1."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import yaml

from .provenance import ROOT, canonical_json, git_state, source_date_epoch

__all__ = ["EXECUTED", "toc_chapters", "run_all", "write_generated_pages", "jupyter_book", "build"]

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


def run_all(profile: str, chapters: list[str], jobs: int = 1, timeout: int = 3600) -> dict[str, int]:
    """Run each chapter in its own ``posbias run`` process into ``book/_executed/<id>/``."""
    def one(cid: str) -> tuple[str, int]:
        t0 = time.perf_counter()
        cmd = [sys.executable, "-m", "posbias.cli", "run", cid, "--profile", profile,
               "--out", str(EXECUTED / cid), "--timeout", str(timeout), "--quiet"]
        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        lines = [ln for ln in (proc.stdout + proc.stderr).splitlines() if "running over TCP" not in ln]
        summary = next((ln for ln in reversed(lines) if ln.startswith(f"{cid}:")), lines[-1] if lines else cid)
        print(f"[{time.perf_counter() - t0:6.1f} s] exit {proc.returncode}  {summary}", flush=True)
        if proc.returncode != 0:
            print("\n".join(lines[-25:]), file=sys.stderr, flush=True)
        return cid, proc.returncode

    EXECUTED.mkdir(parents=True, exist_ok=True)
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        return dict(pool.map(one, chapters))


def _results(cid: str) -> dict[str, Any] | None:
    p = EXECUTED / cid / "results.json"
    return json.loads(p.read_text()) if p.exists() else None


def write_generated_pages(chapters: list[str], profile: str) -> None:
    """``book/_executed/status.md`` and ``how-to-cite.md`` from the runs' results."""
    from .cite import citation_page, status_page

    results = {cid: _results(cid) for cid in chapters}
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
    return subprocess.run(cmd, cwd=ROOT, env=env).returncode


def build(profile: str = "default", jobs: int = 1, builder: str = "html", chapters: list[str] | None = None) -> int:
    """Run the chapters of the table of contents and build the book. Returns an exit status."""
    all_chapters = toc_chapters()
    todo = chapters or all_chapters
    t0 = time.perf_counter()
    print(f"posbias build: {len(todo)} chapters, profile {profile}, commit {git_state()['commit']}", flush=True)
    codes = run_all(profile, todo, jobs=jobs)
    write_generated_pages(all_chapters, profile)
    bad = {c: k for c, k in codes.items() if k != 0}
    if bad:
        print(f"posbias build: chapters that did not pass: {bad} (1 = raised, 3 = a check failed)", file=sys.stderr)
    code = jupyter_book(builder)
    wall = time.perf_counter() - t0
    if code != 0:
        print(f"posbias build: jupyter-book failed (exit {code}) after {wall:.0f} s", file=sys.stderr)
        return code
    if bad:
        return 3 if all(k == 3 for k in bad.values()) else 1
    where = ROOT / "_build" / ("html/index.html" if builder == "html" else builder)
    print(f"posbias build: done in {wall:.0f} s. Open the book: {where}", flush=True)
    return 0


def params_of(cid: str) -> str:
    res = _results(cid)
    return canonical_json(res["parameters"]) if res else "{}"
