"""The in-context classification task of Reddy (2024), as Wu et al. (2025) train on it.

A sequence is ``x_1 l_1 x_2 l_2 ... x_N l_N x_q``: ``N`` items with their label vectors, then a
query item; ``T = 2N + 1`` tokens of width ``D``. Items come from a Gaussian mixture of ``K``
classes: ``x = (mu_k + eps * eta) / sqrt(1 + eps^2)``, with class means ``mu``, label vectors and
noise ``eta`` all ``N(0, (1/D)^2 I)``. A fixed random map sends the ``K`` classes to ``L`` labels.
With burstiness ``B`` a sequence holds ``N/B`` distinct classes, ``B`` copies each, shuffled. The
query's class is the class at one *target slot*; drawing that slot from a set (``{0, N-1}``,
``{0}``, ...) puts position bias into the training data.

Everything here is vectorised over the batch and seeded: a training batch is a pure function of
``(seed, step)``. Slots are 0-based items (item ``s`` sits at token ``2s``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

__all__ = [
    "accuracy",
    "TaskConfig",
    "Task",
    "TestSet",
    "generator",
    "distinct",
    "make_task",
    "train_batch",
    "ensemble_batch",
    "ic_test_set",
    "IC_PAIRS",
    "SLOT_NAMES",
    "slot_index",
    "ic_test_sets",
    "sweep_test_sets",
    "embed",
]

#: The three slots of the paper's test sets.
SLOT_NAMES = ("first", "middle", "last")
#: The six ``IC_<correct>_<distractor>`` sets, as (correct, distractor) pairs.
IC_PAIRS = (
    ("first", "middle"), ("middle", "first"),
    ("first", "last"), ("last", "first"),
    ("middle", "last"), ("last", "middle"),
)


@dataclass(frozen=True)
class TaskConfig:
    """Sizes of the task; the defaults are the settings of Wu et al. (Appendix J and their code)."""

    n_items: int = 8          # N
    n_classes: int = 2048     # K
    n_labels: int = 32        # L
    dim: int = 64             # D (also the model width)
    burstiness: int = 4       # B
    eps: float = 0.75         # within-class noise

    def __post_init__(self) -> None:
        if self.n_items % self.burstiness:
            raise ValueError(f"N={self.n_items} must be divisible by B={self.burstiness}")

    @property
    def n_tokens(self) -> int:
        """``T = 2N + 1``."""
        return 2 * self.n_items + 1


def slot_index(name: str | int, n_items: int) -> int:
    """0-based item slot of ``first`` (0), ``middle`` (``N // 2``) or ``last`` (``N - 1``)."""
    if isinstance(name, int):
        if not 0 <= name < n_items:
            raise ValueError(f"slot {name} outside 0..{n_items - 1}")
        return name
    table = {"first": 0, "middle": n_items // 2, "last": n_items - 1}
    if name not in table:
        raise ValueError(f"unknown slot {name!r}; choose one of {SLOT_NAMES} or an integer")
    return table[name]


def generator(*words: int) -> torch.Generator:
    """A CPU generator seeded by a tuple of non-negative integers (via numpy's SeedSequence)."""
    state = np.random.SeedSequence([int(w) for w in words]).generate_state(2, dtype=np.uint32)
    return torch.Generator().manual_seed(int(state[0]) << 32 | int(state[1]))


# Streams of the SeedSequence, so that task, batches and tests never share random numbers.
_TASK, _BATCH, _TEST = 0, 1, 2


@dataclass
class Task:
    """The fixed parts of one training task: class means ``(K, D)``, label vectors ``(L, D)``,
    and the class-to-label map ``(K,)``."""

    config: TaskConfig
    class_means: torch.Tensor
    label_vectors: torch.Tensor
    class_labels: torch.Tensor


def make_task(seed: int, config: TaskConfig = TaskConfig()) -> Task:
    """Draw the class means, label vectors and class-to-label map of task ``seed``."""
    g = generator(seed, _TASK)
    d = config.dim
    means = torch.randn(config.n_classes, d, generator=g) / d
    labels = torch.randn(config.n_labels, d, generator=g) / d
    cmap = torch.randint(config.n_labels, (config.n_classes,), generator=g)
    return Task(config, means, labels, cmap)


def distinct(b: int, m: int, n: int, g: torch.Generator) -> torch.Tensor:
    """``(b, m)`` integers of ``[0, n)``, distinct within each row: uniform draws without replacement.

    Draw ``i`` is uniform over the ``n - i`` values left, found by shifting a uniform integer of
    ``[0, n - i)`` past the values already drawn (in increasing order). ``O(b m^2)`` work, not
    ``O(b n)``: the paper's ``K = 2048`` classes never need a random number each.
    """
    if not 0 <= m <= n:
        raise ValueError(f"cannot draw {m} distinct values out of {n}")
    out = torch.empty(b, m, dtype=torch.long)
    for i in range(m):
        r = torch.randint(n - i, (b,), generator=g)
        for p in out[:, :i].sort(dim=1).values.unbind(1):
            r = r + (r >= p)
        out[:, i] = r
    return out


def _arrangement(b: int, cfg: TaskConfig, n_pool: int, g: torch.Generator) -> torch.Tensor:
    """Classes at the ``N`` slots, ``(b, N)`` indices into a pool of ``n_pool`` classes:
    ``N/B`` distinct classes, ``B`` copies each, in random order."""
    n_cls = cfg.n_items // cfg.burstiness
    chosen = distinct(b, n_cls, n_pool, g)                                            # (b, N/B) distinct
    pattern = torch.arange(cfg.n_items) % n_cls                                       # (N,)
    perm = torch.rand(b, cfg.n_items, generator=g).argsort(dim=1)                     # (b, N)
    return chosen.gather(1, pattern[perm])


def _items(means: torch.Tensor, eps: float, g: torch.Generator) -> torch.Tensor:
    """Noisy items ``(mu + eps * eta) / sqrt(1 + eps^2)`` for class means ``means`` ``(..., D)``."""
    d = means.shape[-1]
    eta = torch.randn(means.shape, generator=g) / d
    return (means + eps * eta) / math.sqrt(1 + eps**2)


def embed(items: torch.Tensor, item_labels: torch.Tensor, query: torch.Tensor,
          label_vectors: torch.Tensor) -> torch.Tensor:
    """Interleave items ``(..., N, D)``, label ids ``(..., N)`` and query ``(..., D)`` into tokens
    ``(..., 2N+1, D)``."""
    lab = label_vectors[item_labels]                                   # (..., N, D)
    pairs = torch.stack((items, lab), dim=-2).flatten(-3, -2)          # (..., 2N, D)
    return torch.cat((pairs, query.unsqueeze(-2)), dim=-2)


def train_batch(task: Task, seed: int, step: int, batch_size: int,
                target_slots: tuple[int, ...] | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Training batch ``step`` of run ``seed``: tokens ``(b, T, D)`` and target labels ``(b,)``.

    The query's class is the class at a slot drawn uniformly from ``target_slots``
    (``None`` = all ``N`` slots, i.e. no position bias).
    """
    cfg = task.config
    g = generator(seed, _BATCH, step)
    b = batch_size
    cls = _arrangement(b, cfg, cfg.n_classes, g)                                    # (b, N)
    slots = torch.arange(cfg.n_items) if target_slots is None else torch.tensor(target_slots)
    s = slots[torch.randint(len(slots), (b,), generator=g)]
    qcls = cls.gather(1, s.unsqueeze(1)).squeeze(1)                                 # (b,)
    items = _items(task.class_means[cls], cfg.eps, g)
    query = _items(task.class_means[qcls], cfg.eps, g)
    tokens = embed(items, task.class_labels[cls], query, task.label_vectors)
    return tokens, task.class_labels[qcls]


def ensemble_batch(tasks: list[Task], seeds: list[int], target_slots: list[tuple[int, ...] | None],
                   step: int, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack the batches of several runs: tokens ``(E, b, T, D)`` and targets ``(E, b)``."""
    out = [train_batch(t, s, step, batch_size, ts) for t, s, ts in zip(tasks, seeds, target_slots)]
    return torch.stack([o[0] for o in out]), torch.stack([o[1] for o in out])


@dataclass
class TestSet:
    """Test sequences with novel classes, independent of any task except for the label vectors.

    ``items`` ``(n, N, D)``, ``item_labels`` ``(n, N)`` label ids, ``query`` ``(n, D)``, ``target`` ``(n,)``.
    Tokens for a run with label vectors ``V`` are ``embed(items, item_labels, query, V)``.
    """

    name: str
    items: torch.Tensor
    item_labels: torch.Tensor
    query: torch.Tensor
    target: torch.Tensor

    def tokens(self, label_vectors: torch.Tensor) -> torch.Tensor:
        return embed(self.items, self.item_labels, self.query, label_vectors)


def ic_test_set(correct: str | int, distractor: str | int | None, n_seqs: int, seed: int,
                config: TaskConfig = TaskConfig()) -> TestSet:
    """``IC_<correct>_<distractor>`` with fresh (novel) class means for every sequence.

    Each sequence draws ``N/B`` novel class means and a random label for each, arranges them with
    burstiness ``B`` like training data, and takes the query's class from slot ``correct``. The
    item at ``distractor`` is then overwritten with an exact copy of the correct item, keeping its
    own label (as in the authors' code; with ``B > 1`` the distractor slot may already hold the
    query's class, and other copies of that class stay in the context). ``distractor=None`` leaves
    the sequence alone. Only the ``N/B`` classes a sequence uses are drawn, not all ``K``.
    """
    cfg = config
    c = slot_index(correct, cfg.n_items)
    dslot = None if distractor is None else slot_index(distractor, cfg.n_items)
    if dslot == c:
        raise ValueError("correct and distractor slots must differ")
    g = generator(seed, _TEST, c, cfg.n_items if dslot is None else dslot, cfg.burstiness)
    n_cls = cfg.n_items // cfg.burstiness
    means = torch.randn(n_seqs, n_cls, cfg.dim, generator=g) / cfg.dim                 # novel classes
    labels = torch.randint(cfg.n_labels, (n_seqs, n_cls), generator=g)
    local = _arrangement(n_seqs, cfg, n_cls, g)                                         # (n, N) in 0..n_cls-1
    qloc = local[:, c]
    items = _items(means.gather(1, local.unsqueeze(-1).expand(-1, -1, cfg.dim)), cfg.eps, g)
    query = _items(means[torch.arange(n_seqs), qloc], cfg.eps, g)
    if dslot is not None:
        items[:, dslot] = items[:, c]
    name = f"IC_{correct}_{distractor}" if distractor is not None else f"IC_{correct}"
    return TestSet(name, items, labels.gather(1, local), query, labels.gather(1, qloc.unsqueeze(1)).squeeze(1))


def ic_test_sets(n_seqs: int, seed: int, config: TaskConfig = TaskConfig()) -> dict[str, TestSet]:
    """The six ``IC_<correct>_<distractor>`` sets of the paper, keyed by name."""
    return {f"IC_{a}_{b}": ic_test_set(a, b, n_seqs, seed, config) for a, b in IC_PAIRS}


def sweep_test_sets(n_seqs: int, seed: int, config: TaskConfig = TaskConfig(),
                    distractor: str | int | None = None) -> list[TestSet]:
    """Position sweep: one test set per target slot ``s = 0..N-1``, with burstiness 1.

    With ``B = 1`` the query's class sits at slot ``s`` only, so accuracy against ``s`` measures
    retrieval by position (with the task's ``B`` the target slot would not change the sequence
    distribution at all). With ``distractor`` set, that slot (when different from ``s``) gets an
    exact copy of the correct item with its own label; the set for ``s == distractor`` has none.
    """
    cfg1 = TaskConfig(config.n_items, config.n_classes, config.n_labels, config.dim, 1, config.eps)
    dslot = None if distractor is None else slot_index(distractor, config.n_items)
    return [ic_test_set(s, None if dslot in (None, s) else dslot, n_seqs, seed, cfg1)
            for s in range(config.n_items)]


def accuracy(net: torch.nn.Module, tasks: list[Task], ts: TestSet, chunk: int = 1024) -> torch.Tensor:
    """Share of ``ts`` each member of the ensemble ``net`` (an :class:`~posbias.science.model.EnsembleNet` or any module
    with its ``w_q`` device and ``n_members``) classifies correctly, ``(E,)``. Each member sees the test items
    with its own label vectors."""
    dev = net.w_q.device
    correct = torch.zeros(net.n_members)
    for lo in range(0, len(ts.target), chunk):
        sl = slice(lo, lo + chunk)
        part = TestSet(ts.name, ts.items[sl], ts.item_labels[sl], ts.query[sl], ts.target[sl])
        x = torch.stack([part.tokens(t.label_vectors) for t in tasks]).to(dev)
        pred = net(x).argmax(-1).cpu()
        correct += (pred == part.target).float().sum(1)
    return correct / len(ts.target)
