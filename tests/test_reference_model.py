"""An independent re-implementation of Wu et al.'s network, written from the paper's description
(Section 5 and Appendix J: attention-only, one head per layer, a three-layer ReLU MLP and a softmax
on the query token; AdamW, batch 128), not from ``posbias.science.model``. Its early training-loss curve
must match the library's within the noise between seeds, so a change to ``model.py`` or to the
training loop that alters what the network learns cannot drift unnoticed (issue 25, item 2).

Both train on the same batches (``posbias.science.task``); their initial weights differ (each draws its own),
so the curves agree only up to seed noise: the tolerance below is measured against it.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from posbias.science.task import TaskConfig, make_task, train_batch

DEPTH, STEPS, WINDOW, BATCH, SEEDS = 2, 200, 50, 128, (0, 1, 2)
LR, WEIGHT_DECAY = 1e-3, 1e-6          # the training settings of posbias.training.Unit (the paper's code)


class ReferenceNet(nn.Module):
    """Attention-only classifier: ``depth`` single-head causal attention layers ``X <- softmax(Q K^T /
    sqrt(D) + causal) V`` (no positional encoding, no residual, no LayerNorm, no MLP between layers),
    then on the last (query) token a three-layer ReLU MLP and a linear map to the ``L`` labels."""

    def __init__(self, depth: int, dim: int = 64, n_labels: int = 32) -> None:
        super().__init__()
        self.q = nn.ModuleList(nn.Linear(dim, dim, bias=False) for _ in range(depth))
        self.k = nn.ModuleList(nn.Linear(dim, dim, bias=False) for _ in range(depth))
        self.v = nn.ModuleList(nn.Linear(dim, dim, bias=False) for _ in range(depth))
        self.mlp = nn.Sequential(nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, dim), nn.ReLU(),
                                 nn.Linear(dim, dim), nn.ReLU(), nn.Linear(dim, n_labels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` ``(b, T, D)`` -> logits ``(b, L)``."""
        T = x.shape[1]
        future = torch.ones(T, T, dtype=torch.bool).triu(1)
        for q, k, v in zip(self.q, self.k, self.v):
            scores = q(x) @ k(x).transpose(1, 2) / math.sqrt(x.shape[-1])
            x = torch.softmax(scores.masked_fill(future, float("-inf")), dim=-1) @ v(x)
        return self.mlp(x[:, -1])


def reference_curve(seed: int, depth: int = DEPTH, steps: int = STEPS, window: int = WINDOW,
                    init: dict[str, torch.Tensor] | None = None) -> list[float]:
    """Mean training loss over each ``window`` steps of a :class:`ReferenceNet` on run ``seed``'s batches.

    Initialised by torch's own defaults (``nn.Linear``) under its own seed, or from ``init`` (a
    posbias member's parameters, :func:`load_posbias_init`)."""
    torch.manual_seed(1000 + seed)                  # its own initialisation, not posbias's
    task, net = make_task(seed, TaskConfig()), ReferenceNet(depth)
    if init is not None:
        load_posbias_init(net, init)
    opt = torch.optim.AdamW(net.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
    losses = []
    for step in range(steps):
        x, y = train_batch(task, seed, step, BATCH)
        loss = F.cross_entropy(net(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return [sum(losses[i:i + window]) / window for i in range(0, steps, window)]


@torch.no_grad()
def load_posbias_init(net: ReferenceNet, state: dict[str, torch.Tensor]) -> None:
    """Copy a posbias member's parameters (``w_q/w_k/w_v`` ``(depth, D, D)`` acting as ``X @ W``;
    classifier ``cls_w.i`` ``(D_in, D_out)``, ``cls_b.i``) into ``net`` (``nn.Linear`` computes ``x W^T + b``)."""
    for name, mods in (("w_q", net.q), ("w_k", net.k), ("w_v", net.v)):
        for t, m in enumerate(mods):
            m.weight.copy_(state[name][t].T)
    for i, m in enumerate(layer for layer in net.mlp if isinstance(layer, nn.Linear)):
        m.weight.copy_(state[f"cls_w.{i}"].T)
        m.bias.copy_(state[f"cls_b.{i}"])


def posbias_curves(depth: int = DEPTH, steps: int = STEPS, window: int = WINDOW, seeds=SEEDS) -> torch.Tensor:
    """The library's curves for the same runs, ``(seeds, steps / window)``, from its training loop."""
    from posbias.science.model import MemberConfig
    from posbias.training import Unit, train_units

    units = [Unit(depth, MemberConfig("causal", "none"), None, s, steps, eval_every=window, n_test=8,
                  n_sweep=8, n_sink=8) for s in seeds]
    assert (units[0].batch_size, units[0].lr, units[0].weight_decay) == (BATCH, LR, WEIGHT_DECAY)
    res = train_units(units, progress=False, threads=1)
    return torch.tensor([r["curves"]["loss"][1:] for r in res])      # the first entry (step 0) is 0


def test_reference_model_matches_posbias_step_for_step_from_the_same_weights():
    """Started from posbias's initial weights, on the same batches, the reference network's loss
    curve equals the library's up to float rounding (measured: 3.6e-7 over 100 steps at depth 2):
    the forward pass, the loss, the gradients and AdamW are the same computation."""
    from posbias.science.model import EnsembleNet, MemberConfig

    ours = posbias_curves(steps=100, window=10, seeds=(0,))[0]
    init = EnsembleNet([MemberConfig("causal", "none")], [0], DEPTH).member_state(0)
    ref = torch.tensor(reference_curve(0, steps=100, window=10, init=init))
    assert float((ours[-1] - ours[0]).abs()) > 0.1                   # it learned: not a trivially flat curve
    assert float((ours - ref).abs().max()) < 1e-4


# Tolerance of the independent comparison. Measured here (depth 2, batch 128, seeds 0-2, windows of
# 50 steps): the two mean curves differed by 0.000, 0.009, 0.044, 0.105 over the first 200 steps
# (3.465 -> 3.214 for posbias, 3.465 -> 3.109 for the reference), while single seeds spread by up to
# 0.05 (0.125 by step 300): the loss leaves its plateau at a seed-dependent step. 0.2 is about twice
# the largest measured difference and four standard errors of a difference of two 3-seed means; the
# step-for-step test above is the sharp one, this one guards the initialisation and the setting.
TOL_LEARN, TOL_MEAN = 0.1, 0.2


def test_reference_model_learns_like_posbias():
    """From independent initialisations (each implementation its own), 3 seeds, 200 steps: both
    start at chance, both learn, and the mean curves agree within seed noise."""
    ours = posbias_curves()
    ref = torch.tensor([reference_curve(s) for s in SEEDS])
    assert ours.shape == ref.shape == (len(SEEDS), STEPS // WINDOW)
    for c in (ours, ref):
        assert float((c[:, 0] - math.log(32)).abs().max()) < 0.1 and bool((c[:, -1] < c[:, 0] - TOL_LEARN).all())
    gap = (ours.mean(0) - ref.mean(0)).abs()
    assert float(gap.max()) < TOL_MEAN, (ours.mean(0).tolist(), ref.mean(0).tolist())
