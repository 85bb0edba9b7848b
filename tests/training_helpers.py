"""Shared helpers of the tests of ``posbias.training`` (not a test module)."""
import os
import signal

import torch

from posbias import training as train
from posbias.science.model import MemberConfig
from posbias.training import loop


def _unit(seed=0, steps=6, mask="causal", pe="none", **kw):
    return train.Unit(2, MemberConfig(mask, pe, **kw), None, seed, steps, batch_size=8,
                      eval_every=3, n_test=16, n_sweep=8, n_sink=8)


def _sigterm_in_step(monkeypatch, n: int = 3) -> None:
    """Make SIGTERM arrive in the middle of the ``n``-th training step from now, while its batch is drawn."""
    orig, calls = loop.ensemble_batch, {"n": 0}

    def signalling(*a, **k):
        calls["n"] += 1
        if calls["n"] == n:
            os.kill(os.getpid(), signal.SIGTERM)
        return orig(*a, **k)

    monkeypatch.setattr(loop, "ensemble_batch", signalling)


def _crash_at_step(monkeypatch, step: int, exc: BaseException) -> None:
    """Make drawing the batch of training step ``step`` raise ``exc``: a run dying mid-way, after
    the checkpoints of the steps before (undo with ``monkeypatch.undo()``)."""
    orig = loop.ensemble_batch

    def crashing(*args, **kw):
        if args[3] == step:
            raise exc
        return orig(*args, **kw)

    monkeypatch.setattr(loop, "ensemble_batch", crashing)


def _without_wall_time(r):
    return {k: v for k, v in r.items() if k != "train_seconds_ensemble"}


def _own_data(tmp_path, monkeypatch):
    """An empty data/ (and manifest) for the store, one torch thread, results kept out of data/."""
    from posbias.storage import store

    torch.set_num_threads(1)
    data = tmp_path / "data"
    data.mkdir()
    (data / "manifest.json").write_text("{}")
    monkeypatch.setattr(store, "DATA", data)
    monkeypatch.setattr(store, "MANIFEST", data / "manifest.json")
    monkeypatch.delenv("POSBIAS_WRITE_DATA", raising=False)
    monkeypatch.setenv("POSBIAS_THREADS", "1")
    return data
