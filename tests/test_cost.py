"""posbias.book.cost: the estimate a run prints first, and the refusals it leads to before any work."""
import io
from pathlib import Path

import pytest

from conftest import network_step_seconds
from posbias.book import accounting, cost, runner
from posbias.book.chapters import Chapter, ParamError, get_chapter


def _chapter(seconds: str, memory: str) -> Chapter:
    return Chapter("zz", Path("zz.md"), "zz", {}, {}, meta={"cost": {"seconds": seconds, "memory_mb": memory}})


def test_available_memory_is_read_from_meminfo(tmp_path):
    (tmp_path / "meminfo").write_text("MemTotal:  2048000 kB\nMemAvailable:   1048576 kB\n")
    assert cost.available_mb(tmp_path / "meminfo") == 1024.0
    assert cost.available_mb(tmp_path / "missing") is None
    assert cost.available_mb() is None or cost.available_mb() > 0


def test_training_counts_only_the_networks_not_stored(monkeypatch):
    """A trained chapter's estimate adds steps x network_step(depth) for each unit not stored, and none
    for the stored ones (wu-fig-5, smoke: one 2-layer network of 20 steps)."""
    from posbias.training import campaigns

    ch = get_chapter("wu-fig-5")
    params = ch.resolve("smoke")
    monkeypatch.setattr(campaigns, "stored", lambda u: False)
    fresh = cost.estimate(ch, params)
    step = cost._eval(ch, "network_step", {**params, "depth": 2})
    assert (fresh.units_stored, fresh.units) == (0, 1) and fresh.train_seconds == pytest.approx(20 * step)
    assert "training the 1 of 1 network not stored yet" in fresh.describe()
    monkeypatch.setattr(campaigns, "stored", lambda u: True)
    done = cost.estimate(ch, params)
    assert (done.units_stored, done.train_seconds) == (1, 0.0) and "all 1 network stored" in done.describe()
    assert done.seconds == pytest.approx(fresh.seconds - fresh.train_seconds)


def test_paper_settings_of_a_trained_chapter_are_estimated_in_hours(monkeypatch):
    from posbias.training import campaigns

    monkeypatch.setattr(campaigns, "stored", lambda u: False)
    est = cost.estimate(get_chapter("wu-fig-2"), get_chapter("wu-fig-2").resolve("paper"))
    # 45 networks x 100,000 steps at depths 2, 4, 6: tens of hours on one core (the campaign took 42.7 h)
    assert 20 * 3600 < est.seconds < 80 * 3600 and est.units == 45


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_a_long_run_asks_for_yes_on_a_terminal_and_runs_saying_so_elsewhere(monkeypatch, capsys):
    monkeypatch.setattr(cost, "available_mb", lambda: 1e9)
    long = _chapter("2 * 3600", "100")
    monkeypatch.setattr("sys.stdin", _Tty())
    with pytest.raises(ParamError, match="estimated 2.0 h on one CPU core; add --yes"):
        runner.gate_cost(long, {}, yes=False, quiet=False)
    assert "zz: estimated about 2.0 h" in capsys.readouterr().err           # the estimate comes first
    runner.gate_cost(long, {}, yes=True, quiet=True)
    monkeypatch.setattr("sys.stdin", io.StringIO())
    runner.gate_cost(long, {}, yes=False, quiet=True)
    assert "stdin is not a terminal, so running anyway" in capsys.readouterr().err
    runner.gate_cost(_chapter("60", "100"), {}, yes=False, quiet=True)       # short: nothing asked


def test_a_run_needing_more_memory_than_available_is_refused_even_with_yes(monkeypatch):
    monkeypatch.setattr(cost, "available_mb", lambda: 1000.0)
    with pytest.raises(ParamError, match="needs an estimated 4,000 MiB of memory.*more than the 1,000 MiB available"):
        runner.gate_cost(_chapter("1", "4000"), {}, yes=True, quiet=True)


def test_absurd_parameters_of_wu_thm_4_1_are_caught():
    """Issue 23's example: valid but absurd parameters are refused for memory before any work."""
    ch = get_chapter("wu-thm-4-1")
    est = cost.estimate(ch, ch.resolve("default", {"n_tokens": "2048", "depth": "2000", "samples": "256"}))
    assert est.memory_mb > 1e6 and est.seconds > 3600


def test_a_trained_chapter_counts_its_attention_maps_in_the_peak(monkeypatch):
    """Training ends by holding every member's attention maps on ``n_sink`` sequences: the estimate grows
    with n_sink as the largest ensemble's maps do (measured: ``wu-residual-depth`` with three seeds and
    n_sink 97,831 peaked at 13,980 MiB resident, estimated 14,721; the flat 700 it declares said 700)."""
    ch = get_chapter("wu-residual-depth")
    at = {n: cost.estimate(ch, ch.resolve("default", {"seeds": "[7001, 7002, 7003]", "n_sink": str(n)})).memory_mb
          for n in (49_999, 99_998)}
    extra = {n: m - 700 for n, m in at.items()}
    assert extra[49_999] > 5_000 and extra[99_998] == pytest.approx(2 * extra[49_999], rel=1e-9)
    monkeypatch.setattr(cost, "available_mb", lambda: 8000.0)
    with pytest.raises(ParamError, match="more than the 8,000 MiB available"):
        runner.gate_cost(ch, ch.resolve("default", {"seeds": "[7001, 7002, 7003]", "n_sink": "99998"}),
                         yes=True, quiet=True)
    smoke = cost.estimate(ch, ch.resolve("smoke", {}))
    assert smoke.memory_mb < 710                                  # 32 sequences: the maps are a few KiB


def test_campaign_cost_of_a_finished_campaign_is_its_measured_training_time():
    """Figure 2's paper campaign is committed: nothing to go, and the hours trained are the stored
    units' ensembles' wall times, each ensemble once."""
    from posbias import training as train

    c = accounting.campaign_cost("wu-fig-2")
    units = [u for us in train.stored_campaign("wu-fig-2", "paper").values() for u in us]
    assert c.units == c.stored == len(units) == 45 and c.ensembles == c.modelled == 0
    assert c.hours_to_go == 0.0
    assert c.hours_trained == pytest.approx(train.training_time(units).seconds / 3600) and c.hours_trained > 10


def test_network_step_is_the_chapters_model_per_depth():
    """``network_step`` evaluates the front matter's expression at a depth; a chapter that trains
    nothing has none."""
    model = cost.network_step(get_chapter("wu-fig-6"), {})
    assert model(4) == pytest.approx(network_step_seconds("wu-fig-6", 4))
    assert model(10) == pytest.approx(network_step_seconds("wu-fig-6", 10))
    assert 0 < model(2) < model(6) < model(10)                 # deeper networks cost more per step
    assert cost.network_step(get_chapter("wu-thm-4-1"), {}) is None


def test_campaign_cost_measures_started_ensembles_and_models_the_rest(monkeypatch):
    """An ensemble with a checkpoint counts its wall time as trained and its remaining steps at its
    latest pace; an ensemble not started, of a depth with no started ensemble, is priced by the
    chapter's network_step model."""
    from posbias import training
    from posbias.training.status import CampaignStatus, EnsembleStatus

    started = EnsembleStatus(2, "window", "none", 15, 100_000, step=40_000, wall=6000.0, sitting_pace=0.2)
    fresh = EnsembleStatus(4, "prefix", "none", 15, 100_000)
    monkeypatch.setattr(training, "campaign_status", lambda *a, **k: CampaignStatus(35, 5, [started, fresh]))
    monkeypatch.setattr(training, "stored_records", lambda *a, **k: {"x": [None]})
    c = accounting.campaign_cost("wu-fig-6")
    per_step = network_step_seconds("wu-fig-6", 4)   # wu-fig-6's front matter, at depth 4
    assert c.hours_trained == pytest.approx(6000.0 / 3600)
    assert c.hours_to_go == pytest.approx((60_000 * 0.2 + 15 * 100_000 * per_step) / 3600)
    assert (c.units, c.stored, c.ensembles, c.modelled, c.borrowed) == (35, 5, 2, 1, 0)


def test_ensembles_not_started_take_the_measured_pace_of_their_depth(monkeypatch):
    """Where the campaign has a started ensemble of the same depth, an ensemble not started is priced
    at its measured pace per network (the machine that trains it), not at the cost model; a depth
    with no measurement still takes the model."""
    from posbias import training
    from posbias.training.status import CampaignStatus, EnsembleStatus

    a = EnsembleStatus(2, "full/causal", "none", 15, 100_000, step=20_000, wall=2600.0, sitting_pace=0.12)
    b = EnsembleStatus(2, "full/causal", "sin", 15, 100_000, step=20_000, wall=2600.0, sitting_pace=0.15)
    fresh2 = EnsembleStatus(2, "full/causal", "rope", 30, 100_000)
    fresh6 = EnsembleStatus(6, "causal", "none", 5, 100_000)
    monkeypatch.setattr(training, "campaign_status",
                        lambda *a_, **k: CampaignStatus(90, 0, [a, b, fresh2, fresh6]))
    monkeypatch.setattr(training, "stored_records", lambda *a_, **k: {"x": [None]})
    c = accounting.campaign_cost("wu-fig-4")
    per_net = (0.12 / 15 + 0.15 / 15) / 2              # the depth-2 ensembles' pace per network and step
    model6 = network_step_seconds("wu-fig-4", 6)     # wu-fig-4's front matter, at depth 6
    assert c.hours_to_go == pytest.approx((80_000 * (0.12 + 0.15) + 30 * 100_000 * per_net
                                           + 5 * 100_000 * model6) / 3600)
    assert (c.ensembles, c.modelled, c.borrowed) == (4, 1, 1)
    monkeypatch.setattr(training, "campaign_status", lambda *a_, **k: CampaignStatus(90, 0, [a, b, fresh2]))
    c = accounting.campaign_cost("wu-fig-4")
    assert (c.modelled, c.borrowed) == (0, 1)
    monkeypatch.setattr(accounting, "campaign_cost", lambda ch, profile="paper": c)
    assert list(accounting.cost_frame(["wu-fig-4"])["to go from"]) == ["measured pace of each depth"]


def test_cost_frame_has_one_row_per_chapter_with_its_source_of_hours(monkeypatch):
    rows = {"wu-fig-2": accounting.CampaignCost("wu-fig-2", 45, 45, 42.7, 0.0, 0, 0),
            "wu-fig-6": accounting.CampaignCost("wu-fig-6", 35, 5, 3.0, 8.0, 2, 0),
            "wu-fig-3": accounting.CampaignCost("wu-fig-3", 30, 0, 0.0, 14.0, 3, 3),
            "wu-fig-4": accounting.CampaignCost("wu-fig-4", 90, 0, 0.0, 42.0, 3, 1)}
    monkeypatch.setattr(accounting, "campaign_cost", lambda ch, profile="paper": rows[ch])
    df = accounting.cost_frame(list(rows))
    assert list(df["chapter"]) == list(rows) and list(df["networks"]) == ["45 of 45", "5 of 35", "0 of 30", "0 of 90"]
    assert list(df["to go from"]) == ["-", "measured pace", "cost model", "measured pace and cost model"]
    assert list(df["hours to go"]) == [0.0, 8.0, 14.0, 42.0]
    assert "GPU hours" not in df.columns                  # no chapter trained on a GPU


def test_campaign_cost_keeps_a_gpus_hours_apart_from_the_cpus(monkeypatch):
    """Hours trained are the CPU's; what a GPU trained, in a stored unit's sittings or an unfinished
    ensemble's checkpoint, is counted in ``gpu_hours`` and shown in its own column; the hours to go
    price on the CPU an ensemble trained so far only on a GPU."""
    from posbias import training
    from posbias.training.status import CampaignStatus, EnsembleStatus

    mixed = EnsembleStatus(2, "window", "none", 5, 100_000, step=40_000, wall=1_000.0, gpu_steps=30_000,
                           gpu_wall=400.0, sitting_pace=0.05)
    gpu_only = EnsembleStatus(2, "prefix", "none", 5, 100_000, step=20_000, wall=500.0, gpu_steps=20_000,
                              gpu_wall=500.0)
    sit = [{"device": "cuda", "from_step": 0, "from_wall": 0.0}, {"device": "cpu", "from_step": 50, "from_wall": 90.0}]
    rec = {"result": {"params": {"depth": 2, "steps": 100}, "ensemble_size": 5, "train_seconds_ensemble": 300.0},
           "provenance": {"sittings": sit}}
    monkeypatch.setattr(training, "campaign_status", lambda *a, **k: CampaignStatus(35, 5, [mixed, gpu_only]))
    monkeypatch.setattr(training, "stored_records", lambda *a, **k: {"x": [rec, rec, None]})
    c = accounting.campaign_cost("wu-fig-6")
    assert c.hours_trained == pytest.approx((300.0 - 90.0 + 600.0) / 3600)       # the stored ensemble once
    assert c.gpu_hours == pytest.approx((90.0 + 400.0 + 500.0) / 3600)
    assert c.hours_to_go == pytest.approx((60_000 * 0.05 + 5 * 80_000 * 0.05 / 5) / 3600)
    assert (c.ensembles, c.modelled, c.borrowed) == (2, 0, 1)
    monkeypatch.setattr(accounting, "campaign_cost", lambda ch, profile="paper": c)
    df = accounting.cost_frame(["wu-fig-6"])
    assert list(df.columns) == ["chapter", "networks", "hours trained", "GPU hours", "hours to go", "to go from"]
    assert list(df["GPU hours"]) == [pytest.approx(990.0 / 3600)]
