"""The mechanisms of the three source documents drawn before any formula, for the page on what position bias is.

Each schematic is computed by the library, not drawn by hand: :func:`mask_walk` (a causal mask as a graph, and
where repeated averaging over it sends a token's context), :func:`decay_pushback` (a distance decay keeps that
mass near the query), :func:`layernorm_recency` (LayerNorm makes a second layer score later keys higher) and
:func:`streaming_sinks` (the keys a StreamingLLM cache keeps: the first tokens and a recent window).
:func:`write` saves them as PNG files for the book (``posbias build`` calls it).
"""
from __future__ import annotations

from pathlib import Path

import matplotlib.figure
import matplotlib.pyplot as plt
import numpy as np
import torch

__all__ = ["mask_walk", "decay_pushback", "layernorm_recency", "streaming_sinks", "SCHEMATICS", "write"]


def _uniform_causal(n: int) -> torch.Tensor:
    """Uniform causal attention ``(n, n)``: row ``i`` spreads evenly over tokens ``0..i``."""
    from posbias.science.masks import causal_mask

    m = causal_mask(n).double()
    return m / m.sum(-1, keepdim=True)


def mask_walk(n: int = 6, depths: tuple[int, ...] = (1, 4, 16)) -> matplotlib.figure.Figure:
    """Left: the causal mask on ``n`` tokens as a graph (an arc from every token to each later one: what a
    later token may read). Right: the last token's context after ``depths`` layers of uniform causal attention
    (the last row of the rollout :math:`P^{(t)}`), which drifts toward the first token, the graph's centre."""
    from posbias.science.rollout import rollout

    fig, (g, b) = plt.subplots(1, 2, figsize=(8.4, 2.6), gridspec_kw={"width_ratios": [1.1, 1]})
    x = np.arange(1, n + 1)
    for j in range(n):
        for i in range(j + 1, n):
            h = 0.12 * (i - j)
            t = np.linspace(0, np.pi, 30)
            g.plot(x[j] + (x[i] - x[j]) * (1 - np.cos(t)) / 2, h * np.sin(t), color="0.55", lw=0.8)
    g.scatter(x, np.zeros(n), s=220, color="C0", zorder=3)
    for k in x:
        g.text(k, 0, str(k), ha="center", va="center", color="white", fontsize=9, zorder=4)
    g.set_title("a causal mask as a graph: token i reads tokens 1..i", fontsize=9)
    g.set_ylim(-0.25, 0.12 * (n - 1) + 0.05)
    g.axis("off")
    p = rollout(_uniform_causal(n).expand(max(depths), n, n).clone())
    width = 0.8 / len(depths)
    for k, t in enumerate(depths):
        b.bar(x + (k - (len(depths) - 1) / 2) * width, p[t - 1, -1].numpy(), width, label=f"{t} layer{'s' * (t > 1)}")
    b.set_xticks(x)
    b.set_xlabel("token", fontsize=9)
    b.set_ylabel(f"token {n}'s context", fontsize=9)
    b.set_title("averaging layer after layer drifts toward token 1", fontsize=9)
    b.legend(fontsize=8, frameon=False)
    b.tick_params(labelsize=8)
    return fig


def decay_pushback(m: float = 0.5, depths: tuple[int, ...] = (1, 4, 16), k_max: int = 40) -> matplotlib.figure.Figure:
    """Where a query's context sits, by distance back from it, after ``depths`` layers of a causal mask with the
    distance decay :math:`e^{-m k}` (the profile :func:`posbias.science.theory.decay_profile_log`, normalised), with
    each peak marked (:func:`posbias.science.theory.decay_critical_distance`): the decay holds the mass at a finite
    distance that grows with depth, instead of letting it drain to the first token."""
    from posbias.science.theory import decay_critical_distance, decay_profile_log

    fig, ax = plt.subplots(figsize=(5.2, 2.6))
    k = torch.arange(k_max + 1)
    for t in depths:
        w = torch.exp(decay_profile_log(k, t, m))
        w = (w / w.sum()).numpy()
        line, = ax.plot(k.numpy(), w, lw=1.4, label=f"{t} layer{'s' * (t > 1)}")
        c = decay_critical_distance(t, m)
        ax.plot([c], [w[c]], "o", color=line.get_color(), ms=4)
    ax.set_xlabel("distance back from the query (tokens)", fontsize=9)
    ax.set_ylabel("share of the context", fontsize=9)
    ax.set_title(f"a distance decay (m = {m}) holds the context at a finite distance", fontsize=9)
    ax.legend(fontsize=8, frameon=False)
    ax.tick_params(labelsize=8)
    return fig


def layernorm_recency(n: int = 12, d: int = 16, alpha: float = 0.2) -> matplotlib.figure.Figure:
    """The last query's mean second-layer score on each earlier key in a stack of causal attention with and
    without LayerNorm (:func:`posbias.science.lntheory.layer2_scores`, ``d`` dimensions, inputs of cosine ``alpha``),
    each shown relative to its score on the first key: with LayerNorm later keys score higher (recency)."""
    from posbias.science.lntheory import layer2_scores

    fig, ax = plt.subplots(figsize=(5.2, 2.6))
    keys = np.arange(1, n)
    for ln, name in ((True, "with LayerNorm"), (False, "without")):
        row = layer2_scores(n, d, alpha, layernorm=ln)[-1, :-1].numpy()
        ax.plot(keys, row - row[0], marker="o", ms=3, lw=1.4, label=name)
    ax.set_xlabel(f"key position (the query is token {n})", fontsize=9)
    ax.set_ylabel("score minus the first key's", fontsize=9)
    ax.set_title("LayerNorm makes the second layer favour recent keys", fontsize=9)
    ax.legend(fontsize=8, frameon=False)
    ax.tick_params(labelsize=8)
    return fig


def streaming_sinks(n: int = 16, sinks: int = 2, window: int = 5) -> matplotlib.figure.Figure:
    """The keys each query may attend to in a StreamingLLM cache of ``sinks`` first tokens and a recent ``window``
    (:func:`posbias.science.masks.sliding_window_mask` with the first columns kept): dropping the first tokens, where
    trained decoders park much of their attention (sinks), is what breaks a plain sliding window."""
    from posbias.science.masks import sliding_window_mask

    keep = sliding_window_mask(n, window).clone()
    keep[:, :sinks] = torch.tril(torch.ones(n, n, dtype=torch.bool))[:, :sinks]
    fig, ax = plt.subplots(figsize=(3.4, 3.0))
    show = keep.int().numpy() + (keep.int().numpy() * (np.arange(n)[None, :] < sinks))
    ax.grid(False)
    ax.imshow(show, cmap=matplotlib.colors.ListedColormap(["white", "#9ecae1", "#08519c"]), vmin=0, vmax=2)
    ax.set_xlabel("key", fontsize=9)
    ax.set_ylabel("query", fontsize=9)
    ax.set_title(f"a streaming cache: {sinks} sink tokens + {window} recent", fontsize=9)
    ax.set_xticks([0, n - 1], [1, n])
    ax.set_yticks([0, n - 1], [1, n])
    ax.tick_params(labelsize=8)
    return fig


#: name -> (function, alt text: what the picture shows, for readers who cannot see it).
SCHEMATICS = {
    "mask-walk": (mask_walk, "Six tokens joined by arcs from each token to every later one, and bars showing the "
                             "last token's context moving toward token 1 as layers of averaging are added."),
    "decay-pushback": (decay_pushback, "Curves of a query's context against distance back from it under a "
                                       "distance decay, each peaking at a finite distance that grows with depth."),
    "layernorm-recency": (layernorm_recency, "The last query's second-layer score on each earlier key: rising with "
                                             "the key's position with LayerNorm, flat without."),
    "streaming-sinks": (streaming_sinks, "A grid of queries against keys: each query keeps the first two keys and "
                                         "its five most recent ones."),
}


def write(folder: Path) -> dict[str, Path]:
    """Draw every schematic into ``folder`` as ``<name>.png``; returns name -> path."""
    from posbias.figures.saving import style

    style()
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for name, (draw, _) in SCHEMATICS.items():
        fig = draw()
        path = folder / f"{name}.png"
        fig.savefig(path, dpi=150, metadata={"Software": None})
        plt.close(fig)
        out[name] = path
    return out
