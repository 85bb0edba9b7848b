"""The reproduction scoreboard: the claim register (:mod:`posbias.analysis.claims`) judged on the committed
paper-profile units (100,000 iterations, 5 seeds, the paper's test-set sizes), with Holm's correction
over the whole register, and the convergence of the networks each claim rests on beside its verdict;
beside it the confirmatory column, the frozen register judged on fresh networks
(:mod:`posbias.analysis.claims.confirm`).

Nothing here builds a claim or trains: the entries, their settings and the judge are the register's.
"""
from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

from posbias import llm, training as train
from posbias.storage import store
from posbias.measures import stats
from posbias.analysis import claims, evidence
from posbias.measures import evaluate as ev
from posbias.science.attention import masked_softmax
from posbias.analysis.claims import confirm, power
from posbias.analysis.claims import quantities as q
from posbias.analysis.claims import tables
from posbias.science.masks import make_mask
from posbias.science.rollout import first_position_mass, rollout
from posbias.training.campaigns import stored, stored_campaign, units_of

__all__ = ["Scoreboard", "build", "HeroData", "hero_data", "SMOLLM_SURVEY"]


@dataclass(frozen=True)
class Scoreboard:
    """Every register entry judged (:class:`posbias.analysis.claims.Judged`, register order) and the distinct
    paper-profile units the register's settings need (``units_needed``) and of those committed."""

    judged: tuple[claims.Judged, ...]
    units_committed: int = 0
    units_needed: int = 0
    #: The frozen register judged on the confirmation networks
    #: (:func:`posbias.analysis.claims.confirm.judge_confirmatory`)
    confirmatory: tuple[claims.Judged, ...] = ()
    #: The confirmation networks the frozen register's settings need, and of those committed
    confirm_committed: int = 0
    confirm_needed: int = 0
    #: Configurations of each entry read before the freeze (:meth:`~posbias.analysis.claims.confirm.Frozen.partly_seen`)
    partly_seen: dict[str, list[str]] = field(default_factory=dict)
    #: Per figure: (confirmation networks committed, needed) for the frozen register's entries of it
    confirm_units: dict[str, tuple[int, int]] = field(default_factory=dict)
    #: Per judged entry, the runs its pooled effect would need (:func:`posbias.analysis.claims.power.power_rows`)
    power: tuple[dict[str, Any], ...] = ()

    def absent_counts(self) -> dict[str, int]:
        """Entries per verdict with the fourth, ``absent`` (:func:`posbias.analysis.claims.power.absent_counts`)."""
        return power.absent_counts(self.judged)

    def absent_figure_table(self):
        """Per figure: the claims, and each verdict with the fourth (reproduced and contradicted after Holm,
        absent, inconclusive, not yet)."""
        import pandas as pd  # lazy: pandas costs ~0.5s at import

        rows = []
        for fig in self.figures():
            c = power.absent_counts([j for j in self.judged if j.entry.figure == fig])
            rows.append({"figure": fig, "claims": c["total"], **{v: c[v] for v in power.VERDICTS}})
        return pd.DataFrame(rows)

    def absent_table(self):
        """Every entry tested for absence: claim, figure, mean ± SE, the 90% interval, the larger one-sided
        p-value and the verdict (absent or inconclusive)."""
        import pandas as pd  # lazy: pandas costs ~0.5s at import

        rows = []
        for j in self.judged:
            if (a := power.absent(j)) is not None:
                rows.append({"claim": j.entry.id, "figure": j.entry.figure,
                             "mean ± SE": f"{j.mean:+.3f}\u00a0±\u00a0{j.se:.3f}",
                             "90% interval": f"{a['lower']:+.3f} to {a['upper']:+.3f}", "p (TOST)": f"{a['p']:.3f}",
                             "verdict": "absent" if a["absent"] else "inconclusive"})
        return pd.DataFrame(rows, columns=["claim", "figure", "mean ± SE", "90% interval", "p (TOST)", "verdict"])

    def power_table(self):
        """One row per judged entry: its verdict with the fourth, the pooled runs, the pooled effect toward the
        claim ± its SE, the floor, the runs the effect would need at Holm's strictest step and whether the
        runs pooled already decide it (``floor`` where no number of runs can)."""
        import pandas as pd  # lazy: pandas costs ~0.5s at import

        four = dict(zip((j.entry.id for j in self.judged), power.verdicts(self.judged)))
        rows = [{"claim": r["claim"], "figure": r["figure"], "verdict": four[r["claim"]],
                 "runs pooled": r["runs pooled"],
                 "effect toward the claim": f"{r['effect']:+.3f}\u00a0±\u00a0{r['se']:.3f}",
                 "floor SE": f"{r['floor']:.4f}",
                 "runs needed": ("floor: none can" if r["floor binds"] else
                                 "over 1,000" if r["runs needed"] is None else f"{r['runs needed']:,}"),
                 "decided by the runs pooled": "yes" if r["decided now"] else "no"} for r in self.power]
        return pd.DataFrame(rows)

    def power_words(self) -> str:
        """The power column in one sentence, e.g. ``"of 39 judged claims, 12 are decided by the runs pooled, 9
        more need at most 20 runs, 6 need more than 20 and 12 cannot be decided by any number"``."""
        rs = self.power
        now = sum(r["decided now"] for r in rs)
        floor = sum(r["floor binds"] for r in rs)
        few = sum(not r["decided now"] and r["runs needed"] is not None and r["runs needed"] <= 20 for r in rs)
        return (f"of the {len(rs)} judged claims, {now} are decided by the runs pooled, {few} more would be by "
                f"at most 20 runs, {len(rs) - now - floor - few} need more than 20, and {floor} cannot be decided "
                "by any number of runs tested on shared test sets of this size (the floor binds)")

    def totals(self, holm: bool = True) -> dict[str, int]:
        """Entries per status, after Holm's correction over the register (``holm``) or by t alone."""
        return claims.counts(self.judged, holm)

    def figures(self) -> list[str]:
        return list(dict.fromkeys(j.entry.figure for j in self.judged))

    def figure_table(self):
        """One row per figure (``pandas.DataFrame``): claims, then each status after Holm and by t alone."""
        import pandas as pd  # lazy: pandas costs ~0.5s at import

        rows = []
        for fig in self.figures():
            js = [j for j in self.judged if j.entry.figure == fig]
            h, t = claims.counts(js, True), claims.counts(js, False)
            rows.append({"figure": fig, "claims": len(js),
                         **{f"{s} (Holm)": h[s] for s in claims.STATUSES[:3]},
                         **{f"{s} (t alone)": t[s] for s in claims.STATUSES[:3]},
                         "not yet": h[claims.NOT_YET],
                         "networks not converged": sum(j.converged is False for j in js)})
        return pd.DataFrame(rows)

    def table(self):
        """Every entry (:func:`posbias.analysis.claims.tables.table`)."""
        return tables.table(self.judged)

    def share_table(self):
        """How the convergence rule's share changes the counts: for the register's share and the two
        others it names, the judged entries resting on networks below it, by verdict after Holm."""
        import pandas as pd  # lazy: pandas costs ~0.5s at import

        j = claims.register().judge
        shares = sorted({j.share, *j.other_shares})
        return pd.DataFrame([{"share of ceiling": f"{s:.2f}" + (" (the rule)" if s == j.share else ""),
                              **claims.share_counts(self.judged, s)} for s in shares])

    def figure_phrase(self, figure: str) -> str:
        """What the register's verdicts say of one figure, after Holm, e.g. ``"2 of 9 claims reproduced
        (2 on a position shortcut; 2 on networks that do not retrieve), 1 contradicted, 6 inconclusive"``: the
        words the front page and the
        README use for it, never "reproduced" alone."""
        js = [j for j in self.judged if j.entry.figure == figure]
        h = claims.counts(js, True)
        marks = [f"{h['on a shortcut']} on a position shortcut"] if h["on a shortcut"] else []
        marks += [f"{h['without retrieval']} on networks that do not retrieve"] if h["without retrieval"] else []
        parts = [f"{h['reproduced']} of {len(js)} claim{'s' if len(js) != 1 else ''} reproduced"
                 + (f" ({'; '.join(marks)})" if marks else "")]
        parts += [f"{h[s]} {s}" for s in claims.STATUSES[1:] if h[s]]
        return ", ".join(parts)

    def readme_line(self) -> str:
        """The README's one line of verdicts per figure (a test keeps the README's copy equal to it)."""
        return ("Verdicts at the paper's settings, after Holm (exploratory): "
                + "; ".join(f"{fig}: {self.figure_phrase(fig)}" for fig in self.figures()) + ".")

    def by_figure(self) -> str:
        """One phrase per figure: the count of each status after Holm, e.g. ``"Figure 5: 1 contradicted"``."""
        parts = []
        for fig in self.figures():
            h = claims.counts([j for j in self.judged if j.entry.figure == fig], True)
            parts.append(f"{fig}: " + ", ".join(f"{h[s]} {s}" for s in claims.STATUSES if h[s]))
        return "; ".join(parts)

    def changes(self):
        """Every entry whose verdict (by t alone or after Holm) differs from the first register's
        (``wu2025-first-pass.json``, judged by that register's own code on the same units), and every
        entry added or removed, with why: a ``pandas.DataFrame`` of claim, first pass, second pass
        (each "t alone / after Holm"), and the reason."""
        import pandas as pd  # lazy: pandas costs ~0.5s at import

        first = first_pass()["entries"]
        now = {j.entry.id: j for j in self.judged}
        rows = []
        for id_, old in first.items():
            j = now.get(id_)
            was = f"{old['status']} / {old['holm']}"
            if j is None:
                rows.append({"claim": id_, "first pass": was, "second pass": "(removed)", "why": _removed_why(id_)})
            elif (j.status, j.holm) != (old["status"], old["holm"]):
                rows.append({"claim": id_, "first pass": was, "second pass": f"{j.status} / {j.holm}",
                             "why": _why(old, j)})
        for id_, j in now.items():
            if id_ not in first:
                rows.append({"claim": id_, "first pass": "(new)", "second pass": f"{j.status} / {j.holm}",
                             "why": _new_why(j)})
        return pd.DataFrame(rows, columns=["claim", "first pass", "second pass", "why"])

    def confirm_table(self):
        """Every entry of the frozen register: figure, exploratory verdict (seeds 0-4, after Holm over
        the register), confirmatory verdict (seeds 5-9, after Holm over the entries judged), the
        configurations read before the freeze, those whose networks trained partly from uncommitted code,
        and whether the two verdicts agree."""
        import pandas as pd  # lazy: pandas costs ~0.5s at import

        rows = [dict(r) for r in self.agreement()]
        for r in rows:
            r["agree"] = "" if r["agree"] is None else ("yes" if r["agree"] else "no")
            r["trained partly from uncommitted code"] = r.pop("uncommitted code")
        return pd.DataFrame(rows, columns=["claim", "figure", "exploratory", "confirmatory", "partly seen",
                                           "trained partly from uncommitted code", "agree"])

    def agreement(self) -> list[dict[str, Any]]:
        """:func:`posbias.analysis.claims.confirm.agreement` of this board: one row per frozen entry, in its order
        (the one place the two columns are compared)."""
        return confirm.agreement(self.judged, self.confirmatory, seen=lambda e: self.partly_seen.get(e.id, []))

    def confirm_done(self, figure: str | None = None) -> list[claims.Judged]:
        """The confirmatory verdicts given so far (of ``figure``'s claims, or all)."""
        return [j for j in self.confirmatory if j.holm != claims.NOT_YET and figure in (None, j.entry.figure)]

    def confirm_figure_table(self):
        """Per figure: the claims, those judged on confirmation networks, the confirmatory verdicts
        after Holm, the exploratory verdicts of the same claims, and how many of them agree."""
        import pandas as pd  # lazy: pandas costs ~0.5s at import

        ex = {j.entry.id: j for j in self.judged}
        agree = self.agreement()
        rows = []
        for fig in dict.fromkeys(j.entry.figure for j in self.confirmatory):
            done = self.confirm_done(fig)
            h = claims.counts(done, True)
            e = claims.counts([ex[j.entry.id] for j in done if j.entry.id in ex], True)
            rows.append({"figure": fig, "claims": sum(j.entry.figure == fig for j in self.confirmatory),
                         "judged": len(done),
                         **{f"{st} (confirmatory)": h[st] for st in claims.STATUSES[:3]},
                         **{f"{st} (exploratory)": e[st] for st in claims.STATUSES[:3]},
                         "agree": sum(r["agree"] is True for r in agree if r["figure"] == fig)})
        return pd.DataFrame(rows)

    def disagreements(self, figure: str) -> list[str]:
        """The claims of ``figure`` whose confirmatory and exploratory verdicts (after Holm) differ, each
        as ``"<id> (exploratory <v>, confirmatory <v>)"``."""
        return [f"{r['claim']} (exploratory {r['exploratory']}, confirmatory {r['confirmatory']})"
                for r in self.agreement() if r["figure"] == figure and r["agree"] is False]

    def confirm_words(self, figure: str) -> str:
        """What the confirmation says of one figure, for its chapter's takeaway: how many of its claims
        the frozen register has judged on fresh networks, their verdicts after Holm, and every claim whose
        confirmatory verdict differs from the exploratory one (or that none does)."""
        cs = [j for j in self.confirmatory if j.entry.figure == figure]
        done = self.confirm_done(figure)
        have, need = self.confirm_units.get(figure, (0, 0))
        if not done:
            return (f"no claim of {figure} is judged on them yet ({have} of the {need} confirmation networks its "
                    "claims need are committed)")
        h = claims.counts(done, True)
        differ = self.disagreements(figure)
        n_all = len(self.confirm_done())
        whole = f"all {len(cs)} of {figure}'s claims are" if len(cs) > 1 else f"{figure}'s one claim is"
        head = (f"{whole} judged on them, its {have} networks all committed (Holm "
                f"over the {n_all} entries of the register judged yet, so a verdict can still move if more entries "
                "are judged)"
                if len(done) == len(cs) and have == need else
                f"{len(done)} of {figure}'s {len(cs)} claims are judged on them so far (Holm over the "
                f"{n_all} entries of the register judged yet)")
        return (f"{head}: {h['reproduced']} reproduced, "
                f"{h['contradicted']} contradicted, {h['inconclusive']} inconclusive; "
                + ("the verdicts that differ from the exploratory ones: " + "; ".join(differ) if differ
                   else "every verdict agrees with the exploratory one"))

    def confirm_waiting(self, hours: Mapping[str, float]) -> str:
        """The figures whose confirmation networks are not all committed, each with its networks stored
        of those needed, the core-hours ``hours`` (campaign -> hours, :func:`confirm.plan`) price its
        campaign at, and how many of its claims wait; ``"none"`` when every figure's are committed."""
        out = []
        for fig, (have, need) in self.confirm_units.items():
            if have < need:
                cs = [j for j in self.confirmatory if j.entry.figure == fig]
                wait = len(cs) - len(self.confirm_done(fig))
                out.append(f"{fig} ({have} of {need} networks, {hours[cs[0].entry.campaign]:.1f} core-hours in "
                           f"the plan; {wait} claims wait)")
        return "; ".join(out) or "none"

    def confirm_phrase(self) -> str:
        """The front page's lead: the confirmatory counts and the figures they cover, or how far the
        confirmation campaign is while no entry is judged yet."""
        done = self.confirm_done()
        if not done:
            return (f"none yet: {self.confirm_committed} of the {self.confirm_needed} confirmation networks are "
                    "committed (Figure 2 trains first, then Appendix K.2's Figures 5 and 6)")
        h = claims.counts(done, True)
        figs = list(dict.fromkeys(j.entry.figure for j in done))
        seen = sum(bool(self.partly_seen.get(j.entry.id)) for j in done)
        dirty = sum(bool(j.uncommitted) for j in done)
        return (f"{h['reproduced']} of {len(done)} claims judged so far reproduced, {h['contradicted']} contradicted, "
                f"{h['inconclusive']} inconclusive (on {', '.join(figs)}; {len(self.confirmatory) - len(done)} "
                f"claims wait for networks; {seen} of the judged rest partly on networks read before the freeze"
                + (f", {dirty} on networks trained partly from uncommitted code" if dirty else "") + "; "
                f"Holm's correction runs over the {len(done)} judged so far, so a verdict can still move as the "
                "family grows)")

    def summary(self) -> dict[str, Any]:
        """Counts for prose and the front page: ``total``; ``holm_<status>`` (after Holm over the
        register) and ``t_<status>`` (t alone), statuses with ``_`` for spaces; ``holm_shortcut``,
        ``holm_without_retrieval`` and their ``t_`` twins (reproduced on a shortcut, on networks most of which do
        not retrieve); ``tested`` (entries
        judged), ``not_converged``, ``n_figures``, ``units_committed``, ``units_needed``."""
        h, t = self.totals(True), self.totals(False)
        out: dict[str, Any] = {"total": h["total"]}
        for s in claims.STATUSES:
            out[f"holm_{s.replace(' ', '_')}"] = h[s]
            out[f"t_{s.replace(' ', '_')}"] = t[s]
        out.update(holm_shortcut=h["on a shortcut"], t_shortcut=t["on a shortcut"],
                   holm_without_retrieval=h["without retrieval"], t_without_retrieval=t["without retrieval"],
                   cannot_reach=sum(bool(j.cannot_reach) for j in self.judged),
                   tested=sum(j.status != claims.NOT_YET for j in self.judged),
                   not_converged=sum(j.converged is False for j in self.judged), n_figures=len(self.figures()),
                   units_committed=self.units_committed, units_needed=self.units_needed)
        done = self.confirm_done()
        c = claims.counts(done, True)
        out.update({f"conf_{st.replace(' ', '_')}": c[st] for st in claims.STATUSES[:3]})
        out.update(conf_claims=len(self.confirmatory), conf_judged=len(done),
                   conf_agree=sum(r["agree"] is True for r in self.agreement()),
                   conf_units_committed=self.confirm_committed, conf_units_needed=self.confirm_needed,
                   conf_lead=self.confirm_phrase())
        return out


def first_pass() -> dict[str, Any]:
    """The first register's entries and verdicts (after Holm over its 61 entries), judged by its own
    code at commit 062ecbe on the committed units, with that provenance."""
    return json.loads((claims.REGISTER.parent / "wu2025-first-pass.json").read_text())


def _removed_why(id_: str) -> str:
    if id_.startswith("fig2-depth-"):
        return "replaced by the trend over 2, 4 and 6 layers on each gap, with both steps as guards"
    if id_.startswith("fig2-middle-last-smaller-"):
        return "replaced by the sizes of middle-last against both first gaps, for every PE"
    if id_ == "fig2-no-u":
        return "replaced by one absence claim per depth"
    if id_ == "fig5-first-key-excess":
        return "replaced by fig5-first-key-sink on Gu et al.'s rate (the excess is its second reading)"
    return "removed"


def _why(old: dict, j: claims.Judged) -> str:
    e, parts = j.entry, []
    if old["quantity"] != e.quantity or old["args"] != e.args:
        parts.append(f"quantity {old['quantity']} -> {e.quantity}")
    if old["direction"] != e.direction:
        parts.append(f"direction {old['direction']} -> {e.direction}" + (f" (margin {e.margin})" if e.margin else ""))
    if (old["guard"] or None) != (e.guard or None):
        parts.append("guard changed")
    if not parts and old["se"] is not None and j.se is not None and abs(old["se"] - j.se) > 1e-9:
        parts.append(f"standard error {old['se']:.4f} -> {j.se:.4f} (the contrast's own bound)")
    if not parts and j.n_runs != j.n_seeds:
        parts.append(f"{j.n_runs} distinct runs of {j.n_seeds}")
    return "; ".join(parts) or "Holm over a register of another size"


def _new_why(j: claims.Judged) -> str:
    return f"new entry: {j.entry.reading}"


def u_table(profile: str = "paper"):
    """Each configuration's lost-in-the-middle U (:func:`posbias.analysis.claims.quantities.u_depth`), the
    quantity the 'no U' entries take the deepest of per seed: a ``pandas.DataFrame`` of campaign,
    configuration, U (mean ± SE over distinct runs, the SE with one U's own binomial bound), t, the
    runs with a U above 0, the distinct runs, and the verdict of 'U > 0' by the register's judge
    (Student's t over the distinct runs at its level; the normal quantile for one)."""
    import pandas as pd  # lazy: pandas costs ~0.5s at import

    level = claims.register().judge.level
    rows = []
    for campaign in ("wu-fig-2", "wu-fig-3", "wu-fig-4"):
        for label, us in stored_campaign(campaign, profile).items():
            if not us or any(u is None for u in us) or "sweep_accuracy" not in us[0]:
                continue
            m = q.u_depth({label: us}, label)
            sigs = [claims.run_signature([u]) for u in us]
            keep = [i for i, sg in enumerate(sigs) if sg not in sigs[:i]]          # identical runs once
            mean, se, n = claims.mean_se(m, keep)
            rows.append({"campaign": campaign, "configuration": label, "U": f"{mean:+.3f} ± {se:.3f}",
                         "t": f"{mean / se:+.2f}", "runs with U > 0": f"{int((m.per_seed > 0).sum())} of {len(us)}",
                         "distinct runs": n,
                         "U > 0": stats.verdict(mean, se, 1, stats.t_critical(n, level))})
    return pd.DataFrame(rows)


def build(profile: str = "paper") -> Scoreboard:
    """The register judged on the stored units of ``profile`` (the paper's settings by default):
    committed data and the user cache, nothing trains."""
    judged = claims.judge_register(profile)

    groups_of: dict[tuple[str, str], dict[str, list]] = {}

    def needed(entries, prof: str) -> list[Any]:
        out: dict[str, Any] = {}
        for e in entries:
            if (e.campaign, prof) not in groups_of:
                groups_of[e.campaign, prof] = units_of(e.campaign, prof, {})
            groups = groups_of[e.campaign, prof]
            for c in e.configs:
                for u in groups[c]:
                    out[json.dumps(u.params(), sort_keys=True)] = u
        return list(out.values())

    campaigns = dict.fromkeys(e.campaign for e in claims.register().entries)
    pooled = {p: {c: stored_campaign(c, p) for c in campaigns} for p in power.PROFILES}
    fz = confirm.frozen()
    frozen_entries = fz.register().entries
    paper, conf = needed(claims.register().entries, profile), needed(frozen_entries, confirm.PROFILE)
    by_figure = {}
    for fig in dict.fromkeys(e.figure for e in frozen_entries):
        us = needed([e for e in frozen_entries if e.figure == fig], confirm.PROFILE)
        by_figure[fig] = (sum(stored(u) for u in us), len(us))
    return Scoreboard(tuple(judged), units_committed=sum(stored(u) for u in paper), units_needed=len(paper),
                      confirmatory=tuple(confirm.judge_confirmatory()),
                      confirm_committed=sum(stored(u) for u in conf), confirm_needed=len(conf),
                      partly_seen={e.id: fz.partly_seen(e) for e in frozen_entries if fz.partly_seen(e)},
                      confirm_units=by_figure, power=tuple(power.power_rows(judged, pooled)))


# --------------------------------------------------------------------------- the front page's figure

#: The committed SmolLM2 survey the hero figure reads (``sinks-real-decoder``'s stored parameters).
SMOLLM_SURVEY = {"batch": 8, "eps": 0.3, "lengths": [64, 128, 256], "n_rollout": 128, "rollout_batch": 4, "seed": 0}


@dataclass(frozen=True)
class HeroData:
    """The three panels of the front page's figure, all computed or read from committed data.

    ``layers``/``first_mass``: the last token's share of context on token 1 after ``t`` layers of
    uniform causal attention over ``n_tokens`` tokens (the rollout of Wu et al.'s Theorem 4.1), and
    ``uniform`` = ``1 / n_tokens``. ``pes``/``gap_mean``/``gap_se``: the first-vs-last gap of Figure 2's
    ``gap_depth``-layer networks at the paper's settings (mean ± SE over ``n_runs``, ``n_networks`` in
    all). ``sink_multiple``: per layer of SmolLM2, token 1's mean attention over its uniform share
    at ``sink_tokens`` tokens (``None`` when the survey is not stored).
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
    n_networks: int
    sink_tokens: int
    sink_multiple: tuple[float, ...] | None
    #: The stored files the panels draw (:func:`posbias.analysis.evidence.data_files`): the networks and the survey
    data: tuple[dict[str, str], ...] = ()


def hero_data(n_tokens: int = 64, max_layers: int = 30, gap_depth: int = 2) -> HeroData:
    """:class:`HeroData` from the theory (computed), Figure 2's committed paper units and the committed
    SmolLM2 survey (:data:`SMOLLM_SURVEY`, natural text at ``n_tokens`` tokens). Nothing trains."""
    mask = make_mask("causal", n_tokens)
    attn = masked_softmax(torch.zeros(n_tokens, n_tokens, dtype=torch.float64), mask)
    p = rollout(attn.expand(max_layers, n_tokens, n_tokens))
    mass = first_position_mass(p)[:, -1]                                        # (layers,) last token
    st = train.stored_campaign("wu-fig-2", "paper", depths=[gap_depth])
    n_test = train.settings("wu-fig-2", "paper")["n_test"]
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
    survey_file = evidence.stored_file("sinks-real-decoder", SMOLLM_SURVEY, version=1) if sink is not None else None
    return HeroData(n_tokens, tuple(range(1, max_layers + 1)), tuple(float(x) for x in mass), 1 / n_tokens,
                    gap_depth, ev.FIG2_PES, tuple(m for m, _ in gaps), tuple(s for _, s in gaps),
                    len(st[f"No PE|{gap_depth}"]), len(units),
                    n_tokens, sink, tuple(evidence.data_files(units + ([survey_file] if survey_file else []))))
