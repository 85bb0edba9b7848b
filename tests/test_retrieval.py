"""posbias.science.retrieval: the strategies' closed forms against their oracle networks, and the reading rule."""
import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
import torch

from posbias.science import retrieval as r
from posbias.science import task as tk
from posbias.science.task import IC_PAIRS, TaskConfig, embed, generator, ic_test_sets, make_task, sweep_test_sets

N_MC = 3000


@pytest.fixture(scope="module")
def mc():
    return r.baselines(n=N_MC, seed=11)


def test_closed_forms_by_hand():
    """The paper's sizes (N = 8, B = 4, L = 32), worked by hand: a slot other than the correct one holds the
    query's class with probability 3/7, so its label is the query's with q = 3/7 + 4/7 * 1/32 = 0.4464."""
    c = r.closed_forms()
    q = 3 / 7 + 4 / 7 / 32
    assert c["ic"]["uniform"] == 1 / 32
    assert c["ic"]["copy_random"] == pytest.approx(1 / 2 + 1 / 64, abs=1e-15)
    assert c["ic"]["copy_slot"] == pytest.approx((2 + 4 * q) / 6, abs=1e-15)
    assert c["ic"]["match_worst"] == pytest.approx(1 / 2 + q / 2, abs=1e-15)
    assert c["ic"]["ignore_best"] == pytest.approx(81 / 112, abs=1e-15)   # 5/7 + 2/7 * 1/32
    assert c["sweep"]["copy_random"] == c["sweep"]["copy_slot"] == pytest.approx(1 / 8 + 7 / 8 / 32, abs=1e-15)
    assert c["sweep"]["match_worst"] == 1.0
    assert set(c["ic"]) == set(c["sweep"]) == set(r.STRATEGIES)
    assert all(c[k][s] is None for k in ("ic",) for s in r.MC_ONLY)


def test_max_count_mean_against_enumeration():
    for n, L in ((3, 4), (4, 3), (5, 2), (2, 6)):
        brute = Fraction(sum(max(a.count(v) for v in set(a)) for a in itertools.product(range(L), repeat=n)), L ** n)
        assert r.max_count_mean(n, L) == brute
    assert r.max_count_mean(1, 32) == 1 and r.max_count_mean(8, 1) == 8


@pytest.mark.parametrize("kind", ["ic", "sweep"])
def test_closed_forms_match_the_oracle_networks(mc, kind):
    """Every closed form equals its oracle network's accuracy, measured by task.accuracy, within four binomial
    standard errors (the six IC sets or the eight sweep sets of N_MC sequences each)."""
    closed = r.closed_forms()[kind]
    sets = 6 if kind == "ic" else 8
    for s, exact in closed.items():
        if exact is None:
            continue
        se = math.sqrt(max(exact * (1 - exact), 1e-4) / (N_MC * sets))
        bias = 3 * se if s == "copy_slot" else 0     # the best of eight noisy slots is biased upward
        assert mc[kind][s] == pytest.approx(exact, abs=4 * se + bias), (kind, s)


def test_monte_carlo_only_strategies(mc):
    """Matching by the nearest item retrieves; reading the items without the query solves the IC sets through
    their planted copy, yet scores no more than the label-only ceiling on the sweep, which plants none."""
    assert 0.88 < mc["ic"]["match_nearest"] < 0.97
    assert mc["sweep"]["match_nearest"] > 0.99
    assert mc["ic"]["dup_vote"] > 0.97
    assert mc["sweep"]["dup_vote"] == mc["sweep"]["ignore_best"]


def test_oracles_are_measured_as_networks():
    """An oracle is scored by task.accuracy like a trained network: copying the correct slot is always right."""
    from posbias.science.task import accuracy
    task = make_task(0)
    sets = ic_test_sets(200, 0)
    right = r.Oracle("copy_slot", task, slot=0)
    assert float(accuracy(right, [task], sets["IC_first_last"])) == 1.0
    assert float(accuracy(right, [task], sets["IC_last_first"])) < 0.7
    with pytest.raises(ValueError, match="unknown strategy"):
        r.Oracle("copy_everything", task)
    with pytest.raises(ValueError, match="tie"):
        r.Oracle("match_worst", task, tie="middle")
    with pytest.raises(ValueError, match=r"one member: tokens \(1, b, T, D\)"):
        right(torch.zeros(2, 1, 17, 64))


def test_reading_rule():
    cfg = TaskConfig()
    c = r.closed_forms(cfg)
    ceil, copier = c["sweep"]["ignore_best"], c["ic"]["copy_random"]
    assert r.reading(0.52, 0.16, 10000, 2000) == "ignores the query"
    assert r.reading(0.74, 0.16, 10000, 2000) == "between"
    assert r.reading(0.74, 0.90, 10000, 2000) == "retrieves"
    assert r.reading(0.52, ceil + 0.002, 10000, 2000) == "ignores the query"      # inside three SEs of the ceiling
    assert r.reading(0.52, ceil + 0.03, 10000, 2000) == "retrieves"
    assert r.reading(copier + 0.003, 0.1, 10000, 2000) == "ignores the query"
    assert r.reading(copier + 0.03, 0.1, 10000, 2000) == "between"
    assert set(r.READINGS) == {"retrieves", "between", "ignores the query"}


# ----------------------------------------------------------------------------------- small worlds, worked by hand

#: Sizes small enough to count by hand and by enumeration: slots first 0, middle 2, last 3.
SMALL = TaskConfig(n_items=4, n_classes=16, n_labels=4, dim=8, burstiness=2)
SLOT = {"first": 0, "middle": 2, "last": 3}
#: Hand-placed sequences on a line of the plane: N = 8 (first, middle, last = 0, 4, 7), B = 4, L = 4.
HAND = TaskConfig(n_items=8, n_classes=16, n_labels=4, dim=2, burstiness=4)


def _ignore_best_by_enumeration(n: int, b: int, n_labels: int) -> Fraction:
    """IC accuracy of the majority label of slots first, middle and last with two classes of ``b`` slots each,
    by enumerating every arrangement, every (correct, distractor) pair and every pair of class labels."""
    names = {"first": 0, "middle": n // 2, "last": n - 1}
    hits = total = 0
    for group in itertools.combinations(range(n), b):                 # class 0's slots; class 1 holds the rest
        cls = [0 if i in group else 1 for i in range(n)]
        for correct, _ in IC_PAIRS:
            for labels in itertools.product(range(n_labels), repeat=2):
                votes = [labels[cls[s]] for s in names.values()]
                hits += max(set(votes), key=votes.count) == labels[cls[names[correct]]]
                total += 1
    return Fraction(hits, total)


@pytest.mark.parametrize("n, b", [(4, 2), (6, 3), (8, 4)])
def test_ignore_best_ic_closed_form_against_enumeration(n, b):
    """The IC closed form of ignore_best (two classes) equals an enumeration; by hand N = 4, B = 2 (no three slots of
    one class): 2/3 + 1/3 * 1/4 = 3/4; N = 6, B = 3: all three of one class 2/20, so 0.1 + 0.9 * 2/3 + 0.3/4;
    N = 8, B = 4: all three of one class 2 * 5/70 = 1/7, so 1/7 + 6/7 * 2/3 + 2/7 * 1/4 = 11/14."""
    cfg = TaskConfig(n_items=n, burstiness=b, n_labels=4)
    exact = _ignore_best_by_enumeration(n, b, 4)
    assert exact == {4: Fraction(3, 4), 6: Fraction(31, 40), 8: Fraction(11, 14)}[n]
    assert r.closed_forms(cfg)["ic"]["ignore_best"] == pytest.approx(float(exact), abs=1e-15)


def test_ignore_best_ic_has_no_closed_form_beyond_two_classes():
    """With more than two classes per sequence (N/B = 4 or 8) the IC form of ignore_best is not derived: None."""
    for b in (1, 2):
        assert r.closed_forms(TaskConfig(burstiness=b))["ic"]["ignore_best"] is None


def test_reading_rule_at_its_boundaries():
    """N = 4, B = 2, L = 2 by hand: the ceiling is E[max count of 4 labels of 2] / 4 = (2*4 + 8*3 + 6*2)/16/4 = 11/16,
    the copier 2/4 + 2/4 * 1/2 = 3/4; retrieving means strictly beyond three SEs, ignoring at most three SEs."""
    cfg = TaskConfig(n_items=4, n_classes=16, n_labels=2, dim=8, burstiness=2)
    ceil, copier, n_test, n_sweep = 11 / 16, 3 / 4, 500, 250
    se_sweep = math.sqrt(ceil * (1 - ceil) / (n_sweep * 4))
    se_ic = math.sqrt(copier * (1 - copier) / (n_test * 6))

    def read(ic: float, sweep: float) -> str:
        return r.reading(ic, sweep, n_test, n_sweep, cfg)

    assert read(0.9, ceil + 3 * se_sweep) == "between"
    assert read(0.9, ceil + 3.5 * se_sweep) == "retrieves"
    assert read(copier + 3 * se_ic, 0.5) == "ignores the query"
    assert read(copier + 3.5 * se_ic, 0.5) == "between"


def test_standing_of_three_hand_made_networks():
    """Means, ranges and readings of three stored networks at N = 4, B = 2, L = 2 (ceiling 11/16, copier 3/4), by
    hand: IC means 0.8, 0.75, 0.95 and sweep means 0.5, 0.25, 0.9 read between, ignores the query, retrieves."""
    cfg = TaskConfig(n_items=4, n_classes=16, n_labels=2, dim=8, burstiness=2)
    params = {"n_test": 500, "n_sweep": 250}
    nets = [{"ic_accuracy": {"IC_first_middle": 0.9, "IC_middle_first": 0.7}, "sweep_accuracy": [0.5, 0.6, 0.4, 0.5]},
            {"ic_accuracy": {"IC_first_middle": 0.75, "IC_middle_first": 0.75}, "sweep_accuracy": [0.25] * 4},
            {"ic_accuracy": {"IC_first_middle": 1.0, "IC_middle_first": 0.9}, "sweep_accuracy": [0.9, 1.0, 0.8, 0.9]}]
    got = r.standing([{**net, "params": params} for net in nets], cfg)
    assert got == {"networks": 3, "ic_mean": pytest.approx(2.5 / 3), "ic_range": pytest.approx((0.75, 0.95)),
                   "sweep_mean": pytest.approx(0.55), "sweep_range": pytest.approx((0.25, 0.9)),
                   "readings": {"retrieves": 1, "between": 1, "ignores the query": 1}}
    with pytest.raises(ValueError, match="no stored networks"):
        r.standing([], cfg)


def test_readable_needs_every_network_with_accuracies_and_params():
    """Readable: a non-empty list of results, each holding IC accuracies, sweep accuracies and params."""
    ok = {"ic_accuracy": {}, "sweep_accuracy": [], "params": {}}
    assert r.readable([ok, {**ok, "seed": 3}])
    assert not r.readable([])
    assert not r.readable([ok, None])
    for key in ok:
        assert not r.readable([{k: v for k, v in ok.items() if k != key}])


def test_closest_is_the_nearest_closed_form_in_the_plane():
    """closest picks the strategy at the smallest Euclidean distance (math.dist) over a grid of the unit square,
    skips strategies without both closed forms, and by default looks only at those that ignore query and items."""
    c = r.closed_forms()
    assert r.closest(0.03, 0.03, c) == "uniform"                               # (1/32, 1/32)
    assert r.closest(0.99, 0.99, c, among=r.STRATEGIES) == "match_worst"       # (0.72, 1); dup_vote has no IC form
    for x, y in itertools.product(np.linspace(0, 1, 11), repeat=2):
        want = min(r.IGNORING, key=lambda s: math.dist((x, y), (c["ic"][s], c["sweep"][s])))
        assert r.closest(x, y, c) == want, (x, y)


def test_disagreements_flag_differences_beyond_four_standard_errors():
    """By hand, n = 32: a closed form 1/2 has se = sqrt(1/4 / (8 * 32)) = 1/32 on the sweep and sqrt(1/4 / (6 * 32))
    = 0.0361 on the IC sets; a closed form 1 has the floor se = sqrt(1e-4 / 256) = 0.000625. copy_slot gets seven."""
    half = dict.fromkeys(r.STRATEGIES, 0.5)
    exact = {"ic": {**half, "dup_vote": None, "match_nearest": None},
             "sweep": {**half, "dup_vote": None, "match_worst": 1.0, "match_nearest": None}}
    mc = {"ic": {**half, "copy_slot": 0.77},                 # 7.5 se: beyond seven
          "sweep": {**half, "uniform": 0.625,                # exactly 4 se: not beyond
                    "copy_random": 0.640625,                 # 4.5 se
                    "copy_slot": 0.65625,                    # 5 se: within seven
                    "match_worst": 0.99}}                    # 16 floor se
    assert r.disagreements(exact, mc, 32) == ["copy_slot on the ic sets: 0.7700 against 0.5000",
                                              "copy_random on the sweep sets: 0.6406 against 0.5000",
                                              "match_worst on the sweep sets: 0.9900 against 1.0000"]
    assert r.disagreements(exact, {"ic": half, "sweep": {**half, "match_worst": 1.0}}, 32) == []


def test_baseline_rows_and_merged_by_hand():
    """A row per strategy, closed forms beside oracles; merged takes the closed form unless it is None."""
    exact = {kind: {s: base + i for i, s in enumerate(r.STRATEGIES)} for kind, base in (("ic", 0), ("sweep", 10))}
    mc = {kind: {s: base + i for i, s in enumerate(r.STRATEGIES)} for kind, base in (("ic", 20), ("sweep", 30))}
    rows = r.baseline_rows(exact, mc)
    assert [row["strategy"] for row in rows] == list(r.STRATEGIES)
    assert rows[2] == {"strategy": "copy_slot", "IC, closed form": 2, "IC, oracle network": 22,
                       "sweep, closed form": 12, "sweep, oracle network": 32}
    exact = {"ic": {"uniform": 0.5, "dup_vote": None}, "sweep": {"uniform": None, "dup_vote": 0.25}}
    mc = {"ic": {"uniform": 0.1, "dup_vote": 0.2}, "sweep": {"uniform": 0.3, "dup_vote": 0.4}}
    assert r.merged(exact, mc) == {"ic": {"uniform": 0.5, "dup_vote": 0.2}, "sweep": {"uniform": 0.3, "dup_vote": 0.25}}


# ----------------------------------------------------------------------------------- oracles on hand-placed items

def _on_a_line(xs: list) -> torch.Tensor:
    """Points ``(x, 0)`` of the plane for the numbers ``xs``: shape ``(..., 2)``."""
    x = torch.tensor(xs, dtype=torch.float32)
    return torch.stack((x, torch.zeros_like(x)), -1)


def _answers(oracle: r.Oracle, items: torch.Tensor, labels: list, query: torch.Tensor) -> list[int]:
    """The oracle's answers to sequences of items ``(b, N, 2)``, label ids ``(b, N)`` and queries ``(b, 2)``, after
    checking its logits are one-hot over the task's ``L`` labels."""
    logits = oracle(embed(items, torch.as_tensor(labels), query, oracle.task.label_vectors)[None])
    assert logits.shape == (1, len(labels), oracle.task.config.n_labels)
    assert (logits.sum(-1) == 1).all()
    return logits[0].argmax(-1).tolist()


def test_dup_vote_reads_the_planted_copy_and_its_nearest_items():
    """Copy at slots 0 and 5 (x = 10, label 1), its B - 1 = 3 nearest items (x = 10.1 to 10.3) labelled 3, three far
    ones (x = 0 to 2) labelled 1: votes 1, 1, 3, 3, 3 answer 3, although 1 is the most frequent label. A sequence
    with no copy answers its most frequent label."""
    task = make_task(0, HAND)
    items = _on_a_line([[10.0, 10.1, 0.0, 10.2, 1.0, 10.0, 10.3, 2.0], list(range(8))])
    labels = [[1, 3, 1, 3, 1, 1, 3, 1], [0, 2, 2, 0, 2, 1, 3, 3]]
    assert _answers(r.Oracle("dup_vote", task), items, labels, _on_a_line([10.0, 0.0])) == [3, 2]


def test_ignore_best_votes_first_middle_last_only_where_a_copy_is_planted():
    """With a copy (slots 0 and 7): the majority of slots 0, 4, 7 (labels 2, 2, 3) is 2, not the most frequent 1;
    without one, the most frequent label (1, three times), not the vote of slots 0, 4, 7 (2, 2, 0)."""
    task = make_task(0, HAND)
    items = _on_a_line([[5.0, 1, 2, 3, 4, 6, 7, 5.0], list(range(8))])
    labels = [[2, 1, 1, 1, 2, 1, 1, 3], [2, 1, 1, 1, 2, 3, 3, 0]]
    assert _answers(r.Oracle("ignore_best", task), items, labels, _on_a_line([0.0, 0.0])) == [2, 1]


def test_match_worst_takes_the_copy_its_tie_break_names():
    """Told the query's own slot: slot 1 copied at 6, slot 5 copied at 3, slot 2 not copied. Earlier takes slots 1, 3,
    2 (labels 0, 3, 0); later takes slots 6, 5, 2 (labels 2, 1, 0)."""
    task = make_task(0, HAND)
    items = _on_a_line([[0, 1, 2, 3, 4, 5, 1, 7], [0, 1, 2, 5, 4, 5, 6, 7], list(range(8))])
    labels = torch.tensor([[3, 0, 3, 3, 3, 3, 2, 3], [0, 0, 0, 3, 0, 1, 0, 0], [1, 1, 0, 1, 1, 1, 1, 1]])
    query = _on_a_line([0.1, 0.2, 0.3])
    sets = [tk.TestSet(name, items[i:i + 1], labels[i:i + 1], query[i:i + 1], labels[i:i + 1, 0])
            for i, name in enumerate(("IC_1_6", "IC_5_3", "IC_2"))]
    assert _answers(r.Oracle("match_worst", task, tie="earlier").know(sets), items, labels, query) == [0, 3, 0]
    assert _answers(r.Oracle("match_worst", task, tie="later").know(sets), items, labels, query) == [2, 1, 0]


def test_match_nearest_answers_the_label_of_the_closest_item():
    """Query at x = 1: the nearest item is slot 2 (x = 1.1, label 3), not slot 0 (x = -1) nor the most frequent label
    0; query at x = 6.9: slot 7 (label 2)."""
    task = make_task(0, HAND)
    items = _on_a_line([[-1.0, 5, 1.1, 3, 7, 8, 9, 10], list(range(8))])
    labels = [[1, 0, 3, 0, 0, 2, 0, 0], [0, 0, 0, 0, 0, 0, 0, 2]]
    assert _answers(r.Oracle("match_nearest", task), items, labels, _on_a_line([1.0, 6.9])) == [3, 2]


def test_random_oracles_draw_from_their_own_seeded_stream():
    """uniform and copy_random answer from the oracle stream generator(seed, 7), whatever the global torch seed;
    an oracle holds no weights, only a one-element marker of its device."""
    task = make_task(0, HAND)
    g = torch.Generator().manual_seed(1)
    items, labels = torch.randn(64, 8, 2, generator=g), torch.randint(4, (64, 8), generator=g)
    query = torch.zeros(64, 2)
    with torch.random.fork_rng():                       # a global seed of its own, restored afterwards
        torch.manual_seed(123)
        assert (_answers(r.Oracle("uniform", task, seed=5), items, labels, query)
                == torch.randint(4, (64,), generator=generator(5, 7)).tolist())
        assert (_answers(r.Oracle("copy_random", task, seed=5), items, labels, query)
                == labels[torch.arange(64), torch.randint(8, (64,), generator=generator(5, 7))].tolist())
    oracle = r.Oracle("uniform", task)
    assert not list(oracle.parameters()) and [tuple(x.shape) for x in oracle.buffers()] == [(1,)]


# ----------------------------------------------------------------------------------- baselines, counted directly

def _majority(labels: np.ndarray, n_labels: int) -> np.ndarray:
    """The most frequent label id of each row, ties to the smaller id."""
    return np.array([np.bincount(row, minlength=n_labels).argmax() for row in labels])


def _slots(ts: tk.TestSet) -> tuple[int, int | None]:
    """The correct slot and the planted copy's (None on the sweep), read from the set's name."""
    words = ts.name.split("_")[1:]
    return SLOT[words[0]] if words[0] in SLOT else int(words[0]), SLOT[words[1]] if words[1:] else None


def _counted(strategy: str, sets: list[tk.TestSet], seed: int) -> float:
    """A strategy's mean accuracy over ``sets`` counted with numpy on their items, labels and queries (the random
    strategies draw from the oracle stream ``generator(seed, 7)``, one draw per set)."""
    g, n_labels, accs = generator(seed, 7), SMALL.n_labels, []
    for ts in sets:
        lab, tgt = ts.item_labels.numpy(), ts.target.numpy()
        items, query, rows = ts.items.double().numpy(), ts.query.double().numpy(), np.arange(len(tgt))
        c, d = _slots(ts)
        if strategy == "uniform":
            pred = torch.randint(n_labels, (len(tgt),), generator=g).numpy()
        elif strategy == "copy_random":
            pred = lab[rows, torch.randint(SMALL.n_items, (len(tgt),), generator=g).numpy()]
        elif strategy == "match_nearest":
            pred = lab[rows, ((items - query[:, None]) ** 2).sum(-1).argmin(-1)]
        elif d is None:                                   # ignore_best and dup_vote on the sweep: no copy
            pred = _majority(lab, n_labels)
        elif strategy == "ignore_best":
            pred = _majority(lab[:, sorted(SLOT.values())], n_labels)
        else:                                             # dup_vote: the copy's two labels and its B - 1 nearest
            dist = ((items - items[:, c:c + 1]) ** 2).sum(-1)
            dist[:, [c, d]] = np.inf
            near = np.argsort(dist, axis=1)[:, :SMALL.burstiness - 1]
            pred = _majority(np.concatenate((lab[:, [c, d]], np.take_along_axis(lab, near, 1)), 1), n_labels)
        accs.append((pred == tgt).mean())
    return float(np.mean(accs))


def _slot_accuracy(sets: list[tk.TestSet], pick) -> float:
    """Mean accuracy over ``sets`` of answering the label at slot ``pick(correct, copy)``."""
    return float(np.mean([(ts.item_labels[:, pick(*_slots(ts))] == ts.target).double().mean() for ts in sets]))


def test_baselines_count_what_numpy_counts_on_the_same_sets():
    """Each oracle network's accuracy in baselines equals a numpy count of its rule on the IC sets drawn from seed and
    the sweep drawn from seed + 1: copy_slot the best slot, match_worst the worse tie-break (no copy: its own slot)."""
    seed, n = 12, 32         # a draw where later is the worse tie-break and slot 0 not the best slot
    got = r.baselines(SMALL, n=n, seed=seed)
    ic, sweep = list(ic_test_sets(n, seed, SMALL).values()), sweep_test_sets(n, seed + 1, SMALL)
    for kind, sets in (("ic", ic), ("sweep", sweep)):
        want = {s: _counted(s, sets, seed) for s in r.STRATEGIES if s not in ("copy_slot", "match_worst")}
        want["copy_slot"] = max(_slot_accuracy(sets, lambda c, d, k=k: k) for k in range(SMALL.n_items))
        want["match_worst"] = min(_slot_accuracy(sets, lambda c, d: c if d is None else min(c, d)),
                                  _slot_accuracy(sets, lambda c, d: c if d is None else max(c, d)))
        assert got[kind] == pytest.approx(want, abs=1e-6), kind


def test_baselines_take_any_positive_number_of_sequences():
    """One sequence per set is enough (told its own item, match_worst is always right on the sweep); none is refused."""
    assert r.baselines(SMALL, n=1)["sweep"]["match_worst"] == 1.0
    with pytest.raises(ValueError, match="n must be >= 1"):
        r.baselines(SMALL, n=0)


class _Drawn(Exception):
    """Raised by a stand-in for the test sets, to stop baselines once it has said what it draws."""


def test_baselines_default_to_10000_sequences_from_seed_0(monkeypatch):
    """Called with its defaults, baselines draws the IC sets of the paper's sizes, 10000 sequences each, from seed 0
    (stopped there: the full measurement takes minutes)."""
    seen = []

    def draw(n: int, seed: int, config: TaskConfig) -> None:
        seen.append((n, seed, config))
        raise _Drawn

    monkeypatch.setattr(r, "ic_test_sets", draw)
    with pytest.raises(_Drawn):
        r.baselines()
    assert seen == [(10000, 0, TaskConfig())]
