"""posbias.training.checkpoints: checkpoints are atomic, checked, parked, split and carried to a fresh clone."""
import io
import json
import threading

import pytest
import torch
from training_helpers import _crash_at_step, _own_data, _sigterm_in_step, _unit, _without_wall_time

from posbias import training as train
from posbias.storage import parking, provenance
from posbias.book import checkdata
from posbias.training import campaigns
from posbias.training import checkpoints as ck


def test_checkpoint_write_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "state.pt"
    ck.save(path, {"step": 1})

    def half_written(obj, f):
        f.write(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", half_written)
    with pytest.raises(OSError):
        ck.save(path, {"step": 2})
    monkeypatch.undo()
    assert torch.load(path, weights_only=False) == {"step": 1} and sorted(tmp_path.iterdir()) == [path]


def test_checkpoint_of_other_units_or_damaged_is_not_used(tmp_path, monkeypatch):
    torch.set_num_threads(1)
    a, b = _unit(0, steps=4), _unit(1, steps=4)
    lines = []
    _crash_at_step(monkeypatch, 3, RuntimeError("crash"))
    with pytest.raises(RuntimeError):
        train.train_units([a], checkpoint_dir=tmp_path, checkpoint_seconds=0.0, progress=False, log=lines.append)
    monkeypatch.undo()
    assert (tmp_path / "state.pt").exists()
    ref_b = train.train_units([b], progress=False, log=lines.append)[0]
    got_b = train.train_units([b], checkpoint_dir=tmp_path, progress=False, log=lines.append)[0]
    assert any("belongs to other units" in s for s in lines)
    assert _without_wall_time(got_b) == _without_wall_time(ref_b)
    (tmp_path / "state.pt").write_bytes(b"not a checkpoint")
    assert train.train_units([a], checkpoint_dir=tmp_path, progress=False, log=lines.append)[0]["curves"]
    assert any("unreadable" in s for s in lines)


def test_checkpoint_interval_from_the_environment(monkeypatch):
    monkeypatch.delenv("POSBIAS_CHECKPOINT_SECONDS", raising=False)
    assert train.checkpoint_interval() == 60.0
    monkeypatch.setenv("POSBIAS_CHECKPOINT_SECONDS", "2.5")
    assert train.checkpoint_interval() == 2.5
    for bad in ("soon", "-1", "nan"):
        monkeypatch.setenv("POSBIAS_CHECKPOINT_SECONDS", bad)
        with pytest.raises(ValueError, match="POSBIAS_CHECKPOINT_SECONDS"):
            train.checkpoint_interval()


def test_a_part_another_process_trains_is_waited_for_in_process_and_refused_in_a_task(tmp_path, monkeypatch):
    """One process (a chapter's run) waits for a part whose lock another process holds, then trains
    what is still missing; a task (a Dask worker's) is refused with PartBusy instead, naming the lock.
    Here the 'other process' is this test holding the lock."""
    import fcntl

    monkeypatch.setenv("POSBIAS_CACHE", str(tmp_path))
    monkeypatch.delenv("POSBIAS_WRITE_DATA", raising=False)
    kw = dict(steps=2, seeds=[0], eval_every=1, n_test=8, n_sweep=8, n_sink=8, depths=[2])
    units = [u for us in train.units_of("wu-fig-2", "default", dict(**kw)).values() for u in us]
    first = [u for u in units if u.config.pe == "none"]            # the first ensemble: No PE and decay
    assert len(first) == 2 and len(units) == 3
    lock = ck.lock_of(first)
    lock.parent.mkdir(parents=True, exist_ok=True)
    held = open(lock, "a+")
    fcntl.flock(held.fileno(), fcntl.LOCK_EX)
    with pytest.raises(train.PartBusy, match=str(lock)):
        train.train_part(first, threads=1, log=lambda s: None)
    lines: list[str] = []

    def log(line: str) -> None:
        lines.append(line)
        if line.startswith("waiting for another process"):
            fcntl.flock(held.fileno(), fcntl.LOCK_UN)      # the other process is done

    out: dict = {}
    t = threading.Thread(target=lambda: out.update(train.run_campaign("wu-fig-2", "smoke", progress=False,
                                                                       log=log, **kw)))
    t.start()
    t.join(120)
    held.close()
    assert not t.is_alive()
    trained = [ln for ln in lines if ln.startswith("training") or ln.startswith("waiting")]
    assert trained[0].startswith("waiting") and "(none PE)" in trained[1] and "(rope PE)" in trained[2], trained
    assert sorted(out) == ["No PE|2", "RoPE|2", "decay|2"]


def test_committed_checkpoint_carries_a_campaign_to_a_fresh_clone(tmp_path, monkeypatch):
    """park_campaign commits the checkpoint of a stopped ensemble to data/checkpoints; a run with an
    empty cache (another machine) continues from it and ends bit-identical to an uninterrupted run;
    parking needs no lock, so it runs beside a training process;
    once the units are stored the committed checkpoint is removed; a tampered one is not used."""
    from posbias.storage import store
    from posbias.book import checkdata

    data = _own_data(tmp_path, monkeypatch)
    monkeypatch.setattr(parking, "PART_BYTES", 2**15)     # so that this small checkpoint is committed in several parts
    kw = dict(steps=5, seeds=[0, 1], eval_every=2, n_test=8, n_sweep=8, n_sink=8)
    units = train.units_of("wu-fig-6", "default", dict(**kw, windows=[4], prefixes=[2]))
    flat = campaigns.distinct(units)
    ref = train.train_units(flat, progress=False, log=lambda s: None)      # uninterrupted, no checkpoint
    quiet = lambda s: None  # noqa: E731
    run = lambda **k: train.run_campaign("wu-fig-6", "smoke", progress=False, **kw, windows=[4], prefixes=[2], **k)  # noqa: E731
    park = lambda: train.park_campaign("wu-fig-6", "smoke", log=quiet, **kw, windows=[4], prefixes=[2])  # noqa: E731

    monkeypatch.setenv("POSBIAS_CACHE", str(tmp_path / "machine-1"))
    with monkeypatch.context() as m, pytest.raises(train.Interrupted):
        _sigterm_in_step(m)
        run(log=quiet)
    # parking reads the last saved checkpoint without the ensemble's lock, so it runs while a
    # training process holds that lock (here: this test, in place of one) and need not stop it
    got_park: list = []
    with ck.guard(ck.lock_of(flat)):
        worker = threading.Thread(target=lambda: got_park.append(park()), daemon=True)
        worker.start()
        worker.join(timeout=120)
    assert got_park == [{"parked": 1, "kept": 0, "removed": 0}]
    (parked,) = parking.parked_checkpoints()
    assert parked == ck.parked_of(flat) and parked.parent == data / "checkpoints" / "wu-units"
    parts = parking.parked_parts(parked)
    assert parts == parking.parked_files() and len(parts) > 1 and not parked.exists()
    manifest = json.loads((data / "manifest.json").read_text())
    assert manifest == {str(p.relative_to(data)): store.sha256_file(p) for p in parts}
    st = torch.load(io.BytesIO(parking.parked_checkpoint(parked)), weights_only=False)
    assert st["step"] == 3 and st["parked"]["step"] == 3 and st["parked"]["seeds"] == [0, 1] * 3
    assert [s["from_step"] for s in st["sittings"]] == [0] and "git" in st["sittings"][0]
    assert st["sittings"][0]["from_wall"] == 0.0
    assert park() == {"parked": 0, "kept": 1, "removed": 0}                 # nothing new to commit
    assert checkdata.verify_data(log=quiet) == []
    row = next(r for r in checkdata.run_checks(sample=0, log=quiet) if r.file.endswith(".pt"))
    assert (row.recomputed, row.verdict) == ("checkpoint", "ok")

    monkeypatch.setenv("POSBIAS_CACHE", str(tmp_path / "machine-2"))       # a fresh clone: empty cache
    status = train.campaign_status("wu-fig-6", "smoke", **kw, windows=[4], prefixes=[2])
    assert [(r.step, r.committed) for r in status.ensembles] == [(3, True)]
    assert "from the committed checkpoint" in train.format_status(status)
    lines = []
    got = run(log=lines.append)
    assert any(s.startswith("continuing from the committed checkpoint data/checkpoints/wu-units/") for s in lines)
    assert any("trained 2 of 5 steps" in s for s in lines), lines
    by_unit = {json.dumps(u.params()): r for u, r in zip(flat, ref)}
    for us, rs in zip(units.values(), got.values()):
        for u, r in zip(us, rs):
            assert _without_wall_time(r) == json.loads(json.dumps(_without_wall_time(by_unit[json.dumps(u.params())])))
    for u in flat:      # each unit's provenance lists both sittings, on machine 1 from step 0, here from step 3
        name = store.result_name("wu-units", u.params(), train.VERSION)
        rec = json.loads((tmp_path / "machine-2" / name).read_text())
        assert [s["from_step"] for s in rec["provenance"]["sittings"]] == [0, 3]
        first, second = rec["provenance"]["sittings"]
        assert first["from_wall"] == 0.0 < second["from_wall"] <= rec["result"]["train_seconds_ensemble"]
        assert all(s["cpu"] == rec["provenance"]["cpu"] for s in rec["provenance"]["sittings"])
        assert provenance.summary_contradictions(rec["provenance"]) == []      # its summary is its sittings'
    assert park() == {"parked": 0, "kept": 0, "removed": 1}
    assert parking.parked_files() == [] and json.loads((data / "manifest.json").read_text()) == {}

    # a committed checkpoint whose bytes differ from the manifest is refused: training starts at step 0
    monkeypatch.setenv("POSBIAS_CACHE", str(tmp_path / "machine-3"))
    other = dict(kw, seeds=[2])
    with monkeypatch.context() as m, pytest.raises(train.Interrupted):
        _sigterm_in_step(m)
        train.run_campaign("wu-fig-5", "smoke", progress=False, log=quiet, **other)
    assert train.park_campaign("wu-fig-5", "smoke", log=quiet, **other)["parked"] == 1
    part = parking.parked_files()[-1]
    part.write_bytes(part.read_bytes() + b"\0")
    monkeypatch.setenv("POSBIAS_CACHE", str(tmp_path / "machine-4"))
    lines.clear()
    with pytest.warns(UserWarning, match="SHA-256 differs from the manifest"):
        train.run_campaign("wu-fig-5", "smoke", progress=False, log=lines.append, **other)
    assert any("trained 5 of 5 steps" in s for s in lines), lines


def test_smaller_max_members_splits_a_started_ensemble_exactly(tmp_path, monkeypatch):
    """A campaign stopped half way and started again with a smaller max_members splits the started
    ensemble: each part resumes from the larger checkpoint cut along the ensemble axis and ends
    bit-identical to the uninterrupted ensemble. The split stays for later commands at the default
    max_members; parking commits the parts and removes the larger committed checkpoint once no unit
    needs it; training_time counts the time before the split once; a larger ensemble that another
    process is training is not cut. On the CPU: on a GPU another ensemble size rounds otherwise
    (tests/test_cuda.py)."""
    from posbias.storage import store

    monkeypatch.setenv("POSBIAS_DEVICE", "cpu")

    _own_data(tmp_path, monkeypatch)
    monkeypatch.setenv("POSBIAS_CACHE", str(tmp_path / "cache"))
    quiet = lambda s: None  # noqa: E731
    kw = dict(steps=8, seeds=[0, 1], eval_every=2, n_test=8, n_sweep=8, n_sink=8, depths=[2])
    none = [u for u in campaigns.distinct(train.units_of("wu-fig-2", "default", dict(**kw))) if u.config.pe == "none"]
    assert [(u.config.mask, u.seed) for u in none] == [("causal", 0), ("causal", 1), ("decay", 0), ("decay", 1)]
    ref = dict(zip(none, train.train_units(none, progress=False, log=quiet)))     # one ensemble, uninterrupted
    run = lambda **k: train.run_campaign("wu-fig-2", "smoke", progress=False, **kw, **k)  # noqa: E731
    park = lambda **k: train.park_campaign("wu-fig-2", "smoke", log=quiet, **kw, **k)  # noqa: E731
    status = lambda **k: [(r.members, r.step, r.split_from)  # noqa: E731
                          for r in train.campaign_status("wu-fig-2", "smoke", **kw, **k).ensembles]

    with monkeypatch.context() as m, pytest.raises(train.Interrupted):      # the 4-unit ensemble stops at step 3
        _sigterm_in_step(m)
        run(log=quiet)
    assert park() == {"parked": 1, "kept": 0, "removed": 0}
    assert status() == [(4, 3, None), (2, None, None)]
    assert status(max_members=2) == [(2, 3, 4), (2, 3, 4), (2, None, None)]     # to be cut from the 4-unit one
    with pytest.raises(ValueError, match="at least 1"):
        status(max_members=0)
    with ck.guard(ck.lock_of(none)), pytest.raises(RuntimeError, match="stop that process first"):
        run(log=quiet, max_members=2)           # as if another process were training the 4-unit ensemble
    lines: list[str] = []
    with monkeypatch.context() as m, pytest.raises(train.Interrupted):      # the No PE part stops at step 4
        _sigterm_in_step(m, n=1)
        run(log=lines.append, max_members=2)
    assert any(s.startswith("continuing from step 3 of the checkpoint of a larger ensemble (4 units") for s in lines)
    # the split stays, whatever max_members: No PE on its own checkpoint, decay still to be cut
    assert status() == [(2, 4, None), (2, 3, 4), (2, None, None)]
    assert "it will be split from" in train.format_status(train.campaign_status("wu-fig-2", "smoke", **kw))
    assert park() == {"parked": 1, "kept": 0, "removed": 0}      # the 4-unit one stays: decay needs it
    assert len(parking.parked_checkpoints()) == 2
    with monkeypatch.context() as m, pytest.raises(train.Interrupted):      # No PE finishes; decay is cut, stops at 4
        _sigterm_in_step(m, n=5)
        run(log=quiet)
    assert status() == [(2, 4, None), (2, None, None)]
    assert park() == {"parked": 1, "kept": 0, "removed": 2}      # decay's parked; No PE stored; the 4-unit one unneeded
    assert parking.parked_checkpoints() == [ck.parked_of(none[2:])] and checkdata.verify_data(log=quiet) == []
    got = run(log=quiet)
    assert not list((tmp_path / "cache" / "wu-units").glob("*.ckpt/state.pt"))    # every checkpoint removed
    results = [got[f"{name}|2"][i] for name in ("No PE", "decay") for i in (0, 1)]
    drop = ("train_seconds_ensemble", "ensemble_size", "splits")
    for u, r in zip(none, results):
        assert {k: v for k, v in r.items() if k not in drop} == \
            json.loads(json.dumps({k: v for k, v in ref[u].items() if k not in drop}))
        assert r["ensemble_size"] == 2 and [(s["members"], s["step"]) for s in r["splits"]] == [(4, 3)]
        rec = json.loads((tmp_path / "cache" / store.result_name("wu-units", u.params(), train.VERSION)).read_text())
        assert [s["from_step"] for s in rec["provenance"]["sittings"]] == [0, 3, 4]    # each part stopped once at 4
    (w,) = {r["splits"][0]["wall"] for r in results}
    t_nope, t_decay = results[0]["train_seconds_ensemble"], results[2]["train_seconds_ensemble"]
    assert 0 < w < min(t_nope, t_decay)
    took = train.training_time(results)
    assert (took.seconds, took.ensembles) == (pytest.approx(t_nope + t_decay - w), 3)


def test_ensemble_from_checkpoint_reads_a_file_or_a_checkpoint_committed_in_parts(tmp_path, monkeypatch):
    """The same ensemble from the checkpoint file, from its parts (named by a part or by the whole's
    name), and nothing from a file that is no checkpoint (a clear error)."""
    _own_data(tmp_path, monkeypatch)
    monkeypatch.setattr(parking, "PART_BYTES", 200_000)
    path = __import__("pathlib").Path(__file__).parent / "data" / "rope-step-35729.pt"
    target = parking.parked_path("wu-units", {"units": "rope-step-35729"})
    parts = parking.park(target, lambda f: f.write(path.read_bytes()))
    assert len(parts) > 1
    runs = [train.Ensemble.from_checkpoint(p) for p in (path, parts[-1], target)]
    assert {r.start for r in runs} == {35_729} and all(r.units == runs[0].units for r in runs)
    for r in runs[1:]:
        assert all(torch.equal(a, b) for a, b in zip(runs[0].net.state_dict().values(), r.net.state_dict().values()))
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="junk.pt: not a readable training checkpoint"):
        train.Ensemble.from_checkpoint(tmp_path / "junk.pt")
