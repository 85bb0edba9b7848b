"""Campaign throughput: the same small campaign run in one process, on a Dask LocalCluster of one
worker, on two workers of one thread, and on one worker of two threads, alternating, side by side in
one run.

Each run trains the wu-fig-6 units of ``--seeds`` seeds for ``--steps`` iterations into a fresh
cache (one thread per task), so it measures what a reader's ``posbias campaign --workers N`` gains:
the overhead of the engine (one worker against one process), the scaling (two workers against
one), and how two cores are best spent (two workers of one thread against one worker of two, issue
66). Reports network-steps per second and the ratios; timings are never asserted anywhere.

    .venv/bin/python benchmarks/campaign_throughput.py --steps 200 --rounds 2 --json FILE
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from posbias import training as train  # noqa: E402
from posbias.storage.provenance import collect  # noqa: E402

#: mode -> (workers, torch threads per worker) of the LocalCluster; ``process``: no cluster, one thread.
MODES: dict[str, tuple[int, int] | None] = {"process": None, "1 worker": (1, 1), "2 workers": (2, 1),
                                            "1 worker x 2 threads": (1, 2)}


def one_run(mode: str, steps: int, seeds: list[int]) -> dict:
    """Train the campaign in ``mode`` (one of :data:`MODES`) into a fresh cache; wall seconds from the
    first submission to the last unit stored (cluster start excluded)."""
    settings = dict(steps=steps, seeds=seeds, eval_every=max(1, steps // 2), n_test=64, n_sweep=32, n_sink=32,
                    windows=[4, 8, 12], prefixes=[2, 4, 8])        # the paper's seven masks
    with tempfile.TemporaryDirectory() as cache:
        os.environ["POSBIAS_CACHE"] = cache
        engine = None if mode == "process" else train.Engine.local(*MODES[mode])
        try:
            t0 = time.perf_counter()
            res = train.run_campaign("wu-fig-6", "smoke", progress=False, log=lambda s: None, engine=engine,
                                     **settings)
            wall = time.perf_counter() - t0
        finally:
            if engine is not None:
                engine.close()
    units = sum(len(us) for us in res.values())
    return {"mode": mode, "units": units, "steps": steps, "wall_seconds": wall,
            "network_steps_per_second": units * steps / wall}


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--seeds", type=int, default=2, help="seeds per configuration (7 configurations)")
    p.add_argument("--rounds", type=int, default=2, help="alternating rounds of the four modes")
    p.add_argument("--json", type=Path, default=None, help="write the report here")
    a = p.parse_args(argv)
    os.environ["POSBIAS_THREADS"] = "1"
    started, t0 = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), time.perf_counter()
    modes = tuple(MODES)
    runs = [one_run(m, a.steps, list(range(a.seeds))) for _ in range(a.rounds) for m in modes]
    rate = {m: statistics.median(r["network_steps_per_second"] for r in runs if r["mode"] == m) for m in modes}
    rep = {"argv": argv if argv is not None else sys.argv[1:], "runs": runs, "median_rate": rate,
           "one_worker_over_process": rate["1 worker"] / rate["process"],
           "two_workers_over_one": rate["2 workers"] / rate["1 worker"],
           "two_workers_over_process": rate["2 workers"] / rate["process"],
           "two_workers_over_one_of_two_threads": rate["2 workers"] / rate["1 worker x 2 threads"],
           "provenance": collect(started=started, wall_seconds=round(time.perf_counter() - t0, 2))}
    for m in modes:
        print(f"{m:>20}: {rate[m]:8.1f} network-steps/s (median of {a.rounds})")
    print(f"1 worker / process {rep['one_worker_over_process']:.2f}, 2 workers / 1 worker "
          f"{rep['two_workers_over_one']:.2f}, 2 workers / process {rep['two_workers_over_process']:.2f}, "
          f"2 workers / 1 worker x 2 threads {rep['two_workers_over_one_of_two_threads']:.2f}")
    if a.json:
        a.json.write_text(json.dumps(rep, indent=1, sort_keys=True) + "\n")
    return rep


if __name__ == "__main__":
    main()
