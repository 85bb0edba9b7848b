"""posbias.training.heldout: units under a budget record the held-out loss and the sweep at every
evaluation, keep the weights of lowest held-out loss, and resume and split exactly with them."""
import dataclasses

import pytest
import torch
from training_helpers import _crash_at_step, _unit

from posbias.analysis import budget as bd
from posbias import training as train
from posbias.science.model import EnsembleNet
from posbias.science.task import TaskConfig
from posbias.training import checkpoints as ck
from posbias.training import heldout as ho


def _budget_unit(seed=0, steps=9):
    return dataclasses.replace(_unit(seed=seed, steps=steps), n_heldout=32)


def test_a_budget_unit_records_heldout_loss_and_sweep_and_keeps_its_best_weights():
    torch.set_num_threads(1)
    u = _budget_unit()
    assert u.params()["n_heldout"] == 32 and "n_heldout" not in _unit().params()   # old keys unchanged
    (r,) = train.train_units([u], progress=False, log=lambda s: None)
    c = r["curves"]
    assert c["step"] == [0, 3, 6, 9] and len(c["heldout_loss"]) == 4 and len(c["sweep"]) == 4
    assert len(c["sweep"][0]) == TaskConfig().n_items and c["sweep"][-1] == r["sweep_accuracy"]
    b = bd.best_reading(r)
    assert r["best"]["step"] == b["step"] and r["best"]["heldout_loss"] == pytest.approx(b["heldout_loss"])
    # the kept weights are the network at that evaluation: its held-out loss again, recomputed
    net = EnsembleNet([u.config], [u.seed], u.depth, n_tokens=TaskConfig().n_tokens)
    net.load_state_dict(ho.decode_weights(r["best"]["weights"]))
    task = train.Ensemble([u], torch.device("cpu"))
    again = ho.heldout_loss(net.eval(), task.heldout)
    assert float(again[0]) == pytest.approx(r["best"]["heldout_loss"], rel=1e-6)


def test_a_budget_unit_resumes_exactly_best_weights_included(tmp_path, monkeypatch):
    torch.set_num_threads(1)
    u = _budget_unit(steps=12)
    ref = train.train_units([u], progress=False, log=lambda s: None)[0]
    _crash_at_step(monkeypatch, 7, KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        train.train_units([u], checkpoint_dir=tmp_path, checkpoint_seconds=0.0, progress=False, log=lambda s: None)
    monkeypatch.undo()
    assert "best" in torch.load(tmp_path / "state.pt", weights_only=False)
    got = train.train_units([u], checkpoint_dir=tmp_path, checkpoint_seconds=0.0, progress=False,
                            log=lambda s: None)[0]
    assert got["curves"] == ref["curves"] and got["best"] == ref["best"]


def test_splitting_a_budget_ensemble_cuts_the_best_weights_too(tmp_path):
    torch.set_num_threads(1)
    us = [_budget_unit(seed=s) for s in (0, 1, 2)]
    alone = train.train_units([us[2]], progress=False, log=lambda s: None)[0]
    run = train.Ensemble(us, torch.device("cpu"))
    run.evaluate(0)
    for step in range(6):
        run.step(step, False)
    st = ck.split_state(run.state(6, 0.0), [us[2]])
    assert st["best"]["step"] == [run.best.step[2]] and st["best"]["net"]["w_q"].shape[0] == 1
    assert torch.equal(st["best"]["net"]["w_q"][0], run.best.net["w_q"][2])
    ck.save(tmp_path / "state.pt", st)
    got = train.train_units([us[2]], checkpoint_dir=tmp_path, progress=False, log=lambda s: None)[0]
    assert got["curves"] == alone["curves"] and got["best"] == alone["best"]


def test_weights_round_trip_exactly():
    w = {"a": torch.randn(2, 3), "b": torch.randn(4)}
    back = ho.decode_weights(ho.encode_weights(w))
    assert all(torch.equal(back[k][0], w[k]) for k in w)
