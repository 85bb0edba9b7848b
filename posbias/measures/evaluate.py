"""Measurements on trained ensembles: accuracies, the position gaps, sweeps, attention maps, sinks.

The first functions take an :class:`~posbias.science.model.EnsembleNet` and the member tasks and return one
number (or array) per member, on the leading axis ``E``; the rest read stored unit results (one dict
per run) and return tensors with a leading run axis, tables, or integrity checks. Measurements only:
the claims judged on them are the register's (:mod:`posbias.analysis.claims`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Collection

import torch

from posbias.science.attention import masked_softmax
from posbias.science.model import EnsembleNet
from posbias.measures.stats import seed_mean_se, t_critical, verdict
from posbias.science.task import IC_PAIRS, Task, TaskConfig, TestSet, accuracy, train_batch

__all__ = ["ic_accuracies", "gaps", "GAP_PAIRS", "sweep_accuracies", "attention_maps", "sink_alpha",
           "uniform_sink_alpha", "sink_share", "seed_mean_se", "stack", "gap_curves", "final_accuracy",
           "loss_rose", "training_sanity", "check_training", "attention_residual", "FIG2_PES", "Coverage",
           "coverage", "complete_depths", "rising", "fig2_table", "FIG3_NAMES", "fig3_name",
           "slot_preference", "IC_SETS", "ic_accuracy_by_set", "slot_preference_curve", "sink_summary",
           "u_statistic", "sink_excess", "check_attention_records", "ExcessPeak", "excess_peaks",
           "fig6_mask", "first_is_peak", "sink_rate_rows"]

#: The three gaps of the paper: ``acc(IC_a_b) - acc(IC_b_a)``; positive = bias toward ``a`` (earlier).
GAP_PAIRS = (("first", "middle"), ("first", "last"), ("middle", "last"))


@torch.no_grad()
def ic_accuracies(net: EnsembleNet, tasks: list[Task], sets: dict[str, TestSet]) -> dict[str, torch.Tensor]:
    """Accuracy ``(E,)`` on each named test set."""
    return {name: accuracy(net, tasks, ts) for name, ts in sets.items()}


def gaps(acc: dict[str, list[float] | torch.Tensor | float]) -> dict[str, torch.Tensor]:
    """``{"first-middle": acc(IC_first_middle) - acc(IC_middle_first), ...}`` from the six accuracies."""
    out = {}
    for a, b in GAP_PAIRS:
        out[f"{a}-{b}"] = torch.as_tensor(acc[f"IC_{a}_{b}"]) - torch.as_tensor(acc[f"IC_{b}_{a}"])
    return out


def sweep_accuracies(net: EnsembleNet, tasks: list[Task], sets: list[TestSet]) -> torch.Tensor:
    """Accuracy with the target at each slot, ``(E, N)``, from :func:`posbias.science.task.sweep_test_sets`."""
    return torch.stack([accuracy(net, tasks, ts) for ts in sets], dim=1)


@torch.no_grad()
def attention_maps(net: EnsembleNet, tasks: list[Task], n_seqs: int, seed: int,
                   chunk: int = 512) -> torch.Tensor:
    """Attention of every layer on unbiased training-distribution sequences: ``(E, depth, n, T, T)``.

    The sequences come from each member's own task (seed ``seed``, uniform target slot).
    """
    dev = net.w_q.device
    out = []
    for lo in range(0, n_seqs, chunk):
        b = min(chunk, n_seqs - lo)
        x = torch.stack([train_batch(t, seed, lo // chunk, b)[0] for t in tasks]).to(dev)
        out.append(net(x, return_attention=True)[1].cpu())
    return torch.cat(out, dim=2)


def sink_alpha(attn: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Gu et al.'s ``alpha_k``: mean attention key ``k`` receives from the queries allowed to see it.

    ``attn`` ``(..., T, T)`` (rows = queries), ``mask`` ``(T, T)`` boolean. Returns ``(..., T)``.
    """
    m = mask.to(attn.dtype)
    return (attn * m).sum(-2) / m.sum(-2)


def uniform_sink_alpha(mask: torch.Tensor) -> torch.Tensor:
    """``alpha_k`` of uniform attention under ``mask`` (every query spreads evenly over the keys it
    sees): the baseline a sink must exceed. ``mask`` ``(T, T)`` boolean; returns ``(T,)`` float64.
    Under a causal mask ``alpha_1 = H_T / T`` (harmonic number)."""
    uniform = masked_softmax(torch.zeros(mask.shape, dtype=torch.float64), mask)
    return sink_alpha(uniform, mask)


def sink_share(attn: torch.Tensor, mask: torch.Tensor, threshold: float = 0.3) -> torch.Tensor:
    """Share of (sequence, layer, head) with ``alpha_k > threshold``, per key ``k``.

    ``attn`` ``(layers, n, T, T)`` for one single-head member; returns ``(T,)`` in ``[0, 1]``.
    """
    alpha = sink_alpha(attn, mask)                    # (layers, n, T)
    return (alpha > threshold).float().flatten(0, -2).mean(0)


# --------------------------------------------------------------------------- stored units


def stack(units: list[dict], *path: str) -> torch.Tensor:
    """Stack a field of several unit results (e.g. the seeds of one configuration) along axis 0.

    ``stack(units, "gaps", "first-last")`` -> ``(seeds,)``; ``stack(units, "curves", "IC_first_last")``
    -> ``(seeds, evals)``.
    """
    out = []
    for u in units:
        v = u
        for p in path:
            v = v[p]
        out.append(torch.as_tensor(v, dtype=torch.float64))
    return torch.stack(out)


def gap_curves(units: list[dict]) -> dict[str, torch.Tensor]:
    """The three gaps against training step, ``(seeds, evals)`` each, from the stored curves."""
    acc = {name: stack(units, "curves", name) for name in units[0]["curves"] if name.startswith("IC_")}
    return gaps(acc)


# --------------------------------------------------------------------------- sanity of stored units

def final_accuracy(units: list[dict]) -> torch.Tensor:
    """Mean accuracy over the six IC sets at the end of training, one per unit, ``(units,)``."""
    names = list(units[0]["ic_accuracy"])
    return torch.stack([stack(units, "ic_accuracy", n) for n in names]).mean(0)


def loss_rose(units: list[dict]) -> list[int]:
    """Indices of the units whose mean training loss over the last evaluation interval is above its
    mean over the first: networks that ended worse than they began (``curves["loss"][0]`` is step 0)."""
    return [i for i, u in enumerate(units) if u["curves"]["loss"][-1] > u["curves"]["loss"][1]]


def training_sanity(units: list[dict], n_test: int, n_labels: int = TaskConfig.n_labels) -> dict[str, float]:
    """Numbers that must hold for any trained unit, whatever the paper's claims.

    - ``loss_drop``: the smallest, over units, of (mean training loss over the first evaluation
      interval) minus (mean over the last); positive when every network's loss fell.
    - ``best_drop``: the smallest, over units, of (mean loss over the first interval) minus (the
      lowest mean over any later interval); positive when every network's loss fell at some point,
      even if it rose again later. ``n_loss_rose``: how many units end above their first interval.
    - ``count_residual``: the largest distance of ``accuracy * n_test`` from an integer over every
      stored IC accuracy (final and on the curves); near 0 when the test sets hold ``n_test``
      sequences (or a divisor of it).
    - ``gap_residual``: the largest difference between a stored gap ``a-b`` and ``IC_a_b - IC_b_a`` of
      the stored accuracies (read from the gap's name, not from :func:`gaps`, which training used).
    - ``accuracy_min``, ``chance`` (``1 / n_labels``) and ``z_chance``: the worst unit's final mean
      accuracy, and its distance above chance in binomial standard errors of an accuracy over
      ``6 n_test`` sequences at chance.
    """
    loss = torch.stack([torch.as_tensor(u["curves"]["loss"], dtype=torch.float64) for u in units])
    counts = [torch.as_tensor(v, dtype=torch.float64) * n_test
              for u in units for v in [*u["ic_accuracy"].values(),
                                       *(u["curves"][n] for n in u["curves"] if n.startswith("IC_"))]]
    count_residual = max(float((c - c.round()).abs().max()) for c in counts)
    stored = [{n: float(a) for n, a in u["ic_accuracy"].items()} for u in units]
    gap_residual = max(abs(float(g) - (a[f"IC_{x}_{y}"] - a[f"IC_{y}_{x}"]))
                       for u, a in zip(units, stored) for k, g in u["gaps"].items() for x, y in [k.split("-")])
    acc = final_accuracy(units)
    chance = 1.0 / n_labels
    se = (chance * (1 - chance) / (6 * n_test)) ** 0.5
    return {"loss_drop": float((loss[:, 1] - loss[:, -1]).min()),
            "best_drop": float((loss[:, 1] - loss[:, 2:].min(1).values).min()) if loss.shape[1] > 2 else
            float((loss[:, 1] - loss[:, -1]).min()), "n_loss_rose": float(len(loss_rose(units))),
            "count_residual": count_residual,
            "gap_residual": gap_residual, "accuracy_min": float(acc.min()), "chance": chance,
            "z_chance": float((acc.min() - chance) / se)}


#: When ``check_training`` asks networks to have learned (:func:`learning_judged`). Early on they sit on
#: the plateau at the loss of a uniform guess (``ln 32``), where the loss moves by batch noise (over 5
#: seeds at depths 1-2, -0.016 to +0.027 from the first to the last interval at 2-40 iterations); at
#: 500, depth-10 and 16 networks were still at chance. Every committed run of depth at most 4 at 1,000
#: iterations, and of any depth at 100,000, has its worst network beyond 3 SE above chance and its median
#: at four times chance or more; depth-6 No PE has a median of 0.048 at 1,000 (``tests/test_evaluate.py``).
LEARNING_STEPS, LEARNING_DEPTH, PAPER_STEPS = 1000, 4, 100_000


def learning_judged(units: list[dict], steps: int) -> tuple[list[dict], str]:
    """The networks whose learning :func:`check_training` judges after ``steps`` iterations, and why
    the others are not: every network from :data:`PAPER_STEPS` on; those of depth at most
    :data:`LEARNING_DEPTH` (``params["depth"]``) from :data:`LEARNING_STEPS` on; none below.
    Returns ``(judged, reason)``, ``reason`` empty when every network is judged."""
    if steps >= PAPER_STEPS:
        return units, ""
    if steps < LEARNING_STEPS:
        return [], (f"{steps} iterations: below {LEARNING_STEPS} networks can still sit on the plateau at the "
                    "loss of a uniform guess, where a fall or a rise is batch noise; train at least "
                    f"{LEARNING_STEPS} iterations")
    judged = [u for u in units if u["params"]["depth"] <= LEARNING_DEPTH]
    deep = sorted({u["params"]["depth"] for u in units} - {u["params"]["depth"] for u in judged})
    return judged, (f"networks of depth {', '.join(map(str, deep))} are not judged: deeper than "
                    f"{LEARNING_DEPTH}, networks can still be near chance after {steps} iterations (below "
                    f"{PAPER_STEPS:,}); add a depth of at most {LEARNING_DEPTH}" if deep else "")


def check_training(units: list[dict], n_test: int, steps: int, *, gaps: bool = True, prefix: str = "",
                   late_rise_ok: bool = False) -> dict[str, float]:
    """Assert (``report.check``) what must hold for trained units whatever the paper says.

    Every stored accuracy is a count out of ``n_test``; with ``gaps``, the stored gaps are the
    differences of the stored accuracies. On the networks :func:`learning_judged` names (a rule on the
    parameters: a few dozen smoke iterations test the plumbing, not learning, and deep networks learn
    late; with none judged the two checks are reported skipped, and a partial judgement is glued as
    ``learning_not_judged``; ``acc_min``, ``acc_median`` and ``z_chance`` are of the judged
    networks where any are): every judged network's loss fell (``loss-falls``; with
    ``late_rise_ok``: fell below its first interval's at some evaluation, so that a network that
    learned and then became unstable is reported, glued as ``n_loss_rose``, rather than refused; a
    pipeline that does not train still fails), and the worst judged network beats chance by more
    than three binomial standard errors and the median one reaches four times chance
    (``above-chance``: a pipeline in which most networks learn nothing fails). How far the networks learned is
    reported beside each claim (:mod:`posbias.analysis.claims`: share of the setting's ceiling), never checked
    here. Check names and glued values (``n_test_sets``, ``acc_min``, ``acc_median``, ``z_chance``,
    ``n_networks``) get ``prefix``. Returns :func:`training_sanity` with ``accuracy_median``.
    """
    from posbias.storage import report

    s = training_sanity(units, n_test)
    judged, why = learning_judged(units, steps)
    learned = training_sanity(judged, n_test) if judged else {}
    glue = prefix.replace("-", "_")
    report.value(f"{glue}n_test_sets", n_test)
    report.value(f"{glue}n_loss_rose", int(s["n_loss_rose"]))
    report.value(f"{glue}learning_not_judged", why or "none (every network is judged)")
    if not judged:
        report.skipped(f"{prefix}loss-falls", why)
    elif late_rise_ok:
        report.check(f"{prefix}loss-falls", "every judged network's mean training loss fell, at some evaluation "
                     "interval, below its mean over the first (a later rise is reported, not refused)",
                     value=learned["best_drop"], expected="smallest drop > 0", passed=learned["best_drop"] > 0)
    else:
        report.check(f"{prefix}loss-falls", "every judged network's mean training loss is lower over the last "
                     "evaluation interval than over the first", value=learned["loss_drop"],
                     expected="smallest drop > 0", passed=learned["loss_drop"] > 0)
    report.check(f"{prefix}test-set-size", f"every stored accuracy is a count out of n_test = {n_test} sequences",
                 value=s["count_residual"], expected="distance of acc * n_test from an integer < 0.01",
                 passed=s["count_residual"] < 0.01)
    if gaps:
        report.check(f"{prefix}gaps-recomputed", "the stored gaps equal the differences of the stored accuracies "
                     "(an integrity check of the files in data/: training writes both from the same numbers)",
                     value=s["gap_residual"], expected="< 1e-6", passed=s["gap_residual"] < 1e-6)
    s["accuracy_median"] = float(final_accuracy(units).median())
    shown = {**learned, "accuracy_median": float(final_accuracy(judged).median())} if judged else s
    report.value(f"{glue}acc_min", shown["accuracy_min"])
    report.value(f"{glue}acc_median", shown["accuracy_median"])
    report.value(f"{glue}z_chance", shown["z_chance"])
    report.value(f"{glue}n_networks", len(units))
    if not judged:
        report.skipped(f"{prefix}above-chance", why)
    else:
        typical = 4 * s["chance"]
        report.check(f"{prefix}above-chance", "the worst judged network's mean accuracy over the six IC sets exceeds "
                     "chance (1/32) and the median judged network's reaches four times chance",
                     value=f"worst {shown['accuracy_min']:.3f} ({shown['z_chance']:.1f} SE above chance), "
                     f"median {shown['accuracy_median']:.3f}",
                     expected=f"worst > 3 SE above 1/32; median >= {typical:.3f}",
                     passed=shown["z_chance"] > 3 and shown["accuracy_median"] >= typical)
    return s


def attention_residual(maps: torch.Tensor, mask: torch.Tensor) -> float:
    """How far mean attention maps ``(..., T, T)`` are from row-stochastic matrices supported on ``mask``:
    the largest of ``|row sum - 1|`` and of the attention on a masked (forbidden) entry."""
    m = maps.to(torch.float64)
    outside = (m * (~mask).to(m.dtype)).abs()
    return max(float((m.sum(-1) - 1).abs().max()), float(outside.max()))


# --------------------------------------------------------------------------- chapter tables (Figures 2-6)
# What the trained-figure chapters show, built here so that a chapter calls one function per table.

FIG2_PES = ("No PE", "decay", "RoPE")


@dataclass(frozen=True)
class Coverage:
    """How much of a campaign is stored (:func:`coverage`).

    ``n_units``: the units stored; ``n_total``: the units the campaign has; ``complete``: label ->
    its results, one per seed, only for the labels whose every seed is stored, in the campaign's
    order; ``statement``: the phrase a chapter glues, ``"N of M units committed"``."""

    n_units: int
    n_total: int
    complete: dict[str, list[dict]]
    statement: str


def coverage(stored: dict[str, list[dict | None]]) -> Coverage:
    """How much of a campaign is stored, from ``train.stored_campaign`` (label -> one result or
    ``None`` per seed), as a :class:`Coverage`."""
    n_units = sum(u is not None for us in stored.values() for u in us)
    n_total = sum(len(us) for us in stored.values())
    complete = {k: list(us) for k, us in stored.items() if us and all(u is not None for u in us)}
    return Coverage(n_units, n_total, complete, f"{n_units} of {n_total} units committed")


def complete_depths(complete: dict[str, list[dict]], pes: Collection[str] = FIG2_PES,
                    within: Collection[int] | None = None) -> tuple[list[int], dict[str, list[dict]]]:
    """The depths of a Figure-2-shaped campaign (labels ``f"{pe}|{depth}"``) at which every
    architecture of ``pes`` is complete, from :func:`coverage`'s ``complete``, in increasing order,
    and the results of those depths only (``f"{pe}|{depth}"`` -> one result per seed): what
    ``fig2_table`` and ``figures.gap_bars_figure`` take. A depth missing one architecture, or
    one seed of it, is left out, and so is a depth not in ``within`` (a chapter's ``depths``) when
    it is given."""
    depths = {int(k.rpartition("|")[2]) for k in complete if k.rpartition("|")[0] in pes}
    full = sorted(d for d in depths if all(f"{pe}|{d}" in complete for pe in pes)
                  and (within is None or d in within))
    return full, {f"{pe}|{d}": complete[f"{pe}|{d}"] for d in full for pe in pes}


def rising(units: list[dict], n_test: int, level: float = 0.05) -> bool:
    """Were these networks still improving when training stopped? The mean accuracy over the six IC
    sets at the last evaluation minus the one before, per unit, is positive beyond Student's t critical
    value at ``level`` (the binomial bound of ``6 n_test`` sequences per accuracy added to the spread
    between units, :func:`~posbias.measures.stats.seed_mean_se`). False with fewer than two evaluations. Each
    unit's own last two evaluations: networks trained to a stopping rule stop at different steps, so
    their curves differ in length."""
    names = [n for n in units[0]["curves"] if n.startswith("IC_")]
    steps = []
    for u in units:
        acc = torch.stack([torch.as_tensor(u["curves"][n], dtype=torch.float64) for n in names]).mean(0)
        if acc.numel() < 2:
            return False
        steps.append(acc[-1] - acc[-2])
    mean, se = seed_mean_se(torch.stack(steps), n_test, coef2=2 / len(names))    # a mean of len(names) accuracies
    return verdict(mean, se, 1, t_critical(len(units), level)) == "reproduced"


def fig2_table(results: dict[str, list[dict]], depths: list[int], n_test: int,
               pes: tuple[str, ...] = FIG2_PES):
    """Figure 2's table (also the residual study's): one row per (PE, depth) of ``results[f"{pe}|{d}"]``.

    Columns: ``PE``, ``depth``, ``accuracy`` (mean over seeds of the mean over the six IC sets), the
    three gaps as ``"mean ± SE"`` (:func:`seed_mean_se`, test sets of ``n_test`` sequences) and
    ``still rising`` (:func:`rising`, in words: ``"yes"``/``"no"``). Returns a ``pandas.DataFrame`` (empty
    with no depth).
    """
    import pandas as pd

    rows = []
    for d in depths:
        for pe in pes:
            us = results[f"{pe}|{d}"]
            gaps_ = {f"{a}-{b}": "{:+.3f} ± {:.3f}".format(*seed_mean_se(stack(us, "gaps", f"{a}-{b}"), n_test))
                     for a, b in GAP_PAIRS}
            rows.append({"PE": pe, "depth": d, "accuracy": round(float(final_accuracy(us).mean()), 3), **gaps_,
                         "still rising": "yes" if rising(us, n_test) else "no"})
    return pd.DataFrame(rows)


#: Figure 3's and 4's architectures, ``mask|pe`` -> the name the chapters print.
FIG3_NAMES = {"full|none": "no mask, No PE", "full|sin": "no mask, sin", "full|rope": "no mask, RoPE",
              "causal|none": "causal, No PE", "causal|sin": "causal, sin", "causal|rope": "causal, RoPE"}


def fig3_name(mask: str, pe: str) -> str:
    """An architecture of Figures 3 and 4 in running prose, e.g. ``no-mask RoPE``, ``causal No PE``
    (the ``name`` of :func:`posbias.training.progress_text`)."""
    return FIG3_NAMES[f"{mask}|{pe}"].replace("no mask, ", "no-mask ").replace(", ", " ")


def slot_preference(units: list[dict], w: str) -> torch.Tensor:
    """Per-seed preference for slot ``w`` (``first``, ``middle`` or ``last``): the mean of the two gaps
    involving ``w``, signed toward ``w``; ``(seeds,)``."""
    return _toward({f"{a}-{b}": stack(units, "gaps", f"{a}-{b}") for a, b in GAP_PAIRS}, w)


def _toward(g: dict[str, torch.Tensor], w: str) -> torch.Tensor:
    """The mean of the two gaps of ``g`` (``"first-middle"``, ...) involving slot ``w``, signed toward ``w``."""
    return {"first": (g["first-middle"] + g["first-last"]) / 2,
            "middle": (-g["first-middle"] + g["middle-last"]) / 2,
            "last": (-g["first-last"] - g["middle-last"]) / 2}[w]


#: The six IC test sets in the order of :data:`~posbias.science.task.IC_PAIRS` (``IC_first_middle``, ...).
IC_SETS = tuple(f"IC_{a}_{b}" for a, b in IC_PAIRS)


def ic_accuracy_by_set(units: list[dict]) -> torch.Tensor:
    """The final accuracy of each unit (e.g. the seeds of one configuration) on each of the six IC
    test sets, ``(units, 6)``, columns in the order of :data:`IC_SETS`."""
    return torch.stack([stack(units, "ic_accuracy", s) for s in IC_SETS], dim=1)


def slot_preference_curve(units: list[dict], w: str) -> torch.Tensor:
    """:func:`slot_preference` along training: the mean of the two gaps involving slot ``w``, signed
    toward ``w``, at every evaluation of the stored curves, ``(seeds, evals)``."""
    return _toward(gap_curves(units), w)


def sink_summary(units: list[dict], mask: torch.Tensor) -> dict[str, float]:
    """Where single-head units' attention sits, from their stored ``sink_alpha`` ``(seeds, depth, T)``
    and ``sink_share`` ``(T,)``: ``alpha1`` (key 1's ``alpha``, mean over seeds and layers),
    ``alpha1_unif`` (its value under uniform attention, :func:`uniform_sink_alpha` of ``mask``),
    ``share1`` (mean share of (sequence, layer) pairs with ``alpha_1 > 0.3``) and ``share_other``
    (the largest mean share at keys ``2..T-1``; the last key sees only itself)."""
    alpha = stack(units, "sink_alpha")
    share = stack(units, "sink_share").mean(0)
    return {"alpha1": float(alpha[:, :, 0].mean()), "alpha1_unif": float(uniform_sink_alpha(mask)[0]),
            "share1": float(share[0]), "share_other": float(share[1:share.shape[0] - 1].max())}


def u_statistic(sweep: torch.Tensor) -> torch.Tensor:
    """The depth of a lost-in-the-middle U in position sweeps ``(seeds, N)``: the lower of the
    accuracies at the first and the last slot minus the mean accuracy over the slots between, per
    seed ``(seeds,)``; positive when both ends beat the middle."""
    s = torch.as_tensor(sweep, dtype=torch.float64)
    return torch.minimum(s[:, 0], s[:, -1]) - s[:, 1:-1].mean(-1)


def sink_excess(units: list[dict], mask: torch.Tensor) -> torch.Tensor:
    """Per seed, the layer-averaged ``alpha_k`` minus uniform attention's under ``mask``: ``(seeds, T)``."""
    return stack(units, "sink_alpha").mean(1) - uniform_sink_alpha(mask)


def check_attention_records(units: list[dict], mask: torch.Tensor, *, prefix: str = "") -> None:
    """Assert (``report.check``) that the stored attention of single-mask units is sound: every mean
    map ``(seeds, depth, T, T)`` is row-stochastic with no weight outside ``mask``
    (``<prefix>attention-masked``), and the stored ``alpha_k`` (a mean over sequences) equals
    ``alpha_k`` of the mean map, as it must since ``alpha_k`` is linear in the attention
    (``<prefix>alpha-recomputed``)."""
    from posbias.storage import report

    maps = stack(units, "mean_attention")
    leak = attention_residual(maps, mask)
    report.check(f"{prefix}attention-masked", "mean attention maps are row-stochastic with no weight outside the "
                 "mask", value=leak, expected="< 1e-5", passed=leak < 1e-5)
    gap = float((sink_alpha(maps, mask) - stack(units, "sink_alpha")).abs().max())
    report.check(f"{prefix}alpha-recomputed", "stored alpha_k (mean over sequences) equals alpha_k of the mean "
                 "attention map", value=gap, expected="< 1e-5", passed=gap < 1e-5)


@dataclass
class ExcessPeak:
    """Where one mask's networks put their attention (:func:`excess_peaks`): the first token's
    excess over uniform attention (mean over runs), the key (1-based, the last excluded) with the
    largest mean excess, and whether that key is a label token (``x1 l1 x2 l2 ...``: even keys)."""
    first: float
    top_key: int
    top_is_label: bool


def excess_peaks(excess: dict[str, torch.Tensor]) -> dict[str, ExcessPeak]:
    """:class:`ExcessPeak` of each label of ``excess`` (:func:`sink_excess`, ``(seeds, T)``)."""
    out = {}
    for label, e in excess.items():
        m = torch.as_tensor(e, dtype=torch.float64).mean(0)
        top = int(m[:m.shape[0] - 1].argmax()) + 1
        out[label] = ExcessPeak(float(m[0]), top, top % 2 == 0)
    return out


def fig6_mask(label: str, T: int) -> torch.Tensor:
    """The boolean mask ``(T, T)`` of a Figure 6 campaign label: ``causal``, ``window|w`` or ``prefix|K``."""
    from posbias.science.model import MemberConfig

    kind, _, size = label.partition("|")
    cfg = MemberConfig(kind, window=int(size) if kind == "window" else None,
                       prefix=int(size) if kind == "prefix" else None)
    return cfg.mask_and_bias(T)[0]


def first_is_peak(rate) -> bool:
    """Is position 1 the sink of a per-position sink rate ``(T,)``: positive there and larger than at
    every other position but the last (seen only by itself, its ``alpha`` is one attention weight)?"""
    r = torch.as_tensor(rate, dtype=torch.float64)[:-1]
    return bool(r[0] > 0 and r[0] > r[1:].max())


def sink_rate_rows(toy_share: dict[str, torch.Tensor], windows: list[int], prefixes: list[int],
                   real: dict[str, torch.Tensor], label: str = "toy") -> list[dict]:
    """Rows of the one-scale sink table: for each toy mask (``toy_share[label]`` ``(seeds, T)``,
    labels ``causal``, ``window|w``, ``prefix|K``; missing ones skipped) and each real input (``real[name]`` ``(n,)``),
    the sink rate at the sink position (the first token; the mean over the prefix for a prefix mask)
    and the largest rate elsewhere, the last position excluded."""
    def row(name: str, rate: torch.Tensor, k: int = 1) -> dict:
        return {"network": name, "rate at the sink": float(rate[:k].mean()),
                "max elsewhere": float(rate[k:-1].max())}

    rows = []
    for key, name, k in ([("causal", f"{label}, causal", 1)] + [(f"window|{w}", f"{label}, window w={w}", 1)
                         for w in windows] + [(f"prefix|{K}", f"{label}, prefix K={K} (prefix mean)", K)
                                              for K in prefixes]):
        if key in toy_share:
            rows.append(row(name, torch.as_tensor(toy_share[key], dtype=torch.float64).mean(0), k))
    return rows + [row(name, torch.as_tensor(r, dtype=torch.float64)) for name, r in real.items()]


