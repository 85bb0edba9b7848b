"""Training throughput: the batched ensemble against the same models trained one at a time.

Runs in one process (one torch thread unless ``--threads``): for each depth of Figure 2 it times
training steps of its 15 members (3 architectures x 5 seeds) as the campaign groups them (one
ensemble per PE, :meth:`posbias.training.Unit.group_key`), as one mixed ensemble, and one at a time,
reports steps per second, the speed-up, model FLOP/s as a share of an fp32 matmul peak measured in
the same run, the share of time spent making data, and projects Figure 2 at the paper's settings.
With ``--bf16`` it also times bfloat16 autocast (AMX on recent Xeons) against a bf16 matmul peak.
With ``--allocator ROUNDS`` it times the depth-4 No-PE ensemble (10 members) in child processes
with and without :func:`posbias.training.tune_allocator`, alternating, ROUNDS of each, pairwise
concurrent when two cores are free (the allocator cannot be untuned within one process).
With ``--engines ROUNDS`` it times the model's engines (:data:`posbias.science.model.ENGINES`, and with
``--compile`` engines v2 and v3 under ``torch.compile``, on the No-PE ensembles and the network
alone only: its warm-up takes minutes) side by side, in turns, ROUNDS times each, per
depth in the campaign's packing (one ensemble per PE) and alone, with the same weights and the same
(pre-drawn) batches: milliseconds per member-step, the ratio to v2 and the share of the fp32 matmul
peak; ``--sizes`` adds the No-PE ensemble at other sizes; ``--device cuda`` runs them on the GPU
against its own fp32 peak; ``--equivalence STEPS`` trains the depth-2
ensembles STEPS steps from the same weights and batches under v2 and v3 and reports how far apart
their losses get, in float32 ulps. With ``--ceiling ROUNDS`` it times the v2 step per depth and
packing and profiles its matrix products: how far the step could speed up, and what share of the peak
it could reach, with every other cost gone and the products on today's kernels.

    python benchmarks/train_throughput.py [--steps 20] [--threads 1] [--bf16] [--allocator 2] [--json out.json]
    python benchmarks/train_throughput.py --engines 3 --steps 20 --equivalence 200 [--sizes 1 5 10 15] [--compile]
    python benchmarks/train_throughput.py --ceiling 5 --steps 30 --depths 2 4 6 --json out.json
"""
from __future__ import annotations

import argparse
import json
import math
import platform
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from posbias.science.model import ENGINES, EnsembleNet, MemberConfig
from posbias.storage.provenance import collect, git_state, now_iso
from posbias.storage.store import atomic_write_text
from posbias.science.task import ensemble_batch, make_task
from posbias.training import tune_allocator
from posbias.trained import FIG2_ARCHITECTURES

B, D, L = 128, 64, 32


def model_flops(depth: int, n_tokens: int = 17, query_only: bool = True) -> float:
    """Matmul FLOPs of one training step of one member (forward x 3 for forward + backward)."""
    T, fwd = n_tokens, 0.0
    for t in range(depth):
        r = 1 if (query_only and t == depth - 1) else T
        fwd += 2 * B * r * D * D + 2 * 2 * B * T * D * D       # Q on r rows; K, V on all rows
        fwd += 2 * 2 * B * r * T * D                            # logits and A V
    fwd += 2 * B * (3 * D * D + D * L)                          # classifier on the query token
    return 3 * fwd


def matmul_peak(dtype: torch.dtype, n: int = 2048, reps: int = 6, max_seconds: float = 0.5,
                device: str = "cpu") -> float:
    """Best of ``reps`` timings of an ``n x n`` matmul, in FLOP/s. ``n`` is halved (down to 256) while a
    256 x 256 probe says one product would take over ``max_seconds`` (bf16 without hardware support
    runs at a few hundred MFLOP/s, where a 2048 product takes half a minute). On CUDA ``n`` is 8192 and
    the products are synchronised (fp32 without TF32, as training runs)."""
    if device != "cpu":
        return _cuda_peak(dtype, reps)
    p = torch.randn(256, 256, dtype=dtype)
    p @ p
    t = time.perf_counter()
    p @ p
    rate = 2 * 256**3 / max(time.perf_counter() - t, 1e-9)
    while n > 256 and 2 * n**3 / rate > max_seconds:
        n //= 2
    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    a @ b
    best = math.inf
    for _ in range(reps):
        t = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t)
    return 2 * n**3 / best


def _cuda_peak(dtype: torch.dtype, reps: int, n: int = 8192) -> float:
    a, b = torch.randn(n, n, dtype=dtype, device="cuda"), torch.randn(n, n, dtype=dtype, device="cuda")
    a @ b
    torch.cuda.synchronize()
    best = math.inf
    for _ in range(reps):
        t = time.perf_counter()
        a @ b
        torch.cuda.synchronize()
        best = min(best, time.perf_counter() - t)
    return 2 * n**3 / best


def _sync(device: str) -> None:
    if device != "cpu":
        torch.cuda.synchronize()


def stepper(configs, seeds, depth, engine, batches, compiled=False, init=None, device: str = "cpu"):
    """One training step of a fresh ensemble under ``engine`` on the pre-drawn ``batches`` (cycled): a
    function ``step(i) -> losses (E,)``. ``init``: a state dict to start from (the same weights for every
    engine); ``compiled``: the network under ``torch.compile`` (inductor; compiled at its first step)."""
    net = EnsembleNet(configs, seeds, depth, engine=engine)
    if init is not None:
        net.load_state_dict(init)
    net = net.to(device)
    batches = [(x.to(device), y.to(device)) for x, y in batches]
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3, weight_decay=1e-6)
    fwd, E = (torch.compile(net) if compiled else net), len(seeds)

    def step(i: int) -> torch.Tensor:
        x, y = batches[i % len(batches)]
        loss = F.cross_entropy(fwd(x).flatten(0, 1), y.flatten(), reduction="none").view(E, -1).mean(1)
        opt.zero_grad(set_to_none=True)
        loss.sum().backward()
        opt.step()
        return loss.detach()
    return step


def compare_engines(depths, steps, rounds, peak, compiled=False, sizes=(), device: str = "cpu") -> dict:
    """ms per member-step of each engine, in turns within each round (the order reversed every other
    round), per depth and packing; medians over rounds, ratios to v2, shares of ``peak``."""
    import statistics

    engines = [(e, False) for e in ENGINES] + ([("v2", True), ("v3", True)] if compiled else [])
    if compiled:    # every (depth, packing, engine) compiles anew: raise dynamo's limit, lest it fall back to eager
        torch._dynamo.config.recompile_limit = 1024
    name = lambda e, c: e + ("+compile" if c else "")  # noqa: E731
    out: dict = {}
    for depth in depths:
        for pack, cfgs, seeds, batches, data_ms in _packs(steps, sizes):
            init = EnsembleNet(cfgs, seeds, depth).state_dict()
            steps_of = {}
            for e, c in (engines if pack.startswith(("none", "decay alone")) else [x for x in engines if not x[1]]):
                t = time.perf_counter()
                steps_of[name(e, c)] = st = stepper(cfgs, seeds, depth, e, batches, c, init, device)
                for i in range(3):
                    st(i)
                _sync(device)
                if c:
                    out.setdefault("compile_warmup_s", {})[f"{depth} {pack} {name(e, c)}"] = time.perf_counter() - t
            times: dict[str, list[float]] = {k: [] for k in steps_of}
            for r in range(rounds):
                for k in (list(steps_of) if r % 2 == 0 else list(steps_of)[::-1]):
                    t = time.perf_counter()
                    for i in range(steps):
                        steps_of[k](i)
                    _sync(device)
                    times[k].append(1e3 * (time.perf_counter() - t) / steps / len(seeds))
            med = {k: statistics.median(v) for k, v in times.items()}
            row = {"members": len(seeds), "data_ms_per_member_step": data_ms, "ms_per_member_step": med,
                   "rounds_ms": times, "ratio_to_v2": {k: med["v2"] / v for k, v in med.items()},
                   "fraction_of_fp32_peak": {k: model_flops(depth) / (v / 1e3) / peak for k, v in med.items()}}
            out.setdefault(str(depth), {})[pack] = row
            print(f"depth {depth} {pack:12s}: " + " | ".join(
                f"{k} {v:6.2f} ms/member-step x{row['ratio_to_v2'][k]:.2f} "
                f"{100 * row['fraction_of_fp32_peak'][k]:4.1f}% of peak" for k, v in med.items())
                + f" | data {data_ms:.2f} ms", flush=True)
    return out


#: The profiler's names of the matrix products a training step runs (forward and backward).
MATMUL_OPS = frozenset({"aten::mm", "aten::bmm", "aten::addmm", "aten::baddbmm", "aten::addbmm", "aten::dot",
                        "aten::mv", "aten::addmv", "aten::_mkldnn_matmul"})


def ceiling(depths, steps, rounds, peak) -> dict:
    """How fast the step could get while its matrix products run on today's kernels, per depth in the
    campaign's packing and alone, engine v2, on pre-drawn batches: ``rounds`` rounds of ``steps`` steps
    unprofiled in turn with as many under ``torch.profiler``, whose self time of the products
    (:data:`MATMUL_OPS`) over the profiled round's wall time is their share of the step. With every
    other cost removed a step would take the products' time: ``bound`` is one over their share
    (Amdahl; the profiler's own cost, outside the products, makes it generous), ``matmul_share_of_peak``
    the model's FLOPs over the products' time against ``peak``: the most of the peak a step can reach
    while its products run on today's kernels. Medians over rounds."""
    import statistics

    from torch.profiler import ProfilerActivity, profile

    out: dict = {}
    for depth in depths:
        for pack, cfgs, seeds, batches, _ in _packs(steps):
            st = stepper(cfgs, seeds, depth, "v2", batches)
            for i in range(3):
                st(i)
            times, walls, mms, ops = [], [], [], {}
            for _ in range(rounds):      # a round unprofiled, then one profiled, in turns
                t = time.perf_counter()
                for i in range(steps):
                    st(i)
                times.append(1e3 * (time.perf_counter() - t) / steps / len(seeds))
                with profile(activities=[ProfilerActivity.CPU]) as prof:
                    t = time.perf_counter()
                    for i in range(steps):
                        st(i)
                    walls.append(1e3 * (time.perf_counter() - t) / steps / len(seeds))
                got = {e.key: e.self_cpu_time_total / 1e3 / steps / len(seeds) for e in prof.key_averages()}
                mms.append(sum(v for k, v in got.items() if k in MATMUL_OPS))
                for k, v in got.items():
                    ops[k] = ops.get(k, 0.0) + v / rounds
            step_ms, wall_ms, mm_ms = (statistics.median(x) for x in (times, walls, mms))
            share = statistics.median(m / w for m, w in zip(mms, walls))
            row = {"members": len(seeds), "ms_per_member_step": step_ms, "rounds_ms": times,
                   "profiled_ms_per_member_step": wall_ms, "profiled_rounds_ms": walls,
                   "matmul_ms_per_member_step": mm_ms, "matmul_rounds_ms": mms, "matmul_share_of_step": share,
                   "bound": 1 / share, "share_of_peak": model_flops(depth) / (step_ms / 1e3) / peak,
                   "matmul_share_of_peak": model_flops(depth) / (mm_ms / 1e3) / peak,
                   "top_ops_ms": dict(sorted(ops.items(), key=lambda kv: -kv[1])[:12])}
            out.setdefault(str(depth), {})[pack] = row
            print(f"depth {depth} {pack:12s}: step {step_ms:6.2f} ms/member-step "
                  f"({100 * row['share_of_peak']:4.1f}% of peak) | products {mm_ms:6.2f} ms "
                  f"({100 * row['matmul_share_of_step']:4.1f}% of the step, "
                  f"{100 * row['matmul_share_of_peak']:4.1f}% of peak) | bound x{row['bound']:.2f}", flush=True)
    return out


def _fig2_groups() -> dict[str, list[tuple[MemberConfig, int]]]:
    """Figure 2's 15 members as the campaign packs them: one ensemble per PE."""
    groups: dict[str, list] = {}
    for m, p in FIG2_ARCHITECTURES.values():
        groups.setdefault(p, []).extend((MemberConfig(m, p), s) for s in range(5))
    return groups


def _packs(steps: int, sizes=()):
    """The packings timed per depth, each ``(name, configs, seeds, batches, data ms per member-step)``:
    Figure 2's campaign ensembles (one per PE), the decay network alone, and No-PE ensembles of ``sizes``,
    with ``steps`` batches drawn ahead of the timing."""
    packs = {f"{pe} x{len(ms)}": ms for pe, ms in _fig2_groups().items()}
    packs["decay alone"] = [(MemberConfig("decay"), 0)]
    for size in sizes:
        packs[f"No PE x{size}"] = [(MemberConfig(("causal", "decay")[i % 2]), i // 2) for i in range(size)]
    for pack, members in packs.items():
        cfgs, seeds = [c for c, _ in members], [s for _, s in members]
        tasks = [make_task(s) for s in seeds]
        t = time.perf_counter()
        batches = [ensemble_batch(tasks, seeds, [None] * len(seeds), i, B) for i in range(steps)]
        yield pack, cfgs, seeds, batches, 1e3 * (time.perf_counter() - t) / steps / len(seeds)


def equivalence(steps: int, depth: int = 2) -> dict:
    """The depth-``depth`` Figure 2 ensembles trained ``steps`` steps from the same weights and batches
    under v2 and v3: the largest loss difference, in float32 ulps of the loss and absolutely."""
    out = {}
    for pe, members in _fig2_groups().items():
        cfgs, seeds = [c for c, _ in members], [s for _, s in members]
        tasks = [make_task(s) for s in seeds]
        batches = [ensemble_batch(tasks, seeds, [None] * len(seeds), i, B) for i in range(steps)]
        init = EnsembleNet(cfgs, seeds, depth).state_dict()
        old, new = (stepper(cfgs, seeds, depth, e, batches, init=init) for e in ("v2", "v3"))
        lo = torch.stack([old(i) for i in range(steps)])
        ln = torch.stack([new(i) for i in range(steps)])
        ulps = (ln - lo).abs() / (torch.finfo(torch.float32).eps * lo.abs())
        out[pe] = {"members": len(seeds), "steps": steps, "max_abs_diff": float((ln - lo).abs().max()),
                   "max_ulps": float(ulps.max()), "identical_steps": int((ln == lo).all(1).sum()),
                   "final_loss_v2": lo[-1].tolist(), "final_loss_v3": ln[-1].tolist()}
        print(f"equivalence depth {depth} {pe} x{len(seeds)}, {steps} steps: losses at most "
              f"{out[pe]['max_ulps']:.1f} ulps apart ({out[pe]['max_abs_diff']:.2e}); "
              f"{out[pe]['identical_steps']} of {steps} steps identical in every member", flush=True)
    return out


def time_steps(configs, seeds, depth, steps, bf16=False, warmup=3) -> tuple[float, float]:
    """Seconds per step of one ensemble (total, of which making data)."""
    tasks = [make_task(s) for s in seeds]
    net = EnsembleNet(configs, seeds, depth)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3, weight_decay=1e-6)
    E, t_data, t0 = len(seeds), 0.0, 0.0
    for step in range(warmup + steps):
        if step == warmup:
            t0, t_data = time.perf_counter(), 0.0
        td = time.perf_counter()
        x, y = ensemble_batch(tasks, seeds, [None] * E, step, B)
        t_data += time.perf_counter() - td
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            logits = net(x)
        loss = F.cross_entropy(logits.float().flatten(0, 1), y.flatten(), reduction="none").view(E, -1).mean(1)
        opt.zero_grad()
        loss.sum().backward()
        opt.step()
    return (time.perf_counter() - t0) / steps, t_data / steps


_CHILD = """
import json, sys, torch
sys.path.insert(0, {here!r})
from train_throughput import time_steps
from posbias.science.model import MemberConfig
from posbias.training import tune_allocator
from posbias.trained import FIG2_ARCHITECTURES
torch.set_num_threads({threads})
tuned = tune_allocator()
cfgs = [MemberConfig(m, p) for m, p in FIG2_ARCHITECTURES.values() if p == "none" for _ in range(5)]
t, _ = time_steps(cfgs, [s for _ in range(2) for s in range(5)], 4, {steps})
print(json.dumps({{"tuned": tuned, "step_s": t}}))
"""


def allocator_ab(rounds: int, steps: int, threads: int) -> dict:
    """Step time of the depth-4 No-PE ensemble with and without the tuned allocator (children)."""
    import os
    import statistics
    import subprocess
    import sys
    from pathlib import Path

    code = _CHILD.format(here=str(Path(__file__).resolve().parent), threads=threads, steps=steps)
    pair = len(os.sched_getaffinity(0)) >= 2 * threads
    times: dict[str, list[float]] = {"0": [], "1": []}
    for r in range(rounds):
        order = ("0", "1") if r % 2 == 0 else ("1", "0")
        procs = []
        for flag in order:
            env = {**os.environ, "POSBIAS_TUNE_MALLOC": flag}
            child = subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, text=True)
            procs.append((flag, child))
            if not pair:
                procs[-1][1].wait()
        for flag, p in procs:
            out = json.loads(p.communicate()[0])
            assert out["tuned"] == (flag == "1"), out
            times[flag].append(out["step_s"])
    plain, tuned = statistics.median(times["0"]), statistics.median(times["1"])
    print(f"allocator: depth-4 No-PE ensemble of 10, {rounds} round(s) {'side by side' if pair else 'in turn'}: "
          f"glibc default {1e3 * plain:.0f} ms/step, tuned {1e3 * tuned:.0f} ms/step, x{plain / tuned:.2f}", flush=True)
    return {"rounds": rounds, "concurrent": pair, "default_step_s": times["0"], "tuned_step_s": times["1"],
            "speedup": plain / tuned}


def bf16_gap_summary(rows: list[dict]) -> list[dict]:
    """Per configuration and gap: the seed means under fp32 and bf16 and their paired difference (same
    seed, same batches) with its standard error; ``changed`` when it exceeds two standard errors."""
    out = []
    for config in dict.fromkeys(r["config"] for r in rows):
        rs = [r for r in rows if r["config"] == config]
        for gap in rs[0]["fp32"]:
            f = torch.tensor([r["fp32"][gap] for r in rs], dtype=torch.float64)
            b = torch.tensor([r["bf16"][gap] for r in rs], dtype=torch.float64)
            d = b - f
            se = float(d.std() / len(d) ** 0.5) if len(d) > 1 else float("nan")
            out.append({"config": config, "gap": gap, "seeds": len(d), "fp32_mean": float(f.mean()),
                        "bf16_mean": float(b.mean()), "fp32_sd": float(f.std()) if len(f) > 1 else float("nan"),
                        "diff_mean": float(d.mean()), "diff_se": se, "changed": bool(abs(float(d.mean())) > 2 * se)})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--depths", type=int, nargs="+", default=[2, 4, 6])
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--bf16", action="store_true")
    ap.add_argument("--json", default=None)
    ap.add_argument("--bf16-gaps", type=int, default=0, metavar="STEPS",
                    help="also train the depth-2 Figure 2 units for STEPS iterations under bf16 autocast and compare "
                         "their gaps with the fp32 runs of the default profile (loaded from data/ when present)")
    ap.add_argument("--allocator", type=int, default=0, metavar="ROUNDS",
                    help="also time training with and without posbias.training.tune_allocator, ROUNDS times each")
    ap.add_argument("--engines", type=int, default=0, metavar="ROUNDS",
                    help="time the model's engines side by side, ROUNDS turns each, instead of the packings")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"),
                    help="with --engines: train on this device (against its own fp32 matmul peak, no TF32)")
    ap.add_argument("--compile", action="store_true", help="with --engines: also v2 and v3 under torch.compile")
    ap.add_argument("--sizes", type=int, nargs="*", default=[], help="with --engines: No-PE ensembles of these sizes")
    ap.add_argument("--ceiling", type=int, default=0, metavar="ROUNDS",
                    help="time the v2 step ROUNDS rounds and profile its matrix products once, per depth and packing: "
                         "the most a faster step could gain while the products run on today's kernels")
    ap.add_argument("--equivalence", type=int, default=0, metavar="STEPS",
                    help="train the depth-2 ensembles STEPS steps under v2 and v3 and compare their losses")
    a = ap.parse_args()
    started, t_start, code = now_iso(), time.perf_counter(), git_state()     # the commit that runs, read at start
    torch.set_num_threads(a.threads)
    tuned = tune_allocator()        # as in training (posbias.training.train_units)
    if a.device == "cuda" and not (a.engines and torch.cuda.is_available()):
        ap.error("--device cuda needs --engines and a CUDA device torch can see")
    if a.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False      # fp32 products, as training runs them
    peak = matmul_peak(torch.float32, device=a.device)
    out = {"cpu": platform.processor() or platform.machine(), "threads": a.threads, "steps": a.steps,
           "device": a.device, "device_name": torch.cuda.get_device_name() if a.device == "cuda" else None,
           "fp32_matmul_peak_gflops": peak / 1e9, "allocator_tuned": tuned, "depths": {}}
    if a.allocator:
        out["allocator"] = allocator_ab(a.allocator, a.steps, a.threads)
    if a.bf16:
        out["bf16_matmul_peak_gflops"] = matmul_peak(torch.bfloat16) / 1e9
    if a.equivalence:
        out["equivalence"] = equivalence(a.equivalence)
    if a.ceiling:
        out["ceiling"] = ceiling(a.depths, a.steps, a.ceiling, peak)
        out["fp32_matmul_peak_gflops_after"] = matmul_peak(torch.float32) / 1e9
        print(f"fp32 matmul peak {peak / 1e9:.1f} GFLOP/s before, {out['fp32_matmul_peak_gflops_after']:.1f} after")
    if a.engines:
        out["engines"] = compare_engines(a.depths, a.steps, a.engines, peak, a.compile, a.sizes, a.device)
        out["fp32_matmul_peak_gflops_after"] = matmul_peak(torch.float32, device=a.device) / 1e9
        print(f"fp32 matmul peak {peak / 1e9:.1f} GFLOP/s before, {out['fp32_matmul_peak_gflops_after']:.1f} after "
              f"({a.threads} thread(s))")
    fig2_seconds = 0.0
    for depth in ([] if a.engines or a.ceiling else a.depths):
        cfgs = [MemberConfig(m, p) for m, p in FIG2_ARCHITECTURES.values() for _ in range(a.seeds)]
        seeds = [s for _ in FIG2_ARCHITECTURES for s in range(a.seeds)]
        E = len(seeds)
        # the campaign's grouping (Unit.group_key: one ensemble per PE), one mixed ensemble, one at a time
        groups: dict[str, list[int]] = {}
        for i, c in enumerate(cfgs):
            groups.setdefault(c.pe, []).append(i)
        t_ens = t_data = 0.0
        for idx in groups.values():
            t, td = time_steps([cfgs[i] for i in idx], [seeds[i] for i in idx], depth, a.steps)
            t_ens, t_data = t_ens + t, t_data + td
        t_mixed, _ = time_steps(cfgs, seeds, depth, a.steps)
        t_one = sum(time_steps([c], [s], depth, max(3, a.steps // 4))[0] for c, s in zip(cfgs, seeds))
        flops = E * model_flops(depth)
        row = {"members": E, "ensembles": {pe: len(idx) for pe, idx in groups.items()},
               "ensemble_step_s": t_ens, "data_share": t_data / t_ens,
               "mixed_ensemble_step_s": t_mixed, "one_at_a_time_step_s": t_one, "speedup": t_one / t_ens,
               "speedup_over_mixed": t_mixed / t_ens,
               "ensemble_steps_per_s": 1 / t_ens, "one_at_a_time_steps_per_s": 1 / t_one,
               "model_gflops": flops / t_ens / 1e9, "fraction_of_fp32_peak": flops / t_ens / peak}
        if a.bf16:      # the same grouped ensembles under bfloat16 autocast
            t_bf = sum(time_steps([cfgs[i] for i in idx], [seeds[i] for i in idx], depth, a.steps, bf16=True)[0]
                       for idx in groups.values())
            row.update(bf16_step_s=t_bf, bf16_speedup=t_ens / t_bf)
        out["depths"][depth] = row
        fig2_seconds += t_ens * 100_000
        print(f"depth {depth}: {E} members in {len(groups)} ensembles | {1 / t_ens:6.2f} steps/s | one mixed "
              f"ensemble {1 / t_mixed:6.2f} | one at a time {1 / t_one:6.2f} steps/s | "
              f"x{t_one / t_ens:4.1f} over one at "
              f"a time, x{t_mixed / t_ens:4.2f} over mixed | {flops / t_ens / 1e9:6.1f} GFLOP/s = "
              f"{100 * flops / t_ens / peak:4.1f}% of fp32 peak | data {100 * t_data / t_ens:4.1f}%"
              + (f" | bf16 x{t_ens / row['bf16_step_s']:.2f}" if a.bf16 else ""), flush=True)
    if not (a.engines or a.ceiling):
        out["fig2_paper_hours_one_thread"] = fig2_seconds / 3600
        out["fig2_paper_hours_two_cores_projected"] = fig2_seconds / 3600 / 2
        report_fig2(out, peak, a, fig2_seconds)
    if a.bf16_gaps:
        bf16_gaps(out, a)
    if a.json:      # with what ran it: command, commit, versions, CPU, wall time
        out["argv"] = sys.argv[1:]
        out["provenance"] = collect(started=started, wall_seconds=round(time.perf_counter() - t_start, 3),
                                    seeds=list(range(a.seeds)), device="cpu") | {"git": code}
        atomic_write_text(Path(a.json), json.dumps(out, indent=1) + "\n")


def report_fig2(out, peak, a, fig2_seconds) -> None:
    print(f"fp32 matmul peak {peak / 1e9:.1f} GFLOP/s ({a.threads} thread(s))")
    print(f"Figure 2 at paper settings (100,000 steps, 5 seeds, 3 x {len(a.depths)} configs): "
          f"{fig2_seconds / 3600:.2f} h on {a.threads} thread(s); about {fig2_seconds / 7200:.2f} h with the "
          f"depth groups split over two cores")


def bf16_gaps(out, a) -> None:
    if a.bf16_gaps:
        from posbias import training as train

        settings = {"steps": a.bf16_gaps, "depths": [2]}
        fp32 = train.run_campaign("wu-fig-2", "default", progress=False, **settings)
        units = [u for us in train.units_of("wu-fig-2", "default", settings).values() for u in us]
        t = time.perf_counter()
        bf = train.train_units(units, progress=False, autocast_bf16=True)
        out["bf16_gaps"] = []
        for u, r in zip(units, bf):
            ref = next(x for xs in fp32.values() for x in xs if x["params"] == u.params())
            row = {"config": f"{u.config.mask}/{u.config.pe}", "seed": u.seed,
                   "fp32": ref["gaps"], "bf16": r["gaps"]}
            out["bf16_gaps"].append(row)
            print(f"{row['config']:12s} seed {u.seed}: " + ", ".join(
                f"{k} fp32 {ref['gaps'][k]:+.3f} bf16 {r['gaps'][k]:+.3f}" for k in ref["gaps"]))
        out["bf16_gaps_train_seconds"] = time.perf_counter() - t
        out["bf16_gaps_summary"] = bf16_gap_summary(out["bf16_gaps"])
        for row in out["bf16_gaps_summary"]:
            print(f"{row['config']:12s} {row['gap']:18s} fp32 {row['fp32_mean']:+.3f} bf16 {row['bf16_mean']:+.3f} "
                  f"| paired difference {row['diff_mean']:+.4f} ± {row['diff_se']:.4f} (seed spread of the gap "
                  f"{row['fp32_sd']:.3f}) | {'changed' if row['changed'] else 'unchanged'} at 2 SE")
        print(f"bf16 training of {len(units)} units for {a.bf16_gaps} steps took "
              f"{out['bf16_gaps_train_seconds']:.0f} s")


if __name__ == "__main__":
    main()
