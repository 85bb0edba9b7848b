"""posbias.training.snapshots: weights kept along training are the network at those steps, a run interrupted
half way misses none of them, and its final weights are those of an uninterrupted run."""
import pytest
import torch

from posbias.storage import store
from posbias.training import checkpoints as ck
from posbias.training import loop, snapshots

from training_helpers import _own_data, _sigterm_in_step, _unit


def _states(unit, every):
    return {s: snapshots.load(unit, every, s).state_dict() for s in snapshots.steps_kept(unit, every)}


def test_snapshots_at_step_zero_and_every_interval_and_the_last_is_the_result(tmp_path, monkeypatch):
    _own_data(tmp_path, monkeypatch)
    monkeypatch.setenv("POSBIAS_CACHE", str(tmp_path / "cache"))
    unit = _unit(steps=6)
    res = snapshots.train(unit, 2, log=lambda s: None)
    assert snapshots.steps_kept(unit, 2) == [0, 2, 4, 6]
    st = _states(unit, 2)
    assert not torch.equal(st[0]["w_q"], st[6]["w_q"])         # training moved the weights
    rec = snapshots.record(unit, 2)
    assert rec["result"] == res and rec["provenance"]["snapshots"] == [0, 2, 4, 6]
    assert rec["provenance"]["reproduces"] is None               # nothing stored to compare with
    from posbias.storage.provenance import summary
    summ = summary(rec["provenance"]["sittings"])                  # the summary is its sittings' (issue 95)
    assert rec["provenance"]["sittings"] and all(rec["provenance"][k] == summ[k] for k in summ if k != "mixed")
    # the last snapshot is the network that produced the result
    again = loop.train_units([unit], progress=False, log=lambda s: None)[0]
    assert again["ic_accuracy"] == res["ic_accuracy"]
    with pytest.raises(ValueError, match="positive divisor"):
        snapshots.train(unit, 4, log=lambda s: None)
    with pytest.raises(FileNotFoundError, match="posbias jump"):
        snapshots.load(unit, 2, 3)


def test_an_interrupted_run_resumes_with_every_snapshot_identical(tmp_path, monkeypatch):
    _own_data(tmp_path, monkeypatch)
    monkeypatch.setenv("POSBIAS_CACHE", str(tmp_path / "whole"))
    unit = _unit(steps=6)
    snapshots.train(unit, 2, log=lambda s: None)
    whole = _states(unit, 2)
    monkeypatch.setenv("POSBIAS_CACHE", str(tmp_path / "cut"))
    batch = loop.ensemble_batch
    _sigterm_in_step(monkeypatch, n=4)                          # inside the 4th step: it finishes, then stops
    with pytest.raises(ck.Interrupted):
        snapshots.train(unit, 2, log=lambda s: None)
    assert snapshots.record(unit, 2) is None and snapshots.steps_kept(unit, 2) == [0, 2, 4]
    monkeypatch.setattr(loop, "ensemble_batch", batch)
    snapshots.train(unit, 2, log=lambda s: None)
    cut = _states(unit, 2)
    assert sorted(cut) == sorted(whole) == [0, 2, 4, 6]
    for s in whole:
        assert all(torch.equal(whole[s][k], cut[s][k]) for k in whole[s])


def test_committed_snapshots_are_listed_and_verified(tmp_path, monkeypatch):
    data = _own_data(tmp_path, monkeypatch)
    monkeypatch.setenv("POSBIAS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("POSBIAS_WRITE_DATA", "1")
    unit = _unit(steps=4)
    snapshots.train(unit, 2, stored={"ic_accuracy": {"IC_first_last": -1.0}}, log=lambda s: None)
    rec = snapshots.record(unit, 2)
    assert rec["provenance"]["reproduces"] is False and rec["provenance"]["differs_in"] == ["ic_accuracy"]
    path = snapshots.snapshot_path(unit, 2, 4, committed=True)
    assert path.is_relative_to(data) and store.load_manifest()[str(path.relative_to(data))]
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 1
    path.write_bytes(bytes(raw))
    with pytest.raises(store.DataError, match="manifest"):
        snapshots.load(unit, 2, 4)
