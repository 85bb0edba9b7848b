"""posbias.science.lnsim beside tests/test_lnsim.py: its inputs, its score-map drawing and its report check, each
against a value worked out by hand."""
from __future__ import annotations

import torch

from posbias.science import lnsim


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


