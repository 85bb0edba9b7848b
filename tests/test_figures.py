"""posbias.figures: one style, and files that carry their provenance and are byte-identical."""
import contextlib
import json
import warnings

import matplotlib.pyplot as plt
import pytest
from PIL import Image

from posbias import figures
from posbias.storage import report


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


def test_a_saved_figure_shows_as_one_line_and_a_cell_ending_in_save_shows_nothing(capsys):
    from IPython.core.formatters import DisplayFormatter
    from IPython.lib.pretty import pretty

    entry = figures.SavedFigure(name="demo", caption="", files={"png": {"path": "figures/demo.png", "sha256": "0"}},
                                provenance={})
    assert pretty(entry) == "saved figure 'demo': figures/demo.png"
    assert entry["name"] == "demo" and isinstance(entry, dict)
    # IPython's display hook (a cell's last value) asks the display formatter: nothing to publish
    assert DisplayFormatter().format(entry) == ({}, {})
    assert entry._ipython_display_() is None
    assert capsys.readouterr() == ("", "")


@pytest.fixture
def chapter_run(run_dir, monkeypatch):
    """Inside ``posbias run``: the chapter's captions from its {glue:figure} directives."""
    captions = {"demo": "Mass on position 1 after {glue:text}`n_layers` layers, $P^{(t)}_{i1} \\to 1$; "
                        "worst row {glue:text}`worst:.2e`, share {glue:text}`share:.1%`, depth {glue:text}`depth:d`."}
    monkeypatch.setenv("POSBIAS_CAPTIONS", json.dumps(captions))
    return run_dir


def test_in_a_chapter_run_save_takes_the_directives_caption_with_glued_values(chapter_run):
    report.value("n_layers", 12)
    report.value("worst", 3.14159e-7)
    report.value("share", 0.25)
    report.value("depth", 6.0)
    entry = figures.save(_figure(), "demo")
    want = ("Mass on position 1 after 12 layers, $P^{(t)}_{i1} \\to 1$; worst row 3.14e-07, share 25.0%, depth 6.")
    assert entry["caption"] == want and entry["provenance"]["caption"] == want
    desc = json.loads(Image.open(chapter_run / "figures" / "demo.png").text["Description"])
    assert desc["caption"] == want
    assert report.record()["figures"][0]["caption"] == want
    assert json.loads((chapter_run / "_record.json").read_text())["figures"][0]["caption"] == want


def test_in_a_chapter_run_a_figure_needs_its_directive_and_takes_no_caption_argument(chapter_run):
    with pytest.raises(ValueError, match=r"figure 'other' has no ```\{glue:figure\} other directive in "
                                         r"chapter 'wu-thm-4-1'"):
        figures.save(_figure(), "other")
    for given in ("a second caption", ""):
        with pytest.raises(ValueError, match=r"caption=.*\{glue:figure\} demo directive.*one source"):
            figures.save(_figure(), "demo", caption=given)
    assert not (chapter_run / "figures").exists() and report.record()["figures"] == []   # refused before writing


def test_a_role_glued_after_the_save_is_an_error_naming_it(chapter_run):
    report.value("n_layers", 12)
    with pytest.raises(ValueError, match=r"\{glue:text\}`worst:.2e` names 'worst', which is not glued yet"):
        figures.save(_figure(), "demo")


def test_outside_a_chapter_run_the_caption_is_optional(run_dir, monkeypatch):
    monkeypatch.delenv("POSBIAS_CAPTIONS", raising=False)
    assert figures.save(_figure(), "free")["caption"] == ""
    assert figures.save(_figure(), "given", caption="my words")["provenance"]["caption"] == "my words"


@pytest.mark.parametrize("value, fmt", [(0.123456, ".3f"), (12, ""), (12, "d"), (7.0, "d"), (1234.5, ".1e"),
                                        (0.25, ".0%"), ("causal", ""), ([1, 2], ""), (3, ".2f"), (True, "")])
def test_glued_values_read_as_myst_nb_shows_them(value, fmt):
    """The caption in a figure's files says what the page's {glue:text} role shows (myst-nb's formatting)."""
    from myst_nb.core.variables import format_plain_text

    role = "{glue:text}`x" + (f":{fmt}`" if fmt else "`")
    assert figures.resolve_glue(f"a {role} b", {"x": value}) == f"a {format_plain_text(repr(value), fmt or 's')} b"


def test_resolve_glue_keeps_math_and_refuses_what_it_cannot_fill():
    assert figures.resolve_glue("$\\alpha$ in {glue:text}`a`", {"a": "0, 0.5"}) == "$\\alpha$ in 0, 0.5"
    with pytest.raises(ValueError, match="cannot format 'x' with '.2f'"):
        figures.resolve_glue("{glue:text}`a:.2f`", {"a": "x"})
    with pytest.raises(ValueError, match="another page"):
        figures.resolve_glue("{glue:text}`other.ipynb::a`", {"a": 1})
    with pytest.raises(ValueError, match="use \\{glue:text\\}"):
        figures.resolve_glue("{glue:md}`a`", {"a": 1})


def test_gap_curves_figure_draws_the_mean_gap_per_pe_and_depth():
    """One panel per gap; one line per (PE, depth) at the seed mean of the stored curves, x in
    thousands of iterations; a band per line only with ``spread``."""
    import numpy as np

    from posbias.measures import evaluate as ev

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

    from posbias.measures import evaluate as ev

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


def test_sink_comparison_figure_places_keys_at_relative_positions():
    import numpy as np
    import pandas as pd

    toy, real = {"toy": np.linspace(0, 1, 17)}, {"real": np.full(64, 0.5), "rep": np.zeros(64)}
    table = pd.DataFrame({"network": ["a", "b"], "rate at the sink": [0.9, 0.2], "max elsewhere": [0.1, 0.3]})
    fig = figures.sink_comparison_figure(toy, real, table)
    left, right = fig.axes[0], fig.axes[1]
    assert len(left.lines) == 3
    x, y = left.lines[0].get_xdata(), left.lines[0].get_ydata()
    assert len(x) == 16 and x[0] == 0 and x[-1] == 1 and np.allclose(y, np.linspace(0, 1, 17)[:-1])
    assert len(left.lines[1].get_xdata()) == 63 and left.lines[1].get_xdata()[-1] == 1
    assert [round(p.get_width(), 2) for p in right.patches] == [0.9, 0.2, 0.1, 0.3]
    plt.close("all")


def test_attention_maps_and_alpha_profile_figures():
    import numpy as np
    import torch

    from posbias.measures import evaluate as ev
    from posbias.science.masks import causal_mask

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


# --------------------------------------------------------------------------- Figures 3 and 4

@contextlib.contextmanager
def _no_warnings():
    """Any warning raised inside is an error (e.g. "No artists with labels found to put in legend")."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


def _fake_acc(labels, seeds=3):
    """(seeds, 6) accuracies per label: seed s, set i of the k-th label = 0.1 + 0.01 k + 0.1 i / 6 + 0.02 s."""
    import torch

    return {lb: torch.tensor([[0.1 + 0.01 * k + 0.1 * i / 6 + 0.02 * s for i in range(6)] for s in range(seeds)],
                             dtype=torch.float64) for k, lb in enumerate(labels)}


def _bar_heights(ax):
    return [round(p.get_height(), 9) for p in ax.patches]


def test_fig3_accuracy_figure_one_bar_per_pe_and_set_at_the_seed_mean():
    import numpy as np
    from matplotlib.container import ErrorbarContainer

    from posbias.measures import evaluate as ev

    acc = _fake_acc(ev.FIG3_NAMES)
    with _no_warnings():
        fig = figures.fig3_accuracy_figure(acc)
    assert len(fig.axes) == 2 and [ax.get_title() for ax in fig.axes] == ["no mask", "causal mask"]
    assert [len(ax.patches) for ax in fig.axes] == [18, 18]
    causal_sin = fig.axes[1].patches[6:12]                  # PEs in order none, sin, rope
    assert np.allclose([p.get_height() for p in causal_sin], acc["causal|sin"].mean(0).numpy())
    err = [c for c in fig.axes[1].containers if isinstance(c, ErrorbarContainer)][1]
    seg = err.lines[2][0].get_segments()[0]
    assert abs((seg[1][1] - seg[0][1]) / 2 - float(acc["causal|sin"][:, 0].std(unbiased=False))) < 1e-9
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["No PE", "sin", "RoPE"]
    assert [t.get_text() for t in fig.axes[0].get_xticklabels()][0] == "first\nvs middle"
    partial = figures.fig3_accuracy_figure({k: v for k, v in acc.items() if k.endswith("|rope")})
    assert [len(ax.patches) for ax in partial.axes] == [6, 6]
    assert _bar_heights(partial.axes[0]) == _bar_heights(fig.axes[0])[12:]
    with _no_warnings():
        empty = figures.fig3_accuracy_figure({})
    assert all(ax.texts[0].get_text() == "no configuration complete yet" and not ax.patches for ax in empty.axes)
    assert empty.axes[0].get_legend() is None
    plt.close("all")


def test_fig4_accuracy_figure_one_row_per_slot_biased_in_training():
    from posbias.measures import evaluate as ev

    wheres = ("first", "middle", "last")
    labels = [f"{w}|{c}" for w in wheres for c in ev.FIG3_NAMES]
    acc = _fake_acc(labels)
    fig = figures.fig4_accuracy_figure(acc)
    assert len(fig.axes) == 6 and [len(ax.patches) for ax in fig.axes] == [18] * 6
    assert fig.axes[3].get_title() == "answer at middle in training, causal mask"
    assert _bar_heights(fig.axes[3])[:6] == [round(float(x), 9) for x in acc["middle|causal|none"].mean(0)]
    one = figures.fig4_accuracy_figure({k: v for k, v in acc.items() if k.startswith("last|")}, wheres)
    assert [len(ax.patches) for ax in one.axes] == [0, 0, 0, 0, 18, 18]
    assert one.axes[0].texts[0].get_text() == "no configuration complete yet"
    assert one.axes[4].get_legend() is not None                   # on the first panel with bars
    two = figures.fig4_accuracy_figure(acc, ("first", "last"))
    assert len(two.axes) == 4 and two.axes[2].get_title().startswith("answer at last")
    plt.close("all")


def test_fig3_and_fig4_sweep_figures_draw_the_seed_mean_per_slot():
    import numpy as np
    from matplotlib.container import ErrorbarContainer

    from posbias.measures import evaluate as ev

    sweep = np.array([[0.6, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2, 0.5], [0.4, 0.2, 0.2, 0.2, 0.2, 0.2, 0.2, 0.3]])
    s3 = {c: sweep + 0.01 * k for k, c in enumerate(ev.FIG3_NAMES)}
    fig = figures.fig3_sweep_figure(s3)
    assert [ax.get_xlabel() for ax in fig.axes] == ["item holding the answer"] * 2
    bars = [[c for c in ax.containers if isinstance(c, ErrorbarContainer)] for ax in fig.axes]
    assert [len(b) for b in bars] == [3, 3]
    line = bars[1][2].lines[0]                                         # causal, RoPE
    assert list(line.get_xdata()) == list(range(1, 9)) and np.allclose(line.get_ydata(), sweep.mean(0) + 0.05)
    assert figures.fig3_sweep_figure({}).axes[1].texts[0].get_text() == "no configuration complete yet"
    s4 = {f"{w}|{c}": v for w in ("first", "middle", "last") for c, v in s3.items()}
    del s4["middle|full|sin"]
    fig = figures.fig4_sweep_figure(s4)
    assert [len(ax.lines) for ax in fig.axes] == [6, 5, 6]
    assert [ln.get_linestyle() for ln in fig.axes[0].lines] == ["--"] * 3 + ["-"] * 3    # dashed: no mask
    assert fig.axes[2].get_legend() is not None and fig.axes[0].get_title() == "answer at first in training"
    plt.close("all")


def _curve_unit(shift: float) -> dict:
    """Two evaluations; every IC_a_b (a earlier) is 0.5 + shift at the second, its mirror 0.5."""
    from posbias.measures import evaluate as ev

    curves = {"step": [0, 500]}
    for a, b in ev.GAP_PAIRS:
        curves[f"IC_{a}_{b}"], curves[f"IC_{b}_{a}"] = [0.5, 0.5 + shift], [0.5, 0.5]
    return {"curves": curves}


def test_fig3_gap_curves_and_fig4_preference_curves():
    import numpy as np

    from posbias.measures import evaluate as ev

    res = {c: [_curve_unit(0.02 * k), _curve_unit(0.02 * k + 0.1)] for k, c in enumerate(ev.FIG3_NAMES)}
    fig = figures.fig3_gap_curves_figure(res)
    assert [ax.get_title() for ax in fig.axes] == ["first vs middle", "first vs last", "middle vs last"]
    assert [len(ax.lines) for ax in fig.axes] == [7, 7, 7]                 # six networks and the zero line
    causal_rope = fig.axes[1].lines[5]
    assert list(causal_rope.get_xdata()) == [0, 500] and np.allclose(causal_rope.get_ydata(), [0, 0.15])
    assert fig.axes[2].get_legend() is not None
    res4 = {f"{w}|{c}": us for w in ("first", "middle", "last") for c, us in res.items()}
    fig = figures.fig4_preference_curves_figure(res4)
    assert [ax.get_title() for ax in fig.axes][1] == "preference for the middle slot"
    first, middle, last = (ax.lines[0].get_ydata() for ax in fig.axes)    # no mask, No PE: gaps 0.05
    assert np.allclose(first, [0, 0.05]) and np.allclose(middle, [0, 0]) and np.allclose(last, [0, -0.05])
    with _no_warnings():
        empty = figures.fig4_preference_curves_figure({})
    assert [ax.texts[0].get_text() for ax in empty.axes] == ["no configuration complete yet"] * 3
    plt.close("all")


def test_paper_section_of_figures_3_and_4_on_smoke_trained_units(fresh, monkeypatch, tmp_path):
    """What the chapters' paper sections do, on units actually trained (smoke settings, a temporary
    cache): coverage, the figure from the complete configurations, the register's entries judged on
    them and published with the ``paper_`` prefix; and with a seed missing everywhere, nothing
    complete, every entry 'not yet', counts glued as 0 and every ensemble named as not started."""
    from posbias import training as train
    from posbias.measures import evaluate as ev
    from posbias.analysis import claims
    from posbias.analysis.claims import tables

    monkeypatch.setenv("POSBIAS_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("POSBIAS_WRITE_DATA", raising=False)
    kw = dict(steps=20, seeds=[0], eval_every=10, n_test=64, n_sweep=32, n_sink=32)
    train.run_campaign("wu-fig-3", "smoke", progress=False, log=lambda s: None, **kw)
    cov = ev.coverage(train.stored_campaign("wu-fig-3", "smoke", **kw))
    pres = cov.complete
    assert cov.statement == "6 of 6 units committed" and list(pres) == list(ev.FIG3_NAMES)
    pacc = {c: ev.ic_accuracy_by_set(us) for c, us in pres.items()}
    assert pacc["causal|sin"].shape == (1, 6)
    fig = figures.fig3_accuracy_figure(pacc)
    assert [len(ax.patches) for ax in fig.axes] == [18, 18]
    assert abs(fig.axes[1].patches[7].get_height() - pres["causal|sin"][0]["ic_accuracy"]["IC_middle_first"]) < 1e-12
    entries3 = claims.register().select(figure="Figure 3")
    judged = claims.judge(entries3, {"wu-fig-3": pres})
    assert len(judged) == len(entries3) >= 15 and all(j.status != claims.NOT_YET and j.n_runs == 1 for j in judged)
    claims.publish(judged, prefix="paper_")
    v = report.record()["values"]
    assert v["paper_n_claims"] == len(entries3) == sum(v[f"paper_n_{x.replace(' ', '_')}"] for x in claims.STATUSES)
    assert v["paper_n_not_yet"] == 0
    # a share for every entry with a configuration that can reach the ceiling; none where all cannot
    assert all((j.share is None) == (set(j.cannot_reach) == set(j.entry.configs)) for j in judged)
    assert all(0 < j.share <= 1 for j in judged if j.share is not None)
    assert list(tables.table(judged)["claim"]) == [e.id for e in entries3]
    short = tables.brief(judged)          # the page's narrow table: four columns, the readings in full
    assert list(short.columns) == ["claim, as measured", "after Holm", "mean ± SE", "networks"]
    assert list(short["claim, as measured"]) == [e.reading for e in entries3]
    assert list(short["after Holm"]) == [j.holm for j in judged]
    parts = tables.record(judged)         # the full table in three narrow parts, every column once
    full = tables.table(judged)
    assert all(list(p["claim"]) == list(full["claim"]) for p in parts)
    shown = [c for p in parts for c in p.columns if c != "claim"]
    assert len(shown) == len(set(shown)) and set(shown) <= set(full.columns)
    assert {c for c in full.columns if c not in ("claim", "where") and (full[c].astype(str) != "").any()} <= set(shown)
    sweeps = {c: ev.stack(us, "sweep_accuracy") for c, us in pres.items()}
    assert [len(ax.lines) > 0 for ax in figures.fig3_sweep_figure(sweeps).axes] == [True, True]
    assert [len(ax.lines) for ax in figures.fig3_gap_curves_figure(pres).axes] == [7, 7, 7]
    # Figure 4's functions on the same units, labelled as trained at each slot
    res4 = {f"{w}|{c}": us for w in ("first", "middle", "last") for c, us in pres.items()}
    judged4 = claims.judge(claims.register().select(figure="Figure 4"), {"wu-fig-4": res4})
    assert len(judged4) >= 14 and not [j for j in judged4 if j.status == claims.NOT_YET]
    f4 = figures.fig4_accuracy_figure({k: ev.ic_accuracy_by_set(us) for k, us in res4.items()})
    assert [len(ax.patches) for ax in f4.axes] == [18] * 6
    assert [len(ax.lines) for ax in figures.fig4_preference_curves_figure(res4).axes] == [7, 7, 7]
    # one more seed per configuration than is stored: nothing complete yet
    more = {**kw, "seeds": [0, 1]}
    half = ev.coverage(train.stored_campaign("wu-fig-3", "smoke", **more))
    assert half.statement == "6 of 12 units committed" and half.complete == {}
    none = claims.judge(entries3, {"wu-fig-3": half.complete})
    claims.publish(none, prefix="later_")
    assert {j.status for j in none} == {claims.NOT_YET}
    assert report.record()["values"]["later_n_not_yet"] == len(entries3)
    assert report.record()["values"]["later_n_reproduced"] == 0
    text = train.progress_text(train.campaign_status("wu-fig-3", "smoke", **more))
    assert text.count("(2 units) not started") == 3, text
    plt.close("all")


def test_jump_figure_draws_each_role_in_its_colour_and_says_how_far_it_trained():
    steps = [0, 25_000, 50_000]
    one = {"step": steps, **{k: [0.1, 0.2, 0.3] for k in ("ic", "sweep", "ratio", "training_classes",
                                                            "novel_classes", "wrong_first", "wrong_middle",
                                                            "wrong_last")}}
    fig = figures.jump_figure({"jumper": one, "non-jumper": {**one, "step": []}}, 0.2)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels[0] == "jumper (to 50,000)" and not any(x.startswith("non-jumper") for x in labels)
    assert len(fig.axes) == 4 and len(fig.axes[3].lines) == 3 + 1          # three slots and the 100k mark
    plt.close(fig)


def test_budget_trajectories_colour_means_leaving_a_plateau_in_every_panel():
    from posbias.analysis import budget as bd, budget_read as br

    steps = list(range(0, 300_001, 5000))
    flat = {f"IC_{a}_{b}": [0.5] * len(steps) for a, b in (("first", "middle"), ("middle", "first"),
                                                          ("first", "last"), ("last", "first"),
                                                          ("middle", "last"), ("last", "middle"))}
    jump = {k: [0.5 if s < 200_000 else 0.75 for s in steps] for k in flat}
    study = {"decay|2": [(0, "design", {"curves": {"step": steps, **flat}}),
                         (1, "admitted", {"curves": {"step": steps, **jump}})]}
    fig = figures.budget_trajectories_figure(br.trajectories(study))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax in fig.axes[:2]:                                                   # both panels of the column
        drawn = [ln for ln in ax.lines if len(ln.get_xdata()) == len(steps)]
        stay, left = sorted(drawn, key=lambda ln: ln.get_ydata()[-1] if ax is fig.axes[0] else ln.get_label())
        if ax is fig.axes[0]:
            assert left.get_color() == colours[1] and stay.get_color() == colours[0]
            assert left.get_linestyle() == "--" and stay.get_linestyle() == "-"
        assert {ln.get_color() for ln in drawn} == {colours[0], colours[1]}
    assert bd.JUMP == 0.05
    plt.close(fig)


def test_schematics_draw_what_the_library_computes(tmp_path):
    import re
    from pathlib import Path

    import torch

    from posbias.figures import schematics
    from posbias.science.theory import decay_critical_distance

    paths = schematics.write(tmp_path)
    assert sorted(paths) == sorted(schematics.SCHEMATICS) and all(p.stat().st_size > 5000 for p in paths.values())
    fig = schematics.mask_walk(n=6, depths=(1, 16))
    bars = [p.get_height() for p in fig.axes[1].patches]
    assert bars[:6] == pytest.approx([1 / 6] * 6) and bars[6] > 0.99      # one layer even; sixteen on token 1
    plt.close(fig)
    fig = schematics.decay_pushback(m=0.5, depths=(4,))
    line, dot = fig.axes[0].lines
    assert dot.get_xdata()[0] == decay_critical_distance(4, 0.5) == int(torch.tensor(line.get_ydata()).argmax())
    plt.close(fig)
    fig = schematics.layernorm_recency()
    ln, raw = (ln.get_ydata() for ln in fig.axes[0].lines)
    assert all(b > a for a, b in zip(ln, ln[1:])) and max(abs(x) for x in raw) < 1e-12
    plt.close(fig)
    page = (Path(__file__).resolve().parents[1] / "book" / "position-bias.md").read_text()
    for name, (_, alt) in schematics.SCHEMATICS.items():
        assert f"_executed/schematics/{name}.png" in page and f":alt: {alt}" in page, name
    assert page.index("schematics/mask-walk.png") < min(m.start() for m in re.finditer(r"\$", page))



def test_bias_over_training_figure_draws_the_bands_it_is_given():
    """Each panel draws the three means it is handed and the loss from its second evaluation; nothing is
    recomputed (a band of all 0.1, 0.2, 0.3 comes out as drawn)."""
    import numpy as np

    step = np.array([0, 50_000, 100_000, 150_000])
    gaps = {p: (np.full(4, v), np.full(4, 0.01)) for p, v in (("first-middle", 0.1), ("first-last", 0.2),
                                                              ("middle-last", 0.3))}
    fig = figures.bias_over_training_figure({"decay|2": {"step": step, "loss": np.array([np.nan, 3, 2, 1]),
                                                         "gaps": gaps}}, "test")
    ax = fig.axes[0]
    drawn = [ln for ln in ax.lines if len(ln.get_xdata()) == 4]
    assert [list(ln.get_ydata()) for ln in drawn] == [[0.1] * 4, [0.2] * 4, [0.3] * 4]
    assert list(drawn[0].get_xdata()) == [0, 50, 100, 150] and ax.get_title() == "decay, 2"
    assert [list(ln.get_ydata()) for ln in fig.axes[1].lines] == [[3, 2, 1]]        # the loss, right axis
    plt.close(fig)
