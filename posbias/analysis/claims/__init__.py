"""The claim register and its one judge.

``wu2025.yml`` beside this file lists every claim the book judges about Wu et al.'s trained networks:
the paper's words, where they stand, the setting (campaign and configurations: the only units an
entry may be judged on), the quantity (:mod:`.quantities`) and its direction. :func:`load` reads and
validates it; :func:`judge` judges entries on stored units with the register's judge (Student's t
over runs, then Holm over the entries judged together); :func:`judge_register` judges the whole
register on the committed paper-profile units, the family of the headline counts. Chapters, the
scoreboard and the front page print what these return; none builds claims of its own.
"""
from __future__ import annotations

import dataclasses
import inspect
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Sequence

import torch

from posbias.storage import store
from posbias.measures import stats
from posbias.science.retrieval import readable, standing
from posbias.analysis.claims.quantities import QUANTITIES, Measure

__all__ = ["Entry", "Judge", "Register", "Judged", "NOT_YET", "STATUSES", "load", "register", "judge",
           "distinct_runs", "run_signature", "untrained_accuracy", "mean_se",
           "judge_register", "quotes_missing", "counts", "share_counts", "publish", "normalise", "QUANTITIES"]

REGISTER = Path(__file__).with_name("wu2025.yml")
#: The status of an entry whose units are not all stored.
NOT_YET = "not yet"
STATUSES = ("reproduced", "inconclusive", "contradicted", NOT_YET)
_DIRECTIONS = {"> 0": 1, "< 0": -1, "< margin": -1}
_SETTING_KEYS = ("campaign", "configs", "residual", "training_bias")


@dataclass(frozen=True)
class Entry:
    """One claim of the register (see the header of ``wu2025.yml``)."""

    id: str
    quote: str
    where: str
    setting: dict[str, Any]
    quantity: str
    args: dict[str, Any]
    direction: str
    reading: str = ""
    guard: dict[str, Any] | list[dict[str, Any]] | None = None
    excludes: str | None = None
    source: str | None = None
    paper_value: float | None = None
    margin: float | None = None
    second: dict[str, Any] | None = None

    @property
    def sign(self) -> int:
        """+1 for ``> 0``, -1 for ``< 0`` and for an absence claim ``< margin`` (the quantity is small)."""
        return _DIRECTIONS[self.direction]

    @property
    def guards(self) -> list[dict[str, Any]]:
        """The entry's guards, each ``{quantity, args}`` (a premise that must hold, in the ``> 0`` direction)."""
        if self.guard is None:
            return []
        return [self.guard] if isinstance(self.guard, dict) else list(self.guard)

    @property
    def campaign(self) -> str:
        return self.setting["campaign"]

    @property
    def configs(self) -> list[str]:
        return list(self.setting["configs"])

    @property
    def figure(self) -> str:
        """``"Figure 2"``, ``"Figure 6"``, ... from :attr:`where` (its last ``Figure N``)."""
        m = re.findall(r"Figure (\d+)", self.where)
        return f"Figure {m[-1]}" if m else self.where


@dataclass(frozen=True)
class Judge:
    """The judge written at the top of the register (after the committed networks were read: exploratory)."""

    level: float
    share: float
    other_shares: tuple[float, ...]
    text: dict[str, str]
    shortcut_margin: float = 0.1
    #: ``judge.absent``'s (margin, one-sided level), or None (:mod:`posbias.analysis.claims.power`)
    absent: tuple[float, float] | None = None


@dataclass(frozen=True)
class Register:
    judge: Judge
    entries: tuple[Entry, ...]

    def select(self, *, campaign: str | None = None, figure: str | None = None) -> list[Entry]:
        """The entries of one campaign and/or one figure, in register order."""
        return [e for e in self.entries if (campaign is None or e.campaign == campaign)
                and (figure is None or e.figure == figure)]

    def figures(self) -> list[str]:
        return list(dict.fromkeys(e.figure for e in self.entries))


def normalise(text: str) -> str:
    """Whitespace collapsed to single spaces and stripped: how quotes are compared with the paper."""
    return re.sub(r"\s+", " ", text).strip()


def quotes_missing(reg: Register, paper_text: str) -> list[str]:
    """The ids of the entries whose quote is not in ``paper_text`` (both :func:`normalise`-d)."""
    return [e.id for e in reg.entries if normalise(e.quote) not in normalise(paper_text)]


def _paper_units(campaign: str, known: dict[str, dict[str, list]] | None = None) -> dict[str, list]:
    """``campaign``'s paper-profile units by configuration, computed once per :func:`load` (``known``)."""
    from posbias.training.campaigns import units_of

    if known is None:
        return units_of(campaign, "paper", {})
    if campaign not in known:
        known[campaign] = units_of(campaign, "paper", {})      # the paper's configurations
    return known[campaign]


def _measurement_key(e: Entry, known: dict[str, dict[str, list]] | None = None) -> str:
    """What an entry measures, independent of how its campaign names things: the quantity, and its
    args with every configuration label replaced by the store keys of its paper-profile units."""
    from posbias.training.units import unit_key

    groups = _paper_units(e.campaign, known)
    missing = [c for c in e.configs if c not in groups]
    if missing:
        raise ValueError(f"claim {e.id}: configurations {missing} are not in campaign {e.campaign!r}; it has "
                         f"{sorted(groups)}")

    def canon(v: Any) -> Any:
        if isinstance(v, str) and v in groups:
            return [unit_key(u) for u in groups[v]]
        return [canon(x) for x in v] if isinstance(v, list) else v

    return json.dumps([e.quantity, {k: canon(v) for k, v in sorted(e.args.items())},
                       sorted(unit_key(u) for c in e.configs for u in groups[c])], sort_keys=True)


def _check_setting(e: Entry, known: dict[str, dict[str, list]] | None = None) -> None:
    """The descriptive fields of a setting agree with the units of its configurations."""
    groups = _paper_units(e.campaign, known)
    for c in e.configs:
        u = groups[c][0]
        if u.config.residual != e.setting["residual"]:
            raise ValueError(f"claim {e.id}: setting says residual={e.setting['residual']}, but {c} has "
                             f"residual={u.config.residual}")
        biased = u.target_slots is not None
        if biased != (e.setting["training_bias"] != "none"):
            raise ValueError(f"claim {e.id}: setting says training bias {e.setting['training_bias']!r}, but {c} "
                             f"trains with target slots {u.target_slots}")


def load(path: Path | str = REGISTER, *, text: str | None = None) -> Register:
    """Read and validate a register (the file ``path``, or its ``text`` when given). Refuses
    (``ValueError``): an unknown quantity or direction, args the quantity does not take, a
    configuration the campaign lacks, a setting that disagrees with its units, two entries with one
    id, and two entries with the same quantity and args on the same units
    (one measurement counted twice)."""
    import yaml

    raw = yaml.safe_load(Path(path).read_text() if text is None else text)
    j = raw["judge"]
    judge_ = Judge(float(j["level"]), float(j["convergence"]["share"]),
                   tuple(float(x) for x in j["convergence"]["others"]),
                   {k: str(v) for k, v in j.items() if isinstance(v, str)}
                   | {"share_grounds": j["convergence"]["grounds"], "shortcut": j["shortcut"]["rule"]}
                   | ({"absent": j["absent"]["rule"], "absent_grounds": j["absent"]["grounds"]}
                      if "absent" in j else {}),
                   float(j["shortcut"]["margin"]),
                   (float(j["absent"]["margin"]), float(j["absent"]["level"])) if "absent" in j else None)
    entries, seen_ids, seen_quantities = [], set(), {}
    known: dict[str, dict[str, list]] = {}             # each campaign's units, computed once per load
    for item in raw["claims"]:
        unknown = set(item) - {f.name for f in dataclasses.fields(Entry)}
        if unknown:
            raise ValueError(f"claim {item.get('id')}: unknown fields {sorted(unknown)}")
        e = Entry(**item)
        if e.id in seen_ids:
            raise ValueError(f"claim {e.id}: two entries with this id")
        seen_ids.add(e.id)
        if set(e.setting) != set(_SETTING_KEYS):
            raise ValueError(f"claim {e.id}: a setting has exactly {', '.join(_SETTING_KEYS)}")
        if e.direction not in _DIRECTIONS:
            raise ValueError(f"claim {e.id}: direction {e.direction!r}; give one of {list(_DIRECTIONS)}")
        if (e.direction == "< margin") != (e.margin is not None):
            raise ValueError(f"claim {e.id}: an absence claim (direction '< margin') and only it declares "
                             "its equivalence 'margin'")
        if e.margin is not None and not e.margin > 0:
            raise ValueError(f"claim {e.id}: the margin must be positive, got {e.margin}")
        extra = [(g["quantity"], g["args"]) for g in e.guards] + ([(e.second["quantity"], e.second["args"])]
                                                                   if e.second else [])
        if e.second and not e.second.get("label"):
            raise ValueError(f"claim {e.id}: a second reading needs a 'label' naming it")
        if e.second and e.second.get("direction", e.direction) not in _DIRECTIONS:
            raise ValueError(f"claim {e.id}: the second reading's direction {e.second['direction']!r}; give one "
                             f"of {list(_DIRECTIONS)}")
        for q, args in [(e.quantity, e.args)] + extra:
            if q not in QUANTITIES:
                raise ValueError(f"claim {e.id}: unknown quantity {q!r}; quantities: {', '.join(QUANTITIES)}")
            params = set(inspect.signature(QUANTITIES[q]).parameters) - {"units"}
            if set(args) != params:
                raise ValueError(f"claim {e.id}: {q} takes {sorted(params)}, got {sorted(args)}")
        if e.guard and not e.excludes:
            raise ValueError(f"claim {e.id}: a guard needs 'excludes', saying what it rules out")
        key = _measurement_key(e, known)   # first: it names a configuration the campaign lacks
        _check_setting(e, known)
        if key in seen_quantities:
            raise ValueError(f"claims {seen_quantities[key]} and {e.id}: the same quantity ({e.quantity}) on the "
                             "same units; one measurement is one claim")
        seen_quantities[key] = e.id
        entries.append(e)
    return Register(judge_, tuple(entries))


_CACHE: dict[str, Register] = {}


def register() -> Register:
    """The book's register (``wu2025.yml``), loaded once per process."""
    if "wu2025" not in _CACHE:
        _CACHE["wu2025"] = load()
    return _CACHE["wu2025"]


# --------------------------------------------------------------------------- the judge

@dataclass
class Judged:
    """One entry judged: ``status`` by Student's t alone, ``holm`` after Holm's correction over the
    entries judged together (both :data:`NOT_YET` without units). ``n_runs``: the runs the test
    counts, one per *distinct* run (``n_seeds`` seeds were stored; runs with identical results are one
    run, :func:`distinct_runs`). ``guards``: ``(mean, se, status)`` of each guard; ``second``: the
    second reading's ``(mean, se, status)``; ``baseline``: the contrast under uniform attention.
    ``share``: the lowest, over the entry's configurations that can reach the ceiling, of the seed-mean
    final IC accuracy over the setting's ceiling (``None`` when none can); ``converged``: ``share >=
    judge.share``; ``cannot_reach``: the configurations left out of it and why; ``untrained``: per
    configuration trained with a position bias, the mean accuracy at the slots its training never
    rewarded; ``shortcut``: those of them within the register's margin of chance; ``copies``: per
    configuration, how many of its runs repeat an earlier run's stored results exactly."""

    entry: Entry
    status: str
    holm: str
    mean: float | None = None
    se: float | None = None
    crit: float | None = None
    p: float | None = None
    n_runs: int = 0
    guard_mean: float | None = None
    guard_se: float | None = None
    share: float | None = None
    converged: bool | None = None
    still_rising: bool | None = None
    ceiling: float | None = None
    units_missing: list[str] = field(default_factory=list)
    n_seeds: int = 0
    guards: list[tuple[float, float, str]] = field(default_factory=list)
    second: tuple[float, float, str] | None = None
    baseline: float | None = None
    cannot_reach: dict[str, str] = field(default_factory=dict)
    untrained: dict[str, float] = field(default_factory=dict)
    shortcut: list[str] = field(default_factory=list)
    main_status: str | None = None
    copies: dict[str, int] = field(default_factory=dict)
    #: per configuration, how many of its networks read ``retrieves``, ``between``, ``ignores the query``
    #: (:func:`posbias.science.retrieval.reading`; exploratory, descriptive: no verdict depends on it)
    retrieval: dict[str, dict[str, int]] = field(default_factory=dict)
    #: per configuration, how many of its networks trained partly from uncommitted code (descriptive; issue 95)
    uncommitted: dict[str, int] = field(default_factory=dict)

    @property
    def not_retrieving(self) -> list[str]:
        """The entry's configurations most of whose networks do not retrieve
        (:data:`posbias.science.retrieval.READING_RULE`): a claim about retrieval that rests on them measures the
        position preferences of another strategy."""
        return [c for c, n in self.retrieval.items() if 2 * n.get("retrieves", 0) <= sum(n.values())]


def run_signature(us: Sequence[dict]) -> str:
    """What a run's stored evaluation says, for telling identical runs apart: every IC accuracy and
    sweep accuracy of its units (one per configuration of the entry)."""
    return json.dumps([[u.get("ic_accuracy"), u.get("sweep_accuracy")] for u in us], sort_keys=True)


def distinct_runs(e: Entry, units: Mapping[str, Sequence[dict]]) -> list[int]:
    """The seeds (indices) of ``e``'s runs that differ from every earlier one: a run is the units of
    one seed across the entry's configurations; runs with identical stored results count once."""
    n = len(units[e.configs[0]])
    seen, keep = set(), []
    for i in range(n):
        sig = run_signature([units[c][i] for c in e.configs])
        if sig not in seen:
            seen.add(sig)
            keep.append(i)
    return keep


def mean_se(m: Measure, keep: Sequence[int] | None = None) -> tuple[float, float, int]:
    """Mean over runs (those of ``keep``, all by default), its standard error (spread over runs plus the
    contrast's binomial bound, ``coef2 / (4 n)``) and the runs counted."""
    v = m.per_seed.to(torch.float64).flatten()
    if keep is not None:
        v = v[list(keep)]
    n = v.numel()
    var = float(v.var(unbiased=True)) if n > 1 else 0.0
    return float(v.mean()), math.sqrt(var / n + m.coef2 / (4 * m.n)), n


def _test(mean: float, se: float, n: int, sign: int, level: float, margin: float | None = None
          ) -> tuple[str, float]:
    """Verdict and two-sided p-value of one quantity: directional (``sign``) against 0, or, for an
    absence claim, ``mean < margin`` (reproduced when the upper bound ``mean + t se`` is below the
    margin, contradicted when the lower bound is above it)."""
    crit = stats.t_critical(n, level)
    if margin is None:
        return stats.verdict(mean, se, sign, crit), stats.p_value(mean, se, n)
    d = margin - mean
    return stats.verdict(d, se, 1, crit), stats.p_value(d, se, n)


def _combine(main: tuple[str, float], guards: Sequence[tuple[str, float]]) -> tuple[str, float]:
    """The guard rule (the register's ``judge.guards``): a guard significantly the other way
    contradicts the claim (at that guard's p-value); otherwise the claim is reproduced only where the
    main quantity and every guard are (intersection-union, at the largest p-value); a main quantity
    significantly the other way stays contradicted; anything else is inconclusive."""
    failed = [p for st, p in guards if st == "contradicted"]
    if main[0] == "contradicted":
        return main
    if failed:
        return "contradicted", min(failed)
    p = max([main[1]] + [p for _, p in guards])
    if main[0] == "reproduced" and all(st == "reproduced" for st, _ in guards):
        return "reproduced", p
    return "inconclusive", p


def _chance() -> float:
    from posbias.science.task import TaskConfig

    return 1.0 / TaskConfig().n_labels


def untrained_accuracy(us: Sequence[dict]) -> float | None:
    """Mean sweep accuracy (over seeds) at the slots the training never rewarded (``None`` when the
    training had no position bias, or the units store no sweep)."""
    slots = us[0]["params"].get("target_slots")
    if slots is None or "sweep_accuracy" not in us[0]:
        return None
    s = torch.stack([torch.as_tensor(u["sweep_accuracy"], dtype=torch.float64) for u in us])
    off = [i for i in range(s.shape[1]) if i not in set(slots)]
    return float(s[:, off].mean())


def _can_reach(label: str, us: Sequence[dict], shortcut: bool) -> str | None:
    """Why a configuration's networks cannot reach the setting's ceiling, or ``None``."""
    p = us[0]["params"]
    if p.get("mask") == "full" and p.get("pe") == "none":
        return "no mask and no PE: the network is blind to order, and the task needs each label bound to its item"
    if shortcut:
        return "a position shortcut: at chance at every slot its training never rewarded"
    return None


def _complete(e: Entry, units: Mapping[str, Sequence[dict | None]]) -> list[str]:
    """The configurations of ``e`` without all their runs in ``units``."""
    return [c for c in e.configs if c not in units or not units[c] or any(u is None for u in units[c])]


def _accuracy(us: Sequence[dict]) -> float:
    names = list(us[0]["ic_accuracy"])
    return float(sum(u["ic_accuracy"][n] for u in us for n in names) / (len(us) * len(names)))


def _ceiling_group(campaign: str, label: str) -> str:
    """Configurations trained on the same data: Figure 4's per training bias, the others per campaign."""
    return f"{campaign}/{label.split('|', 1)[0]}" if campaign == "wu-fig-4" else campaign


def judge(entries: Sequence[Entry], units: Mapping[str, Mapping[str, Sequence[dict | None]]],
          level: float | None = None, share: float | None = None, reg: Register | None = None) -> list[Judged]:
    """Judge ``entries`` on ``units`` (campaign -> label -> one stored result or None per seed), with
    Holm's correction over the entries judged here. ``level``, ``share`` and the shortcut margin are
    those of ``reg``'s judge (the book's register by default; the frozen one for confirmation)."""
    from posbias.training.campaigns import from_uncommitted_code  # at call time, as judge_register's import
    reg_judge = (reg or register()).judge
    level = reg_judge.level if level is None else level
    share = reg_judge.share if share is None else share
    ceilings: dict[str, float] = {}
    for campaign, groups in units.items():
        for label, us in groups.items():
            if us and all(u is not None for u in us):
                g = _ceiling_group(campaign, label)
                ceilings[g] = max(ceilings.get(g, 0.0), _accuracy(us))
    chance = _chance()
    out = []
    for e in entries:
        got = units.get(e.campaign, {})
        missing = _complete(e, got)
        if missing:
            out.append(Judged(e, NOT_YET, NOT_YET, units_missing=missing))
            continue
        keep = distinct_runs(e, got)
        m = QUANTITIES[e.quantity](got, **e.args)
        mean, se, n = mean_se(m, keep)
        crit = stats.t_critical(n, level)
        main = _test(mean, se, n, e.sign, level, e.margin)
        guards, tested = [], []
        for g in e.guards:
            gm, gs, _ = mean_se(QUANTITIES[g["quantity"]](got, **g["args"]), keep)
            gst, gp = _test(gm, gs, n, 1, level)
            guards.append((gm, gs, gst))
            tested.append((gst, gp))
        status, p = _combine(main, tested)
        second = None
        if e.second:                        # its own direction where it names one, else the entry's
            sm, ss, _ = mean_se(QUANTITIES[e.second["quantity"]](got, **e.second["args"]), keep)
            sd = e.second.get("direction", e.direction)
            second = (sm, ss, _test(sm, ss, n, _DIRECTIONS[sd], level, e.margin if sd == "< margin" else None)[0])
        untrained = {c: a for c in e.configs if (a := untrained_accuracy(got[c])) is not None}
        shortcut = [c for c, a in untrained.items() if a < chance + reg_judge.shortcut_margin]
        cannot = {c: why for c in e.configs if (why := _can_reach(c, got[c], c in shortcut))}
        reach = [c for c in e.configs if c not in cannot]
        shares = [_accuracy(got[c]) / ceilings[_ceiling_group(e.campaign, c)] for c in reach]
        used = [u for c in e.configs for u in got[c]]
        out.append(Judged(e, status, status, mean, se, crit, p, n,
                          guards[0][0] if guards else None, guards[0][1] if guards else None,
                          min(shares) if shares else None, (min(shares) >= share) if shares else None,
                          _rising(used), max(ceilings[_ceiling_group(e.campaign, c)] for c in e.configs),
                          n_seeds=len(got[e.configs[0]]), guards=guards, second=second, baseline=m.baseline,
                          cannot_reach=cannot, untrained=untrained, shortcut=shortcut, main_status=main[0],
                          copies={c: len(got[c]) - k for c in e.configs
                                  if (k := len(set(run_signature([u]) for u in got[c]))) < len(got[c])},
                          retrieval={c: standing(got[c])["readings"] for c in e.configs if readable(got[c])},
                          uncommitted={c: k for c in e.configs if (k := sum(map(from_uncommitted_code, got[c])))}))
    tested_ = [j for j in out if j.status != NOT_YET]
    for j, rejected in zip(tested_, stats.holm([j.p for j in tested_], level)):
        j.holm = j.status if rejected and j.status != "inconclusive" else "inconclusive"
    return out


def _rising(units: list[dict]) -> bool:
    from posbias.measures.evaluate import rising  # at call time: evaluate imports the task, the register need not
    return rising(units, int(units[0]["params"]["n_test"]))


_JUDGED: dict[tuple, list[Judged]] = {}


def judge_register(profile: str = "paper") -> list[Judged]:
    """Every entry of the register judged on the stored units of ``profile`` (committed data and the
    user cache; nothing trains), Holm over the whole register: the book's headline. Judged once per
    process and version of the stored data (:func:`posbias.storage.store.data_version`); each call gets its own copy."""
    import copy

    from posbias.training.campaigns import stored_campaign

    key = (profile, store.data_version())
    if key not in _JUDGED:
        reg = register()
        units = {c: stored_campaign(c, profile) for c in dict.fromkeys(e.campaign for e in reg.entries)}
        _JUDGED.clear()
        _JUDGED[key] = judge(reg.entries, units)
    return copy.deepcopy(_JUDGED[key])


def counts(judged: Sequence[Judged], holm: bool = True) -> dict[str, int]:
    """Entries per status (:data:`STATUSES`), by Holm's verdicts (``holm``) or by t alone; ``total``;
    and ``on a shortcut``: the reproduced entries that rest on position-shortcut networks (the
    register's ``judge.shortcut`` rule), counted among the reproduced and named apart; ``without
    retrieval``: the reproduced entries that rest on networks most of which do not retrieve
    (:attr:`Judged.not_retrieving`), likewise."""
    out = {s: sum((j.holm if holm else j.status) == s for j in judged) for s in STATUSES}
    short = sum((j.holm if holm else j.status) == "reproduced" and bool(j.shortcut) for j in judged)
    blind = sum((j.holm if holm else j.status) == "reproduced" and bool(j.not_retrieving) for j in judged)
    return {**out, "total": len(judged), "on a shortcut": short, "without retrieval": blind}


def share_counts(judged: Sequence[Judged], share: float) -> dict[str, int]:
    """At the convergence ``share``: how many judged entries rest on networks below it, per Holm
    verdict (networks that cannot reach the ceiling are left out of the share, :attr:`Judged.cannot_reach`)."""
    low = [j for j in judged if j.status != NOT_YET and j.share is not None and j.share < share]
    return {s: sum(j.holm == s for j in low) for s in STATUSES[:3]} | {"not converged": len(low)}


def publish(judged: Sequence[Judged], *, prefix: str = "") -> None:
    """Glue counts and each entry's verdict for a page: ``<prefix>n_<status>``, ``<prefix>holm_n_<status>`` per
    status, ``<prefix>n_claims``, ``<prefix>n_not_converged``, ``<prefix>n_shortcut``/``holm_n_shortcut`` (reproduced
    on a shortcut), ``<prefix>v_<id>``/``h_<id>`` (verdict, after Holm), ``m_<id>``/``s_<id>`` (mean, SE or nan)."""
    from posbias.storage import report

    for holm, tag in ((False, ""), (True, "holm_")):
        c = counts(judged, holm)
        for s in STATUSES:                      # the total is n_claims (a chapter's n_total is its units)
            report.value(f"{prefix}{tag}n_{s.replace(' ', '_')}", c[s])
        report.value(f"{prefix}{tag}n_shortcut", c["on a shortcut"])
        report.value(f"{prefix}{tag}n_without_retrieval", c["without retrieval"])
    report.value(f"{prefix}n_claims", len(judged))
    report.value(f"{prefix}n_not_converged", sum(bool(j.converged is False) for j in judged))
    for j in judged:
        key = j.entry.id.replace("-", "_")
        report.value(f"{prefix}v_{key}", j.status)
        report.value(f"{prefix}h_{key}", j.holm)
        report.value(f"{prefix}m_{key}", float("nan") if j.mean is None else j.mean)
        report.value(f"{prefix}s_{key}", float("nan") if j.se is None else j.se)

