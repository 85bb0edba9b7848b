"""The fixed held-out set of a unit trained under a budget (``Unit.n_heldout``), its cross-entropy, and
the weights at the evaluation of lowest held-out loss: kept through checkpoints, and stored with the
unit's result (:func:`encode_weights`, :func:`decode_weights`).

The held-out set of a member is the training batch of step :data:`~.units.HELDOUT_STEP` of its own
run, ``n_heldout`` sequences: the training distribution of its task (its class means, labels and
target slots), drawn by a generator no training step uses. Training draws a fresh batch every step,
so the training loss averaged since the last evaluation mixes the network's states over 5,000 steps;
the held-out loss is the network's at the evaluation, on one fixed set.
"""
from __future__ import annotations

import base64
from typing import Any, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from posbias.science.model import EnsembleNet
from posbias.science.task import Task, train_batch
from posbias.training.units import HELDOUT_STEP

__all__ = ["heldout_sets", "heldout_loss", "BestWeights", "encode_weights", "decode_weights"]


def heldout_sets(tasks: Sequence[Task], seeds: Sequence[int], slots: Sequence[tuple[int, ...] | None],
                 n: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Each member's held-out set: tokens ``(n, T, D)`` and labels ``(n,)``."""
    return [train_batch(t, s, HELDOUT_STEP, n, ts) for t, s, ts in zip(tasks, seeds, slots)]


@torch.no_grad()
def heldout_loss(net: EnsembleNet, sets: Sequence[tuple[torch.Tensor, torch.Tensor]],
                 chunk: int = 1000) -> torch.Tensor:
    """Mean cross-entropy of each member on its own held-out set, ``(E,)`` (member ``e`` reads set ``e``)."""
    dev, n = net.w_q.device, len(sets[0][1])
    total = torch.zeros(len(sets), dtype=torch.float64)
    for lo in range(0, n, chunk):
        x = torch.stack([s[0][lo:lo + chunk] for s in sets]).to(dev)
        y = torch.stack([s[1][lo:lo + chunk] for s in sets]).to(dev)
        logits = net(x).float()
        ce = F.cross_entropy(logits.flatten(0, 1), y.flatten(), reduction="none").view(len(sets), -1)
        total += ce.sum(1).double().cpu()
    return (total / n).float()


class BestWeights:
    """Per member, the evaluation of lowest held-out loss so far (evaluations after step 0), its loss
    and a copy of the member's weights there. ``state()``/``from_state`` go into a checkpoint."""

    def __init__(self, net: EnsembleNet):
        self.step = [None] * net.n_members
        self.loss = [float("inf")] * net.n_members
        self.net = {k: v.detach().clone() for k, v in net.state_dict().items()}

    def update(self, net: EnsembleNet, step: int, loss: torch.Tensor) -> None:
        """After the evaluation at ``step`` with held-out losses ``loss`` ``(E,)``: keep the weights of
        the members whose loss is below their best so far (strictly: a tie keeps the earlier)."""
        if step == 0:
            return
        sd = net.state_dict()
        for e, value in enumerate(loss.tolist()):
            if value < self.loss[e]:
                self.step[e], self.loss[e] = step, float(value)
                for k, v in sd.items():
                    self.net[k][e] = v[e].detach()

    def state(self) -> dict[str, Any]:
        return {"step": list(self.step), "loss": list(self.loss), "net": self.net}

    @classmethod
    def from_state(cls, net: EnsembleNet, st: dict[str, Any]) -> "BestWeights":
        b = cls(net)
        b.step, b.loss = list(st["step"]), list(st["loss"])
        b.net = {k: v.detach().clone().to(b.net[k].device) for k, v in st["net"].items()}
        return b

    def member(self, e: int) -> dict[str, Any]:
        """Member ``e``'s record: ``{"step", "heldout_loss", "weights"}`` (weights :func:`encode_weights`)."""
        return {"step": self.step[e], "heldout_loss": self.loss[e],
                "weights": encode_weights({k: v[e] for k, v in self.net.items()})}


def encode_weights(weights: dict[str, torch.Tensor]) -> dict[str, Any]:
    """One member's weights as JSON: per tensor its shape and its float32 bytes (little-endian), base64."""
    return {k: {"shape": list(v.shape), "float32": base64.b64encode(
        v.detach().cpu().to(torch.float32).contiguous().numpy().astype("<f4").tobytes()).decode("ascii")}
        for k, v in weights.items()}


def decode_weights(enc: dict[str, Any]) -> dict[str, torch.Tensor]:
    """The tensors :func:`encode_weights` wrote, exactly, with a leading ensemble axis of one (ready for
    ``EnsembleNet.load_state_dict`` of a one-member network)."""
    return {k: torch.from_numpy(np.frombuffer(base64.b64decode(v["float32"]), dtype="<f4").copy()
                                ).reshape(v["shape"]).unsqueeze(0) for k, v in enc.items()}
