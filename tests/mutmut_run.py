"""``make mutants``: mutmut over the science modules, the theory chapters' smoke checks as the test.

Copies the sources a chapter needs into a scratch folder (mutmut writes its ``mutants/`` tree there,
never into the working tree), runs ``mutmut run`` for at most ``--budget`` seconds (default 900) on
``--jobs`` cores, optionally on a random ``--sample`` of the mutants, and prints the score and the
survivors (``mutmut results``), also written to ``--out`` (default ``runs/mutmut.json``).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODULES = ["posbias/theory.py", "posbias/masks.py", "posbias/rollout.py", "posbias/attention.py",
           "posbias/lnsim.py", "posbias/lntheory.py"]
CONFIG = """[mutmut]
only_mutate =
{paths}
source_paths = posbias
tests_dir = tests/mutmut_smoke.py
also_copy =
    notebooks
    book
    data
    references.bib
    tests
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--budget", type=int, default=900, help="seconds mutmut may run")
    ap.add_argument("--jobs", type=int, default=1, help="mutants tested at once")
    ap.add_argument("--sample", type=int, default=0, help="test only this many mutants, drawn at random (0: all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default=str(ROOT / "runs" / "mutmut.json"))
    args = ap.parse_args()
    mutmut = [str(Path(sys.executable).with_name("mutmut"))]
    if not Path(mutmut[0]).exists():
        print(f"mutmut is not installed beside {sys.executable}: run `make mutants`, which installs the "
              "`mutants` extra (mutmut 3.8.1) first", file=sys.stderr)
        return 2
    work = Path(tempfile.mkdtemp(prefix="posbias-mutmut-"))
    for name in ("posbias", "notebooks", "tests", "book", "references.bib", "pyproject.toml"):
        src = ROOT / name
        if src.is_dir():
            shutil.copytree(src, work / name, ignore=shutil.ignore_patterns("__pycache__", "_executed"))
        elif src.exists():
            shutil.copy2(src, work / name)
    (work / "data").symlink_to(ROOT / "data")       # read-only use: results are recomputed fresh
    (work / "setup.cfg").write_text(CONFIG.format(paths="\n".join("    " + m for m in MODULES)))
    env = dict(os.environ, MPLBACKEND="Agg", PYTHONPATH=str(work))
    names: list[str] = []
    if args.sample:
        t_gen = time.time()
        subprocess.run([*mutmut, "run", "--max-children", "1", "__none__"], cwd=work, env=env,
                       capture_output=True, text=True, timeout=args.budget)
        args.budget = max(60, args.budget - int(time.time() - t_gen))
        listed = subprocess.run([*mutmut, "results", "--all", "true"], cwd=work, env=env,
                                capture_output=True, text=True).stdout
        every = sorted(set(re.findall(r"(posbias\.[\w.]+__mutmut_\d+)", listed)))
        random.Random(args.seed).shuffle(every)
        names = every[: args.sample]
        print(f"{len(every)} mutants generated; testing a random sample of {len(names)}", flush=True)
    t0 = time.time()
    try:
        subprocess.run([*mutmut, "run", "--max-children", str(args.jobs), *names], cwd=work, env=env,
                       timeout=args.budget)
    except subprocess.TimeoutExpired:
        print(f"stopped after the budget of {args.budget} s", flush=True)
    wall = time.time() - t0
    res = subprocess.run([*mutmut, "results", "--all", "true"], cwd=work, env=env, capture_output=True, text=True)
    status: dict[str, str] = {}
    for line in res.stdout.splitlines():
        m = re.match(r"\s*(posbias\.[\w.]+__mutmut_\d+):\s*(\w[\w ]*)", line)
        if m:
            status[m.group(1)] = m.group(2).strip()
    tested = {k: v for k, v in status.items() if v in ("killed", "survived", "timeout", "suspicious")}
    killed = sum(v in ("killed", "timeout") for v in tested.values())
    survivors = sorted(k for k, v in tested.items() if v == "survived")
    diffs = {k: subprocess.run([*mutmut, "show", k], cwd=work, env=env, capture_output=True, text=True).stdout
             for k in survivors}
    info = Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []
    cpu = next((ln.split(":", 1)[1].strip() for ln in info if ln.startswith("model name")), platform.machine())
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout
    dirty = subprocess.run(["git", "status", "--porcelain", "--", "posbias", "tests"], cwd=ROOT, capture_output=True,
                           text=True).stdout.strip()
    summary = {"date": time.strftime("%Y-%m-%d", time.gmtime()), "machine": f"{cpu}, {os.cpu_count()} cores",
               "commit": head.strip() + (" with uncommitted changes" if dirty else ""),
               "generated": len(status), "tested": len(tested), "killed": killed,
               "score": killed / len(tested) if tested else None, "wall_seconds": round(wall),
               "jobs": args.jobs, "sample": args.sample, "survivors": diffs}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(summary, indent=1) + "\n")
    print(json.dumps({k: v for k, v in summary.items() if k != "survivors"}), flush=True)
    print("\n".join(survivors))
    return 0


if __name__ == "__main__":
    sys.exit(main())
