"""posbias.training.spec: the campaign's engine flags read once into a checked, frozen EngineSpec,
which alone picks the engine."""
import dataclasses
import os

import pytest

from posbias.training import spec as spec_mod
from posbias.training.spec import EngineSpec


def test_counts_are_parsed_once_and_the_spec_is_frozen():
    s = EngineSpec(workers="3", max_members="5", threads=2)
    assert (s.workers, s.max_members, s.threads) == (3, 5, 2)
    assert EngineSpec(workers="auto").workers == "auto" and EngineSpec().max_members == "auto"
    assert EngineSpec().workers is None
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.workers = 4


@pytest.mark.parametrize("kwargs, message", [
    ({"workers": "0"}, "--workers 0: give a number of worker processes of at least 1, or auto"),
    ({"workers": "two"}, "--workers two: give a number of worker processes"),
    ({"max_members": "0"}, "--max-members 0: give a number of units of at least 1, or auto"),
    ({"max_members": None}, "--max-members"),
    ({"threads": 0}, "--threads 0: give at least 1 torch thread"),
    ({"workers": 2, "scheduler": "tcp://h:1"}, "--workers and --scheduler: give one place to train"),
    ({"scheduler_file": "f", "cluster": "slurm"}, "--scheduler-file and --cluster"),
    ({"cluster": "pbs"}, "--cluster pbs: the one cluster supported is slurm"),
    ({"cluster": "slurm", "cluster_config": "/nonexistent.yaml"}, "no such file"),
    ({"cluster": "slurm", "max_jobs": 0}, "--max-jobs 0"),
    ({"cluster": "slurm", "gpus_per_worker": -1}, "--gpus-per-worker -1"),
])
def test_a_bad_flag_is_refused_naming_it(kwargs, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        EngineSpec(**kwargs)


def test_local_workers_counts_what_trains_at_once():
    cores = len(os.sched_getaffinity(0))
    assert EngineSpec().local_workers() == 1
    assert EngineSpec(workers=3).local_workers() == 3
    assert EngineSpec(workers="auto").local_workers() == max(1, cores)
    assert EngineSpec(workers="auto", threads=cores + 1).local_workers() == 1
    assert EngineSpec(scheduler="tcp://h:1").local_workers() == 1      # a remote cluster's size is not asked


class _FakeEngine:
    """Records which engine a spec starts, with what, instead of starting a cluster."""
    calls: list = []

    def __init__(self, kind, *args, **kw):
        self.kind, self.args, self.kw, self.closed = kind, args, kw, False
        _FakeEngine.calls.append(self)

    @classmethod
    def local(cls, *a, **kw):
        return cls("local", *a, **kw)

    @classmethod
    def connect(cls, *a, **kw):
        return cls("connect", *a, **kw)

    @classmethod
    def slurm(cls, *a, **kw):
        return cls("slurm", *a, **kw)

    def close(self):
        self.closed = True


@pytest.fixture
def fake_engine(monkeypatch):
    _FakeEngine.calls = []
    monkeypatch.setattr(spec_mod, "Engine", _FakeEngine)
    monkeypatch.setattr(spec_mod, "workers_status", lambda engine: [f"asked {engine.kind}"])
    return _FakeEngine


def test_start_picks_the_engine_the_flags_ask_for(fake_engine, tmp_path):
    assert EngineSpec().start() is None and fake_engine.calls == []        # this process
    e = EngineSpec(workers="2", dashboard=True).start()
    assert (e.kind, e.args, e.kw) == ("local", (2,), {"threads": None, "dashboard": True})
    e = EngineSpec(scheduler_file="s.json", threads=3).start()
    assert (e.kind, e.args, e.kw) == ("connect", (None, "s.json"), {"threads": 3})
    cfg = tmp_path / "jobqueue.yaml"
    cfg.write_text("jobqueue: {slurm: {}}\n")
    e = EngineSpec(cluster="slurm", cluster_config=str(cfg), max_jobs=2, gpus_per_worker=1).start()
    assert (e.kind, e.args) == ("slurm", (str(cfg),))
    assert e.kw == {"max_jobs": 2, "gpus": 1, "threads": 1, "dashboard": False}     # 1 torch thread on a cluster


def test_workers_status_asks_only_a_scheduler_and_closes_it(fake_engine):
    assert EngineSpec(workers=2).workers_status() == [] and fake_engine.calls == []
    assert EngineSpec(scheduler="tcp://h:1").workers_status() == ["asked connect"]
    assert [e.closed for e in fake_engine.calls] == [True]
