"""What a trained unit is: one (configuration, seed) with its training settings, the device and
threads it trains with, and the fixed test sets every unit is measured on."""
from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from typing import Any

import torch

from posbias.science.model import MemberConfig
from posbias.science.task import TaskConfig, TestSet, ic_test_sets, sweep_test_sets

UNIT_EXPERIMENT = "wu-units"
VERSION = 2                 # 2: fused softmax, complex RoPE, O(m^2) class draws (1 gave other roundings)
TEST_SEED = 20250201        # the fixed test sets shared by every unit of the exploratory campaigns
SINK_SEED = 10**9           # batches for attention maps; far from any training seed
#: The fresh test draw of the confirmation campaign (the ``confirm`` profile, issue 68): its IC sets,
#: sweep and attention batches share no sequence with the exploratory ones. Chosen before any
#: confirmation unit trained (the date of the register's freeze).
CONFIRM_TEST_SEED = 20261203
HELDOUT_STEP = 10**9        # the held-out set is the training batch of this step: no run trains that long
DEVICES = ("auto", "cpu", "cuda")


def device() -> torch.device:
    """The device training uses: ``$POSBIAS_DEVICE`` (``cpu``, ``cuda`` or ``auto``, as ``posbias run
    --device`` sets it), and with ``auto`` or unset CUDA when present, else the CPU."""
    want = os.environ.get("POSBIAS_DEVICE", "auto").strip() or "auto"
    if want not in DEVICES:
        raise ValueError(f"POSBIAS_DEVICE={want!r}: choose one of {', '.join(DEVICES)}")
    if want == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("POSBIAS_DEVICE=cuda, but torch sees no CUDA device; use cpu or auto")
    if want == "auto":
        want = "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(want)


def default_threads() -> int:
    """Torch threads: ``$POSBIAS_THREADS`` if set, else half the cores this process may use (>= 1).

    On two shared cores, oversubscribed torch threads run several times slower than one thread.
    """
    if os.environ.get("POSBIAS_THREADS"):
        return max(1, int(os.environ["POSBIAS_THREADS"]))
    return max(1, len(os.sched_getaffinity(0)) // 2)


@dataclass(frozen=True)
class Unit:
    """One (configuration, seed) and the training settings it needs: a pure function of these."""

    depth: int
    config: MemberConfig
    target_slots: tuple[int, ...] | None
    seed: int
    steps: int
    batch_size: int = 128
    lr: float = 1e-3
    weight_decay: float = 1e-6
    eval_every: int = 1000
    n_test: int = 10000
    n_sweep: int = 2000
    n_sink: int = 1000
    #: A stopping rule of :data:`posbias.measures.convergence.RULES`: train until it holds, ``steps`` at most
    #: (the ``converged`` profile). None: exactly ``steps`` (the key then omits it, as before it existed).
    stop_rule: str | None = None
    #: Sequences of the fixed held-out set (``None``: none, and the key omits it). When set, every
    #: evaluation also records the position sweep and the cross-entropy on the held-out set (the
    #: training distribution of the unit's own task, batch :data:`HELDOUT_STEP`, which no run trains
    #: on), and the weights at the evaluation of lowest held-out loss are kept (the ``budget`` profile).
    n_heldout: int | None = None
    #: The seed of the test draw: the IC sets (``test_seed``), the sweep (``test_seed + 1``) and the
    #: attention batches (:attr:`sink_seed`). Always in the key; :data:`TEST_SEED` for every unit of
    #: the exploratory campaigns, :data:`CONFIRM_TEST_SEED` for the confirmation campaign's.
    test_seed: int = TEST_SEED

    @property
    def sink_seed(self) -> int:
        """The seed of the attention-map batches: :data:`SINK_SEED` on the fixed draw, moved with a
        fresh draw by the same offset (still far from any training seed)."""
        return SINK_SEED + (self.test_seed - TEST_SEED)

    def params(self) -> dict[str, Any]:
        """The store key: everything the result depends on."""
        return {"depth": self.depth, **self.config.to_dict(),
                "target_slots": None if self.target_slots is None else list(self.target_slots),
                "seed": self.seed, "steps": self.steps, "batch_size": self.batch_size, "lr": self.lr,
                "weight_decay": self.weight_decay, "eval_every": self.eval_every, "n_test": self.n_test,
                "n_sweep": self.n_sweep, "n_sink": self.n_sink, "test_seed": self.test_seed,
                **({"stop_rule": self.stop_rule} if self.stop_rule is not None else {}),
                **({"n_heldout": self.n_heldout} if self.n_heldout is not None else {})}

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> "Unit":
        """The unit whose :meth:`params` are ``params`` (a stored record's, a checkpoint's). Raises
        ValueError when they do not round-trip (a field changed since)."""
        cfg = MemberConfig(**{f.name: params[f.name] for f in dataclasses.fields(MemberConfig)})
        kw: dict[str, Any] = {}
        for f in dataclasses.fields(cls):
            if f.name == "config":
                kw[f.name] = cfg
            elif f.name == "target_slots":
                kw[f.name] = None if params[f.name] is None else tuple(params[f.name])
            elif f.name in ("stop_rule", "n_heldout"):
                kw[f.name] = params.get(f.name)
            else:
                kw[f.name] = params[f.name]
        unit = cls(**kw)
        if unit.params() != params:
            raise ValueError("the stored parameters do not round-trip through Unit (a field changed)")
        return unit

    def shape_key(self) -> tuple:
        """Units with equal keys can share one ensemble."""
        return (self.depth, self.steps, self.batch_size, self.lr, self.weight_decay, self.eval_every,
                self.n_test, self.n_sweep, self.n_sink, self.config.rope_base, self.stop_rule,
                self.n_heldout, self.test_seed)

    def group_key(self) -> tuple:
        """How campaigns group units into ensembles: by :meth:`shape_key` and PE, so that RoPE and
        the sinusoidal PE act on whole ensembles (a mixed one pays a gather and a scatter; measured in
        ``benchmarks/train_throughput.py``). Grouping never changes a unit's result. A unit with a
        stopping rule trains alone (its seed in the key): it stops when its own curves say so."""
        alone = () if self.stop_rule is None else (self.config, self.seed)
        return (*self.shape_key(), self.config.pe, *alone)


_TEST_CACHE: dict[tuple, Any] = {}


def test_sets(n_test: int, n_sweep: int, cfg: TaskConfig, seed: int = TEST_SEED
              ) -> tuple[dict[str, TestSet], list[TestSet]]:
    """The six ``IC`` test sets of ``n_test`` sequences and the position sweep of ``n_sweep`` per
    slot, drawn from ``seed`` (:data:`TEST_SEED`: the same for every exploratory unit; memoised)."""
    key = (n_test, n_sweep, cfg, seed)
    if key not in _TEST_CACHE:
        _TEST_CACHE[key] = (ic_test_sets(n_test, seed, cfg), sweep_test_sets(n_sweep, seed + 1, cfg))
    return _TEST_CACHE[key]


def unit_key(unit: Unit | dict[str, Any]) -> str:
    """A unit's identity as a string (its params as sorted JSON), given the unit or its params."""
    return json.dumps(unit.params() if isinstance(unit, Unit) else unit, sort_keys=True)
