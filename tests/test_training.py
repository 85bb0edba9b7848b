"""posbias.training: campaigns expand to the stated units, profiles repeat the chapters, status and
progress read checkpoints, units round-trip."""
import ast
import dataclasses
import json

import jupytext
import pytest
import torch
from training_helpers import _sigterm_in_step, _unit

from posbias import training as train
from posbias.storage import provenance
from posbias.training import campaigns, engine, planning
from posbias.training import checkpoints as ck


def test_campaign_units_cover_the_figures():
    kw = dict(steps=10, seeds=[0, 1], eval_every=5, n_test=8, n_sweep=8, n_sink=8)
    f2 = train.units_of("wu-fig-2", "default", dict(**kw))
    assert len(f2) == 9 and all(len(v) == 2 for v in f2.values())
    assert {u.depth for us in f2.values() for u in us} == {2, 4, 6}
    f3 = train.units_of("wu-fig-3", "default", dict(**kw))
    assert all(u.target_slots == (0, 7) and u.config.residual for us in f3.values() for u in us)
    f4 = train.units_of("wu-fig-4", "default", dict(**kw))
    assert {u.target_slots for us in f4.values() for u in us} == {(0,), (4,), (7,)}
    f6 = train.units_of("wu-fig-6", "default", dict(**kw, windows=[4], prefixes=[2, 4]))
    assert set(f6) == {"causal", "window|4", "prefix|2", "prefix|4"}
    # the fig-5 unit is the fig-2 depth-2 No PE unit: trained once, shared
    assert train.units_of("wu-fig-5", "default", dict(**kw))["causal|none"][0] == f2["No PE|2"][0]


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
    from posbias.book import chapters, cost

    monkeypatch.setenv("POSBIAS_CACHE", str(tmp_path))
    monkeypatch.delenv("POSBIAS_WRITE_DATA", raising=False)
    kw = dict(steps=4, seeds=[0], eval_every=2, n_test=8, n_sweep=8, n_sink=8, depth=2)
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
    params = fig5.resolve("smoke", kw)
    assert cost.estimate(fig5, params).units_stored == 0
    r2 = train.run_campaign("wu-fig-5", "smoke", progress=False, log=lambda s: None, **kw)

    def timeless(res):
        return {k: [{f: x for f, x in v.items() if "seconds" not in f} for v in vs] for k, vs in res.items()}

    assert timeless(r2) == timeless(r)
    assert train.campaign_status("wu-fig-5", "smoke", **kw).stored == 1


class _Recorder:
    """Stands in for ``posbias.training`` in a notebook's campaign call and records what it asks for."""

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


def _units_of(chapter, profile, overrides):
    return train.units_of(chapter, profile, overrides)


from posbias.book.chapters import chapter_ids, get_chapter  # noqa: E402
from posbias.trained import trained_chapters  # noqa: E402


@pytest.mark.parametrize("chapter", chapter_ids())
def test_chapter_campaigns_match_the_notebooks(chapter):
    """``posbias campaign`` trains what the notebook reads: the registry and the notebook's call agree."""
    for profile in get_chapter(chapter).profile_names():
        params = get_chapter(chapter).resolve(profile)
        calls = _campaign_calls(chapter, params)
        if chapter not in trained_chapters():
            assert calls == [], f"{chapter} trains networks: declare them in posbias/trained/"
            continue
        assert len(calls) == 1, calls
        assert _units_of(*calls[0]) == _units_of(*train.chapter_campaign(chapter, params)), (chapter, profile)


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
    assert _interrupted_rope(tmp_path, monkeypatch)[0] == kw
    rope = next(r for r in status().ensembles if r.pe == "rope")
    assert (rope.step, rope.steps, rope.members) == (3, 4, 2) and rope.wall > 0 and rope.age >= 0
    assert rope.sitting_pace == pytest.approx(rope.wall / 3)      # one sitting, from step 0
    assert "depth 2, causal mask, rope PE, 2 units: step 3/4 (75.0%)" in train.format_status(status())
    train.run_campaign("wu-fig-2", "smoke", progress=False, log=lambda s: None, **kw)
    assert status() == train.CampaignStatus(units=6, stored=6, ensembles=[])


def test_a_sitting_pace_reads_back_until_it_holds_enough_steps():
    from posbias.training.status import PACE_STEPS, Segment, recent
    long, slow_start = Segment("cpu", 40_000, 1_000.0), Segment("cpu", 200, 100.0)
    assert recent([long, slow_start]) == Segment("cpu", 40_200, 1_100.0)      # not 0.5 s/step alone
    assert recent([slow_start, long]) == long                                 # the latest holds enough
    assert recent([Segment("cpu", PACE_STEPS, 50.0), Segment("cpu", 1, 1.0)]).steps == PACE_STEPS + 1
    assert recent([Segment("cpu", 3, 3.0)]) == Segment("cpu", 3, 3.0) and recent([]) is None
    assert recent([long, slow_start], min_steps=1) == slow_start


def test_format_status_projects_at_the_latest_sittings_pace():
    row = dict(depth=6, masks="", pe="none", members=10, steps=100_000, step=20_000, wall=4_000.0, age=5.0)
    text = train.format_status(train.CampaignStatus(45, 20, [train.EnsembleStatus(**row, sitting_pace=0.36)]))
    assert "200 ms/step over all sittings, 360 ms/step in the latest, about 8.0 h to go at the latest pace" in text
    paced = train.format_status(train.CampaignStatus(45, 20, [train.EnsembleStatus(**row, sitting_pace=0.36,
                                                                                paced_steps=6_200)]))
    assert "360 ms/step in the latest 6,200 steps, about 8.0 h to go at the latest pace" in paced
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


def test_status_reads_the_stopping_rule_on_a_rule_stopped_checkpoint():
    """A unit trained until a rule holds: its status line says how far each part is from holding at its
    last evaluation, read from the checkpoint's curves (one list per evaluation, one member)."""
    from posbias.measures import convergence as cv
    from posbias.training import status as status_mod
    kw = dict(steps=500_000, seeds=[2], eval_every=5000, n_test=10_000, n_sweep=8, n_sink=8, configs=["RoPE|6"])
    (u,) = train.units_of("wu-bias-over-training", "default", dict(stop_rule="plateau-50k", **kw))["RoPE|6"]
    steps = list(range(0, 150_001, 5000))
    curves = {"step": steps, "loss": [[1.0 - 0.02 * s / 50_000] for s in steps]}
    for a, b in (("first", "middle"), ("middle", "first"), ("middle", "last"), ("last", "middle"),
                 ("first", "last"), ("last", "first")):
        curves[f"IC_{a}_{b}"] = [[0.5]] * len(steps)
    text = status_mod._reading({"curves": curves}, u)
    flat = cv.member_curves(curves)
    assert text == cv.describe_reading(cv.rule_reading(flat, 10_000, cv.PLATEAU), cv.PLATEAU, 150_000)
    assert "first-last +0.0" in text and "the loss -2.1%" in text      # -0.02 / 0.94
    fixed = dataclasses.replace(u, stop_rule=None)
    assert status_mod._reading({"curves": curves}, fixed) is None and status_mod._reading({}, u) is None
    row = dict(depth=6, masks="causal", pe="rope", members=1, steps=500_000, step=150_886, wall=4_000.0, age=5.0)
    lines = train.format_status(train.CampaignStatus(35, 12, [train.EnsembleStatus(**row, reading=text)]))
    assert lines.splitlines()[-1] == "    stopping rule: " + text


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
    assert [f.name for f in dataclasses.fields(took)] == ["seconds", "ensembles", "gpu_seconds"]
    assert took == train.TrainingTime(seconds=247.0, ensembles=5) and took.hours == 247.0 / 3600
    with pytest.raises(dataclasses.FrozenInstanceError):
        took.seconds = 0.0
    none = train.training_time([])
    assert (none.seconds, none.ensembles, none.hours) == (0.0, 0, 0.0) and isinstance(none.seconds, float)


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
    (u,) = train.units_of("wu-fig-5", "default", dict(**kw))["causal|none"]
    (result,) = train.train_units([u], progress=False, log=lambda s: None)
    num = {"cpu_capability": "AVX512", "torch_threads": 1, "flush_denormal": True, "engine": "v2"}
    gpu = {"device": "cuda", "device_name": "NVIDIA H100 80GB HBM3", "torch_threads": 1, "from_step": 0,
           "numerics": num}
    campaigns.store_unit(u, result, [gpu])
    assert train.stored_campaign("wu-fig-5", "smoke", **kw) == {"causal|none": [result]}
    (rec,) = [json.loads(p.read_text()) for p in (tmp_path / "wu-units").glob("*.json")]
    assert rec["provenance"]["device"] == "cuda" and rec["provenance"]["device_name"].startswith("NVIDIA")
    assert "_device" not in rec["params"] and rec["provenance"]["sittings"] == [gpu]
    assert rec["provenance"]["numerics"] == num and rec["provenance"]["numerics_uniform"] is True


def test_a_unit_trained_under_two_kernel_sets_says_its_numerics_are_not_uniform(tmp_path, monkeypatch):
    """A unit resumed on a host of another kind says its numerics were mixed, lists both, and says they were
    not the same throughout (its bits are reproduced by neither host alone); its summary is its sittings'
    (issue 95), never the storing process's: nothing the sittings do not record is claimed."""
    monkeypatch.setenv("POSBIAS_CACHE", str(tmp_path))
    monkeypatch.delenv("POSBIAS_WRITE_DATA", raising=False)
    kw = dict(steps=2, seeds=[0], eval_every=1, n_test=8, n_sweep=8, n_sink=8)
    (u,) = train.units_of("wu-fig-5", "default", dict(**kw))["causal|none"]
    (result,) = train.train_units([u], progress=False, log=lambda s: None)
    num = {"cpu_capability": "AVX2", "torch_threads": 1, "flush_denormal": True, "engine": "v2"}
    first, second = {"from_step": 0, "numerics": num}, {"from_step": 1, "numerics": {**num, "cpu_capability": "AVX512"}}
    campaigns.store_unit(u, result, [first, second])
    (rec,) = [json.loads(p.read_text()) for p in (tmp_path / "wu-units").glob("*.json")]
    assert rec["provenance"]["numerics"] == "mixed" and rec["provenance"]["mixed"]["numerics"] == [
        first["numerics"], second["numerics"]]
    assert rec["provenance"]["numerics_uniform"] is False
    assert rec["provenance"]["python"] is None and rec["provenance"]["git"] == {}   # the sittings record neither
    assert provenance.summary_contradictions(rec["provenance"])[0][0] == "git.commit"  # ... nor why no commit
    for f in (tmp_path / "wu-units").glob("*.json"):
        f.unlink()
    campaigns.store_unit(u, result, [{"from_step": 0}])     # a sitting from before numerics were recorded
    (rec,) = [json.loads(p.read_text()) for p in (tmp_path / "wu-units").glob("*.json")]
    assert rec["provenance"]["numerics"] is None and rec["provenance"]["numerics_uniform"] is None


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


def test_unit_from_params_round_trips_and_refuses_what_does_not():
    u = _unit(seed=3, pe="rope", residual=True)
    assert train.Unit.from_params(u.params()) == u
    assert train.Unit.from_params({**u.params(), "test_seed": 1}).test_seed == 1     # a test draw is a field
    with pytest.raises(ValueError, match="round-trip"):
        train.Unit.from_params({**u.params(), "retired_field": 1})


def test_segments_split_a_checkpoints_training_by_device():
    """Each sitting runs from its own start to the next's; the training before the first recorded
    sitting ran on the CPU; a sitting on ``cuda`` or ``cuda:1`` is a GPU's."""
    from posbias.training.status import Segment, kind, segments

    assert [kind(d) for d in ("cpu", "cuda", "cuda:1", None)] == ["cpu", "gpu", "gpu", "cpu"]
    sit = [{"device": "cpu", "from_step": 0, "from_wall": 0.0},
           {"device": "cuda", "from_step": 100, "from_wall": 50.0},
           {"device": "cpu", "from_step": 400, "from_wall": 80.0}]
    assert segments(sit, 450, 110.0) == [Segment("cpu", 100, 50.0), Segment("gpu", 300, 30.0),
                                         Segment("cpu", 50, 30.0)]
    older = [{"device": "cpu"}, {"device": "cuda", "from_step": 200, "from_wall": 90.0}]
    assert segments(older, 260, 96.0) == [Segment("cpu", 200, 90.0), Segment("gpu", 60, 6.0)]
    assert segments([], 30, 12.0) == [Segment("cpu", 30, 12.0)]
    # a sitting that names no device ran on the checkpoint's own
    bare = [{"from_step": 0, "from_wall": 0.0}, {"device": "cpu", "from_step": 10, "from_wall": 5.0}]
    assert segments(bare, 20, 9.0, "cuda") == [Segment("gpu", 10, 5.0), Segment("cpu", 10, 4.0)]
    assert segments(bare, 20, 9.0) == [Segment("cpu", 10, 5.0), Segment("cpu", 10, 4.0)]


def test_status_prices_on_the_cpu_what_a_gpu_trained():
    """Paces count only the sittings on the kind of device they are for: an ensemble partly trained
    on a GPU names those steps and projects at its CPU pace; one trained only on a GPU has no CPU pace
    of its own and is priced as one not started (at its depth's CPU pace, else at the cost model)."""
    from posbias.training import status as status_mod

    row = dict(depth=6, masks="", pe="none", members=5, steps=100_000, age=5.0)
    part = train.EnsembleStatus(**row, step=40_000, wall=1_600.0, gpu_steps=20_000, gpu_wall=600.0,
                                sitting_pace=0.06)
    assert (part.own_steps, part.own_wall) == (20_000, 1_000.0)
    gpu_only = train.EnsembleStatus(**row, step=20_000, wall=520.0, gpu_steps=20_000, gpu_wall=520.0)
    text = train.format_status(train.CampaignStatus(45, 20, [part, gpu_only]), model=lambda d: 0.02)
    first, second = text.splitlines()[1:]
    assert ("step 40000/100000 (40.0%), 20000 of them on a GPU, 50 ms/step over its sittings on the CPU, "
            "60 ms/step in the latest, about 60 min to go at the latest pace") in first
    assert ("step 20000/100000 (20.0%), 20000 of them on a GPU, about 80 min to go on the CPU at the pace per "
            "network of the started depth-6 ensembles") in second            # 5 x 80,000 x 0.06 / 5 s
    alone = train.format_status(train.CampaignStatus(45, 20, [gpu_only]), model=lambda d: 0.02)
    assert ("about 2.2 h to go on the CPU at the chapter's cost model (20 ms per network-step on one core)"
            in alone)                                                        # 5 x 80,000 x 0.02 s
    assert [e for e in status_mod.measured(train.CampaignStatus(45, 20, [part, gpu_only]))] == [part]
    assert status_mod.network_pace(train.CampaignStatus(45, 20, [part, gpu_only])) == {6: 0.06 / 5}
    on_gpu = dataclasses.replace(gpu_only, on="gpu", sitting_pace=0.026)
    assert "about 35 min to go at the latest pace" in train.format_status(train.CampaignStatus(45, 20, [on_gpu]))
    with pytest.raises(ValueError, match="give 'cpu' or 'gpu'"):
        train.campaign_status("wu-fig-2", "smoke", on="tpu")


def test_training_time_says_which_seconds_ran_on_a_gpu():
    """With each result's sittings, the GPU's share of every ensemble counts once, cut at splits as
    the wall time is: before the split into the larger ensemble, after it into its part."""
    def r(seconds, splits=()):
        return {"params": {"depth": 2, "steps": 100}, "ensemble_size": 2, "train_seconds_ensemble": seconds,
                "splits": list(splits)}

    sit = [{"device": "cpu", "from_step": 0, "from_wall": 0.0}, {"device": "cuda", "from_step": 10, "from_wall": 20.0},
           {"device": "cpu", "from_step": 60, "from_wall": 45.0}]
    cut = {"key": "four", "members": 4, "step": 30, "wall": 30.0}
    prov = {"device": "cpu", "sittings": sit}
    took = train.training_time([r(100.0), r(100.0), r(80.0, [cut])], [prov, prov, prov])
    # the whole ensemble: GPU from 20 s to 45 s; the split part: 20-30 s before the cut, 30-45 s after
    assert took == train.TrainingTime(seconds=180.0, ensembles=3, gpu_seconds=25.0 + 10.0 + 15.0)
    assert train.training_time([r(100.0)], [None]).gpu_seconds == 0.0
    assert train.training_time([r(100.0)]).gpu_seconds == 0.0
    # a sitting that names no device ran on the record's: a GPU record's unnamed sitting is the GPU's
    bare = [{"from_step": 0, "from_wall": 0.0}]
    assert train.training_time([r(100.0)], [{"device": "cuda:0", "sittings": bare}]).gpu_seconds == 100.0
    assert train.training_time([r(100.0)], [{"device": "cpu", "sittings": bare}]).gpu_seconds == 0.0


def _interrupted_rope(tmp_path, monkeypatch):
    """Figure 2's smoke RoPE | 2 ensemble stopped by SIGTERM in its third step, in a cache of its own:
    the campaign's overrides and the path of its checkpoint's state."""
    monkeypatch.setenv("POSBIAS_CACHE", str(tmp_path))
    monkeypatch.delenv("POSBIAS_WRITE_DATA", raising=False)
    kw = dict(steps=4, seeds=[0, 1], eval_every=2, n_test=8, n_sweep=8, n_sink=8, depths=[2])
    (part,) = planning.ensembles(train.units_of("wu-fig-2", "smoke", kw)["RoPE|2"], 64)
    with monkeypatch.context() as m:
        _sigterm_in_step(m)
        with pytest.raises(train.Interrupted):
            train.train_units(part, checkpoint_dir=ck.checkpoint_of(part), progress=False, log=lambda s: None)
    path = ck.checkpoint_of(part) / "state.pt"
    return kw, path


def test_campaign_status_reads_the_device_of_each_sitting(tmp_path, monkeypatch):
    """A checkpoint whose sittings say a GPU trained it: read on the CPU, its steps and seconds are the
    GPU's and it has no CPU pace; read for a GPU, its pace is that sitting's."""
    kw, path = _interrupted_rope(tmp_path, monkeypatch)
    st = torch.load(path, weights_only=False)
    st["sittings"] = [{**s, "device": "cuda"} for s in st["sittings"]]
    ck.save(path, st)

    def rope(on):
        return next(r for r in train.campaign_status("wu-fig-2", "smoke", on=on, **kw).ensembles if r.pe == "rope")

    cpu, gpu = rope("cpu"), rope("gpu")
    assert (cpu.step, cpu.gpu_steps, cpu.own_steps, cpu.sitting_pace) == (3, 3, 0, None)
    assert cpu.gpu_wall == pytest.approx(cpu.wall) and cpu.own_wall == pytest.approx(0.0)
    assert gpu.own_steps == 3 and gpu.sitting_pace == pytest.approx(gpu.wall / 3)


def test_campaign_status_reads_a_short_latest_sitting_with_the_ones_before(tmp_path, monkeypatch):
    """A sitting of one step after one of two: the pace is over both (fewer than PACE_STEPS in all)."""
    kw, path = _interrupted_rope(tmp_path, monkeypatch)
    st = torch.load(path, weights_only=False)
    wall = float(st["wall"])
    st["sittings"] = [{**st["sittings"][0], "from_step": 0, "from_wall": 0.0},
                      {**st["sittings"][0], "from_step": 2, "from_wall": wall / 10}]
    ck.save(path, st)
    rope = next(r for r in train.campaign_status("wu-fig-2", "smoke", **kw).ensembles if r.pe == "rope")
    assert rope.step == 3 and rope.paced_steps == 3
    assert rope.sitting_pace == pytest.approx(wall / 3)        # the latest sitting alone: 0.9 * wall per step
