"""Position bias over training: the paper's gaps read along the committed learning curves.

Every stored unit keeps its curves (the six ``IC`` accuracies and the mean training loss every
``eval_every`` iterations), so the gaps the paper reports at 100,000 iterations can be read at any
evaluation before. This module summarises those curves over seeds, tests whether they still move
at the end (:func:`posbias.measures.convergence.plateau_rows`), finds from which iteration each sign holds
(:func:`posbias.measures.convergence.sign_stable_from`), and judges the register's claims at earlier
iterations (:func:`units_at` then :func:`posbias.analysis.claims.judge`). Nothing here trains.
"""
from __future__ import annotations

import copy
import math
from typing import Mapping, Sequence

import numpy as np

from posbias.measures import convergence as cv
from posbias.analysis import claims

__all__ = ["STUDIES", "curve_stats", "gap_bands", "still_moving_table", "units_at", "units_at_best", "MEASURED_ALONG",
           "verdicts_over_training", "READINGS", "CONVERGED_VIEWS", "converged_comparison", "converged_counts", "reach",
           "stop_table", "stopped_runs", "stop_mismatches", "fell_back", "paper_and_end", "spread_text",
           "spread_summary"]

#: The studies whose curves are read: name -> campaign (all at the paper's settings).
STUDIES: dict[str, str] = {"Figure 2": "wu-fig-2", "Figure 3": "wu-fig-3", "Figure 4": "wu-fig-4",
                           "residual study": "wu-residual-depth"}
#: Quantities computed from the ``IC`` accuracies alone, hence measurable at every evaluation; the
#: others need the position sweep or the attention maps, stored at the end of training only.
MEASURED_ALONG = ("gap", "gap_difference", "gap_contrast", "depth_change", "slot_advantage", "slot_preference",
                  "preference_difference")


def curve_stats(units: Sequence[dict], pair: str) -> dict[str, np.ndarray]:
    """The gap ``pair`` along training over the runs ``units``: ``step`` ``(evals,)``, ``per_seed``
    ``(evals, seeds)``, ``mean`` and ``se`` ``(evals,)`` (seed spread plus the binomial bound of two
    accuracies on ``n_test`` sequences, as the judge's), and ``loss`` ``(evals,)``, the seed-mean
    training loss (its first entry, at step 0, is not a loss and is ``nan``)."""
    steps = list(units[0]["curves"]["step"])
    per = np.stack([cv.gap_curve(u["curves"], pair) for u in units], axis=1)     # (evals, seeds)
    n, n_test = per.shape[1], int(units[0]["params"]["n_test"])
    var = per.var(axis=1, ddof=1) if n > 1 else np.zeros(len(steps))
    se = np.sqrt(var / n + 2 / (4 * n_test))
    loss = np.mean([u["curves"]["loss"] for u in units], axis=0).astype(float)
    loss[0] = math.nan
    return {"step": np.asarray(steps), "per_seed": per, "mean": per.mean(axis=1), "se": se, "loss": loss}


def gap_bands(study: Mapping[str, Sequence[dict | None]]) -> dict[str, dict]:
    """What :func:`posbias.figures.bias_over_training_figure` draws: one entry per complete configuration of
    ``study`` (label -> stored runs; incomplete labels skipped), in its order, holding ``step`` ``(evals,)``,
    ``loss`` ``(evals,)`` (the seed-mean training loss, ``nan`` at step 0) and ``gaps``: pair -> ``(mean, se)``,
    each ``(evals,)``, over the runs (:func:`curve_stats`)."""
    out = {}
    for label, us in study.items():
        if not us or any(u is None for u in us):
            continue
        per = {pair: curve_stats(us, pair) for pair in cv.GAP_NAMES}
        first = per[cv.GAP_NAMES[0]]
        out[label] = {"step": first["step"], "loss": first["loss"],
                      "gaps": {pair: (s["mean"], s["se"]) for pair, s in per.items()}}
    return out


def still_moving_table(study: Mapping[str, Sequence[dict | None]], window: int = 20_000):
    """One row per (configuration, gap) of a study (label -> stored runs; incomplete labels skipped):
    the gap at the last evaluation (mean ± SE), its fitted change over the last ``window`` iterations
    averaged over runs with its SE over runs, whether that change is beyond Student's t at 5%
    (``still moving``), and the first iteration from which the sign of the mean holds beyond two
    standard errors to the end (``sign settled from``; empty when it ends within two SE of zero).
    Returns a ``pandas.DataFrame``."""
    import pandas as pd  # lazy: pandas costs ~0.5s at import

    rows = []
    for label, us in study.items():
        if not us or any(u is None for u in us):
            continue
        for pair in cv.GAP_NAMES:
            c = curve_stats(us, pair)
            moving = cv.plateau_rows(c["step"], c["per_seed"], window)
            settled = cv.sign_stable_from(c["step"], c["mean"], c["se"])
            rows.append({"configuration": label, "gap": pair, "at the end": f"{c['mean'][-1]:+.3f} ± {c['se'][-1]:.3f}",
                         f"change over last {window // 1000}k": f"{moving['change']:+.3f} ± {moving['se']:.3f}",
                         "still moving": moving["moving"],
                         "sign settled from": "" if settled is None else
                         f"{settled[0]:,} ({'+' if settled[1] > 0 else '-'})",
                         "loss at the end": float(c["loss"][-1])})
    return pd.DataFrame(rows)


def units_at(units: Sequence[dict | None], step: int) -> list[dict | None]:
    """The runs as they were at the evaluation ``step``: copies whose ``ic_accuracy`` and ``gaps`` are
    the curves' values there (the sweep and attention records, stored at the end only, are dropped).
    ``ValueError`` when a run has no evaluation at ``step``."""
    out: list[dict | None] = []
    for u in units:
        if u is None:
            out.append(None)
            continue
        steps = list(u["curves"]["step"])
        if step not in steps:
            raise ValueError(f"no evaluation at step {step}; the curves have {steps[0]}..{steps[-1]}")
        i = steps.index(step)
        v = {k: copy.deepcopy(x) for k, x in u.items() if k not in ("sweep_accuracy", "mean_attention",
                                                                     "sink_alpha", "sink_share")}
        v["ic_accuracy"] = {k: float(u["curves"][k][i]) for k in u["ic_accuracy"]}
        v["gaps"] = {p: float(cv.gap_curve(u["curves"], p)[i]) for p in cv.GAP_NAMES}
        v["curves"] = {k: list(x[:i + 1]) for k, x in u["curves"].items()}
        out.append(v)
    return out


def units_at_best(units: Sequence[dict | None]) -> list[dict | None]:
    """Each run as it was at its own evaluation of lowest training loss (the ``best_step`` of
    :func:`posbias.measures.convergence.loss_rise`), through :func:`units_at`; ``None`` stays ``None``. The
    evaluation is chosen on the training loss, which no claim measures, not on the gaps."""
    return [None if u is None else units_at([u], cv.loss_rise(u["curves"])[1])[0] for u in units]


#: Ways to read the runs trained to the stopping rule: name -> (column title, runs -> runs).
READINGS = {"at-stop": ("converged", list), "at-best-loss": ("at best loss", units_at_best)}
#: How Section 5.1's claims are read on the networks trained to the stopping rule, declared in the
#: chapter's front matter (``verdicts_at_convergence``) before any claim over a run that fell back was
#: judged: the primary verdict on every run as it stopped, fallen back or not, and beside it every run
#: at its lowest training loss (names of :data:`READINGS`).
CONVERGED_VIEWS = {"primary": "at-stop", "secondary": "at-best-loss"}


def verdicts_over_training(units: Mapping[str, Mapping[str, Sequence[dict | None]]], steps: Sequence[int]):
    """The register's claims that are measurable along training (:data:`MEASURED_ALONG`), judged on
    ``units`` (campaign -> label -> runs) as they were at each of ``steps``, Holm's correction over
    the claims judged at the same step. Returns ``(table, changed)``: a ``pandas.DataFrame`` with one
    row per claim and one column per step (the verdict after Holm, and ``mean`` at each), and the ids
    of the claims whose verdict differs between two of the steps."""
    import pandas as pd  # lazy: pandas costs ~0.5s at import

    entries = [e for e in claims.register().entries if e.quantity in MEASURED_ALONG
               and (e.guard is None or e.guard["quantity"] in MEASURED_ALONG) and e.campaign in units]
    cols: dict[int, list[claims.Judged]] = {}
    for s in steps:
        at = {c: {lb: units_at(us, s) for lb, us in groups.items()} for c, groups in units.items()}
        cols[s] = claims.judge(entries, at)
    rows, changed = [], []
    for i, e in enumerate(entries):
        row = {"claim": e.id, "measured": e.reading}
        for s in steps:
            j = cols[s][i]
            row[f"{s // 1000}k"] = j.holm
            row[f"mean at {s // 1000}k"] = "" if j.mean is None else f"{j.mean:+.3f}"
        if len({cols[s][i].holm for s in steps}) > 1:
            changed.append(e.id)
        rows.append(row)
    return pd.DataFrame(rows), changed


def converged_comparison(paper: Mapping[str, Sequence[dict | None]], converged: Mapping[str, Sequence[dict | None]]):
    """Section 5.1's claims (the register's Figure 2 entries) at the paper's 100,000 iterations and on
    the networks trained until the stopping rule held, side by side: one row per claim with the
    verdicts after Holm (each column over the claims judged on its units) and their means at 100k, at
    the stop (``converged``, the primary verdict) and at each run's lowest training loss (``at best
    loss``, :func:`units_at_best`; :data:`CONVERGED_VIEWS`), and, on the converged networks, where they
    stopped (the latest stop among the runs and how many reached the cap) and their mean IC accuracy
    at the stop (``accuracy``) and in the secondary reading (``accuracy at best loss``). Claims whose
    configurations are not all converged read ``not yet``. Returns a ``pandas.DataFrame``."""
    import pandas as pd  # lazy: pandas costs ~0.5s at import

    entries = claims.register().select(campaign="wu-fig-2")
    at_paper = claims.judge(entries, {"wu-fig-2": paper})
    (first, read1), (second, read2) = (READINGS[CONVERGED_VIEWS[k]] for k in ("primary", "secondary"))
    at_conv = claims.judge(entries, {"wu-fig-2": {lb: read1(us) for lb, us in converged.items()}})
    at_best = claims.judge(entries, {"wu-fig-2": {lb: read2(us) for lb, us in converged.items()}})

    def mean(j):
        return "" if j.mean is None else f"{j.mean:+.3f} ± {j.se:.3f}"

    def accuracy(runs):
        return f"{np.mean([np.mean(list(u['ic_accuracy'].values())) for u in runs]):.3f}"

    rows = []
    for e, a, b, c in zip(entries, at_paper, at_conv, at_best):
        us = [u for cf in e.configs for u in (converged.get(cf) or []) if u is not None]
        done = b.status != claims.NOT_YET
        stops = [u["stop"]["stopped_at"] for u in us if "stop" in u] if done else []
        rows.append({"claim": e.id, "measured": e.reading, "100k": a.holm, "mean at 100k": mean(a),
                     first: b.holm, f"mean {first}": mean(b), second: c.holm, f"mean {second}": mean(c),
                     "stopped by": f"{max(stops):,}" if stops else "",
                     "at the cap": sum(u["stop"]["reason"] == "cap" for u in us if "stop" in u) if done else "",
                     "accuracy": accuracy(us) if done else "",
                     f"accuracy {second}": accuracy(read2(us)) if done else ""})
    return pd.DataFrame(rows)


def reach(configs: Sequence[str]) -> tuple[list[str], dict[str, list[str]]]:
    """Which of the register's Figure 2 claims networks of ``configs`` (labels ``"<name>|<depth>"``) can
    judge once all are trained: ``(judgeable, out_of_reach)``, the ids of the claims whose
    configurations are all in ``configs``, and for each other claim the configurations it still needs."""
    have, judgeable, out = set(configs), [], {}
    for e in claims.register().select(campaign="wu-fig-2"):
        need = [c for c in e.configs if c not in have]
        if need:
            out[e.id] = need
        else:
            judgeable.append(e.id)
    return judgeable, out


def converged_counts(cmp) -> dict[str, int]:
    """From a :func:`converged_comparison` frame: ``judged``, the claims judged on converged networks
    (not ``not yet``); ``differ``, those of them whose verdict there is not their verdict at 100k; and
    ``differ_best``, those whose verdict at the runs' lowest training loss is not their verdict at the stop."""
    judged = cmp["converged"] != claims.NOT_YET
    return {"judged": int(judged.sum()), "differ": int((judged & (cmp["converged"] != cmp["100k"])).sum()),
            "differ_best": int((judged & (cmp["converged"] != cmp[READINGS[CONVERGED_VIEWS["secondary"]][0]])).sum())}


def stop_table(converged: Mapping[str, Sequence[dict | None]], n_test: int):
    """One row per trained network of the ``converged`` campaign (label -> runs, ``None`` not yet
    trained; each run's ``stop`` names its rule): where it stopped and why, the first evaluation at
    which the rule's three gap parts held together (``gap parts first held at``; the loss part aside), the
    training loss's fitted change over the rule's last window as a share of its final value, and
    the final mean IC accuracy. ``n_test``: sequences per accuracy. Returns a ``pandas.DataFrame``."""
    import pandas as pd  # lazy: pandas costs ~0.5s at import

    rows = []
    for label, seed, u in stopped_runs(converged):
        r = cv.StopRule(**u["stop"]["rule"])
        c, steps = u["curves"], list(u["curves"]["step"])
        settled = cv.first_held(c, n_test, r, cv.GAP_NAMES)
        loss = np.asarray(c["loss"], dtype=float)
        change = cv.window_change(steps, loss, steps[-1], r.window) / abs(loss[-1])
        rise, best = cv.loss_rise(c)
        rows.append({"configuration": label, "run": seed, "stopped at": f"{u['stop']['stopped_at']:,}",
                     "why": u["stop"]["reason"],
                     "gap parts first held at": "" if settled is None else f"{settled:,}",
                     f"loss change over last {r.window // 1000}k": f"{change:+.1%}",
                     "loss above its best": f"{rise:+.1%}" + (f" (best at {best:,})" if rise > r.loss_rel else ""),
                     "accuracy": f"{np.mean(list(u['ic_accuracy'].values())):.3f}"})
    return pd.DataFrame(rows)


def stopped_runs(converged: Mapping[str, Sequence[dict | None]]):
    """``(label, run index, run)`` for every run of ``converged`` that stopped under a rule (has ``stop``)."""
    for label, us in converged.items():
        for seed, u in enumerate(us):
            if u is not None and "stop" in u:
                yield label, seed, u


def stop_mismatches(converged: Mapping[str, Sequence[dict | None]]) -> list[str]:
    """The runs of ``converged`` whose stored stop the rule, re-applied to their stored curves
    (:func:`posbias.measures.convergence.stop_step` with the run's own ``n_test``), does not give: a run stopped
    by the rule must end at the first evaluation where it holds, one at its cap (the run's ``steps``) must
    end there without the rule ever holding, and every curve must end where its run stopped. One line
    per disagreement; empty when every run agrees."""
    bad = []
    for label, seed, u in stopped_runs(converged):
        r, stop = cv.StopRule(**u["stop"]["rule"]), u["stop"]
        got = cv.stop_step(u["curves"], u["params"]["n_test"], r)
        cap = u["params"]["steps"]
        ok = got == stop["stopped_at"] if stop["reason"] == "rule" else got is None and stop["stopped_at"] == cap
        if not ok or u["curves"]["step"][-1] != stop["stopped_at"]:
            bad.append(f"{label} run {seed}: stored {stop['stopped_at']:,} ({stop['reason']}), curve ends at "
                       f"{u['curves']['step'][-1]:,}, the rule gives {'never' if got is None else f'{got:,}'}")
    return bad


def fell_back(converged: Mapping[str, Sequence[dict | None]]) -> str:
    """The committed networks whose training loss ended more than their rule's ``loss_rel`` above its best
    (:func:`posbias.measures.convergence.loss_rise`), in words: label, run, the rise, and the mean IC accuracy at the
    best evaluation and at the end; ``"none"`` when there is none."""
    out = []
    for label, seed, u in stopped_runs(converged):
        rise, best = cv.loss_rise(u["curves"])
        if rise > u["stop"]["rule"]["loss_rel"]:
            acc = [np.mean(list(x["ic_accuracy"].values())) for x in units_at_best([u]) + [u]]
            out.append(f"{label} run {seed} (loss {rise:.0%} above its best at {best:,} iterations; mean IC "
                       f"accuracy {acc[0]:.3f} there, {acc[1]:.3f} at its stop)")
    return "; ".join(out) if out else "none"


def paper_and_end(converged: Mapping[str, Sequence[dict | None]], step: int = 100_000):
    """One row per trained network of the ``converged`` campaign: its mean IC accuracy and its three
    gaps at ``step`` (the paper's snapshot, read from its curves) and where it stopped, side by side.
    Returns a ``pandas.DataFrame`` with float columns ``accuracy at 100k``, ``accuracy at the end`` and
    ``<gap> at 100k`` / ``<gap> at the end`` for each of :data:`posbias.measures.convergence.GAP_NAMES`."""
    import pandas as pd  # lazy: pandas costs ~0.5s at import

    tag = f"{step // 1000}k"
    rows = []
    for label, us in converged.items():
        for seed, u in enumerate(us):
            if u is None:
                continue
            end = int(u["curves"]["step"][-1])
            try:
                (snap,), (last,) = units_at([u], step), units_at([u], end)
            except ValueError:
                raise ValueError(f"{label} run {seed} has no evaluation at step {step:,}") from None
            row = {"configuration": label, "run": seed, "stopped at": end}
            for when, v in ((tag, snap), ("the end", last)):
                row[f"accuracy at {when}"] = float(np.mean(list(v["ic_accuracy"].values())))
            for g in cv.GAP_NAMES:
                row[f"{g} at {tag}"], row[f"{g} at the end"] = snap["gaps"][g], last["gaps"][g]
            rows.append(row)
    return pd.DataFrame(rows)


def spread_text(table, column: str, configuration: str, fmt: str = "+.3f") -> str:
    """``"from a to b"`` over the runs of ``configuration`` in ``column`` of :func:`paper_and_end`'s table
    (each formatted with ``fmt``), or ``"no network yet"``."""
    v = table.loc[table["configuration"] == configuration, column] if len(table) else []
    if len(v) == 0:
        return "no network yet"
    return f"from {min(v):{fmt}} to {max(v):{fmt}}"


def spread_summary(table, step: int = 100_000) -> str:
    """One clause per configuration of :func:`paper_and_end`'s ``table``: its networks' spread in mean IC
    accuracy and in the first-last gap at ``step`` and at the end (``"no network yet"`` when empty)."""
    tag = f"{step // 1000}k"
    parts = []
    for label in dict.fromkeys(table["configuration"]) if len(table) else []:
        n = int((table["configuration"] == label).sum())
        parts.append(f"{label} ({n} network{'s' * (n != 1)}): accuracy "
                     f"{spread_text(table, f'accuracy at {tag}', label, '.3f')} at {step:,} iterations and "
                     f"{spread_text(table, 'accuracy at the end', label, '.3f')} at the end; first-last gap "
                     f"{spread_text(table, f'first-last at {tag}', label)}, then "
                     f"{spread_text(table, 'first-last at the end', label)}")
    return "; ".join(parts) or "no network yet"
