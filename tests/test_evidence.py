"""posbias.analysis.evidence: what a figure is made of, read from the files it draws."""
import json

import pytest

from posbias.storage import store
from posbias.analysis import evidence
from posbias.training.campaigns import stored_campaign


def _unit_file(tmp_path, name, **params):
    base = {"depth": 2, "seed": 0, "steps": 100, "n_test": 64, "n_sweep": 32, "n_sink": 32, "test_seed": 20250201}
    path = tmp_path / name
    path.write_text(json.dumps({"experiment": "wu-units", "params": {**base, **params}, "result": {}}))
    return {"path": str(path), "sha256": store.file_hash(path)}


def test_settings_name_a_mix_and_a_design_apart(tmp_path):
    """Two networks trained 100 and 200 iterations are a mix; seeds and depths are the design."""
    files = [_unit_file(tmp_path, "a.json", seed=0, depth=2), _unit_file(tmp_path, "b.json", seed=1, steps=200,
                                                                          depth=4),
             _unit_file(tmp_path, "c.json", seed=2)]
    s = evidence.settings(files)
    assert s["wu-units"]["records"] == 3 and s["wu-units"]["params"]["steps"] == ["100", "200"]
    words = evidence.describe(s)
    assert words.startswith("3 trained networks: iterations mixed: 100 or 200; seeds 0-2; 64 test sequences per set")
    assert "2, 4 layers" in words and "test draw 20250201;" in words and "(mixed)" not in words
    one = evidence.describe(evidence.settings(files[:1]))
    assert one.startswith("1 trained network: 100 iterations; seed 0;")


def test_the_list_hash_depends_on_the_files_not_their_order(tmp_path):
    a, b = _unit_file(tmp_path, "a.json"), _unit_file(tmp_path, "b.json", seed=1)
    assert evidence.list_hash([a, b]) == evidence.list_hash([b, a]) != evidence.list_hash([a])
    changed = dict(b, sha256="0" * 64)
    assert evidence.list_hash([a, changed]) != evidence.list_hash([a, b])


def test_committed_results_are_named_by_their_files_in_data():
    paper = stored_campaign("wu-fig-2", "paper", depths=[2])
    files = evidence.data_files(paper)
    assert len(files) == 15 and all(f["path"].startswith("data/wu-units/") for f in files)
    assert all(f["sha256"] == store.file_hash(store.DATA / f["path"][len("data/"):]) for f in files)
    assert evidence.data_files({"x": paper, "again": paper["No PE|2"], "none": [None]}) == files  # each once
    rec = evidence.record(files)
    assert rec["files"] == 15 and rec["words"].startswith("15 trained networks: 100,000 iterations; seeds 0-4; "
                                                          "10,000 test sequences per set")
    assert evidence.record([]) is None


def test_a_cached_file_is_published_without_the_machines_path(tmp_path, monkeypatch):
    monkeypatch.setenv("POSBIAS_CACHE", str(tmp_path))
    f = _unit_file(tmp_path, "x.json")
    (out,) = evidence.portable([dict(f, source="cache")])
    assert out == {"path": "<cache>/x.json", "sha256": f["sha256"]}
    assert evidence.settings([out])["wu-units"]["records"] == 1          # read back through the prefix


def test_a_result_whose_file_is_gone_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("POSBIAS_CACHE", str(tmp_path))
    ghost = {"params": {"depth": 2, "seed": 99, "steps": 1}}
    with pytest.raises(FileNotFoundError, match="neither in data/ nor in the cache"):
        evidence.data_files([ghost])
