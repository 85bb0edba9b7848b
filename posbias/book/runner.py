"""Execute one chapter with parameters: jupytext (in memory) -> papermill -> results.json.

Exit codes (the contract readers' scripts rely on): 0 every check passed; 3 the chapter ran but a check
failed, or it recorded no check at all; 2 bad input, refused before any work and writing nothing (bad
parameters, an output folder that is a file, not writable or inside data/ or notebooks/, one another run
is writing into, a run whose estimated memory exceeds the machine's, or one estimated above an hour
without ``--yes`` on a terminal); 1 the notebook raised; 130 / 143 stopped by SIGINT / SIGTERM.

A SIGINT or SIGTERM to ``posbias run`` interrupts the kernel (SIGINT to its process group, like
Jupyter's interrupt button): a training loop finishes its step, saves its checkpoint and stops
(``posbias.training``), results already stored stay stored, nothing half-written is left, and
``results.json`` says ``"status": "interrupted"``. The same command then resumes. A second signal,
or a kernel still running 30 s later, kills the kernel (the last periodic checkpoint is kept).
"""
from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from posbias.book import cost, tidy
from posbias.book.chapters import Chapter, ParamError, get_chapter
from posbias.storage.provenance import ROOT, canonical_json, collect, now_iso, sha256_bytes, source_date_epoch
from posbias.storage.report import human_seconds
from posbias.storage.store import atomic_write_text, write_error

__all__ = ["RunResult", "run_chapter", "default_out", "EXIT_OK", "EXIT_RAISED", "EXIT_BAD_INPUT", "EXIT_CHECK_FAILED"]

EXIT_OK, EXIT_RAISED, EXIT_BAD_INPUT, EXIT_CHECK_FAILED = 0, 1, 2, 3
INTERRUPT_GRACE = 30.0      # seconds an interrupted kernel gets to stop before it is killed
KERNEL = "python3"
DEVICES = ("auto", "cpu", "cuda")


@dataclass
class RunResult:
    code: int
    out: Path | None
    message: str
    results: dict[str, Any] | None = None


def params_hash(params: dict[str, Any]) -> str:
    return sha256_bytes(canonical_json(params).encode())[:8]


def default_out(chapter_id: str, params: dict[str, Any]) -> Path:
    return Path("runs") / f"{chapter_id}-{params_hash(params)}"


def prepare(chapter_id: str, overrides: dict[str, Any] | None, profile: str,
            device: str = "auto") -> tuple[Chapter, dict[str, Any]]:
    """Validate everything a run needs. Raises ParamError (exit 2) before any work."""
    chapter = get_chapter(chapter_id)
    params = chapter.resolve(profile, overrides)
    if device not in DEVICES:
        raise ParamError(f"unknown device {device!r}; choose one of {', '.join(DEVICES)}")
    if device == "cuda":
        import torch  # lazy: torch costs ~1.4s at import

        if not torch.cuda.is_available():
            raise ParamError("--device cuda asked for, but torch sees no CUDA device; use --device cpu or auto")
    return chapter, params


PROTECTED = ("data", "notebooks", "posbias", ".git")     # folders of the repository a run never writes into


def check_out(out: Path) -> None:
    """Refuse (ParamError) an output folder a run cannot or must not write: an existing file, a path
    under a file, a folder this user cannot write, the repository itself or its data/, notebooks/,
    posbias/ or .git/. Writes nothing (a probe folder made to test writability is removed)."""
    out = Path(out)
    where = Path(os.path.abspath(out))
    if out.exists() and not out.is_dir():
        raise ParamError(f"--out {out} is an existing file; give a folder (it is created if missing)")
    root = ROOT.resolve()
    resolved = where.resolve()
    if resolved == root or any(resolved.is_relative_to(root / d) for d in PROTECTED):
        raise ParamError(f"--out {out} is inside the repository's own files ({', '.join(d + '/' for d in PROTECTED)} "
                         "or the root); give a folder of your own, e.g. runs/NAME")
    parent = where
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise ParamError(f"--out {out}: {parent} is a file, so no folder can be made under it")
    try:
        probe = tempfile.mkdtemp(prefix=".posbias-probe-", dir=parent)
        os.rmdir(probe)
    except OSError as e:
        raise ParamError(f"--out {out}: cannot write in {parent} ({os.strerror(e.errno or errno.EACCES)}); "
                         "give a folder you can write") from None


@contextlib.contextmanager
def out_lock(out: Path):
    """Hold an exclusive lock on the folder ``out`` for the run (flock on the folder itself, so nothing
    is written for it); a second run into the same folder is refused with ParamError, not made to wait."""
    fd = os.open(out, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise ParamError(f"another `posbias run` is writing into {out}; wait for it to finish, or give "
                             "another --out") from None
        yield
    finally:
        os.close(fd)


def gate_cost(chapter: Chapter, params: dict[str, Any], yes: bool, quiet: bool) -> None:
    """Print the run's estimate (:mod:`posbias.book.cost`) and refuse, before any work, a run whose peak memory
    exceeds the memory available, one estimated above ``$POSBIAS_MAX_SECONDS`` (when set), or one longer
    than an hour without ``--yes`` when stdin is a terminal (not on a terminal it runs, saying so).
    Raises ParamError."""
    est = cost.estimate(chapter, params)
    if not quiet:
        print(f"{chapter.id}: " + (f"estimated {est.describe()}" if est.declared else
                                   "no cost estimate (the chapter declares no cost model)"),
              file=sys.stderr, flush=True)
    avail = cost.available_mb()
    if avail is not None and est.memory_mb > avail:
        raise ParamError(f"{chapter.id} with these parameters needs an estimated {est.memory_mb:,.0f} MiB of memory at "
                         f"its peak, more than the {avail:,.0f} MiB available; choose smaller parameters "
                         f"(`posbias list {chapter.id}` shows the cost model)")
    limit = os.environ.get("POSBIAS_MAX_SECONDS")
    if limit and est.seconds > float(limit):
        raise ParamError(f"{chapter.id} with these parameters would run for an estimated "
                         f"{human_seconds(est.seconds)}, more than POSBIAS_MAX_SECONDS={limit}; choose smaller "
                         f"parameters or raise the limit")
    if est.seconds > cost.LONG_SECONDS and not yes:
        if sys.stdin is not None and sys.stdin.isatty():
            raise ParamError(f"{chapter.id} with these parameters would run for an estimated "
                             f"{human_seconds(est.seconds)} on one CPU core; add --yes to run it anyway")
        print(f"{chapter.id}: estimated {human_seconds(est.seconds)}, longer than an hour; stdin is not a "
              "terminal, so running anyway (--yes says so explicitly)", file=sys.stderr, flush=True)


def _resolved_device(device: str) -> str:
    if device != "auto":
        return device
    import torch  # lazy: torch costs ~1.4s at import

    return "cuda" if torch.cuda.is_available() else "cpu"


def _failure_summary(err: Exception) -> str:
    cell = getattr(err, "exec_count", None)
    ename = getattr(err, "ename", type(err).__name__)
    evalue = getattr(err, "evalue", str(err))
    tb = getattr(err, "traceback", None) or []
    ansi = re.compile(r"\x1b\[[0-9;]*m")
    lines = [ansi.sub("", line) for line in tb]
    where = [ln for ln in "\n".join(lines).splitlines() if ln.strip().startswith(("File ", "Cell In"))]
    loc = where[-1].strip() if where else "(no location)"
    return f"cell [{cell}] raised {ename}: {evalue}\n  at {loc}"


def kernel_pids(parent: int | None = None) -> list[int]:
    """The Jupyter kernels process ``parent`` (default: this one) started: its children running
    ipykernel, read from /proc (empty where there is no /proc)."""
    me, out = parent or os.getpid(), []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return out
    for e in entries:
        if not e.isdigit():
            continue
        try:
            ppid = int(Path(f"/proc/{e}/stat").read_text().rsplit(")", 1)[1].split()[1])
            if ppid == me and b"ipykernel" in Path(f"/proc/{e}/cmdline").read_bytes():
                out.append(int(e))
        except (OSError, ValueError, IndexError):
            continue
    return out


def _signal_kernels(sig: int) -> None:
    for pid in kernel_pids():
        try:
            os.killpg(pid, sig)     # jupyter_client starts each kernel in its own session (pgid = pid)
        except (ProcessLookupError, PermissionError):
            try:
                os.kill(pid, sig)
            except (ProcessLookupError, PermissionError):
                pass


def _execute_interruptibly(execute: Callable[[], None]) -> tuple[BaseException | None, int | None]:
    """Run ``execute()`` in a worker thread, turning SIGINT/SIGTERM to this process into a kernel interrupt.

    Returns what ``execute`` raised (or None) and the first signal received (or None). Off the main
    thread (signals cannot be caught there) it just runs ``execute``.
    """
    if threading.current_thread() is not threading.main_thread():
        try:
            execute()
            return None, None
        except Exception as e:  # noqa: BLE001
            return e, None
    box: dict[str, BaseException] = {}

    def work() -> None:
        try:
            execute()
        except BaseException as e:  # noqa: BLE001 - handed to the main thread
            box["error"] = e

    received: list[int] = []

    def handler(signum: int, frame: Any) -> None:
        received.append(signum)

    saved = {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}
    worker = threading.Thread(target=work, name="posbias-notebook", daemon=True)
    try:
        worker.start()
        first = last_int = killed = 0.0
        while worker.is_alive():
            worker.join(0.1)
            if not received or not worker.is_alive():
                continue
            now = time.monotonic()
            first = first or now
            if killed:
                if now - killed > INTERRUPT_GRACE:
                    break                       # nbclient did not notice the dead kernel; give up on it
            elif len(received) > 1 or now - first > INTERRUPT_GRACE:
                print(f"posbias: killing the kernel ({signal.Signals(received[-1]).name} again, or no stop "
                      f"after {INTERRUPT_GRACE:.0f} s)", file=sys.stderr)
                _signal_kernels(signal.SIGKILL)
                killed = now
            elif now - last_int > 5.0:          # again every 5 s: a kernel between two cells ignores it
                _signal_kernels(signal.SIGINT)
                last_int = now
    finally:
        for s, h in saved.items():
            signal.signal(s, signal.SIG_DFL if h is None else h)
    if worker.is_alive():
        return RuntimeError("the notebook did not stop after its kernel was killed"), received[0]
    return box.get("error"), (received[0] if received else None)


def _ipc_kernel_manager(socket_dir: Path, env: dict[str, str]) -> type:
    """A kernel manager whose kernel talks to the runner over Unix sockets in ``socket_dir`` (private to
    this run, so concurrent runs never share a socket), not over unencrypted TCP ports, and starts with
    ``env`` added to this process's environment (the run's context reaches the kernel only; this
    process's own environment is never changed)."""
    from jupyter_client.manager import KernelManager  # lazy: jupyter_client costs ~0.1s at import

    class IPCKernelManager(KernelManager):
        def __init__(self, **kw: Any) -> None:
            kw.setdefault("transport", "ipc")
            kw.setdefault("ip", str(socket_dir / "k"))
            super().__init__(**kw)

        def start_kernel(self, **kw: Any) -> None:
            kw["env"] = {**kw.get("env", os.environ), **env}
            super().start_kernel(**kw)

    return IPCKernelManager


_RESUMED = r"resumed from step (\d+)/(\d+)"


def resumed_steps(nb_path: Path) -> list[tuple[int, int]]:
    """``(step, steps)`` for every training the executed notebook ``nb_path`` resumed from a checkpoint,
    read from the lines ``posbias.training`` prints there (empty when nothing resumed or no notebook)."""
    try:
        nb = json.loads(nb_path.read_text())
    except (OSError, ValueError):
        return []
    text = "".join("".join(o.get("text", "")) for c in nb.get("cells", []) for o in c.get("outputs", [])
                   if o.get("output_type") == "stream")
    return [(int(a), int(b)) for a, b in re.findall(_RESUMED, text)]


def run_chapter(
    chapter_id: str,
    overrides: dict[str, Any] | None = None,
    *,
    profile: str = "default",
    out: Path | str | None = None,
    timeout: int = 3600,
    device: str = "auto",
    write_data: bool = False,
    quiet: bool = False,
    yes: bool = False,
) -> RunResult:
    """Run a chapter; never raises for bad input or a failing notebook (see the exit codes).

    Before any work: the parameters, the output folder (:func:`check_out`) and the cost
    (:func:`gate_cost`) are checked; the folder is then locked for the run (:func:`out_lock`)."""
    try:
        chapter, params = prepare(chapter_id, overrides, profile, device)
        out = Path(out) if out is not None else default_out(chapter_id, params)
        check_out(out)
        gate_cost(chapter, params, yes, quiet)
        out.mkdir(parents=True, exist_ok=True)
        with out_lock(out):
            return _run_locked(chapter, params, profile, out, timeout, device, write_data, quiet)
    except ParamError as e:
        return RunResult(EXIT_BAD_INPUT, None, f"error: {e}")
    except OSError as e:            # the runner's own writes: the notebook, results.json (store.WriteError)
        return RunResult(EXIT_RAISED, None, f"error: {write_error(getattr(e, 'filename', None) or out, e)}")


def _run_locked(chapter: Chapter, params: dict[str, Any], profile: str, out: Path, timeout: int, device: str,
                write_data: bool, quiet: bool) -> RunResult:
    """:func:`run_chapter` once its input is checked and ``out`` is locked."""
    import jupytext  # lazy: jupytext costs ~0.25s at import
    import papermill as pm  # lazy: papermill costs ~0.25s at import

    chapter_id = chapter.id
    for stale in ("results.json", "_record.json", f"{chapter_id}.ipynb"):
        (out / stale).unlink(missing_ok=True)
    if (out / "figures").exists():
        shutil.rmtree(out / "figures")
    nb_path = out / f"{chapter_id}.ipynb"

    nb = jupytext.read(chapter.path)
    nb.metadata["kernelspec"] = {"name": KERNEL, "display_name": "Python 3", "language": "python"}
    dev = _resolved_device(device)
    env_keys = {
        "POSBIAS_RUN_DIR": str(out.resolve()),
        "POSBIAS_CHAPTER": chapter_id,
        "POSBIAS_PROFILE": profile,
        "POSBIAS_PARAMS": canonical_json(params),
        "POSBIAS_CAPTIONS": canonical_json(chapter.captions),   # figure -> its {glue:figure} caption
        "POSBIAS_DEVICE": dev,
        "POSBIAS_WRITE_DATA": "1" if write_data else "0",
        "SOURCE_DATE_EPOCH": source_date_epoch(),
        "PYTHONHASHSEED": "0",
        "PYTHONWARNINGS": os.environ.get("PYTHONWARNINGS", "ignore::DeprecationWarning"),
    }
    started, t0 = now_iso(), time.perf_counter()
    error: Exception | None = None
    stopped_by: int | None = None
    socket_dir = Path(tempfile.mkdtemp(prefix="posbias-kernel-"))  # short: Unix socket paths are limited
    try:
        error, stopped_by = _execute_interruptibly(lambda: pm.execute_notebook(
            nb, str(nb_path), parameters=params, kernel_name=KERNEL, language="python",
            progress_bar=not quiet and sys.stderr.isatty(), log_output=False, cwd=str(chapter.path.parent),
            execution_timeout=timeout, request_save_on_cell_execute=True, start_timeout=120,
            kernel_manager_class=_ipc_kernel_manager(socket_dir, env_keys),
        ))
        if error is not None and not isinstance(error, Exception):
            raise error
        if isinstance(error, OSError) and stopped_by is None:    # papermill could not write the notebook
            nb_path.unlink(missing_ok=True)
            raise write_error(getattr(error, "filename", None) or nb_path, error)
    finally:
        shutil.rmtree(socket_dir, ignore_errors=True)
    wall = time.perf_counter() - t0
    tidy.finish_notebook(nb_path, chapter.path)

    interrupted = error is not None and stopped_by is not None
    record_path = out / "_record.json"
    record = (json.loads(record_path.read_text()) if record_path.exists()
              else {"checks": [], "values": {}, "data": [], "figures": []})
    seeds = sorted({v for k, v in params.items() if "seed" in k and isinstance(v, int)}
                   | {x for k, v in params.items() if "seed" in k and isinstance(v, list) for x in v})
    results = {
        "chapter": chapter_id,
        "title": chapter.title,
        "parameters": params,
        "profile": profile,
        "status": ("interrupted" if interrupted else "error") if error else (
            "no-checks" if not record["checks"] else
            "failed-checks" if not all(c["passed"] for c in record["checks"]) else "ok"),
        "checks": record["checks"],
        "values": record["values"],
        "figures": record["figures"],
        "data": record["data"],
        "provenance": collect(started=started, wall_seconds=round(wall, 2), seeds=seeds, device=dev),
    }
    resumed = resumed_steps(nb_path)
    if resumed:
        results["resumed"] = [{"step": a, "steps": b} for a, b in resumed]
        print(f"{chapter_id}: resumed training from a checkpoint at step "
              + ", ".join(f"{a:,}/{b:,}" for a, b in resumed), file=sys.stderr, flush=True)
    if error is not None:
        results["error"] = _failure_summary(error)
    if interrupted:
        results["interrupted_by"] = signal.Signals(stopped_by).name
    atomic_write_text(out / "results.json", json.dumps(results, indent=1, sort_keys=False) + "\n")
    record_path.unlink(missing_ok=True)

    if interrupted:
        name = signal.Signals(stopped_by).name
        msg = (f"{chapter_id}: stopped by {name} after {wall:.1f} s; finished results stay in the cache and "
               f"unfinished training keeps its checkpoint: run the same command again to resume\n"
               f"  the partial executed notebook: {nb_path}")
        return RunResult(128 + stopped_by, out, msg, results)
    if error is not None and getattr(error, "ename", "") in ("WriteError", "OSError", "PermissionError"):
        msg = f"error: {chapter_id}: {error.evalue}"        # a failed write in the kernel: one line, its path
        return RunResult(EXIT_RAISED, out, msg, results)
    if error is not None:
        msg = (f"{chapter_id}: the notebook raised after {wall:.1f} s\n  {results['error']}\n"
               f"  the partial executed notebook is kept for inspection: {nb_path}")
        return RunResult(EXIT_RAISED, out, msg, results)
    failed = [c["name"] for c in record["checks"] if not c["passed"]]
    n = len(record["checks"])
    if n == 0:
        return RunResult(EXIT_CHECK_FAILED, out, f"{chapter_id}: the notebook recorded no checks, so nothing was "
                         f"verified; a run that checks nothing does not pass ({wall:.1f} s) -> {out}", results)
    if failed:
        return RunResult(EXIT_CHECK_FAILED, out,
                         f"{chapter_id}: {n - len(failed)}/{n} checks passed; FAILED: {', '.join(failed)} "
                         f"({wall:.1f} s) -> {out}", results)
    return RunResult(EXIT_OK, out, f"{chapter_id}: {n}/{n} checks passed ({wall:.1f} s) -> {out}", results)
