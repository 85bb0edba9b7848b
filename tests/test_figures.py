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


def test_gap_curves_figure_draws_the_mean_gap_per_pe_and_depth():
    """One panel per gap; one line per (PE, depth) at the seed mean of the stored curves, x in
    thousands of iterations; a band per line only with ``spread``."""
    import numpy as np

    from posbias import evaluate as ev

    def unit(shift: float) -> dict:      # two evaluations; IC_a_b = 0.5 + shift, IC_b_a = 0.5
        curves = {"step": [0, 2000]}
        for a, b in ev.GAP_PAIRS:
            curves[f"IC_{a}_{b}"], curves[f"IC_{b}_{a}"] = [0.5, 0.5 + shift], [0.5, 0.5]
        return {"curves": curves}

    res = {"No PE|2": [unit(0.1), unit(0.3)], "decay|2": [unit(-0.2), unit(-0.2)]}
    fig = figures.gap_curves_figure(res, ["No PE", "decay"], [2])
    assert len(fig.axes) == 3 and all(len(ax.collections) == 0 for ax in fig.axes)
    for ax in fig.axes:
        nope, decay = ax.lines[:2]
        assert list(nope.get_xdata()) == [0, 2] and np.allclose(nope.get_ydata(), [0, 0.2])
        assert np.allclose(decay.get_ydata(), [0, -0.2]) and decay.get_linestyle() == "--"
    banded = figures.gap_curves_figure(res, ["No PE", "decay"], [2], spread=True)
    assert all(len(ax.collections) == 2 for ax in banded.axes)
    plt.close("all")


def test_gap_bars_figure_draws_mean_and_standard_error_per_pe():
    """Figure 2 as bars: one panel per depth, one bar per (gap, PE) at the seed mean, error bar one SE."""
    import numpy as np

    from posbias import evaluate as ev

    def unit(d: float) -> dict:
        return {"gaps": {"first-middle": d, "first-last": 2 * d, "middle-last": 0.0}}

    res = {"No PE|2": [unit(0.1), unit(0.3)], "decay|2": [unit(-0.1)] * 2, "No PE|4": [unit(0.0)] * 2,
           "decay|4": [unit(0.05)] * 2}
    fig = figures.gap_bars_figure(res, ["No PE", "decay"], [2, 4], n_test=1000)
    assert len(fig.axes) == 2
    bars = [p for p in fig.axes[0].patches]
    assert np.allclose([b.get_height() for b in bars], [0.2, 0.4, 0.0, -0.1, -0.2, 0.0])
    se = ev.seed_mean_se([0.2, 0.6], 1000)[1]
    from matplotlib.container import ErrorbarContainer
    errs = [c for c in fig.axes[0].containers if isinstance(c, ErrorbarContainer)]
    caps = errs[0].lines[2][0].get_segments()                                # No PE's error bars
    assert abs((caps[1][1][1] - caps[1][0][1]) / 2 - se) < 1e-9
    empty = figures.gap_bars_figure({}, ["No PE"], [], 1000)
    assert empty.axes[0].texts[0].get_text() == "no complete depth yet"
    plt.close("all")


def test_sink_panels_figure_skips_missing_labels():
    import numpy as np

    v = np.tile(np.arange(5.0), (2, 1))
    fig = figures.sink_panels_figure({"causal": v, "window|4": v, "prefix|2": v * 2}, [4, 8], [2], "share")
    assert len(fig.axes[0].patches) == 5 and len(fig.axes[1].lines) == 2 and len(fig.axes[2].lines) == 2
    assert np.allclose(fig.axes[2].lines[0].get_ydata(), 2 * np.arange(5.0))
    plt.close("all")


def test_attention_maps_and_alpha_profile_figures():
    import numpy as np
    import torch

    from posbias import evaluate as ev
    from posbias.masks import causal_mask

    T = 5
    mask = causal_mask(T)
    uniform = (mask.double() / mask.double().sum(-1, keepdim=True)).numpy()
    fig = figures.attention_maps_figure(np.stack([uniform, uniform]), mask)
    heat = [ax for ax in fig.axes if ax.images]
    shown = np.ma.filled(heat[0].images[0].get_array(), np.nan)
    assert len(heat) == 2 and np.isnan(shown[0, 1]) and shown[1, 0] == 0.5             # a future key is blank
    alpha = ev.sink_alpha(torch.as_tensor(uniform), mask)
    fig = figures.alpha_profile_figure(np.tile(alpha.numpy(), (3, 2, 1)), ev.uniform_sink_alpha(mask))
    lines = fig.axes[0].lines
    assert np.allclose(lines[0].get_ydata(), alpha.numpy()) and np.allclose(lines[-1].get_ydata(), alpha.numpy())
    plt.close("all")
