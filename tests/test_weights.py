"""posbias.training.weights: a campaign keeps every network's weights; a loaded network reproduces its stored
accuracies; keep-weights trains a stored network again and says whether it reproduced it."""
import json

import pytest
import torch

from posbias import training as train
from posbias.storage import store
from posbias.measures.evaluate import ic_accuracies, sweep_accuracies
from posbias.science.task import TaskConfig, make_task
from posbias.training import campaigns, weights
from posbias.training import units as unit_sets

from training_helpers import _own_data, _unit

KW = dict(steps=4, seeds=[0, 1], eval_every=2, n_test=16, n_sweep=8, n_sink=8)


def _reload_and_measure(unit):
    net = weights.load(unit)
    tasks = [make_task(unit.seed)]
    ic, sweep = unit_sets.test_sets(unit.n_test, unit.n_sweep, TaskConfig(), unit.test_seed)
    return ({k: float(v[0]) for k, v in ic_accuracies(net, tasks, ic).items()},
            sweep_accuracies(net, tasks, sweep)[0].tolist())


def test_a_campaign_keeps_weights_that_reproduce_the_stored_accuracies(tmp_path, monkeypatch):
    _own_data(tmp_path, monkeypatch)
    monkeypatch.setenv("POSBIAS_CACHE", str(tmp_path / "cache"))
    res = train.run_campaign("wu-fig-5", "smoke", progress=False, log=lambda s: None, **KW)
    units = train.units_of("wu-fig-5", "smoke", KW)["causal|none"]
    assert len(units) == 2
    for unit, rec in zip(units, res["causal|none"]):
        path = weights.kept(unit)
        assert path is not None and path.parent.name == weights.WEIGHTS
        meta = weights.metadata(path)
        assert meta["unit"] == unit.params() and meta["provenance"]["seeds"] == [unit.seed]
        assert meta["provenance"]["sittings"]
        ic, sweep = _reload_and_measure(unit)
        assert ic == rec["ic_accuracy"]                    # bit for bit: the same network measured again
        assert sweep == rec["sweep_accuracy"]
    # the two members' weights differ: each file holds its own member
    a, b = (weights.load_state(u) for u in units)
    assert not torch.equal(a["w_q"], b["w_q"])


def test_committed_weights_are_verified(tmp_path, monkeypatch):
    data = _own_data(tmp_path, monkeypatch)
    monkeypatch.setenv("POSBIAS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("POSBIAS_WRITE_DATA", "1")
    unit = _unit()
    state = {"w_q": torch.ones(2, 3)}
    path = weights.save(unit, state, {"note": "test"})
    assert path.is_relative_to(data) and weights.kept(unit) == path
    assert json.loads((data / "manifest.json").read_text())[f"{weights.WEIGHTS}/{path.name}"]
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 1
    path.write_bytes(bytes(raw))
    with pytest.raises(store.DataError, match="differs from"):
        weights.kept(unit)


def test_load_without_weights_names_the_fix(tmp_path, monkeypatch):
    _own_data(tmp_path, monkeypatch)
    monkeypatch.setenv("POSBIAS_CACHE", str(tmp_path / "cache"))
    with pytest.raises(FileNotFoundError, match="keep-weights"):
        weights.load(_unit())


def test_compare_results_ignores_only_the_clock_and_the_ensemble():
    a = {"ic_accuracy": {"x": 0.5}, "train_seconds_ensemble": 1.0, "ensemble_size": 10}
    assert weights.compare_results(a, {**a, "train_seconds_ensemble": 2.0, "ensemble_size": 1}) == []
    assert weights.compare_results(a, {**a, "ic_accuracy": {"x": 0.5000001}}) == ["ic_accuracy"]


def test_retrain_reproduces_a_stored_unit_and_parks(tmp_path, monkeypatch):
    """A stored unit trained again from its seed reproduces its record bit for bit (same host, same threads), and
    its weights say so; an unfinished retraining parks its checkpoint under wu-weights, which resumes it."""
    _own_data(tmp_path, monkeypatch)
    monkeypatch.setenv("POSBIAS_CACHE", str(tmp_path / "cache"))
    units = [_unit(seed=0), _unit(seed=1, pe="rope")]
    train.train_units  # noqa: B018 - the API the campaigns use
    for u, r in zip(units, train.train_units(units, progress=False, log=lambda s: None)):
        campaigns.store_unit(u, r)
    assert all(weights.kept(u) is None for u in units)
    paths = weights.retrain(units, threads=1, log=lambda s: None)
    assert len(paths) == 2
    for u, p in zip(units, paths):
        prov = weights.metadata(p)["provenance"]
        assert prov["reproduces"] is True and prov["differs_in"] == [] and prov["trained_again"]
    assert weights.retrain(units, threads=1, log=lambda s: None) == []      # kept already: nothing to do
    # a stored record altered in one accuracy is not reproduced, and the field is named
    other = _unit(seed=2)
    (r,) = train.train_units([other], progress=False, log=lambda s: None)
    r["ic_accuracy"]["IC_first_last"] += 0.25
    campaigns.store_unit(other, r)
    (p,) = weights.retrain([other], threads=1, log=lambda s: None)
    prov = weights.metadata(p)["provenance"]
    assert prov["reproduces"] is False and "ic_accuracy" in prov["differs_in"]
    assert prov["difference"]["max_ic_difference"] == pytest.approx(0.25)
    assert prov["difference"]["first_differing_evaluation"] is None       # the curves were left as trained


def test_retrain_refuses_a_unit_that_is_not_stored(tmp_path, monkeypatch):
    _own_data(tmp_path, monkeypatch)
    monkeypatch.setenv("POSBIAS_CACHE", str(tmp_path / "cache"))
    with pytest.raises(ValueError, match="posbias campaign"):
        weights.retrain([_unit(seed=5)], threads=1, log=lambda s: None)
