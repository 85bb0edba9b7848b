"""Tests of posbias.analysis.lnruns: the simulations stored under their parameters, and the chapters' layer-1 check."""
from __future__ import annotations

import inspect

import numpy as np
import pytest

from posbias.science import lnsim
from posbias.storage import report
from posbias.analysis import lnruns


def test_layer1_moments_check_states_the_smallest_error_it_can_see(fresh):
    """Two grid points: allowances recovered from each result (|MC - prediction| - excess), the larger
    reported; the verdict fails where either excess is positive."""

    pts = {"a": dict(mean_excess=-0.03, var_excess=-0.2, mean_pred=1.0, mean_mc=1.01, var_pred=2.0, var_mc=2.1),
           "b": dict(mean_excess=-0.01, var_excess=-0.05, mean_pred=0.5, mean_mc=0.45, var_pred=1.0, var_mc=0.9)}
    lnruns.check_layer1_moments(pts)
    (c,) = report.record()["checks"]
    assert c["passed"] and c["value"]["smallest mean error seen"] == pytest.approx(0.06)        # 0.05 + 0.01
    assert c["value"]["smallest variance error seen"] == pytest.approx(0.3)                    # 0.1 + 0.2
    assert c["value"]["as a share of the predicted variance"] == pytest.approx(0.15)         # (0.1 + 0.2) / 2
    report._RECORD["checks"] = []
    lnruns.check_layer1_moments({"z": {**pts["a"], "var_pred": 0.0}})      # a zero prediction: no share, no crash
    assert report.record()["checks"][-1]["value"]["as a share of the predicted variance"] is None
    report._RECORD["checks"] = []                                        # a second run of the same check
    lnruns.check_layer1_moments({**pts, "c": {**pts["a"], "var_excess": 0.01}})
    assert not report.record()["checks"][-1]["passed"]


def test_cached_simulate_stores_each_run_under_its_parameters_version_and_seed(tmp_path, monkeypatch):
    from posbias.storage import store

    monkeypatch.setenv("POSBIAS_CACHE", str(tmp_path))
    kw = dict(n=3, d=4, depth=1, sims=20)
    a, b = lnruns.cached_simulate(seed=1, **kw), lnruns.cached_simulate(seed=2, **kw)
    assert not np.array_equal(a.score_mean, b.score_mean, equal_nan=True)          # two keys, not one
    full = {**lnruns._sim_defaults(), **kw, "seed": 2}
    rec = store.lookup_record("kim-sim", full, version=1)
    assert rec is not None and rec["params"] == full and rec["provenance"]["seeds"] == [2]
    assert store.lookup_record("kim-sim", full, version=2) is None


def test_sim_defaults_are_simulates_result_defaults():
    """The defaults that name a result are every keyword of simulate but max_bytes, in signature order,
    with their values (n = 10, d = 64, seed 0 ...). Sees the filter inverted (only max_bytes kept)."""

    defaults = lnruns._sim_defaults()
    params = inspect.signature(lnsim.simulate).parameters
    assert list(defaults) == [k for k in params if k != "max_bytes"]
    assert "max_bytes" not in defaults and defaults["n"] == 10 and defaults["d"] == 64 and defaults["seed"] == 0


def test_check_layer1_moments_states_its_claim(fresh):
    """The claim the chapters print beside the verdict, word for word (Fisher's E r, Hotelling's variance)."""

    lnruns.check_layer1_moments({"a": dict(mean_excess=-0.03, var_excess=-0.2, mean_pred=1.0, mean_mc=1.01,
                                          var_pred=2.0, var_mc=2.1)})
    (c,) = report.record()["checks"]
    assert c["name"] == "layer1-moments"
    assert c["claim"] == (
        "layer-1 off-diagonal LN scores, pooled over entries: mean within d^{-3/2} + 4.5 SE of sqrt(d) E r "
        "(Fisher), variance within max(30/d^2, 10/((1-alpha^2)^2 d^3)) relative + 4.5 SE of "
        "(1-alpha^2)^2 (1 + a1/d + a2/d^2) (Hotelling)")
