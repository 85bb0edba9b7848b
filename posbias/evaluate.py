"""Measurements on trained ensembles: accuracies, the position gaps, sweeps, attention maps, sinks.

All functions take an :class:`~posbias.model.EnsembleNet` and the member tasks and return one
number (or array) per member, on the leading axis ``E``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Collection

import torch

from .attention import masked_softmax
from .model import EnsembleNet
from .stats import VERDICTS, holm, p_value, seed_mean_se, t_critical, verdict  # noqa: F401  (re-exported)
from .task import IC_PAIRS, Task, TaskConfig, TestSet, train_batch

__all__ = ["accuracy", "ic_accuracies", "gaps", "GAP_PAIRS", "sweep_accuracies", "attention_maps",
           "sink_alpha", "sink_share", "seed_mean_se", "verdict", "stack", "gap_curves", "claim", "depth_claims",
           "still_learning", "final_accuracy", "loss_rose", "training_sanity", "attention_residual", "VERDICTS",
           "publish_claims", "check_claims",
           "t_critical", "p_value", "holm", "holm_verdicts", "learned", "LEARNED_LOSS_FRACTION",
           "LEARNED_ACCURACY_FACTOR", "learned_rule", "depth_mean_claim", "residual_claims", "fig3_specs",
           "fig3_claims",
           "fig4_specs", "fig4_claims", "n_tested", "slot_preference", "FIG3_NAMES", "PAPER_SCALE_STEPS",
           "complete_depths", "fig2_study_claims", "IC_SETS", "ic_accuracy_by_set", "slot_preference_curve",
           "fig3_measurable_claims", "fig4_measurable_claims", "Coverage", "Claim", "u_claims", "u_frame",
           "ExcessPeak", "excess_peaks", "depth_trend_phrase"]

#: The three gaps of the paper: ``acc(IC_a_b) - acc(IC_b_a)``; positive = bias toward ``a`` (earlier).
GAP_PAIRS = (("first", "middle"), ("first", "last"), ("middle", "last"))


@torch.no_grad()
def accuracy(net: EnsembleNet, tasks: list[Task], ts: TestSet, chunk: int = 1024) -> torch.Tensor:
    """Share of ``ts`` each member classifies correctly, ``(E,)``. Each member sees the test items
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
    """Accuracy with the target at each slot, ``(E, N)``, from :func:`posbias.task.sweep_test_sets`."""
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


# --------------------------------------------------------------------------- summaries over seeds

def n_tested(rows: list[Claim]) -> int:
    """How many of a table's :func:`claim` rows are tested: all but the ``not comparable`` ones."""
    return sum(r.verdict != "not comparable" for r in rows)


def holm_verdicts(rows: list[Claim], level: float = 0.05) -> list[Claim]:
    """Set ``holm_verdict`` of each :func:`claim` row: the verdict once Holm's correction
    (:func:`holm`) is applied over the rows tested together (the ``not comparable`` ones are not
    tested and keep their verdict). A rejected claim is ``reproduced`` or ``contradicted`` by the
    sign of its mean in the claimed direction; the others ``inconclusive``. Returns ``rows``."""
    tested = [r for r in rows if r.verdict != "not comparable"]
    for r in rows:
        r.holm_verdict = r.verdict
    for r, rejected in zip(tested, holm([r.p for r in tested], level)):
        r.holm_verdict = ("reproduced" if r.sign * r.mean > 0 else "contradicted") if rejected else "inconclusive"
    return rows


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


@dataclass
class Claim:
    """One row of a chapter's claims table (:func:`claim`): a quantity the paper says is positive
    (``sign=+1``) or negative, its mean and standard error over ``n_runs`` runs, and the verdict.

    ``crit`` is the critical value the verdict used and ``p`` the two-sided p-value. The optional
    columns are filled where they apply: ``learned`` (``"k of n"`` networks that learned, when
    learning is judged), ``depth`` and ``accuracy_shallow_deep`` (Figure 2 and the residual study),
    ``still_rising`` (were the networks still improving when training stopped, :func:`rising`),
    ``holm_verdict`` (:func:`holm_verdicts`) and ``asserted`` (:func:`publish_claims`)."""
    name: str
    claim: str
    mean: float
    se: float
    verdict: str
    sign: int = 1
    n_runs: int = 1
    crit: float = 2.0
    p: float = 1.0
    learned: str | None = None
    depth: str | None = None
    accuracy_shallow_deep: str | None = None
    still_rising: bool | None = None
    holm_verdict: str | None = None
    asserted: bool = False

    def table_row(self) -> dict[str, object]:
        """The row as the page shows it: the :data:`CLAIM_COLUMNS` this claim has (not ``None``),
        keyed by their column names, with ``name``."""
        out: dict[str, object] = {"name": self.name}
        for col in CLAIM_COLUMNS:
            v = getattr(self, _CLAIM_ATTRS.get(col, col))
            if v is not None:
                out[col] = v
        return out


def claim(name: str, text: str, per_seed, n_test: int, sign: int = 1, n_acc: int = 2, *,
          learned: Collection[bool] | None = None, level: float = 0.05) -> Claim:
    """One row of a chapter's claims table: a quantity that the paper says is positive (``sign=+1``)
    or negative, measured per seed. ``n_acc`` is how many accuracies enter it (2 for a gap, 4 for a
    difference of gaps), which sets the binomial part of the error.

    The verdict compares the mean with Student's t critical value for the number of runs
    (:func:`t_critical`, ``runs - 1`` degrees of freedom, two-sided ``level``). The standard error
    (:func:`seed_mean_se`) adds a bound on the test sets' binomial noise to the spread between runs,
    so the test is conservative. With ``learned`` (one flag per network the quantity uses,
    :func:`learned`) a claim resting on any network that did not learn is ``not comparable``, and
    the row's ``learned`` says ``"k of n"``.
    """
    n = torch.as_tensor(per_seed).numel()
    mean, se = seed_mean_se(per_seed, n_test * 2 // n_acc)
    crit = t_critical(n, level)
    row = Claim(name, text, mean, se, verdict(mean, se, sign, crit), sign=sign, n_runs=n, crit=crit,
                p=p_value(mean, se, n))
    if learned is not None:
        flags = [bool(f) for f in learned]
        row.learned = f"{sum(flags)} of {len(flags)}"
        if not all(flags):
            row.verdict = "not comparable"
    return row


def depth_mean_claim(name: str, text: str, per_depth, n_test: int, sign: int = 1, n_acc: int = 2, **kw) -> Claim:
    """:func:`claim` on each run's mean over depths of a quantity measured at every depth,
    ``per_depth`` ``(depths, seeds)`` (a list of per-seed tensors, one per depth).

    The test-set error is that of one depth, *not* divided by the number of depths: every depth is
    tested on the same sequences (``train.TEST_SEED``), so their test noise is shared and the bound
    of one depth bounds the mean (``n_test``, not ``n_test * depths``). Keywords as :func:`claim`.
    """
    per_seed = torch.stack([torch.as_tensor(q, dtype=torch.float64) for q in per_depth]).mean(0)
    return claim(name, text, per_seed, n_test, sign=sign, n_acc=n_acc, **kw)


def fixed_depth_claims(gap: Callable[[str, str], torch.Tensor]) -> list[tuple[str, str, list[str], torch.Tensor, int]]:
    """The five claims of Wu et al.'s Figure 2 at a fixed depth, from ``gap(pe, pair)`` -> per-seed gaps.

    ``pe`` is ``"No PE"``, ``"decay"`` or ``"RoPE"``; ``pair`` is ``"first-middle"``, ``"first-last"``
    or ``"middle-last"``. Returns ``(name, claim, architectures involved, per-seed quantity, n_acc)``
    rows for :func:`claim` (``n_acc`` accuracies enter the quantity).
    """
    fl = lambda pe: gap(pe, "first-last")  # noqa: E731
    return [
        ("nope-early", "No PE (causal) prefers the first slot to the last", ["No PE"], fl("No PE"), 2),
        ("middle-last-smaller", "No PE: the middle-vs-last gap is smaller than the first-vs-last gap", ["No PE"],
         fl("No PE") - gap("No PE", "middle-last"), 4),
        ("decay-reduces", "the decay mask lowers the first-vs-last gap below No PE", ["No PE", "decay"],
         fl("No PE") - fl("decay"), 4),
        ("rope-reduces", "RoPE lowers the first-vs-last gap below No PE", ["No PE", "RoPE"],
         fl("No PE") - fl("RoPE"), 4),
        ("decay-more-than-rope", "the decay mask lowers it more than RoPE", ["RoPE", "decay"],
         fl("RoPE") - fl("decay"), 4),
    ]


def depth_claims(first_last: Callable[[str, int], torch.Tensor], lo: int, hi: int
                 ) -> list[tuple[str, str, list[str], torch.Tensor, int]]:
    """The three depth claims of Wu et al.'s Figure 2, from ``first_last(pe, depth)`` -> per-seed
    first-vs-last gaps: for each ``pe`` the gap grows from ``lo`` to ``hi`` layers. Rows as
    :func:`fixed_depth_claims` (the architecture involved, a difference of two gaps: ``n_acc=4``)."""
    return [(f"depth-{pe.replace(' ', '').lower()}", f"{pe}: the first-vs-last gap grows from {lo} to {hi} layers",
             [pe], first_last(pe, hi) - first_last(pe, lo), 4) for pe in ["No PE", "decay", "RoPE"]]


def still_learning(units: list[dict], n_test: int) -> Claim:
    """Is the mean accuracy over the six IC sets still rising at the end of training?

    Compares the last evaluation with the one before, per seed; a ``reproduced`` verdict means the
    networks were still improving by more than two standard errors when training stopped.
    """
    names = [n for n in units[0]["curves"] if n.startswith("IC_")]
    acc = torch.stack([stack(units, "curves", n) for n in names]).mean(0)      # (seeds, evals)
    if acc.shape[1] < 2:
        return Claim("still-learning", "accuracy still rising at the end", 0.0, 0.0, "inconclusive")
    return claim("still-learning", "accuracy still rising at the end", acc[:, -1] - acc[:, -2], n_test * len(names))


def publish_claims(rows: list[Claim], asserted: Collection[str] = (), *, prefix: str = "") -> None:
    """Glue a chapter's table of :func:`claim` rows and mark which of them are asserted.

    A row named in ``asserted`` is asserted (``row.asserted``) only if its networks had stopped
    improving (``not row.still_rising``, unknown = stopped) and it is not ``not
    comparable``: a claim about what networks learn measures how far training got while they still
    learn. Glued (each name after ``prefix``):
    ``v_<name>``, ``m_<name>``, ``s_<name>`` (verdict, mean, SE of each row); ``reproduction`` (the
    rows); ``n_reproduced``, ``n_inconclusive``, ``n_contradicted``, ``n_not_comparable``,
    ``n_claims``; ``n_tested`` (the claims not ``not comparable``: the size of the family a
    multiplicity correction such as :func:`holm_verdicts` works on);
    ``contradicted_list`` (each contradicted claim with its mean and SE, or ``none``);
    ``n_kind`` (how many are named in ``asserted``) and ``n_asserted`` (how many are asserted).
    """
    from . import report

    unknown = set(asserted) - {r.name for r in rows}
    if unknown:
        raise ValueError(f"asserted claims {sorted(unknown)} are not in the table")
    for r in rows:
        r.asserted = r.name in asserted and not r.still_rising and r.verdict != "not comparable"
        for key in ["verdict", "mean", "se"]:
            report.value(f"{prefix}{key[0]}_{r.name}", getattr(r, key))
    report.value(f"{prefix}reproduction", rows)
    for v in VERDICTS:
        report.value(f"{prefix}n_{v.replace(' ', '_')}", sum(r.verdict == v for r in rows))
    report.value(f"{prefix}n_claims", len(rows))
    report.value(f"{prefix}n_tested", n_tested(rows))
    report.value(f"{prefix}contradicted_list", "; ".join(f"{r.claim} ({r.mean:+.3f} ± {r.se:.3f})"
                                                         for r in rows if r.verdict == "contradicted") or "none")
    report.value(f"{prefix}n_kind", len(set(asserted)))
    report.value(f"{prefix}n_asserted", sum(r.asserted for r in rows))


def check_claims(rows: list[Claim], z: float | None = None) -> None:
    """Assert (``report.check``) every row that :func:`publish_claims` marked asserted: its quantity is
    not contradicted, i.e. ``sign * mean >= -z * se`` in the claimed direction (``row.sign``).
    ``z`` is, unless given, the row's Student's t critical value (``row.crit``, :func:`claim`)."""
    from . import report

    for r in rows:
        if r.asserted:
            zr = z if z is not None else r.crit
            report.check(f"claim-{r.name}", r.claim, value=f"{r.mean:+.3f} ± {r.se:.3f}",
                         expected=f"{'-' if r.sign < 0 else ''}mean > -{zr:.2f} SE (not contradicted)",
                         passed=r.sign * r.mean >= -zr * r.se)


# --------------------------------------------------------------------------- sanity of stored units

def final_accuracy(units: list[dict]) -> torch.Tensor:
    """Mean accuracy over the six IC sets at the end of training, one per unit, ``(units,)``."""
    names = list(units[0]["ic_accuracy"])
    return torch.stack([stack(units, "ic_accuracy", n) for n in names]).mean(0)


#: A network has learned when its final training loss is at most this fraction of chance's ``ln L``
#: (:func:`learned`).
LEARNED_LOSS_FRACTION = 0.75
#: ... and its final mean IC accuracy is at least this many times chance ``1 / L``.
LEARNED_ACCURACY_FACTOR = 13
#: Training runs of at least this many steps are held to the paper's standard: claims on them are
#: judged for learning by default (``judge_learning=None``) and ``check_training`` asks that at
#: least half of the networks learned. Shorter runs are the book's re-run-it-yourself demonstrations.
PAPER_SCALE_STEPS = 10_000


def learned_rule(n_labels: int = TaskConfig.n_labels) -> dict[str, float | str]:
    """:func:`learned`'s thresholds for the prose: ``loss_max`` (nats), ``accuracy_min`` and
    ``text``, one phrase such as "final training loss <= 2.60 nats (0.75 ln 32) and mean IC
    accuracy >= 13/32"."""
    import math

    loss_max = LEARNED_LOSS_FRACTION * math.log(n_labels)
    return {"loss_max": loss_max, "accuracy_min": LEARNED_ACCURACY_FACTOR / n_labels,
            "text": f"final training loss <= {loss_max:.2f} nats ({LEARNED_LOSS_FRACTION:g} ln {n_labels}) "
                    f"and mean IC accuracy >= {LEARNED_ACCURACY_FACTOR}/{n_labels}"}


def _judging(judge_learning: bool | None, units: list[dict]) -> bool:
    """``judge_learning`` as given, or (``None``) whether every unit trained for :data:`PAPER_SCALE_STEPS`."""
    if judge_learning is not None:
        return judge_learning
    return bool(units) and all(u.get("params", {}).get("steps", 0) >= PAPER_SCALE_STEPS for u in units)


def learned(units: list[dict], n_labels: int = TaskConfig.n_labels, *,
            loss_fraction: float = LEARNED_LOSS_FRACTION, accuracy_factor: float = LEARNED_ACCURACY_FACTOR
            ) -> list[bool]:
    """Did each network learn the task? One flag per unit.

    Learned: the final mean accuracy over the six IC sets is at least ``accuracy_factor / L``
    (13/32 = 0.41: 13 times chance, about four fifths of the 0.52 that every two-layer network
    reaches at the paper's settings) *and* the mean training loss over the last evaluation interval
    is at most ``loss_fraction * ln L`` (three quarters of chance's ``ln 32 = 3.47`` nats, 2.60).
    Accuracy is the task the paper's claims are about; the loss guards against a network that
    scores by luck on the test sets. On Figure 2's 45 paper units the accuracies leave a gap between
    0.39 and 0.43 where the threshold sits: every network at depths 2 and 4 learned (the four-layer
    No-PE ones reach 0.44 with losses of 2.13-2.24, slower to fit the training batches than the rest
    but as accurate as four-layer RoPE); at depth 6 the decay networks learned (0.43-0.51, losses
    0.75-2.45) and none of the No-PE or RoPE ones did (0.12-0.39, losses 2.39-3.32).
    """
    import math

    acc = final_accuracy(units)
    loss = [float(u["curves"]["loss"][-1]) for u in units]
    return [x <= loss_fraction * math.log(n_labels) and float(a) >= accuracy_factor / n_labels
            for x, a in zip(loss, acc)]


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
    - ``gap_residual``: the largest difference between a stored gap and :func:`gaps` recomputed
      from the stored accuracies.
    - ``accuracy_min``, ``chance`` (``1 / n_labels``) and ``z_chance``: the worst unit's final mean
      accuracy, and its distance above chance in binomial standard errors of an accuracy over
      ``6 n_test`` sequences at chance.
    """
    loss = torch.stack([torch.as_tensor(u["curves"]["loss"], dtype=torch.float64) for u in units])
    counts = [torch.as_tensor(v, dtype=torch.float64) * n_test
              for u in units for v in [*u["ic_accuracy"].values(),
                                       *(u["curves"][n] for n in u["curves"] if n.startswith("IC_"))]]
    count_residual = max(float((c - c.round()).abs().max()) for c in counts)
    gap_residual = max(float((torch.as_tensor(u["gaps"][k], dtype=torch.float64) - g).abs())
                       for u in units for k, g in gaps({n: torch.as_tensor(a, dtype=torch.float64)
                                                        for n, a in u["ic_accuracy"].items()}).items())
    acc = final_accuracy(units)
    chance = 1.0 / n_labels
    se = (chance * (1 - chance) / (6 * n_test)) ** 0.5
    return {"loss_drop": float((loss[:, 1] - loss[:, -1]).min()),
            "best_drop": float((loss[:, 1] - loss[:, 2:].min(1).values).min()) if loss.shape[1] > 2 else
            float((loss[:, 1] - loss[:, -1]).min()), "n_loss_rose": float(len(loss_rose(units))),
            "count_residual": count_residual,
            "gap_residual": gap_residual, "accuracy_min": float(acc.min()), "chance": chance,
            "z_chance": float((acc.min() - chance) / se)}


def check_training(units: list[dict], n_test: int, steps: int, *, gaps: bool = True, prefix: str = "",
                   late_rise_ok: bool = False) -> dict[str, float]:
    """Assert (``report.check``) what must hold for trained units whatever the paper says.

    Every network's loss fell (with ``late_rise_ok``: fell below its first interval's at some
    evaluation, so that a network that learned and then became unstable is reported, glued as
    ``n_loss_rose``, rather than refused; a pipeline that does not train still fails); every stored
    accuracy is a count out of ``n_test``; with ``gaps``, the stored gaps are the differences of the
    stored accuracies; from 500 steps on (a rule on the
    parameters: a few dozen smoke iterations test the plumbing, not learning) the worst network beats
    chance by more than three binomial standard errors and the median network reaches four times
    chance (``above-chance``: a pipeline in which most networks learn nothing fails, while a few
    short-trained deep networks near chance do not make it fail); from 10,000 steps on (the paper's
    scale) at least half of the networks learned (:func:`learned`, ``learned-share``). Check names
    and glued values (``n_test_sets``, ``acc_min``, ``acc_median``, ``z_chance``, ``n_learned``,
    ``n_networks``, ``not_learned``: the indices of the networks that did not learn, or ``none``)
    get ``prefix``. Returns :func:`training_sanity` with ``accuracy_median`` and ``n_learned``.
    """
    from . import report

    s = training_sanity(units, n_test)
    glue = prefix.replace("-", "_")
    report.value(f"{glue}n_test_sets", n_test)
    report.value(f"{glue}n_loss_rose", int(s["n_loss_rose"]))
    if late_rise_ok:
        report.check(f"{prefix}loss-falls", "every network's mean training loss fell, at some evaluation interval, "
                     "below its mean over the first (a later rise is reported, not refused)",
                     value=s["best_drop"], expected="smallest drop > 0", passed=s["best_drop"] > 0)
    else:
        report.check(f"{prefix}loss-falls", "every network's mean training loss is lower over the last evaluation "
                     "interval than over the first", value=s["loss_drop"], expected="smallest drop > 0",
                     passed=s["loss_drop"] > 0)
    report.check(f"{prefix}test-set-size", f"every stored accuracy is a count out of n_test = {n_test} sequences",
                 value=s["count_residual"], expected="distance of acc * n_test from an integer < 0.01",
                 passed=s["count_residual"] < 0.01)
    if gaps:
        report.check(f"{prefix}gaps-recomputed", "the stored gaps equal the differences of the stored accuracies "
                     "(an integrity check of the files in data/: training writes both from the same numbers)",
                     value=s["gap_residual"], expected="< 1e-6", passed=s["gap_residual"] < 1e-6)
    flags = learned(units)
    s["accuracy_median"] = float(final_accuracy(units).median())
    s["n_learned"] = float(sum(flags))
    report.value(f"{glue}acc_min", s["accuracy_min"])
    report.value(f"{glue}acc_median", s["accuracy_median"])
    report.value(f"{glue}z_chance", s["z_chance"])
    report.value(f"{glue}n_learned", sum(flags))
    report.value(f"{glue}n_networks", len(flags))
    report.value(f"{glue}not_learned", ", ".join(str(i) for i, f in enumerate(flags) if not f) or "none")
    if steps >= 500:
        typical = 4 * s["chance"]
        report.check(f"{prefix}above-chance", "the worst network's mean accuracy over the six IC sets exceeds chance "
                     "(1/32) and the median network's reaches four times chance",
                     value=f"worst {s['accuracy_min']:.3f} ({s['z_chance']:.1f} SE above chance), "
                     f"median {s['accuracy_median']:.3f}",
                     expected=f"worst > 3 SE above 1/32; median >= {typical:.3f}",
                     passed=s["z_chance"] > 3 and s["accuracy_median"] >= typical)
    if steps >= PAPER_SCALE_STEPS:
        report.check(f"{prefix}learned-share", "at least half of the networks learned the task ("
                     + learned_rule()["text"] + ")", value=f"{sum(flags)} of {len(flags)}",
                     expected=">= half", passed=2 * sum(flags) >= len(flags))
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
    :func:`fig2_claims` and ``figures.gap_bars_figure`` take. A depth missing one architecture, or
    one seed of it, is left out, and so is a depth not in ``within`` (a chapter's ``depths``) when
    it is given."""
    depths = {int(k.rpartition("|")[2]) for k in complete if k.rpartition("|")[0] in pes}
    full = sorted(d for d in depths if all(f"{pe}|{d}" in complete for pe in pes)
                  and (within is None or d in within))
    return full, {f"{pe}|{d}": complete[f"{pe}|{d}"] for d in full for pe in pes}


def rising(units: list[dict], n_test: int) -> bool:
    """Were these networks still improving when training stopped (:func:`still_learning` reproduced)?"""
    return still_learning(units, n_test).verdict == "reproduced"


def fig2_table(results: dict[str, list[dict]], depths: list[int], n_test: int,
               pes: tuple[str, ...] = FIG2_PES):
    """Figure 2's table (also the residual study's): one row per (PE, depth) of ``results[f"{pe}|{d}"]``.

    Columns: ``PE``, ``depth``, ``accuracy`` (mean over seeds of the mean over the six IC sets), the
    three gaps as ``"mean ± SE"`` (:func:`seed_mean_se`, test sets of ``n_test`` sequences) and
    ``still rising`` (:func:`rising`). Returns a ``pandas.DataFrame`` (empty with no depth).
    """
    import pandas as pd

    rows = []
    for d in depths:
        for pe in pes:
            us = results[f"{pe}|{d}"]
            gaps_ = {f"{a}-{b}": "{:+.3f} ± {:.3f}".format(*seed_mean_se(stack(us, "gaps", f"{a}-{b}"), n_test))
                     for a, b in GAP_PAIRS}
            rows.append({"PE": pe, "depth": d, "accuracy": round(float(final_accuracy(us).mean()), 3), **gaps_,
                         "still rising": rising(us, n_test)})
    return pd.DataFrame(rows)


def fig2_claims(results: dict[str, list[dict]], depths: list[int], n_test: int, *, per_depth: bool,
                judge_learning: bool | None = None) -> list[Claim]:
    """The claims of Wu et al.'s Figure 2 as :func:`claim` rows, from ``results[f"{pe}|{d}"]``.

    First the three depth claims from ``min(depths)`` to ``max(depths)`` (when there are two depths
    or more), with the mean accuracy at both ends (``accuracy_shallow_deep``). Then the five claims
    at a fixed depth (:func:`fixed_depth_claims`): with ``per_depth`` once per depth, named
    ``<name>-<depth>``; otherwise once, on each seed's mean over the depths. Such a mean is not
    given a smaller test-set error than one depth: every depth is tested on the same sequences, so
    their test-set noise is shared (the binomial bound of one depth applies to the mean). Every row
    has ``still_rising`` (:func:`rising`, on the networks the claim uses) and ``depth``.
    With ``judge_learning`` a claim resting on a network that did not learn (:func:`learned`) is
    ``not comparable`` (:func:`claim`'s ``learned``); by default (``None``) only for networks trained
    :data:`PAPER_SCALE_STEPS` steps or more. The residual-depth study's claims are these,
    with ``per_depth=False`` (:func:`residual_claims`).
    """
    gap = lambda pe, d, p: stack(results[f"{pe}|{d}"], "gaps", p)  # noqa: E731
    judge_learning = _judging(judge_learning, [u for us in results.values() for u in us])
    lrn = lambda pes, ds: (learned([u for pe in pes for d in ds for u in results[f"{pe}|{d}"]])  # noqa: E731
                           if judge_learning else None)
    units = lambda pes, ds: [u for pe in pes for d in ds for u in results[f"{pe}|{d}"]]  # noqa: E731
    acc = lambda pe, d: float(final_accuracy(results[f"{pe}|{d}"]).mean())  # noqa: E731
    rows = []
    lo, hi = min(depths), max(depths)
    if lo != hi:
        for name, text, (pe,), per_seed, n_acc in depth_claims(lambda pe, d: gap(pe, d, "first-last"), lo, hi):
            r = claim(name, text, per_seed, n_test, n_acc=n_acc, learned=lrn([pe], [lo, hi]))
            r.depth, r.accuracy_shallow_deep = f"{lo} to {hi}", f"{acc(pe, lo):.3f} / {acc(pe, hi):.3f}"
            r.still_rising = rising(units([pe], [lo, hi]), n_test)
            rows.append(r)
    if per_depth:
        for d in depths:
            for name, text, used, per_seed, n_acc in fixed_depth_claims(lambda pe, p: gap(pe, d, p)):
                r = claim(f"{name}-{d}", f"{text} ({d} layers)", per_seed, n_test, n_acc=n_acc,
                          learned=lrn(used, [d]))
                r.depth, r.still_rising = str(d), rising(units(used, [d]), n_test)
                rows.append(r)
    else:
        mean_over_depths = lambda pe, p: torch.stack([gap(pe, d, p) for d in depths]).mean(0)  # noqa: E731
        for name, text, used, per_seed, n_acc in fixed_depth_claims(mean_over_depths):
            # a mean over depths keeps one depth's test-set error (:func:`depth_mean_claim`)
            r = claim(name, f"{text} (mean over depths)", per_seed, n_test, n_acc=n_acc, learned=lrn(used, depths))
            r.depth, r.still_rising = "mean", rising(units(used, depths), n_test)
            rows.append(r)
    return rows


def fig2_study_claims(results: dict[str, list[dict]], study_depths: list[int], n_test: int, *,
                      judge_learning: bool | None = None) -> list[Claim]:
    """:func:`fig2_claims` (``per_depth=True``) on a campaign that may still be running: ``results``
    holds the depths complete so far (:func:`complete_depths`), ``study_depths`` all the depths the
    study trains. Each complete depth gets its five fixed-depth claims; the three depth claims, which
    compare the shallowest and the deepest of ``study_depths``, appear only once both are complete,
    so every row is named and worded exactly as when the campaign is done (a claim from 2 to 6
    layers never stands in for one from 2 to 10). No complete depth: no rows."""
    done = sorted({int(k.rpartition("|")[2]) for k in results})
    if not done:
        return []
    rows = fig2_claims(results, done, n_test, per_depth=True, judge_learning=judge_learning)
    if min(study_depths) in done and max(study_depths) in done:
        return rows
    return [r for r in rows if " to " not in str(r.depth)]


def residual_claims(results: dict[str, list[dict]], depths: list[int], n_test: int, *,
                    judge_learning: bool | None = None) -> list[Claim]:
    """The claims of the residual-depth study (Figure 2's orderings with the residual connection):
    :func:`fig2_claims` with ``per_depth=False``, i.e. the three depth claims and the five orderings
    on each run's mean over depths, with one depth's test-set error (not divided by the number of
    depths: the depths share their test sequences)."""
    return fig2_claims(results, depths, n_test, per_depth=False, judge_learning=judge_learning)


#: Figure 3's and 4's architectures, ``mask|pe`` -> the name the chapters print.
FIG3_NAMES = {"full|none": "no mask, No PE", "full|sin": "no mask, sin", "full|rope": "no mask, RoPE",
              "causal|none": "causal, No PE", "causal|sin": "causal, sin", "causal|rope": "causal, RoPE"}


def fig3_name(mask: str, pe: str) -> str:
    """An architecture of Figures 3 and 4 in running prose, e.g. ``no-mask RoPE``, ``causal No PE``
    (the ``name`` of :func:`posbias.train.progress_text`)."""
    return FIG3_NAMES[f"{mask}|{pe}"].replace("no mask, ", "no-mask ").replace(", ", " ")


def fig3_specs(gap: Callable[[str, str], torch.Tensor], at: Callable[[str, str], torch.Tensor]
               ) -> list[tuple[str, str, list[str], torch.Tensor, int, int]]:
    """The 15 claims of Wu et al.'s Figure 3 (targets at the first or last item, 2 layers, residual).

    From ``gap(config, pair)`` -> per-seed gaps (``config`` ``mask|pe``, ``pair`` as
    :data:`GAP_PAIRS`) and ``at(config, slot)`` -> per-seed mean accuracy over the two IC sets whose
    answer sits at ``slot``. Returns ``(name, claim, configs used, per-seed quantity, n_acc, sign)``.
    """
    rows = [("causal-nope-early", "causal No PE prefers first over last more than full-mask No PE",
             ["causal|none", "full|none"], gap("causal|none", "first-last") - gap("full|none", "first-last"), 4, 1),
            ("causal-nope-first", "causal No PE learns the bias at the beginning (first over middle)",
             ["causal|none"], gap("causal|none", "first-middle"), 2, 1),
            ("causal-nope-not-last", "causal No PE does not learn the bias at the end (last over middle <= 0)",
             ["causal|none"], -gap("causal|none", "middle-last"), 2, -1)]
    for c in ["full|sin", "full|rope", "causal|sin", "causal|rope"]:
        tag, nm = c.replace("|", "-"), FIG3_NAMES[c]
        rows += [(f"{tag}-first", f"{nm}: first over middle", [c], gap(c, "first-middle"), 2, 1),
                 (f"{tag}-last", f"{nm}: last over middle", [c], -gap(c, "middle-last"), 2, 1),
                 (f"{tag}-first-above-last", f"{nm}: U slightly higher at the first item", [c],
                  at(c, "first") - at(c, "last"), 2, 1)]
    return rows


def fig3_claims(results: dict[str, list[dict]], n_test: int, *, judge_learning: bool | None = None) -> list[Claim]:
    """Figure 3's claims (:func:`fig3_specs`) as :func:`claim` rows from ``results["mask|pe"]``, each
    with ``still_rising`` (:func:`rising`, on the networks the claim uses); with
    ``judge_learning`` (default: at :data:`PAPER_SCALE_STEPS` steps or more), ``not comparable``
    where a network it uses did not learn."""
    judge_learning = _judging(judge_learning, [u for us in results.values() for u in us])
    gap = lambda c, p: stack(results[c], "gaps", p)  # noqa: E731
    at = lambda c, slot: torch.stack([stack(results[c], "ic_accuracy", f"IC_{a}_{b}")  # noqa: E731
                                      for a, b in IC_PAIRS if a == slot]).mean(0)
    rows = []
    for name, text, used, per_seed, n_acc, sign in fig3_specs(gap, at):
        us = [u for c in used for u in results[c]]
        r = claim(name, text, per_seed, n_test, sign=sign, n_acc=n_acc, learned=learned(us) if judge_learning else None)
        r.still_rising = rising(us, n_test)
        rows.append(r)
    return rows


def fig4_specs(pref: Callable[[str, str], torch.Tensor], first_last: Callable[[str, str], torch.Tensor],
               wheres: tuple[str, ...] = ("first", "middle", "last")
               ) -> list[tuple[str, str, list[str], torch.Tensor, int, int]]:
    """The claims of Wu et al.'s Figure 4 (targets at one slot ``w``, 2 layers, residual), five per slot.

    From ``pref(w, config)`` -> per-seed preference for slot ``w`` (:func:`slot_preference`) and
    ``first_last(w, config)`` -> per-seed first-vs-last gaps. Rows as :func:`fig3_specs`; the configs
    used are labels ``w|mask|pe`` of the campaign.
    """
    rows = []
    for w in wheres:
        rows.append((f"{w}-causal-early", f"bias at {w}: causal No PE leans to the first item more than no-mask No PE",
                     [f"{w}|causal|none", f"{w}|full|none"],
                     first_last(w, "causal|none") - first_last(w, "full|none"), 4, 1))
        for c in ["full|sin", "full|rope", "causal|sin", "causal|rope"]:
            rows.append((f"{w}-{c.replace('|', '-')}", f"bias at {w}: {FIG3_NAMES[c]} prefers the {w} slot",
                         [f"{w}|{c}"], pref(w, c), 4, 1))
    return rows


def slot_preference(units: list[dict], w: str) -> torch.Tensor:
    """Per-seed preference for slot ``w`` (``first``, ``middle`` or ``last``): the mean of the two gaps
    involving ``w``, signed toward ``w``; ``(seeds,)``."""
    return _toward({f"{a}-{b}": stack(units, "gaps", f"{a}-{b}") for a, b in GAP_PAIRS}, w)


def _toward(g: dict[str, torch.Tensor], w: str) -> torch.Tensor:
    """The mean of the two gaps of ``g`` (``"first-middle"``, ...) involving slot ``w``, signed toward ``w``."""
    return {"first": (g["first-middle"] + g["first-last"]) / 2,
            "middle": (-g["first-middle"] + g["middle-last"]) / 2,
            "last": (-g["first-last"] - g["middle-last"]) / 2}[w]


def fig4_claims(results: dict[str, list[dict]], n_test: int, wheres: tuple[str, ...] = ("first", "middle", "last"),
                *, judge_learning: bool | None = None) -> list[Claim]:
    """Figure 4's claims (:func:`fig4_specs`) as :func:`claim` rows from ``results["w|mask|pe"]``, each
    with ``still_rising`` (on the networks the claim uses); with ``judge_learning`` (default:
    at :data:`PAPER_SCALE_STEPS` steps or more), ``not comparable`` where a network it uses did not learn."""
    judge_learning = _judging(judge_learning, [u for us in results.values() for u in us])
    pref = lambda w, c: slot_preference(results[f"{w}|{c}"], w)  # noqa: E731
    fl = lambda w, c: stack(results[f"{w}|{c}"], "gaps", "first-last")  # noqa: E731
    rows = []
    for name, text, used, per_seed, n_acc, sign in fig4_specs(pref, fl, tuple(wheres)):
        us = [u for c in used for u in results[c]]
        r = claim(name, text, per_seed, n_test, sign=sign, n_acc=n_acc, learned=learned(us) if judge_learning else None)
        r.still_rising = rising(us, n_test)
        rows.append(r)
    return rows


#: The six IC test sets in the order of :data:`~posbias.task.IC_PAIRS` (``IC_first_middle``, ...).
IC_SETS = tuple(f"IC_{a}_{b}" for a, b in IC_PAIRS)


def ic_accuracy_by_set(units: list[dict]) -> torch.Tensor:
    """The final accuracy of each unit (e.g. the seeds of one configuration) on each of the six IC
    test sets, ``(units, 6)``, columns in the order of :data:`IC_SETS`."""
    return torch.stack([stack(units, "ic_accuracy", s) for s in IC_SETS], dim=1)


def slot_preference_curve(units: list[dict], w: str) -> torch.Tensor:
    """:func:`slot_preference` along training: the mean of the two gaps involving slot ``w``, signed
    toward ``w``, at every evaluation of the stored curves, ``(seeds, evals)``."""
    return _toward(gap_curves(units), w)


def _measurable(claims_of: Callable[[dict[str, list[dict]]], list[Claim]], uses: dict[str, list[str]],
                results: dict[str, list[dict]], labels: Collection[str]) -> list[Claim]:
    """The rows of ``claims_of`` (a figure's claims over every label of ``labels``) whose configurations
    (``uses[name]``) are all in ``results``. The missing labels are filled with a stand-in (the first
    label's results) only so that the claims can be built; every row that would read one is dropped."""
    if not results:
        return []
    stand_in = next(iter(results.values()))
    rows = claims_of({lb: results.get(lb, stand_in) for lb in labels})
    return [r for r in rows if set(uses[r.name]) <= set(results)]


def fig3_measurable_claims(results: dict[str, list[dict]], n_test: int, *,
                           judge_learning: bool | None = None) -> list[Claim]:
    """:func:`fig3_claims` on the configurations stored so far: ``results`` holds some of the six
    ``mask|pe`` labels (a campaign's complete ones, :func:`coverage`), and the rows are the claims
    whose every configuration is among them, in :func:`fig3_specs` order (all 15 when all six are
    there, ``[]`` when none is). Each row is exactly :func:`fig3_claims`'s."""
    zero = lambda *_: torch.zeros(1)  # noqa: E731
    uses = {name: used for name, _, used, *_ in fig3_specs(zero, zero)}
    return _measurable(lambda full: fig3_claims(full, n_test, judge_learning=judge_learning), uses,
                       results, FIG3_NAMES)


def fig4_measurable_claims(results: dict[str, list[dict]], n_test: int,
                           wheres: tuple[str, ...] = ("first", "middle", "last"), *,
                           judge_learning: bool | None = None) -> list[Claim]:
    """:func:`fig4_claims` on the configurations stored so far (labels ``w|mask|pe``): the claims
    whose every configuration is in ``results``, in :func:`fig4_specs` order; ``[]`` when none is.
    Each row is exactly :func:`fig4_claims`'s."""
    zero = lambda *_: torch.zeros(1)  # noqa: E731
    uses = {name: used for name, _, used, *_ in fig4_specs(zero, zero, tuple(wheres))}
    labels = [f"{w}|{c}" for w in wheres for c in FIG3_NAMES]
    return _measurable(lambda full: fig4_claims(full, n_test, tuple(wheres), judge_learning=judge_learning),
                       uses, results, labels)


def sink_claims(units: list[dict], mask: torch.Tensor, n_sink: int, *, judge_learning: bool | None = None
                ) -> tuple[list[Claim], dict[str, float]]:
    """Figure 5's two sink claims on single-head units' stored ``sink_alpha`` ``(seeds, depth, T)``.

    Rows (:func:`claim`, per seed, layers averaged): ``above-uniform``, key 1's ``alpha`` minus its
    value under uniform attention (:func:`uniform_sink_alpha` of ``mask``); ``sink-first``, key 1's
    excess over uniform minus the largest excess of keys ``2..T-1`` (the last key sees only itself).
    The sampling noise of ``alpha`` is bounded as a binomial over ``n_sink * depth`` (sequence, layer)
    pairs. Also returns a summary: ``alpha1``, ``alpha1_unif``, ``share1`` (mean share of pairs with
    ``alpha_1 > 0.3``), ``share_other`` (largest mean share at keys ``2..T-1``). With
    ``judge_learning`` (default: at :data:`PAPER_SCALE_STEPS` steps or more) both rows are ``not
    comparable`` unless every network learned (:func:`learned`).
    """
    lrn = learned(units) if _judging(judge_learning, units) else None
    alpha = stack(units, "sink_alpha")                               # (seeds, depth, T)
    T, depth = alpha.shape[-1], alpha.shape[1]
    unif = uniform_sink_alpha(mask)
    excess = alpha.mean(1) - unif                                    # (seeds, T)
    n_eff = n_sink * depth
    rows = [claim("above-uniform", "key 1 receives more attention than under uniform attention",
                  alpha[:, :, 0].mean(1) - float(unif[0]), n_eff, n_acc=1, learned=lrn),
            claim("sink-first",
                  "key 1 exceeds its uniform baseline by more than any other key does (the last excluded)",
                  excess[:, 0] - excess[:, 1:T - 1].max(-1).values, n_eff, learned=lrn)]
    share = stack(units, "sink_share").mean(0)                       # (T,)
    return rows, {"alpha1": float(alpha[:, :, 0].mean()), "alpha1_unif": float(unif[0]),
                  "share1": float(share[0]), "share_other": float(share[1:T - 1].max())}


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


def u_claim(name: str, text: str, units: list[dict], n_sweep: int) -> Claim:
    """:func:`claim` row for "a U is present" (:func:`u_statistic` > 0) on the stored sweeps of
    ``units``. Binomial part of the error: ``min(a, b)`` moves by at most ``max(|da|, |db|)``, whose
    variance is at most ``var(a) + var(b) <= 2 / (4 n_sweep)``, and the middle mean adds ``1/6`` of
    that (six slots), so ``n_acc = 3`` (three accuracies' worth) bounds it."""
    return claim(name, text, u_statistic(stack(units, "sweep_accuracy")), n_sweep, n_acc=3)


def u_claims(results: dict[str, list[dict]], n_sweep: int, wheres: Collection[str] = ("first", "middle", "last")
             ) -> dict[tuple[str, str], Claim]:
    """:func:`u_claim` ("a U is present") for every Figure 4 configuration of ``results``
    (labels ``w|mask|pe``), keyed by ``(w, mask|pe)``, in the order of ``wheres`` and
    :data:`FIG3_NAMES`; labels missing from ``results`` are skipped."""
    return {(w, c): u_claim(f"u-{w}-{c}", "U present", results[f"{w}|{c}"], n_sweep)
            for w in wheres for c in FIG3_NAMES if f"{w}|{c}" in results}


def u_frame(claims: dict[tuple[str, str], Claim]):
    """The table of :func:`u_claims`: one row per (training bias, network) with the U depth, its SE
    and the verdict as ``U present?``. Returns a ``pandas`` ``Styler``."""
    import pandas as pd

    df = pd.DataFrame([{"training bias": w, "network": FIG3_NAMES[c], "U depth": r.mean, "se": r.se,
                        "U present?": r.verdict} for (w, c), r in claims.items()],
                      columns=["training bias", "network", "U depth", "se", "U present?"])
    return df.style.format({"U depth": "{:+.3f}", "se": "{:.3f}"})


def sink_excess(units: list[dict], mask: torch.Tensor) -> torch.Tensor:
    """Per seed, the layer-averaged ``alpha_k`` minus uniform attention's under ``mask``: ``(seeds, T)``."""
    return stack(units, "sink_alpha").mean(1) - uniform_sink_alpha(mask)


def fig6_claims(excess: dict[str, torch.Tensor], windows: list[int], prefixes: list[int], n_eff: int, *,
                learned_by_label: dict[str, list[bool]] | None = None) -> list[Claim]:
    """The claims of Wu et al.'s Figure 6 from ``excess[label]`` ``(seeds, T)`` (:func:`sink_excess`;
    labels ``causal``, ``window|w``, ``prefix|K``), skipping those whose labels are missing:
    ``causal-first`` (key 1's excess beats every other key but the last), ``window-grows`` (key 1's
    excess larger at the widest window than at the narrowest), and per prefix ``prefix-K`` (prefix
    keys above the keys after them) and, for ``K >= 2``, ``prefix-K-beyond-first`` (prefix keys after
    the first above the keys after the prefix). Noise bounded over ``n_eff`` (sequence, layer) pairs.
    With ``learned_by_label`` (label -> :func:`learned` flags of its networks) a claim resting on a
    network that did not learn is ``not comparable``."""
    lrn = (lambda *labels: None if learned_by_label is None  # noqa: E731
           else [f for lb in labels for f in learned_by_label[lb]])
    rows = []
    if "causal" in excess:
        e = excess["causal"]
        rows.append(claim("causal-first", "causal: the first token gets the largest excess attention",
                          e[:, 0] - e[:, 1:e.shape[1] - 1].max(-1).values, n_eff, learned=lrn("causal")))
    lo, hi = f"window|{min(windows)}", f"window|{max(windows)}"
    if len(windows) > 1 and lo in excess and hi in excess:
        rows.append(claim("window-grows", f"window: the first token's excess is larger for w = {max(windows)} "
                          f"than w = {min(windows)}", excess[hi][:, 0] - excess[lo][:, 0], n_eff,
                          learned=lrn(lo, hi)))
    for K in prefixes:
        e = excess.get(f"prefix|{K}")
        if e is None:
            continue
        T = e.shape[1]
        if K < T - 1:
            rows.append(claim(f"prefix-{K}", f"prefix K = {K}: more excess attention on prefix tokens than after them",
                              e[:, :K].mean(-1) - e[:, K:T - 1].mean(-1), n_eff, learned=lrn(f"prefix|{K}")))
        if 2 <= K < T - 1:
            rows.append(claim(f"prefix-{K}-beyond-first", f"prefix K = {K}: prefix tokens after the first attract too",
                              e[:, 1:K].mean(-1) - e[:, K:T - 1].mean(-1), n_eff, learned=lrn(f"prefix|{K}")))
    return rows


def at_most_zero_phrase(row: Claim, what: str) -> str:
    """A sentence reading a claim that a quantity is *at most 0* (``row.sign == -1``, e.g. Figure 3's
    "causal No PE does not learn the end") from its mean, SE, critical value and verdict: an interval
    holding 0 agrees with the claim although the verdict rule, which asks for a value below zero
    beyond the critical value, reads it *inconclusive*. ``what`` names the quantity."""
    lo, hi = row.mean - row.crit * row.se, row.mean + row.crit * row.se
    head = f"{what} is {row.mean:+.3f} ± {row.se:.3f}, {abs(row.mean) / row.se:.1f} standard errors from zero: "
    return head + {
        "inconclusive": f"its interval at the verdict's critical value, {lo:+.3f} to {hi:+.3f}, holds 0, in "
                        "agreement with the claim; since the claim is 'at most 0', the verdict rule would "
                        "call it reproduced only below zero beyond the critical value, so it reads inconclusive.",
        "reproduced": "below zero beyond the critical value, as claimed.",
        "contradicted": "above zero beyond the critical value, against the claim.",
        "not comparable": "some of the networks it reads did not learn the task."}[row.verdict]


def depth_trend_phrase(rows: list[Claim]) -> str:
    """A sentence answering "does depth amplify the early bias?" from a depth study's claim rows
    (:func:`fig2_study_claims`): causal No PE's preference for the first slot at each judged depth,
    then the verdicts of the three depth claims, or that they wait for the shallowest and the
    deepest depths. No rows: no depth is complete yet."""
    early = sorted((r for r in rows if r.name.startswith("nope-early-")), key=lambda r: int(r.depth))
    if not early:
        return "no depth of the study is complete yet"
    head = "causal No PE's preference for the first slot over the last is " + _and(
        [f"{r.mean:+.3f} ± {r.se:.3f} at {r.depth} layers ({r.verdict})" for r in early])
    deep = [r for r in rows if r.name.startswith("depth-")]
    if not deep:
        return head + "; the depth claims wait for the shallowest and the deepest depths"
    return head + f"; the first-vs-last gap growing from {deep[0].depth} layers is " + _and(
        [f"{r.verdict} for {r.claim.partition(':')[0]} ({r.mean:+.3f} ± {r.se:.3f})" for r in deep])


def _and(items: list[str]) -> str:
    """``["a", "b", "c"]`` -> ``"a, b and c"``; one item stands alone."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def expected_false_verdicts(n_claims: int, z: float | None = None, level: float = 0.05) -> float:
    """How many of ``n_claims`` independent claims whose quantity is exactly zero would get a
    decided verdict by chance. The verdicts of :func:`claim` are two-sided tests at ``level``
    (Student's t): ``n_claims * level`` (at most that, since the test-set error is a bound). With
    ``z``, for a rule "beyond ``z`` standard errors" under a normal approximation:
    ``n_claims * P(|Z| > z)`` (about 0.046 per claim at ``z = 2``). Count only the claims tested
    (:func:`n_tested`): ``not comparable`` ones are never decided."""
    import math

    if z is None:
        return n_claims * level
    return n_claims * math.erfc(z / math.sqrt(2))


def check_attention_records(units: list[dict], mask: torch.Tensor, *, prefix: str = "") -> None:
    """Assert (``report.check``) that the stored attention of single-mask units is sound: every mean
    map ``(seeds, depth, T, T)`` is row-stochastic with no weight outside ``mask``
    (``<prefix>attention-masked``), and the stored ``alpha_k`` (a mean over sequences) equals
    ``alpha_k`` of the mean map, as it must since ``alpha_k`` is linear in the attention
    (``<prefix>alpha-recomputed``)."""
    from . import report

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
    from .model import MemberConfig

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
    labels as :func:`fig6_claims`; missing ones skipped) and each real input (``real[name]`` ``(n,)``),
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


#: The columns of a claims table a reader needs, in order, when a row has them.
CLAIM_COLUMNS = ("depth", "claim", "mean", "se", "verdict", "learned", "accuracy shallow/deep",
                 "accuracy still rising")
_CLAIM_ATTRS = {"accuracy shallow/deep": "accuracy_shallow_deep", "accuracy still rising": "still_rising"}


def claims_frame(rows: list[Claim]):
    """A chapter's claims table for the page: the :func:`claim` rows indexed by name, with only the
    :data:`CLAIM_COLUMNS` the rows carry (not the bookkeeping: sign, runs, critical value, p,
    asserted), mean and SE to three decimals. Returns a ``pandas`` ``Styler``."""
    import pandas as pd

    df = pd.DataFrame([r.table_row() for r in rows], columns=["name", *CLAIM_COLUMNS]).set_index("name")
    df = df.dropna(axis=1, how="all")
    return df[[c for c in CLAIM_COLUMNS if c in df.columns]].style.format({"mean": "{:+.3f}", "se": "{:.3f}"})
