"""`posbias check-data`: tampering is caught, a recomputation that differs is caught, real records reproduce.

Every test works on a copy of data/ in a temporary folder; the real data/ is never written.
"""
import copy
import dataclasses
import json
import shutil

import pytest
from provenance_helpers import CONTRADICTIONS, _consistent

from posbias.storage import parking, recompute, store
from posbias.book import checkdata
from posbias.storage.provenance import ROOT, unit_words


@pytest.fixture()
def data_copy(tmp_path, monkeypatch):
    data = tmp_path / "data"
    shutil.copytree(ROOT / "data", data)
    monkeypatch.setattr(store, "DATA", data)
    monkeypatch.setattr(store, "MANIFEST", data / "manifest.json")
    monkeypatch.setenv("POSBIAS_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("POSBIAS_WRITE_DATA", raising=False)
    monkeypatch.delenv("POSBIAS_RUN_DIR", raising=False)
    checkdata._import_registrations()
    return data


def _cheapest(data, experiment):
    spec = recompute.RECOMPUTE[experiment]
    recs = [(spec.estimate(json.loads(p.read_text())), p.name, p) for p in (data / experiment).glob("*.json")]
    return min(recs)[2]


def _row(rows, path, data):
    name = str(path.relative_to(data))
    return next(r for r in rows if r.file == name)


def test_every_experiment_is_registered_or_explained(data_copy):
    not_experiments = (parking.PARKED_DIR, checkdata.RECORDS_DIR)
    exps = {p.name for p in data_copy.iterdir() if p.is_dir() and p.name not in not_experiments}
    exps |= {p.name for p in (data_copy / parking.PARKED_DIR).glob("*") if p.is_dir()}    # what parked work is of
    assert exps, "data/ has no experiments"
    for exp in exps:
        assert exp in recompute.RECOMPUTE or exp in checkdata.NOT_RECOMPUTABLE, exp


def test_tampered_file_fails(data_copy, capsys):
    path = _cheapest(data_copy, "kim-sim")
    rec = json.loads(path.read_text())
    rec["result"]["sims"] += 1  # an edit that keeps valid JSON
    path.write_text(json.dumps(rec))
    assert checkdata.check_data(sample=0) != 0
    out = capsys.readouterr()
    assert "SHA-256 differs from the manifest" in out.err and path.name in out.err


def test_file_missing_from_manifest_fails(data_copy):
    manifest = json.loads((data_copy / "manifest.json").read_text())
    manifest.pop(next(iter(manifest)))
    (data_copy / "manifest.json").write_text(json.dumps(manifest))
    rows = checkdata.run_checks(sample=0, log=lambda *a: None)
    assert [r.verdict for r in rows if r.bad] == ["FAIL: not in data/manifest.json"]


def test_perturbed_recomputation_fails(data_copy, monkeypatch, capsys):
    path = _cheapest(data_copy, "kim-sim")
    stored = json.loads(path.read_text())["result"]

    def perturbed(params):
        out = json.loads(json.dumps(stored))
        out["attn_mean"][-1][-1][0] += 1e-9
        return out

    spec = recompute.RECOMPUTE["kim-sim"]
    monkeypatch.setitem(recompute.RECOMPUTE, "kim-sim",
                        recompute.Recompute(perturbed, spec.atol, spec.rtol, spec.ignore))
    code = checkdata.check_data(sample=1, experiments=["kim-sim"])
    assert code != 0
    assert "differs from the committed result" in capsys.readouterr().err
    rows = checkdata.run_checks(sample=1, experiments=["kim-sim"], log=lambda *a: None)
    row = _row(rows, path, data_copy)
    assert row.recomputed == "yes" and row.bad and row.max_abs == pytest.approx(1e-9, rel=1e-3)


def test_unperturbed_fake_recomputation_passes_and_ignores_timings(data_copy, monkeypatch):
    path = _cheapest(data_copy, "wu-units")
    stored = json.loads(path.read_text())["result"]
    fake = {**stored, "train_seconds_ensemble": 0.0, "ensemble_size": 1}
    spec = recompute.RECOMPUTE["wu-units"]
    monkeypatch.setitem(recompute.RECOMPUTE, "wu-units", recompute.Recompute(lambda p: fake, spec.atol, spec.rtol,
                                                                     spec.ignore, spec.cost))
    rows = checkdata.run_checks(sample=1, experiments=["wu-units"], log=lambda *a: None)
    row = _row(rows, path, data_copy)
    assert row.recomputed == "yes" and row.verdict == "ok" and row.max_abs == 0


def test_sample_is_cheapest_first_and_within_budget(data_copy, monkeypatch):
    calls = []
    for exp, spec in list(recompute.RECOMPUTE.items()):
        monkeypatch.setitem(recompute.RECOMPUTE, exp, recompute.Recompute(
            lambda p, exp=exp: calls.append(exp) or {}, spec.atol, spec.rtol, spec.ignore, spec.cost))
    rows = checkdata.run_checks(sample=2, budget_seconds=1e9, log=lambda *a: None)
    chosen = [r for r in rows if r.recomputed == "yes"]
    for exp in ("kim-sim", "wu-units"):
        mine = sorted((r for r in rows if r.experiment == exp and r.estimate is not None),
                      key=lambda r: (r.estimate, r.file))
        assert [r.file for r in chosen if r.experiment == exp] == sorted(r.file for r in mine[:2])
    rows = checkdata.run_checks(sample=2, budget_seconds=0.0, log=lambda *a: None)
    assert not any(r.recomputed == "yes" for r in rows) and any(r.recomputed == "budget" for r in rows)


def test_compare_tolerance_and_shape():
    assert checkdata.compare({"a": [1.0, float("nan")]}, {"a": [1.0, float("nan")]}).ok
    assert not checkdata.compare({"a": [1.0, 2.0]}, {"a": [1.0]}).ok
    assert not checkdata.compare({"a": 1.0}, {"a": 1.0, "b": 2}).ok
    c = checkdata.compare({"a": 1.0 + 1e-7}, {"a": 1.0}, atol=1e-6)
    assert c.ok and c.max_abs == pytest.approx(1e-7)
    assert not checkdata.compare({"a": 1.0 + 1e-7}, {"a": 1.0}).ok
    assert checkdata.compare({"a": 1.0, "t": 5.0}, {"a": 1.0, "t": 3.0}, ignore=("t",)).ok
    extra = checkdata.compare({"a": 1.0, "new": [0.0]}, {"a": 1.0})
    assert extra.ok and "new" in extra.notes[0]


@pytest.mark.parametrize("experiment", ["kim-sim", "wu-units"])
def test_cheapest_record_reproduces(data_copy, experiment):
    """The committed code recomputes the cheapest committed record (a few seconds each)."""
    path = _cheapest(data_copy, experiment)
    rows = checkdata.run_checks(sample=1, budget_seconds=60.0, experiments=[experiment], log=lambda *a: None)
    row = _row(rows, path, data_copy)
    assert row.recomputed == "yes", row
    assert row.verdict == "ok", (row.verdict, row.notes)
    assert not any(r.bad for r in rows)


@pytest.mark.parametrize("experiment, chapter", [("sinks-streaming", "streaming_chapter"),
                                                 ("lost-in-the-middle", "retrieval_chapter")])
def test_llm_chapters_recompute_through_their_library_function(data_copy, monkeypatch, experiment, chapter):
    """The registered recomputation is the function the chapter passes to store.cached, called with the
    stored parameters; the run's timings are not compared."""
    from posbias.llm import records

    assert experiment not in checkdata.NOT_RECOMPUTABLE
    spec = recompute.RECOMPUTE[experiment]
    assert {"wall_s", "peak_rss_mb"} <= set(spec.ignore) and spec.tolerance_note
    paths = sorted((data_copy / experiment).glob("*.json"))
    assert paths
    recs = {p: json.loads(p.read_text()) for p in paths}
    seen = []

    def fake(**kw):
        seen.append(kw)
        [rec] = [r for r in recs.values() if r["params"] == kw]
        return {**rec["result"], "wall_s": 0.0, "peak_rss_mb": 0.0}

    monkeypatch.setattr(records, chapter, fake)     # the module whose recomputation calls it
    rows = checkdata.run_checks(sample=len(paths), recompute_all=True, experiments=[experiment],
                                log=lambda *a: None)
    assert sorted(map(json.dumps, seen)) == sorted(json.dumps(r["params"]) for r in recs.values())
    for path in paths:
        row = _row(rows, path, data_copy)
        assert row.recomputed == "yes" and row.verdict == "ok" and row.max_abs == 0, (path.name, row)


def test_every_committed_kim_sim_record_has_first_mass():
    """first_mass (T, n): the mean rollout mass P(t)_{i1} on position 1, a probability; never NaN
    (records stored before the field existed were regenerated)."""
    import math

    paths = sorted((ROOT / "data" / "kim-sim").glob("*.json"))
    assert paths
    for path in paths:
        res = json.loads(path.read_text())["result"]
        fm = res.get("first_mass")
        assert fm is not None, path.name
        t, n = len(res["score_mean"]), len(res["score_mean"][0])
        assert len(fm) == t and all(len(row) == n for row in fm), path.name
        assert all(math.isfinite(x) and 0.0 <= x <= 1.0 + 1e-12 for row in fm for x in row), path.name
        assert all(abs(row[0] - 1.0) < 1e-12 for row in fm), path.name        # token 1 only sees itself


@pytest.mark.parametrize("recorded, verdict", [("this", "FAIL"), ("other", "ok"), (None, "ok"), ("gpu", "ok"),
                                               ("gpu, then this", "ok"), ("other, then this", "ok")])
def test_tolerance_is_exact_on_the_recording_cpu_and_wider_on_another(data_copy, monkeypatch, recorded, verdict):
    """A recomputation 0.01 off fails against a record made on this CPU (1e-6 absolute); against a record
    from another CPU, one whose provenance names none, or one trained on a GPU (the device is
    provenance, not identity: the CPU build reads it under the CPU key), it is within the stated 0.05
    and says why. Every sitting counts: a unit that began on a GPU or another CPU and finished on this
    one is not this CPU's bits."""
    from posbias.storage.provenance import cpu_info, sha256_file, with_summary

    path = _cheapest(data_copy, "wu-units")
    rec = json.loads(path.read_text())
    other = {**cpu_info(), "family": "0", "model_name": "Elsewhere"}
    cpu = {"this": cpu_info(), "other": other, None: None, "gpu": cpu_info()}.get(recorded, cpu_info())
    if recorded == "gpu":
        rec["provenance"].update(device="cuda", device_name="NVIDIA H100 80GB HBM3")
    rec["provenance"].pop("cpu", None)
    rec["provenance"].pop("sittings", None)
    if cpu is not None:
        rec["provenance"]["cpu"] = cpu
    if recorded and ", then this" in recorded:
        git = {"commit": "a" * 40, "dirty": False}
        first = ({"device": "cuda", "device_name": "NVIDIA H200", "cpu": other} if recorded.startswith("gpu")
                 else {"device": "cpu", "cpu": other})
        rec["provenance"] = with_summary(rec["provenance"], [{**first, "git": git},
                                                             {"device": "cpu", "cpu": cpu_info(), "git": git}])
    path.write_text(json.dumps(rec))
    manifest = json.loads((data_copy / "manifest.json").read_text())
    manifest[str(path.relative_to(data_copy))] = sha256_file(path)
    (data_copy / "manifest.json").write_text(json.dumps(manifest))
    off = {**rec["result"], "ic_accuracy": {k: v + 0.01 for k, v in rec["result"]["ic_accuracy"].items()}}
    monkeypatch.setitem(recompute.RECOMPUTE, "wu-units",
                        dataclasses.replace(recompute.RECOMPUTE["wu-units"], fn=lambda p: off))
    row = _row(checkdata.run_checks(sample=1, experiments=["wu-units"], log=lambda *a: None), path, data_copy)
    assert row.recomputed == "yes" and row.verdict.startswith(verdict), (row.verdict, row.notes)
    assert row.max_abs == pytest.approx(0.01)
    if recorded == "this":
        assert row.tolerance == "abs 1e-06" and not any("CPU" in n for n in row.notes)
    else:
        assert row.tolerance == "abs 0.05"
        want = {"other": "computed on another CPU (Elsewhere", None: "computed on a CPU its provenance does not name",
                "gpu": "computed on cuda (NVIDIA H100 80GB HBM3), recomputed on this CPU",
                "gpu, then this": "computed on cuda (NVIDIA H200) in 1 of its 2 sittings, recomputed on this CPU",
                "other, then this": "computed on another CPU (Elsewhere"}[recorded]
        assert recorded != "other, then this" or any(
            "in 1 of its 2 sittings: compared within abs 0.05" in n for n in row.notes), "|".join(row.notes)
        assert any(n.startswith(want) for n in row.notes), row.notes


def test_host_kinds_counts_the_committed_records_by_kind(tmp_path):
    amd = {"vendor": "AuthenticAMD", "torch_capability": "AVX512"}
    folder = tmp_path / "wu-units"
    folder.mkdir()
    provs = [{"sittings": [{"cpu": amd}]}, {"cpu": amd},
             {"sittings": [{"cpu": amd}, {"cpu": {**amd, "vendor": "x"}}]}, {}]
    for i, prov in enumerate(provs):
        (folder / f"{i}.json").write_text(json.dumps({"provenance": prov}))
    assert checkdata.host_kinds(data=tmp_path) == {"AuthenticAMD AVX512": 2, "mixed": 1, "not recorded": 1}
    assert sum(checkdata.host_kinds().values()) == len(list((store.DATA / "wu-units").glob("*.json")))


def test_kept_weights_are_tied_to_their_record(data_copy, monkeypatch):
    """Kept weights in data/ pass when listed and tied to a committed record; unlisted, naming another unit, or
    keeping a network with no committed record, they fail with a message naming the file."""
    import torch

    from posbias.training import campaigns, weights

    monkeypatch.setenv("POSBIAS_WRITE_DATA", "1")
    units = campaigns.units_of("wu-fig-2", "paper", {})
    unit, other = units["No PE|2"][0], units["RoPE|2"][0]
    path = weights.save(unit, {"w_q": torch.zeros(2)}, {"note": "test"})
    assert checkdata.verify_data(log=lambda *a: None) == []
    rows = checkdata.run_checks(sample=0, log=lambda *a: None)
    assert _row(rows, path, data_copy).recomputed == "weights"
    # metadata naming another unit than the file name's
    wrong = weights.save(other, {"w_q": torch.zeros(2)}, {"note": "test"})
    shutil.copy(wrong, path)
    manifest = json.loads((data_copy / "manifest.json").read_text())
    manifest[str(path.relative_to(data_copy))] = store.file_hash(path)
    (data_copy / "manifest.json").write_text(json.dumps(manifest))
    problems = checkdata.verify_data(log=lambda *a: None)
    assert problems == [f"{path.relative_to(data_copy)}: the unit in their metadata has the key "
                        f"{wrong.stem}, not their file name"]
    # unlisted
    manifest.pop(str(wrong.relative_to(data_copy)))
    (data_copy / "manifest.json").write_text(json.dumps(manifest))
    assert f"{wrong.relative_to(data_copy)}: not in data/manifest.json" in checkdata.verify_data(log=lambda *a: None)


def test_weights_kept_along_training_are_tied_to_their_folder_and_step(data_copy, monkeypatch):
    """Snapshots of the jump study (wu-jump/<run key>/<step>.safetensors) pass when their metadata name the unit,
    step and interval of their folder and file name; a snapshot moved to another step's name fails."""
    import torch

    from posbias.training import campaigns, snapshots

    monkeypatch.setenv("POSBIAS_WRITE_DATA", "1")
    unit = campaigns.units_of("wu-fig-2", "paper", {})["decay|2"][0]
    a = snapshots._save(unit, 25_000, 25_000, {"w_q": torch.zeros(2)})
    b = snapshots._save(unit, 25_000, 50_000, {"w_q": torch.ones(2)})
    assert _mine(checkdata.verify_data(log=lambda *a: None), a, data_copy) == []
    shutil.copy(a, b)                                        # step 25,000's weights under step 50,000's name
    manifest = json.loads((data_copy / "manifest.json").read_text())
    manifest[str(b.relative_to(data_copy))] = store.file_hash(b)
    (data_copy / "manifest.json").write_text(json.dumps(manifest))
    (problem,) = _mine(checkdata.verify_data(log=lambda *a: None), b, data_copy)
    assert "their step 25,000 is not their file name's" in problem
    assert _mine(checkdata.verify_data(log=lambda *a: None), a, data_copy) == []


# --------------------------------------------------------------------------- summaries (issue 95)

def _rewrite(data, path, rec):
    """Write ``rec`` over ``path`` in the store's form and list its new hash in the copy's manifest."""
    path.write_text(json.dumps(rec, sort_keys=True, separators=(",", ":")) + "\n")
    manifest = json.loads((data / "manifest.json").read_text())
    manifest[str(path.relative_to(data))] = store.file_hash(path)
    (data / "manifest.json").write_text(json.dumps(manifest))


def _mine(problems, path, data):
    return [p for p in problems if p.startswith(f"{path.relative_to(data)}: ")]


def test_every_committed_unit_summary_is_its_sittings():
    """The committed records (data/, not a copy): no summary contradicts its sittings and every sitting
    records its commit or says why (issue 95: 268 records did before they were mended)."""
    bad = {}
    for name in checkdata.result_files(store.DATA):
        rec = json.loads((store.DATA / name).read_text())
        if isinstance(rec.get("provenance"), dict) and (why := checkdata.summary_problem(rec)):
            bad[name] = why
    assert not bad, f"{len(bad)} records, e.g. {next(iter(bad.items()))}"


def test_check_data_fails_on_each_kind_of_contradicting_summary(data_copy):
    """A synthetic unit of mixed sittings (it began on a GPU, from a dirty tree, and finished on a CPU):
    with its summary derived from them it passes; with one field of the summary edited (each kind of
    contradiction in turn) check-data fails on it, naming the unit and the field, its hash still verifying."""
    path = _cheapest(data_copy, "wu-units")
    rec = json.loads(path.read_text())
    words = unit_words(rec["params"])
    consistent = _consistent(wall_seconds=rec["provenance"]["wall_seconds"])
    rec["provenance"] = consistent
    _rewrite(data_copy, path, rec)
    assert _mine(checkdata.verify_data(log=lambda *a: None), path, data_copy) == []
    for kind, (edit, field) in CONTRADICTIONS.items():      # the record's check, as verify_data makes it
        rec["provenance"] = copy.deepcopy(consistent)
        edit(rec["provenance"])
        problem = checkdata.summary_problem(rec)
        assert problem and problem.startswith(f"{checkdata.SUMMARY_PROBLEM} ({words}): "), (kind, problem)
        assert f" {field} " in problem, (kind, problem)
    for kind in ("device", "a sitting without a commit"):   # and through the files, end to end
        rec["provenance"] = copy.deepcopy(consistent)
        CONTRADICTIONS[kind][0](rec["provenance"])
        _rewrite(data_copy, path, rec)
        (problem,) = _mine(checkdata.verify_data(log=lambda *a: None), path, data_copy)
        assert problem == f"{path.relative_to(data_copy)}: {checkdata.summary_problem(rec)}"
    row = _row(checkdata.run_checks(sample=0, log=lambda *a: None), path, data_copy)
    assert row.bad and row.hash_ok and row.verdict == "FAIL: " + problem.split(": ", 1)[1]


def test_check_data_exit_status_and_message_name_the_unit_and_the_field(data_copy, capsys):
    path = _cheapest(data_copy, "wu-units")
    rec = json.loads(path.read_text())
    rec["provenance"] = {**_consistent(wall_seconds=rec["provenance"]["wall_seconds"]), "device": "cpu",
                         "numerics_uniform": True}           # what the 60 confirmation units said
    _rewrite(data_copy, path, rec)
    assert checkdata.check_data(sample=0) == 3
    err = capsys.readouterr().err
    line = next(x for x in err.splitlines() if path.name in x)
    assert unit_words(rec["params"]) in line
    assert "device says 'cpu', its sittings 'mixed' ['cuda', 'cpu']" in line
    assert "numerics_uniform says True, its sittings False" in line


def test_a_record_without_sittings_is_its_own_sitting_and_needs_its_commit_or_a_reason(data_copy):
    path = _cheapest(data_copy, "wu-units")
    rec = json.loads(path.read_text())
    rec["provenance"] = {**{k: v for k, v in rec["provenance"].items() if k not in ("sittings", "mixed")},
                         "git": {"commit": None, "dirty": None}}
    _rewrite(data_copy, path, rec)
    (problem,) = _mine(checkdata.verify_data(log=lambda *a: None), path, data_copy)
    assert "git.commit the record (its own sitting) records no commit and does not say why" in problem
    rec["provenance"]["git"]["commit_missing_reason"] = "fatal: not a git repository"
    _rewrite(data_copy, path, rec)
    assert _mine(checkdata.verify_data(log=lambda *a: None), path, data_copy) == []


def test_a_record_of_mixed_thread_counts_is_recomputed_with_its_last_sittings():
    from posbias.storage.provenance import record_threads

    assert record_threads({"torch_threads": 2}) == 2
    assert record_threads({"torch_threads": "mixed", "sittings": [{"torch_threads": 2}, {"torch_threads": 1}]}) == 1
    assert record_threads({}) is None
