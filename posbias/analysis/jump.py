"""The decay | 2 jump read as the learning of retrieval (issue 92): the design, declared before its networks
trained, and the probes along training it is read with.

In the fixed-budget study (:mod:`posbias.analysis.budget`) 8 of decay | 2's 10 networks leave the 0.515 plateau at
175,000-225,000 iterations; two never do. Is the jump the moment the network starts to retrieve (find the
item matching the query), as Reddy (2024)'s abrupt in-context learning after a plateau would suggest?

Design (:data:`DESIGN`):

- **Networks.** decay | 2 under the study's own units (500,000 iterations, evaluations every 5,000 with the
  held-out loss and the position sweep): seed 5, whose study network left its plateau at 180,000 (a jumper),
  and seed 0, whose network never did (the lower branch). Each is trained again alone, from its seed, with its
  weights kept at step 0 and every :data:`EVERY` iterations (:mod:`posbias.training.snapshots`); whether it
  reproduces its stored network bit for bit is recorded, and a network that does not is read as what it is.
- **Probes at every kept step** (:func:`probe_series`): the query's attention on the items of its own class
  against its position profile in the last layer (:func:`posbias.analysis.probes.class_attention`, ``n`` =
  :data:`N_PROBE` per slot), accuracy on training against novel classes (:func:`posbias.analysis.probes.in_weights`),
  and on the ``IC`` sets which slot's label a wrong answer gives (:func:`posbias.analysis.probes.error_slots`). From the
  record's own curves, every 5,000: mean IC accuracy, the first-last gap, the sweep's mean accuracy.
- **When a quantity moves** (:func:`half_change`): its *start* is its mean over the 50,000 iterations
  before the paper's 100,000, its *end* its mean over the last 50,000 evaluated; it *moves* when
  ``|end - start| >=`` :data:`MOVE` and then moves at the first step after 100,000 from which two
  consecutive values have covered at least half of ``end - start``. One quantity moves *before* another
  when its half-change step is earlier by more than :data:`EVERY` (one snapshot interval).
- **Predictions** (:data:`PREDICTIONS`), written before any snapshot exists: if the jump is the learning of
  retrieval, then in the jumper (H1) the sweep's mean accuracy moves above the ceiling of every network that
  ignores the query (:data:`posbias.science.retrieval` ``sweep_ceiling``, 0.2081) and (H2) the last layer's
  own-class attention ratio moves up, both within two snapshot intervals of the mean IC accuracy's half-change,
  and (H3) in the non-jumper neither moves. (H4) If the plateau networks memorise the training classes, their
  training-class accuracy exceeds their novel-class accuracy by more than :data:`MOVE` at the end.

Grounds: :data:`MOVE` is the study's unit of a substantive difference (:data:`posbias.analysis.budget.JUMP`, five
standard errors of a mean accuracy difference); a ratio of attention masses shares it, as a change of one
twentieth of the mass is visible in every probe table of the book. Two snapshot intervals (50,000) are the
study's reading window.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from posbias.analysis import budget as bd
from posbias.storage.recompute import recomputable

__all__ = ["EVERY", "SEEDS", "N_PROBE", "MOVE", "DESIGN", "PREDICTIONS", "units", "half_change", "moves_before",
           "core_hours", "sweep_ceiling", "stored_result", "probes_of", "probe_at", "probe_series", "judge",
           "ELSEWHERE", "ALSO", "DECAY4", "elsewhere", "judge_elsewhere",
           "EXPLORATORY", "attention_of", "attention_at", "attention_series", "judge_exploratory", "attention_reading"]

#: Weights kept every this many iterations.
EVERY = 25_000
#: The two networks: one that left the plateau in the study, one that never did.
SEEDS: dict[str, int] = {"jumper": 5, "non-jumper": 0}
#: Probe sequences per slot (class attention), and per probe set for the other probes: n, 8n, 4n.
N_PROBE = 500
#: A quantity moves when its end and start differ by at least this (the study's JUMP).
MOVE = bd.JUMP
#: Where a quantity's start is read: the 50,000 iterations before the paper's 100,000.
START = (50_000, 100_000)

DESIGN: dict[str, Any] = {
    "config": "decay|2", "profile": "budget", "seeds": dict(SEEDS), "every": EVERY, "n_probe": N_PROBE,
    "move": MOVE, "start": list(START), "end": "mean over the last 50,000 iterations evaluated",
    "half_change": "first step after 100,000 from which two consecutive values cover half of end - start",
    "before": f"half-change earlier by more than {EVERY:,}",
    "elsewhere": {
        "decay|4": {"seeds": [0, 1, 2, 3, 4], "steps": 500_000, "weights": "final and best"},
        "No PE|2": {"seeds": [5], "steps": 500_000, "weights": f"every {EVERY:,}",
                    "question": "training-class against novel-class accuracy along training (memorising?)"},
        "price": "core_hours(): the study's measured cost per step and per evaluation at depth 2 (8.53 ms, "
                 "1.4 s), scaled by depth (the chapter's cost model, 0.0045 s x depth)"},
}
#: The study's measured costs at depth 2 (the over-training chapter's ``cost_plan``), scaled by depth.
MS_PER_STEP_2, EVAL_SECONDS_2 = 8.53, 1.4

PREDICTIONS: dict[str, str] = {
    "H1": "jumper: the sweep's mean accuracy moves, ending above 0.2081, its half-change within 50,000 of the "
          "mean IC accuracy's",
    "H2": "jumper: the last layer's own-class attention ratio (items, against the position profile) moves up, "
          "its half-change within 50,000 of the mean IC accuracy's",
    "H3": "non-jumper: neither the sweep's mean accuracy nor the own-class attention ratio moves",
    "H4": "at the end, training-class accuracy exceeds novel-class accuracy by more than 0.05 in the non-jumper",
}


#: Item 3 of issue 92, written on 2026-12-07 before any decay | 4 network or the No PE | 2 network had trained past
#: step 0 (both campaigns started minutes before this commit; no result or probe of theirs existed). Read with
#: the study's rules: a plateau exit by :func:`posbias.analysis.budget.plateau_exits`, a move by :func:`half_change`.
ELSEWHERE: dict[str, str] = {
    "H5": "decay|4: at least one of its five networks leaves a plateau of its mean IC accuracy after 100,000 "
          "iterations, as 8 of decay|2's 10 do",
    "H6": "decay|4: in every network that leaves its plateau after 100,000, the first-last gap's half-change comes "
          "more than 25,000 iterations before the mean IC accuracy's, as in decay|2's upper branch",
    "H7": "No PE|2 (seed 5): at the end, training-class accuracy exceeds novel-class accuracy by more than 0.05",
    "H8": "No PE|2 (seed 5): training-class accuracy moves up along training while novel-class accuracy does not "
          "move (memorising, not learning to retrieve)",
}
#: The No PE | 2 network of item 3 (kept every :data:`EVERY`, probed like the two decay | 2 networks).
ALSO: dict[str, tuple[str, int]] = {"No PE|2": ("No PE|2", 5)}


def units() -> dict[str, Any]:
    """The study's units kept along training: ``{"jumper": Unit, "non-jumper": Unit, "No PE|2": Unit}`` (the
    fixed-budget study's decay | 2 units, and No PE | 2 seed 5 of item 3)."""
    import dataclasses

    from posbias.training.campaigns import units_of

    groups = units_of("wu-bias-over-training", "budget", {}, admit=False)
    us = {u.seed: u for u in groups["decay|2"]}
    out = {role: us[seed] for role, seed in SEEDS.items()}
    for role, (label, seed) in ALSO.items():
        out[role] = dataclasses.replace(groups[label][0], seed=seed)
    return out


#: Item 3's decay | 4 networks: the fixed-budget study's settings at depth 4, seeds 0-4, trained by
#: ``posbias campaign wu-bias-over-training --profile budget -p configs 'decay|4' -p wide_configs 'decay|4'
#: -p wide_seeds 0`` (final and best weights kept); the No PE | 2 network by ``posbias jump --role 'No PE|2'``.
DECAY4: dict[str, Any] = {"configs": ["decay|4"], "wide_configs": ["decay|4"], "wide_seeds": [0]}


def elsewhere() -> dict[str, Any]:
    """Item 3's data as stored now: ``{"decay4": [result or None] x 5, "nope": probe_series("No PE|2"),
    "nope_done": bool}``, the arguments of :func:`judge_elsewhere`. Never trains."""
    from posbias.training import snapshots
    from posbias.training.campaigns import lookup, units_of

    us = units_of("wu-bias-over-training", "budget", DECAY4, admit=False)["decay|4"]
    return {"decay4": [lookup(u) for u in us], "nope": probe_series("No PE|2"),
            "nope_done": snapshots.record(units()["No PE|2"], EVERY) is not None}


def judge_elsewhere(decay4: Sequence[Mapping[str, Any] | None], nope: Mapping[str, list],
                    nope_done: bool) -> dict[str, dict[str, str]]:
    """:data:`ELSEWHERE` against the data: ``decay4`` the five decay | 4 results (None while one trains),
    ``nope`` the No PE | 2 network's :func:`probe_series`, ``nope_done`` whether it has reached 500,000. Per
    prediction ``{"verdict", "why"}``: ``holds``, ``fails``, ``not yet``, or ``no case`` (H6 with no exit)."""
    from posbias.measures import convergence as cv
    from posbias.analysis.budget_read import exits_after

    out: dict[str, dict[str, str]] = {}
    done = [r for r in decay4 if r is not None]
    if len(done) < len(decay4) or not decay4:
        out["H5"] = out["H6"] = {"verdict": "not yet", "why": f"{len(done)} of {len(decay4)} decay|4 networks trained"}
    else:
        exits = [exits_after(r) for r in done]
        out["H5"] = {"verdict": "holds" if any(exits) else "fails",
                     "why": f"{sum(bool(e) for e in exits)} of {len(done)} leave a plateau after 100,000"
                            + (f" (at {', '.join(f'{e[0]:,}' for e in exits if e)})" if any(exits) else "")}
        leads = []
        for r, e in zip(done, exits):
            if e:
                c = r["curves"]
                g = half_change(c["step"], cv.gap_curve(c, "first-last"))
                a = half_change(c["step"], bd.mean_accuracy(c))
                leads.append(None if g["at"] is None or a["at"] is None else a["at"] - g["at"])
        if not leads:
            out["H6"] = {"verdict": "no case", "why": "no decay|4 network leaves its plateau after 100,000"}
        else:
            ok = all(x is not None and x > EVERY for x in leads)
            out["H6"] = {"verdict": "holds" if ok else "fails",
                         "why": "the gap's half-change leads the accuracy's by "
                                + ", ".join("—" if x is None else f"{x:,}" for x in leads)}
    if not nope_done:
        out["H7"] = out["H8"] = {"verdict": "not yet", "why": f"the No PE|2 network has reached "
                                                              f"{max(nope.get('step', []), default=0):,} of 500,000"}
    else:
        tr, nv = nope["training_classes"], nope["novel_classes"]
        out["H7"] = {"verdict": "holds" if tr[-1] - nv[-1] > MOVE else "fails",
                     "why": f"training classes {tr[-1]:.3f}, novel {nv[-1]:.3f}"}
        ht, hn = half_change(nope["step"], tr), half_change(nope["step"], nv)
        ok = ht["moves"] and ht["end"] > ht["start"] and not hn["moves"]
        out["H8"] = {"verdict": "holds" if ok else "fails",
                     "why": f"training classes {ht['start']:.3f} → {ht['end']:.3f}, novel {hn['start']:.3f} → "
                            f"{hn['end']:.3f}"}
    return out


def stored_result(role: str) -> dict[str, Any] | None:
    """The result the study stored for ``role``'s network (its design record, or the admitted record of the
    earlier campaign), which the run trained again is compared with; None when neither is stored."""
    from posbias.training.campaigns import admitted_record, lookup

    u = units()[role]
    return lookup(u) or admitted_record("wu-bias-over-training", "decay|2", u)


def half_change(steps: Sequence[int], values: Sequence[float], move: float = MOVE,
                start: tuple[int, int] = START, window: int = bd.READ_WINDOW) -> dict[str, Any]:
    """When ``values`` (at ``steps``) moves, by the design's rule: ``{"start", "end", "moves", "at"}``;
    ``at`` is the half-change step (None when it does not move or never covers half)."""
    s, v = np.asarray(steps, dtype=float), np.asarray(values, dtype=float)
    a = float(v[(s >= start[0]) & (s <= start[1])].mean())
    b = float(v[s >= s[-1] - window].mean())
    out: dict[str, Any] = {"start": a, "end": b, "moves": abs(b - a) >= move, "at": None}
    if not out["moves"]:
        return out
    frac = (v - a) / (b - a)
    later = np.flatnonzero(s > start[1])
    for i, j in zip(later, later[1:]):
        if frac[i] >= 0.5 and frac[j] >= 0.5:
            out["at"] = int(s[i])
            break
    return out


def moves_before(a: Mapping[str, Any], b: Mapping[str, Any], every: int = EVERY) -> bool | None:
    """Does quantity ``a`` move before ``b`` (both :func:`half_change`)? None when either does not move."""
    if a["at"] is None or b["at"] is None:
        return None
    return b["at"] - a["at"] > every


def core_hours(depth: int, steps: int = 500_000, networks: int = 1) -> float:
    """Core-hours of ``networks`` networks of ``depth`` trained ``steps`` with an evaluation every 5,000, at the
    study's measured depth-2 costs scaled by depth (:data:`MS_PER_STEP_2`, :data:`EVAL_SECONDS_2`)."""
    per = steps * MS_PER_STEP_2 * depth / 2 / 1000 + (steps // bd.EVAL_EVERY + 1) * EVAL_SECONDS_2 * depth / 2
    return networks * per / 3600


def _role_of(run: str) -> str:
    for role, u in units().items():
        from posbias.training import snapshots

        if snapshots.run_key(u, EVERY) == run:
            return role
    raise ValueError(f"no network of the jump study has the run key {run}")


@recomputable("wu-jump-probes", atol=0.0, other_cpu_atol=0.01,
              other_cpu_note="another CPU may round a logit differently and flip a few of the probes' answers")
def probes_of(params: dict[str, Any]) -> dict[str, Any]:
    """The probes of :func:`probe_at` from its stored parameters ``{"run", "step", "n", "seed"}``."""
    from posbias.measures import evaluate
    from posbias.analysis import probes
    from posbias.science.task import make_task, sweep_test_sets
    from posbias.training import snapshots

    u, n = units()[_role_of(params["run"])], int(params["n"])
    net, task = snapshots.load(u, EVERY, int(params["step"])), make_task(u.seed)
    att = probes.class_attention(net, task, n=n, seed=params["seed"])
    mem = probes.in_weights(net, task, n=8 * n, seed=params["seed"])
    err = probes.error_slots(net, task, n=4 * n, seed=params["seed"])
    sweep = evaluate.sweep_accuracies(net, [task], sweep_test_sets(n, params["seed"] + 1, task.config))[0]
    slots = err["slot"].tolist()
    own, pos = float(att["items"][-1]), float(att["items_by_position"][-1])
    return {"own": own, "by_position": pos, "ratio": own / pos if pos > 0 else None,
            "training_classes": mem["training_classes"], "novel_classes": mem["novel_classes"],
            "wrong": err["wrong"], "wrong_first": slots[0], "wrong_middle": slots[len(slots) // 2],
            "wrong_last": slots[-1], "wrong_outside": err["outside"], "ic": 1 - err["wrong"],
            "sweep": float(sweep.mean())}


def probe_at(role: str, step: int, n: int = N_PROBE) -> dict[str, Any]:
    """Every probe of ``role``'s network at the kept ``step`` (:mod:`posbias.analysis.probes`): the last layer's
    attention on the query's own class and what its position profile predicts there (``own``, ``by_position``,
    ``ratio``), accuracy on training and on novel classes (``n`` x 8 sequences each), on fresh ``IC`` sets (``n`` x 4
    each: ``ic``, the mean accuracy) the share of answers that are wrong and, of those, the share whose label stands at
    the first, middle and last slot, and the mean accuracy on a fresh position sweep (``n`` per slot: ``sweep``).
    Stored (experiment ``wu-jump-probes``; ``data/`` with ``POSBIAS_WRITE_DATA=1``), so a page reads each once."""
    from posbias.storage import store
    from posbias.analysis import probes
    from posbias.training import snapshots
    from posbias.training.units import VERSION

    u = units()[role]
    params = {"run": snapshots.run_key(u, EVERY), "step": int(step), "n": int(n), "seed": probes.PROBE_SEED}
    return store.cached("wu-jump-probes", params, lambda: probes_of(params), version=VERSION, seeds=[u.seed])


def probe_series(role: str, n: int = N_PROBE) -> dict[str, list]:
    """:func:`probe_at` at every kept step of ``role``'s network: ``{"step": [...], <probe>: [...]}`` (empty
    lists while nothing is kept)."""
    from posbias.training import snapshots

    steps = snapshots.steps_kept(units()[role], EVERY)
    rows = [probe_at(role, s, n) for s in steps]
    keys = list(rows[0]) if rows else []
    return {"step": steps, **{k: [r[k] for r in rows] for k in keys}}


def sweep_ceiling() -> float:
    """The most a network that ignores the query can score on the position sweep
    (:func:`posbias.science.retrieval.closed_forms`, ``sweep`` ``ignore_best``): the line a probe must cross."""
    from posbias.science import retrieval

    return float(retrieval.closed_forms()["sweep"]["ignore_best"])


def judge(series: Mapping[str, Mapping[str, list]], records: Mapping[str, Mapping[str, Any] | None],
          steps: int = 500_000) -> dict[str, dict[str, str]]:
    """The predictions :data:`PREDICTIONS` against the study's data: ``series`` role -> :func:`probe_series`,
    ``records`` role -> the finished run's result (None while it trains). Per prediction ``{"verdict", "why"}``,
    the verdict ``holds``, ``fails`` or ``not yet`` (a network it needs has not reached ``steps``). The IC and sweep
    timing read the record's curves (every 5,000); the attention ratio and the class accuracies the snapshots."""
    ceiling = sweep_ceiling()

    def reached(role: str) -> int:
        return max(series[role]["step"], default=0)

    def wait(role: str) -> dict[str, str]:
        return {"verdict": "not yet", "why": f"the {role} has reached {reached(role):,} of {steps:,} iterations"}

    def ratio(role: str) -> dict[str, Any]:
        return half_change(series[role]["step"], series[role]["ratio"])

    out: dict[str, dict[str, str]] = {}
    jr, nr = records.get("jumper"), records.get("non-jumper")
    if jr is None:
        out["H1"] = out["H2"] = wait("jumper")
    else:
        c = jr["curves"]
        acc = half_change(c["step"], bd.mean_accuracy(c))
        sw = half_change(c["step"], np.asarray(c["sweep"], dtype=float).mean(-1))
        rt = ratio("jumper")

        def near(x: Mapping[str, Any]) -> bool:
            return x["at"] is not None and acc["at"] is not None and abs(x["at"] - acc["at"]) <= 2 * EVERY

        ok1 = sw["moves"] and sw["end"] > ceiling and near(sw)
        out["H1"] = {"verdict": "holds" if ok1 else "fails",
                     "why": f"sweep {sw['start']:.3f} → {sw['end']:.3f} (ceiling {ceiling:.4f}), half-change at "
                            f"{sw['at']}, mean IC accuracy's at {acc['at']}"}
        ok2 = rt["moves"] and rt["end"] > rt["start"] and near(rt)
        out["H2"] = {"verdict": "holds" if ok2 else "fails",
                     "why": f"own-class ratio {rt['start']:.3f} → {rt['end']:.3f}, half-change at {rt['at']}, "
                            f"mean IC accuracy's at {acc['at']}"}
    if nr is None:
        out["H3"] = out["H4"] = wait("non-jumper")
    else:
        c = nr["curves"]
        sw = half_change(c["step"], np.asarray(c["sweep"], dtype=float).mean(-1))
        rt = ratio("non-jumper")
        out["H3"] = {"verdict": "holds" if not sw["moves"] and not rt["moves"] else "fails",
                     "why": f"sweep {sw['start']:.3f} → {sw['end']:.3f}, own-class ratio {rt['start']:.3f} → "
                            f"{rt['end']:.3f}"}
        s = series["non-jumper"]
        gap = s["training_classes"][-1] - s["novel_classes"][-1]
        out["H4"] = {"verdict": "holds" if gap > MOVE else "fails",
                     "why": f"training classes {s['training_classes'][-1]:.3f}, novel {s['novel_classes'][-1]:.3f}"}
    return out


# ----------------------------------------------------------------- exploratory: where the query looks, per layer

#: Declared after the jumper's last-layer own-class ratio on the *items* was seen to fall (against H2) and
#: before any ratio on the *label tokens* was computed; exploratory, read with the same rule (:func:`half_change`).
#: A network that retrieves by copying could look at the label that follows the matching item rather than at
#: the item itself.
EXPLORATORY: dict[str, str] = {
    "E1": "jumper: the last layer's own-class attention ratio on the label tokens (against the position profile) "
          "moves up, its half-change within 50,000 of the mean IC accuracy's",
    "E2": "non-jumper: the last layer's own-class attention ratio on the label tokens does not move",
}


@recomputable("wu-jump-attention", atol=1e-6, other_cpu_atol=1e-4,
              other_cpu_note="another CPU rounds attention weights in their last bits")
def attention_of(params: dict[str, Any]) -> dict[str, Any]:
    """Per layer, the query row's attention on its own class's item tokens and label tokens and what its position
    profile puts there (:func:`posbias.analysis.probes.class_attention`), from stored parameters ``{"run", "step", "n",
    "seed"}``: ``{"items", "items_by_position", "labels", "labels_by_position"}``, each a list over layers."""
    from posbias.analysis import probes
    from posbias.science.task import make_task
    from posbias.training import snapshots

    u = units()[_role_of(params["run"])]
    net = snapshots.load(u, EVERY, int(params["step"]))
    att = probes.class_attention(net, make_task(u.seed), n=int(params["n"]), seed=params["seed"])
    return {k: [float(x) for x in v] for k, v in att.items()}


def attention_at(role: str, step: int, n: int = N_PROBE) -> dict[str, Any]:
    """:func:`attention_of` for ``role``'s network at the kept ``step``, stored (experiment ``wu-jump-attention``)."""
    from posbias.storage import store
    from posbias.analysis import probes
    from posbias.training import snapshots
    from posbias.training.units import VERSION

    u = units()[role]
    params = {"run": snapshots.run_key(u, EVERY), "step": int(step), "n": int(n), "seed": probes.PROBE_SEED}
    return store.cached("wu-jump-attention", params, lambda: attention_of(params), version=VERSION, seeds=[u.seed])


def attention_series(role: str, n: int = N_PROBE) -> dict[str, list]:
    """:func:`attention_at` at every kept step: ``{"step", "item_ratio_<layer>", "label_ratio_<layer>"}`` (layers
    from 1), each ratio the own-class mass over what the position profile puts there."""
    from posbias.training import snapshots

    steps = snapshots.steps_kept(units()[role], EVERY)
    out: dict[str, list] = {"step": steps}
    for s in steps:
        a = attention_at(role, s, n)
        for kind in ("item", "label"):
            for layer, (own, pos) in enumerate(zip(a[f"{kind}s"], a[f"{kind}s_by_position"]), 1):
                out.setdefault(f"{kind}_ratio_{layer}", []).append(own / pos if pos > 0 else float("nan"))
    return out


def judge_exploratory(attention: Mapping[str, Mapping[str, list]], records: Mapping[str, Mapping[str, Any] | None],
                      steps: int = 500_000) -> dict[str, dict[str, str]]:
    """:data:`EXPLORATORY` against the data, as :func:`judge` reads :data:`PREDICTIONS`: ``attention`` role ->
    :func:`attention_series`, ``records`` role -> the finished run's result (None while it trains)."""
    out: dict[str, dict[str, str]] = {}
    for key, role in (("E1", "jumper"), ("E2", "non-jumper")):
        rec, a = records.get(role), attention[role]
        if rec is None:
            out[key] = {"verdict": "not yet", "why": f"the {role} has reached {max(a['step'], default=0):,} of "
                                                     f"{steps:,} iterations"}
            continue
        last = max(int(k.rsplit("_", 1)[1]) for k in a if k.startswith("label_ratio_"))
        rt = half_change(a["step"], a[f"label_ratio_{last}"])
        if key == "E1":
            acc = half_change(rec["curves"]["step"], bd.mean_accuracy(rec["curves"]))
            ok = (rt["moves"] and rt["end"] > rt["start"] and rt["at"] is not None and acc["at"] is not None
                  and abs(rt["at"] - acc["at"]) <= 2 * EVERY)
            why = f"label ratio {rt['start']:.3f} → {rt['end']:.3f}, half-change at {rt['at']}, IC's at {acc['at']}"
        else:
            ok = not rt["moves"]
            why = f"label ratio {rt['start']:.3f} → {rt['end']:.3f}"
        out[key] = {"verdict": "holds" if ok else "fails", "why": why}
    return out


def attention_reading(attention: Mapping[str, Mapping[str, list]], since: int = START[1]) -> str:
    """What the last layer's own-class ratios (:func:`attention_series`) did from ``since`` to the last kept step,
    in a sentence whose words follow the numbers: a change counts where it reaches :data:`MOVE`."""
    def change(role: str, kind: str) -> float | None:
        a = attention.get(role, {})
        steps = list(a.get("step", []))
        if since not in steps or max(steps) <= since:
            return None
        last = max(int(k.rsplit("_", 1)[1]) for k in a if k.startswith(f"{kind}_ratio_"))
        v = a[f"{kind}_ratio_{last}"]
        return v[-1] - v[steps.index(since)]

    di, dl = change("jumper", "item"), change("jumper", "label")
    if di is None or dl is None:
        return "The network that jumps has no kept network after the paper's 100,000 iterations yet."
    if dl >= MOVE and di <= -MOVE:
        out = ("In the network that jumps the query moves its attention from the matching items to the labels "
               "that follow them: what a network does when its first layer binds each label to its item and its "
               "last layer copies that label.")
    elif dl >= MOVE:
        out = "In the network that jumps the query looks more at the labels of the matching items."
    elif abs(di) >= MOVE:
        out = ("In the network that jumps the query's attention on the matching items moves "
               f"({di:+.2f}) while its attention on their labels does not.")
    else:
        out = f"In the network that jumps neither ratio has moved by {MOVE} yet."
    ni, nl = change("non-jumper", "item"), change("non-jumper", "label")
    if ni is not None and nl is not None:
        out += (f" In the network that stays on the plateau neither moves by {MOVE}." if max(abs(ni), abs(nl)) < MOVE
                else f" In the network that stays on the plateau they move too ({ni:+.2f} and {nl:+.2f}).")
    return out
