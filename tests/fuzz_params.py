"""``make fuzz``: random valid parameter sets per chapter, drawn by hypothesis from the front matter.

Each chapter gets ``FUZZ_SECONDS / chapters`` seconds (``FUZZ_SECONDS``, default 600; ``FUZZ_CHAPTERS``
picks chapters, comma-separated). A point is tried as :func:`param_space.try_point` tries it: refused
(validation, or the cost guard at ``FUZZ_COST_SECONDS`` estimated seconds, default 20, or twice the
chapter's smoke estimate where that is larger), or executed in this process (chapters that train
networks: validated and costed only, unless ``FUZZ_TRAIN=1`` executes them too, within the same
guard). Prints the cases and their outcomes per chapter (refusals by who
refused), the first exits 1 and 3 with their parameters and what failed, and exits 1 when there was
any exit 1 or a chapter none of whose cases got past validation and the guard.
"""
from __future__ import annotations

import collections
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))

from hypothesis import HealthCheck, Phase, given, settings  # noqa: E402

from param_space import strategy, trains, try_point  # noqa: E402
from posbias.book import cost  # noqa: E402
from posbias.book.chapters import chapter_ids, get_chapter  # noqa: E402

#: Points drawn per hypothesis run; runs repeat until the chapter's time is up.
BATCH = 20
#: Execute the chapters that train networks too (``FUZZ_TRAIN=1``); by default they are validated and costed.
TRAIN = os.environ.get("FUZZ_TRAIN") == "1"


def budget(cid: str, cost_seconds: float) -> float:
    """The cost guard's budget for ``cid``: ``cost_seconds``, or twice the smoke profile's own estimate
    where that is larger (a guard below it refuses nearly every point, and the chapter goes untried)."""
    ch = get_chapter(cid)
    return max(cost_seconds, 2 * cost.estimate(ch, ch.resolve("smoke", {})).seconds)


def kind(code: int, what: str) -> str:
    """The outcome's name for the summary: exits 0, 1 and 3 by number, exit 2 by who refused."""
    if code != 2:
        return f"exit {code}"
    return "refused (cost guard)" if what.startswith(("cost guard", "above this harness")) else "refused (validation)"


def fuzz(cid: str, seconds: float, cost_seconds: float) -> tuple[collections.Counter, list]:
    """Draw and try points of ``cid`` for about ``seconds`` (a case that starts in time runs to its
    end); the outcomes' counts (:func:`kind`) and every ``(code, overrides, what)`` that ended 1 or 3.
    Hypothesis draws in small batches, so nothing is drawn after the time is up."""
    ch, codes, crashes = get_chapter(cid), collections.Counter(), []
    end = time.monotonic() + seconds

    @settings(max_examples=BATCH, deadline=None, database=None, derandomize=False,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(strategy(ch))
    def batch(overrides):
        if time.monotonic() > end:
            return
        code, what = try_point(ch, overrides, cost_seconds, execute=TRAIN or not trains(ch))
        codes[kind(code, what)] += 1
        if code in (1, 3):
            crashes.append((code, overrides, what))

    while time.monotonic() < end:
        batch()
    return codes, crashes


def main() -> int:
    os.environ.setdefault("POSBIAS_CACHE", tempfile.mkdtemp(prefix="posbias-fuzz-cache-"))
    ids = [c for c in os.environ.get("FUZZ_CHAPTERS", "").split(",") if c] or chapter_ids()
    per = float(os.environ.get("FUZZ_SECONDS", "600")) / len(ids)
    cost_seconds = float(os.environ.get("FUZZ_COST_SECONDS", "20"))
    bad = 0
    for cid in ids:
        guard = budget(cid, cost_seconds)
        codes, found = fuzz(cid, per, guard)
        crashes = [f for f in found if f[0] == 1]
        n = sum(codes.values())
        how = "validated" if trains(get_chapter(cid)) and not TRAIN else "run"
        print(f"{cid:<26} {n:4d} cases ({how}, guard {guard:.0f} s): "
              + ", ".join(f"{k}: {v}" for k, v in sorted(codes.items()))
              + f"; failures (exit 1): {len(crashes)}", flush=True)
        if n and not (codes["exit 0"] + codes["exit 3"]):
            print(f"    no case got past validation and the guard: {cid} was not tried", flush=True)
            bad += 1
        for code in (1, 3):   # a valid point may fail a check (exit 3): shown, for a reader to judge
            for _, over, what in [f for f in found if f[0] == code][:5]:
                print(f"    exit {code} with {over}: {what}", flush=True)
        bad += len(crashes)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
