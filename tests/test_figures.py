"""posbias.figures: one style, and files that carry their provenance and are byte-identical."""
import json

import matplotlib.pyplot as plt
import pytest
from PIL import Image

from posbias import figures, report


@pytest.fixture
def run_dir(fresh, monkeypatch, tmp_path):
    monkeypatch.setenv("POSBIAS_CHAPTER", "wu-thm-4-1")
    monkeypatch.setenv("POSBIAS_PARAMS", json.dumps({"depth": 3}))
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    figures.style()
    return tmp_path


def _figure():
    fig, ax = plt.subplots()
    ax.plot([0, 1, 2], [1, 0.5, 0.25], label="mass on position 1")
    ax.legend()
    return fig


def test_save_writes_every_format_with_provenance(run_dir):
    entry = figures.save(_figure(), "demo", caption="a demo")
    assert set(entry["files"]) == set(figures.FORMATS)
    for f in entry["files"].values():
        assert (run_dir / f["path"]).stat().st_size > 0
    desc = json.loads(Image.open(run_dir / "figures" / "demo.png").text["Description"])
    assert desc["chapter"] == "wu-thm-4-1" and desc["parameters"] == {"depth": 3} and desc["figure"] == "demo"
    assert b"wu-thm-4-1" in (run_dir / "figures" / "demo.svg").read_bytes()
    assert report.record()["figures"][0]["name"] == "demo"
    assert not list((run_dir / "figures").glob(".*tmp*")), "temporary files left behind"


def test_two_saves_are_byte_identical(run_dir):
    a = figures.save(_figure(), "a")
    again = figures.save(_figure(), "a")
    for ext in figures.FORMATS:
        assert again["files"][ext]["sha256"] == a["files"][ext]["sha256"], ext
    b = figures.save(_figure(), "b")
    assert a["files"]["png"]["sha256"] != b["files"]["png"]["sha256"]  # the name is embedded, so hashes can differ


def test_a_saved_figure_shows_as_one_line():
    from IPython.lib.pretty import pretty

    entry = figures.SavedFigure(name="demo", caption="", files={"png": {"path": "figures/demo.png", "sha256": "0"}},
                                provenance={})
    assert pretty(entry) == "saved figure 'demo': figures/demo.png"
    assert entry["name"] == "demo" and isinstance(entry, dict)
