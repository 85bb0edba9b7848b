"""Which host kind reproduces a committed unit bit for bit (issue 66, item 2).

Trains the unit of a committed record again from the same start, for ``--steps`` iterations, once
per torch CPU capability asked for (each in its own process, ``ATEN_CPU_CAPABILITY`` set before torch
loads: ``default`` leaves the host's own), and compares the training loss and the six IC accuracies
at every evaluation up to ``--steps`` with each record named (any record of the same network:
the same parameters but for ``steps`` and the stopping rule, which do not change the first
``--steps`` iterations). Writes a JSON with the provenance of the run.

    python benchmarks/kernel_repro.py [--records 2e0d30c2152e6d4c 5bb8a0a795f34ac9] [--steps 30000]
                                      [--capabilities avx2 default] [--json FILE]

The default records are decay | 2 seed 0: its long run (2026-11-28, an AMD AVX2 host) and its
paper-profile unit (2026-11-23, host not recorded), which separate within 5,000 iterations.
Exit status 0 always: the verdict is in the table (``bitwise`` per record and capability).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RECORDS = ("2e0d30c2152e6d4c", "5bb8a0a795f34ac9")
#: the stored curves compared, evaluation by evaluation
CURVES = ("loss", "IC_first_middle", "IC_middle_first", "IC_first_last", "IC_last_first", "IC_middle_last",
          "IC_last_middle")


def record(key: str) -> dict[str, Any]:
    path = ROOT / "data" / "wu-units" / f"{key}.json"
    if not path.is_file():
        raise SystemExit(f"{key}: no committed record data/wu-units/{key}.json")
    return json.loads(path.read_text(encoding="utf-8"))


def same_network(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Do two records' parameters name the same network and training stream (all but the budget)?"""
    drop = ("steps", "stop_rule")
    return {k: v for k, v in a.items() if k not in drop} == {k: v for k, v in b.items() if k not in drop}


def compare(fresh: dict[str, list], stored: dict[str, list], upto: int) -> dict[str, Any]:
    """Evaluation by evaluation up to step ``upto``: how many of the stored evaluations the fresh
    curves repeat exactly, the first step where one differs, and the largest absolute difference."""
    steps = [s for s in stored["step"] if s <= upto]
    at = {s: i for i, s in enumerate(fresh["step"])}
    missing = [s for s in steps if s not in at]
    if missing:
        raise ValueError(f"the fresh run has no evaluation at {missing}")
    first, worst, equal = None, 0.0, 0
    for j, s in enumerate(steps):
        diffs = [abs(float(fresh[c][at[s]]) - float(stored[c][j])) for c in CURVES if c in stored]
        if max(diffs) == 0.0:
            equal += 1
        elif first is None:
            first = s
        worst = max(worst, *diffs)
    return {"evaluations": len(steps), "identical": equal, "first_difference_at": first,
            "max_abs_difference": worst, "bitwise": equal == len(steps)}


def train_curves(params: dict[str, Any], steps: int) -> dict[str, Any]:
    """In this process: train the unit of ``params`` for ``steps`` iterations alone, one thread."""
    import torch

    from posbias import training as train
    from posbias.storage import provenance

    torch.set_num_threads(1)
    unit = train.Unit.from_params({**{k: v for k, v in params.items() if k != "stop_rule"}, "steps": steps})
    t0 = time.perf_counter()
    (res,) = train.train_units([unit], progress=False, threads=1, log=lambda _: None)
    return {"curves": {k: res["curves"][k] for k in ("step", *CURVES)}, "seconds": time.perf_counter() - t0,
            "numerics": provenance.numerics(), "cpu": provenance.cpu_info()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", nargs="+", default=list(RECORDS))
    ap.add_argument("--steps", type=int, default=30_000)
    ap.add_argument("--capabilities", nargs="+", default=["avx2", "default"])
    ap.add_argument("--json", type=Path)
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    recs = {k: record(k) for k in a.records}
    base = recs[a.records[0]]["params"]
    if a.child:                                     # one capability: print the curves as JSON
        print(json.dumps(train_curves(base, a.steps)))
        return
    if a.steps < 1:
        raise SystemExit("--steps: give at least 1 iteration")
    for k, r in recs.items():
        if not same_network(r["params"], base):
            raise SystemExit(f"{k} is not the network of {a.records[0]} (parameters differ beyond steps)")
    from posbias.storage.provenance import collect, now_iso
    from posbias.storage.store import atomic_write_text

    started, rows = now_iso(), []
    for cap in a.capabilities:
        env = dict(os.environ)
        env.pop("ATEN_CPU_CAPABILITY", None)
        if cap != "default":
            env["ATEN_CPU_CAPABILITY"] = cap
        out = subprocess.run([sys.executable, __file__, "--records", *a.records, "--steps", str(a.steps),
                              "--child", "1"], env=env, capture_output=True, text=True, check=True)
        fresh = json.loads(out.stdout.strip().splitlines()[-1])
        for k, r in recs.items():
            c = compare(fresh["curves"], r["result"]["curves"], a.steps)
            rows.append({"capability": cap, "torch_capability": fresh["numerics"]["cpu_capability"], "record": k,
                         "record_started": r["provenance"].get("started"),
                         "record_capability": (r["provenance"].get("cpu") or {}).get("torch_capability"),
                         **c, "seconds": round(fresh["seconds"], 1)})
            print(f"{cap:>8} ({fresh['numerics']['cpu_capability']}) vs {k} "
                  f"({rows[-1]['record_started']}, {rows[-1]['record_capability'] or 'not recorded'}): "
                  f"{c['identical']}/{c['evaluations']} evaluations identical, first difference at "
                  f"{c['first_difference_at']}, max |diff| {c['max_abs_difference']:.3g}", flush=True)
    if a.json:
        prov = collect(started=started, device="cpu")
        atomic_write_text(a.json, json.dumps({"steps": a.steps, "records": a.records, "rows": rows,
                                              "provenance": prov, "finished": now_iso()}, indent=1) + "\n")


if __name__ == "__main__":
    main()
