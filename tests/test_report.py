"""posbias.storage.report: what a chapter records for results.json."""
import json

import numpy as np
import pytest

from posbias.storage import report


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


def test_plain_table_is_the_styled_table_aligned():
    import pandas as pd

    from posbias.storage.report import plain_table

    df = pd.DataFrame({"chapter": ["wu-fig-2", "wu-fig-6"], "hours": [42.675, 2.94],
                       "networks": ["45 of 45", "5 of 35"]})
    assert plain_table(df.style.hide(axis="index").format(precision=1)).splitlines() == [
        "chapter   hours  networks",
        "wu-fig-2  42.7   45 of 45",
        "wu-fig-6  2.9    5 of 35"]
    indexed = plain_table(df.set_index("chapter").style.format("{:.3f}", subset=["hours"])).splitlines()
    assert indexed[2].split() == ["wu-fig-2", "42.675", "45", "of", "45"]


def test_a_styler_shows_its_table_not_its_address_in_a_kernel():
    """In an IPython shell with posbias.storage.report imported, a Styler's text/plain form is the table (what
    the PDF book prints), and its HTML form is unchanged."""
    import pandas as pd
    from IPython.core.interactiveshell import InteractiveShell

    from posbias.storage import report

    shell = InteractiveShell.instance()
    try:
        report._plain_styler_in_notebooks()
        styler = pd.DataFrame({"a": [1.25]}).style.format(precision=1).hide(axis="index")
        data, _ = shell.display_formatter.format(styler)
        assert data["text/plain"] == "a\n1.2" and "Styler at" not in data["text/plain"]
        assert "<table" in data["text/html"]
    finally:
        InteractiveShell.clear_instance()


def test_a_skipped_check_records_its_reason_and_passes_nothing(fresh, capsys):
    report.skipped("slope-sign", "not resolvable at 300 simulations")
    rec = json.loads((fresh / "_record.json").read_text())
    assert rec["values"]["slope-sign-skipped"] == "not resolvable at 300 simulations"
    assert rec["checks"] == [] and "SKIPPED slope-sign" in capsys.readouterr().out


class _Terminal:
    """A stderr that says it is a terminal, keeping what is written to it."""

    def __init__(self, tty: bool = True) -> None:
        self.tty, self.text = tty, []

    def isatty(self) -> bool:
        return self.tty

    def write(self, s: str) -> int:
        self.text.append(s)
        return len(s)

    def flush(self) -> None:
        pass


def _bar_text(monkeypatch, tty: bool, **env: str) -> str:
    for k in ("POSBIAS_RUN_DIR", "POSBIAS_NO_PROGRESS"):
        monkeypatch.delenv(k, raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    err = _Terminal(tty)
    monkeypatch.setattr("sys.stderr", err)
    assert list(report.progress(range(16), desc="(N, w)")) == list(range(16))
    bar = report.progress(total=3, desc="steps")
    bar.update(3)
    bar.close()
    return "".join(err.text)


def test_a_progress_bar_shows_on_a_terminal(monkeypatch):
    assert "16/16" in _bar_text(monkeypatch, tty=True)


@pytest.mark.parametrize("where", ["posbias run", "POSBIAS_NO_PROGRESS", "no terminal"])
def test_no_progress_bar_inside_a_run_or_without_a_terminal(monkeypatch, tmp_path, where):
    """A chapter run's notebook is a page of the book, a log is read later: neither gets bar text."""
    env = {"posbias run": {"POSBIAS_RUN_DIR": str(tmp_path)}, "POSBIAS_NO_PROGRESS": {"POSBIAS_NO_PROGRESS": "1"},
           "no terminal": {}}[where]
    assert _bar_text(monkeypatch, tty=where != "no terminal", **env) == ""



def test_human_seconds():
    assert [report.human_seconds(s) for s in (45, 720, 7200, 86400 * 3)] == ["45 s", "12 min", "2.0 h", "3.0 days"]
