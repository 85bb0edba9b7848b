"""Subnormal floats: training steps of a checkpointed ensemble with and without flushing them.

Loads a training checkpoint (a running campaign's ``state.pt`` in the user cache, or a checkpoint
committed in parts to ``data/checkpoints``, named by one of its parts), counts the subnormal numbers
in its weights and Adam state, then trains ``--steps`` steps from it with
:func:`posbias.training.flushed_denormals` on and off, alternating the order over ``--rounds`` rounds
in this one process, and reports the time per step of each, their ratio, and whether the two runs
end with the same weights and curves, bit for bit (AdamW's moments may differ, only in entries that
are subnormal on one side and 0 on the other: also checked). Late in training the sinusoidal and
RoPE networks produce subnormals; a fresh network does not.

    python benchmarks/denormals.py CHECKPOINT [--steps 200] [--rounds 2] [--json out.json]
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

from posbias.storage.provenance import collect, git_state, now_iso
from posbias.storage.store import atomic_write_text
from posbias.training.loop import Ensemble, flushed_denormals, tune_allocator


def subnormals(tensors: list[torch.Tensor]) -> tuple[int, int]:
    """(how many, of how many) floating-point entries of ``tensors`` are subnormal."""
    n = s = 0
    for t in tensors:
        if t.is_floating_point():
            a = t.abs()
            s += int(((a > 0) & (a < torch.finfo(t.dtype).tiny)).sum())
            n += t.numel()
    return s, n


def digest(run: Ensemble) -> str:
    """SHA-256 of the weights, the curves and AdamW's moments with their subnormal entries set to 0."""
    h = hashlib.sha256()
    for t in run.net.state_dict().values():
        h.update(t.detach().cpu().numpy().tobytes())
    for st in run.opt.state.values():
        for v in st.values():
            if torch.is_tensor(v) and v.is_floating_point():
                v = v.detach().cpu()
                h.update(v.masked_fill(v.abs() < torch.finfo(v.dtype).tiny, 0).numpy().tobytes())
    h.update(json.dumps(run.curves, sort_keys=True).encode())
    return h.hexdigest()


def steps_from(path: Path, steps: int, flush: bool) -> tuple[float, str]:
    """Seconds per step of ``steps`` steps from the checkpoint, and the digest of the state after."""
    os.environ["POSBIAS_FLUSH_DENORMAL"] = "1" if flush else "0"
    run = Ensemble.from_checkpoint(path)
    with flushed_denormals() as on:
        assert on == flush, "this CPU cannot flush subnormals"
        t = time.perf_counter()
        for i in range(steps):
            run.step(run.start + i, False)
        dt = (time.perf_counter() - t) / steps
    return dt, digest(run)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkpoint", type=Path)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    started, t_start, code = now_iso(), time.perf_counter(), git_state()
    torch.set_num_threads(1)
    tune_allocator()
    try:
        run = Ensemble.from_checkpoint(a.checkpoint, log=print)
    except ValueError as e:
        sys.exit(str(e))
    units, u0 = run.units, run.units[0]
    opt = [v for s in run.opt.state.values() for v in s.values() if torch.is_tensor(v)]
    counts = {"weights": subnormals(list(run.net.state_dict().values())), "adam_state": subnormals(opt)}
    print(f"{len(units)} units, depth {u0.depth}, {u0.config.mask} mask, {u0.config.pe} PE, at step "
          f"{run.start} of {u0.steps}; subnormal entries: weights {counts['weights'][0]} of "
          f"{counts['weights'][1]}, Adam state {counts['adam_state'][0]} of {counts['adam_state'][1]}", flush=True)
    times: dict[bool, list[float]] = {False: [], True: []}
    digests: dict[bool, set[str]] = {False: set(), True: set()}
    for r in range(a.rounds):
        for flush in ((False, True) if r % 2 == 0 else (True, False)):
            dt, d = steps_from(a.checkpoint, a.steps, flush)
            times[flush].append(dt)
            digests[flush].add(d)
            print(f"round {r}: flush {'on ' if flush else 'off'} {1e3 * dt:6.1f} ms/step", flush=True)
    plain, flushed = statistics.median(times[False]), statistics.median(times[True])
    identical = len(digests[False] | digests[True]) == 1
    print(f"{a.steps} steps x {a.rounds} rounds: off {1e3 * plain:.1f} ms/step, on {1e3 * flushed:.1f} ms/step, "
          f"x{plain / flushed:.2f}; state after training identical both ways (moments up to subnormals): {identical}")
    out: dict[str, Any] = {
        "checkpoint": str(a.checkpoint), "checkpoint_sha256":     # of the file named (a part's)
        hashlib.sha256(a.checkpoint.read_bytes()).hexdigest() if a.checkpoint.is_file() else None,
        "units": [u.params() for u in units], "from_step": run.start, "steps": a.steps, "rounds": a.rounds,
        "subnormal_entries": counts, "off_step_s": times[False], "on_step_s": times[True],
        "speedup": plain / flushed, "identical": identical}
    if a.json:
        out["argv"] = sys.argv[1:]
        out["provenance"] = collect(started=started, wall_seconds=round(time.perf_counter() - t_start, 3),
                                    seeds=sorted({u.seed for u in units}), device="cpu") | {"git": code}
        atomic_write_text(Path(a.json), json.dumps(out, indent=1) + "\n")
    if not identical:
        sys.exit("flushing subnormals changed the trained state")


if __name__ == "__main__":
    main()
