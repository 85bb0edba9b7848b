"""The chapters' half of ``make mutants``' test command (mutmut): every theory chapter's smoke checks and
every chapter that measures trained networks, in-process.

Not collected by ``make test`` (no ``test_`` prefix): ``tests/mutmut_run.py`` hands this file to mutmut,
with the unit tests of the mutated modules (``UNIT_TESTS`` there), and mutmut counts a mutant killed
when a chapter here fails a check or a unit test fails.
"""
from __future__ import annotations

import os

import pytest

from posbias.book.mutation import execute_chapter, failed_checks

THEORY = ["wu-thm-4-1", "wu-thm-4-2", "wu-thm-4-3", "wu-thm-4-5", "wu-thm-4-7", "wu-center-nodes",
          "kim-thm-1", "kim-prop-1", "kim-prop-2", "kim-prop-3", "kim-fig-1", "kim-fig-2", "kim-beyond-rope"]


#: Chapters whose checks read the measurement code (evaluate, claims/quantities, stats, llm/sinks) on
#: trained networks: the smoke networks are trained again under the mutant (an empty cache), the
#: committed paper-profile networks read as committed.
MEASURED = ["wu-fig-2", "wu-fig-3", "wu-fig-4", "wu-fig-5", "wu-fig-6", "wu-residual-depth",
            "wu-bias-over-training", "sinks-synthetic-vs-real", "scoreboard"]


@pytest.mark.parametrize("chapter", THEORY)
def test_smoke_checks_pass(chapter, tmp_path):
    os.environ["POSBIAS_CACHE"] = str(tmp_path)          # fresh: a mutant must not read a stored result
    assert failed_checks(execute_chapter(chapter, "smoke", fresh=True)) == []


@pytest.mark.parametrize("chapter", MEASURED)
def test_measured_chapters_pass(chapter, tmp_path):
    os.environ["POSBIAS_CACHE"] = str(tmp_path)          # its own cache; data/ read as committed
    assert failed_checks(execute_chapter(chapter, "smoke")) == []
