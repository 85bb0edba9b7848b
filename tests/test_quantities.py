"""posbias.analysis.claims.quantities, through the register's entries: each quantity is the stated difference
on hand-made units, and the judge reads a present, absent or reversed effect right. (These carry
the assertions the chapters' own claim builders in posbias.measures.evaluate had before the register.)"""
import dataclasses

import pytest
import torch

from posbias.measures import evaluate as ev
from posbias.analysis import claims
from posbias.analysis.claims import quantities as q
from posbias.science.model import MemberConfig

N_TEST = 1000
JITTER = [-2, -1, 0, 1, 2]                   # five runs, a small spread between them


def _unit(gaps=None, acc=0.5, sweep=None, alpha=None, cfg=MemberConfig("causal"), depth=2, share=None,
          target_slots=None):
    """A stored-unit stand-in: three gaps (accuracies acc +- gap/2), a position sweep, per-layer
    ``alpha`` (``(depth, T)``) with the member configuration the sink quantities read the mask from,
    and Gu et al.'s sink rate per key (``share``, ``(T,)``)."""
    gaps = gaps or {"first-middle": 0.0, "first-last": 0.0, "middle-last": 0.0}
    ic = {}
    for pair, g in gaps.items():
        a, b = pair.split("-")
        ic[f"IC_{a}_{b}"], ic[f"IC_{b}_{a}"] = acc + g / 2, acc - g / 2
    u = {"params": {"n_test": N_TEST, "n_sweep": 2000, "n_sink": 10_000, "depth": depth,
                    "target_slots": target_slots, **dataclasses.asdict(cfg)},
         "gaps": dict(gaps), "ic_accuracy": ic,
         "curves": {"step": [0, 50, 100], **{k: [acc, acc, v] for k, v in ic.items()}}}
    if sweep is not None:
        u["sweep_accuracy"] = list(sweep)
    if alpha is not None:
        u["sink_alpha"] = [list(map(float, alpha))] * depth
    if share is not None:
        u["sink_share"] = list(map(float, share))
        u.setdefault("sink_alpha", [[0.0] * len(share)] * depth)
    return u


def _gaps(fm=0.0, fl=0.0, ml=0.0):
    return {"first-middle": fm, "first-last": fl, "middle-last": ml}


def _judge(id_, campaign_units):
    (j,) = claims.judge([e for e in claims.register().entries if e.id == id_], campaign_units)
    return j


def test_figure_2_quantities_are_the_stated_differences():
    """No PE's first-vs-last gap, its excess over the middle-vs-last gap, the decay mask's and RoPE's
    reductions of it, and the change from 2 to 6 layers: differences of stored gaps, paired by seed,
    each with its own coefficients (two accuracies for a gap, four for a difference of gaps)."""
    units = {"No PE|2": [_unit(_gaps(fl=5.0, ml=1.0))], "decay|2": [_unit(_gaps(fl=-2.0))],
             "RoPE|2": [_unit(_gaps(fl=3.0))], "No PE|6": [_unit(_gaps(fl=8.0))]}
    got = {name: (float(m.per_seed[0]), m.coef2) for name, m in {
        "nope-early": q.gap(units, "No PE|2", "first-last"),
        "middle-last-smaller": q.gap_contrast(units, "No PE|2", "first-last", "middle-last"),
        "decay-reduces": q.gap_difference(units, "No PE|2", "decay|2", "first-last"),
        "rope-reduces": q.gap_difference(units, "No PE|2", "RoPE|2", "first-last"),
        "decay-more-than-rope": q.gap_difference(units, "RoPE|2", "decay|2", "first-last"),
        "depth-nope": q.depth_change(units, "No PE", "first-last", 2, 6),
        "recent": q.preference_difference(units, "decay|2", "No PE|2", "last"),
        "preference": q.slot_preference(units, "decay|2", "last")}.items()}
    assert got == {"nope-early": (5.0, 2), "middle-last-smaller": (4.0, 4), "decay-reduces": (7.0, 4),
                   "rope-reduces": (2.0, 4), "decay-more-than-rope": (5.0, 4), "depth-nope": (3.0, 4),
                   "recent": (pytest.approx(4.0), 2), "preference": (pytest.approx(1.0), 1)}


def test_the_standard_error_adds_the_test_sets_binomial_bound_to_the_spread_between_runs():
    """Runs share their test sets, so the bound coef2 / (4 n) is not divided by the runs: five runs
    with no spread keep one run's binomial error; with a spread, its sample variance / runs is added."""
    flat = {"No PE|2": [_unit(_gaps(fl=0.04)) for _ in JITTER]}
    j = _judge("fig2-nope-early-2", {"wu-fig-2": flat})
    assert j.mean == pytest.approx(0.04) and j.se == pytest.approx((2 / (4 * N_TEST)) ** 0.5, rel=1e-9)
    spread = {"No PE|2": [_unit(_gaps(fl=0.04 + 0.01 * k)) for k in JITTER]}
    j = _judge("fig2-nope-early-2", {"wu-fig-2": spread})
    var = torch.tensor([0.01 * k for k in JITTER], dtype=torch.float64).var(unbiased=True).item()
    assert j.se == pytest.approx((var / 5 + 2 / (4 * N_TEST)) ** 0.5, rel=1e-9)
    two = {"No PE|2": [_unit(_gaps(fl=0.25)), _unit(_gaps(fl=0.15))]}      # 3.96 SE, below t(1 df) = 12.7
    assert _judge("fig2-nope-early-2", {"wu-fig-2": two}).status == "inconclusive"


def test_only_at_the_beginning_is_an_absence_claim_with_its_margin():
    """'Causal No PE does not learn the end': a last-slot advantage of 0.2 contradicts it, a last slot
    0.1 below the middle reproduces it (the upper bound is below the 0.05 margin), an advantage at the
    margin cannot be told (the binomial SE at 1,000 test sequences is 0.022)."""
    nl = lambda adv: {"causal|none": [_unit(_gaps(fm=0.1, ml=-adv + 0.002 * k)) for k in JITTER]}  # noqa: E731
    e = next(x for x in claims.register().entries if x.id == "fig3-causal-nope-not-last")
    assert e.direction == "< margin" and e.margin == 0.05
    assert [_judge(e.id, {"wu-fig-3": nl(a)}).status for a in (0.2, -0.1, 0.05)] == \
        ["contradicted", "reproduced", "inconclusive"]
    assert _judge("fig3-causal-nope-first", {"wu-fig-3": nl(0.1)}).status == "reproduced"


def test_figure_4_contrast_with_causal_no_pe_is_not_passed_by_the_shortcut_alone():
    """A middle-slot preference that causal No PE shares (the training shortcut) is not a capture:
    the contrast is zero and the claim inconclusive; a preference beyond causal No PE's is reproduced."""
    pref = lambda p: _gaps(fm=-p, ml=p)            # noqa: E731   preference for the middle slot: p
    assert float(ev.slot_preference([_unit(pref(0.3))], "middle")[0]) == pytest.approx(0.3)
    shortcut = {"middle|causal|rope": [_unit(pref(0.3 + 0.002 * k)) for k in JITTER],
                "middle|causal|none": [_unit(pref(0.3 + 0.002 * k)) for k in JITTER]}
    j = _judge("fig4-middle-causal-rope-captures", {"wu-fig-4": shortcut})
    assert j.mean == pytest.approx(0.0, abs=1e-12) and j.status == "inconclusive" and j.guard_mean > 0.29
    captures = {**shortcut, "middle|causal|none": [_unit(pref(0.002 * k)) for k in JITTER]}
    assert _judge("fig4-middle-causal-rope-captures", {"wu-fig-4": captures}).status == "reproduced"


def test_u_depth_and_its_bound_from_its_own_coefficients():
    """A U is min(first, last) - mean of six middle slots: coefficients 1 and six of 1/6, bound
    (1 + 1/6) / (4 n); the deepest U over configurations is one configuration's U, bounded as one."""
    u_shape = [0.9, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.7]              # min(0.9, 0.7) - 0.5 = 0.2
    one_end = [0.9, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.3]              # 0.3 - 0.5 = -0.2
    assert torch.allclose(ev.u_statistic(torch.tensor([u_shape, one_end])),
                          torch.tensor([0.2, -0.2], dtype=torch.float64))
    units = {"full|sin": [_unit(sweep=u_shape) for _ in range(3)]}
    m = q.u_depth(units, "full|sin")
    assert torch.allclose(m.per_seed, torch.full((3,), 0.2, dtype=torch.float64))
    assert (m.n, m.coef2) == (2000, pytest.approx(7 / 6))
    two = {"a": [_unit(sweep=u_shape)], "b": [_unit(sweep=one_end)]}
    mx = q.u_depth_max(two, ["a", "b"])
    assert float(mx.per_seed[0]) == pytest.approx(0.2) and mx.coef2 == pytest.approx(7 / 6)


def test_the_right_bound_and_the_eighteen_accuracy_bound_give_different_verdicts(tmp_path):
    """A synthetic register of one 'no U' entry over six configurations, one of which shows a U of
    +0.05 in every run: its own bound (one U: 1 + 6 x 1/36 = 7/6 accuracies) finds the U against the
    first register's '< 0' reading; that register's bound (3 accuracies per configuration, 18) cannot."""
    import yaml

    from posbias.measures import stats

    sweep = lambda u, k: [0.5 + u, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5 + 1e-4 * k, 0.5 + u]      # noqa: E731
    labels = [f"last|{m}|{p}" for m in ("full", "causal") for p in ("none", "sin", "rope")]
    units = {c: [_unit(sweep=sweep(0.05 if c == "last|causal|none" else -0.2, k), target_slots=[7])
                 for k in JITTER] for c in labels}
    raw = yaml.safe_load(claims.REGISTER.read_text())
    e = next(x for x in raw["claims"] if x["id"] == "fig4-last-no-u")
    e = {k: v for k, v in e.items() if k not in ("margin", "second")} | {"direction": "< 0"}
    raw["claims"] = [e]
    path = tmp_path / "reg.yml"
    path.write_text(yaml.safe_dump(raw, allow_unicode=True))
    (j,) = claims.judge(claims.load(path).entries, {"wu-fig-4": units})
    assert j.n_runs == 5 and j.mean == pytest.approx(0.05, abs=1e-4)
    assert j.se == pytest.approx((7 / 6 / (4 * 2000)) ** 0.5, rel=1e-3) and j.status == "contradicted"
    wrong = (18 / (4 * 2000)) ** 0.5                                            # 0.047: about 1.05 SE
    assert stats.verdict(j.mean, wrong, -1, j.crit) == "inconclusive"


def _sink_units(cfg, n=5, alpha=None, share=None):
    return [_unit(alpha=alpha, cfg=cfg, share=share) for _ in range(n)]


def test_sink_entries_read_gu_et_als_rate_with_the_excess_beside_it():
    """Uniform causal attention over the task's 17 tokens: rate 0 at every key (key 1's uniform alpha is
    H_17/17 = 0.20 < 0.3; at 6 tokens it would be 0.41, a rate of 1) and excess 0: both readings
    inconclusive. Every (sequence, layer) with key 1 above 0.3: rate 1 there,
    reproduced; its excess reading is judged beside it, not instead."""
    T, cfg = 17, MemberConfig("causal")
    mask = cfg.mask_and_bias(T)[0]
    uniform = ev.sink_alpha(mask.double() / mask.double().sum(-1, keepdim=True), mask)
    sink = ev.sink_alpha(torch.zeros(T, T, dtype=torch.float64).index_fill(1, torch.tensor([0]), 1.0), mask)
    assert q.uniform_sink_rate(mask).tolist() == [0.0] * T
    assert q.uniform_sink_rate(cfg.mask_and_bias(6)[0]).tolist() == [1.0] + [0.0] * 5
    none = {"wu-fig-6": {"causal": _sink_units(cfg, alpha=uniform, share=[0.0] * T)}}
    j = _judge("fig5-first-key-sink", none)
    assert (j.status, j.baseline, j.second[2]) == ("inconclusive", 0.0, "inconclusive")
    first = {"wu-fig-6": {"causal": _sink_units(cfg, alpha=sink, share=[1.0] + [0.0] * (T - 1))}}
    for id_ in ("fig5-first-key-sink", "fig6-causal-first"):
        j = _judge(id_, first)
        assert j.status == "reproduced" and j.second[2] == "reproduced"
    j = _judge("fig5-first-key-sink", first)
    assert j.mean == 1.0 and j.se == pytest.approx((1 / (4 * 10_000)) ** 0.5)


def test_the_window_trend_is_read_against_uniform_attentions_own_rates():
    """Key 1's rate falling from 1 at w = 4 to 0 at w = 12, as uniform attention's does, is a
    contradicted trend with a baseline of -1; rising from 0 to 1 is reproduced."""
    T = 17
    cfgs = {w: MemberConfig("window", window=w) for w in (4, 8, 12)}
    base = {w: q.uniform_sink_rate(c.mask_and_bias(T)[0]) for w, c in cfgs.items()}
    assert [float(base[w][0]) for w in (4, 8, 12)] == [1.0, 1.0, 0.0]
    rate = lambda r1: [r1] + [0.0] * (T - 1)                                   # noqa: E731
    falls = {f"window|{w}": _sink_units(c, share=rate({4: 1.0, 8: 0.5, 12: 0.0}[w])) for w, c in cfgs.items()}
    j = _judge("fig6-window-grows", {"wu-fig-6": falls})
    assert (j.mean, j.baseline, j.status) == (-1.0, -1.0, "contradicted")
    rises = {f"window|{w}": _sink_units(c, share=rate({4: 0.0, 8: 0.5, 12: 1.0}[w])) for w, c in cfgs.items()}
    assert _judge("fig6-window-grows", {"wu-fig-6": rises}).status == "reproduced"


def test_prefix_keys_after_the_first_are_read_against_the_causal_mask():
    """Under the prefix mask (K = 2) key 2 is a sink; it counts only beyond the same key's rate under
    the causal mask."""
    T = 17
    cp, cc = MemberConfig("prefix", prefix=2), MemberConfig("causal")
    both = [0.6, 0.6] + [0.0] * (T - 2)
    same = {"prefix|2": _sink_units(cp, share=both), "causal": _sink_units(cc, share=both)}
    j = _judge("fig6-prefix-2-beyond-first", {"wu-fig-6": same})
    assert j.mean == pytest.approx(0.0, abs=1e-12) and j.status == "inconclusive"
    more = {**same, "causal": _sink_units(cc, share=[0.0] * T)}
    assert _judge("fig6-prefix-2-beyond-first", {"wu-fig-6": more}).status == "reproduced"
    assert _judge("fig6-prefix-2", {"wu-fig-6": more}).status == "reproduced"


def test_depth_is_a_trend_and_each_step_is_a_guard():
    """The gap growing 0.0 / 0.1 / 0.2 over 2 / 4 / 6 layers is reproduced; 0.0 / 0.3 / 0.2 (a rise, then
    a significant fall) has the same 6-minus-2 change but is contradicted by its second step."""
    def depth_units(g2, g4, g6):
        return {f"No PE|{d}": [_unit(_gaps(fl=g + 0.002 * k)) for k in JITTER] for d, g in ((2, g2), (4, g4), (6, g6))}
    m = q.depth_trend(depth_units(0.0, 0.1, 0.2), "No PE", "first-last", [2, 4, 6])
    assert torch.allclose(m.per_seed, torch.full((5,), 0.2, dtype=torch.float64)) and m.coef2 == pytest.approx(4)
    assert _judge("fig2-depth-nope-first-last", {"wu-fig-2": depth_units(0.0, 0.1, 0.2)}).status == "reproduced"
    j = _judge("fig2-depth-nope-first-last", {"wu-fig-2": depth_units(0.0, 0.3, 0.2)})
    assert j.mean == pytest.approx(0.2) and j.main_status == "reproduced" and j.status == "contradicted"
    assert [g[2] for g in j.guards] == ["reproduced", "contradicted"]


def test_middle_last_is_smaller_in_size_than_both_gaps_with_the_first():
    """|first-last| 0.2 and |first-middle| 0.2 above |middle-last| 0.02: reproduced; a middle-last gap
    of -0.1 larger in size than a first-last gap of 0 fails, whatever its sign."""
    ok = {"RoPE|2": [_unit(_gaps(fm=0.2, fl=0.2 + 0.002 * k, ml=0.02)) for k in JITTER]}
    assert _judge("fig2-middle-last-smaller-rope-2", {"wu-fig-2": ok}).status == "reproduced"
    bad = {"RoPE|2": [_unit(_gaps(fm=0.1, fl=0.002 * k, ml=-0.1)) for k in JITTER]}
    j = _judge("fig2-middle-last-smaller-rope-2", {"wu-fig-2": bad})
    assert j.mean == pytest.approx(-0.1, abs=0.005) and j.status == "contradicted"


def test_identical_runs_count_once_and_shortcut_networks_are_named():
    """Five seeds with one stored result are one run: judged on the binomial bound against the normal
    quantile, never by t over copies. At chance off the trained slot, the networks are a shortcut,
    named and left out of the convergence share."""
    sweep = [0.03] * 7 + [1.0]
    copies = {"last|causal|sin": [_unit(_gaps(fm=-0.5, fl=-0.5), sweep=sweep, target_slots=[7]) for _ in JITTER]}
    e = claims.Entry("t", "q", "w", {"campaign": "wu-fig-4", "configs": ["last|causal|sin"], "residual": True,
                                     "training_bias": "last"}, "slot_preference", {"config": "last|causal|sin",
                                                                                   "slot": "last"}, "> 0")
    (j,) = claims.judge([e], {"wu-fig-4": copies})
    assert (j.n_runs, j.n_seeds, j.crit) == (1, 5, pytest.approx(ev.t_critical(1)))
    assert j.shortcut == ["last|causal|sin"] and j.share is None and "shortcut" in j.cannot_reach["last|causal|sin"]
    assert j.untrained["last|causal|sin"] == pytest.approx(0.03)
    varied = {"last|causal|sin": [_unit(_gaps(fm=-0.5, fl=-0.5 + 0.01 * k), sweep=[0.5] * 7 + [1.0],
                                        target_slots=[7]) for k in JITTER]}
    (j,) = claims.judge([e], {"wu-fig-4": varied})
    assert (j.n_runs, j.shortcut, j.share) == (5, [], 1.0)


# --- the sampled mutants' survivors in quantities (issue 70): each quantity on keys that differ --------


def _alpha_units(alpha_by_key, cfg, seeds=2):
    """Units whose layer-mean alpha is ``alpha_by_key`` (T,) exactly, for ``seeds`` identical runs."""
    return [_unit(alpha=alpha_by_key, cfg=cfg) for _ in range(seeds)]


def test_key_quantities_read_the_keys_they_name_by_hand():
    """Hand-made alphas whose keys all differ: excess_difference reads key 1 of both masks (not key 2),
    prefix_excess the mean of keys k1..k2 (1-based, inclusive), over uniform attention's own alphas."""
    T = 17
    causal, window = MemberConfig("causal"), MemberConfig("window", window=4)
    alpha = torch.linspace(0.9, 0.1, T, dtype=torch.float64)              # every key its own value
    units = {"causal": _alpha_units(alpha, causal), "window|4": _alpha_units(alpha * 0.5, window)}
    unif = {c: ev.uniform_sink_alpha(cfg.mask_and_bias(T)[0]) for c, cfg in (("causal", causal), ("window|4", window))}
    want = (alpha[0] - unif["causal"][0]) - (alpha[0] * 0.5 - unif["window|4"][0])
    got = q.excess_difference(units, "causal", "window|4").per_seed
    assert got.tolist() == pytest.approx([float(want)] * 2, abs=1e-12)
    keys = [2, 4]                                                          # keys 2, 3, 4 (indices 1..3)
    want = float(sum(alpha[i] - unif["causal"][i] for i in (1, 2, 3)) / 3)
    assert q.prefix_excess(units, "causal", keys).per_seed.tolist() == pytest.approx([want] * 2, abs=1e-12)


def test_sweep_advantage_reads_the_first_and_the_last_slot():
    sweep = [0.9, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8]
    units = {"c": [_unit(sweep=sweep), _unit(sweep=sweep)]}
    assert q.sweep_advantage(units, "c", "first", "last").per_seed.tolist() == pytest.approx([0.1, 0.1])
    assert q.sweep_advantage(units, "c", "last", "first").per_seed.tolist() == pytest.approx([-0.1, -0.1])


def test_uniform_rates_use_the_threshold_they_are_given_strictly():
    """Gu et al.'s rate counts alpha_k > eps, strictly: under a full mask of 4 tokens every alpha is
    exactly 0.25, so a threshold of 0.25 gives rate 0 at every key; and sink_baseline_rows passes its
    threshold on (window of 4: key 1's uniform alpha (1 + 1/2 + 1/3 + 1/4) / 4 = 0.52, above 0.3, below 0.6)."""
    full = MemberConfig("full").mask_and_bias(4)[0]
    assert q.uniform_sink_rate(full, 0.25).tolist() == [0.0] * 4
    assert q.uniform_sink_rate(full, 0.2).tolist() == [1.0] * 4
    T = 17
    units = {"window|4": [_unit(share=[0.5] * T, alpha=[0.1] * T, cfg=MemberConfig("window", window=4))] * 2}
    (row,) = q.sink_baseline_rows(units, threshold=0.6)
    assert row["under uniform attention"] == 0.0
    (row,) = q.sink_baseline_rows(units, threshold=0.3)
    assert row["under uniform attention"] == 1.0


def test_prefix_rate_margin_leaves_the_last_key_out_by_hand():
    """Rates 1 at the prefix keys 1-2, 0.2 at keys 3..16 and 0.9 at the last key (which sees only
    itself): the margin is 1 - 0.2 = 0.8, the last key not counted."""
    T = 17
    share = [1.0, 1.0] + [0.2] * (T - 3) + [0.9]
    units = {"prefix|2": [_unit(share=share, cfg=MemberConfig("prefix", prefix=2))] * 2}
    assert q.prefix_rate_margin(units, "prefix|2", 2).per_seed.tolist() == pytest.approx([0.8, 0.8])


def test_prefix_rate_margin_baseline_reads_keys_after_the_prefix_up_to_the_last_by_hand():
    """Prefix of 1 over 5 tokens: uniform attention's rates are 1, 1, 0, 0, 0 (alpha 0.46, 0.32, 0.26, 0.23,
    0.2 against 0.3), so the baseline is 1 - mean(1, 0, 0) = 2/3 over keys 2..4 (the last key left out;
    keys 2..3 alone would give 1/2)."""
    T, cfg = 5, MemberConfig("prefix", prefix=1)
    assert q.uniform_sink_rate(cfg.mask_and_bias(T)[0]).tolist() == [1.0, 1.0, 0.0, 0.0, 0.0]
    units = {"prefix|1": [_unit(share=[0.9, 0.5, 0.1, 0.1, 0.7], cfg=cfg)] * 2}
    m = q.prefix_rate_margin(units, "prefix|1", 1)
    assert m.baseline == pytest.approx(2 / 3) and m.per_seed.tolist() == pytest.approx([0.9 - 0.7 / 3] * 2)


@pytest.mark.parametrize("kind", ["causal", "window", "prefix"])
@pytest.mark.parametrize("T", [3, 5, 9, 17])
def test_uniform_alpha_never_rises_with_the_key(kind, T):
    """Under every mask the library trains (causal, window, prefix) a later key is seen by no more queries,
    each with no larger uniform weight: uniform alpha and rate never rise with the key. So the last key
    can never raise the largest uniform rate of keys 2..T-1 (rate_margin's baseline leaves it out
    for the networks, where it can: the last key sees only itself)."""
    cfgs = ([MemberConfig("causal")] if kind == "causal" else
            [MemberConfig(kind, **{"window" if kind == "window" else "prefix": size}) for size in range(1, T + 1)])
    for cfg in cfgs:
        a = ev.uniform_sink_alpha(cfg.mask_and_bias(T)[0])
        assert bool((a[1:] <= a[:-1] + 1e-15).all()), (cfg, a.tolist())



def test_sink_and_prefix_margins_by_hand():
    """Excess e_k = alpha_k - uniform alpha_k per key (every key its own value). sink_margin: e_1 minus the
    largest e of keys 2..T-1; prefix_margin: mean e over the prefix minus mean e over the keys after it
    but the last (keys 3..16 for a prefix of 2 over 17 tokens)."""
    T = 17
    causal, prefix = MemberConfig("causal"), MemberConfig("prefix", prefix=2)
    alpha = torch.linspace(0.9, 0.1, T, dtype=torch.float64) ** 2
    for name, cfg in (("causal", causal), ("prefix|2", prefix)):
        units = {name: _alpha_units(alpha, cfg)}
        e = alpha - ev.uniform_sink_alpha(cfg.mask_and_bias(T)[0])
        got = q.sink_margin(units, name)
        assert got.per_seed.tolist() == pytest.approx([float(e[0] - e[1:T - 1].max())] * 2, abs=1e-12)
        assert got.coef2 == 4
    got = q.prefix_margin({"prefix|2": _alpha_units(alpha, prefix)}, "prefix|2", 2).per_seed
    e = alpha - ev.uniform_sink_alpha(prefix.mask_and_bias(T)[0])
    assert got.tolist() == pytest.approx([float(e[:2].mean() - e[2:T - 1].mean())] * 2, abs=1e-12)


def test_rate_quantities_carry_their_coefficients():
    """Gu et al.'s rate quantities: the binomial bound's factor is the squared sum of |coefficients|:
    one rate 1; a difference of two rates (margins) 4."""
    T = 17
    share = [0.9] + [0.1] * (T - 1)
    units = {"causal": _sink_units(MemberConfig("causal"), share=share),
             "prefix|2": _sink_units(MemberConfig("prefix", prefix=2), share=share)}
    assert q.sink_rate(units, "causal", [1, 1]).coef2 == 1.0
    assert q.rate_margin(units, "causal").coef2 == 4.0
    assert q.prefix_rate_margin(units, "prefix|2", 2).coef2 == 4.0


def test_sink_baseline_rows_by_hand():
    """Two runs of prefix|2 with rates 0.2 and 0.6 at keys 1-2: the sink rate is their mean over runs at
    keys 1..2 (0.4), labelled '1..2'; the causal mask's row reads key 1 alone, labelled '1'."""
    T = 17
    cp, cc = MemberConfig("prefix", prefix=2), MemberConfig("causal")
    runs = [_unit(share=[r, r] + [0.0] * (T - 2), alpha=[0.1] * T, cfg=cp) for r in (0.2, 0.6)]
    causal = [_unit(share=[0.5] + [0.0] * (T - 1), alpha=[0.1] * T, cfg=cc)] * 2
    rows = q.sink_baseline_rows({"prefix|2": runs, "causal": causal})
    assert [set(r) for r in rows] == [{"mask", "sink keys", "sink rate", "under uniform attention",
                                       "excess over uniform"}] * 2
    assert (rows[0]["mask"], rows[0]["sink keys"], rows[0]["sink rate"]) == ("prefix 2", "1..2", pytest.approx(0.4))
    assert (rows[1]["mask"], rows[1]["sink keys"], rows[1]["sink rate"]) == ("causal", "1", pytest.approx(0.5))


def test_u_depth_max_of_one_configuration_is_its_u():
    sweep = [0.9, 0.4, 0.5, 0.6, 0.5, 0.4, 0.6, 0.8]                     # U = 0.8 - 0.5 = 0.3
    got = q.u_depth_max({"c": [_unit(sweep=sweep)] * 2}, ["c"])
    assert got.per_seed.tolist() == pytest.approx([0.3, 0.3]) and got.coef2 == pytest.approx(1 + 1 / 6)


def test_rate_margin_on_three_tokens_reads_key_two_alone():
    """T = 3: the keys between the first and the last are key 2 alone. Uniform causal attention over 3 tokens
    has alpha 0.61, 0.42, 0.33 (all above 0.3): baseline 1 - 1 = 0; the networks' 0.9 - 0.2."""
    cfg = MemberConfig("causal")
    units = {"causal": _sink_units(cfg, share=[0.9, 0.2, 0.95])}
    m = q.rate_margin(units, "causal")
    assert m.per_seed.tolist() == pytest.approx([0.7] * 5) and m.baseline == 0.0


def test_attention_and_sweep_quantities_carry_their_coefficients():
    """The bound's factor by hand: attention means share their sequences, so it is (sum |c|)^2: key 1's
    excess 1, a prefix mean (three keys of 1/3) 1, a difference of two masks' key 1 (1, -1) 4; a sweep
    advantage is two accuracies, 1^2 + 1^2 = 2, over n_sweep = 2000. Sees a wrong or missing factor."""
    T = 17
    alpha = torch.linspace(0.9, 0.1, T, dtype=torch.float64)
    units = {"causal": _alpha_units(alpha, MemberConfig("causal")),
             "window|4": _alpha_units(alpha * 0.5, MemberConfig("window", window=4)),
             "c": [_unit(sweep=[0.9] + [0.5] * 6 + [0.8])] * 2}
    assert q.first_key_excess(units, "causal").coef2 == 1
    assert q.prefix_excess(units, "causal", [2, 4]).coef2 == 1
    assert q.excess_difference(units, "causal", "window|4").coef2 == 4
    m = q.sweep_advantage(units, "c", "first", "last")
    assert (m.n, m.coef2) == (2000, 2) and m.per_seed.tolist() == pytest.approx([0.1, 0.1])


def test_depth_trend_bound_reads_the_test_sets_of_the_end_depths():
    """Over depths 2, 4, 6 the weights are (-1, 0, 1): the middle depth weighs nothing, so its test sets
    (here 500 sequences, the ends 1,000) do not enter the bound 2 * ((-1)^2 / (4 * 1000) + 1^2 / (4 * 1000)),
    which is coef2 4 over n = 1000. Sees n read from the middle depth's units."""
    units = {f"No PE|{d}": [_unit(_gaps(fl=g))] for d, g in ((2, 0.1), (4, 0.5), (6, 0.3))}
    units["No PE|4"][0]["params"]["n_test"] = 500
    m = q.depth_trend(units, "No PE", "first-last", [2, 4, 6])
    assert m.per_seed.tolist() == pytest.approx([0.2]) and m.n == 1000
    assert m.coef2 / (4 * m.n) == pytest.approx(2 * (1 / 4000 + 1 / 4000))


def test_gap_contrast_carries_the_test_sets_it_reads():
    """first-last 0.3 minus middle-last 0.1 within one configuration of 500 test sequences: 0.2 per seed,
    four accuracies (coef2 4) over n = 500, a bound of 4 / 2000 (sees a lost n)."""
    us = [_unit(_gaps(fl=0.3, ml=0.1)) for _ in range(2)]
    for u in us:
        u["params"]["n_test"] = 500
    m = q.gap_contrast({"c": us}, "c", "first-last", "middle-last")
    assert m.per_seed.tolist() == pytest.approx([0.2, 0.2]) and (m.n, m.coef2) == (500, 4)
    assert m.coef2 / (4 * m.n) == pytest.approx(4 / 2000)


def test_prefix_excess_vs_causal_subtracts_the_causal_excess_by_hand():
    """Alphas built as uniform attention's plus 0.3 at every key (prefix of 2) and plus 0.1 (causal): the
    prefix keys' excess beyond the causal mask's is 0.3 - 0.1 = 0.2 (a sum would give 0.4)."""
    T = 17
    cp, cc = MemberConfig("prefix", prefix=2), MemberConfig("causal")
    units = {"prefix|2": _alpha_units(ev.uniform_sink_alpha(cp.mask_and_bias(T)[0]) + 0.3, cp),
             "causal": _alpha_units(ev.uniform_sink_alpha(cc.mask_and_bias(T)[0]) + 0.1, cc)}
    m = q.prefix_excess_vs_causal(units, "prefix|2", [1, 2])
    assert m.per_seed.tolist() == pytest.approx([0.2, 0.2], abs=1e-12) and (m.n, m.coef2) == (10_000, 4)


def test_sink_rate_and_its_causal_contrast_read_every_key_of_the_range_by_hand():
    """Window of 8 over 17 tokens: uniform alpha of key 1 is H_8 / 8 = 0.34 (rate 1), of key 2
    (1/2 + ... + 1/8 + 1/8) / 8 = 0.23 (rate 0); window of 4: key 3 (1/3 + 1/4 * 3) / 4 = 0.27 (rate 0),
    keys 1-2 rate 1; causal: 0 at every key. Rates 0.9, 0.6, 0.3 at keys 1..3: sink_rate of keys 1..3 is
    0.6 (key 3 alone 0.3) over the baseline 2/3; window 8 minus causal at keys 1..2 is
    (0.9 + 0.6) / 2 - (0.5 + 0.2) / 2 = 0.4 with baseline 1/2 - 0, n 10,000, coef2 4."""
    T = 17
    share = [0.9, 0.6, 0.3] + [0.0] * (T - 3)
    units = {"window|4": _sink_units(MemberConfig("window", window=4), n=2, share=share),
             "window|8": _sink_units(MemberConfig("window", window=8), n=2, share=share),
             "causal": _sink_units(MemberConfig("causal"), n=2, share=[0.5, 0.2] + [0.0] * (T - 2))}
    m = q.sink_rate(units, "window|4", [1, 3])
    assert m.per_seed.tolist() == pytest.approx([0.6, 0.6]) and m.baseline == pytest.approx(2 / 3)
    m = q.prefix_rate_vs_causal(units, "window|8", [1, 2])
    assert m.per_seed.tolist() == pytest.approx([0.4, 0.4])
    assert (m.n, m.coef2, m.baseline) == (10_000, 4.0, pytest.approx(0.5))


def test_rate_trend_baseline_is_uniform_attentions_key_one_by_hand():
    """Windows of 4 and 8 over 17 tokens: weights (-1, 1); uniform attention's key-1 rate is 1 under both
    (alpha 0.52 and 0.34 > 0.3), so the baseline is 1 - 1 = 0 (key 2's rates, 1 and 0, would give -1);
    the networks' key-1 rates 0.4 and 0.7 give 0.3."""
    T = 17
    units = {f"window|{w}": _sink_units(MemberConfig("window", window=w), n=2, share=[r] + [0.1] * (T - 1))
             for w, r in ((4, 0.4), (8, 0.7))}
    m = q.rate_trend(units, ["window|4", "window|8"], [4, 8])
    assert m.per_seed.tolist() == pytest.approx([0.3, 0.3]) and m.baseline == 0.0 and m.coef2 == 4.0
