"""posbias.lnsim beside tests/test_lnsim.py: its inputs, its score-map drawing and its report check, each
against a value worked out by hand."""
from __future__ import annotations

import numpy as np
import torch

from posbias import lnsim


def test_sample_inputs_are_float64_draws_of_the_stated_formula():
    """The formula re-drawn from the same seed in float64: (z + l u) / sqrt(d), z drawn first. At alpha = 0
    and d = 4, 2 x = z exactly, and float64 draws carry more bits than float32 keeps (a float32 draw of z,
    promoted only afterwards, would round-trip through float32 unchanged)."""
    sims, n, d, alpha = 50, 3, 4, 0.5
    x = lnsim.sample_inputs(sims, n, d, alpha, torch.Generator().manual_seed(7))
    g = torch.Generator().manual_seed(7)
    z = torch.randn(sims, n, d, generator=g, dtype=torch.float64)
    u = torch.randn(sims, 1, d, generator=g, dtype=torch.float64)
    assert x.dtype == torch.float64
    assert torch.allclose(x, (z + u) / 2, rtol=1e-15, atol=0)                  # l = sqrt(0.5 / 0.5) = 1
    z0 = 2 * lnsim.sample_inputs(sims, n, d, 0.0, torch.Generator().manual_seed(7))
    assert (z0.float().double() != z0).float().mean() > 0.99


def test_plot_score_map_caps_the_colour_range_at_the_largest_lower_entry():
    """Diagonal 10, above every strictly-lower entry (1..6): the colour range is still (1, 6), the diagonal
    saturating, not (1, 10) as an automatic upper limit over everything shown would give."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = np.array([[10.0, 0, 0, 0], [1.0, 10, 0, 0], [4.0, 2, 10, 0], [6.0, 5, 3, 10]])
    fig, ax = plt.subplots()
    try:
        assert lnsim.plot_score_map(ax, s).get_clim() == (1.0, 6.0)
    finally:
        plt.close(fig)


def test_check_layer1_moments_states_its_claim(fresh):
    """The claim the chapters print beside the verdict, word for word (Fisher's E r, Hotelling's variance)."""
    from posbias import report

    lnsim.check_layer1_moments({"a": dict(mean_excess=-0.03, var_excess=-0.2, mean_pred=1.0, mean_mc=1.01,
                                          var_pred=2.0, var_mc=2.1)})
    (c,) = report.record()["checks"]
    assert c["name"] == "layer1-moments"
    assert c["claim"] == (
        "layer-1 off-diagonal LN scores, pooled over entries: mean within d^{-3/2} + 4.5 SE of sqrt(d) E r "
        "(Fisher), variance within max(30/d^2, 10/((1-alpha^2)^2 d^3)) relative + 4.5 SE of "
        "(1-alpha^2)^2 (1 + a1/d + a2/d^2) (Hotelling)")
