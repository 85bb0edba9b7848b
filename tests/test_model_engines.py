"""posbias.science.model's engines (issue 66): a unit's numbers do not depend on the ensemble it trains in,
under every engine, and the new engine computes what the old one does to float32 rounding.

A committed unit reproduces bit for bit only with what decides its roundings held fixed (the CPU
kernels, the thread count, the engine: ``posbias.storage.provenance.numerics``); within one process these
tests hold them fixed and vary only the packing and the engine.
"""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from posbias.science.model import DEFAULT_ENGINE, ENGINES, EnsembleNet, MemberConfig
from posbias.science.task import ensemble_batch, make_task

# the unit under test, and the company it keeps: every mask and PE kind, residual or not
UNIT = (MemberConfig("decay", "none"), 0)
ROPE_UNIT = (MemberConfig("causal", "rope"), 3)
OTHERS = [(MemberConfig("causal", "none"), 1), (MemberConfig("full", "sin", residual=True), 2),
          (MemberConfig("window", "none", window=4), 4), (MemberConfig("prefix", "rope", prefix=3, residual=True), 5),
          (MemberConfig("causal", "rope", residual=True), 6), (MemberConfig("decay", "none"), 7)]
STEPS, BATCH, DEPTH = 3, 16, 2


def _train(members, engine, steps=STEPS, depth=DEPTH, batch=BATCH, init=None):
    """Train ``members`` ((config, seed) pairs) as one ensemble; per-step losses ``(steps, E)`` and the net."""
    cfgs, seeds = [c for c, _ in members], [s for _, s in members]
    tasks = [make_task(s) for s in seeds]
    net = EnsembleNet(cfgs, seeds, depth, engine=engine)
    if init is not None:
        net.load_state_dict(init)
    opt = torch.optim.AdamW(net.parameters(), lr=1e-3, weight_decay=1e-6)
    losses = []
    for step in range(steps):
        x, y = ensemble_batch(tasks, seeds, [None] * len(seeds), step, batch)
        loss = F.cross_entropy(net(x).flatten(0, 1), y.flatten(), reduction="none").view(len(seeds), -1).mean(1)
        opt.zero_grad(set_to_none=True)
        loss.sum().backward()
        opt.step()
        losses.append(loss.detach())
    return torch.stack(losses), net


def _member(net, losses, e):
    return losses[:, e], {k: v[e].detach() for k, v in net.named_parameters()}


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("unit", [UNIT, ROPE_UNIT], ids=["decay", "rope"])
def test_a_unit_is_bit_identical_alone_and_in_ensembles_of_3_and_7_at_any_position(engine, unit):
    losses, net = _train([unit], engine)
    alone_loss, alone = _member(net, losses, 0)
    assert alone_loss[-1] < alone_loss[0] + 1.0      # it trained (finite losses, no blow-up)
    for size in (3, 7):
        for pos in range(size):
            company = OTHERS[:size - 1]
            members = company[:pos] + [unit] + company[pos:]
            losses, net = _train(members, engine)
            loss, params = _member(net, losses, pos)
            assert torch.equal(loss, alone_loss), (engine, size, pos)
            for name, p in params.items():
                assert torch.equal(p, alone[name]), (engine, size, pos, name)


def test_engine_v3_matches_v2_to_float32_rounding_from_the_same_weights_and_batches():
    """Every kind of member, depth 3, 20 AdamW steps: the losses agree to a few float32 ulps (the
    200-step comparison at the paper's batch is ``benchmarks/train_throughput.py --engines``)."""
    members = [UNIT, ROPE_UNIT, *OTHERS[:4]]
    init = EnsembleNet([c for c, _ in members], [s for _, s in members], 3).state_dict()
    old, net_old = _train(members, "v2", steps=20, depth=3, batch=32, init=init)
    new, net_new = _train(members, "v3", steps=20, depth=3, batch=32, init=init)
    ulp = torch.finfo(torch.float32).eps * old.abs()
    assert bool(((new - old).abs() <= 4 * ulp).all()), (new - old).abs().max()
    for (name, a), (_, b) in zip(net_old.named_parameters(), net_new.named_parameters()):
        # AdamW moves an entry with a near-zero gradient by up to lr whatever its rounding, so the weights
        # are compared as a whole: measured ~1e-6 of their norm after 20 steps
        assert float((a - b).detach().norm() / a.detach().norm()) < 1e-5, name


def test_engines_agree_on_outputs_and_attention_maps():
    cfgs = [c for c, _ in [UNIT, ROPE_UNIT, *OTHERS]]
    v2 = EnsembleNet(cfgs, list(range(len(cfgs))), 3, engine="v2")
    v3 = EnsembleNet(cfgs, list(range(len(cfgs))), 3, engine="v3")
    assert all(torch.equal(a, b) for a, b in zip(v2.state_dict().values(), v3.state_dict().values()))
    x = torch.randn(len(cfgs), 5, 17, 64) / 8
    assert torch.allclose(v3(x), v2(x), rtol=0, atol=1e-6)       # the query-only last layer, computed apart
    (h2, m2), (h3, m3) = v2(x, return_attention=True), v3(x, return_attention=True)
    assert torch.allclose(h3, h2, rtol=0, atol=1e-6) and torch.allclose(m3, m2, rtol=0, atol=1e-6)
    assert torch.allclose(v3(x), h3, rtol=0, atol=1e-6)


def test_the_default_engine_is_the_committed_units_and_unknown_engines_are_refused():
    assert DEFAULT_ENGINE == "v2" and EnsembleNet([UNIT[0]], [0], 1).engine == "v2"
    with pytest.raises(ValueError, match="unknown engine"):
        EnsembleNet([UNIT[0]], [0], 1, engine="v9")


@pytest.mark.parametrize("engine", ENGINES)
def test_at_the_papers_batch_a_unit_is_bit_identical_alone_and_last_of_seven(engine):
    """The packing test at batch 128 (the campaigns' size, where the products are the campaigns' shapes)."""
    losses, net = _train([UNIT], engine, steps=2, batch=128)
    alone_loss, alone = _member(net, losses, 0)
    losses, net = _train([*OTHERS, UNIT], engine, steps=2, batch=128)
    loss, params = _member(net, losses, len(OTHERS))
    assert torch.equal(loss, alone_loss) and all(torch.equal(p, alone[k]) for k, p in params.items())
