"""Points inside the declared ranges of wu-thm-4-5 (the decay mask) and wu-thm-4-7 (RoPE) that
``make fuzz`` found crashing (exit 1) or failing a check (exit 3): each now runs to exit 0, or is refused
before any work (exit 2) by a constraint or a range that names the reason.

wu-thm-4-5. Underflow: row N of ((1-gamma) W)^L lies wholly below float64's range for deep, slowly
decaying stacks, so check (a) took the max of an empty selection (exit 1); it is now taken with the
row rescaled every layer (``row_powers(log=True)``) and compared in log space. The figure's depths were
those up to 32, none for a grid of deeper ones (exit 1); it now falls back to the shallowest. "Moves at
all" failed every grid that cannot show a move (one depth, peaks all at k = 0, the deepest depths
skipped); a move is now required where the band forces one (``theory.peak_directions``).

wu-thm-4-7. The weight ratio of Lemma 4.6 was compared in absolute terms (it reaches e^{beta (1 - cos
phi)}); now in log space. The matrix product of RoPE weights overflowed (e^{beta L}, NaN); it is now
rescaled every layer. The path sum's float convolution lost entries more than e^{-708} below its maximum;
it is now a log-space convolution. P's window k <= pi/(2 theta) underflowed in float64 for deep stacks
with a small beta and its argmax read 0; P's row is now also computed in log space. "Moves" as in 4-5,
against the bracket [k*(g_L), k*(even split)]. implicit-differentiation had no point where every grid
point saturates; the root at two layers stands in, and a beta too small for even that is refused (its
declared minimum is now 0.56, below which no theta has one). rope-weaker-than-decay is the paper's claim
at its settings: it is judged there (this run's own comparison is shown, not judged), and compare_depths
needs a depth above 1. half_weight_rows rotated every key at once (1.2 GB and more, exit 1); in chunks now.
"""
from __future__ import annotations

import pytest

from param_space import try_point
from posbias.chapters import get_chapter


@pytest.fixture(autouse=True)
def _scratch_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("POSBIAS_CACHE", str(tmp_path / "cache"))


RUNS = [   # (chapter, overrides of the smoke profile): each crashed or failed a check, and now passes
    # the three crashes of the brief: check (a)'s empty selection
    ("wu-thm-4-5", {"depth_grid": [911, 2], "band_depth": 42, "samples": 2, "n_identity": 126, "n_tokens": 768}),
    ("wu-thm-4-5", {"depth_grid": [1, 334, 63, 3, 480, 594], "d": 2}),
    ("wu-thm-4-5", {"band_depth": 7, "n_band": 84, "m_grid": [0.1627, 0.3053, 4.8904, 0.0558], "samples": 5,
                    "depth_grid": [1, 160, 500], "seed": 19651}),
    # compared at e^{-698} below the row's largest, at float64's edge: 2e-10 off (now within e^{-600})
    ("wu-thm-4-5", {"m_grid": [2.1922296171808675, 0.18749276629926132], "depth_grid": [3, 1051],
                    "n_identity": 804, "gamma": 0.999}),
    ("wu-thm-4-5", {"seed": 1820, "d": 120, "depth_grid": [61]}),          # the figure: no depth <= 32
    ("wu-thm-4-5", {"depth_grid": [1]}),                                   # one depth: nothing can move
    ("wu-thm-4-5", {"m_grid": [2.8720367526457986]}),                      # every peak at k = 0
    ("wu-thm-4-5", {"samples": 50, "d": 46, "seed": 43147, "n_tokens": 46}),   # deep depths skipped
    # Lemma 4.6's ratio, e^{63.4 (1 - cos 0.79)}: 2.7e-6 off in absolute terms
    ("wu-thm-4-7", {"gamma": 0.31298815614636644, "d_model": 82, "beta": 63.40238776009136,
                    "compare_depths": [35, 1, 6], "phi": 0.792529847001142, "depth_grid": [3, 37], "n_lemma": 246}),
    # the matrix product overflowed (NaN); every grid point saturates: the slopes at two layers
    ("wu-thm-4-7", {"d_model": 122, "beta": 30.4, "depth_grid": [232, 220]}),
    ("wu-thm-4-7", {"depth_grid": [4]}),                                   # one depth: nothing can move
    ("wu-thm-4-7", {"theta_grid": [0.46456949895194233]}),                 # pi/(2 theta) = 3: saturated
    ("wu-thm-4-7", {"gamma": 0.999, "compare_depths": [2, 6]}),           # the decay mask's peak further back
    ("wu-thm-4-7", {"base": 3.3, "compare_depths": [44]}),                 # a fast slowest pair
    # P's window underflowed at 192 and 256 layers (argmax 0: not non-decreasing in L)
    ("wu-thm-4-7", {"theta_grid": [0.0055, 0.5], "depth_grid": [2, 192, 256], "beta": 0.62}),
    ("wu-thm-4-7", {"theta_grid": [0.5], "beta": 0.56}),                   # the smallest beta declared
]

REFUSED = [   # (chapter, overrides, what the refusal names): these failed a check, and are now refused
    ("wu-thm-4-7", {"compare_depths": [1]}, "any(L > 1 for L in compare_depths)"),
    ("wu-thm-4-7", {"beta": 0.6}, "any(log(1 + 2 * th / 3.141592653589793) < beta * th"),
    ("wu-thm-4-7", {"beta": 0.5}, "below the minimum"),
]


@pytest.mark.parametrize("cid, over", RUNS, ids=[f"{c}-{i}" for i, (c, _) in enumerate(RUNS)])
def test_point_runs_every_check_to_a_pass(cid, over):
    code, what = try_point(get_chapter(cid), over, float("inf"))
    assert code == 0, what


@pytest.mark.parametrize("cid, over, why", REFUSED, ids=[f"{c}-{i}" for i, (c, _, _) in enumerate(REFUSED)])
def test_point_is_refused_with_its_reason(cid, over, why):
    code, what = try_point(get_chapter(cid), over, float("inf"), execute=False)
    assert code == 2 and why in what, what


def test_half_weight_rows_memory_is_in_the_cost_model():
    """The point that asked for 1.2 GB at once (exit 1): its rows reach pi/theta_slow = 1.9 million
    positions, which the cost model now counts (it said 452 MiB and 5 s)."""
    from posbias import cost

    ch = get_chapter("wu-thm-4-7")
    over = {"compare_depths": [58, 47, 55, 27], "d_model": 490, "theta_grid": [0.015, 0.3333333333333333,
            0.016925335527090603, 0.033408691978788874], "beta": 5.333333333333333, "depth_grid": [75],
            "base": 622780.314972638}
    est = cost.estimate(ch, ch.resolve("smoke", over))
    assert est.seconds > 20 and est.memory_mb > 900
