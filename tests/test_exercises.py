"""Every theory chapter ends with exercises a reader can run: a question, the exact ``posbias run`` command,
and the answer in a dropdown. The commands are validated here the way ``posbias run`` validates them (the
chapter, every ``-p NAME VALUE``, the profile, the cross-parameter constraints) without executing
anything, so that a renamed parameter or a value moved out of its range fails this test instead of a
reader's run; and each must be cheap by the chapter's own cost model."""
from __future__ import annotations

import ast
import re
import shlex
from pathlib import Path

import pytest

from posbias.book import cost
from posbias.book.chapters import ParamError
from posbias.book.cli import _overrides
from posbias.storage.provenance import ROOT
from posbias.book.runner import prepare


def theory_chapters() -> list[str]:
    """The theory chapters, as tests/test_mutations.py lists them (read, not imported: one list)."""
    tree = ast.parse((Path(__file__).parent / "test_mutations.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] == ["THEORY"]:
            return ast.literal_eval(node.value)
    raise AssertionError("tests/test_mutations.py defines no THEORY list")


THEORY = theory_chapters()
MAX_SECONDS = 120.0         # an exercise is a minute or two on one laptop core, by the chapter's cost model
MAX_MB = 2048.0

_SECTION = re.compile(r"^## Exercises[ \t]*\n(.*?)(?=^## |^```\{code-cell\}|\Z)", re.M | re.S)
_NUMBERED = re.compile(r"^\*\*(\d+)\. ", re.M)
_BASH = re.compile(r"^```bash[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)
_ANSWER = re.compile(r"^:::\{dropdown\} Answer[ \t]*\n(.*?)^:::[ \t]*$", re.M | re.S)


def check_command(cid: str, line: str) -> str | None:
    """What is wrong with one command line of chapter ``cid``'s exercises (None: nothing). Only what a
    reader types: ``posbias run <cid>``, then ``-p NAME VALUE`` and ``--profile NAME`` in any order."""
    try:
        words = shlex.split(line)
    except ValueError as e:
        return f"{line!r}: not a shell command ({e})"
    if words[:2] != ["posbias", "run"] or len(words) < 3:
        return f"{line!r}: not a `posbias run CHAPTER` command"
    if words[2] != cid:
        return f"{line!r}: runs {words[2]!r}, not this chapter"
    pairs, profile, rest = [], "default", words[3:]
    while rest:
        if rest[0] == "-p" and len(rest) >= 3:
            pairs.append(rest[1:3])
            rest = rest[3:]
        elif rest[0] == "--profile" and len(rest) >= 2:
            profile, rest = rest[1], rest[2:]
        else:
            return f"{line!r}: unexpected {rest[0]!r} (only -p NAME VALUE and --profile NAME)"
    try:
        chapter, params = prepare(cid, _overrides(pairs), profile)     # what `posbias run` does first
    except ParamError as e:
        return f"{line!r}: refused: {e}"
    est = cost.estimate(chapter, params)
    if est.seconds > MAX_SECONDS or est.memory_mb > MAX_MB:
        return f"{line!r}: too expensive for an exercise ({est.describe()})"
    return None


def exercise_problems(cid: str, text: str) -> list[str]:
    """Every problem of chapter ``cid``'s exercises in its source ``text`` (empty: none)."""
    sections = _SECTION.findall(text)
    if len(sections) != 1:
        return [f"{len(sections)} '## Exercises' sections, not one"]
    starts = list(_NUMBERED.finditer(sections[0]))
    if len(starts) < 2:
        return [f"{len(starts)} numbered exercises (**1. ...**), fewer than two"]
    problems = []
    if [int(m.group(1)) for m in starts] != list(range(1, len(starts) + 1)):
        problems.append("the exercises are not numbered 1, 2, ...")
    for k, m in enumerate(starts):
        end = starts[k + 1].start() if k + 1 < len(starts) else len(sections[0])
        body, n = sections[0][m.start():end], m.group(1)
        blocks, answers = list(_BASH.finditer(body)), list(_ANSWER.finditer(body))
        lines = [ln.strip() for b in blocks for ln in b.group(1).splitlines() if ln.strip()]
        if not lines:
            problems.append(f"exercise {n}: no ```bash block with its command")
        if len(answers) != 1 or not answers[0].group(1).strip():
            problems.append(f"exercise {n}: {len(answers)} ':::{{dropdown}} Answer' blocks, not one with text")
        elif blocks and answers[0].start() < blocks[-1].end():
            problems.append(f"exercise {n}: the answer comes before the command")
        head = body[:blocks[0].start()] if blocks else body
        if not re.sub(r"^\*\*\d+\. .*?\*\*", "", head, count=1, flags=re.S).strip():
            problems.append(f"exercise {n}: no question before the command")
        problems += [f"exercise {n}: {p}" for p in map(lambda ln: check_command(cid, ln), lines) if p]
    return problems


def test_the_theory_list_is_read():
    assert "wu-thm-4-1" in THEORY and "kim-thm-1" in THEORY


@pytest.mark.parametrize("cid", THEORY)
def test_every_theory_chapter_has_exercises_whose_commands_run(cid):
    text = (ROOT / "notebooks" / f"{cid}.md").read_text()
    assert exercise_problems(cid, text) == []


GOOD = """## Exercises

Intro.

**1. First.** Predict.

```bash
posbias run wu-thm-4-1 --profile smoke -p weight_norm 0
```

:::{dropdown} Answer
It moves.
:::

**2. Second.** Predict again.

```bash
posbias run wu-thm-4-1 -p n_grid 8,32 -p depth 24
```

:::{dropdown} Answer
It stays.
:::

## Takeaway
"""


def test_a_well_formed_section_passes():
    assert exercise_problems("wu-thm-4-1", GOOD) == []


@pytest.mark.parametrize("old, new, pattern", [
    ("-p weight_norm 0", "-p weight_nrom 0", "has no parameter 'weight_nrom'"),       # a renamed parameter
    ("-p weight_norm 0", "-p weight_norm 9", "above the maximum"),                    # out of its range
    ("-p depth 24", "-p depth 20", "impossible combination"),                         # a constraint
    ("-p depth 24", "-p depth 24 -p depth 30", "given twice"),
    ("--profile smoke", "--profile huge", "unknown profile"),
    ("run wu-thm-4-1 -p n_grid", "run wu-thm-4-2 -p n_grid", "not this chapter"),
    ("-p depth 24", "-p depth 24 --out here", "unexpected '--out'"),
    ("-p n_grid 8,32 -p depth 24", "-p n_grid 2048 -p depth 40 -p samples 64", "too expensive"),
    (":::{dropdown} Answer\nIt stays.\n:::\n", "", "exercise 2: 0 ':::{dropdown} Answer' blocks"),
    ("**2. Second.**", "Second.", "fewer than two"),
    ("**2. Second.** Predict again.\n\n", "**2. Second.**\n", "no question"),
    ("```bash\nposbias run wu-thm-4-1 -p n_grid", "```text\nposbias run wu-thm-4-1 -p n_grid", "no ```bash block"),
])
def test_a_broken_exercise_fails(old, new, pattern):
    assert old in GOOD
    problems = exercise_problems("wu-thm-4-1", GOOD.replace(old, new, 1))
    assert any(re.search(re.escape(pattern), p) for p in problems), problems
