"""What the real-model chapters read off their stored records: tables, profiles, sentences, summaries.

Plain numbers from small JSON (numpy, pandas); nothing here runs the model except
:func:`filled_cache_size`, which streams through a one-layer random Llama.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from posbias.science.rollout import layers_to_reach
from posbias.measures.stats import rate_verdict, t_critical
from posbias.llm.loading import tiny_llama
from posbias.llm.sinks import sink_alpha, uniform_causal
from posbias.llm.streaming import StreamingCache

__all__ = ["DECODER_KINDS", "SMOLLM2_KV", "uniform_alpha_first", "sink_position_table", "encoder_table",
           "layer_profile", "rollout_reach", "perplexity_after_eviction", "streaming_table", "streaming_summary",
           "closed_share", "window_jump", "restore_below", "streaming_sentence", "kv_bytes_per_token",
           "filled_cache_size", "retrieval_table", "curve_agreement", "ends_minus_middle", "wrong_answers",
           "copy_confusion", "position_ranking", "paper_sentence"]

DECODER_KINDS = ("natural", "random", "repeated", "natural+endoftext", "repeated+endoftext",
                 "natural+im_start")

#: SmolLM2-135M's key-value cache shape: layers, key/value heads, head width (tested on the model).
SMOLLM2_KV = {"layers": 30, "kv_heads": 3, "head_dim": 64}


def uniform_alpha_first(n: int) -> float:
    """``alpha_1`` of uniform causal attention over ``n`` tokens, ``H_n / n``: token 1's uniform share."""
    return float(sink_alpha(uniform_causal(n, 1)[0])[0])


def sink_position_table(surveys: dict, lengths: list[int], kinds: tuple[str, ...] = DECODER_KINDS):
    """One row per (input kind, length) of stored :func:`sink_survey` results ``surveys["<kind>-<n>"]``.

    Columns: ``input``, ``n``, ``rate k=1`` (the sink rate of the first position), ``max rate k>1``
    (the largest rate at any later position) and ``at k`` (where, 1-based). A ``pandas.DataFrame``.
    """
    import pandas as pd  # lazy: pandas costs ~0.5s at import

    rows = []
    for n in lengths:
        for kind in kinds:
            r = np.asarray(surveys[f"{kind}-{n}"]["rate"])
            rows.append({"input": kind, "n": n, "rate k=1": r[0], "max rate k>1": r[1:].max(),
                         "at k": int(r[1:].argmax()) + 2})
    return pd.DataFrame(rows)


def encoder_table(surveys: dict, lengths: list[int], kinds: tuple[str, ...] = ("natural", "random", "repeated")):
    """The encoder's sink rates, one row per (input kind, length): at ``[CLS]`` (first), at ``[SEP]``
    (last) and the largest over the ordinary tokens between them. A ``pandas.DataFrame``."""
    import pandas as pd  # lazy: pandas costs ~0.5s at import

    rows = []
    for n in lengths:
        for kind in kinds:
            r = np.asarray(surveys[f"{kind}-{n}"]["rate"])
            rows.append({"input": kind, "n": n, "[CLS]": r[0], "[SEP]": r[-1], "max ordinary": r[1:-1].max()})
    return pd.DataFrame(rows)


def layer_profile(survey: dict, n_tokens: int, majority: float = 0.5) -> dict[str, np.ndarray]:
    """Token 1 layer by layer, from one stored decoder :func:`sink_survey` at length ``n_tokens``.

    Returns ``(L,)`` arrays: ``sink_heads``, the share of the layer's heads in which token 1 is a
    sink (``alpha_1 > eps``) in more than ``majority`` of the sequences; ``rate``, the share of
    (sequence, head) pairs in which it is one; ``multiple``, the mean ``alpha_1`` over its uniform
    share ``H_n / n`` (:func:`uniform_alpha_first`).
    """
    lh = np.asarray(survey["rate_first_lh"])                       # (L, H)
    return {"sink_heads": (lh > majority).mean(axis=1), "rate": lh.mean(axis=1),
            "multiple": np.asarray(survey["alpha_first_l"]) / uniform_alpha_first(n_tokens)}


def rollout_reach(curves: dict, level: float = 0.9) -> dict[str, int]:
    """Layers each stored ``*_mean`` rollout curve of :func:`rollout_survey` needs to reach ``level``
    (``-1``: never), keyed like the curves."""
    return {k: int(layers_to_reach(torch.tensor(v), level)) for k, v in curves.items() if k.endswith("_mean")}


def perplexity_after_eviction(curves: dict, windows: list[int], sinks: list[int]) -> dict:
    """Perplexity of each cache of stored :func:`stream_curves` ``curves``, over the stretch where every
    cache of window ``w`` evicts: predicted tokens ``t >= max(sinks) + w``.

    Returns ``{(k, w): ppl}`` for every sink count ``k`` and ``{("full", w): ppl}`` for the full cache
    on the same stretch.
    """
    full = np.asarray(curves["full"])
    out: dict = {}
    for w in windows:
        start = max(sinks) + w
        out[("full", w)] = float(np.exp(full[start:].mean()))
        for k in sinks:
            out[(k, w)] = float(np.exp(np.mean(curves["stream"][f"{k}-{w}"][start:])))
    return out


def streaming_table(ppl: dict, windows: list[int], sinks: list[int]):
    """:func:`perplexity_after_eviction` as a ``pandas.DataFrame``: one row per cache, one column per window."""
    import pandas as pd  # lazy: pandas costs ~0.5s at import

    names = {"full": "full cache", 0: "window only"}
    rows = [{"cache": names.get(k, f"{k} sink(s) + window"), **{f"w = {w}": ppl[(k, w)] for w in windows}}
            for k in ["full"] + list(sinks)]
    return pd.DataFrame(rows).set_index("cache")


def streaming_summary(ppl: dict, windows: list[int], sinks: list[int]) -> dict[str, float]:
    """The comparison the chapter checks, with ``k`` = the most sinks kept.

    ``jump``: the smallest ratio over windows of window-only to full-cache perplexity; ``jump_w_min``
    the ratio at the smallest window; ``closed``: the smallest share of the window-only cache's gap
    in log-perplexity that keeping ``k`` sinks closes; ``near``: the largest ratio of the ``k``-sink
    cache's perplexity to the full cache's.
    """
    k = max(sinks)
    logp = {key: np.log(v) for key, v in ppl.items()}
    return {"jump": min(ppl[(0, w)] / ppl[("full", w)] for w in windows),
            "jump_w_min": ppl[(0, min(windows))] / ppl[("full", min(windows))],
            "closed": min((logp[(0, w)] - logp[(k, w)]) / (logp[(0, w)] - logp[("full", w)]) for w in windows),
            "near": max(ppl[(k, w)] / ppl[("full", w)] for w in windows)}


def closed_share(curves: dict, w: int, sinks: list[int]) -> dict[str, float]:
    """The share of the window-only cache's gap in log-perplexity that keeping ``k = max(sinks)`` sinks
    closes at window ``w``, with its standard error, from stored :func:`stream_curves` ``curves``.

    Over the predicted tokens ``t >= k + w`` (``n`` of them), ``d_t = l0_t - lk_t`` and ``g_t = l0_t -
    lfull_t`` (per-token losses in nats); the share is ``mean(d) / mean(g)``. Its standard error is the
    delta method's, ``z_t = (d_t - share * g_t) / mean(g)``, by batch means: consecutive tokens share
    most of their cache, so ``z`` is averaged over ``n // b`` batches of ``b = floor(sqrt(n))``
    consecutive tokens (the last ``n mod b`` left out) and ``se = std(batch means) / sqrt(batches)``,
    with ``batches - 1`` degrees of freedom. Returns ``{"share", "se", "dof"}``; ``ValueError`` with
    fewer than four predicted tokens (two batches of two).
    """
    k = max(sinks)
    start = k + w
    l0, lk, lf = (np.asarray(c, dtype=float)[start:] for c in
                  (curves["stream"][f"0-{w}"], curves["stream"][f"{k}-{w}"], curves["full"]))
    if len(l0) < 4:
        raise ValueError(f"{len(l0)} tokens predicted after the cache of window {w} and {k} sinks evicts; "
                         "a standard error needs at least 4 (a longer n_stream)")
    d, g = l0 - lk, l0 - lf
    share = float(d.mean() / g.mean())
    se, dof = _batch_means_se((d - share * g) / g.mean())
    return {"share": share, "se": se, "dof": dof}


def _batch_means_se(z: np.ndarray) -> tuple[float, int]:
    """Standard error of ``mean(z)`` for a stream of correlated per-token values ``(n,)``, by batch means:
    ``n // b`` batches of ``b = floor(sqrt(n))`` consecutive tokens (the last ``n mod b`` left out),
    ``std(batch means) / sqrt(batches)``. Returns ``(se, batches - 1)``, the second the degrees of freedom."""
    b = max(1, math.isqrt(len(z)))
    means = z[:len(z) // b * b].reshape(-1, b).mean(axis=1)
    return float(means.std(ddof=1) / math.sqrt(len(means))), len(means) - 1


def window_jump(curves: dict, w: int, sinks: list[int], threshold: float = 1.5, level: float = 0.05) -> dict:
    """How much worse the window-only cache predicts than the full cache at window ``w``, judged against
    ``threshold``, from stored :func:`stream_curves` ``curves``.

    Over the predicted tokens ``t >= max(sinks) + w`` (every cache of that window evicts), ``g_t = l0_t -
    lfull_t`` (per-token losses in nats); the ratio of perplexities is ``exp(mean(g))``, and ``mean(g)``
    has a batch-means standard error (:func:`_batch_means_se`, as :func:`closed_share`). The claim "the
    ratio is at least ``threshold``" is ``reproduced`` where ``mean(g) - t se >= log(threshold)``,
    ``contradicted`` where ``mean(g) + t se < log(threshold)``, ``inconclusive`` otherwise (``t``:
    Student's, one-sided at ``level / 2``). Returns ``{"ratio", "log", "se", "dof", "verdict"}``;
    ``ValueError`` with fewer than four predicted tokens.
    """
    start = max(sinks) + w
    l0, lf = (np.asarray(c, dtype=float)[start:] for c in (curves["stream"][f"0-{w}"], curves["full"]))
    if len(l0) < 4:
        raise ValueError(f"{len(l0)} tokens predicted after the cache of window {w} evicts; "
                         "a standard error needs at least 4 (a longer n_stream)")
    g = l0 - lf
    se, dof = _batch_means_se(g)
    t = t_critical(dof + 1, level)       # dof >= 1: at least 4 tokens make at least 2 batches
    m, bar = float(g.mean()), math.log(threshold)
    verdict = "reproduced" if m - t * se >= bar else "contradicted" if m + t * se < bar else "inconclusive"
    return {"ratio": math.exp(m), "log": m, "se": se, "dof": dof, "verdict": verdict}


def restore_below(shares: dict[int, dict[str, float]], threshold: float = 0.75,
                  level: float = 0.05) -> dict[int, dict[str, float]]:
    """The windows at which keeping the most sinks closes less than ``threshold`` of the window-only
    cache's gap, beyond its uncertainty: ``shares`` maps each window to its :func:`closed_share`, and a
    window is below where its share is below ``threshold`` by more than Student's t (``dof`` degrees of
    freedom, one-sided at ``level / 2``) standard errors. Returns ``{w: share | {"t": t}}`` for those
    windows (empty when the claim stands at every window)."""
    out = {}
    for w, c in shares.items():
        t = t_critical(c["dof"] + 1, level)
        if c["share"] + t * c["se"] < threshold:
            out[w] = {**c, "t": t}
    return out


def streaming_sentence(curves: dict, n_stream: int, n_streams: int, windows: list[int],
                       sinks: list[int]) -> str:
    """One sentence on a stored :func:`stream_curves` record: its size and, at its largest window, the
    perplexities of the full, window-only and most-sinks caches once they evict
    (:func:`perplexity_after_eviction`)."""
    ppl, w, k = perplexity_after_eviction(curves, windows, sinks), max(windows), max(sinks)
    full, alone, kept = ppl[("full", w)], ppl[(0, w)], ppl[(k, w)]
    closed = (np.log(alone) - np.log(kept)) / (np.log(alone) - np.log(full))
    return (f"over {n_streams} streams of {n_stream} tokens with a window of w = {w}, the full cache's "
            f"perplexity is {full:.2f} once the caches evict, the window-only cache's {alone:.2f} "
            f"({alone / full:.2f} times as much) and that of {k} sinks + window {kept:.2f}, "
            f"{closed:.0%} of the window-only cache's gap in log-perplexity closed")


def kv_bytes_per_token(layers: int, kv_heads: int, head_dim: int, bytes_per_number: int = 2) -> int:
    """Bytes one cached token takes: a key and a value per layer and key/value head (float16: 2 bytes)."""
    return 2 * layers * kv_heads * head_dim * bytes_per_number


def filled_cache_size(k: int, w: int, n_steps: int) -> int:
    """Entries a :class:`StreamingCache` with ``k`` sinks and window ``w`` holds after streaming
    ``n_steps`` tokens through a one-layer random Llama (the real model's code path); raises if
    its key tensor and its list of kept positions disagree."""
    cache = StreamingCache(tiny_llama(n_layers=1), k, w)
    for i in range(n_steps):
        cache.step(torch.tensor([3 + i % 100]))
    held = cache.cache.layers[0].keys.shape[-2]
    if held != len(cache.kept):
        raise AssertionError(f"cache holds {held} keys but lists {len(cache.kept)} positions")
    return int(held)


def retrieval_table(rows: list[dict], n_pairs: int) -> dict[str, np.ndarray]:
    """Stored :func:`retrieval_rows` by evidence position (the positions that were measured).

    Returns arrays over those positions: ``position`` (1-based), ``trials``, ``accuracy`` and its
    binomial standard error ``accuracy_se``, ``logp`` (mean log-probability of the right value, nats)
    and ``logp_se``, and the shares of answers that copied the right value (``copy_gold``), another
    pair's value (``copy_other``), a key (``copy_key``) or nothing from the context (``copy_none``).
    """
    gold = np.array([r["gold"] for r in rows])
    correct = np.array([r["correct"] for r in rows], dtype=float)
    copied = np.array([r["copied"] for r in rows])
    logp = np.array([r["logp"] for r in rows])
    pos = np.unique(gold)
    if pos.min() < 0 or pos.max() >= n_pairs:
        raise ValueError(f"evidence positions must lie in [0, {n_pairs})")
    out: dict[str, list] = {k: [] for k in ("trials", "accuracy", "accuracy_se", "logp", "logp_se",
                                            "copy_gold", "copy_other", "copy_key", "copy_none")}
    for g in pos:
        sel, c = gold == g, copied[gold == g]
        m, acc = int(sel.sum()), correct[sel].mean()
        out["trials"].append(m)
        out["accuracy"].append(acc)
        out["accuracy_se"].append(np.sqrt(acc * (1 - acc) / m))
        out["logp"].append(logp[sel].mean())
        out["logp_se"].append(logp[sel].std(ddof=1) / np.sqrt(m) if m > 1 else np.nan)
        out["copy_gold"].append((c == g).mean())
        out["copy_other"].append(((c >= 0) & (c != g)).mean())
        out["copy_key"].append((c == -2).mean())
        out["copy_none"].append((c == -1).mean())
    return {"position": pos + 1, **{k: np.asarray(v, dtype=float) for k, v in out.items()}}


def ends_minus_middle(table: dict[str, np.ndarray], field: str = "accuracy", z: float = 2.0) -> dict:
    """First and last measured positions against the mean of those between them, for ``field`` of
    :func:`retrieval_table` (``accuracy`` or ``logp``), with standard errors from ``<field>_se``
    (independent prompts per position).

    Returns ``first``, ``last``, ``middle``, ``first_minus_middle`` and ``last_minus_middle`` with
    their ``*_se``, and ``u_shape``: whether both differences exceed ``z`` standard errors. NaN (and
    ``u_shape`` False) without a middle position.
    """
    v, se = table[field], table[f"{field}_se"]
    if len(v) < 3:
        nan = float("nan")
        return {**{k: nan for k in ("first", "last", "middle", "first_minus_middle", "first_minus_middle_se",
                                    "last_minus_middle", "last_minus_middle_se")}, "u_shape": False}
    mid, mid_se = v[1:-1].mean(), np.sqrt((se[1:-1] ** 2).sum()) / (len(v) - 2)
    out = {"first": float(v[0]), "last": float(v[-1]), "middle": float(mid),
           "first_minus_middle": float(v[0] - mid), "first_minus_middle_se": float(np.hypot(se[0], mid_se)),
           "last_minus_middle": float(v[-1] - mid), "last_minus_middle_se": float(np.hypot(se[-1], mid_se))}
    out["u_shape"] = bool(out["first_minus_middle"] > z * out["first_minus_middle_se"]
                          and out["last_minus_middle"] > z * out["last_minus_middle_se"])
    return out


def wrong_answers(rows: list[dict], n_pairs: int) -> dict[str, float]:
    """What the wrong answers of stored :func:`retrieval_rows` copied, as shares of the wrong answers.

    ``n_wrong`` and ``n_from_context`` (counts); ``from_context`` (another pair's value), ``right_pair``
    (the right value, miscopied after its first characters), ``key``, ``none``; among the other pairs'
    values copied: ``neighbour`` (a pair next to the right one), ``later`` (a pair after it), ``next``
    (the very next pair); and ``first_pair``, ``last_pair``: the first or last pair's value when it is
    not the right one. NaN where nothing counts.
    """
    wrong = [r for r in rows if not r["correct"]]
    c = np.array([r["copied"] for r in wrong])
    gold = np.array([r["gold"] for r in wrong])
    other = (c >= 0) & (c != gold)
    offs = (c - gold)[other]
    share = lambda x: float(np.mean(x)) if len(x) else float("nan")  # noqa: E731
    return {"n_wrong": len(wrong), "n_from_context": int(other.sum()), "from_context": share(other),
            "right_pair": share((c >= 0) & (c == gold)),
            "key": share(c == -2), "none": share(c == -1),
            "neighbour": share(np.abs(offs) == 1), "later": share(offs > 0), "next": share(offs == 1),
            "first_pair": share(other & (c == 0)), "last_pair": share(other & (c == n_pairs - 1))}


def retrieval_tests(rows: list[dict], n_pairs: int) -> dict[str, dict]:
    """The chapter's two claims on counts of stored :func:`retrieval_rows`, each a
    :func:`posbias.measures.stats.rate_verdict` (reproduced, contradicted or inconclusive): ``above_chance``, the
    right answers against a uniform guess among the ``n_pairs`` values (``1 / n_pairs``), and
    ``copies_most``, the wrong answers that copy another pair's value against a half."""
    wrong = wrong_answers(rows, n_pairs)
    return {"above_chance": rate_verdict(sum(bool(r["correct"]) for r in rows), len(rows), 1 / n_pairs),
            "copies_most": rate_verdict(wrong["n_from_context"], wrong["n_wrong"], 0.5)}


def curve_agreement(rows: list[dict], draws: int = 4000, seed: int = 0, level: float = 0.05,
                    min_prompts: int = 5) -> dict:
    """Whether the two retrieval curves of stored :func:`retrieval_rows` agree: the Pearson correlation,
    across the measured evidence positions, of the accuracy and the mean log-probability of the right value.

    Its uncertainty is the prompts': ``draws`` bootstrap resamples of the prompts within each position (the
    positions are the design, fixed), each giving a correlation (none where a resample leaves either curve
    flat). The claim "the correlation is positive" is ``reproduced`` where at least ``1 - level / 2`` of the
    draws give a positive correlation, ``contradicted`` where at least that share give a negative one,
    ``inconclusive`` otherwise (few prompts, few positions or flat curves). A position with fewer than
    ``min_prompts`` prompts makes it inconclusive too: the resamples of ``m`` prompts take at most
    ``C(2m - 1, m)`` distinct means (1, 3, 10, 35 for ``m`` = 1 to 4; 126 at 5), and at one prompt every
    draw repeats the sample, which would decide on its sign alone. Returns ``{"corr"`` (the sample's, NaN
    where flat), ``"above"``, ``"below"`` (shares of draws), ``"fewest"`` (prompts at the sparsest
    position), ``"verdict"}``.
    """
    gold = np.array([r["gold"] for r in rows])
    correct = np.array([r["correct"] for r in rows], dtype=float)
    logp = np.array([r["logp"] for r in rows], dtype=float)
    pos = np.unique(gold)
    rng = np.random.default_rng(seed)
    acc, lp = np.empty((draws + 1, len(pos))), np.empty((draws + 1, len(pos)))
    for k, g in enumerate(pos):
        idx = np.flatnonzero(gold == g)
        pick = np.vstack([idx, rng.choice(idx, size=(draws, len(idx)))])   # row 0: the sample itself
        acc[:, k], lp[:, k] = correct[pick].mean(axis=1), logp[pick].mean(axis=1)
    a, b = acc - acc.mean(axis=1, keepdims=True), lp - lp.mean(axis=1, keepdims=True)
    norm = np.sqrt((a * a).sum(axis=1) * (b * b).sum(axis=1))
    with np.errstate(invalid="ignore", divide="ignore"):
        corr = np.where(norm > 0, (a * b).sum(axis=1) / norm, np.nan)
    above, below = float(np.mean(corr[1:] > 0)), float(np.mean(corr[1:] < 0))
    fewest = int(min(np.sum(gold == g) for g in pos))
    verdict = ("inconclusive" if fewest < min_prompts else "reproduced" if above >= 1 - level / 2
               else "contradicted" if below >= 1 - level / 2 else "inconclusive")
    return {"corr": float(corr[0]), "above": above, "below": below, "fewest": fewest, "verdict": verdict}


def copy_confusion(rows: list[dict], n_pairs: int) -> np.ndarray:
    """Share of answers, by measured evidence position (rows, in order), that copied pair ``j``
    (columns ``0..n_pairs-1``), a key (column ``n_pairs``) or nothing (column ``n_pairs + 1``)."""
    pos = sorted({r["gold"] for r in rows})
    out = np.zeros((len(pos), n_pairs + 2))
    for r in rows:
        c = r["copied"]
        out[pos.index(r["gold"]), c if c >= 0 else n_pairs + (c == -1)] += 1
    return out / out.sum(axis=1, keepdims=True)


def position_ranking(table: dict[str, np.ndarray]) -> list[int]:
    """Measured positions (1-based) from most to least reliable: by accuracy, ties broken by the mean
    log-probability of the right value."""
    order = np.lexsort((-table["logp"], -table["accuracy"]))
    return [int(table["position"][i]) for i in order]


def paper_sentence(rows: list[dict], n_pairs: int) -> str:
    """One sentence on a stored retrieval record: its size and whether its accuracy curve is U-shaped
    (:func:`ends_minus_middle`), with the accuracies at the first, middle and last measured positions."""
    tab = retrieval_table(rows, n_pairs)
    acc = ends_minus_middle(tab, "accuracy")
    shape = "U-shaped" if acc["u_shape"] else "not shown to be U-shaped"
    return (f"with {n_pairs} pairs and {int(tab['trials'][0])} prompts at each of {len(tab['position'])} "
            f"positions ({', '.join(map(str, tab['position']))}), the accuracy curve is {shape} beyond two "
            f"standard errors: {acc['first']:.0%} with the evidence first, {acc['middle']:.0%} on average "
            f"between, {acc['last']:.0%} last (first minus middle {acc['first_minus_middle']:+.2f} ± "
            f"{acc['first_minus_middle_se']:.2f}, last minus middle {acc['last_minus_middle']:+.2f} ± "
            f"{acc['last_minus_middle_se']:.2f})")
