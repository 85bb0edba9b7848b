"""Our network against the authors' implementation (issue 66, item 4): the same weights and the same
batches through their ``SAN`` (GitHub xinyiwu98/position-bias-in-attention, MIT licence, imported
from a checkout given on the command line; none of its code is copied here) and through
``posbias.science.model.EnsembleNet``, for every mask and PE of Figures 2-6, at each depth, with and without
the residual connection: the largest logit difference on one batch, and the losses after ``--steps``
AdamW steps on the same batches (our engines v2 and v3 against theirs).

    python benchmarks/reference_check.py AUTHORS_CHECKOUT [--depths 2 3 4 5 6] [--steps 300] [--json FILE]

AUTHORS_CHECKOUT is a directory holding their ``models.py`` (and the ``utils.py``, ``data.py`` and
``rope.py`` it imports), e.g. ``git clone https://github.com/xinyiwu98/position-bias-in-attention``
at 3967a93. Exit status 0 when every logit difference is below ``--logit-tol`` and every loss after
the last step within ``--loss-tol`` (relative) of theirs, 1 otherwise. Training amplifies float32
roundings, the more so the deeper the network: each row also reports how far our own two engines
(the same function, other roundings) end apart, the scale against which a loss difference is read.
"""
from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from posbias.science.model import ENGINES, EnsembleNet, MemberConfig
from posbias.storage.provenance import collect, now_iso
from posbias.storage.store import atomic_write_text
from posbias.science.task import ensemble_batch, make_task

D, L = 64, 32
#: the masks and PEs of Figures 2-6 (Figure 6's windows and prefixes at the sizes its campaign uses)
CONFIGS = ([MemberConfig(m, p) for m in ("full", "causal") for p in ("none", "sin", "rope")]
           + [MemberConfig("decay", "none")]
           + [MemberConfig("window", "none", window=w) for w in (4, 8, 12)]
           + [MemberConfig("prefix", "none", prefix=k) for k in (2, 4, 8)])


def load_san(checkout: Path):
    """The authors' ``SAN`` class, imported from their checkout (their modules named models/utils/data/rope)."""
    if not (checkout / "models.py").is_file():
        raise SystemExit(f"{checkout}: no models.py (give a checkout of xinyiwu98/position-bias-in-attention)")
    sys.path.insert(0, str(checkout))
    sys.dont_write_bytecode = True          # leave their checkout as it was
    return importlib.import_module("models").SAN


def name(cfg: MemberConfig) -> str:
    extra = f"|{cfg.window}" if cfg.mask == "window" else f"|{cfg.prefix}" if cfg.mask == "prefix" else ""
    return f"{cfg.mask}{extra}/{cfg.pe}" + ("/residual" if cfg.residual else "")


def theirs_like(SAN, cfg: MemberConfig, depth: int, ours: EnsembleNet):
    """Their network for ``cfg`` at ``depth``, carrying member 0's weights of ``ours`` (``X @ W`` there,
    ``nn.Linear``'s ``X W^T`` here)."""
    net = SAN(in_channels=D, out_channels=L, mask_type=cfg.mask, gamma=cfg.gamma, num_prefixes=cfg.prefix or 1,
              window_size=cfg.window or 20, hidden_channels=D, num_attn_layers=depth, num_mlp_layers=3, bias=False,
              pe=None if cfg.pe == "none" else cfg.pe, base=cfg.rope_base, residual=cfg.residual)
    with torch.no_grad():
        for t, layer in enumerate(net.attn_layers):
            layer.query_projection.weight.copy_(ours.w_q[0, t].T)
            layer.key_projection.weight.copy_(ours.w_k[0, t].T)
            layer.value_projection.weight.copy_(ours.w_v[0, t].T)
        for i, lin in enumerate([*net.mlp_layers, net.lin]):
            lin.weight.copy_(ours.cls_w[i][0].T)
            lin.bias.copy_(ours.cls_b[i][0])
    return net


def train(step_fn, steps: int) -> list[float]:
    return [step_fn(i) for i in range(steps)]


def compare(SAN, cfg: MemberConfig, depth: int, steps: int, batch: int, seed: int = 0) -> dict:
    """Logit difference on one batch and the two (three) loss curves over ``steps`` AdamW steps."""
    task = make_task(seed)
    batches = [ensemble_batch([task], [seed], [None], i, batch) for i in range(max(steps, 1))]
    init = EnsembleNet([cfg], [seed], depth).state_dict()
    nets = {e: EnsembleNet([cfg], [seed], depth, engine=e) for e in ENGINES}
    for n in nets.values():
        n.load_state_dict(init)
    ref = theirs_like(SAN, cfg, depth, nets["v2"])
    x, _ = batches[0]
    with torch.no_grad():
        theirs0 = ref(x[0])
        logit_diff = {e: float((n(x)[0] - theirs0).abs().max()) for e, n in nets.items()}

    def ours_step(net):
        opt = torch.optim.AdamW(net.parameters(), lr=1e-3, weight_decay=1e-6)

        def step(i):
            xb, yb = batches[i]
            loss = F.cross_entropy(net(xb)[0], yb[0])
            opt.zero_grad()
            loss.backward()
            opt.step()
            return float(loss.detach())
        return step

    opt = torch.optim.AdamW(ref.parameters(), lr=1e-3, weight_decay=1e-6)

    def their_step(i):
        xb, yb = batches[i]
        loss = F.cross_entropy(ref(xb[0]), yb[0])
        opt.zero_grad()
        loss.backward()
        opt.step()
        return float(loss.detach())

    curves = {"theirs": train(their_step, steps), **{e: train(ours_step(n), steps) for e, n in nets.items()}}
    out = {"config": name(cfg), "depth": depth, "logit_max_abs_diff": logit_diff}
    if steps:
        out.update(final_loss={k: c[-1] for k, c in curves.items()},
                   loss_max_abs_diff={e: max(abs(a - b) for a, b in zip(curves[e], curves["theirs"])) for e in nets},
                   final_loss_rel_diff={e: abs(curves[e][-1] - curves["theirs"][-1]) / abs(curves["theirs"][-1])
                                        for e in nets},
                   # how far rounding alone carries training: our two engines, the same function
                   engine_spread_rel=abs(curves["v3"][-1] - curves["v2"][-1]) / abs(curves["v2"][-1]))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkout", type=Path, help="a checkout of xinyiwu98/position-bias-in-attention")
    ap.add_argument("--depths", type=int, nargs="+", default=[2, 3, 4, 5, 6])
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--configs", nargs="*", default=None, help="only these (as printed: causal/rope, window|4/none)")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--logit-tol", type=float, default=1e-5)
    ap.add_argument("--loss-tol", type=float, default=1e-3)
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    started, t0 = now_iso(), time.perf_counter()
    torch.set_num_threads(a.threads)
    SAN = load_san(a.checkout.resolve())
    rows, ok = [], True
    for depth in a.depths:
        for residual in (False, True):
            for base in CONFIGS:
                cfg = MemberConfig(**{**base.to_dict(), "residual": residual})
                if a.configs and name(base) not in a.configs:
                    continue
                r = compare(SAN, cfg, depth, a.steps, a.batch)
                good = max(r["logit_max_abs_diff"].values()) < a.logit_tol and (
                    not a.steps or max(r["final_loss_rel_diff"].values()) < a.loss_tol)
                ok &= good
                rows.append({**r, "agrees": good})
                print(f"depth {depth} {r['config']:28s} logits max |diff| " + ", ".join(
                    f"{e} {v:.1e}" for e, v in r["logit_max_abs_diff"].items())
                    + ("" if not a.steps else f" | loss after {a.steps} steps theirs {r['final_loss']['theirs']:.5f}, "
                       + ", ".join(f"{e} {r['final_loss'][e]:.5f} (max |diff| {r['loss_max_abs_diff'][e]:.1e})"
                                   for e in ENGINES) + f"; v2 vs v3 {r['engine_spread_rel']:.1e} relative")
                    + ("" if good else "  <-- DISAGREES"), flush=True)
    worst_logit = max(max(r["logit_max_abs_diff"].values()) for r in rows) if rows else float("nan")
    summary = {"networks": len(rows), "agree": sum(r["agrees"] for r in rows), "worst_logit_diff": worst_logit}
    if a.steps and rows:
        summary["worst_final_loss_rel_diff"] = {e: max(r["final_loss_rel_diff"][e] for r in rows) for e in ENGINES}
        summary["worst_engine_spread_rel"] = max(r["engine_spread_rel"] for r in rows)
    print(f"{summary['agree']} of {summary['networks']} networks agree; largest logit difference {worst_logit:.1e}"
          + ("" if not a.steps or not rows else "; largest relative loss difference after "
             f"{a.steps} steps " + ", ".join(f"{e} {v:.1e}" for e, v in summary["worst_final_loss_rel_diff"].items())
             + f" (v2 against v3, rounding alone: {summary['worst_engine_spread_rel']:.1e})"))
    if a.json:
        rep = {"argv": sys.argv[1:] if argv is None else argv, "summary": summary, "rows": rows,
               "provenance": collect(started=started, wall_seconds=round(time.perf_counter() - t0, 3), device="cpu")}
        atomic_write_text(Path(a.json), json.dumps(rep, indent=1) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
