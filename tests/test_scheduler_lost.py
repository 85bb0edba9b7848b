"""A campaign whose Dask scheduler goes away ends with one line: which scheduler, that the checkpoints
are kept, and the command that resumes; so does ``--status --scheduler`` against a scheduler that is
gone. A real ``dask scheduler`` and ``dask worker`` on the loopback address, bounded in time."""
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import ROOT, posbias_cmd

DASK = Path(sys.executable).with_name("dask")
pytestmark = pytest.mark.skipif(not DASK.exists(), reason="the dask command is not installed beside python")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(tmp_path):
    return dict(os.environ, PYTHONPATH=str(ROOT), POSBIAS_CACHE=str(tmp_path / "cache"), MPLBACKEND="Agg",
                POSBIAS_CHECKPOINT_SECONDS="1", DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT="5s")


def test_status_against_a_scheduler_that_is_gone_says_so_in_one_line(tmp_path):
    address = f"tcp://127.0.0.1:{_free_port()}"            # nothing listens there
    t0 = time.monotonic()
    p = subprocess.run(posbias_cmd("campaign", "wu-fig-2", "--profile", "smoke", "--status", "--scheduler", address),
                       env=_env(tmp_path), capture_output=True, text=True, timeout=180)
    assert p.returncode == 1, p.stderr[-2000:]
    err = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert "Traceback" not in p.stderr and len(err) == 1, p.stderr[-2000:]
    assert f"lost the Dask scheduler {address}" in err[0] and "Start the scheduler" in err[0]
    assert time.monotonic() - t0 < 150


def test_a_scheduler_lost_mid_campaign_ends_in_one_line_and_the_checkpoints_stay(tmp_path):
    port = _free_port()
    address = f"tcp://127.0.0.1:{port}"
    env = _env(tmp_path)
    procs = []
    try:
        sched = subprocess.Popen([str(DASK), "scheduler", "--host", "127.0.0.1", "--port", str(port),
                                  "--no-dashboard"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                 start_new_session=True)
        procs.append(sched)
        time.sleep(3)
        procs.append(subprocess.Popen([str(DASK), "worker", address, "--nthreads", "1", "--nworkers", "1",
                                       "--no-dashboard"], env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, start_new_session=True))
        drv = subprocess.Popen(posbias_cmd("campaign", "wu-fig-2", "--profile", "smoke", "-p", "steps", "200000",
                                           "-p", "depths", "1,2", "--scheduler", address, "--max-members", "64"),
                               env=env, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               start_new_session=True)
        procs.append(drv)
        ckpts = tmp_path / "cache"
        deadline = time.monotonic() + 240
        while not list(ckpts.rglob("state.pt")) and time.monotonic() < deadline and drv.poll() is None:
            time.sleep(1)
        assert list(ckpts.rglob("state.pt")), "training never checkpointed"
        os.killpg(sched.pid, signal.SIGKILL)                  # the scheduler goes away mid-campaign
        out, err = drv.communicate(timeout=180)
        assert drv.returncode == 1, err[-3000:]
        assert "Traceback" not in err, err[-3000:]
        line = [ln for ln in err.splitlines() if ln.startswith("error:")]
        assert len(line) == 1 and f"lost the Dask scheduler {address}" in line[0], err[-3000:]
        assert "keep their checkpoints" in line[0] and "again to resume" in line[0]
        assert "posbias campaign wu-fig-2 --profile smoke" in line[0]
        assert list(ckpts.rglob("state.pt"))                 # what a rerun resumes from
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait(timeout=30)
