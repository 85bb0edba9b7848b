"""posbias.report: what a chapter records for results.json."""
import json

import numpy as np
import pytest

from posbias import report


def test_check_is_recorded_with_its_verdict(fresh):
    report.check("a", "claim a", value=1.0, expected="< 2", passed=True)
    report.check("b", "claim b", value=3.0, expected="< 2", passed=False)
    rec = json.loads((fresh / "_record.json").read_text())
    assert [(c["name"], c["passed"]) for c in rec["checks"]] == [("a", True), ("b", False)]


def test_a_check_name_is_used_once(fresh):
    report.check("a", "claim", value=1, expected=1, passed=True)
    with pytest.raises(ValueError, match="recorded twice"):
        report.check("a", "claim", value=1, expected=1, passed=True)


def test_scalar_values_are_plain_numbers(fresh):
    assert type(report.value("x", np.float64(0.25))) is float
    assert type(report.value("n", np.int64(3))) is int
    rec = json.loads((fresh / "_record.json").read_text())
    assert rec["values"] == {"x": 0.25, "n": 3}


def test_a_file_computed_then_read_back_is_listed_once(fresh):
    report.note_data("data/x.json", "abc", "computed")
    report.note_data("data/x.json", "abc", "cache")
    report.note_data("data/x.json", "def", "cache")  # same path, new content: a different file
    rec = json.loads((fresh / "_record.json").read_text())
    assert rec["data"] == [{"path": "data/x.json", "sha256": "abc", "source": "computed"},
                           {"path": "data/x.json", "sha256": "def", "source": "cache"}]
