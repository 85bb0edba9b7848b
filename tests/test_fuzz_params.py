"""tests/fuzz_params.py (``make fuzz``): the guard never refuses a chapter's own smoke run, and the summary
says who refused a point."""
from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

import pytest  # noqa: E402

from fuzz_params import budget, kind  # noqa: E402
from param_space import try_point  # noqa: E402
from posbias.book import cost  # noqa: E402
from posbias.book.chapters import chapter_ids, get_chapter  # noqa: E402


@pytest.mark.parametrize("cid", chapter_ids())
def test_the_guard_lets_the_smoke_run_through(cid):
    """At a 20-s guard every kim-* chapter's smoke run (about 25 s estimated) was refused, and so was
    every point drawn near it: make fuzz ran none of their cases and reported no failure."""
    ch = get_chapter(cid)
    smoke = cost.estimate(ch, ch.resolve("smoke", {})).seconds
    assert budget(cid, 20.0) >= max(20.0, 2 * smoke)
    code, what = try_point(ch, {}, budget(cid, 20.0), execute=False)
    assert code == 0, what


def test_kind_names_who_refused():
    assert kind(2, "cost guard: about 25 s on one CPU core") == "refused (cost guard)"
    assert kind(2, "above this harness's memory cap (8192 MiB address space): ...") == "refused (cost guard)"
    assert kind(2, "refused: n_tokens: 0 is below the minimum 2") == "refused (validation)"
    assert (kind(0, "3 checks passed"), kind(3, "failed x"), kind(1, "raised")) == ("exit 0", "exit 3", "exit 1")
