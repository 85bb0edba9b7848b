"""The test command of ``make mutants`` (mutmut): every theory chapter's smoke checks, in-process.

Not collected by ``make test`` (no ``test_`` prefix): ``tests/mutmut_run.py`` hands this file to mutmut,
which mutates ``posbias/theory.py``, ``masks.py``, ``rollout.py``, ``attention.py``, ``lnsim.py`` and
``lntheory.py`` one change at a time and counts a mutant killed when a chapter here fails a check.
"""
from __future__ import annotations

import os

import pytest

from posbias.mutation import execute_chapter, failed_checks

THEORY = ["wu-thm-4-1", "wu-thm-4-2", "wu-thm-4-3", "wu-thm-4-5", "wu-thm-4-7", "wu-center-nodes",
          "kim-thm-1", "kim-prop-1", "kim-prop-2", "kim-prop-3", "kim-fig-1", "kim-fig-2", "kim-beyond-rope"]


@pytest.mark.parametrize("chapter", THEORY)
def test_smoke_checks_pass(chapter, tmp_path):
    os.environ["POSBIAS_CACHE"] = str(tmp_path)          # fresh: a mutant must not read a stored result
    assert failed_checks(execute_chapter(chapter, "smoke", fresh=True)) == []
