"""posbias.train: campaigns expand to the stated units, training resumes and is deterministic."""
import torch

from posbias import train
from posbias.model import MemberConfig


def _unit(seed=0, steps=6, **kw):
    return train.Unit(2, MemberConfig("causal", "none", **kw), None, seed, steps, batch_size=8,
                      eval_every=3, n_test=16, n_sweep=8, n_sink=8)


def test_campaign_units_cover_the_figures():
    kw = dict(steps=10, seeds=[0, 1], eval_every=5, n_test=8, n_sweep=8, n_sink=8)
    f2 = train.campaign_units("wu-fig-2", **kw)
    assert len(f2) == 9 and all(len(v) == 2 for v in f2.values())
    assert {u.depth for us in f2.values() for u in us} == {2, 4, 6}
    f3 = train.campaign_units("wu-fig-3", **kw)
    assert all(u.target_slots == (0, 7) and u.config.residual for us in f3.values() for u in us)
    f4 = train.campaign_units("wu-fig-4", **kw)
    assert {u.target_slots for us in f4.values() for u in us} == {(0,), (4,), (7,)}
    f6 = train.campaign_units("wu-fig-6", **kw, windows=[4], prefixes=[2, 4])
    assert set(f6) == {"causal", "window|4", "prefix|2", "prefix|4"}
    # the fig-5 unit is the fig-2 depth-2 No PE unit: trained once, shared
    assert train.campaign_units("wu-fig-5", **kw)["causal|none"][0] == f2["No PE|2"][0]


def test_training_is_deterministic_and_resumes(tmp_path):
    torch.set_num_threads(1)
    u = _unit()
    ref = train.train_units([u], progress=False)[0]
    again = train.train_units([u], progress=False)[0]
    assert ref["curves"] == again["curves"] and ref["ic_accuracy"] == again["ic_accuracy"]
    # interrupt: checkpoint every step, stop after 4 steps by training a shorter run is not the same
    # unit, so emulate a stop by saving at step 3 through a zero checkpoint interval and a crash
    import posbias.train as T
    orig = T.ensemble_batch
    calls = {"n": 0}

    def crashing(*a, **k):
        calls["n"] += 1
        if calls["n"] == 5:
            raise KeyboardInterrupt
        return orig(*a, **k)

    T.ensemble_batch = crashing
    try:
        train.train_units([u], checkpoint_dir=tmp_path, checkpoint_seconds=0.0, progress=False)
    except KeyboardInterrupt:
        pass
    finally:
        T.ensemble_batch = orig
    assert (tmp_path / "state.pt").exists()
    resumed = train.train_units([u], checkpoint_dir=tmp_path, checkpoint_seconds=0.0, progress=False)[0]
    assert resumed["curves"] == ref["curves"] and resumed["ic_accuracy"] == ref["ic_accuracy"]
    assert not (tmp_path / "state.pt").exists()


def test_ensemble_result_equals_alone():
    torch.set_num_threads(1)
    a, b = _unit(0), _unit(1)
    both = train.train_units([a, b], progress=False)
    alone = train.train_units([b], progress=False)[0]
    assert both[1]["curves"] == alone["curves"] and both[1]["sink_share"] == alone["sink_share"]


def test_run_campaign_smoke_uses_the_store(tmp_path, monkeypatch):
    monkeypatch.setenv("POSBIAS_CACHE", str(tmp_path))
    monkeypatch.delenv("POSBIAS_WRITE_DATA", raising=False)
    kw = dict(steps=4, seeds=[0], eval_every=2, n_test=8, n_sweep=8, n_sink=8)
    r = train.run_campaign("wu-fig-5", "smoke", progress=False, log=lambda s: None, **kw)
    assert list(r) == ["causal|none"] and len(r["causal|none"]) == 1
    calls = []
    monkeypatch.setattr(train, "train_units", lambda *a, **k: calls.append(1))
    r2 = train.run_campaign("wu-fig-5", "smoke", progress=False, log=lambda s: None, **kw)
    assert calls == [] and r2 == r
