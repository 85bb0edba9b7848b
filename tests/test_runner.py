"""posbias.book.runner: a failed write (no space, no permission) is exit 1 and one line naming the path;
a resumed training is said (the kill -9 run of it is tests/test_resume.py)."""
import errno
import json
import os

from posbias.storage import store
from posbias.book import runner


class _KernelError(Exception):
    """What papermill raises when a cell raised in the kernel (its ename and evalue)."""

    def __init__(self, ename, evalue):
        super().__init__(evalue)
        self.ename, self.evalue, self.exec_count, self.traceback = ename, evalue, 7, []


def _no_space(path):
    return OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))


def test_a_write_that_fails_in_the_kernel_is_one_line_and_exit_1(tmp_path, monkeypatch):
    monkeypatch.setenv("POSBIAS_CACHE", str(tmp_path / "cache"))
    err = _KernelError("WriteError", f"cannot write {tmp_path}/cache/x.json: No space left on device")
    monkeypatch.setattr(runner, "_execute_interruptibly", lambda execute: (err, None))
    res = runner.run_chapter("wu-thm-4-1", profile="smoke", out=tmp_path / "run", quiet=True)
    assert res.code == runner.EXIT_RAISED
    assert res.message == f"error: wu-thm-4-1: cannot write {tmp_path}/cache/x.json: No space left on device"


def test_a_notebook_or_results_json_that_cannot_be_written_is_one_line_and_leaves_no_partial_file(tmp_path,
                                                                                                monkeypatch):
    monkeypatch.setenv("POSBIAS_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "run"

    def papermill_fails(execute):        # papermill's write of the executed notebook hit a full disk
        (out / "wu-thm-4-1.ipynb").write_text('{"cells": [')
        return _no_space(out / "wu-thm-4-1.ipynb"), None

    monkeypatch.setattr(runner, "_execute_interruptibly", papermill_fails)
    res = runner.run_chapter("wu-thm-4-1", profile="smoke", out=out, quiet=True)
    assert (res.code, res.message) == (1, f"error: cannot write {out}/wu-thm-4-1.ipynb: No space left on device")
    assert list(out.iterdir()) == []
    monkeypatch.setattr(runner, "_execute_interruptibly", lambda execute: (None, None))
    real = os.fdopen

    def full(fd, mode="r", *a, **k):     # results.json: the disk is full
        raise _no_space(out)

    monkeypatch.setattr(store.os, "fdopen", full)
    res = runner.run_chapter("wu-thm-4-1", profile="smoke", out=out, quiet=True)
    monkeypatch.setattr(store.os, "fdopen", real)
    assert (res.code, res.message) == (1, f"error: cannot write {out}/results.json: No space left on device")
    assert "\n" not in res.message and list(out.iterdir()) == []


def test_resumed_steps_are_read_from_the_executed_notebook(tmp_path):
    nb = tmp_path / "x.ipynb"
    out = {"output_type": "stream", "text": ["resumed from step 412/1000 (/c/state.pt); 588 steps to go\n"]}
    nb.write_text(json.dumps({"cells": [{"cell_type": "code", "outputs": [out]}]}))
    assert runner.resumed_steps(nb) == [(412, 1000)]
    assert runner.resumed_steps(tmp_path / "missing.ipynb") == []


def test_an_executed_notebook_names_no_path_of_the_machine_and_its_files_are_readable(tmp_path, monkeypatch):
    """Papermill records the notebook's input and output paths (absolute in a book build); the run keeps
    them relative to the repository (or the name alone, outside it), and writes its files with the
    umask's mode, like any other file (issue 98)."""
    import stat

    monkeypatch.setenv("POSBIAS_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "run"
    old = os.umask(0o022)
    try:
        res = runner.run_chapter("wu-thm-4-1", profile="smoke", out=out, quiet=True)
    finally:
        os.umask(old)
    assert res.code == 0, res.message
    text = (out / "wu-thm-4-1.ipynb").read_text()
    for absolute in (str(tmp_path), str(runner.ROOT), os.path.expanduser("~")):
        assert len(absolute) < 2 or absolute not in text, f"the executed notebook names {absolute}"
    meta = json.loads(text)["metadata"]["papermill"]
    assert (meta["input_path"], meta["output_path"]) == ("notebooks/wu-thm-4-1.md", "wu-thm-4-1.ipynb")
    for name in ("wu-thm-4-1.ipynb", "results.json"):
        assert stat.S_IMODE((out / name).stat().st_mode) == 0o644, name


def test_the_run_context_reaches_the_kernel_and_not_this_process(tmp_path, monkeypatch):
    """The run's context (run folder, chapter, profile, parameters, captions, device) is the kernel's
    environment only (issue 97): this process's environment is never changed, and the kernel still records
    its checks in the run folder."""
    import papermill

    monkeypatch.setenv("POSBIAS_CACHE", str(tmp_path / "cache"))
    for name in ("POSBIAS_RUN_DIR", "POSBIAS_CHAPTER", "POSBIAS_PARAMS"):
        monkeypatch.delenv(name, raising=False)
    seen, real = [], papermill.execute_notebook

    def spy(*a, **k):
        seen.append({n for n in os.environ if n in ("POSBIAS_RUN_DIR", "POSBIAS_CHAPTER", "POSBIAS_PARAMS")})
        return real(*a, **k)

    monkeypatch.setattr(papermill, "execute_notebook", spy)
    res = runner.run_chapter("wu-thm-4-1", profile="smoke", out=tmp_path / "run", quiet=True)
    assert res.code == 0, res.message
    assert seen == [set()], f"the runner set {seen} in its own environment"
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["checks"] and all(c["passed"] for c in results["checks"])
