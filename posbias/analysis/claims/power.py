"""Two readings beside the register's verdicts (issue 94), both exploratory and both ruled by the register's
``judge.absent`` and ``judge.power`` (written before they were applied):

* **absent**: a directional entry that is neither reproduced nor contradicted after Holm is *absent* where two
  one-sided tests (:func:`posbias.measures.stats.tost`) put its quantity inside the register's margin, else it stays
  *inconclusive*. "Inconclusive" then means only "these runs cannot tell".
* **power**: per entry, on the pooled runs of every committed profile at the paper's settings, how many runs
  the pooled effect would need to pass the register's test at Holm's strictest step, and whether any number
  can (the binomial bound of test sets that every run shares does not shrink with runs).
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from posbias.measures import stats
from posbias.analysis.claims import NOT_YET, Entry, Judged, Register, distinct_runs, mean_se, register
from posbias.analysis.claims.quantities import QUANTITIES

__all__ = ["VERDICTS", "absent", "verdicts", "absent_counts", "pooled_units", "power_rows", "PROFILES"]

#: The exploratory verdicts with the fourth: reproduced, contradicted, absent, inconclusive, not yet.
VERDICTS = ("reproduced", "contradicted", "absent", "inconclusive", NOT_YET)
#: The profiles at the paper's settings whose runs the power column pools (seeds 0-4, then 5-9).
PROFILES = ("paper", "confirm")


def absent(j: Judged, reg: Register | None = None) -> dict[str, Any] | None:
    """The two one-sided tests of ``j``'s first quantity at the register's absent margin and level
    (:func:`posbias.measures.stats.tost` on its mean, SE and distinct runs), or ``None`` where the rule does not apply:
    no ``judge.absent`` in the register, an absence claim, an entry not yet judged, or one that is
    reproduced or contradicted after Holm."""
    rule = (reg or register()).judge.absent
    if rule is None or j.entry.margin is not None or j.holm in ("reproduced", "contradicted", NOT_YET):
        return None
    margin, level = rule
    return stats.tost(j.mean, j.se, j.n_runs, margin, level)


def verdicts(judged: Sequence[Judged], reg: Register | None = None) -> list[str]:
    """Each entry's exploratory verdict with the fourth: its verdict after Holm, ``absent`` where
    :func:`absent` says so, else what Holm gave (``inconclusive``)."""
    out = []
    for j in judged:
        a = absent(j, reg)
        out.append("absent" if a is not None and a["absent"] else j.holm)
    return out


def absent_counts(judged: Sequence[Judged], reg: Register | None = None) -> dict[str, int]:
    """Entries per verdict of :data:`VERDICTS`, ``total``, and ``absent after Holm``: how many of the absent
    entries stay absent with Holm's correction over the entries tested for absence (descriptive: the rule
    itself is not corrected)."""
    vs = verdicts(judged, reg)
    tested = [a for j in judged if (a := absent(j, reg)) is not None]
    level = (reg or register()).judge.absent[1] if tested else 0.05
    kept = stats.holm([a["p"] for a in tested], level) if tested else []
    return {v: vs.count(v) for v in VERDICTS} | {"total": len(vs), "absent after Holm": sum(kept)}


def pooled_units(e: Entry, stored: Mapping[str, Mapping[str, Sequence[dict | None]]]
                 ) -> dict[str, list[dict]] | None:
    """The runs of ``e``'s configurations pooled over profiles: ``stored`` maps a profile to its stored campaign
    (label -> one result or None per seed); a profile counts only where every configuration of ``e`` has all
    its runs in it. ``None`` where no profile does."""
    out: dict[str, list[dict]] = {c: [] for c in e.configs}
    for profile in stored.values():
        if all(c in profile and profile[c] and all(u is not None for u in profile[c]) for c in e.configs):
            for c in e.configs:
                out[c] += list(profile[c])
    return out if out[e.configs[0]] else None


def power_rows(judged: Sequence[Judged], stored: Mapping[str, Mapping[str, Mapping[str, Sequence[dict | None]]]],
               reg: Register | None = None, n_max: int = 1000) -> list[dict[str, Any]]:
    """One row per judged entry (``judged``: the register judged, which fixes Holm's family ``m``): its
    pooled runs (``stored``: profile -> campaign -> label -> results, :func:`pooled_units`), the pooled
    effect signed toward the claim, the spread between runs, the floor (the binomial bound, which runs do not
    shrink), the runs its effect would need at Holm's strictest step (``level / m``;
    :func:`posbias.measures.stats.seeds_needed`) and whether the floor binds. Absence claims are tested against their
    margin (``margin - mean``)."""
    reg = reg or register()
    m = sum(j.holm != NOT_YET for j in judged)
    level = reg.judge.level / max(m, 1)
    rows = []
    for j in judged:
        e = j.entry
        us = pooled_units(e, {p: c.get(e.campaign, {}) for p, c in stored.items()})
        if us is None or j.holm == NOT_YET:
            continue
        meas = QUANTITIES[e.quantity](us, **e.args)
        keep = distinct_runs(e, us)
        mean, se, n = mean_se(meas, keep)
        effect = (e.margin - mean) if e.margin is not None else e.sign * mean
        v = meas.per_seed.double().flatten()[list(keep)]
        sd = float(v.std(unbiased=True)) if n > 1 else 0.0
        floor = (meas.coef2 / (4 * meas.n)) ** 0.5
        need = stats.seeds_needed(effect, sd, floor, level, n_max)
        binds = stats.floor_binds(effect, floor, level)
        rows.append({"claim": e.id, "figure": e.figure, "runs pooled": n, "effect": effect, "se": se, "sd": sd,
                     "floor": floor, "n test": meas.n, "runs needed": need, "floor binds": binds,
                     "decided now": n >= need if need is not None else False})
    return rows
