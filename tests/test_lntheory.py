"""The closed forms of posbias.lntheory (also reachable as posbias.lnsim.X)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch


def test_lnsim_reexports_the_closed_forms():
    from posbias import lnsim, lntheory

    for name in lntheory.__all__:
        assert getattr(lnsim, name) is getattr(lntheory, name), name


def test_next_order_tol_is_below_the_nearest_wrong_answer():
    from posbias.lntheory import next_order_tol

    # relative error 1 is a closed form of zero, 2 one of the opposite sign
    assert all(next_order_tol(d) < 1 for d in (4, 12, 16, 64, 1024))
    assert math.isclose(next_order_tol(64), 1.5 / 8)


def test_layer1_moments_check_passes_the_simulation_and_fails_wrong_moments(monkeypatch):
    from posbias import lnsim, lntheory

    res = lnsim.simulate(n=6, d=16, alpha=0.5, depth=1, sims=20000, seed=3)
    ok = lntheory.layer1_moments_check(res, 16, 0.5)
    assert ok["mean_excess"] <= 0 and ok["var_excess"] <= 0
    # the paper's weights drop the log-normal variance: the variance check must fail
    monkeypatch.setattr(lntheory, "layer1_offdiag_moments", lambda d, a: (math.sqrt(d) * a, 0.0))
    bad = lntheory.layer1_moments_check(res, 16, 0.5)
    assert bad["var_excess"] > 0 and bad["mean_excess"] > 0   # no Fisher correction: 0.094 off at d = 16


def test_layer1_moments_variance_second_order_matches_sample_correlation():
    """Hotelling's variance of sqrt(d) r to second order (the library's a1, a2) against sample correlations
    of d pairs drawn directly, within the next term's bound 10/((1-alpha^2)^2 d^3) plus 4.5 SE. At alpha = 0.8,
    d = 32 that is 0.007 of v, while a1 one alpha^2 off moves the prediction by alpha^2/d = 0.02 of v and a2 with
    its 11 alpha^2 flipped by 22 alpha^2/d^2 = 0.014; the second-order term itself (0.019) is resolved."""
    from posbias import lntheory

    rng = np.random.default_rng(0)
    d, alpha, n = 32, 0.8, 2_000_000
    rs = []
    for _ in range(n // 200_000):
        z = rng.standard_normal((200_000, d))
        y = alpha * z + math.sqrt(1 - alpha**2) * rng.standard_normal((200_000, d))
        zc, yc = z - z.mean(1, keepdims=True), y - y.mean(1, keepdims=True)
        rs.append((zc * yc).sum(1) / np.sqrt((zc * zc).sum(1) * (yc * yc).sum(1)))
    measured = float(np.var(math.sqrt(d) * np.concatenate(rs)))
    v = lntheory.layer1_offdiag_moments(d, alpha)[1]                         # (1 - alpha^2)^2
    assert v == pytest.approx((1 - alpha**2) ** 2)
    allowed = v * (10 / ((1 - alpha**2) ** 2 * d**3) + 4.5 * math.sqrt(2 / n))
    assert abs(measured - lntheory.layer1_var_second_order(d, alpha)) < allowed
    first_order = v * (1 + (1 + 5.5 * alpha**2) / d)
    assert abs(measured - first_order) > allowed                             # the 1/d^2 term is resolved


def test_layer2_without_layernorm_is_the_mean_field_recursion():
    """Two derivations of the no-LN layer-2 scores: the direct formula and noln_mean_field's recursion."""
    from posbias import lntheory

    direct = lntheory.layer2_scores(7, 32, 0.4, layernorm=False)
    recursion = lntheory.noln_mean_field(7, 32, 0.4, 2)[1]
    low = ~torch.isnan(direct)
    assert torch.allclose(direct[low], recursion[low], rtol=1e-12, atol=0)



def test_noln_score_variance_is_the_measured_variance_over_keys():
    """Without LayerNorm, two keys j, k of row i differ in score by (z_i + l u).(z_j - z_k)/(d sqrt d), of
    variance exactly 2 (1 + l^2)/d^2: measured on lnsim's own inputs within 5 standard errors of a variance (the
    nearest wrong answers, 2/d^2 and 2 l^2/d^2, are a factor 5 and 5/4 away at alpha 0.8)."""
    from posbias import lnsim, lntheory

    d, alpha, sims = 16, 0.8, 200_000
    assert lntheory.noln_score_variance(4, 0.5) == 2 / 16
    x = lnsim.sample_inputs(sims, 3, d, alpha, torch.Generator().manual_seed(5))
    s = x @ x.transpose(-1, -2) / math.sqrt(d)
    diff = (s[:, 2, 0] - s[:, 2, 1]).numpy()
    var, var_se = diff.var(), diff.var() * math.sqrt(2 / (sims - 1))      # SE of a variance, near-normal data
    want = 2 * lntheory.noln_score_variance(d, alpha)
    assert abs(var - want) <= 5 * var_se, (var, want)                    # exact: E|z_i + l u|^2 = d (1 + l^2)
    assert 5 * var_se < 0.2 * want                                       # resolves the factor 5/4 to l^2 alone
