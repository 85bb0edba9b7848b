"""Points inside the declared ranges of the LLM chapters that ``make fuzz`` found failing a check (exit 3)
because the check compared a handful of prompts or sequences with a threshold and no uncertainty. Each
check on a count is now decided only on a sample that can decide it (``stats.rate_above``,
``llm.far_above_decided``); these points run to a pass, with the undecidable check skipped, not passed.
"""
from __future__ import annotations

import pytest

from posbias import mutation

POINTS = [
    # 6 prompts against chance 1/4: above-chance failed (12 needed); 8 wrong answers (29 needed)
    ("lost-in-the-middle", {"n_hex": 4}, {"above-chance", "wrong-answers-copy"}, set()),
    # 2 sequences per length, ratio 4.47 < 5 (one sequence sets it); the smoke profile now has 6
    ("sinks-real-decoder", {"seed": 1, "rollout_batch": 4}, set(), {"first-token-sink-every-length",
                                                                    "first-token-sink-natural"}),
    # the same point with 4 sequences: one sequence could still set the ratio, so it is not decided
    ("sinks-real-decoder", {"seed": 1, "rollout_batch": 4, "batch": 4}, {"first-token-sink-every-length"},
     {"first-token-sink-natural"}),
]


@pytest.mark.parametrize("cid, over, undecided, decided", POINTS, ids=[f"{c}-{i}" for i, (c, *_) in enumerate(POINTS)])
def test_point_passes_and_decides_only_what_its_sample_can(cid, over, undecided, decided):
    checks = mutation.execute_chapter(cid, "smoke", over)
    names = {c["name"] for c in checks}
    assert not mutation.failed_checks(checks), mutation.failed_checks(checks)
    assert not names & undecided and decided <= names, sorted(names)
