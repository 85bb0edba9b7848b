"""The reproduction scoreboard: every claim of every trained figure of Wu et al. (2025), judged on
the committed paper-profile units (100,000 iterations, 5 seeds, the paper's test-set sizes).

Each figure's claims are the ones its chapter states, built by one library function per figure
(the chapter and the scoreboard share it):

- Figure 2: :func:`posbias.evaluate.fig2_study_claims` (depths 2, 4, 6);
- the residual-depth study: :func:`posbias.evaluate.fig2_study_claims` (as the chapter's paper
  section; depths 2, 6, 10): each depth's claims once its three architectures are committed, the
  depth claims once the shallowest and the deepest are;
- Figure 3: :func:`posbias.evaluate.fig3_claims`; Figure 4: :func:`posbias.evaluate.fig4_claims`;
- Figure 5: :func:`posbias.evaluate.sink_claims` (on Figure 2's depth-2 causal No-PE units, the
  same setting); Figure 6: :func:`posbias.evaluate.fig6_claims` on :func:`posbias.evaluate.sink_excess`.

A claim is judged when every unit it rests on is stored at the paper's settings, with Student's t
over the runs (:func:`posbias.evaluate.claim`), ``not comparable`` where a network it uses did not
learn (:func:`posbias.evaluate.learned`), and again with Holm's correction over the claims of its
figure that are tested (:func:`posbias.evaluate.holm_verdicts`). The others are listed as "not yet
at the paper's settings", with the units committed and needed. Nothing here trains.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from . import evaluate as ev

__all__ = ["PENDING", "FIGURES", "ClaimResult", "FigureResult", "Scoreboard", "figure_result", "build",
           "expected_claims", "STATUSES", "HeroData", "hero_data", "SMOLLM_SURVEY", "loss_margin"]

#: The status of a claim whose units are not all stored at the paper's settings.
PENDING = "not yet at the paper's settings"
#: Every status a claim can have on the scoreboard, in the order it is counted.
STATUSES = (*ev.VERDICTS, PENDING)

#: The trained figures: chapter id -> the label the paper gives it.
FIGURES: dict[str, str] = {"wu-fig-2": "Figure 2", "wu-fig-3": "Figure 3", "wu-fig-4": "Figure 4",
                           "wu-fig-5": "Figure 5", "wu-fig-6": "Figure 6",
                           "wu-residual-depth": "Section 5.1, with residual"}

_RESIDUAL_DEPTHS = [2, 6, 10]
_FIG2_DEPTHS = [2, 4, 6]
_WINDOWS, _PREFIXES = [4, 8, 12], [2, 4, 8]


@dataclass(frozen=True)
class ClaimResult:
    """One claim of one figure on the scoreboard.

    ``status`` is a verdict of :data:`posbias.evaluate.VERDICTS` or :data:`PENDING`; ``holm`` the
    verdict after Holm's correction over the figure's tested claims (``status`` where not tested).
    ``mean``/``se`` are over runs (``None`` when pending); ``n_runs`` runs per configuration;
    ``n_networks`` the networks the claim rests on and ``n_learned`` how many of them learned.
    """

    chapter: str
    figure: str
    name: str
    claim: str
    status: str
    holm: str
    mean: float | None = None
    se: float | None = None
    crit: float | None = None
    n_runs: int = 0
    n_networks: int = 0
    n_learned: int = 0
    still_rising: bool | None = None


@dataclass(frozen=True)
class FigureResult:
    """A figure's claims and how much of its paper campaign is committed (``n_units`` of ``n_needed``)."""

    chapter: str
    figure: str
    n_units: int
    n_needed: int
    claims: tuple[ClaimResult, ...]
    expected: tuple[str, ...] = field(default=())

    @property
    def n_tested(self) -> int:
        """Claims judged and not ``not comparable``: the family of Holm's correction."""
        return sum(c.status in ("reproduced", "inconclusive", "contradicted") for c in self.claims)


@dataclass(frozen=True)
class Scoreboard:
    """Every figure's :class:`FigureResult`, in book order, and the distinct units all of them need
    at the paper's settings (``units_needed``; a unit two figures share counts once) and of those
    committed (``units_committed``)."""

    figures: tuple[FigureResult, ...]
    units_committed: int = 0
    units_needed: int = 0

    def claims(self) -> list[ClaimResult]:
        return [c for f in self.figures for c in f.claims]

    def totals(self, holm: bool = False) -> dict[str, int]:
        """Claims per status (:data:`STATUSES`), with ``holm`` by the Holm-adjusted verdicts; and ``total``."""
        out = {s: sum((c.holm if holm else c.status) == s for c in self.claims()) for s in STATUSES}
        return {**out, "total": len(self.claims())}

    def accounted(self) -> list[str]:
        """What is wrong with the board: each figure must list each of its expected claims exactly
        once (judged or pending) and nothing else. Empty when every claim is accounted for."""
        problems = []
        for f in self.figures:
            names = [c.name for c in f.claims]
            if sorted(names) != sorted(f.expected) or len(set(names)) != len(names):
                problems.append(f"{f.chapter}: listed {sorted(names)}, expected {sorted(f.expected)}")
            for c in f.claims:
                if c.status not in STATUSES or c.holm not in STATUSES:
                    problems.append(f"{f.chapter}/{c.name}: unknown status {c.status!r} / {c.holm!r}")
        return problems

    def table(self):
        """The board as a ``pandas.DataFrame``: one row per claim (figure, claim, verdict, after Holm,
        mean ± SE, networks that learned out of those used, runs)."""
        import pandas as pd

        rows = []
        for f in self.figures:
            for c in f.claims:
                judged = c.mean is not None
                rows.append({"figure": f.figure, "claim": c.claim, "verdict": c.status, "after Holm": c.holm,
                             "mean ± SE": f"{c.mean:+.3f} ± {c.se:.3f}" if judged else
                             f"{f.n_units} of {f.n_needed} units committed",
                             "networks learned": f"{c.n_learned} of {c.n_networks}" if judged else "",
                             "runs": c.n_runs if judged else ""})
        return pd.DataFrame(rows)

    def figure_table(self):
        """One row per figure (``pandas.DataFrame``): units committed of needed, claims, claims
        tested (the family of Holm's correction), then the count of each status and of Holm's
        reproduced and contradicted."""
        import pandas as pd

        rows = []
        for f in self.figures:
            row = {"figure": f.figure, "units": f"{f.n_units} of {f.n_needed}", "claims": len(f.claims),
                   "tested": f.n_tested}
            row.update({s: sum(c.status == s for c in f.claims) for s in STATUSES})
            row.update({f"{v} after Holm": sum(c.holm == v for c in f.claims) for v in ("reproduced", "contradicted")})
            rows.append(row)
        return pd.DataFrame(rows)

    def by_figure(self) -> str:
        """One phrase per figure: the count of each status its claims have, e.g. ``"Figure 5: 2
        contradicted"``, joined by ``"; "``."""
        return "; ".join(f"{f.figure}: " + ", ".join(f"{n} {s}" for s in STATUSES
                                                     if (n := sum(c.status == s for c in f.claims)))
                         for f in self.figures)

    def summary(self) -> dict[str, Any]:
        """Counts for prose and the front page: ``total``, one per status (spaces as ``_``), Holm's
        counts (``holm_<status>``), ``n_figures``, ``n_figures_judged`` (figures with a judged claim),
        ``units_committed`` and ``units_needed`` (distinct units)."""
        t, h = self.totals(), self.totals(holm=True)
        out: dict[str, Any] = {s.replace(" ", "_").replace("'", ""): t[s] for s in STATUSES}
        out.update({f"holm_{s.replace(' ', '_')}": h[s] for s in ev.VERDICTS})
        out.update(total=t["total"], n_figures=len(self.figures),
                   n_figures_judged=sum(any(c.status != PENDING for c in f.claims) for f in self.figures),
                   units_committed=self.units_committed, units_needed=self.units_needed)
        return out


# --------------------------------------------------------------------------- the claims each figure makes

def _zeros(*_: Any) -> torch.Tensor:
    return torch.zeros(1, dtype=torch.float64)


def _sink_names() -> list[tuple[str, str]]:
    """Figure 5's claims, from :func:`posbias.evaluate.sink_claims` on a one-run placeholder."""
    from .masks import make_mask

    T = 5
    fake = [{"sink_alpha": [[0.0] * T], "sink_share": [0.0] * T}]
    rows, _ = ev.sink_claims(fake, make_mask("causal", T), 1)
    return [(r.name, r.claim) for r in rows]


def expected_claims(chapter: str) -> list[tuple[str, str]]:
    """``(name, claim)`` of every claim the figure of ``chapter`` makes at its paper settings, from
    the same functions that judge them (on placeholder values: nothing is read)."""
    if chapter in ("wu-fig-2", "wu-residual-depth"):
        depths = _FIG2_DEPTHS if chapter == "wu-fig-2" else _RESIDUAL_DEPTHS
        out = [(n, t) for n, t, *_ in ev.depth_claims(_zeros, min(depths), max(depths))]
        for d in depths:
            out += [(f"{n}-{d}", f"{t} ({d} layers)") for n, t, *_ in ev.fixed_depth_claims(_zeros)]
        return out
    if chapter == "wu-fig-3":
        return [(n, t) for n, t, *_ in ev.fig3_specs(_zeros, _zeros)]
    if chapter == "wu-fig-4":
        return [(n, t) for n, t, *_ in ev.fig4_specs(_zeros, _zeros)]
    if chapter == "wu-fig-5":
        return _sink_names()
    if chapter == "wu-fig-6":
        T = 17
        excess = {lb: torch.zeros(1, T, dtype=torch.float64)
                  for lb in ["causal", *(f"window|{w}" for w in _WINDOWS), *(f"prefix|{k}" for k in _PREFIXES)]}
        return [(r.name, r.claim) for r in ev.fig6_claims(excess, _WINDOWS, _PREFIXES, 1)]
    raise KeyError(f"no trained figure {chapter!r}; figures: {list(FIGURES)}")


# --------------------------------------------------------------------------- judging them

def _judge_fig2(complete: dict[str, list[dict]], n: dict[str, int]) -> list[ev.Claim]:
    _, res = ev.complete_depths(complete, ev.FIG2_PES, within=_FIG2_DEPTHS)
    return ev.fig2_study_claims(res, _FIG2_DEPTHS, n["n_test"], judge_learning=True)


def _judge_residual(complete: dict[str, list[dict]], n: dict[str, int]) -> list[ev.Claim]:
    _, res = ev.complete_depths(complete, ev.FIG2_PES, within=_RESIDUAL_DEPTHS)
    return ev.fig2_study_claims(res, _RESIDUAL_DEPTHS, n["n_test"], judge_learning=True)


def _judge_fig3(complete: dict[str, list[dict]], n: dict[str, int]) -> list[ev.Claim]:
    return ev.fig3_measurable_claims(complete, n["n_test"], judge_learning=True)


def _judge_fig4(complete: dict[str, list[dict]], n: dict[str, int]) -> list[ev.Claim]:
    return ev.fig4_measurable_claims(complete, n["n_test"], judge_learning=True)


def _judge_fig5(complete: dict[str, list[dict]], n: dict[str, int]) -> list[ev.Claim]:
    from .masks import make_mask
    from .task import TaskConfig

    if "causal|none" not in complete:
        return []
    rows, _ = ev.sink_claims(complete["causal|none"], make_mask("causal", TaskConfig().n_tokens), n["n_sink"],
                             judge_learning=True)
    return rows


def _judge_fig6(complete: dict[str, list[dict]], n: dict[str, int]) -> list[ev.Claim]:
    from .model import MemberConfig
    from .task import TaskConfig

    T = TaskConfig().n_tokens

    def mask_of(label: str) -> torch.Tensor:
        kind, _, size = label.partition("|")
        cfg = MemberConfig(kind, "none", window=int(size) if kind == "window" else None,
                           prefix=int(size) if kind == "prefix" else None)
        return cfg.mask_and_bias(T)[0]

    excess = {lb: ev.sink_excess(us, mask_of(lb)) for lb, us in complete.items()}
    depth = complete[next(iter(complete))][0]["params"]["depth"] if complete else 2
    return ev.fig6_claims(excess, _WINDOWS, _PREFIXES, n["n_sink"] * depth,
                          learned_by_label={lb: ev.learned(us) for lb, us in complete.items()})


_JUDGES: dict[str, Callable[[dict[str, list[dict]], dict[str, int]], list[ev.Claim]]] = {
    "wu-fig-2": _judge_fig2, "wu-fig-3": _judge_fig3, "wu-fig-4": _judge_fig4, "wu-fig-5": _judge_fig5,
    "wu-fig-6": _judge_fig6, "wu-residual-depth": _judge_residual}


def _overrides(chapter: str) -> dict[str, Any]:
    return {"depths": list(_RESIDUAL_DEPTHS)} if chapter == "wu-residual-depth" else {}


def figure_result(chapter: str, stored: dict[str, list[dict | None]], settings: dict[str, int],
                  level: float = 0.05) -> FigureResult:
    """Judge the claims of ``chapter``'s figure on ``stored`` (``train.stored_campaign``'s shape:
    label -> one result or ``None`` per seed) under the test-set sizes ``settings`` (``n_test``,
    ``n_sink``), at the two-sided ``level`` (Student's t, then Holm over the figure's tested
    claims); claims without all their units are :data:`PENDING`."""
    cov = ev.coverage(stored)
    rows = _JUDGES[chapter](cov.complete, settings) if cov.complete else []
    for r in rows:
        if r.verdict != "not comparable":
            r.crit = ev.t_critical(r.n_runs, level)
            r.verdict = ev.verdict(r.mean, r.se, r.sign, r.crit)
    ev.holm_verdicts(rows, level)
    expected = expected_claims(chapter)
    judged = {r.name: r for r in rows}
    out = []
    for name, text in expected:
        r = judged.get(name)
        if r is None:
            out.append(ClaimResult(chapter, FIGURES[chapter], name, text, PENDING, PENDING))
            continue
        n_learned, n_networks = (int(x) for x in r.learned.split(" of "))
        out.append(ClaimResult(chapter, FIGURES[chapter], name, r.claim, r.verdict, r.holm_verdict,
                               mean=float(r.mean), se=float(r.se), crit=float(r.crit),
                               n_runs=int(r.n_runs), n_networks=n_networks, n_learned=n_learned,
                               still_rising=r.still_rising))
    extra = sorted(set(judged) - {n for n, _ in expected})
    if extra:
        raise RuntimeError(f"{chapter}: claims judged but not expected: {extra}")
    return FigureResult(chapter, FIGURES[chapter], cov.n_units, cov.n_total, tuple(out),
                        tuple(n for n, _ in expected))


def build(chapters: list[str] | None = None, profile: str = "paper", level: float = 0.05) -> Scoreboard:
    """The scoreboard from the stored units of ``profile`` (the paper's settings by default): every
    figure of ``chapters`` (default :data:`FIGURES`), read through ``train.stored_campaign``, judged
    at the two-sided ``level``."""
    from . import train
    from .training.campaigns import distinct, stored, units_of

    settings = train.PROFILES[profile]
    chapters = chapters or list(FIGURES)
    figs = [figure_result(c, train.stored_campaign(c, profile, **_overrides(c)), settings, level) for c in chapters]
    units = distinct({f"{c}/{k}": us for c in chapters for k, us in units_of(c, profile, _overrides(c)).items()})
    return Scoreboard(tuple(figs), units_committed=sum(stored(u) for u in units), units_needed=len(units))


# --------------------------------------------------------------------------- the front page's figure

#: The committed SmolLM2 survey the hero figure reads (``sinks-real-decoder``'s stored parameters).
SMOLLM_SURVEY = {"batch": 8, "eps": 0.3, "lengths": [64, 128, 256], "n_rollout": 128, "rollout_batch": 4, "seed": 0}


@dataclass(frozen=True)
class HeroData:
    """The three panels of the front page's figure, all computed or read from committed data.

    ``layers``/``first_mass``: the last token's share of context on token 1 after ``t`` layers of
    uniform causal attention over ``n_tokens`` tokens (the rollout of Wu et al.'s Theorem 4.1), and
    ``uniform`` = ``1 / n_tokens``. ``pes``/``gap_mean``/``gap_se``: the first-vs-last gap of Figure 2's
    ``gap_depth``-layer networks at the paper's settings (mean ± SE over ``n_runs``), ``n_learned`` of
    ``n_networks`` learned. ``sink_multiple``: per layer of SmolLM2, token 1's mean attention over its
    uniform share at ``sink_tokens`` tokens (``None`` when the survey is not stored).
    """

    n_tokens: int
    layers: tuple[int, ...]
    first_mass: tuple[float, ...]
    uniform: float
    gap_depth: int
    pes: tuple[str, ...]
    gap_mean: tuple[float, ...]
    gap_se: tuple[float, ...]
    n_runs: int
    n_learned: int
    n_networks: int
    sink_tokens: int
    sink_multiple: tuple[float, ...] | None


def hero_data(n_tokens: int = 64, max_layers: int = 30, gap_depth: int = 2) -> HeroData:
    """:class:`HeroData` from the theory (computed), Figure 2's committed paper units and the committed
    SmolLM2 survey (:data:`SMOLLM_SURVEY`, natural text at ``n_tokens`` tokens). Nothing trains."""
    from . import llm, store, train
    from .attention import masked_softmax
    from .masks import make_mask
    from .rollout import first_position_mass, rollout

    mask = make_mask("causal", n_tokens)
    attn = masked_softmax(torch.zeros(n_tokens, n_tokens, dtype=torch.float64), mask)
    p = rollout(attn.expand(max_layers, n_tokens, n_tokens))
    mass = first_position_mass(p)[:, -1]                                        # (layers,) last token
    st = train.stored_campaign("wu-fig-2", "paper", depths=[gap_depth])
    n_test = train.PROFILES["paper"]["n_test"]
    gaps, units = [], []
    for pe in ev.FIG2_PES:
        us = [u for u in st[f"{pe}|{gap_depth}"] if u is not None]
        units += us
        gaps.append(ev.seed_mean_se(ev.stack(us, "gaps", "first-last"), n_test) if us else (float("nan"),) * 2)
    survey = store.lookup("sinks-real-decoder", SMOLLM_SURVEY, version=1)
    sink = None
    if survey is not None and f"natural-{n_tokens}" in survey["decoder"]:
        prof = llm.layer_profile(survey["decoder"][f"natural-{n_tokens}"], n_tokens)
        sink = tuple(float(x) for x in prof["multiple"])
    return HeroData(n_tokens, tuple(range(1, max_layers + 1)), tuple(float(x) for x in mass), 1 / n_tokens,
                    gap_depth, ev.FIG2_PES, tuple(m for m, _ in gaps), tuple(s for _, s in gaps),
                    len(st[f"No PE|{gap_depth}"]), sum(ev.learned(units)) if units else 0, len(units),
                    n_tokens, sink)


def loss_margin(chapter: str = "wu-fig-2", profile: str = "paper") -> dict[str, float]:
    """How far the stored networks of ``chapter``'s campaign end from :func:`posbias.evaluate.learned`'s
    loss threshold: ``threshold`` (``LEARNED_LOSS_FRACTION * ln 32``), ``below`` (the highest final
    loss under it), ``above`` (the lowest over it; ``nan`` when none) and ``n`` networks read."""
    import math

    from . import train
    from .task import TaskConfig

    thr = ev.LEARNED_LOSS_FRACTION * math.log(TaskConfig.n_labels)
    loss = [float(u["curves"]["loss"][-1]) for us in train.stored_campaign(chapter, profile).values()
            for u in us if u is not None]
    under, over = [x for x in loss if x <= thr], [x for x in loss if x > thr]
    return {"threshold": thr, "below": max(under, default=float("nan")), "above": min(over, default=float("nan")),
            "n": float(len(loss))}
