"""posbias.analysis.probes on networks whose behaviour is known by construction."""
import pytest
import torch
from torch import nn

from posbias.analysis import probes
from posbias.science.model import EnsembleNet, MemberConfig
from posbias.science.retrieval import Oracle
from posbias.science.task import TaskConfig, make_task


def _net(scale: float) -> EnsembleNet:
    """Depth 1, causal, no PE: ``W_Q = W_K = scale * I`` (0: uniform attention over the positions a query sees)."""
    net = EnsembleNet([MemberConfig("causal", "none")], [0], 1)
    with torch.no_grad():
        net.w_q.copy_(scale * torch.eye(64).expand_as(net.w_q))
        net.w_k.copy_(scale * torch.eye(64).expand_as(net.w_k))
    return net.eval()


def test_uniform_attention_is_all_position():
    """Uniform attention puts 1/T on every token: the mass on own-class items is (own items)/T, and the position
    profile predicts it exactly."""
    task = make_task(0)
    out = probes.class_attention(_net(0.0), task, n=100)
    assert out["items"].shape == (1,)
    assert torch.allclose(out["items"], out["items_by_position"], atol=1e-6)
    assert out["items"].item() == pytest.approx(4 / 17, abs=0.01)       # four items of the query's class of 17 tokens


def test_content_attention_exceeds_the_position_profile():
    """Queries matching items by content (W_Q W_K^T = a large multiple of I) put far more on their own class."""
    out = probes.class_attention(_net(60.0), make_task(0), n=100)
    assert out["items"].item() > 1.5 * out["items_by_position"].item()
    assert out["labels"].item() == pytest.approx(out["labels_by_position"].item(), rel=0.5)   # labels: no content match


class Memoriser(nn.Module):
    """Answers the label of the training class whose mean is nearest the query: a class-to-label map in weights."""

    def __init__(self, task):
        super().__init__()
        self.task, self.n_members = task, 1
        self.register_buffer("w_q", torch.zeros(1))

    def forward(self, tokens):
        q = tokens[0, :, -1]
        cls = torch.cdist(q, self.task.class_means).argmin(-1)
        return nn.functional.one_hot(self.task.class_labels[cls], 32).float()[None]


def test_in_weights_tells_a_memoriser_from_a_retriever():
    task = make_task(3)
    mem = probes.in_weights(Memoriser(task), task, n=800)
    assert mem["training_classes"] > 0.9 and mem["novel_classes"] < 0.1
    ret = probes.in_weights(Oracle("match_nearest", task), task, n=800)
    assert ret["training_classes"] > 0.8 and ret["novel_classes"] > 0.8


def test_error_slots_of_a_slot_copier():
    """Copying the last slot's label: every wrong answer is the label at the last slot (or at its classmates)."""
    task = make_task(0)
    cfg = TaskConfig()
    out = probes.error_slots(Oracle("copy_slot", task, slot=cfg.n_items - 1), task, n=300)
    assert out["outside"] == 0.0
    assert float(out["slot"].sum()) == pytest.approx(1.0, abs=1e-6)
    assert float(out["slot"][-1]) == max(out["slot"].tolist())
    assert 0.2 < out["wrong"] < 0.5                       # 1 - mean over the six sets of copying the last slot


def test_a_probe_refuses_an_ensemble():
    net = EnsembleNet([MemberConfig(), MemberConfig()], [0, 1], 1)
    with pytest.raises(ValueError, match="one-member"):
        probes.class_attention(net, make_task(0), n=8)


def test_probe_words_state_the_numbers_of_the_kept_networks():
    rows = [{"configuration": "No PE|2", "kept": True, "own class": [0.1, 0.30], "by position": [0.125, 0.25],
             "training classes": 0.9, "novel classes": 0.52, "wrong": 0.48, "error slots": [0.5] + [0.0] * 6 + [0.5],
             "outside": 0.0},
            {"configuration": "RoPE|2", "kept": False}]
    words = probes.probe_words(rows)
    assert words.startswith("Weights are kept for 1 of the 2 networks (No PE|2).")
    assert "puts 1.200 times as much attention" in words and "is 1.20 times (layer 2 of No PE|2)" in words
    assert "answer 0.900 correctly, on novel classes 0.520" in words
    assert "in all but 0.000 of cases, each slot giving 0.000 to 0.500 of them" in words
    none = probes.probe_words([{"configuration": "a", "kept": False}])
    assert none == "No weights are kept yet for any of these networks."
    table = probes.probe_table(rows)
    assert table[1] == {"configuration": "RoPE|2", "weights": "not kept yet"}
    assert table[0]["reproduces its record"] == "trained once"
    assert table[0]["wrong from first / middle / last / other / none"] == "0.50 / 0.00 / 0.50 / 0.00 / 0.00"
