"""posbias.training: campaigns expand to the stated units, training resumes and is deterministic."""
import ast
import dataclasses
import io
import json
import os
import random
import signal
import threading

import jupytext
import numpy as np
import pytest
import torch

from posbias import train
from posbias import parking
from posbias.training import campaigns, engine, loop, planning
from posbias.training import checkpoints as ck
from posbias.model import MemberConfig


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


def _crash_at_step(monkeypatch, step: int, exc: BaseException) -> None:
    """Make drawing the batch of training step ``step`` raise ``exc``: a run dying mid-way, after
    the checkpoints of the steps before (undo with ``monkeypatch.undo()``)."""
    orig = loop.ensemble_batch

    def crashing(*args, **kw):
        if args[3] == step:
            raise exc
        return orig(*args, **kw)

    monkeypatch.setattr(loop, "ensemble_batch", crashing)


def test_training_is_deterministic_and_resumes(tmp_path, monkeypatch):
    torch.set_num_threads(1)
    u = _unit()
    ref = train.train_units([u], progress=False)[0]
    again = train.train_units([u], progress=False)[0]
    assert ref["curves"] == again["curves"] and ref["ic_accuracy"] == again["ic_accuracy"]
    # a Ctrl-C in step 4 with a checkpoint after every step; the next run resumes from step 4
    _crash_at_step(monkeypatch, 4, KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        train.train_units([u], checkpoint_dir=tmp_path, checkpoint_seconds=0.0, progress=False)
    monkeypatch.undo()
    assert (tmp_path / "state.pt").exists()
    lines = []
    resumed = train.train_units([u], checkpoint_dir=tmp_path, checkpoint_seconds=0.0, progress=False,
                                log=lines.append)[0]
    assert any("resumed from step 4/" in s for s in lines)
    assert resumed["curves"] == ref["curves"] and resumed["ic_accuracy"] == ref["ic_accuracy"]
    assert not (tmp_path / "state.pt").exists()


def _without_wall_time(r):
    return {k: v for k, v in r.items() if k != "train_seconds_ensemble"}


def test_sigterm_stops_between_steps_checkpoints_and_resumes_exactly(tmp_path, monkeypatch):
    torch.set_num_threads(1)
    u = _unit(steps=8)

    def seed_all():
        torch.manual_seed(123), np.random.seed(5), random.seed(7)

    seed_all()
    ref = train.train_units([u], progress=False, log=lambda s: None)[0]
    ref_rng = (torch.get_rng_state(), np.random.get_state()[1].copy(), random.getstate())

    lines = []
    seed_all()
    previous = signal.getsignal(signal.SIGTERM)
    with monkeypatch.context() as m, pytest.raises(train.Interrupted) as stop:
        _sigterm_in_step(m)
        train.train_units([u], checkpoint_dir=tmp_path, checkpoint_seconds=1e9, progress=False, log=lines.append)
    assert signal.getsignal(signal.SIGTERM) is previous          # the handler is restored
    assert stop.value.signum == signal.SIGTERM and stop.value.step == 3   # the third step was finished
    assert torch.load(tmp_path / "state.pt", weights_only=False)["step"] == 3
    assert lines[-1].startswith("SIGTERM at step 3/8: checkpoint saved")
    assert not list(tmp_path.glob("*.tmp"))

    torch.manual_seed(999), np.random.seed(0), random.seed(0)      # the resumed process starts elsewhere
    lines.clear()
    resumed = train.train_units([u], checkpoint_dir=tmp_path, progress=False, log=lines.append)[0]
    assert lines[0].startswith("resumed from step 3/8") and "trained 5 of 8 steps" in lines[-1]
    assert _without_wall_time(resumed) == _without_wall_time(ref)  # bit-identical, curves included
    assert torch.equal(torch.get_rng_state(), ref_rng[0])         # global RNGs continue as if never stopped
    assert (np.random.get_state()[1] == ref_rng[1]).all() and random.getstate() == ref_rng[2]
    assert not (tmp_path / "state.pt").exists()


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


def test_ensemble_result_equals_alone():
    # a mixed ensemble (mask, PE, residual, seed differ) stores, for each member, exactly the result of
    # training that member alone: every field but the ensemble's own size and wall time
    torch.set_num_threads(1)
    units = [_unit(0), _unit(1, pe="rope", residual=True), _unit(2, mask="decay")]
    together = train.train_units(units, progress=False)
    own = {"train_seconds_ensemble", "ensemble_size"}
    for u, got in zip(units, together):
        alone = train.train_units([u], progress=False)[0]
        assert set(got) == set(alone) and {"curves", "ic_accuracy", "sweep_accuracy", "mean_attention"} <= set(got)
        assert {k: v for k, v in got.items() if k not in own} == {k: v for k, v in alone.items() if k not in own}


def test_run_campaign_smoke_uses_the_store(tmp_path, monkeypatch):
    monkeypatch.setenv("POSBIAS_CACHE", str(tmp_path))
    monkeypatch.delenv("POSBIAS_WRITE_DATA", raising=False)
    kw = dict(steps=4, seeds=[0], eval_every=2, n_test=8, n_sweep=8, n_sink=8)
    r = train.run_campaign("wu-fig-5", "smoke", progress=False, log=lambda s: None, **kw)
    assert list(r) == ["causal|none"] and len(r["causal|none"]) == 1
    (rec,) = [json.loads(p.read_text()) for p in (tmp_path / "wu-units").glob("*.json")]
    assert rec["provenance"]["wall_seconds"] == round(rec["result"]["train_seconds_ensemble"], 3) > 0
    calls = []
    monkeypatch.setattr(engine, "train_units", lambda *a, **k: calls.append(1))
    r2 = train.run_campaign("wu-fig-5", "smoke", progress=False, log=lambda s: None, **kw)
    assert calls == [] and r2 == r


@pytest.mark.parametrize("damage", ["truncate", "empty", "truncate-without-hash"])
def test_a_damaged_cache_entry_of_a_unit_is_retrained_and_planner_estimate_status_agree(tmp_path, monkeypatch,
                                                                                        damage):
    from posbias import chapters, cost

    monkeypatch.setenv("POSBIAS_CACHE", str(tmp_path))
    monkeypatch.delenv("POSBIAS_WRITE_DATA", raising=False)
    kw = dict(steps=4, seeds=[0], eval_every=2, n_test=8, n_sweep=8, n_sink=8, depths=[2])
    r = train.run_campaign("wu-fig-5", "smoke", progress=False, log=lambda s: None, **kw)
    (path,) = (tmp_path / "wu-units").glob("*.json")
    text = path.read_bytes()
    path.write_bytes(b"" if damage == "empty" else text[:100])
    if damage == "truncate-without-hash":
        path.with_suffix(".sha256").unlink()
    with pytest.warns(UserWarning, match="recomputing"):
        assert not campaigns.stored(campaigns.distinct(campaigns.units_of("wu-fig-5", "smoke", kw))[0])
    assert train.campaign_status("wu-fig-5", "smoke", **kw).stored == 0
    fig5 = chapters.get_chapter("wu-fig-5")
    params = {**fig5.resolve("smoke", {}), **{k: v for k, v in kw.items() if k != "depths"}, "depth": 2}
    assert cost.estimate(fig5, params).units_stored == 0
    r2 = train.run_campaign("wu-fig-5", "smoke", progress=False, log=lambda s: None, **kw)

    def timeless(res):
        return {k: [{f: x for f, x in v.items() if "seconds" not in f} for v in vs] for k, vs in res.items()}

    assert timeless(r2) == timeless(r)
    assert train.campaign_status("wu-fig-5", "smoke", **kw).stored == 1


class _Recorder:
    """Stands in for ``posbias.train`` in a notebook's campaign call and records what it asks for."""

    def __init__(self):
        self.calls = []

    def run_campaign(self, experiment, profile="default", **kw):
        kw = {k: v for k, v in kw.items() if k not in ("progress", "log", "max_members")}
        self.calls.append((experiment, profile, kw))

    def run_chapter_campaign(self, chapter, params, **kw):
        experiment, profile, overrides = train.chapter_campaign(chapter, params)
        self.run_campaign(experiment, profile, **overrides, **kw)


def _campaign_calls(chapter, params):
    """Every ``train.run_campaign(...)``/``train.run_chapter_campaign(...)`` of the chapter, evaluated on ``params``."""
    nb = jupytext.read(get_chapter(chapter).path)
    rec = _Recorder()
    for cell in nb.cells:
        if cell.cell_type != "code" or "train.run_" not in cell.source:
            continue
        for node in ast.walk(ast.parse(cell.source)):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "train"
                    and node.func.attr in ("run_campaign", "run_chapter_campaign")):
                eval(compile(ast.Expression(node), chapter, "eval"), {**params, "train": rec})
    return rec.calls


def _units_of(experiment, profile, overrides):
    return train.campaign_units(experiment, **{**train.PROFILES[profile], **overrides})


from posbias.chapters import chapter_ids, get_chapter  # noqa: E402


@pytest.mark.parametrize("chapter", chapter_ids())
def test_chapter_campaigns_match_the_notebooks(chapter):
    """``posbias campaign`` trains what the notebook reads: the registry and the notebook's call agree."""
    for profile in get_chapter(chapter).profile_names():
        params = get_chapter(chapter).resolve(profile)
        calls = _campaign_calls(chapter, params)
        if chapter not in train.CHAPTER_CAMPAIGNS:
            assert calls == [], f"{chapter} trains networks: add it to train.CHAPTER_CAMPAIGNS"
            continue
        assert len(calls) == 1, calls
        assert _units_of(*calls[0]) == _units_of(*train.chapter_campaign(chapter, params)), (chapter, profile)


def test_a_part_another_process_trains_is_waited_for_in_process_and_refused_in_a_task(tmp_path, monkeypatch):
    """One process (a chapter's run) waits for a part whose lock another process holds, then trains
    what is still missing; a task (a Dask worker's) is refused with PartBusy instead, naming the lock.
    Here the 'other process' is this test holding the lock."""
    import fcntl

    monkeypatch.setenv("POSBIAS_CACHE", str(tmp_path))
    monkeypatch.delenv("POSBIAS_WRITE_DATA", raising=False)
    kw = dict(steps=2, seeds=[0], eval_every=1, n_test=8, n_sweep=8, n_sink=8, depths=[2])
    units = [u for us in train.campaign_units("wu-fig-2", **kw).values() for u in us]
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


def test_stored_campaign_reads_without_training(tmp_path, monkeypatch):
    monkeypatch.setenv("POSBIAS_CACHE", str(tmp_path))
    monkeypatch.delenv("POSBIAS_WRITE_DATA", raising=False)
    kw = dict(steps=2, seeds=[0, 1], eval_every=1, n_test=8, n_sweep=8, n_sink=8)
    monkeypatch.setattr(engine, "train_units", lambda *a, **k: pytest.fail("must not train"))
    assert train.stored_campaign("wu-fig-5", "smoke", **kw) == {"causal|none": [None, None]}
    monkeypatch.undo()
    monkeypatch.setenv("POSBIAS_CACHE", str(tmp_path))
    one = train.run_campaign("wu-fig-5", "smoke", progress=False, log=lambda s: None, **{**kw, "seeds": [1]})
    got = train.stored_campaign("wu-fig-5", "smoke", **kw)["causal|none"]
    assert got[0] is None and got[1] == one["causal|none"][0]


def test_campaign_status_reads_checkpoints_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("POSBIAS_CACHE", str(tmp_path))
    monkeypatch.delenv("POSBIAS_WRITE_DATA", raising=False)
    kw = dict(steps=4, seeds=[0, 1], eval_every=2, n_test=8, n_sweep=8, n_sink=8, depths=[2])
    status = lambda: train.campaign_status("wu-fig-2", "smoke", **kw)  # noqa: E731
    st = status()
    assert (st.units, st.stored) == (6, 0) and list(tmp_path.iterdir()) == []      # nothing created
    assert sorted((r.pe, r.members, r.step) for r in st.ensembles) == [("none", 4, None), ("rope", 2, None)]
    # Figure 3's three PE groups of 4: one process trains 3 ensembles of 4, two workers 6 of 2 (3 rounds)
    f3 = dict(steps=4, seeds=[0, 1], eval_every=2, n_test=8, n_sweep=8, n_sink=8)
    for workers, sizes in ((1, [4, 4, 4]), (2, [2] * 6)):
        got = train.campaign_status("wu-fig-3", "smoke", workers=workers, **f3).ensembles
        assert [r.members for r in got] == sizes and {r.pe for r in got} == {"none", "sin", "rope"}
    # an ensemble stopped by SIGTERM during its third step: the checkpoint says how far it got
    rope_units = train.campaign_units("wu-fig-2", **{**train.PROFILES["smoke"], **kw})["RoPE|2"]
    (part,) = planning.ensembles(rope_units, 64)
    with monkeypatch.context() as m:
        _sigterm_in_step(m)
        with pytest.raises(train.Interrupted):
            train.train_units(part, checkpoint_dir=ck.checkpoint_of(part), progress=False, log=lambda s: None)
    rope = next(r for r in status().ensembles if r.pe == "rope")
    assert (rope.step, rope.steps, rope.members) == (3, 4, 2) and rope.wall > 0 and rope.age >= 0
    assert rope.sitting_pace == pytest.approx(rope.wall / 3)      # one sitting, from step 0
    assert "depth 2, causal mask, rope PE, 2 units: step 3/4 (75.0%)" in train.format_status(status())
    train.run_campaign("wu-fig-2", "smoke", progress=False, log=lambda s: None, **kw)
    assert status() == train.CampaignStatus(units=6, stored=6, ensembles=[])


def _own_data(tmp_path, monkeypatch):
    """An empty data/ (and manifest) for the store, one torch thread, results kept out of data/."""
    from posbias import store

    torch.set_num_threads(1)
    data = tmp_path / "data"
    data.mkdir()
    (data / "manifest.json").write_text("{}")
    monkeypatch.setattr(store, "DATA", data)
    monkeypatch.setattr(store, "MANIFEST", data / "manifest.json")
    monkeypatch.delenv("POSBIAS_WRITE_DATA", raising=False)
    monkeypatch.setenv("POSBIAS_THREADS", "1")
    return data


def test_committed_checkpoint_carries_a_campaign_to_a_fresh_clone(tmp_path, monkeypatch):
    """park_campaign commits the checkpoint of a stopped ensemble to data/checkpoints; a run with an
    empty cache (another machine) continues from it and ends bit-identical to an uninterrupted run;
    parking needs no lock, so it runs beside a training process;
    once the units are stored the committed checkpoint is removed; a tampered one is not used."""
    from posbias import checkdata, store

    data = _own_data(tmp_path, monkeypatch)
    monkeypatch.setattr(parking, "PART_BYTES", 2**15)     # so that this small checkpoint is committed in several parts
    kw = dict(steps=5, seeds=[0, 1], eval_every=2, n_test=8, n_sweep=8, n_sink=8)
    units = train.campaign_units("wu-fig-6", **kw, windows=[4], prefixes=[2])
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
    assert store.verify_data(log=quiet) == []
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
    process is training is not cut."""
    from posbias import store

    _own_data(tmp_path, monkeypatch)
    monkeypatch.setenv("POSBIAS_CACHE", str(tmp_path / "cache"))
    quiet = lambda s: None  # noqa: E731
    kw = dict(steps=8, seeds=[0, 1], eval_every=2, n_test=8, n_sweep=8, n_sink=8, depths=[2])
    none = [u for u in campaigns.distinct(train.campaign_units("wu-fig-2", **kw)) if u.config.pe == "none"]
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
    assert parking.parked_checkpoints() == [ck.parked_of(none[2:])] and store.verify_data(log=quiet) == []
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


_ALLOCATOR_CHILD = """
import json, sys, torch
from posbias import train
from posbias.model import MemberConfig
torch.set_num_threads(1)
u = train.Unit(2, MemberConfig("causal", "none"), None, 0, 4, batch_size=128, eval_every=2, n_test=64,
               n_sweep=8, n_sink=16)
r = train.train_units([u], progress=False, log=lambda s: None)[0]
r.pop("train_seconds_ensemble")
json.dump({"tuned": train.tune_allocator(), "result": r}, sys.stdout)
"""


@pytest.mark.skipif(__import__("platform").libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_allocator_tuning_leaves_results_bit_identical():
    """tune_allocator changes where glibc keeps freed buffers, never what is computed: a unit trained
    with the full batch of 128 (activations of MBs, above glibc's default mmap threshold) in a
    process with the tuning and in one without gives the identical result, losses to the last bit."""
    import subprocess
    import sys

    out = {}
    for flag in ("0", "1"):
        env = {**os.environ, "POSBIAS_TUNE_MALLOC": flag, "POSBIAS_THREADS": "1"}
        run = subprocess.run([sys.executable, "-c", _ALLOCATOR_CHILD], env=env, capture_output=True, text=True,
                             check=True)
        out[flag] = json.loads(run.stdout)
    assert out["0"]["tuned"] is False and out["1"]["tuned"] is True
    assert out["0"]["result"]["curves"]["loss"][-1] > 0
    assert out["0"]["result"] == out["1"]["result"]


def test_format_status_projects_at_the_latest_sittings_pace():
    row = dict(depth=6, masks="", pe="none", members=10, steps=100_000, step=20_000, wall=4_000.0, age=5.0)
    text = train.format_status(train.CampaignStatus(45, 20, [train.EnsembleStatus(**row, sitting_pace=0.36)]))
    assert "200 ms/step over all sittings, 360 ms/step in the latest, about 8.0 h to go at the latest pace" in text
    older = train.format_status(train.CampaignStatus(45, 20, [train.EnsembleStatus(**row)]))
    assert "200 ms/step over all sittings, about 4.4 h to go at that pace" in older
    named = train.format_status(train.CampaignStatus(
        45, 20, [train.EnsembleStatus(**{**row, "masks": "causal/decay"})]))
    assert named.splitlines()[1].startswith("  depth 6, causal/decay mask, none PE, 10 units: step 20000/100000")
    fresh = dict(depth=6, masks="causal", pe="rope", members=5, steps=100_000)
    both = train.format_status(train.CampaignStatus(45, 20, [train.EnsembleStatus(**row, sitting_pace=0.36),
                                                              train.EnsembleStatus(**fresh),
                                                              train.EnsembleStatus(**{**fresh, "depth": 10})]))
    # 5 networks x 100,000 steps x (0.36 s / 10 networks) = 5.0 h; no depth-10 ensemble is measured
    assert ("depth 6, causal mask, rope PE, 5 units: not started (0/100000 steps), about 5.0 h at the pace per "
            "network of the started depth-6 ensembles") in both
    assert both.splitlines()[-1].endswith("not started (0/100000 steps)")
    # the chapter's cost model prices a depth no started ensemble measures; alike ensembles share a line
    deep = train.EnsembleStatus(**{**fresh, "depth": 10})
    priced = train.format_status(train.CampaignStatus(45, 20, [train.EnsembleStatus(**row, sitting_pace=0.36),
                                                                train.EnsembleStatus(**fresh), deep, deep,
                                                                dataclasses.replace(deep, members=1)]),
                                 model=lambda depth: 0.001 * depth)
    assert priced.splitlines()[2].endswith("at the pace per network of the started depth-6 ensembles")
    # 2 ensembles x 5 networks x 100,000 steps x 10 ms = 2.8 h
    assert priced.splitlines()[3] == ("  depth 10, causal mask, rope PE, 2 x 5 units: not started (0/100000 steps "
                                      "each), about 2.8 h in all at the chapter's cost model (10 ms per "
                                      "network-step on one core)")
    assert priced.splitlines()[4].startswith("  depth 10, causal mask, rope PE, 1 unit: not started (0/100000 "
                                             "steps), about 17 min at the chapter's cost model")
    assert len(priced.splitlines()) == 5



def test_training_time_counts_each_ensemble_and_each_split_once():
    """A :class:`train.TrainingTime` (frozen): members of one ensemble share its wall time, which counts
    once; two parts cut from a larger ensemble carry its time up to the split, which counts once."""
    import dataclasses

    from posbias import training

    def r(depth, size, seconds, splits=()):
        return {"params": {"depth": depth}, "ensemble_size": size, "train_seconds_ensemble": seconds,
                "splits": list(splits)}

    cut = {"key": "four", "members": 4, "step": 3, "wall": 30.0}
    results = [r(2, 2, 100.0), r(2, 2, 100.0),                      # one ensemble of two: 100 s
               r(2, 2, 80.0, [cut]), r(2, 2, 80.0, [cut]),          # a part: 50 s after the split
               r(2, 2, 90.0, [cut]), r(2, 2, 90.0, [cut]),          # the other part: 60 s after it
               r(4, 1, 7.0)]                                        # and the 30 s before it, once
    took = train.training_time(results)
    assert isinstance(took, train.TrainingTime) and train.TrainingTime is training.TrainingTime
    assert "TrainingTime" in train.__all__ and "TrainingTime" in training.__all__
    assert [f.name for f in dataclasses.fields(took)] == ["seconds", "ensembles"]
    assert took == train.TrainingTime(seconds=247.0, ensembles=5) and took.hours == 247.0 / 3600
    with pytest.raises(dataclasses.FrozenInstanceError):
        took.seconds = 0.0
    none = train.training_time([])
    assert (none.seconds, none.ensembles, none.hours) == (0.0, 0, 0.0) and isinstance(none.seconds, float)

@pytest.mark.parametrize("chapter", [c for c in train.CHAPTER_CAMPAIGNS if c != "sinks-synthetic-vs-real"])
@pytest.mark.parametrize("profile", ["default", "smoke", "paper", "converged"])
def test_profiles_repeat_the_chapters_front_matter(chapter, profile):
    """A chapter's front matter is the one source of its training settings: train.PROFILES, which
    the scoreboard and the benchmarks use, must say the same for every trained chapter and profile
    (except the default profile's steps and seeds, which a chapter's short run may choose)."""
    from posbias.chapters import get_chapter

    if profile not in get_chapter(chapter).profile_names():
        assert profile not in train.PROFILES or profile == "converged"
        return
    params = get_chapter(chapter).resolve(profile)
    experiment, _, overrides = train.chapter_campaign(chapter, params)
    free = ("steps", "seeds") if profile == "default" else ()   # a chapter's short run may train less
    for name, value in train.PROFILES[profile].items():
        if name not in free:
            assert overrides[name] == value, (chapter, profile, name, overrides[name], value)


def test_device_honours_posbias_device(monkeypatch):
    """`posbias run --device cpu` sets POSBIAS_DEVICE for the kernel: training then uses the CPU even
    where CUDA is present (here pretended), and the provenance records the device actually used."""
    from posbias.training import units

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setenv("POSBIAS_DEVICE", "cpu")
    assert units.device() == torch.device("cpu")
    monkeypatch.setenv("POSBIAS_DEVICE", "auto")
    assert units.device() == torch.device("cuda")
    monkeypatch.delenv("POSBIAS_DEVICE")
    assert units.device() == torch.device("cuda")
    monkeypatch.setenv("POSBIAS_DEVICE", "tpu")
    with pytest.raises(ValueError, match="choose one of auto, cpu, cuda"):
        units.device()
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setenv("POSBIAS_DEVICE", "cuda")
    with pytest.raises(RuntimeError, match="sees no CUDA device"):
        units.device()


def test_a_unit_trained_on_a_gpu_is_read_by_a_cpu_build(tmp_path, monkeypatch):
    """The device is provenance, not identity: a unit whose sittings say it trained on CUDA is stored
    under the key of the same unit on the CPU, and a CPU build finds it, its provenance naming the GPU."""
    monkeypatch.setenv("POSBIAS_CACHE", str(tmp_path))
    monkeypatch.setenv("POSBIAS_DEVICE", "cpu")
    monkeypatch.delenv("POSBIAS_WRITE_DATA", raising=False)
    kw = dict(steps=2, seeds=[0], eval_every=1, n_test=8, n_sweep=8, n_sink=8)
    (u,) = train.campaign_units("wu-fig-5", **kw)["causal|none"]
    (result,) = train.train_units([u], progress=False, log=lambda s: None)
    gpu = {"device": "cuda", "device_name": "NVIDIA H100 80GB HBM3", "torch_threads": 1, "from_step": 0}
    campaigns.store_unit(u, result, [gpu])
    assert train.stored_campaign("wu-fig-5", "smoke", **kw) == {"causal|none": [result]}
    (rec,) = [json.loads(p.read_text()) for p in (tmp_path / "wu-units").glob("*.json")]
    assert rec["provenance"]["device"] == "cuda" and rec["provenance"]["device_name"].startswith("NVIDIA")
    assert "_device" not in rec["params"] and rec["provenance"]["sittings"] == [gpu]


def test_progress_text_names_each_unfinished_ensemble():
    st = train.CampaignStatus(45, 40, [train.EnsembleStatus(6, "causal/decay", "none", 10, 100_000, step=84_858),
                                       train.EnsembleStatus(6, "causal", "rope", 5, 100_000)])
    assert train.progress_text(st, train.fig2_name) == ("depth 6, No PE and decay (10 units) at step 84,858; "
                                                         "depth 6, RoPE (5 units) not started")
    assert train.progress_text(train.CampaignStatus(45, 45, [])) == "nothing, the campaign is complete"
    one = train.CampaignStatus(5, 3, [train.EnsembleStatus(2, "decay", "none", 1, 500_000, step=96_066),
                                      train.EnsembleStatus(2, "decay", "none", 1, 500_000)])
    assert train.progress_text(one, train.fig2_name) == ("depth 2, decay (1 unit) at step 96,066; "
                                                          "depth 2, decay (1 unit) not started")


def test_progress_text_counts_units_not_started_whatever_the_workers_plan(monkeypatch, tmp_path):
    """Parts not started are summed per architecture (masks in the campaign's order), so the phrase is
    the same for one worker (one part of 30) and for two (two parts of 15, masks listed either way)."""
    E = train.EnsembleStatus
    started = E(2, "full/causal", "none", 15, 100_000, step=13_708)
    one = train.CampaignStatus(90, 0, [started, E(2, "full/causal", "rope", 30, 100_000),
                                       E(2, "causal/full", "none", 15, 100_000)])
    two = train.CampaignStatus(90, 0, [started, E(2, "full/causal", "rope", 15, 100_000),
                                       E(2, "causal/full", "none", 15, 100_000),
                                       E(2, "causal/full", "rope", 15, 100_000)])
    want = ("depth 2, full none PE and causal none PE (15 units) at step 13,708; "
            "depth 2, full rope PE and causal rope PE (30 units) not started; "
            "depth 2, full none PE and causal none PE (15 units) not started")
    assert train.progress_text(one) == train.progress_text(two) == want
    monkeypatch.setenv("POSBIAS_CACHE", str(tmp_path))       # the committed data and checkpoints only
    assert train.progress_text(train.campaign_status("wu-fig-4", "paper", workers=1)) == \
        train.progress_text(train.campaign_status("wu-fig-4", "paper", workers=2))


def _subnormal() -> torch.Tensor:
    return torch.tensor(1e-30) * torch.tensor(1e-10)        # 1e-40, below 2^-126: a subnormal float


@pytest.mark.skipif(__import__("platform").machine() not in ("x86_64", "AMD64"), reason="x86's FTZ/DAZ flags")
def test_flushed_denormals_flushes_inside_the_block_only_and_can_be_turned_off(monkeypatch):
    assert _subnormal() > 0
    monkeypatch.delenv("POSBIAS_FLUSH_DENORMAL", raising=False)
    with train.flushed_denormals() as on:
        assert on and _subnormal() == 0
    assert _subnormal() > 0                               # off again after training
    monkeypatch.setenv("POSBIAS_FLUSH_DENORMAL", "0")
    with train.flushed_denormals() as on:
        assert not on and _subnormal() > 0


def _count_subnormals(fn) -> int:
    """Subnormal entries in the outputs of every aten op ``fn()`` runs."""
    from torch.utils._python_dispatch import TorchDispatchMode

    seen = [0]

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in out if isinstance(out, (tuple, list)) else [out]:
                if isinstance(t, torch.Tensor) and t.is_floating_point():
                    a = t.abs()
                    seen[0] += int(((a > 0) & (a < torch.finfo(t.dtype).tiny)).sum())
            return out

    with Count():
        fn()
    return seen[0]


@pytest.mark.skipif(__import__("platform").machine() not in ("x86_64", "AMD64"), reason="x86's FTZ/DAZ flags")
def test_flushing_subnormals_leaves_training_bit_identical(monkeypatch):
    """tests/data/rope-step-35729.pt is one network of Figure 3's paper campaign (no mask, RoPE, seed
    0) at step 35,729 of 100,000, cut from the ensemble's checkpoint: late in training its backward
    pass makes subnormal numbers (asserted). Ten steps from it with flushing on and off end in the
    same weights and losses, to the last bit; AdamW's moments differ only where one of them is
    subnormal (flushed to 0 on one side), the entries that cannot move a weight."""
    torch.set_num_threads(1)
    path = __import__("pathlib").Path(__file__).parent / "data" / "rope-step-35729.pt"
    st = ck.load(path, None, torch.device("cpu"), ck.quiet)
    u = train.Unit.from_params(st["units"][0])
    out = {}
    for flag in ("0", "1"):
        monkeypatch.setenv("POSBIAS_FLUSH_DENORMAL", flag)
        run = train.Ensemble.from_checkpoint(path)
        assert run.units == [u] and run.start == 35_729
        with train.flushed_denormals() as on:
            assert on == (flag == "1")
            if not on:
                assert _count_subnormals(lambda: run.step(run.start, False)) > 1000
            for i in range(int(not on), 10):
                run.step(run.start + i, False)
        moments = [v for s in run.opt.state.values() for v in s.values() if torch.is_tensor(v) and v.dim()]
        out[flag] = (list(run.net.state_dict().values()), moments, run.loss_acc)
    assert len(out["0"][0]) == len(out["1"][0]) > 0 and len(out["0"][1]) == len(out["1"][1]) > 0
    assert all(torch.equal(a, b) for a, b in zip(out["0"][0], out["1"][0]))
    assert torch.equal(out["0"][2], out["1"][2]) and float(out["0"][2].sum()) > 0
    tiny = torch.finfo(torch.float32).tiny
    differ = 0
    for a, b in zip(out["0"][1], out["1"][1]):
        d = a != b
        differ += int(d.sum())
        assert bool(((a[d].abs() < tiny) & (b[d].abs() < tiny)).all())     # both below 2^-126 there
    assert differ > 0                # the moments did hold subnormals, so the comparison above tested something


def test_ensemble_from_checkpoint_reads_a_file_or_a_checkpoint_committed_in_parts(tmp_path, monkeypatch):
    """The same ensemble from the checkpoint file, from its parts (named by a part or by the whole's
    name), and nothing from a file that is no checkpoint (a clear error)."""
    from posbias import store

    data = tmp_path / "data"
    data.mkdir()
    (data / "manifest.json").write_text("{}")
    monkeypatch.setattr(store, "DATA", data)
    monkeypatch.setattr(store, "MANIFEST", data / "manifest.json")
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


_FLUSH_THREADS = """
import sys, numpy as np, torch
from posbias.training.loop import flushed_denormals
torch.set_num_threads(1)
x = torch.from_numpy(np.full((1 << 20,), 1e-39, dtype=np.float32))     # subnormal
def kept():                       # outputs not flushed to zero, of 2^20, half of them on each thread
    return int(((x * 1.0001) != 0).sum())
if sys.argv[1] == "pool-first":
    torch.set_num_threads(2)
    kept()                        # the second thread exists before the block, not flushing
with flushed_denormals() as on:
    torch.set_num_threads(2)
    inside = kept()               # with "pool-inside", the second thread is made here, flushing
print(on, inside, kept())
"""


@pytest.mark.skipif(__import__("platform").machine() not in ("x86_64", "AMD64")
                    or __import__("sys").platform != "linux", reason="x86's FTZ/DAZ flags, libgomp on Linux")
@pytest.mark.parametrize("when", ["pool-first", "pool-inside"])
def test_flushing_reaches_every_torch_thread_and_ends_with_the_block(when):
    """With two torch threads, every output of a parallel product of subnormals is flushed inside the
    block and none after it, whether the thread pool existed before the block (its threads do not
    inherit the flag) or was made inside it (they would keep it)."""
    proc = __import__("subprocess").run([__import__("sys").executable, "-c", _FLUSH_THREADS, when],
                                        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["True", "0", str(1 << 20)]


def test_unit_from_params_round_trips_and_refuses_what_does_not():
    u = _unit(seed=3, pe="rope", residual=True)
    assert train.Unit.from_params(u.params()) == u
    with pytest.raises(ValueError, match="round-trip"):
        train.Unit.from_params({**u.params(), "test_seed": 1})


def test_sittings_record_whether_subnormals_were_flushed(tmp_path, monkeypatch):
    from posbias import store

    monkeypatch.setattr(store, "CACHE_DIR_ENV_DEFAULT", None, raising=False)
    st = {}
    orig = ck.save

    def keep(path, obj):
        st.update(obj)
        orig(path, obj)

    monkeypatch.setattr(ck, "save", keep)
    train.train_units([_unit(steps=2)], checkpoint_dir=tmp_path, progress=False, log=lambda s: None)
    assert st["sittings"][-1]["flush_denormal"] in (True, False)
    assert st["sittings"][-1]["flush_denormal"] == (__import__("platform").machine() in ("x86_64", "AMD64"))
