"""posbias.claims.quantities, through the register's entries: each quantity is the stated difference
on hand-made units, and the judge reads a present, absent or reversed effect right. (These carry
the assertions the chapters' own claim builders in posbias.evaluate had before the register.)"""
import dataclasses

import pytest
import torch

from posbias import claims, evaluate as ev
from posbias.claims import quantities as q
from posbias.model import MemberConfig

N_TEST = 1000
JITTER = [-2, -1, 0, 1, 2]                   # five runs, a small spread between them


def _unit(gaps=None, acc=0.5, sweep=None, alpha=None, cfg=MemberConfig("causal"), depth=2):
    """A stored-unit stand-in: three gaps (accuracies acc +- gap/2), a position sweep, and per-layer
    ``alpha`` (``(depth, T)``) with the member configuration the sink quantities read the mask from."""
    gaps = gaps or {"first-middle": 0.0, "first-last": 0.0, "middle-last": 0.0}
    ic = {}
    for pair, g in gaps.items():
        a, b = pair.split("-")
        ic[f"IC_{a}_{b}"], ic[f"IC_{b}_{a}"] = acc + g / 2, acc - g / 2
    u = {"params": {"n_test": N_TEST, "n_sweep": 2000, "n_sink": 10_000, "depth": depth,
                    **dataclasses.asdict(cfg)},
         "gaps": dict(gaps), "ic_accuracy": ic,
         "curves": {"step": [0, 50, 100], **{k: [acc, acc, v] for k, v in ic.items()}}}
    if sweep is not None:
        u["sweep_accuracy"] = list(sweep)
    if alpha is not None:
        u["sink_alpha"] = [list(map(float, alpha))] * depth
    return u


def _gaps(fm=0.0, fl=0.0, ml=0.0):
    return {"first-middle": fm, "first-last": fl, "middle-last": ml}


def _judge(id_, campaign_units):
    (j,) = claims.judge([e for e in claims.register().entries if e.id == id_], campaign_units)
    return j


def test_figure_2_quantities_are_the_stated_differences():
    """No PE's first-vs-last gap, its excess over the middle-vs-last gap, the decay mask's and RoPE's
    reductions of it, and the change from 2 to 6 layers: differences of stored gaps, paired by seed."""
    units = {"No PE|2": [_unit(_gaps(fl=5.0, ml=1.0))], "decay|2": [_unit(_gaps(fl=-2.0))],
             "RoPE|2": [_unit(_gaps(fl=3.0))], "No PE|6": [_unit(_gaps(fl=8.0))]}
    got = {name: (float(m.per_seed[0]), m.n_acc) for name, m in {
        "nope-early": q.gap(units, "No PE|2", "first-last"),
        "middle-last-smaller": q.gap_contrast(units, "No PE|2", "first-last", "middle-last"),
        "decay-reduces": q.gap_difference(units, "No PE|2", "decay|2", "first-last"),
        "rope-reduces": q.gap_difference(units, "No PE|2", "RoPE|2", "first-last"),
        "decay-more-than-rope": q.gap_difference(units, "RoPE|2", "decay|2", "first-last"),
        "depth-nope": q.depth_change(units, "No PE", "first-last", 2, 6)}.items()}
    assert got == {"nope-early": (5.0, 2), "middle-last-smaller": (4.0, 4), "decay-reduces": (7.0, 4),
                   "rope-reduces": (2.0, 4), "decay-more-than-rope": (5.0, 4), "depth-nope": (3.0, 4)}


def test_the_standard_error_adds_the_test_sets_binomial_bound_to_the_spread_between_runs():
    """Runs share their test sets, so the bound n_acc / (4 n) is not divided by the runs: five runs
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


def test_figure_3_at_most_zero_reads_a_learned_late_bias_as_contradicted():
    """'Causal No PE does not learn the end': the last slot beating the middle contradicts it; the
    first slot beating the middle is the early bias it does learn."""
    both = {"causal|none": [_unit(_gaps(fm=0.1 + 0.002 * k, ml=-0.1 - 0.002 * k)) for k in JITTER]}
    nl = _judge("fig3-causal-nope-not-last", {"wu-fig-3": both})
    assert nl.entry.sign == -1 and nl.mean == pytest.approx(0.1) and nl.status == "contradicted"
    assert _judge("fig3-causal-nope-first", {"wu-fig-3": both}).status == "reproduced"
    ignores_end = {"causal|none": [_unit(_gaps(fm=0.1, ml=0.002 * k)) for k in JITTER]}
    assert _judge("fig3-causal-nope-not-last", {"wu-fig-3": ignores_end}).status == "inconclusive"


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


def test_u_depth_and_its_binomial_bound_of_three_accuracies():
    u_shape = [0.9, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.7]              # min(0.9, 0.7) - 0.5 = 0.2
    one_end = [0.9, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.3]              # 0.3 - 0.5 = -0.2
    assert torch.allclose(ev.u_statistic(torch.tensor([u_shape, one_end])),
                          torch.tensor([0.2, -0.2], dtype=torch.float64))
    units = {"full|sin": [_unit(sweep=u_shape) for _ in range(3)]}
    m = q.u_depth(units, "full|sin")
    assert torch.allclose(m.per_seed, torch.full((3,), 0.2, dtype=torch.float64)) and (m.n, m.n_acc) == (2000, 3)
    j = _judge("fig3-full-sin-u", {"wu-fig-3": units})
    assert j.status == "reproduced" and j.se == pytest.approx((3 / (4 * 2000)) ** 0.5)
    two = {"a": [_unit(sweep=u_shape)], "b": [_unit(sweep=one_end)]}
    assert float(q.u_depth_max(two, ["a", "b"]).per_seed[0]) == pytest.approx(0.2)      # the deepest U


def _sink_units(alpha, cfg, n=5):
    return [_unit(alpha=alpha, cfg=cfg) for _ in range(n)]


def test_sink_claims_on_uniform_attention_and_on_a_first_token_sink():
    """Uniform causal attention: key 1's excess is 0 (inconclusive); all attention on key 1: it
    exceeds uniform and every other key (both reproduced)."""
    T, cfg = 6, MemberConfig("causal")
    mask = cfg.mask_and_bias(T)[0]
    uniform = ev.sink_alpha(mask.double() / mask.double().sum(-1, keepdim=True), mask)
    sink = ev.sink_alpha(torch.zeros(T, T, dtype=torch.float64).index_fill(1, torch.tensor([0]), 1.0), mask)
    for alpha, want in [(uniform, "inconclusive"), (sink, "reproduced")]:
        units = {"wu-fig-6": {"causal": _sink_units(alpha, cfg)}}
        first, stands_out = (_judge(i, units) for i in ("fig5-first-key-excess", "fig6-causal-first"))
        assert (first.status, stands_out.status) == (want, want)
    assert _judge("fig5-first-key-excess", {"wu-fig-6": {"causal": _sink_units(sink, cfg)}}).mean == pytest.approx(
        1 - float(ev.uniform_sink_alpha(mask)[0]))


def test_a_shrinking_deficit_is_not_a_sink_emerging_with_the_window():
    """Key 1 below its uniform baseline at both widths, less so at the wider: the difference is
    positive, but the guard (a positive excess at the wider window) keeps the claim from passing."""
    T = 17
    c4, c12 = MemberConfig("window", window=4), MemberConfig("window", window=12)
    base = {w: ev.uniform_sink_alpha(c.mask_and_bias(T)[0]) for w, c in [(4, c4), (12, c12)]}
    shifted = lambda a, d: torch.cat([a[:1] + d, a[1:]])          # noqa: E731   key 1 moved by d
    deficit = {"window|4": _sink_units(shifted(base[4], -0.10), c4),
               "window|12": _sink_units(shifted(base[12], -0.06), c12)}
    j = _judge("fig6-window-grows", {"wu-fig-6": deficit})
    assert j.mean == pytest.approx(0.04) and j.guard_mean == pytest.approx(-0.06) and j.status == "inconclusive"
    sink = {"window|4": _sink_units(shifted(base[4], 0.02), c4), "window|12": _sink_units(shifted(base[12], 0.10), c12)}
    assert _judge("fig6-window-grows", {"wu-fig-6": sink}).status == "reproduced"


def test_prefix_keys_after_the_first_are_read_against_the_causal_mask():
    """Under the prefix mask (K = 2) key 2 draws an excess; it counts only beyond the same key's
    excess under the causal mask."""
    T = 17
    cp, cc = MemberConfig("prefix", prefix=2), MemberConfig("causal")
    base_p, base_c = (ev.uniform_sink_alpha(c.mask_and_bias(T)[0]) for c in (cp, cc))
    bump = lambda a, d: torch.cat([a[:1] + d, a[1:2] + d, a[2:]])  # noqa: E731   keys 1 and 2 up by d
    same = {"prefix|2": _sink_units(bump(base_p, 0.1), cp), "causal": _sink_units(bump(base_c, 0.1), cc)}
    j = _judge("fig6-prefix-2-beyond-first", {"wu-fig-6": same})
    assert j.mean == pytest.approx(0.0, abs=1e-12) and j.status == "inconclusive"
    more = {**same, "causal": _sink_units(base_c, cc)}
    assert _judge("fig6-prefix-2-beyond-first", {"wu-fig-6": more}).status == "reproduced"
    assert _judge("fig6-prefix-2", {"wu-fig-6": more}).status == "reproduced"
