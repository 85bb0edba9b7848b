"""The confirmation campaign's judge: the register as frozen before any confirmation network trained.

Every rule of ``wu2025.yml`` was written after the networks it judges (seeds 0-4) had been read, so
its verdicts are exploratory. :func:`freeze` copies the register byte for byte into
``wu2025.frozen.yml`` with its SHA-256, the time of the freeze and the SHA-256 of the code that
computes the verdicts; that file is committed before the first confirmation unit trains (the commit
order and each unit's provenance show it). :func:`judge_confirmatory` judges the frozen register on
the ``confirm`` profile's networks (seeds 5-9, the paper's settings, a fresh test draw) with Holm over
the entries judged, and refuses: a register that differs from the frozen one, a frozen file whose
body no longer matches its hash, and any unit with a seed below :data:`FIRST_SEED`, another test draw,
or training that began before the freeze.
"""
from __future__ import annotations

import hashlib
import json
import re
import subprocess
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping, Sequence

from posbias.storage import store
from posbias.training.campaigns import distinct, settings, units_of
from posbias.training.units import CONFIRM_TEST_SEED
from posbias.analysis.claims import NOT_YET, REGISTER, Entry, Judged, Register, judge, load
from posbias.analysis.claims.tables import uncommitted_words

__all__ = ["FROZEN", "FIRST_SEED", "PROFILE", "CODE", "Frozen", "ConfirmationError", "freeze", "frozen",
           "confirmation_units", "judge_confirmatory", "code_changes", "code_change_log", "AT_FREEZE", "agreement",
           "live_is_frozen", "live_differences",
           "CAMPAIGNS", "plan", "design_words"]

FROZEN = REGISTER.with_name("wu2025.frozen.yml")
#: The first seed of the confirmation networks: no unit with a lower seed enters the column.
FIRST_SEED = 5
#: The campaign profile whose units the confirmatory judge reads.
PROFILE = "confirm"
#: The code that turns stored units into verdicts, hashed at the freeze (shown when it changed since).
CODE = ("posbias/analysis/claims/__init__.py", "posbias/analysis/claims/quantities.py", "posbias/measures/stats.py",
        "posbias/measures/evaluate.py")
#: Where each file of :data:`CODE` was at the freeze (issue 97 moved them into the layers' subpackages): its
#: hash in the frozen header is under that path, and :func:`code_change_log` reads the history of both paths.
AT_FREEZE = {"posbias/analysis/claims/__init__.py": "posbias/claims/__init__.py",
             "posbias/analysis/claims/quantities.py": "posbias/claims/quantities.py",
             "posbias/measures/stats.py": "posbias/stats.py", "posbias/measures/evaluate.py": "posbias/evaluate.py",
             "posbias/analysis/claims/wu2025.frozen.yml": "posbias/claims/wu2025.frozen.yml"}
#: Confirmation networks that exist already, read, outside the campaign: the fixed-budget study
#: (issue 67) trained decay|2 with seeds 5-9 from the same weights and batches, and its evaluations at
#: 100,000 iterations (on the exploratory test draw) were read before the freeze. The confirm units of
#: these configurations are the same networks, measured on a fresh draw: an entry resting on them is
#: marked "partly seen" in the confirmatory column, declared here before any confirmation unit trained.
SEEN = {"wu-fig-2": {"decay|2": (5, 6, 7, 8, 9)}}
_ROOT = Path(__file__).resolve().parents[3]
_MARK = "# --- the register, byte for byte ---\n"


class ConfirmationError(ValueError):
    """A confirmatory verdict was asked of a register or of units the freeze does not allow."""


@dataclass(frozen=True)
class Frozen:
    """The frozen register: its text and SHA-256, when it was frozen, the test draw and first seed of
    the networks it judges, and the SHA-256 of each file of :data:`CODE` at the freeze."""

    text: str
    sha256: str
    frozen_at: datetime
    test_seed: int
    first_seed: int
    code: dict[str, str]
    seen: dict[str, tuple[int, ...]]

    def register(self) -> Register:
        """The frozen register, loaded and validated once per process (its text never changes: its SHA-256)."""
        if self.sha256 not in _LOADED:
            _LOADED[self.sha256] = load(text=self.text)
        return _LOADED[self.sha256]

    def partly_seen(self, entry: Entry) -> list[str]:
        """The configurations of ``entry`` whose confirmation networks were read before the freeze."""
        return [c for c in entry.configs if f"{entry.campaign} {c}" in self.seen]


#: Frozen registers loaded in this process, by the SHA-256 of their text.
_LOADED: dict[str, Register] = {}


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _code_hashes() -> dict[str, str]:
    return {p: hashlib.sha256((_ROOT / p).read_bytes()).hexdigest() for p in CODE}


def freeze(path: Path = FROZEN, source: Path = REGISTER, *, now: datetime | None = None) -> Frozen:
    """Write the frozen copy of ``source`` to ``path`` (atomically); refuses to overwrite one."""
    if path.exists():
        raise ConfirmationError(f"{path} exists: a frozen register is never rewritten; a later register is a "
                                "new version judged on new networks")
    text = source.read_text()
    load(text=text)                                         # a register that does not validate is not frozen
    when = (now or datetime.now(timezone.utc)).replace(microsecond=0)
    head = [f"# The claim register {source.name}, frozen for the confirmation campaign (issue 68). Never edit this",
            "# file: the confirmatory judge refuses it when its body no longer matches the hash below.",
            f"# sha256: {_sha(text)}",
            f"# frozen_at: {when.isoformat()}",
            f"# test_seed: {CONFIRM_TEST_SEED}",
            f"# first_seed: {FIRST_SEED}"]
    head += [f"# code: {p} {h}" for p, h in _code_hashes().items()]
    head += [f"# seen: {c} {label} {','.join(map(str, seeds))}" for c, g in SEEN.items() for label, seeds in g.items()]
    store.atomic_write_text(path, "\n".join(head) + "\n" + _MARK + text)
    return frozen(path)


def frozen(path: Path = FROZEN) -> Frozen:
    """The frozen register, checked: its body must match the SHA-256 in its header."""
    raw = Path(path).read_text()
    if _MARK not in raw:
        raise ConfirmationError(f"{path}: not a frozen register (no line {_MARK.strip()!r})")
    head, text = raw.split(_MARK, 1)
    meta: dict[str, Any] = {"code": {}, "seen": {}}
    for line in head.splitlines():
        m = re.match(r"# (sha256|frozen_at|test_seed|first_seed|code|seen): (.+)$", line)
        if m and m[1] == "code":
            p, h = m[2].split()
            meta["code"][p] = h
        elif m and m[1] == "seen":                     # "<campaign> <label, maybe with spaces> <seeds>"
            c, rest = m[2].split(" ", 1)
            label, seeds = rest.rsplit(" ", 1)
            meta["seen"][f"{c} {label}"] = tuple(int(x) for x in seeds.split(","))
        elif m:
            meta[m[1]] = m[2].strip()
    missing = [k for k in ("sha256", "frozen_at", "test_seed", "first_seed") if k not in meta]
    if missing:
        raise ConfirmationError(f"{path}: the header lacks {', '.join(missing)}; restore the file with "
                                "`git checkout -- posbias/analysis/claims/wu2025.frozen.yml`")
    if _sha(text) != meta.get("sha256"):
        raise ConfirmationError(f"{path}: the register below its header no longer matches the SHA-256 it was "
                                "frozen with; restore it with `git checkout -- "
                                "posbias/analysis/claims/wu2025.frozen.yml`")
    return Frozen(text, meta["sha256"], datetime.fromisoformat(meta["frozen_at"]), int(meta["test_seed"]),
                  int(meta["first_seed"]), meta["code"], meta["seen"])


def code_changes(fz: Frozen | None = None) -> list[str]:
    """The files of :data:`CODE` whose content differs from the freeze (the verdicts are recomputed by
    today's code; the register's rules cannot change, the code that applies them can be refactored)."""
    fz = fz or frozen()
    now = _code_hashes()
    return [p for p in CODE if fz.code.get(p if p in fz.code else AT_FREEZE.get(p, p)) != now[p]]


def code_change_log(fz: Frozen | None = None, path: Path = FROZEN) -> dict[str, list[str]]:
    """For each file of :func:`code_changes`, the commits that changed it since the freeze (``"<sha>
    <subject>"``, oldest first): what a reader checks to see that no rule moved. Read from git, from the
    commit that added the frozen file ``path``; an empty list where this copy has no git history."""
    changed = code_changes(fz)
    out: dict[str, list[str]] = {p: [] for p in changed}
    if not changed:
        return out
    git = lambda *a: subprocess.run(["git", *a], cwd=_ROOT, capture_output=True, text=True,  # noqa: E731
                                    timeout=30)
    try:
        here = str(path.relative_to(_ROOT))
        # both paths, renames not detected: the file was added once, at the path it had then
        added = git("log", "--no-renames", "--diff-filter=A", "--format=%H", "--", here, AT_FREEZE.get(here, here))
        if added.returncode or not added.stdout.strip():
            return out
        for p in changed:
            got = git("log", "--reverse", "--no-renames", "--format=%h %s", f"{added.stdout.split()[-1]}..HEAD", "--",
                      p, AT_FREEZE.get(p, p))
            out[p] = got.stdout.splitlines() if got.returncode == 0 else []
    except (OSError, subprocess.SubprocessError, ValueError):
        pass
    return out


def _started(rec: Mapping[str, Any]) -> datetime | None:
    """When the unit's training began: the earliest start over its sittings and its record (None when
    its provenance records none: such a unit cannot show that it trained after the freeze)."""
    prov = rec.get("provenance", {})
    times = [s.get("started") for s in prov.get("sittings") or []] + [prov.get("started")]
    times = [datetime.fromisoformat(t) for t in times if t]
    return min(times) if times else None


def confirmation_units(fz: Frozen, campaigns: Sequence[str], profile: str = PROFILE,
                       **overrides: Any) -> dict[str, dict[str, list[dict | None]]]:
    """campaign -> label -> one stored result (or None) per seed of ``profile``'s units, every stored
    one checked against the freeze. Raises :class:`ConfirmationError` naming each unit with a seed
    below the frozen first seed, another test draw, or training begun before the freeze."""
    from posbias.training.campaigns import lookup_record  # at call time: tests patch campaigns.lookup_record

    out: dict[str, dict[str, list[dict | None]]] = {}
    bad: list[str] = []
    for c in campaigns:
        groups = units_of(c, profile, overrides)
        out[c] = {}
        for label, us in groups.items():
            row: list[dict | None] = []
            for u in us:
                if u.seed < fz.first_seed:
                    bad.append(f"{c} {label} seed {u.seed}: below the first confirmation seed {fz.first_seed}")
                if u.test_seed != fz.test_seed:
                    bad.append(f"{c} {label} seed {u.seed}: test draw {u.test_seed}, the freeze's is {fz.test_seed}")
                rec = lookup_record(u)
                began = None if rec is None else _started(rec)
                if rec is not None and began is None:
                    bad.append(f"{c} {label} seed {u.seed}: its provenance records no start of training")
                elif began is not None and began < fz.frozen_at:
                    bad.append(f"{c} {label} seed {u.seed}: trained from {began.isoformat()}, before the "
                               f"freeze ({fz.frozen_at.isoformat()})")
                row.append(None if rec is None else rec["result"])
            out[c][label] = row
    if bad:
        raise ConfirmationError("no confirmatory verdict on units the freeze does not allow:\n  " + "\n  ".join(bad))
    return out


def judge_confirmatory(reg: Register | str | None = None, *, path: Path = FROZEN, profile: str = PROFILE,
                       **overrides: Any) -> list[Judged]:
    """Every entry of the frozen register judged on the confirmation networks (stored ones only;
    nothing trains), Holm over the entries judged. ``reg`` (a register's text, or a :class:`Register`)
    is the register the caller means to judge with: refused unless it is the frozen one."""
    fz = frozen(path)
    frozen_reg = fz.register()
    if reg is not None:
        same = _sha(reg) == fz.sha256 if isinstance(reg, str) else reg == frozen_reg
        if not same:
            raise ConfirmationError("this register differs from the one frozen for the confirmation campaign "
                                    f"(sha256 {fz.sha256[:12]}); a confirmatory verdict is given by the frozen "
                                    "register only, and a new register is judged on new networks")
    units = confirmation_units(fz, list(dict.fromkeys(e.campaign for e in frozen_reg.entries)), profile, **overrides)
    return judge(frozen_reg.entries, units, reg=frozen_reg)


def agreement(exploratory: Sequence[Judged], confirmatory: Sequence[Judged], seen=None) -> list[dict[str, Any]]:
    """Per claim id of the frozen register: the exploratory verdict (after Holm over the book's
    register), the confirmatory one (after Holm over the entries judged), the configurations read
    before the freeze (``seen``: :meth:`Frozen.partly_seen`), those whose confirmation networks trained
    partly from uncommitted code (``uncommitted code``, e.g. ``"decay|4 (5 of 5)"``) and whether the
    verdicts agree (``None`` while the confirmatory one is not yet given, or the claim left the book's
    register)."""
    ex = {j.entry.id: j.holm for j in exploratory}
    rows = []
    for j in confirmatory:
        e = ex.get(j.entry.id)
        rows.append({"claim": j.entry.id, "figure": j.entry.figure, "exploratory": e or "(not in the register)",
                     "confirmatory": j.holm, "partly seen": ", ".join(seen(j.entry)) if seen else "",
                     "uncommitted code": uncommitted_words(j).removeprefix("trained partly from uncommitted code: "),
                     "agree": None if j.holm == NOT_YET or e is None else e == j.holm})
    return rows


def live_is_frozen(fz: Frozen | None = None) -> bool:
    """Is the book's register (``wu2025.yml``) still the frozen one?"""
    fz = fz or frozen()
    return _sha(REGISTER.read_text()) == fz.sha256


def live_differences(fz: Frozen | None = None) -> list[str]:
    """How the book's register differs from the frozen one, in words: judge rules added, changed or removed (by
    key) and entries added, changed or removed (by id); empty where it is the frozen one byte for byte."""
    import yaml

    fz = fz or frozen()
    live, old = yaml.safe_load(REGISTER.read_text()), yaml.safe_load(fz.text)
    out = []
    for what, a, b in (("judge rule", old["judge"], live["judge"]),
                       ("entry", {e["id"]: e for e in old["claims"]}, {e["id"]: e for e in live["claims"]})):
        out += [f"{what} {k} added" for k in b if k not in a]
        out += [f"{what} {k} changed" for k in b if k in a and a[k] != b[k]]
        out += [f"{what} {k} removed" for k in a if k not in b]
    return out


#: The campaigns the confirmation trains, in the order planned: Figure 2, then Appendix K.2 (Figure 5's
#: networks are Figure 2's depth-2 No PE ones; Figure 6 adds windows and prefixes), then, if the
#: core-hours allow, Figures 3 and 4.
CAMPAIGNS = ("wu-fig-2", "wu-fig-5", "wu-fig-6", "wu-fig-3", "wu-fig-4")


def plan(bench: Mapping[str, Any], profile: str = PROFILE) -> list[dict[str, Any]]:
    """The confirmation campaign's plan at a measured pace: one row per campaign of :data:`CAMPAIGNS`
    with its units, those new (not in an earlier campaign of the list), the depths, and the core-hours
    of their training steps at ``bench``'s milliseconds per member-step (a ``train_throughput.py``
    result: each depth's campaign-packed ensemble step over its members; evaluations not counted)."""
    ms = {int(d): 1000 * r["ensemble_step_s"] / r["members"] for d, r in bench["depths"].items()}
    seen: set[str] = set()
    rows = []
    for c in CAMPAIGNS:
        us = distinct(units_of(c, profile, {}))
        new = [u for u in us if json.dumps(u.params(), sort_keys=True) not in seen]
        seen |= {json.dumps(u.params(), sort_keys=True) for u in us}
        missing = sorted({u.depth for u in new} - set(ms))
        if missing:
            raise ValueError(f"the benchmark has no pace at depth(s) {missing}; run train_throughput.py --depths ...")
        hours = sum(u.steps * ms[u.depth] / 1000 / 3600 for u in new)
        rows.append({"campaign": c, "units": len(us), "new units": len(new),
                     "depths": ", ".join(str(d) for d in sorted({u.depth for u in us})),
                     "core-hours": round(hours, 1)})
    return rows


def design_words(profile: str = PROFILE) -> str:
    """The confirmation's design in words, from the ``confirm`` profile itself (seeds, iterations, batch,
    test-set size and test draw), for the pages that state it: ``"seeds 5-9 at the paper's settings
    (100,000 iterations, batch 128, 10,000 sequences per test set) on a fresh test draw (seed ...)"``."""
    from posbias.training.units import Unit

    p = settings(CAMPAIGNS[0], profile)
    seeds = sorted(p["seeds"])
    run = (f"seeds {seeds[0]}-{seeds[-1]}" if seeds == list(range(seeds[0], seeds[-1] + 1))
           else "seeds " + ", ".join(map(str, seeds)))
    batch = Unit.__dataclass_fields__["batch_size"].default
    return (f"{run} at the paper's settings ({p['steps']:,} iterations, batch {batch}, {p['n_test']:,} "
            f"sequences per test set) on a fresh test draw (seed {p['test_seed']})")
