"""Kim et al.'s score maps: one mean score map per panel, and a grid of them per configuration and width."""
from __future__ import annotations

import numpy as np

__all__ = ["plot_score_map", "score_map_grid"]


def plot_score_map(ax, scores: np.ndarray, title: str = "", *, rp: float | None = None, cmap: str = "viridis",
                   offdiag_scale: bool = True):
    """Draw a mean score map ``(n, n)`` with the masked triangle blank and RP in the corner; returns the image.

    With ``offdiag_scale`` the colour range is that of the strictly-lower entries (the diagonal, often
    far larger, saturates), so the structure along each row stays visible.
    """
    s = np.asarray(scores, dtype=float)
    n = s.shape[-1]
    shown = np.ma.masked_invalid(np.where(np.triu(np.ones((n, n), dtype=bool), 1), np.nan, s))
    lim = {}
    if offdiag_scale and n > 1:
        off = s[np.tril_indices(n, -1)]
        lim = dict(vmin=float(np.nanmin(off)), vmax=float(np.nanmax(off)))
    im = ax.imshow(shown, cmap=cmap, extent=(0.5, n + 0.5, n + 0.5, 0.5), **lim)
    ax.grid(False)
    ax.set_xticks([1, n])
    ax.set_yticks([1, n])
    if title:
        ax.set_title(title, fontsize=8)
    if rp is not None:
        ax.text(n + 0.3, 0.8, f"RP={rp:.2f}", ha="right", va="top", fontsize=8)
    return im


def score_map_grid(rows: list[tuple[str, dict]], results: dict, d_list: list[int], depth: int, title: str):
    """A grid of mean score maps: one row per configuration, ``depth`` panels per width.

    ``rows``: ``[(name, config), ...]``; ``results[(name, d)]``: a :func:`simulate` result whose
    ``score_mean`` is ``(T >= depth, n, n)`` and ``rp`` ``(T,)``. Panels are drawn by
    :func:`plot_score_map` without ticks; returns the matplotlib figure.
    """
    import matplotlib.pyplot as plt  # lazy: matplotlib.pyplot costs ~0.9s at import

    fig, axes = plt.subplots(len(rows), depth * len(d_list), squeeze=False,
                             figsize=(1.9 * depth * len(d_list), 1.9 * len(rows)))
    for r, (name, _) in enumerate(rows):
        for c, d in enumerate(d_list):
            res = results[(name, d)]
            for t in range(depth):
                ax = axes[r, c * depth + t]
                plot_score_map(ax, res.score_mean[t], f"{name}\nd={d}, layer {t + 1}", rp=float(res.rp[t]))
                ax.set_xticks([])
                ax.set_yticks([])
    fig.suptitle(title, fontsize=10)
    return fig
