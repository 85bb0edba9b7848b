"""The LayerNorm stack's simulations as stored results (experiment ``kim-sim``) and the chapters' check on them.

:func:`cached_simulate` runs :func:`posbias.science.lnsim.simulate` once per parameter set and reads committed runs
from ``data/``; ``posbias check-data`` re-runs :func:`simulate_record`.
"""
from __future__ import annotations

import inspect

import torch

from posbias.storage import report, store
from posbias.science.lnsim import SimResult, simulate
from posbias.storage.recompute import recomputable

__all__ = ["simulate_record", "cached_simulate", "check_layer1_moments"]


@recomputable("kim-sim", atol=0.0,
              tolerance_note="float64 on one thread with fixed random blocks; bit-identical on 1 and 2 threads",
              other_cpu_atol=1e-12,
              other_cpu_note=("float64 roundings of another CPU's kernels: the cheapest record recomputed on "
                              "a second CPU differed by at most 3.6e-15"))
def simulate_record(params: dict) -> dict:
    """The stored result of experiment ``kim-sim`` for ``params`` (the full keyword set of :func:`simulate`).

    The compute of :func:`cached_simulate`, and what ``posbias check-data`` re-runs: one torch thread.
    """
    torch.set_num_threads(1)
    return simulate(**params).to_dict()


def _sim_defaults() -> dict:
    """:func:`simulate`'s keyword defaults that name a result (all but ``max_bytes``), in signature order."""
    return {k: p.default for k, p in inspect.signature(simulate).parameters.items() if k != "max_bytes"}


def cached_simulate(version: int = 1, **params) -> SimResult:
    """:func:`simulate` through ``store.cached`` (experiment ``kim-sim``), so committed runs are read from ``data/``."""
    full = {**_sim_defaults(), **params}
    return SimResult.from_dict(store.cached("kim-sim", full, lambda: simulate_record(full), version=version,
                                            seeds=[full["seed"]]))


def check_layer1_moments(moments: dict) -> None:
    """The chapters' ``layer1-moments`` check over :func:`posbias.science.lnsim.layer1_moments_check` results (any
    keys): passes when no grid point's mean or variance exceeds its allowance."""
    report.check("layer1-moments", "layer-1 off-diagonal LN scores, pooled over entries: mean within d^{-3/2} + 4.5 SE "
                 "of sqrt(d) E r (Fisher), variance within max(30/d^2, 10/((1-alpha^2)^2 d^3)) relative + 4.5 SE of "
                 "(1-alpha^2)^2 (1 + a1/d + a2/d^2) (Hotelling)",
                 value={"mean excess": max(m["mean_excess"] for m in moments.values()),
                        "variance excess": max(m["var_excess"] for m in moments.values()),
                        # what the check can see at this run's widths and simulations: an error in the
                        # predicted mean or variance larger than its allowance (the largest over the grid)
                        "smallest mean error seen": max(abs(m["mean_mc"] - m["mean_pred"]) - m["mean_excess"]
                                                        for m in moments.values()),
                        "smallest variance error seen": max(abs(m["var_mc"] - m["var_pred"]) - m["var_excess"]
                                                            for m in moments.values()),
                        "as a share of the predicted variance": max(
                            ((abs(m["var_mc"] - m["var_pred"]) - m["var_excess"]) / abs(m["var_pred"])
                             for m in moments.values() if m["var_pred"]), default=None)},
                 expected="both <= 0",
                 passed=all(m["mean_excess"] <= 0 and m["var_excess"] <= 0 for m in moments.values()))
