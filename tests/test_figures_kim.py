"""Tests of posbias.figures.kim: the mean score map and the grid of them, against arrays worked out by hand."""
from __future__ import annotations

import numpy as np
import pytest

from posbias import figures
from posbias.science import lnsim


def test_score_map_grid_draws_one_panel_per_row_width_and_layer():
    import matplotlib

    matplotlib.use("Agg")

    rows = [("LN", dict(layernorm=True)), ("no LN", dict(layernorm=False))]
    res = {(name, d): lnsim.simulate(n=5, d=d, depth=3, sims=20, seed=0, **cfg)
           for name, cfg in rows for d in (8, 16)}
    fig = figures.score_map_grid(rows, res, [8, 16], 2, "title")
    panels = [ax for ax in fig.axes if ax.images]
    assert len(panels) == 2 * 2 * 2 and fig._suptitle.get_text() == "title"
    assert panels[0].get_title().startswith("LN\nd=8, layer 1") and panels[-1].get_title().endswith("layer 2")


def test_plot_score_map_scales_colour_to_the_strictly_lower_entries():
    """Diagonal 0 (below every off-diagonal entry) and the off-diagonal range 1..6 with its minimum on the
    first subdiagonal: the colour range is exactly (1, 6); the colour map is the one asked for, RP is
    written right-aligned in the corner, and the masked triangle is blank."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt


    s = np.array([[0.0, 9, 9, 9], [1.0, 0, 9, 9], [4.0, 2, 0, 9], [6.0, 5, 3, 0]])
    fig, ax = plt.subplots()
    im = figures.plot_score_map(ax, s, "t", rp=0.5, cmap="magma")
    assert im.get_clim() == (1.0, 6.0) and im.get_cmap().name == "magma"
    assert np.ma.getmaskarray(im.get_array()).tolist() == np.triu(np.ones((4, 4), dtype=bool), 1).tolist()
    (text,) = ax.texts
    assert text.get_text() == "RP=0.50" and text.get_ha() == "right" and text.get_position() == (4.3, 0.8)
    assert im.get_extent() == [0.5, 4.5, 4.5, 0.5]               # cell k centred on k, row 1 at the top
    fig2, ax2 = plt.subplots()
    assert figures.plot_score_map(ax2, s).get_cmap().name == "viridis" and ax2.get_title() == ""
    plt.close(fig2)
    assert figures.plot_score_map(ax, s, offdiag_scale=False).get_clim() == (0.0, 6.0)
    plt.close(fig)


def test_score_map_grid_sizes_panels_by_the_grid():
    import matplotlib

    matplotlib.use("Agg")

    res = {("LN", d): lnsim.simulate(n=4, d=d, depth=3, sims=10, seed=0) for d in (8, 16)}
    fig = figures.score_map_grid([("LN", {})], res, [8, 16], 3, "t")
    assert tuple(fig.get_size_inches()) == pytest.approx((1.9 * 3 * 2, 1.9 * 1))


def test_plot_score_map_one_token_and_no_grid():
    """n = 1 has no strictly-lower entry: the off-diagonal scale is skipped and the single score drawn
    (with the default Agg rcParams, grid lines off). Sees the scale taken over the empty set (nanmin
    raises) and the grid toggled on by grid(None)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    try:
        with matplotlib.rc_context({"axes.grid": False}):
            im = figures.plot_score_map(ax, np.array([[2.0]]))
        assert float(im.get_array()[0, 0]) == 2.0
        assert not any(line.get_visible() for line in ax.get_xgridlines() + ax.get_ygridlines())
    finally:
        plt.close(fig)


def test_plot_score_map_caps_the_colour_range_at_the_largest_lower_entry():
    """Diagonal 10, above every strictly-lower entry (1..6): the colour range is still (1, 6), the diagonal
    saturating, not (1, 10) as an automatic upper limit over everything shown would give."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = np.array([[10.0, 0, 0, 0], [1.0, 10, 0, 0], [4.0, 2, 10, 0], [6.0, 5, 3, 10]])
    fig, ax = plt.subplots()
    try:
        assert figures.plot_score_map(ax, s).get_clim() == (1.0, 6.0)
    finally:
        plt.close(fig)
