"""Work done once (issue 97 item 4): a stored record verified once per process and version, the register
judged once per version of the stored data, the frozen register loaded once, a chapter's units computed
a bounded number of times."""
import functools
import os
import sys

import pytest

from posbias.storage import store


def _count(monkeypatch, module, name):
    calls = []
    f = getattr(module, name)

    @functools.wraps(f)
    def counted(*a, **k):
        calls.append(1)
        return f(*a, **k)

    monkeypatch.setattr(module, name, counted)
    return calls


@pytest.mark.parametrize("where", ["data", "cache"])
def test_a_record_is_verified_once_per_version_and_each_read_is_its_own(empty_store, monkeypatch, where):
    if where == "data":
        monkeypatch.setenv("POSBIAS_WRITE_DATA", "1")
    store.cached("exp", {"n": 1}, lambda: {"v": [1.0, 2.0]})
    monkeypatch.delenv("POSBIAS_WRITE_DATA", raising=False)
    hashed = _count(monkeypatch, store, "result_hash")
    first = store.lookup("exp", {"n": 1})
    first["v"].append(99.0)                          # a reader's change never reaches the next reader
    assert [store.lookup("exp", {"n": 1}) for _ in range(5)] == [{"v": [1.0, 2.0]}] * 5
    assert len(hashed) <= 1
    # a new version of the file (rewritten, another size) is verified again, and a damaged one refused
    path = next((empty_store / where / "exp").glob("*.json"))
    text = path.read_text()
    path.write_text(text.replace('"v":[1.0,2.0]', '"v":[1.0,2.5]').replace('"v": [1.0, 2.0]', '"v": [1.0, 2.5]'))
    if where == "data":
        with pytest.raises(store.DataError):
            store.lookup("exp", {"n": 1})
    else:
        with pytest.warns(UserWarning):
            assert store.lookup("exp", {"n": 1}) is None


def test_the_register_is_judged_once_per_version_of_the_stored_data(monkeypatch):
    from posbias.analysis import claims

    judged = _count(monkeypatch, claims, "judge")
    monkeypatch.setattr(claims, "_JUDGED", {})
    a = claims.judge_register()
    a[0].status = "edited by a reader"
    b = claims.judge_register()
    assert len(judged) == 1 and b[0].status != "edited by a reader"
    store.changed()                                   # a record written, or the library patched
    claims.judge_register()
    assert len(judged) == 2


def test_the_frozen_register_is_loaded_once():
    from posbias.analysis import claims
    from posbias.analysis.claims import confirm

    fz = confirm.frozen()
    confirm._LOADED.pop(fz.sha256, None)
    loads = []
    orig = claims.load
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(confirm, "load", lambda *a, **k: loads.append(1) or orig(*a, **k))
        r1, r2 = fz.register(), confirm.frozen().register()
    assert r1 is r2 and len(loads) == 1


def test_a_smoke_run_of_figure_2_computes_its_units_at_most_50_times(monkeypatch, tmp_path):
    """One in-process smoke execution of wu-fig-2 (its page, the register, the scoreboard it quotes)."""
    from posbias.book.mutation import execute_chapter, failed_checks
    from posbias.training import campaigns

    monkeypatch.setenv("POSBIAS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    calls = []
    orig = campaigns.units_of

    def counted(*a, **k):
        calls.append(a[:2])
        return orig(*a, **k)

    for m in list(sys.modules.values()):
        if m is not None and getattr(m, "__name__", "").startswith("posbias") and getattr(m, "units_of", None) is orig:
            monkeypatch.setattr(m, "units_of", counted)
    assert failed_checks(execute_chapter("wu-fig-2", "smoke", {})) == []
    assert 0 < len(calls) <= 50, f"units_of called {len(calls)} times"
    assert os.environ["POSBIAS_CACHE"] == str(tmp_path / "cache")
