"""The second confirmation's design (posbias/analysis/claims/confirm2.py): its primary family, its power rule, its
price, and the frozen file, written before any of its networks trains."""
import pytest
from scipy import stats as st

from posbias.analysis import claims
from posbias.analysis.claims import confirm2, power
from posbias.analysis.claims.tables import coverage
from posbias.training.campaigns import stored_campaign, units_of


@pytest.fixture(scope="module")
def judged_and_stored():
    judged = claims.judge_register()
    camps = dict.fromkeys(e.campaign for e in claims.register().entries)
    return judged, {p: {c: stored_campaign(c, p) for c in camps} for p in power.PROFILES}


def test_the_primary_family_is_the_first_entry_of_each_sentence():
    prim = confirm2.primary_entries()
    sentences = [c for c in coverage() if c.get("entries")]
    assert prim == [c["entries"][0] for c in sentences] and len(set(prim)) == len(prim) == len(sentences)


def test_runs_for_absence_is_the_first_n_by_brute_force():
    for mean, sd, floor, level in ((0.018, 0.055, 0.0032, 0.05 / 16), (0.002, 0.001, 0.003, 0.05 / 16),
                                   (-0.02, 0.03, 0.001, 0.05)):
        brute = next((n for n in range(2, confirm2.CAP + 1)
                      if abs(mean) + st.t.ppf(1 - level, n - 1) * (sd ** 2 / n + floor ** 2) ** 0.5 < 0.05), None)
        assert confirm2.runs_for_absence(mean, sd, floor, 0.05, level) == brute
    assert confirm2.runs_for_absence(0.049, 0.01, 0.003, 0.05, 0.05) is None      # the floor alone reaches the margin


def test_the_plan_decides_each_primary_entry_the_cheaper_way(judged_and_stored):
    judged, stored = judged_and_stored
    rows = confirm2.plan(judged, stored)
    margin = claims.register().judge.absent[0]
    assert [r["claim"] for r in rows] == confirm2.primary_entries()
    for r in rows:
        if r["target"] == "absence":
            assert abs(r["effect"]) < margin and r["runs"] == r["runs for absence"]
            assert r["runs for presence"] is None or r["runs"] <= r["runs for presence"]
        elif r["target"] == "presence":
            assert r["runs"] == r["runs for presence"] and (r["runs for absence"] is None
                                                          or r["runs for absence"] > r["runs"])
        assert r["floor"] < 0.0035                            # 100,000 sequences: the floor is a third of the pilot's
    n = confirm2.seeds(rows)
    for c, k in n.items():
        asked = [r["runs"] or confirm2.CAP for r in rows if r["campaign"] == c]
        assert k == max(5, min(max(asked), confirm2.CAP))


def test_the_designs_units_are_fresh_seeds_on_a_fresh_large_draw():
    units = units_of("wu-fig-2", "paper", confirm2.overrides("wu-fig-2", 7))
    us = [u for g in units.values() for u in g]
    assert len(us) == 9 * 7 and min(u.seed for u in us) == confirm2.DESIGN["first_seed"] == 10
    assert {u.n_test for u in us} == {100_000} and {u.test_seed for u in us} == {confirm2.DESIGN["test_seed"]}
    for p in ("paper", "confirm"):                   # no seed of the design was ever trained for an earlier column
        assert max(u.seed for g in units_of("wu-fig-2", p, {}).values() for u in g) < 10


def test_the_price_counts_every_network_and_the_evaluations():
    d = confirm2.DESIGN
    share = confirm2._eval_share()
    assert share == pytest.approx(21 * (6 * d["n_test"] + 8 * d["n_sweep"]) / (3 * 128 * 100_000))
    (row,) = confirm2.price({"wu-fig-6": 5})
    assert row["networks"] == 5 * 7 and row["core-hours"] > 0 and row["GPU-hours (H200)"] > 0
    (twice,) = confirm2.price({"wu-fig-6": 10})
    assert twice["core-hours"] == pytest.approx(2 * row["core-hours"], abs=0.1)


def test_the_frozen_design_is_committed_and_never_rewritten(tmp_path, judged_and_stored):
    fz = confirm2.frozen()
    assert fz["design"] == confirm2.DESIGN and fz["primary"] == confirm2.primary_entries()
    assert fz["seeds"] == confirm2.seeds(fz["plan"]) and len(fz["register_sha256"]) == 64
    assert {r["campaign"] for r in fz["price"]} == set(fz["seeds"])
    with pytest.raises(FileExistsError, match="never rewritten"):
        confirm2.freeze(*judged_and_stored, path=confirm2.FROZEN2)
    doc = confirm2.freeze(*judged_and_stored, path=tmp_path / "c2.yml")
    assert confirm2.frozen(tmp_path / "c2.yml")["plan"] == doc["plan"]


def test_the_designs_words_count_its_networks_and_hours():
    fz = confirm2.frozen()
    have, need = confirm2.networks(fz)
    assert need == sum(r["networks"] for r in fz["price"]) and 0 <= have <= need
    w = confirm2.words(fz)
    assert f"{need} networks" in w and f"{len(fz['primary'])} entries" in w and "3.2 times lower" in w
