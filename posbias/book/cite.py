"""Citation entries for figures, the "Re-run / Cite" boxes, and the generated status and citing pages."""
from __future__ import annotations

import json
import os
import shlex
from typing import Any

from posbias.storage import report, store
from posbias.book.chapters import get_chapter
from posbias.storage.provenance import code_gaps, git_state, unit_words
from posbias.book.teeth import SAMPLES, STANDINGS, TEETH_PATH, core_result, read_teeth, sample_runs, sampled_by_chapter

__all__ = ["BOOK_URL", "SHORT", "chapter_url", "figure_bibtex", "figure_note", "rerun_command", "footer_markdown",
           "footer", "status_page", "code_gaps_section", "citation_page"]

BOOK_URL = os.environ.get("POSBIAS_BOOK_URL", "https://posbias.github.io/posbias")
YEAR = "2026"
#: The folder of the chapters' short addresses: ``<site>/c/<chapter>.html`` names a chapter whatever the
#: build's layout (``posbias build`` writes a redirect there to the page itself).
SHORT = "c"


def chapter_url(chapter: str) -> str:
    """A chapter's stable address, the one citations print: ``<site>/c/<chapter>.html``."""
    return f"{BOOK_URL}/{SHORT}/{chapter}.html"


def _bibkey(chapter: str, fig: str) -> str:
    return f"posbias:{chapter}:{fig}"


def figure_bibtex(chapter: str, fig: dict[str, Any], title: str) -> str:
    """A BibTeX ``@misc`` entry for one reproduced figure, pinned to the commit and its file hash."""
    prov = fig["provenance"]
    commit = (prov.get("commit") or "unknown")[:12]
    png = fig["files"].get("png", {}).get("sha256", "")[:16]
    return (f"@misc{{{_bibkey(chapter, fig['name'])},\n"
            f"  title        = {{{{posbias}}: {title}, figure ``{fig['name']}''}},\n"
            f"  author       = {{{{The posbias developers}}}},\n"
            f"  year         = {{{YEAR}}},\n"
            f"  howpublished = {{\\url{{{chapter_url(chapter)}}}}},\n"
            f"  note         = {{{figure_note(prov)}; commit {commit}; PNG sha256 {png}}}\n}}")


def figure_note(prov: dict[str, Any]) -> str:
    """What a figure is made of, for its citation, from its provenance (the record its files embed): the
    settings of the stored results it draws, with the count and a hash of their files; for a figure
    computed in the run, the run's profile and parameters."""
    ev = prov.get("evidence")
    if ev:
        how = ("drawn from stored results" if prov.get("data_scope") == "drawn"
               else "made in a run that read stored results")
        note = (f"Reproduced figure {how}: {ev['words']}; {ev['files']} data "
                f"file{'s' if ev['files'] != 1 else ''} (list sha256 {ev['list_sha256']})")
    else:
        how = ("drawing no stored result (none was stored when it was made)" if prov.get("data_scope") == "drawn"
               else "computed in the run")
        params = json.dumps(prov.get("parameters", {}), sort_keys=True)
        note = f"Reproduced figure {how}; profile {prov.get('profile', '')}; parameters {params}"
    return note.replace("{", "(").replace("}", ")")          # braces would end the BibTeX field


def rerun_command(chapter: str, params: dict[str, Any], defaults: dict[str, Any]) -> str:
    parts = ["posbias", "run", chapter]
    for k, v in params.items():
        if defaults.get(k) != v:
            val = ",".join(map(str, v)) if isinstance(v, list) else str(v)
            parts += ["-p", k, val]
    return " ".join(shlex.quote(p) for p in parts)


def footer_markdown(chapter_id: str, params: dict[str, Any], figures: list[dict[str, Any]], profile: str) -> str:
    """The "Re-run this chapter" and "Cite this figure" boxes (MyST markdown), each collapsed to its title on the
    page (one click away: the page leads with its result)."""
    ch = get_chapter(chapter_id)
    defaults = {n: p.default for n, p in ch.params.items()}
    rows = "\n".join(f"| `{n}` | {p.type} | `{params.get(n)!r}` | `{p.default!r}` | {p.describe_range()} | {p.help} |"
                     for n, p in ch.params.items())
    cmd = rerun_command(chapter_id, params, defaults)
    out = [
        "````{admonition} Re-run this chapter",
        ":class: tip, dropdown",
        f"This page was executed with the `{profile}` profile at commit `{(git_state()['commit'] or 'unknown')[:12]}`. "
        "To execute it again with your own parameters:",
        "```bash",
        cmd + "            # these exact parameters",
        f"posbias run {chapter_id} -p NAME VALUE ...   # your own; see `posbias list {chapter_id}`",
        "```",
        "",
        "| parameter | type | this run | default | allowed | meaning |",
        "| --- | --- | --- | --- | --- | --- |",
        rows,
        "````",
    ]
    for fig in figures:
        out += ["", "````{admonition} Cite this figure: " + fig["name"], ":class: note, dropdown",
                "```bibtex", figure_bibtex(chapter_id, fig, ch.title), "```",
                "Files (SHA-256): " + ", ".join(f"`{ext}` {f['sha256'][:16]}" for ext, f in fig["files"].items()),
                "````"]
    return "\n".join(out)


def status_page(results: dict[str, dict[str, Any] | None], profile: str) -> str:
    """The generated *Status* page: one row per chapter, then each chapter's checks and the data it read.

    The table is a ``list-table`` of class ``longtable`` so that it also breaks across pages in the PDF."""
    git = git_state()
    lines = ["# Status of this build", "",
             f"Every chapter below was executed for this build with the `{profile}` profile at commit "
             f"`{git['commit']}`{' (with uncommitted changes)' if git['dirty'] else ''}. Each check is an assertion "
             "comparing a measured number with a derived one; a failed check stops the build.", "",
             "```{list-table}", ":header-rows: 1", ":class: longtable", "",
             "* - chapter", "  - profile", "  - status", "  - checks", "  - wall time (s)", "  - device",
             "  - data files read"]
    detail = []
    teeth = (read_teeth() or {}).get("chapters", {})
    runs = sample_runs()
    chapters = next((t for t, r in reversed(runs) if r["has_reach"]), None)
    per = sampled_by_chapter(TEETH_PATH.with_name(SAMPLES[chapters]))[1] if chapters else {}
    if runs:
        detail += ["Wrong versions nobody listed: each `make mutants` sample draws mutmut's mutants of the science "
                   "and measurement modules at random, with a seed fixed in the Makefile before the draw and none "
                   "an earlier sample drew, and runs the chapters' smoke checks and those modules' unit tests on "
                   "each. Killed of those tested, the score and its 95% interval, as each run measured them:", ""]
        detail += [f"- `make {t}` (seed {r['seed']}, {r['date']}, sources and tests of {r['commit']}): "
                   f"{r['killed']} of {r['tested']}, {r['score']:.3f} ({r['score_95'][0]:.3f} to "
                   f"{r['score_95'][1]:.3f})" for t, r in runs] + [""]
        detail += ["Beside the samples, the science core tested whole (`make mutants-core`: every mutant of masks, "
                   "attention, rollout, theory, lntheory, lnsim, task, model and retrieval, no sample): "
                   f"{core_result()}.", ""]
        if chapters:
            detail += [f"Under each chapter below, from `make {chapters}`: the sampled mutants its smoke run reaches "
                       "and those of them the whole test let live, with what became of them since (a kill is the "
                       "whole test's, not the chapter's alone).", ""]
    if teeth:
        detail += ["The checks of the theory chapters and of the chapters that train networks are tried against "
                   "curated wrong versions of the library (`tests/mutants.py`, `tests/mutants_trained.py`; "
                   "`data/mutants/teeth.json`, kept up to date by `tests/test_mutations.py`): each check says how many "
                   "of its chapter's mutants it kills (where the chapter has a seed, at its own and at two others "
                   "alike: a failure on one seed's noise is not a kill); one that kills none is *descriptive*. "
                   "Checks of the committed networks (the trained chapters' `paper-` step counts, counts out of "
                   "the test set, stored gaps and maps) are tried against records as a wrong writer would have "
                   "stored them, or under another network's key (the `record-` mutants): a damaged file never "
                   "reaches them, data/manifest.json refuses it first.",
                   ""]
    for cid, res in results.items():
        if res is None:
            lines += [f"* - {cid}", "  -", "  - not run", "  -", "  -", "  -", "  -"]
            continue
        checks = res["checks"]
        ok = sum(c["passed"] for c in checks)
        prov = res["provenance"]
        data = res.get("data", [])
        sources = sorted({d["source"] for d in data})
        lines += [f"* - [{cid}](./{cid}/{cid}.ipynb)", f"  - {res['profile']}", f"  - {res['status']}",
                  f"  - {ok}/{len(checks)}", f"  - {prov['wall_seconds']}", f"  - {prov.get('device', '')}",
                  f"  - {len(data)} ({', '.join(sources)})" if data else "  - none"]
        detail += [f"### {cid}", ""] + [
            f"- {'{bdg-success}`pass`' if c['passed'] else '{bdg-danger}`FAIL`'} `{c['name']}`: {c['claim']}"
            + _teeth_note(teeth, cid, c["name"]) for c in checks] + [""]
        detail += _sampled_note(per.get(cid), chapters or "mutants")
        if data:
            detail += ["Data files read (path, source, SHA-256):", ""] + [
                f"- `{d['path']}` ({d['source']}, `{d['sha256'][:16]}`)" for d in data] + [""]
    lines.append("```")
    return "\n".join(lines + [""] + code_gaps_section() + ["## Checks and data, chapter by chapter", ""]
                     + detail) + "\n"


def code_gaps_section(gaps: dict[str, list[dict[str, Any]]] | None = None) -> list[str]:
    """The Status page's section on the committed networks whose code is not all in a commit
    (:func:`posbias.storage.provenance.code_gaps`): those trained partly from uncommitted code, grouped by commit
    and configuration, and those with sittings that record no commit, with why (issue 95)."""
    gaps = code_gaps(store.DATA) if gaps is None else gaps
    dirty, lost = gaps["uncommitted"], gaps["no commit"]
    if not dirty and not lost:
        return []
    out = ["## Networks trained from uncommitted code", "",
           "Each sitting of a network's training records the commit of the code it ran and whether `posbias/` "
           "or `notebooks/` had uncommitted changes then. "
           f"{len(dirty)} committed network{'s' if len(dirty) != 1 else ''} trained partly from uncommitted code "
           "(a sitting's tree was dirty): some of their steps ran code that no commit holds. A verdict that rests "
           "on one of them says so beside it (*trained partly from uncommitted code*). By commit and "
           "configuration:", ""]
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for d in dirty:
        groups.setdefault((", ".join(f"`{c}`" for c in d["commits"]), unit_words(d["params"], seed=False)
                           if "depth" in d["params"] else d["unit"]), []).append(d)
    for (commits, unit), ds in sorted(groups.items()):
        seeds = ", ".join(str(d["params"].get("seed")) for d in sorted(ds, key=lambda d: d["params"].get("seed", 0)))
        share = {(d["sittings"], d["of"]) for d in ds}
        k, n = next(iter(share))
        sat = ("; all of its training" if len(ds) == 1 else "; all of their training") if share == {(n, n)} else (
            f"; in {k} of {n} sittings" if len(share) == 1 else "; in some of their sittings")
        out.append(f"- at {commits} with uncommitted changes: {unit}, seed{'s' if len(ds) != 1 else ''} {seeds}{sat}")
    out.append("")
    if lost:
        out += [f"{len(lost)} committed network{'s' if len(lost) != 1 else ''} have sittings that record no commit:",
                ""]
        out += [f"- {d['unit']}: {d['sittings']} of {d['of']} sittings; {d['reason']}" for d in lost] + [""]
    return out


def _sampled_note(n: dict[str, int] | None, target: str = "mutants") -> list[str]:
    """The line under a chapter's checks on the sample ``make <target>`` drew (none where its run reaches
    none)."""
    if not n:
        return []
    since = ", ".join(f"{n[k]} {'killed since' if k == 'unit' else k}" for k in STANDINGS if n[k])
    return [f"Sampled mutants (`make {target}`): {n['reached']} reach this chapter's smoke run; "
            f"{n['reached'] - n['survived']} were killed at the run, {n['survived']} survived it"
            + (f" ({since})." if since else "."), ""]


def _teeth_note(teeth: dict[str, dict[str, list[str]]], chapter: str, check: str) -> str:
    """`` (kills 3 of 4 mutants)`` or `` (descriptive: kills no mutant)`` for a check of a chapter
    listed in ``data/mutants/teeth.json``; empty for other chapters and for checks the table does not know."""
    table = teeth.get(chapter)
    if not table or check not in table:
        return ""
    total = len({m for ms in table.values() for m in ms})
    k = len(table[check])
    return f" *(kills {k} of {total} mutants)*" if k else " *(descriptive: kills no mutant)*"


def _commit() -> str:
    return (git_state()["commit"] or "unknown")[:12]


def citation_page(results: dict[str, dict[str, Any] | None]) -> str:
    lines = ["# How to cite", "",
             "Cite the book as a whole with the entry in `CITATION.cff` at the root of the repository "
             "(GitHub shows it as *Cite this repository*), and cite the source papers for their results "
             "(see the bibliography). Each reproduced figure has its own entry below, pinned to the commit "
             "that made it and to the SHA-256 of its PNG file; the PNG, SVG and PDF files carry the same "
             "provenance in their metadata, and the entry is written from it.", "",
             "**What an entry says.** A figure drawn from stored results (the trained networks in `data/`, "
             "a language model's measurements) is cited by the settings of those results: how many networks "
             "or records, their iterations, seeds and test sizes, a mix where they differ, and a short "
             "SHA-256 of the list of files it read, so that two readers can tell whether they cite the same "
             "evidence. A figure computed in the run is cited by the run's profile and parameters. Each entry "
             f"points at its chapter's short address, `{BOOK_URL}/{SHORT}/<chapter>.html`, which stays valid "
             "whatever the layout of the build.", "",
             "**Citing a version.** The verdicts and figures change as networks are added, so cite the book "
             f"at the commit you read: `@misc{{posbias, ..., note = {{posbias at commit {_commit()}}}}}` "
             "for this build (every page's Re-run box prints its commit), or, once a release is tagged, at "
             "its tag (`version` in `CITATION.cff`).", "",
             "```bibtex",
             "@misc{posbias,",
             "  title        = {{posbias}: a reproducible companion to the research on position bias in transformers},",
             "  author       = {{The posbias developers}},",
             f"  year         = {{{YEAR}}},",
             f"  howpublished = {{\\url{{{BOOK_URL}}}}},",
             "}", "```", ""]
    for cid, res in results.items():
        if not res or not res.get("figures"):
            continue
        lines += [f"## {res['title']}", ""]
        for fig in res["figures"]:
            lines += [f"Figure `{fig['name']}` of [{cid}](./{cid}/{cid}.ipynb):", "", "```bibtex",
                      figure_bibtex(cid, fig, res["title"]), "```", ""]
    return "\n".join(lines) + "\n"


def footer() -> None:
    """Show the chapter's "Re-run this chapter" box and a "Cite this figure" box per saved figure.

    Call it in the last code cell of every chapter."""
    chapter = os.environ.get("POSBIAS_CHAPTER")
    if not chapter:
        report.show_markdown(f"(interactive session: {report.summary()})")
        return
    params = json.loads(os.environ.get("POSBIAS_PARAMS", "{}"))
    figures = report.record()["figures"]
    report.show_markdown(footer_markdown(chapter, params, figures, os.environ.get("POSBIAS_PROFILE", "")))
