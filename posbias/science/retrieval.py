"""What simple strategies score on the in-context task's tests: the baselines a trained network is read against.

Before a position gap measured on a network means "retrieval prefers the first item", the network must
retrieve. These are the strategies it could be using instead, each in two independent forms:

* a **closed form** in the task's sizes (``N`` items, burstiness ``B``, ``L`` labels), derived in the
  Figure 2 chapter, where one exists (:func:`closed_forms`);
* an **oracle network**: a module with :class:`~posbias.science.model.EnsembleNet`'s interface (tokens
  ``(1, b, T, D)`` -> label logits ``(1, b, L)``) whose forward pass *is* the strategy, measured by the
  project's own :func:`posbias.science.task.accuracy` on the project's own test sets (:func:`baselines`).

The strategies (keys of both):

``uniform``        a label drawn uniformly: ``1/L``.
``copy_random``    the label of a context slot drawn uniformly; ignores query and items.
``copy_slot``      the label of one fixed slot, the best one; ignores query and items.
``ignore_best``    the best strategy that reads only labels and positions: on the ``IC`` sets the majority label
                   of the slots first, middle and last; on the sweep the most frequent context label. No strategy
                   that ignores the query does better on the sweep (its context does not depend on the target
                   slot); on the ``IC`` sets, one that reads the items can (``dup_vote``).
``dup_vote``       ignores the query but reads the items: finds the exact copy the ``IC`` sets plant and votes the
                   labels of the items closest to it. Monte Carlo only.
``match_worst``    told the query's own item (on the ``IC`` sets it stands twice: the correct slot and its copy),
                   the worse of the two position tie-breaks (earlier or later slot). Any network that finds the
                   query's item scores at least this.
``match_nearest``  the item nearest the query (Euclidean), ties to the earlier slot. Monte Carlo only.

Accuracies are means over the six ``IC`` sets and over the ``N`` sets of the position sweep.
"""
from __future__ import annotations

import functools
import math
from fractions import Fraction

import torch
from torch import nn

from posbias.science.task import (IC_PAIRS, Task, TaskConfig, TestSet, accuracy, generator, ic_test_sets, make_task,
                                  slot_index, sweep_test_sets)

__all__ = ["STRATEGIES", "IGNORING", "Oracle", "closed_forms", "baselines", "max_count_mean", "MC_ONLY", "reading",
           "READINGS", "READING_RULE", "readable", "standing", "closest",
           "disagreements", "baseline_rows", "merged"]

STRATEGIES = ("uniform", "copy_random", "copy_slot", "ignore_best", "dup_vote", "match_worst", "match_nearest")
#: The strategies that read neither the query nor the items: a network near one of them copies labels by position.
IGNORING = ("uniform", "copy_random", "copy_slot", "ignore_best")
#: Strategies with no closed form here (their accuracy depends on the geometry of the Gaussian items).
MC_ONLY = ("dup_vote", "match_nearest")


# ----------------------------------------------------------------------------------- closed forms

@functools.lru_cache(maxsize=None)
def max_count_mean(n: int, n_labels: int) -> Fraction:
    """``E[max_l #{i : l_i = l}]`` for ``n`` labels drawn uniformly and independently from ``n_labels``,
    exactly: the distribution of the largest multiplicity by counting the assignments with every label
    used at most ``m`` times (exponential generating functions, truncated at ``m``)."""
    def at_most(m: int) -> int:                     # assignments of n balls to n_labels bins, each bin <= m
        poly = [Fraction(1, math.factorial(k)) for k in range(m + 1)]
        prod = [Fraction(1)]
        for _ in range(n_labels):
            nxt = [Fraction(0)] * min(len(prod) + m, n + 1)
            for i, a in enumerate(prod):
                for k, b in enumerate(poly):
                    if i + k <= n:
                        nxt[i + k] += a * b
            prod = nxt
        return int(prod[n] * math.factorial(n)) if n < len(prod) else 0

    total = n_labels ** n
    cdf = [Fraction(at_most(m), total) for m in range(n + 1)]
    return sum((m * (cdf[m] - cdf[m - 1]) for m in range(1, n + 1)), Fraction(0))


def closed_forms(config: TaskConfig = TaskConfig()) -> dict[str, dict[str, float | None]]:
    """The exact mean accuracy of each strategy on the six ``IC`` sets and on the sweep; ``None`` where
    there is no closed form (:data:`MC_ONLY`). Derivations: the chapter "What the trained networks learned".
    Each call returns a fresh dict (:func:`max_count_mean`, the costly part, is computed once per size)."""
    n, b, L = config.n_items, config.burstiness, Fraction(1, config.n_labels)
    # IC sets: B copies of the query's class, one at the correct slot c; the distractor slot d keeps its own label
    same = Fraction(b - 1, n - 1)                    # P(a slot other than c holds the query's class)
    q = same + (1 - same) * L                        # P(the label at a slot other than c is the query's label)
    ic_slots = {slot_index(s, n) for pair in IC_PAIRS for s in pair}
    per_slot = {s: (Fraction(sum(slot_index(c, n) == s for c, _ in IC_PAIRS)) + sum(slot_index(c, n) != s
                for c, _ in IC_PAIRS) * q) / len(IC_PAIRS) for s in range(n)}
    n_cls = n // b
    if n_cls == 2 and len(ic_slots) == 3:
        # two label groups of B slots each; the query's group is the one holding c, uniform over the three slots
        all_three = Fraction(2 * math.comb(n - 3, b - 3), math.comb(n, b)) if b >= 3 else Fraction(0)
        majority = all_three + (1 - all_three) * Fraction(2, 3)
        ignore_ic = majority + (1 - majority) * L    # wrong group: still right when both classes share a label
    else:
        ignore_ic = None
    ic = {"uniform": L, "copy_random": Fraction(b, n) + (1 - Fraction(b, n)) * L, "copy_slot": max(per_slot.values()),
          "ignore_best": ignore_ic, "dup_vote": None, "match_worst": Fraction(1, 2) + q / 2, "match_nearest": None}
    # sweep: B = 1, N distinct classes with independent labels; the context does not depend on the target slot
    one = Fraction(1, n) + (1 - Fraction(1, n)) * L
    sweep = {"uniform": L, "copy_random": one, "copy_slot": one,
             "ignore_best": max_count_mean(n, config.n_labels) / n, "dup_vote": max_count_mean(n, config.n_labels) / n,
             "match_worst": Fraction(1), "match_nearest": None}
    return {"ic": {k: None if v is None else float(v) for k, v in ic.items()},
            "sweep": {k: None if v is None else float(v) for k, v in sweep.items()}}


# ----------------------------------------------------------------------------------- oracle networks

class Oracle(nn.Module):
    """A strategy as a network: ``forward(tokens (1, b, T, D)) -> logits (1, b, L)``, one-hot at the chosen
    label, so that :func:`posbias.science.task.accuracy` measures it as it measures a trained network.

    It reads the tokens only (items at even positions, label vectors at odd ones, the query last), decoding a
    label token to its id by the task's label vectors; ``match_worst``, told the query's own item, learns it
    from :meth:`know` (the test sets it will see). ``tie`` is ``"earlier"`` or ``"later"``: where two items
    are identical, which slot ``match_worst`` takes. ``slot`` is ``copy_slot``'s slot."""

    def __init__(self, strategy: str, task: Task, *, seed: int = 0, slot: int = 0, tie: str = "earlier",
                 vote_slots: tuple[int, ...] | None = None) -> None:
        super().__init__()
        if strategy not in STRATEGIES:
            raise ValueError(f"unknown strategy {strategy!r}; choose one of {', '.join(STRATEGIES)}")
        if tie not in ("earlier", "later"):
            raise ValueError(f"tie must be 'earlier' or 'later', got {tie!r}")
        self.strategy, self.task, self.slot, self.tie = strategy, task, slot, tie
        n = task.config.n_items
        self.vote_slots = vote_slots or tuple(sorted({slot_index(s, n) for p in IC_PAIRS for s in p}))
        self.g = generator(seed, 7)
        self.register_buffer("w_q", torch.zeros(1))     # where task.accuracy looks for the device
        self.n_members = 1
        self._own: dict[bytes, int] = {}

    def know(self, sets: list[TestSet]) -> "Oracle":
        """Tell the oracle which item is the query's own in each sequence of ``sets`` (keyed by the query)."""
        for ts in sets:
            word = ts.name.split("_")[1]                                   # IC_<correct>[_<distractor>]
            c = slot_index(int(word) if word.isdigit() else word, self.task.config.n_items)
            self._own.update((q.numpy().tobytes(), c) for q in ts.query)
        return self

    def _labels(self, tokens: torch.Tensor) -> torch.Tensor:
        """Label ids of the context slots, ``(b, N)``: the nearest label vector (label tokens are exact)."""
        lab = tokens[:, 1:-1:2]                                              # (b, N, D)
        return torch.cdist(lab, self.task.label_vectors.expand(lab.shape[0], -1, -1)).argmin(-1)

    def _choose(self, tokens: torch.Tensor) -> torch.Tensor:
        """The label id each sequence answers, ``(b,)``."""
        b, n, L = tokens.shape[0], self.task.config.n_items, self.task.config.n_labels
        items, query, labels = tokens[:, 0:-1:2], tokens[:, -1], self._labels(tokens)
        rows = torch.arange(b)
        s = self.strategy
        if s == "uniform":
            return torch.randint(L, (b,), generator=self.g)
        if s == "copy_random":
            return labels[rows, torch.randint(n, (b,), generator=self.g)]
        if s == "copy_slot":
            return labels[:, self.slot]
        if s == "match_nearest":
            return labels[rows, (items - query[:, None]).square().sum(-1).argmin(-1)]
        same = (items[:, :, None] == items[:, None, :]).all(-1) & ~torch.eye(n, dtype=torch.bool)   # (b, N, N)
        if s == "match_worst":
            c = torch.tensor([self._own[q.numpy().tobytes()] for q in query])
            twin = same[rows, c]                                             # (b, N): the copy of c, if any
            has = twin.any(-1)
            d = twin.float().argmax(-1)
            pick = torch.where(has & ((d < c) == (self.tie == "earlier")), d, c)
            return labels[rows, pick]
        counts = torch.zeros(b, L).scatter_add_(1, labels, torch.ones(b, n))                    # (b, L)
        most = counts.argmax(-1)                                             # sweep-style: the most frequent label
        if s == "ignore_best":
            vote = torch.zeros(b, L).scatter_add_(1, labels[:, list(self.vote_slots)],
                                                  torch.ones(b, len(self.vote_slots)))
            return torch.where(same.any(-1).any(-1), vote.argmax(-1), most)
        # dup_vote: the labels of the duplicated item's B - 1 nearest other items, with its own two slots
        pair = same.any(-1)                                                  # (b, N): the two identical items
        out = most.clone()
        for i in torch.nonzero(pair.any(-1)).flatten().tolist():
            slots = torch.nonzero(pair[i]).flatten()
            d = (items[i] - items[i, slots[0]]).square().sum(-1)
            d[slots] = float("inf")
            near = d.argsort()[: self.task.config.burstiness - 1]
            pool = torch.cat((labels[i, slots], labels[i, near]))
            out[i] = torch.bincount(pool, minlength=L).argmax()
        return out

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """``tokens`` ``(1, b, T, D)`` -> one-hot logits ``(1, b, L)``."""
        if tokens.shape[0] != 1:
            raise ValueError("an oracle is one member: tokens (1, b, T, D)")
        pick = self._choose(tokens[0])
        return nn.functional.one_hot(pick, self.task.config.n_labels).float()[None]


def _mean_accuracy(oracle: Oracle, sets: list[TestSet]) -> float:
    return float(torch.stack([accuracy(oracle, [oracle.task], ts) for ts in sets]).mean())


def baselines(config: TaskConfig = TaskConfig(), n: int = 10000, seed: int = 0) -> dict[str, dict[str, float]]:
    """Monte Carlo: each strategy's mean accuracy on the six ``IC`` sets (``n`` sequences each) and on the
    position sweep (``n`` per slot), drawn from ``seed``, measured on oracle networks by
    :func:`posbias.science.task.accuracy`. ``copy_slot`` takes the best slot; ``match_worst`` the worse tie-break.
    Returns ``{"ic": {strategy: accuracy}, "sweep": {...}}``."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    task = make_task(seed, config)
    ic = list(ic_test_sets(n, seed, config).values())
    sweep = sweep_test_sets(n, seed + 1, config)
    out: dict[str, dict[str, float]] = {"ic": {}, "sweep": {}}
    for name, sets in (("ic", ic), ("sweep", sweep)):
        for s in STRATEGIES:
            if s == "copy_slot":
                val = max(_mean_accuracy(Oracle(s, task, slot=k), sets) for k in range(config.n_items))
            elif s == "match_worst":
                val = min(_mean_accuracy(Oracle(s, task, tie=t).know(sets), sets) for t in ("earlier", "later"))
            else:
                val = _mean_accuracy(Oracle(s, task, seed=seed), sets)
            out[name][s] = val
    return out


# ----------------------------------------------------------------------------------- the reading rule

#: The readings of a trained network, from the rule :func:`reading` applies.
READINGS = ("retrieves", "between", "ignores the query")
#: The rule, fixed before it was applied to any stored network (its commit precedes the column's).
READING_RULE = (
    "A network **retrieves** when its mean sweep accuracy exceeds what any strategy that ignores the query "
    "can score on the sweep (`ignore_best`, the most frequent context label) by more than three binomial "
    "standard errors of its own measurement. It **ignores the query** when it does not retrieve and its mean "
    "IC accuracy is at most the random copier's (`copy_random`) plus three binomial standard errors. "
    "Otherwise it is **between**: it does better than copying a random label on the IC sets, which a network "
    "can do without the query (`copy_slot`, `ignore_best`, `dup_vote`), yet shows no use of the query on "
    "the sweep.")


def reading(ic_mean: float, sweep_mean: float, n_test: int, n_sweep: int,
            config: TaskConfig = TaskConfig()) -> str:
    """The reading (:data:`READINGS`) of one network from its mean accuracy on the six ``IC`` sets (``n_test``
    sequences each) and on the sweep (``n_sweep`` per slot), by :data:`READING_RULE`."""
    base = closed_forms(config)
    ceiling, copier = base["sweep"]["ignore_best"], base["ic"]["copy_random"]
    se_sweep = math.sqrt(ceiling * (1 - ceiling) / (n_sweep * config.n_items))
    se_ic = math.sqrt(copier * (1 - copier) / (n_test * len(IC_PAIRS)))
    if sweep_mean > ceiling + 3 * se_sweep:
        return "retrieves"
    if ic_mean <= copier + 3 * se_ic:
        return "ignores the query"
    return "between"


def readable(results: list[dict]) -> bool:
    """Whether :func:`standing` can read these stored results (each with IC and sweep accuracies and params)."""
    return bool(results) and all(r is not None and {"ic_accuracy", "sweep_accuracy", "params"} <= set(r)
                                 for r in results)


def standing(results: list[dict], config: TaskConfig = TaskConfig()) -> dict[str, object]:
    """Where one configuration's networks stand: from their stored results (``ic_accuracy``, ``sweep_accuracy``
    and ``params``), the mean and range of IC and sweep accuracy over networks and each network's
    :func:`reading`. Returns ``{"networks", "ic_mean", "ic_range", "sweep_mean", "sweep_range", "readings"}``
    with ``readings`` the count of each of :data:`READINGS`."""
    if not results:
        raise ValueError("no stored networks to read")
    ic = [sum(r["ic_accuracy"].values()) / len(r["ic_accuracy"]) for r in results]
    sw = [sum(r["sweep_accuracy"]) / len(r["sweep_accuracy"]) for r in results]
    words = [reading(i, s, r["params"]["n_test"], r["params"]["n_sweep"], config) for i, s, r in zip(ic, sw, results)]
    return {"networks": len(results), "ic_mean": sum(ic) / len(ic), "ic_range": (min(ic), max(ic)),
            "sweep_mean": sum(sw) / len(sw), "sweep_range": (min(sw), max(sw)),
            "readings": {w: words.count(w) for w in READINGS}}


def closest(ic_mean: float, sweep_mean: float, base: dict[str, dict[str, float]],
            among: tuple[str, ...] = IGNORING) -> str:
    """The strategy of ``among`` (default: those that read neither the query nor the items, :data:`IGNORING`)
    whose (IC, sweep) accuracies in ``base`` (:func:`closed_forms`) lie nearest ``(ic_mean, sweep_mean)``."""
    cands = {s: (base["ic"][s], base["sweep"][s]) for s in among
             if base["ic"].get(s) is not None and base["sweep"].get(s) is not None}
    return min(cands, key=lambda s: (cands[s][0] - ic_mean) ** 2 + (cands[s][1] - sweep_mean) ** 2)


def disagreements(exact: dict[str, dict[str, float | None]], mc: dict[str, dict[str, float]], n: int) -> list[str]:
    """Where a closed form (:func:`closed_forms`) and its oracle network (:func:`baselines` with ``n`` sequences per
    set) differ by more than four binomial standard errors of the oracle's mean (seven for ``copy_slot``, the best
    of ``N`` noisy slots, biased upward); ``[]`` when they agree everywhere."""
    out = []
    for kind, sets in (("ic", len(IC_PAIRS)), ("sweep", TaskConfig().n_items)):
        for s, want in exact[kind].items():
            if want is None:
                continue
            se = math.sqrt(max(want * (1 - want), 1e-4) / (sets * n))
            if abs(mc[kind][s] - want) > (7 if s == "copy_slot" else 4) * se:
                out.append(f"{s} on the {kind} sets: {mc[kind][s]:.4f} against {want:.4f}")
    return out


def baseline_rows(exact: dict[str, dict[str, float | None]], mc: dict[str, dict[str, float]]) -> list[dict]:
    """One row per strategy: its closed forms (None where it has none) beside its oracle network's accuracies."""
    return [{"strategy": s, "IC, closed form": exact["ic"][s], "IC, oracle network": mc["ic"][s],
             "sweep, closed form": exact["sweep"][s], "sweep, oracle network": mc["sweep"][s]} for s in STRATEGIES]


def merged(exact: dict[str, dict[str, float | None]], mc: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    """Each strategy's accuracy from its closed form where it has one, else from its oracle network."""
    return {k: {s: mc[k][s] if v is None else v for s, v in exact[k].items()} for k in exact}
