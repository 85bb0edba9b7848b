"""Probes of a trained network's kept weights: what it does, not only how often it is right.

Each probe takes a one-member network (:func:`posbias.training.weights.load`) and its task, and reads it on
fresh sequences:

* :func:`class_attention`: per layer, the attention the query puts on the items (and on their label tokens)
  of its own class, against what the network's position profile alone predicts;
* :func:`in_weights`: accuracy on sequences of the training classes, where a memorised class-to-label map
  answers, against novel classes, where only the context can;
* :func:`error_slots`: when the network is wrong on the ``IC`` sets, which slot's label it gives.
"""
from __future__ import annotations

import torch

from posbias.science.model import EnsembleNet
from posbias.science.task import Task, TaskConfig, TestSet, accuracy, ic_test_set, ic_test_sets, train_batch

__all__ = ["novel_sets", "class_attention", "in_weights", "error_slots", "probe_rows", "probe_table", "probe_words",
           "PROBE_SEED"]

#: The seed of the probes' sequences: far from the training batches and the committed test draws.
PROBE_SEED = 20261207


def novel_sets(n: int, seed: int = PROBE_SEED, config: TaskConfig = TaskConfig()) -> list[TestSet]:
    """Training-like sequences of novel classes: ``IC_s`` (no distractor) for every slot ``s``, ``n`` each; together
    the target slot is uniform, as in training."""
    return [ic_test_set(s, None, n, seed, config) for s in range(config.n_items)]


@torch.no_grad()
def class_attention(net: EnsembleNet, task: Task, n: int = 500, seed: int = PROBE_SEED) -> dict[str, torch.Tensor]:
    """Attention of the query token on its own class, per layer, on :func:`novel_sets` (``n`` per slot).

    Returns ``{"items", "items_by_position", "labels", "labels_by_position"}``, each ``(depth,)``: the mean
    attention mass the query row puts on the item tokens of the query's class (and on the label tokens that
    follow them), and what the same row would put there if its attention depended on position only (its
    mean attention profile over all sequences, summed over the same positions). Sequences whose two classes
    share a label are left out (their classes cannot be told apart by label)."""
    if net.n_members != 1:
        raise ValueError("probe one network: a one-member EnsembleNet (weights.load)")
    sets = novel_sets(n, seed, task.config)
    maps, own = [], []
    for ts in sets:
        x = ts.tokens(task.label_vectors).unsqueeze(0)
        _, att = net(x, return_attention=True)                       # (1, depth, b, T, T)
        q = att[0, :, :, -1, :]                                       # (depth, b, T): the query row
        mine = ts.item_labels == ts.target[:, None]                  # (b, N): slots with the query's label
        clean = mine.sum(1) < task.config.n_items                     # both classes' labels differ
        maps.append(q[:, clean])
        own.append(mine[clean])
    q, mine = torch.cat(maps, 1), torch.cat(own, 0)                   # (depth, b, T), (b, N)
    profile = q.mean(1, keepdim=True)                                 # (depth, 1, T): position alone
    out = {}
    for name, offset in (("items", 0), ("labels", 1)):
        idx = torch.arange(task.config.n_items) * 2 + offset          # the item (or label) tokens
        w = mine.float()                                              # (b, N)
        out[name] = (q[:, :, idx] * w).sum(-1).mean(1)
        out[f"{name}_by_position"] = (profile[:, :, idx] * w).sum(-1).mean(1)
    return out


@torch.no_grad()
def in_weights(net: EnsembleNet, task: Task, n: int = 4000, seed: int = PROBE_SEED) -> dict[str, float]:
    """Accuracy on ``n`` sequences of the training classes (a batch of the task's own distribution that no run
    trains on) against ``n`` per slot of novel classes (:func:`novel_sets`): ``{"training_classes",
    "novel_classes"}``. Far above on the training classes: the network answers from a class-to-label map in its
    weights, not from the context."""
    x, y = train_batch(task, seed, 10**9 + 1, n)
    pred = net(x.unsqueeze(0)).argmax(-1)[0]
    novel = torch.stack([accuracy(net, [task], ts)[0] for ts in novel_sets(n // task.config.n_items or 1, seed,
                                                                             task.config)]).mean()
    return {"training_classes": float((pred == y).float().mean()), "novel_classes": float(novel)}


@torch.no_grad()
def error_slots(net: EnsembleNet, task: Task, sets: dict[str, TestSet] | None = None, n: int = 2000,
                seed: int = PROBE_SEED) -> dict[str, torch.Tensor | float]:
    """Where a wrong answer comes from, on the six ``IC`` sets (``n`` each, fresh unless ``sets``).

    Returns ``{"slot": (N,), "outside": float, "wrong": float}``: of the wrong answers, the share that is the
    label of context slot ``s`` (a label standing at several slots counts a fraction to each), the share that is
    no context label at all, and the share of answers that are wrong."""
    sets = ic_test_sets(n, seed, task.config) if sets is None else sets
    n_items = task.config.n_items
    slot, outside, wrong, total = torch.zeros(n_items), 0.0, 0, 0
    for ts in sets.values():
        pred = net(ts.tokens(task.label_vectors).unsqueeze(0)).argmax(-1)[0]
        bad = pred != ts.target
        hits = (ts.item_labels[bad] == pred[bad, None]).float()       # (wrong, N)
        k = hits.sum(1, keepdim=True)
        slot += (hits / k.clamp(min=1)).sum(0)
        outside += float((k == 0).sum())
        wrong += int(bad.sum())
        total += len(pred)
    denom = max(wrong, 1)
    return {"slot": slot / denom, "outside": outside / denom, "wrong": wrong / total}


def probe_rows(units: dict[str, object], n: int = 500) -> list[dict[str, object]]:
    """Every probe on each kept network: ``units`` maps a configuration's label to its unit
    (:class:`~posbias.training.Unit`); a row per unit, ``{"configuration", "kept", ...}`` with ``kept`` False (and
    nothing else) where no weights are kept. Per layer, ``own class (by position)`` is the query's attention on
    its class's items and what its position profile predicts."""
    from posbias.science.task import make_task
    from posbias.training import weights

    rows: list[dict[str, object]] = []
    for label, unit in units.items():
        if weights.kept(unit) is None:
            rows.append({"configuration": label, "kept": False})
            continue
        net, task = weights.load(unit), make_task(unit.seed)
        prov = weights.metadata(weights.kept(unit))["provenance"]
        att = class_attention(net, task, n=n)
        mem = in_weights(net, task, n=8 * n)
        err = error_slots(net, task, n=n)
        rows.append({"configuration": label, "kept": True, "reproduces": prov.get("reproduces"),
                     "differs_in": prov.get("differs_in", []), "difference": prov.get("difference"),
                     "own class": att["items"].tolist(), "by position": att["items_by_position"].tolist(),
                     "training classes": mem["training_classes"], "novel classes": mem["novel_classes"],
                     "wrong": err["wrong"], "error slots": err["slot"].tolist(), "outside": err["outside"]})
    return rows


def probe_table(rows: list[dict[str, object]]) -> list[dict[str, object]]:
    """:func:`probe_rows` for a page: per network, the last layer's attention on the query's own class (and what
    position alone predicts), memorised against in-context accuracy, and where wrong answers come from (the share
    that is the label at the first, middle or last slot, at another slot, or at none)."""
    out = []
    for r in rows:
        if not r["kept"]:
            out.append({"configuration": r["configuration"], "weights": "not kept yet"})
            continue
        slots = r["error slots"]
        mid = len(slots) // 2
        d = r.get("difference")
        m = d["mean_accuracy"] if d else None
        off = ("no: " + ", ".join(r.get("differs_in", []))) if not d else (
            f"no: mean IC {m['fresh']['ic']:.3f} against {m['stored']['ic']:.3f} stored, "
            f"sweep {m['fresh']['sweep']:.3f} against {m['stored']['sweep']:.3f}")
        same = {True: "yes, bit for bit", False: off, None: "trained once"}
        out.append({"configuration": r["configuration"], "weights": "kept",
                    "reproduces its record": same[r.get("reproduces")],
                    "own class by layer (position alone)": ", ".join(
                        f"{o:.3f} ({b:.3f})" for o, b in zip(r["own class"], r["by position"])),
                    "training classes": f"{r['training classes']:.3f}", "novel classes": f"{r['novel classes']:.3f}",
                    "wrong": f"{r['wrong']:.3f}",
                    "wrong from first / middle / last / other / none": " / ".join(
                        f"{x:.2f}" for x in (slots[0], slots[mid], slots[-1],
                                             sum(slots) - slots[0] - slots[mid] - slots[-1], r["outside"]))})
    return out


def probe_words(rows: list[dict[str, object]]) -> str:
    """What the probes of the kept networks say, in sentences with their numbers (:func:`probe_rows`)."""
    kept = [r for r in rows if r["kept"]]
    if not kept:
        return "No weights are kept yet for any of these networks."

    def span(xs: list[float]) -> str:
        return f"{min(xs):.3f}" if max(xs) - min(xs) < 5e-4 else f"{min(xs):.3f} to {max(xs):.3f}"

    ratios = [(o / b, r["configuration"], i + 1) for r in kept
              for i, (o, b) in enumerate(zip(r["own class"], r["by position"])) if b > 0]
    hi = max(ratios)
    last = [r["own class"][-1] / r["by position"][-1] for r in kept if r["by position"][-1] > 0]
    train_ = [r["training classes"] for r in kept]
    novel = [r["novel classes"] for r in kept]
    names = ", ".join(r["configuration"] for r in kept)
    slots = [x for r in kept for x in r["error slots"]]
    outside = [r["outside"] for r in kept]
    return (f"Weights are kept for {len(kept)} of the {len(rows)} networks ({names}). In their last layer the query "
            f"puts {span(last)} times as much attention on the items of its own class as its position profile "
            f"alone predicts; the most, over all layers, is {hi[0]:.2f} times (layer {hi[2]} of {hi[1]}). On "
            f"sequences of the training classes they answer {span(train_)} correctly, on novel classes "
            f"{span(novel)}. A wrong answer on the IC sets is the label of a context slot in all but {span(outside)} "
            f"of cases, each slot giving {span(slots)} of them.")
