"""The second confirmation (issue 94, item 4): designed, priced and frozen before any of its networks trains.

Why a second one. The first confirmation (:mod:`posbias.analysis.claims.confirm`, seeds 5-9) tests every seed on one
shared draw of 10,000 sequences per set, so the binomial part of the standard error is a floor that no number
of seeds lowers, and Holm runs over all 85 entries: a single gap must exceed about 0.06 to be decided. This
design (:data:`DESIGN`) changes the three things that set that bar:

* a **primary family** of one entry per sentence of the paper that the register judges: the first entry the
  coverage list names under the sentence (a rule that reads no result). Holm runs over the primary family;
  every other entry is secondary, judged and shown with Holm over the secondary entries apart;
* **test sets of 100,000 sequences** (a fresh draw): the floor falls by ``sqrt(10)``;
* **seeds from power** (:func:`plan`): per primary entry, on the pooled runs of seeds 0-9 (what
  :func:`posbias.analysis.claims.power.power_rows` pools), the fewest runs that decide it at Holm's strictest step over
  the primary family, as a presence (Student's t) or, where the pilot effect lies inside the register's absent
  margin, as an absence (two one-sided tests); per campaign the largest of its entries' numbers, within
  :data:`CAP`. An entry that would need more is declared underpowered in the frozen plan and stays primary.

The plan is priced in core-hours at the committed CPU pace and in GPU-hours at the committed H200 pace
(:func:`price`), and :func:`freeze` writes design, plan, price, the register's SHA-256 and the judge's code
hashes to ``wu2025.confirm2.yml``, committed before the first of its networks trains.
"""
from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Mapping, Sequence

import yaml

from posbias.storage import store
from posbias.measures import stats
from posbias.analysis.claims import NOT_YET, REGISTER, Judged, Register, register
from posbias.analysis.claims.confirm import _code_hashes, _sha
from posbias.analysis.claims.power import power_rows
from posbias.analysis.claims.tables import coverage

__all__ = ["DESIGN", "CAP", "FROZEN2", "primary_entries", "runs_for_absence", "plan", "seeds", "price", "freeze",
           "frozen", "overrides", "networks", "words"]

FROZEN2 = REGISTER.with_name("wu2025.confirm2.yml")
#: The most seeds per configuration the plan asks for; an entry that needs more is underpowered.
CAP = 40
_ROOT = Path(__file__).resolve().parents[3]
#: The design, fixed before its plan is computed (the plan reads pilot effects; the design does not).
DESIGN: dict[str, Any] = {
    "primary": "one entry per sentence of the paper with entries in the register's coverage list: the first it "
               "names under the sentence",
    "secondary": "every other entry of the register; Holm over the secondary entries, apart from the primary family",
    "level": 0.05,
    "correction": "Holm over the primary family",
    "first_seed": 10,
    "steps": 100_000,
    "batch": 128,
    "n_test": 100_000,
    "n_sweep": 2_000,
    "n_sink": 10_000,
    "eval_every": 5_000,
    "test_seed": 20270101,
    "weights": "kept for every network (data/wu-weights, keyed by its unit)",
    "pilot": "seeds 0-9 pooled where the first confirmation's seeds 5-9 exist, else seeds 0-4",
    "seeds_rule": "per primary entry the fewest runs deciding it at level / (primary entries), as a presence or, "
                  "where the pilot effect lies inside the absent margin, as an absence; per campaign the largest "
                  f"of its entries' numbers, at least 5 and at most {CAP}",
    "cpu_pace": "benchmarks/results/2026-12-03-amd-family26-confirm-plan.json",
    "gpu_pace": "benchmarks/results/2026-12-04-nvidia-h200-engines.json",
}


def primary_entries(reg: Register | None = None) -> list[str]:
    """The primary family: per sentence of the coverage list that names entries, the first it names."""
    ids = {e.id for e in (reg or register()).entries}
    return [c["entries"][0] for c in coverage() if c.get("entries") and c["entries"][0] in ids]


def runs_for_absence(mean: float, sd: float, floor: float, margin: float, level: float, cap: int = CAP) -> int | None:
    """The fewest runs ``n`` (2 to ``cap``) at which an effect ``mean`` with spread ``sd`` between runs and binomial
    floor ``floor`` would be shown absent by two one-sided tests at ``level``:
    ``|mean| + t_{1-level, n-1} sqrt(sd^2/n + floor^2) < margin``; ``None`` where no ``n`` up to ``cap`` does."""
    from scipy import stats as st

    def shows(n: int) -> bool:
        return abs(mean) + float(st.t.ppf(1 - level, n - 1)) * (sd * sd / n + floor * floor) ** 0.5 < margin

    if not shows(cap):
        return None
    lo, hi = 2, cap
    while lo < hi:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if shows(mid) else (mid + 1, hi)
    return lo


def plan(judged: Sequence[Judged], stored: Mapping[str, Mapping[str, Any]], reg: Register | None = None
         ) -> list[dict[str, Any]]:
    """One row per primary entry: its campaign, the pilot (pooled runs, effect toward the claim, spread), the floor
    at :data:`DESIGN`'s test size, the runs deciding it as a presence and as an absence at Holm's strictest step
    over the primary family, and the target: ``presence``, ``absence`` (pilot inside the margin) or ``underpowered``."""
    reg = reg or register()
    primary = primary_entries(reg)
    level = DESIGN["level"] / len(primary)
    margin = reg.judge.absent[0]
    pilot = {r["claim"]: r for r in power_rows(judged, stored, reg)}
    by_id = {j.entry.id: j for j in judged}
    rows = []
    for id_ in primary:
        j, p = by_id[id_], pilot.get(id_)
        if p is None or j.holm == NOT_YET:
            rows.append({"claim": id_, "campaign": j.entry.campaign, "target": "no pilot", "runs": None})
            continue
        floor = p["floor"] * (p["n test"] / DESIGN["n_test"]) ** 0.5
        present = stats.seeds_needed(p["effect"], p["sd"], floor, level, CAP)
        small = abs(p["effect"]) < margin if j.entry.margin is None else False
        absent = runs_for_absence(p["effect"], p["sd"], floor, margin, level) if small else None
        target, runs = (("absence", absent) if absent is not None and (present is None or absent <= present)
                        else ("presence", present) if present is not None else ("underpowered", None))
        rows.append({"claim": id_, "campaign": j.entry.campaign, "pilot runs": p["runs pooled"],
                     "effect": round(p["effect"], 6), "sd": round(p["sd"], 6), "floor": round(floor, 6),
                     "runs for presence": present, "runs for absence": absent, "target": target, "runs": runs})
    return rows


def seeds(rows: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Seeds per campaign: the largest ``runs`` of its primary entries (underpowered ones ask for :data:`CAP`),
    at least 5."""
    out: dict[str, int] = {}
    for r in rows:
        n = CAP if r["target"] == "underpowered" else (r["runs"] or 5)
        out[r["campaign"]] = max(out.get(r["campaign"], 5), min(n, CAP))
    return out


def price(n_seeds: Mapping[str, int]) -> list[dict[str, Any]]:
    """Per campaign: its configurations, seeds, networks, and the hours of their training at the committed paces:
    core-hours (one thread, the campaign's packing, ``DESIGN['cpu_pace']``) and H200 GPU-hours (the campaign's
    packing with its data making, ``DESIGN['gpu_pace']``), each times the evaluations' share (:func:`_eval_share`)."""
    cpu = json.loads((_ROOT / DESIGN["cpu_pace"]).read_text())["depths"]
    gpu = json.loads((_ROOT / DESIGN["gpu_pace"]).read_text())["engines"]
    rows = []
    for campaign, n in n_seeds.items():
        groups = units_of_design(campaign, 1)
        depths = [us[0].depth for us in groups.values()]
        core = sum(DESIGN["steps"] * cpu[str(d)]["ensemble_step_s"] / cpu[str(d)]["members"] for d in depths)
        g = [gpu[str(us[0].depth)]["rope x5" if us[0].config.pe == "rope" else "none x10"] for us in groups.values()]
        gpu_s = sum(DESIGN["steps"] * (x["ms_per_member_step"]["v2"] + x["data_ms_per_member_step"]) / 1000 for x in g)
        k = 1 + _eval_share()
        rows.append({"campaign": campaign, "configurations": len(groups), "seeds": n, "networks": n * len(groups),
                     "core-hours": round(n * core * k / 3600, 1), "GPU-hours (H200)": round(n * gpu_s * k / 3600, 2)})
    return rows


def _eval_share() -> float:
    """The evaluations' cost as a share of the training steps', counted in sequences through the network: a
    training step passes ``batch`` sequences forward and back (about 3 forward passes each); every ``eval_every``
    steps and at the end, six IC sets of ``n_test`` and eight sweep sets of ``n_sweep`` pass forward once."""
    d = DESIGN
    evals = d["steps"] // d["eval_every"] + 1
    return evals * (6 * d["n_test"] + 8 * d["n_sweep"]) / (3 * d["batch"] * d["steps"])


def freeze(judged: Sequence[Judged], stored: Mapping[str, Mapping[str, Any]], path: Path = FROZEN2, *,
           now: datetime | None = None) -> dict[str, Any]:
    """Write the design, its plan, seeds and price, the register's SHA-256 and the judge's code hashes to ``path``
    (atomically); refuses to overwrite a frozen design."""
    if path.exists():
        raise FileExistsError(f"{path} exists: a frozen design is never rewritten; a new design is a new file")
    rows = plan(judged, stored)
    n = seeds(rows)
    when = (now or datetime.now(timezone.utc)).replace(microsecond=0)
    doc = {"frozen_at": when.isoformat(), "register_sha256": _sha(REGISTER.read_text()), "code": _code_hashes(),
           "design": DESIGN, "primary": primary_entries(), "plan": rows, "seeds": n, "price": price(n)}
    store.atomic_write_text(path, "# The second confirmation (issue 94), frozen before any of its networks trains. "
                                  "Never edit this file.\n" + yaml.safe_dump(doc, sort_keys=False, width=120))
    return doc


def frozen(path: Path = FROZEN2) -> dict[str, Any]:
    """The frozen design as written by :func:`freeze`."""
    return yaml.safe_load(Path(path).read_text())


def overrides(campaign: str, n_seeds: int) -> dict[str, Any]:
    """The chapter parameters that train ``campaign``'s networks of this design with ``n_seeds`` seeds (from
    :data:`DESIGN`'s first seed): ``units_of(campaign, "paper", overrides(...))`` lists them."""
    d = DESIGN
    return {"seeds": list(range(d["first_seed"], d["first_seed"] + n_seeds)), "steps": d["steps"],
            "eval_every": d["eval_every"], "n_test": d["n_test"], "n_sweep": d["n_sweep"], "n_sink": d["n_sink"],
            "test_seed": d["test_seed"]}


def networks(fz: Mapping[str, Any] | None = None) -> tuple[int, int]:
    """``(committed, needed)``: the frozen design's networks stored so far, of all it needs."""
    from posbias.training.campaigns import distinct, stored

    fz = fz or frozen()
    us = [u for c, n in fz["seeds"].items() for u in distinct(units_of_design(c, n))]
    return sum(stored(u) for u in us), len(us)


def units_of_design(campaign: str, n_seeds: int) -> dict[str, list]:
    """The design's units of ``campaign`` with ``n_seeds`` seeds, by configuration label."""
    from posbias.training.campaigns import units_of

    return units_of(campaign, "paper", overrides(campaign, n_seeds))


def words(fz: Mapping[str, Any] | None = None) -> str:
    """The frozen design in one sentence for the pages: family, test size, seeds per figure, networks, hours."""
    fz = fz or frozen()
    d, price_ = fz["design"], fz["price"]
    have, need = networks(fz)
    per = ", ".join(f"{n} seeds for Figure {c.rsplit('-', 1)[-1]}" for c, n in fz["seeds"].items())
    return (f"a primary family of {len(fz['primary'])} entries, one per sentence of the paper, Holm over them; "
            f"{d['n_test']:,} sequences per test set on a fresh draw, so the floor is "
            f"{(d['n_test'] / 10_000) ** 0.5:.1f} times lower than at 10,000; seeds from "
            f"{d['first_seed']} on ({per}); {need} networks, {sum(r['core-hours'] for r in price_):.0f} core-hours "
            f"or {sum(r['GPU-hours (H200)'] for r in price_):.0f} H200 GPU-hours; {have} of them trained so far")
