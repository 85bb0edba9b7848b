"""The benchmark scripts run and report what they say (their timings are not asserted: benchmarks, not tests)."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))
import train_throughput as tt  # noqa: E402


def _rows(config, pairs):
    return [{"config": config, "seed": s, "fp32": {"g": f}, "bf16": {"g": b}} for s, (f, b) in enumerate(pairs)]


def test_bf16_gap_summary_flags_a_paired_shift_beyond_two_standard_errors():
    same = tt.bf16_gap_summary(_rows("causal/none", [(0.1, 0.1), (0.3, 0.3), (-0.2, -0.2)]))
    assert [(r["diff_mean"], r["diff_se"], r["changed"]) for r in same] == [(0.0, 0.0, False)]
    shifted = tt.bf16_gap_summary(_rows("causal/rope", [(0.10, 0.15), (0.30, 0.36), (-0.20, -0.16)]))
    (r,) = shifted
    assert r["changed"] and r["diff_mean"] == pytest.approx(0.05) and r["seeds"] == 3
    noisy = tt.bf16_gap_summary(_rows("decay/none", [(0.1, 0.3), (0.3, 0.1), (0.0, 0.05)]))
    assert not noisy[0]["changed"]          # a mean shift of 0.017 against paired differences of +-0.2


def test_throughput_benchmark_runs_and_writes_its_report(tmp_path):
    out = tmp_path / "bench.json"
    proc = subprocess.run([sys.executable, str(BENCH / "train_throughput.py"), "--depths", "2", "--steps", "2",
                           "--seeds", "1", "--json", str(out)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    rep = json.loads(out.read_text())
    row = rep["depths"]["2"]
    assert row["members"] == 3 and set(row["ensembles"]) == {"none", "rope"}
    assert 0 < row["fraction_of_fp32_peak"] and rep["fp32_matmul_peak_gflops"] > 0
    assert "Figure 2 at paper settings" in proc.stdout
    prov = rep["provenance"]
    assert rep["argv"][:2] == ["--depths", "2"] and prov["wall_seconds"] > 0 and "commit" in prov["git"] and prov["cpu"]


def test_denormals_benchmark_times_both_ways_and_compares_the_states(tmp_path):
    out = tmp_path / "denormals.json"
    ckpt = Path(__file__).parent / "data" / "rope-step-35729.pt"
    proc = subprocess.run([sys.executable, str(BENCH / "denormals.py"), str(ckpt), "--steps", "3", "--rounds", "1",
                           "--json", str(out)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    rep = json.loads(out.read_text())
    assert rep["from_step"] == 35729 and rep["identical"] is True and rep["speedup"] > 0
    assert len(rep["off_step_s"]) == len(rep["on_step_s"]) == 1
    assert rep["subnormal_entries"]["adam_state"][0] > 0 and rep["provenance"]["wall_seconds"] > 0
    assert "identical both ways" in proc.stdout


def test_campaign_throughput_benchmark_runs_the_four_modes(tmp_path):
    out = tmp_path / "campaign.json"
    proc = subprocess.run([sys.executable, str(BENCH / "campaign_throughput.py"), "--steps", "2", "--seeds", "1",
                           "--rounds", "1", "--json", str(out)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    rep = json.loads(out.read_text())
    assert [r["mode"] for r in rep["runs"]] == ["process", "1 worker", "2 workers", "1 worker x 2 threads"]
    assert all(r["units"] == 7 and r["wall_seconds"] > 0 for r in rep["runs"])
    assert rep["two_workers_over_one"] > 0 and "2 workers / 1 worker" in proc.stdout and rep["provenance"]["git"]
    assert rep["two_workers_over_one_of_two_threads"] > 0 and "2 workers / 1 worker x 2 threads" in proc.stdout


def test_throughput_benchmark_compares_the_engines_on_the_same_weights_and_batches(tmp_path):
    out = tmp_path / "engines.json"
    proc = subprocess.run([sys.executable, str(BENCH / "train_throughput.py"), "--depths", "2", "--steps", "2",
                           "--engines", "1", "--equivalence", "3", "--sizes", "2", "--json", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    rep = json.loads(out.read_text())
    packs = rep["engines"]["2"]
    assert set(packs) == {"none x10", "rope x5", "decay alone", "No PE x2"}
    for row in packs.values():
        assert set(row["ms_per_member_step"]) == {"v2", "v3"} and row["ratio_to_v2"]["v2"] == 1.0
        assert all(v > 0 for v in row["fraction_of_fp32_peak"].values())
    eq = rep["equivalence"]
    assert set(eq) == {"none", "rope"} and all(e["steps"] == 3 and e["max_ulps"] <= 4 for e in eq.values())
    assert eq["none"]["final_loss_v2"] == pytest.approx(eq["none"]["final_loss_v3"], rel=1e-6)
    assert rep["depths"] == {} and "ms/member-step" in proc.stdout and rep["provenance"]["numerics"]


def test_kernel_repro_compares_every_evaluation_and_finds_the_first_difference():
    import kernel_repro as kr

    stored = {"step": [0, 5000, 10000, 15000], **{c: [1.0, 0.9, 0.8, 0.7] for c in kr.CURVES}}
    same = {"step": [0, 5000, 10000], **{c: [1.0, 0.9, 0.8] for c in kr.CURVES}}
    assert kr.compare(same, stored, 10_000) == {"evaluations": 3, "identical": 3, "first_difference_at": None,
                                               "max_abs_difference": 0.0, "bitwise": True}
    off = {**same, "IC_last_middle": [1.0, 0.9, 0.8 + 2 ** -20]}      # one accuracy, one evaluation, one ulp-ish
    got = kr.compare(off, stored, 10_000)
    assert not got["bitwise"] and got["identical"] == 2 and got["first_difference_at"] == 10_000
    assert got["max_abs_difference"] == pytest.approx(2 ** -20)
    with pytest.raises(ValueError, match="no evaluation at"):
        kr.compare(same, stored, 15_000)
    a = {"depth": 2, "seed": 0, "steps": 100_000}
    assert kr.same_network(a, {**a, "steps": 500_000, "stop_rule": "plateau-50k"})
    assert not kr.same_network(a, {**a, "seed": 1})


def test_kernel_repro_runs_a_record_again_and_repeats_it_at_step_zero(tmp_path):
    out = tmp_path / "k.json"
    proc = subprocess.run([sys.executable, str(BENCH / "kernel_repro.py"), "--steps", "10", "--capabilities",
                           "default", "--json", str(out)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    rep = json.loads(out.read_text())
    assert [r["evaluations"] for r in rep["rows"]] == [1, 1] and all(r["bitwise"] for r in rep["rows"])
    assert rep["provenance"]["numerics"]["cpu_capability"]
