"""posbias.science.task: the Reddy-style data is seeded, vectorised and has the structure it claims."""
import pytest
import torch
from hypothesis import given, settings, strategies as st

from posbias.science.task import (IC_PAIRS, TaskConfig, embed, ic_test_set, ic_test_sets, make_task, slot_index,
                                  sweep_test_sets, train_batch)

SMALL = TaskConfig(n_items=8, n_classes=64, n_labels=8, dim=16, burstiness=4, eps=0.75)


def test_batch_is_pure_function_of_seed_and_step():
    task = make_task(3, SMALL)
    a, ya = train_batch(task, 3, 7, 32)
    b, yb = train_batch(task, 3, 7, 32)
    c, _ = train_batch(task, 3, 8, 32)
    assert torch.equal(a, b) and torch.equal(ya, yb)
    assert not torch.equal(a, c)
    assert a.shape == (32, SMALL.n_tokens, SMALL.dim)


def test_label_tokens_and_target_follow_the_class_map():
    task = make_task(0, SMALL)
    x, y = train_batch(task, 0, 0, 64)
    labels = x[:, 1:-1:2]                                  # (b, N, D) label tokens
    # every label token is one of the label vectors
    d = (labels.unsqueeze(-2) - task.label_vectors).abs().sum(-1)
    assert bool((d.min(-1).values == 0).all())
    # the query's label appears among the context labels (burstiness: its class is in context)
    ids = d.argmin(-1)
    assert bool((ids == y.unsqueeze(1)).any(1).all())


@settings(max_examples=20, deadline=None)
@given(slot=st.integers(0, 7), seed=st.integers(0, 10_000))
def test_biased_target_slot_holds_query_label(slot, seed):
    task = make_task(seed, SMALL)
    x, y = train_batch(task, seed, 0, 16, target_slots=(slot,))
    lab = x[:, 2 * slot + 1]
    assert torch.equal(lab, task.label_vectors[y])


def test_burstiness_each_class_b_times():
    # every row holds N/B distinct classes, B copies of each
    from posbias.science.task import _arrangement
    cls = _arrangement(64, SMALL, SMALL.n_classes, torch.Generator().manual_seed(3))
    assert cls.shape == (64, SMALL.n_items)
    for row in cls:
        _, counts = torch.unique(row, return_counts=True)
        assert counts.tolist() == [SMALL.burstiness] * (SMALL.n_items // SMALL.burstiness)
    # and in a training batch the items of one class share a label token: at most N/B distinct labels
    task = make_task(1, SMALL)
    x, _ = train_batch(task, 1, 0, 8)
    lab = x[:, 1:-1:2]
    for row in range(8):
        assert torch.unique(lab[row], dim=0).shape[0] <= SMALL.n_items // SMALL.burstiness


def test_scales_are_one_over_d():
    cfg = TaskConfig()
    task = make_task(0, cfg)
    assert abs(task.class_means.std().item() - 1 / cfg.dim) < 0.05 / cfg.dim
    x, _ = train_batch(task, 0, 0, 256)
    # items are (mu + eps eta)/sqrt(1+eps^2): std 1/D again
    assert abs(x[:, 0:-1:2].std().item() - 1 / cfg.dim) < 0.05 / cfg.dim


@pytest.mark.parametrize("correct,distractor", IC_PAIRS)
def test_ic_sets_copy_the_correct_item_and_keep_labels(correct, distractor):
    ts = ic_test_set(correct, distractor, 50, 0, SMALL)
    c, d = slot_index(correct, 8), slot_index(distractor, 8)
    assert torch.equal(ts.items[:, c], ts.items[:, d])
    # the correct slot carries the target label
    assert torch.equal(ts.item_labels[:, c], ts.target)


def test_six_sets_and_slots():
    sets = ic_test_sets(10, 0, SMALL)
    assert sorted(sets) == sorted(f"IC_{a}_{b}" for a, b in IC_PAIRS)
    assert (slot_index("first", 8), slot_index("middle", 8), slot_index("last", 8)) == (0, 4, 7)
    with pytest.raises(ValueError):
        slot_index("centre", 8)
    with pytest.raises(ValueError):
        ic_test_set("first", "first", 5, 0, SMALL)


def test_sweep_has_the_query_class_at_one_slot_only():
    sets = sweep_test_sets(40, 0, SMALL)
    assert len(sets) == 8
    for s, ts in enumerate(sets):
        # query is closest to the item at slot s among all items (noise 0.75 but distinct classes)
        assert torch.equal(ts.target, ts.item_labels[:, s])
    with_d = sweep_test_sets(40, 0, SMALL, distractor="last")
    assert torch.equal(with_d[0].items[:, 0], with_d[0].items[:, 7])
    assert not torch.equal(with_d[7].items[:, 0], with_d[7].items[:, 6])


def test_embed_interleaves():
    items = torch.randn(2, 3, 4)
    lab = torch.tensor([[0, 1, 0], [1, 1, 0]])
    vecs = torch.randn(2, 4)
    q = torch.randn(2, 4)
    t = embed(items, lab, q, vecs)
    assert t.shape == (2, 7, 4)
    assert torch.equal(t[:, 0], items[:, 0]) and torch.equal(t[1, 3], vecs[1]) and torch.equal(t[:, -1], q)


@settings(max_examples=30, deadline=None)
@given(b=st.integers(1, 40), m=st.integers(0, 6), extra=st.integers(0, 30), seed=st.integers(0, 2**31))
def test_distinct_draws_are_distinct_and_in_range(b, m, extra, seed):
    from posbias.science.task import distinct

    n = m + extra
    out = distinct(b, m, n, torch.Generator().manual_seed(seed))
    assert out.shape == (b, m)
    if m:
        assert int(out.min()) >= 0 and int(out.max()) < n
        assert all(len(set(row)) == m for row in out.tolist())


def test_distinct_is_uniform_over_ordered_pairs():
    """All 20 ordered pairs of 5 values, 40,000 draws: a chi-square test at the 0.1% level (19 d.o.f.)."""
    from posbias.science.task import distinct

    out = distinct(40_000, 2, 5, torch.Generator().manual_seed(0))
    counts = torch.bincount(out[:, 0] * 5 + out[:, 1], minlength=25).double()
    diag = torch.arange(5) * 6
    assert counts[diag].sum() == 0
    obs = counts[[i for i in range(25) if i % 6]]
    expected = 40_000 / 20
    chi2 = float(((obs - expected) ** 2 / expected).sum())
    assert chi2 < 43.8, chi2


def test_distinct_refuses_too_many():
    from posbias.science.task import distinct

    with pytest.raises(ValueError, match="distinct"):
        distinct(2, 5, 4, torch.Generator())


EXACT = TaskConfig(n_items=8, n_classes=64, n_labels=8, dim=16, burstiness=4, eps=0.0)   # no noise: items = means


def test_slot_index_refuses_a_bad_slot_and_names_the_choices():
    """Integer slots run 0..N-1 (the last is allowed, N is not); unknown names are refused with the three names."""
    assert slot_index(7, 8) == 7
    for bad in (8, -1):
        with pytest.raises(ValueError, match=rf"^slot {bad} outside 0\.\.7$"):
            slot_index(bad, 8)
    with pytest.raises(ValueError, match=r"^unknown slot 'centre'; choose one of \('first', 'middle', 'last'\)"):
        slot_index("centre", 8)


def test_ic_test_set_names_and_its_refusal_word_for_word():
    """Names by hand: ``IC_<correct>_<distractor>``, or ``IC_<correct>`` without a distractor."""
    assert ic_test_set("first", "last", 2, 0, SMALL).name == "IC_first_last"
    assert ic_test_set("middle", None, 2, 0, SMALL).name == "IC_middle"
    with pytest.raises(ValueError, match=r"^correct and distractor slots must differ$"):
        ic_test_set("last", 7, 2, 0, SMALL)


def test_ic_test_sets_are_pure_functions_of_their_seed():
    """Same seed, same set (every draw comes from the set's own generator, none from torch's global one);
    another seed, another set."""
    a, b, c = (ic_test_set("first", "last", 20, seed, SMALL) for seed in (4, 4, 5))
    for name in ("items", "item_labels", "query", "target"):
        assert torch.equal(getattr(a, name), getattr(b, name)), name
    assert not torch.equal(a.items, c.items)


@pytest.mark.parametrize("correct,distractor,config", [("first", "last", EXACT), ("middle", None, EXACT),
                                                       (2, 5, TaskConfig(8, 64, 8, 16, 2, 0.0))])
def test_ic_test_set_draws_its_class_means_first_from_its_own_stream(correct, distractor, config):
    """The seeding the module documents: stream 2 (test sets) of the seed, keyed by the correct slot, the
    distractor slot (N when there is none) and B; its first draw is the novel class means, N(0, (1/D)^2).
    With eps = 0 every item and the query are exactly one of their sequence's means."""
    from posbias.science.task import generator

    c = slot_index(correct, 8)
    x = 8 if distractor is None else slot_index(distractor, 8)
    g = generator(11, 2, c, x, config.burstiness)
    means = torch.randn(6, 8 // config.burstiness, 16, generator=g) / 16            # (n, N/B, D)
    ts = ic_test_set(correct, distractor, 6, 11, config)
    assert bool((ts.items[:, :, None] == means[:, None]).all(-1).any(-1).all())
    assert bool((ts.query[:, None] == means).all(-1).any(-1).all())


def test_train_batch_draws_its_classes_first_from_the_batch_stream():
    """Stream 1 (batches) of ``(seed, step)``: its first draw is the N/B distinct classes of each sequence.
    A hand-made task with one-hot class means and eps = 0 shows each item's class exactly."""
    from posbias.science.task import Task, distinct, generator

    cfg = TaskConfig(n_items=8, n_classes=16, n_labels=16, dim=16, burstiness=4, eps=0.0)
    task = Task(cfg, torch.eye(16), torch.randn(16, 16, generator=torch.Generator().manual_seed(0)), torch.arange(16))
    x, y = train_batch(task, 5, 3, 12)
    cls = x[:, 0:-1:2].argmax(-1)                                                  # (b, N) class of each item
    chosen = distinct(12, 2, 16, generator(5, 1, 3))
    assert [set(row) for row in cls.tolist()] == [set(row) for row in chosen.tolist()]
    assert torch.equal(y, x[:, -1].argmax(-1))                                     # the map is the identity


def test_ensemble_batch_gives_each_run_its_own_target_slots():
    """Run 0 asks for slot 3, run 1 for slot 6: in every sequence the label token after that slot is the target's."""
    from posbias.science.task import ensemble_batch

    tasks = [make_task(0, SMALL), make_task(1, SMALL)]
    x, y = ensemble_batch(tasks, [0, 1], [(3,), (6,)], step=2, batch_size=32)
    assert x.shape == (2, 32, SMALL.n_tokens, SMALL.dim) and y.shape == (2, 32)
    for e, slot in enumerate((3, 6)):
        assert torch.equal(x[e, :, 2 * slot + 1], tasks[e].label_vectors[y[e]])


def test_ic_test_sets_use_the_config_they_are_given():
    """All six sets have the shapes of the given config: (n, N, D) items with D = 16, not the default 64."""
    for ts in ic_test_sets(3, 0, SMALL).values():
        assert ts.items.shape == (3, 8, 16) and ts.query.shape == (3, 16)


def test_sweep_query_is_an_exact_copy_of_slot_s_and_of_no_other_item():
    """With eps = 0 the query is its class mean exactly; burstiness 1 puts that class at slot s only, so the
    query equals the item at s and no other (by hand), and the config's width D = 16 is kept."""
    for s, ts in enumerate(sweep_test_sets(10, 0, EXACT)):
        assert ts.items.shape == (10, 8, 16)
        same = (ts.items == ts.query[:, None]).all(-1)                                # (n, N)
        assert torch.equal(same, torch.nn.functional.one_hot(torch.full((10,), s), 8).bool())


def test_task_config_refuses_n_not_divisible_by_b_word_for_word():
    """N = 6 items cannot hold B = 4 copies of whole classes: refused, naming both numbers."""
    with pytest.raises(ValueError, match=r"^N=6 must be divisible by B=4$"):
        TaskConfig(n_items=6, burstiness=4)


def test_generator_seed_is_the_seed_sequence_s_64_bit_word_with_halves_swapped():
    """Second method: numpy's uint64 word of a SeedSequence is ``w0 | w1 << 32`` of its two uint32 words; the
    generator's seed is ``w0 << 32 | w1``, so it is that 64-bit word with its halves swapped."""
    import numpy as np

    from posbias.science.task import generator

    for words in ((0,), (3, 0), (5, 1, 7), (11, 2, 0, 8, 4)):
        w64 = int(np.random.SeedSequence(list(words)).generate_state(1, dtype=np.uint64)[0])
        hi, lo = w64 & 0xFFFFFFFF, w64 >> 32
        assert hi != lo
        assert generator(*words).initial_seed() == hi << 32 | lo, words


def test_make_task_depends_on_its_seed_and_draws_labels_at_scale_one_over_d():
    """Two seeds give two tasks; label vectors are N(0, (1/D)^2): with D = 64 and 32 x 64 = 2,048 draws the
    mean square is 1/D^2 within 10% (its relative sd is sqrt(2/2048) = 3%)."""
    cfg = TaskConfig()
    a, b = make_task(0, cfg), make_task(1, cfg)
    assert not torch.equal(a.class_means, b.class_means) and not torch.equal(a.label_vectors, b.label_vectors)
    ms = a.label_vectors.pow(2).mean().item()
    assert abs(ms * cfg.dim**2 - 1) < 0.1, ms


def test_items_are_the_documented_mix_of_mean_and_noise():
    """By hand: eps = 0.75 gives sqrt(1 + eps^2) = 1.25, so items are (mu + 0.75 eta) / 1.25 with eta the
    generator's first normal draw scaled by 1/D, drawn here from a second generator of the same seed."""
    from posbias.science.task import _items

    means = torch.randn(3, 5, 16, generator=torch.Generator().manual_seed(1)) / 16
    out = _items(means, 0.75, torch.Generator().manual_seed(9))
    eta = torch.randn(3, 5, 16, generator=torch.Generator().manual_seed(9)) / 16
    assert torch.allclose(out, (means + 0.75 * eta) / 1.25, rtol=1e-6, atol=0)


def _interleave_by_hand(items: torch.Tensor, lab: torch.Tensor, query: torch.Tensor,
                        vecs: torch.Tensor) -> torch.Tensor:
    """x_1 l_1 ... x_N l_N x_q for one sequence ``(N, D)``, written token by token."""
    toks = []
    for s in range(items.shape[0]):
        toks += [items[s], vecs[lab[s]]]
    return torch.stack(toks + [query])


def test_embed_interleaves_without_a_batch_axis_and_with_two():
    """``embed`` on ``(N, D)`` and on ``(E, b, N, D)`` inputs matches the token-by-token construction."""
    g = torch.Generator().manual_seed(0)
    vecs = torch.randn(4, 5, generator=g)
    items, query = torch.randn(2, 3, 6, 5, generator=g), torch.randn(2, 3, 5, generator=g)
    lab = torch.randint(4, (2, 3, 6), generator=g)
    assert torch.equal(embed(items[0, 0], lab[0, 0], query[0, 0], vecs),
                       _interleave_by_hand(items[0, 0], lab[0, 0], query[0, 0], vecs))
    t = embed(items, lab, query, vecs)
    assert t.shape == (2, 3, 13, 5)
    for e in range(2):
        for r in range(3):
            assert torch.equal(t[e, r], _interleave_by_hand(items[e, r], lab[e, r], query[e, r], vecs))
