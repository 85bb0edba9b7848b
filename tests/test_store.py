"""The cache never lies: atomic writes, hash checks, locks, committed files never overwritten."""
import errno
import json
import multiprocessing as mp
import os
import stat
import time
import warnings

import pytest

from posbias.storage import parking, store
from posbias.book import checkdata


def test_key_is_canonical():
    assert store.key_of("e", {"a": 1, "b": [1, 2]}, 1) == store.key_of("e", {"b": [1, 2], "a": 1}, "1")
    assert store.key_of("e", {"a": 1}, 1) != store.key_of("e", {"a": 1}, 2)
    assert store.key_of("e", {"a": 1}, 1) != store.key_of("e", {"a": 2}, 1)


def test_compute_once_then_read(empty_store):
    calls = []

    def compute():
        calls.append(1)
        return {"x": [1.0, 2.0]}

    assert store.cached("exp", {"n": 3}, compute) == {"x": [1.0, 2.0]}
    assert store.cached("exp", {"n": 3}, compute) == {"x": [1.0, 2.0]}
    assert len(calls) == 1
    path = next((empty_store / "cache" / "exp").glob("*.json"))
    rec = json.loads(path.read_text())
    prov = rec["provenance"]
    for k in ("git", "packages", "python", "device", "started", "wall_seconds", "seeds"):
        assert k in prov


@pytest.mark.parametrize("damage", ["truncate", "edit"])
def test_damaged_cache_file_is_recomputed_not_read(empty_store, damage):
    store.cached("exp", {"n": 1}, lambda: {"v": 1.0})
    path = next((empty_store / "cache" / "exp").glob("*.json"))
    text = path.read_text()
    path.write_text(text[: len(text) // 2] if damage == "truncate" else text.replace('"v":1.0', '"v":2.0'))
    with pytest.warns(UserWarning, match="differs from the hash stored with it"):
        assert store.cached("exp", {"n": 1}, lambda: {"v": 1.0}) == {"v": 1.0}
    assert json.loads(path.read_text())["result"] == {"v": 1.0}
    path.with_suffix(".sha256").unlink()        # without its hash (an older entry), the result hash catches it
    path.write_text(text[: len(text) // 2] if damage == "truncate" else text.replace('"v":1.0', '"v":2.0'))
    with pytest.warns(UserWarning, match="damaged or edited"):
        assert store.cached("exp", {"n": 1}, lambda: {"v": 1.0}) == {"v": 1.0}


def test_write_data_updates_manifest_and_commited_file_is_preferred(empty_store, monkeypatch):
    monkeypatch.setenv("POSBIAS_WRITE_DATA", "1")
    store.cached("exp", {"n": 2}, lambda: {"v": 5})
    manifest = json.loads((empty_store / "data" / "manifest.json").read_text())
    (name, digest), = manifest.items()
    assert name.startswith("exp/") and len(digest) == 64
    monkeypatch.delenv("POSBIAS_WRITE_DATA")
    assert store.cached("exp", {"n": 2}, lambda: pytest.fail("must read the committed file")) == {"v": 5}
    assert checkdata.verify_data(log=lambda *a: None) == []


def test_write_data_promotes_a_cached_result_unchanged(empty_store, monkeypatch):
    """A long run computed into the user cache is committed later without computing it again."""
    store.cached("exp", {"n": 4}, lambda: {"v": 7.0}, seeds=[3])
    cached = next((empty_store / "cache" / "exp").glob("*.json"))
    monkeypatch.setenv("POSBIAS_WRITE_DATA", "1")
    assert store.cached("exp", {"n": 4}, lambda: pytest.fail("must promote, not compute")) == {"v": 7.0}
    committed = empty_store / "data" / "exp" / cached.name
    assert json.loads(committed.read_text()) == json.loads(cached.read_text())      # provenance kept
    assert json.loads((empty_store / "data" / "manifest.json").read_text()) == {
        f"exp/{cached.name}": store.sha256_file(committed)}
    assert checkdata.verify_data(log=lambda *a: None) == []


def _committed(empty_store, monkeypatch, n=2):
    monkeypatch.setenv("POSBIAS_WRITE_DATA", "1")
    store.cached("exp", {"n": n}, lambda: {"v": 5})
    monkeypatch.delenv("POSBIAS_WRITE_DATA")
    return empty_store / "data" / store.result_name("exp", {"n": n})


@pytest.mark.parametrize("damage", ["edit", "truncate", "delete", "unlist"])
def test_a_committed_file_that_does_not_verify_is_an_error_naming_it_and_the_fix(empty_store, monkeypatch, damage):
    """Edited, truncated, missing (still listed) or unlisted: cached and lookup raise DataError naming
    the file and `git checkout`, never recompute around it nor call it "not stored"; data/ is untouched."""
    committed = _committed(empty_store, monkeypatch)
    name = str(committed.relative_to(empty_store / "data"))
    if damage == "edit":
        committed.write_text(committed.read_text().replace('"v":5', '"v":6'))
    elif damage == "truncate":
        committed.write_bytes(committed.read_bytes()[:40])
    elif damage == "delete":
        committed.unlink()
    else:
        store._set_manifest(name, None)
    before = committed.read_bytes() if committed.exists() else None
    for call in (lambda: store.cached("exp", {"n": 2}, lambda: pytest.fail("must not recompute")),
                 lambda: store.lookup("exp", {"n": 2})):
        with pytest.raises(store.DataError, match=f"data/{name}.*git checkout -- data/{name}"):
            call()
    assert (committed.read_bytes() if committed.exists() else None) == before
    assert not (empty_store / "cache" / name).exists()                      # nothing computed around it
    assert checkdata.verify_data(log=lambda *a: None)                   # and check-data says so too


def test_a_stray_file_in_data_is_refused_even_under_write_data(empty_store, monkeypatch):
    stray = empty_store / "data" / store.result_name("exp", {"n": 7})
    stray.parent.mkdir(parents=True)
    stray.write_text("{}")
    monkeypatch.setenv("POSBIAS_WRITE_DATA", "1")
    with pytest.raises(store.DataError, match="not listed in data/manifest.json"):
        store.cached("exp", {"n": 7}, lambda: {"v": 1})
    assert stray.read_text() == "{}"


def test_cache_entries_carry_their_hash_and_a_bad_one_is_recomputed_with_a_warning(empty_store):
    store.cached("exp", {"n": 5}, lambda: {"v": 1.0}, seeds=[1])
    path = empty_store / "cache" / store.result_name("exp", {"n": 5})
    side = path.with_suffix(".sha256")
    assert side.read_text().strip() == store.sha256_file(path)
    # an edit the embedded result hash cannot see (the provenance) is caught by the entry's own hash
    path.write_text(path.read_text().replace('"seeds":[1]', '"seeds":[2]'))
    with pytest.warns(UserWarning, match="differs from the hash stored with it"):
        assert store.lookup("exp", {"n": 5}) is None
    with warnings.catch_warnings(record=True) as again:     # this version of the entry was warned about once
        warnings.simplefilter("always")
        assert store.cached("exp", {"n": 5}, lambda: {"v": 1.0}, seeds=[1]) == {"v": 1.0}
    assert again == []
    assert json.loads(path.read_text())["provenance"]["seeds"] == [1]
    assert side.read_text().strip() == store.sha256_file(path)
    side.unlink()                          # an entry written before these hashes: its result hash still checks
    assert store.lookup("exp", {"n": 5}) == {"v": 1.0}


def test_each_file_is_hashed_once_per_process(empty_store, monkeypatch):
    committed = _committed(empty_store, monkeypatch, n=3)
    calls = []
    real = store.sha256_file
    monkeypatch.setattr(store, "sha256_file", lambda p: calls.append(p) or real(p))
    for _ in range(5):
        assert store.lookup("exp", {"n": 3}) == {"v": 5}
    assert calls.count(committed) <= 1
    committed.write_text(committed.read_text().replace('"v":5', '"v":6'))   # a change is seen
    with pytest.raises(store.DataError):
        store.lookup("exp", {"n": 3})


def _worker(args):
    cache, out = args
    os.environ["POSBIAS_CACHE"] = cache
    os.environ.pop("POSBIAS_RUN_DIR", None)
    from posbias.storage import store as s

    def compute():
        with open(out, "a") as f:
            f.write("computed\n")
        time.sleep(0.5)
        return {"v": 42}

    return s.cached("race", {"n": 1}, compute)


def test_two_processes_neither_duplicate_nor_corrupt(tmp_path):
    out = tmp_path / "calls.txt"
    ctx = mp.get_context("spawn")
    with ctx.Pool(2) as pool:
        results = pool.map(_worker, [(str(tmp_path / "cache"), str(out))] * 2)
    assert results == [{"v": 42}, {"v": 42}]
    assert out.read_text().count("computed") == 1
    files = list((tmp_path / "cache" / "race").glob("*.json"))
    assert len(files) == 1 and json.loads(files[0].read_text())["result"] == {"v": 42}


def test_atomic_write_leaves_no_partial_file(tmp_path):
    target = tmp_path / "x.json"
    store.atomic_write_text(target, "old")

    class Boom(Exception):
        pass

    class Bad:
        def __str__(self):
            raise Boom

    with pytest.raises(TypeError):
        store.atomic_write_text(target, Bad())  # type: ignore[arg-type]
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]

    def half_then_fail(f):
        f.write(b"new but not")
        raise Boom

    with pytest.raises(Boom):
        store.atomic_write(target, half_then_fail)
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]


@pytest.mark.parametrize("mask", [0o022, 0o002, 0o077, 0o027])
def test_atomic_write_gives_the_mode_an_ordinary_write_gives(tmp_path, mask):
    """Not the temporary file's private 0o600: the umask's mode, as ``open(path, "w")`` gives a new file,
    also when it replaces a file of another mode."""
    old = os.umask(mask)
    try:
        assert store.umask() == mask
        plain = tmp_path / "plain.txt"
        plain.write_text("x")
        store.atomic_write_text(tmp_path / "new.json", "{}")
        replaced = tmp_path / "replaced.json"
        replaced.write_text("old")
        replaced.chmod(0o600)
        store.atomic_write(replaced, lambda f: f.write(b"new"))
    finally:
        os.umask(old)
    expected = 0o666 & ~mask
    assert stat.S_IMODE(plain.stat().st_mode) == expected
    for p in (tmp_path / "new.json", replaced):
        assert stat.S_IMODE(p.stat().st_mode) == expected, (p.name, oct(p.stat().st_mode))


def test_the_umask_is_read_without_changing_it(monkeypatch, tmp_path):
    """Without Linux's /proc the umask is set and put back: either way it is what it was."""
    old = os.umask(0o027)
    try:
        assert store.umask() == 0o027
        monkeypatch.setattr(store, "_PROC_STATUS", tmp_path / "no-proc" / "status")
        assert store.umask() == 0o027 and store.new_file_mode() == 0o640
        assert os.umask(0o027) == 0o027
    finally:
        os.umask(old)


def test_device_enters_the_key(empty_store):
    a = store.cached("dev", {"n": 1}, lambda: {"v": 1}, device="cuda")
    b = store.cached("dev", {"n": 1}, lambda: {"v": 2}, device="cpu")
    assert a == {"v": 1} and b == {"v": 2}
    # lookup and is_stored find each under the key cached used, and nothing on a third device
    assert store.lookup("dev", {"n": 1}, device="cuda") == {"v": 1} and store.lookup("dev", {"n": 1}) == {"v": 2}
    assert store.is_stored("dev", {"n": 1}, device="cuda") and store.is_stored("dev", {"n": 1}, device="cpu")
    assert not store.is_stored("dev", {"n": 1}, device="mps") and store.lookup("dev", {"n": 1}, device="mps") is None
    name = store.result_name("dev", {"n": 1}, device="cuda")
    assert (empty_store / "cache" / name).exists() and name != store.result_name("dev", {"n": 1})


def test_wall_seconds_of_work_done_before_the_call(empty_store):
    store.cached("exp", {"n": 9}, lambda: {"v": 1.0}, wall_seconds=1234.5)
    rec = json.loads(next((empty_store / "cache" / "exp").glob("*.json")).read_text())
    assert rec["provenance"]["wall_seconds"] == 1234.5


def test_a_trained_result_must_carry_its_training_time_as_wall_time(empty_store, monkeypatch):
    """A unit trained in an ensemble measures its training (train_seconds_ensemble) before cached()
    stores it; a provenance that timed only the store call (~0 s) is a problem check-data reports."""
    monkeypatch.setenv("POSBIAS_WRITE_DATA", "1")
    store.cached("exp", {"n": 3}, lambda: {"train_seconds_ensemble": 61.25, "acc": 0.5}, wall_seconds=61.25)
    assert checkdata.verify_data(log=lambda *a: None) == []
    store.cached("exp", {"n": 4}, lambda: {"train_seconds_ensemble": 61.25, "acc": 0.5})   # times the lambda
    problems = checkdata.verify_data(log=lambda *a: None)
    assert len(problems) == 1 and "is not the training time the result measured (61.25 s)" in problems[0]


def test_a_parked_checkpoint_is_stored_as_hash_listed_parts_under_the_part_size(empty_store, monkeypatch):
    """park splits a checkpoint into parts of at most PART_BYTES, each in the manifest; parked_checkpoint
    joins them back byte for byte; a re-park with fewer parts leaves none of the old ones behind; a
    missing, altered or unlisted part makes the whole unusable (warned) and check-data reports it."""
    monkeypatch.setattr(parking, "PART_BYTES", 1000)
    target = parking.parked_path("exp", {"units": [1, 2]})
    blob = os.urandom(2500)
    parts = parking.park(target, lambda f: f.write(blob))
    assert [p.name for p in parts] == [target.name.replace(".pt", f".00{i}-of-003.pt") for i in (1, 2, 3)]
    assert [p.stat().st_size for p in parts] == [1000, 1000, 500] and not target.exists()
    assert parking.parked_checkpoint(target) == blob and parking.parked_checkpoints() == [target]
    manifest = store.load_manifest()
    assert manifest == {str(p.relative_to(empty_store / "data")): store.sha256_file(p) for p in parts}
    assert checkdata.verify_data(log=lambda *a: None) == []

    small = os.urandom(1000)                       # one part exactly: the three old parts go
    (part,) = parking.park(target, lambda f: f.write(small))
    assert part.name.endswith(".001-of-001.pt") and parking.parked_files() == [part]
    assert (parking.parked_checkpoint(target) == small
            and list(store.load_manifest()) == [str(part.relative_to(empty_store / "data"))])

    parts = parking.park(target, lambda f: f.write(blob))
    raw = parts[1].read_bytes()
    parts[1].write_bytes(bytes([raw[0] ^ 0xFF]) + raw[1:])          # altered: its first byte flipped
    with pytest.warns(UserWarning, match="002-of-003.pt: SHA-256 differs"):
        assert parking.parked_checkpoint(target) is None
    assert any("SHA-256 differs" in p for p in checkdata.verify_data(log=lambda *a: None))
    parts = parking.park(target, lambda f: f.write(blob))
    parts[2].unlink()                                                # missing
    with pytest.warns(UserWarning, match="has 2 of its 3 parts"):
        assert parking.parked_checkpoint(target) is None
    assert [p.split(": ", 1)[1] for p in checkdata.verify_data(log=lambda *a: None)] == [
        "listed in the manifest but missing"]
    # missing and unlisted: only the whole says so
    store._set_manifest(str(parts[2].relative_to(empty_store / "data")), None)
    rel = target.relative_to(empty_store / "data")
    assert checkdata.verify_data(log=lambda *a: None) == [f"{rel}: has 2 of its 3 parts"]
    parts = parking.park(target, lambda f: f.write(blob))
    store._set_manifest(str(parts[0].relative_to(empty_store / "data")), None)   # unlisted
    with pytest.warns(UserWarning, match="the manifest lists 2 parts, not its 3"):
        assert parking.parked_checkpoint(target) is None
    assert any("not in data/manifest.json" in p for p in checkdata.verify_data(log=lambda *a: None))

    parking.unpark(target)
    assert parking.parked_files() == [] and store.load_manifest() == {}
    assert parking.parked_checkpoint(target) is None                   # nothing parked: silently None


def test_a_legacy_single_file_checkpoint_is_replaced_by_parts_and_stray_files_are_reported(empty_store):
    """The one-file format of before (``<key>.pt``) is removed, with its manifest entry, when the
    checkpoint is parked again; a file in data/checkpoints that is no part is a check-data problem."""
    target = parking.parked_path("exp", {"units": [3]})
    target.parent.mkdir(parents=True)
    target.write_bytes(b"old")
    store._set_manifest(str(target.relative_to(empty_store / "data")), store.sha256_file(target))
    problems = checkdata.verify_data(log=lambda *a: None)
    assert len(problems) == 1 and "not a part of a committed checkpoint" in problems[0]
    (part,) = parking.park(target, lambda f: f.write(b"new"))
    assert not target.exists() and parking.parked_files() == [part] and checkdata.verify_data(log=lambda *a: None) == []


def test_every_committed_file_is_under_5_MB():
    """The repository's data/ holds no file over 5 MB (parked checkpoints are split into parts)."""
    big = [(str(p), p.stat().st_size) for p in (store.ROOT / "data").rglob("*") if p.is_file()
           and p.stat().st_size > 5_000_000]
    assert big == []


class _FullDisk:
    """A file from ``os.fdopen`` on a disk that fills after ``room`` bytes (the injected ``ENOSPC``)."""

    def __init__(self, f, room):
        self.f, self.room = f, room

    def write(self, b):
        if len(b) > self.room:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.room -= len(b)
        return self.f.write(b)

    def __getattr__(self, name):
        return getattr(self.f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()


def _fill_disk(monkeypatch, room=100):
    real = os.fdopen
    monkeypatch.setattr(store.os, "fdopen", lambda fd, mode="r", *a, **k: _FullDisk(real(fd, mode, *a, **k), room))


def test_a_full_disk_is_one_line_naming_the_path_and_leaves_no_partial_file(empty_store, monkeypatch):
    import torch

    from posbias.training import checkpoints as ck

    target = empty_store / "out" / "results.json"
    store.atomic_write_text(target, "old\n")
    _fill_disk(monkeypatch)
    with pytest.raises(store.WriteError) as e:
        store.atomic_write_text(target, "x" * 10_000)
    assert str(e.value) == f"cannot write {target}: No space left on device" and e.value.errno == errno.ENOSPC
    assert target.read_text() == "old\n" and sorted(p.name for p in target.parent.iterdir()) == ["results.json"]
    ckpt = empty_store / "cache" / "u.ckpt" / "state.pt"          # torch's writer said "unexpected pos" here
    with pytest.raises(store.WriteError, match=f"cannot write {ckpt}: No space left on device$"):
        ck.save(ckpt, {"w": torch.zeros(10_000)})
    assert list(ckpt.parent.iterdir()) == []
    with pytest.raises(store.WriteError, match="No space left on device"):
        store.cached("exp", {"n": 1}, lambda: {"v": [0.0] * 1000})
    assert [p.name for p in (empty_store / "cache" / "exp").iterdir() if not p.name.endswith(".lock")] == []
    monkeypatch.undo()
    assert store.cached("exp", {"n": 1}, lambda: {"v": [0.0] * 1000}) == {"v": [0.0] * 1000}   # space again: fine


def test_a_permission_error_is_one_line_naming_the_path(empty_store, monkeypatch):
    def refuse(*a, **k):
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES))

    monkeypatch.setattr(store.tempfile, "mkstemp", refuse)
    target = empty_store / "ro" / "x.json"
    with pytest.raises(store.WriteError, match=f"^cannot write {target}: Permission denied$"):
        store.atomic_write_text(target, "{}")
    assert not target.exists()
