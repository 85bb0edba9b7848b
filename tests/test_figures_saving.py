"""posbias.figures.saving: a saved figure is fitted to the width the book shows it at, so that its smallest text is
legible there, and records the texts that overlap once drawn (issue 93)."""
import matplotlib.pyplot as plt
import pytest

from posbias import figures
from test_figures import _figure


def test_a_wide_figure_is_shrunk_until_its_smallest_text_reads_at_the_column_and_a_narrow_one_is_not(run_dir):
    """Issue 93: text keeps its size in points; the figure's inches shrink, so the page scales it down less."""
    from posbias.figures import saving

    wide, axes = plt.subplots(1, 4, figsize=(14, 3.3))
    for a in axes:
        a.plot([0, 1], [0, 1])
        a.set_title("eight points", fontsize=8)
    before = saving.smallest_text_px(wide)
    assert before == pytest.approx(8 * 150 / 72, abs=0.01)
    f = saving.fit_to_column(wide)
    assert f < 0.8 and saving.smallest_text_px(wide) == pytest.approx(before)      # text unchanged in points
    w_px = wide.get_tightbbox(wide.canvas.get_renderer()).width * 150
    assert before * saving.COLUMN_PX / w_px >= saving.MIN_TEXT_PX * 0.99
    narrow = _figure()
    size = tuple(narrow.get_size_inches())
    assert saving.fit_to_column(narrow) == 1.0 and tuple(narrow.get_size_inches()) == size
    entry = figures.save(wide, "wide", caption="a wide figure")
    assert entry["provenance"]["shrunk_to_column"] == 1.0                           # fitted above already
    assert entry["provenance"]["smallest_text_px"] == pytest.approx(before)


def test_overlapping_text_finds_titles_that_run_into_each_other_and_only_those(run_dir):
    from posbias.figures import saving

    crowded, axes = plt.subplots(1, 4, figsize=(9, 3))
    for a in axes:
        a.plot([0, 300], [0, 1])
        a.set_title("a title far too long for a quarter of nine inches", fontsize=9)
    pairs = saving.overlapping_text(crowded)
    assert len(pairs) == 3 and all(a == b == "a title far too long for a quarter of nine inches" for a, b in pairs)
    assert saving.overlapping_text(_figure()) == []
    fine, axes = plt.subplots(2, 2, figsize=(8, 5.8))
    for a in axes.flat:
        a.plot([0, 300], [0, 1])
        a.set_title("(a) accuracy: IC sets, sweep (dashed)", fontsize=9)
    assert saving.overlapping_text(fine) == []
