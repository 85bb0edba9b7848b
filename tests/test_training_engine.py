"""posbias.training.engine: campaigns on Dask give the in-process results bit for bit, survive a
killed worker, refuse workers that differ, and write Slurm job scripts with the right settings."""
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from posbias import training as train
from posbias.training import checkpoints as ck
from posbias.training import engine as eng

pytest.importorskip("distributed")

SETTINGS = dict(seeds=[0, 1], eval_every=5, n_test=16, n_sweep=8, n_sink=8, windows=[4], prefixes=[2])


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _results(cache: Path) -> dict[str, dict]:
    """Every stored unit's result by key, without what depends on the run (wall time, ensemble size)."""
    out = {}
    for f in sorted((cache / "wu-units").glob("*.json")):
        rec = json.loads(f.read_text())
        out[rec["key"]] = {k: v for k, v in rec["result"].items() if k not in ("train_seconds_ensemble",
                                                                              "ensemble_size", "splits")}
    return out


@pytest.fixture
def env(tmp_path, monkeypatch):
    """One thread per task and a fresh cache per call of ``env(name)``; workers inherit the environment."""
    monkeypatch.setenv("POSBIAS_THREADS", "1")
    monkeypatch.delenv("POSBIAS_WRITE_DATA", raising=False)

    def use(name: str) -> Path:
        cache = tmp_path / name
        monkeypatch.setenv("POSBIAS_CACHE", str(cache))
        return cache
    return use


def _in_process(env, steps: int) -> dict[str, dict]:
    cache = env("alone")
    train.run_campaign("wu-fig-6", "smoke", progress=False, log=lambda s: None, steps=steps, **SETTINGS)
    return _results(cache)


def test_local_cluster_equals_the_in_process_run_bit_for_bit(env):
    alone = _in_process(env, 10)
    cache = env("cluster")
    engine = train.Engine.local(2, threads=1)
    try:
        assert engine.workers == 2 and engine.threads == 1
        res = train.run_campaign("wu-fig-6", "smoke", progress=False, log=lambda s: None, engine=engine, steps=10,
                                 **SETTINGS)
    finally:
        engine.close()
    assert len(alone) == 6 and _results(cache) == alone
    sizes = {json.loads(f.read_text())["result"]["ensemble_size"] for f in (cache / "wu-units").glob("*.json")}
    assert sizes == {3}                         # auto: two parts of 3, one per worker (alone: one of 6)
    assert not list(cache.rglob("*.ckpt"))      # the driver removed the checkpoints once it stored the units
    assert sorted(res) == ["causal", "prefix|2", "window|4"]


def test_a_scheduler_and_two_workers_started_by_hand(env, tmp_path):
    alone = _in_process(env, 10)
    cache = env("remote")
    port, bindir = _free_port(), Path(sys.executable).parent
    procs = [subprocess.Popen([str(bindir / "dask"), "scheduler", "--host", "127.0.0.1", "--port", str(port),
                               "--no-dashboard"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    time.sleep(2)
    addr = f"tcp://127.0.0.1:{port}"
    procs += [subprocess.Popen([str(bindir / "dask"), "worker", addr, "--nthreads", "1", "--no-dashboard",
                                "--name", f"w{i}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
              for i in range(2)]
    try:
        deadline = time.time() + 60
        from distributed import Client
        with Client(addr, timeout="30s") as c:
            while len(c.scheduler_info()["workers"]) < 2 and time.time() < deadline:
                time.sleep(0.5)
        proc = subprocess.run([str(bindir / "posbias"), "campaign", "wu-fig-6", "--profile", "smoke",
                               "--scheduler", addr, "-p", "steps", "10", "-p", "seeds", "0,1", "-p", "eval_every", "5",
                               "-p", "n_test", "16", "-p", "n_sweep", "8", "-p", "n_sink", "8", "-p", "windows", "4",
                               "-p", "prefixes", "2"], capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        assert "on 2 Dask worker(s)" in proc.stderr
        status = subprocess.run([str(bindir / "posbias"), "campaign", "wu-fig-6", "--profile", "smoke", "--status",
                                 "--scheduler", addr], capture_output=True, text=True, timeout=120)
        assert status.returncode == 0 and "2 worker(s) on " + addr in status.stdout, status.stdout + status.stderr
    finally:
        for p in procs:
            p.send_signal(signal.SIGINT)
        for p in procs:
            try:
                p.wait(20)
            except subprocess.TimeoutExpired:
                p.kill()
    assert _results(cache) == alone


def test_a_worker_killed_mid_training_resumes_and_ends_bit_identical(env, monkeypatch):
    steps = 400
    alone = _in_process(env, steps)
    cache = env("killed")
    monkeypatch.setenv("POSBIAS_CHECKPOINT_SECONDS", "0")     # a checkpoint after every step
    engine = train.Engine.local(2, threads=1)
    killed: list[int] = []
    try:
        pids = engine.client.run(os.getpid)

        def kill_once_a_checkpoint_exists(line: str) -> None:
            pass

        import threading

        def killer() -> None:
            deadline = time.time() + 240
            while time.time() < deadline and not killed:
                for f in cache.glob("wu-units/*.ckpt/state.pt"):
                    doing = engine.client.processing()
                    busy = [a for a, ts in doing.items() if ts]
                    if busy and f.stat().st_size > 0:
                        time.sleep(1.0)
                        os.kill(pids[busy[0]], signal.SIGKILL)
                        killed.append(pids[busy[0]])
                        return
                time.sleep(0.2)

        t = threading.Thread(target=killer)
        t.start()
        train.run_campaign("wu-fig-6", "smoke", progress=False, log=lambda s: None, engine=engine, steps=steps,
                           **SETTINGS)
        t.join(10)
    finally:
        engine.close()
    assert killed, "no worker was killed: the test did not exercise a fault"
    assert _results(cache) == alone


def test_workers_with_other_code_or_packages_are_refused(env):
    env("mismatch")
    engine = train.Engine.local(1, threads=1)
    try:
        eng.check_workers(engine.client)            # the same checkout: accepted
        with pytest.raises(train.VersionMismatch, match=r"torch 2\.\S+ \(driver: 0\.0\)"):
            eng.check_workers(engine.client, ours={**eng.fingerprint(), "torch": "0.0"})
    finally:
        engine.close()
    part = train.units_of("wu-fig-6", "smoke", SETTINGS)["causal"][:1]
    with pytest.raises(train.VersionMismatch, match="posbias_sources"):
        train.train_part(part, threads=1, expect={**eng.fingerprint(), "posbias_sources": "0" * 16})


def test_slurm_job_script_has_lifetime_threads_and_gpus(tmp_path):
    pytest.importorskip("dask_jobqueue")
    cfg = tmp_path / "jobqueue.yaml"
    cfg.write_text("jobqueue:\n  slurm:\n    queue: gpu\n    account: lab\n    walltime: '02:00:00'\n"
                   "    cores: 1\n    memory: 8GB\n")
    cluster = eng.slurm_cluster(str(cfg), gpus=1, threads=2)
    try:
        script = cluster.job_script()
        assert cluster.scheduler_spec["options"]["dashboard_address"] == ":0"    # no dashboard asked for
    finally:
        cluster.close()
    assert "#SBATCH -p gpu" in script and "#SBATCH -A lab" in script and "#SBATCH -t 02:00:00" in script
    assert "--lifetime 6480s" in script                   # 2 h less 10% (720 s)
    assert "--lifetime-restart" in script and "--lifetime-stagger" in script
    assert "--nthreads 1" in script                       # one Dask thread per worker
    assert "export POSBIAS_THREADS=2" in script           # the torch threads, explicit
    assert "--resources GPU=1" in script and "#SBATCH --gres=gpu:1" in script


def test_auto_members_gives_every_worker_a_part():
    from posbias.training.planning import auto_members, ensembles
    units = [u for us in train.units_of("wu-fig-6", "smoke", {"seeds": [0, 1, 2], "prefixes": [2, 4, 8]}).values()
             for u in us]                                # 21 units of one group
    for workers in (1, 2, 3, 7, 21, 40):
        n = auto_members(units, workers)
        parts = ensembles(units, n)
        assert len(parts) >= min(workers, len(units)) and sum(map(len, parts)) == len(units)
        assert workers == 1 and n == 64 or max(map(len, parts)) <= -(-len(units) // min(workers, len(units)))
    fig3 = [u for us in train.units_of("wu-fig-3", "smoke", {"seeds": [0, 1, 2, 3, 4]}
                                             ).values() for u in us]       # 3 PEs x 10 units
    assert auto_members(fig3, 2) == 5 and len(ensembles(fig3, 5)) == 6       # 3 rounds of 5, not 2 of 10
    assert auto_members(fig3, 3) == 10 and auto_members(fig3, 6) == 5
    assert auto_members(units[:6], 2) == 3                                   # 3 + 3


def test_guard_refuses_a_held_lock_and_tolerates_no_flock(tmp_path, monkeypatch):
    import errno
    import fcntl

    lock = tmp_path / "x.lock"
    with ck.guard(lock) as a:
        assert a
        with ck.guard(lock) as b:       # a second open file description: flock conflicts
            assert not b

    def no_flock(fd, op):
        raise OSError(errno.ENOLCK, "No locks available")
    monkeypatch.setattr(fcntl, "flock", no_flock)
    with pytest.warns(UserWarning, match="does not support flock"), ck.guard(lock) as c:
        assert c


def test_without_dashboard_a_second_cluster_neither_takes_nor_warns_about_port_8787():
    """The dashboard is opt-in: without it the scheduler's HTTP routes go to a free port, so a campaign
    started beside another (which may hold 8787) prints no port warning."""
    import warnings

    assert eng._dashboard(False) == ":0"
    holder = socket.socket()
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        holder.bind(("127.0.0.1", 8787))
        holder.listen()
    except OSError:
        pass                                    # already held by something else: the same situation
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            engine = eng.Engine.local(1, threads=1)
            engine.close()
    finally:
        holder.close()
    assert not [w for w in caught if "8787" in str(w.message)], [str(w.message) for w in caught]


def test_fingerprint_describes_the_code_loaded_not_files_edited_since(tmp_path, monkeypatch):
    """A campaign's workers load posbias once; editing the checkout afterwards must not make them
    refuse the driver's next task (the Figure 3 campaign stopped that way), while the files as they
    are now do differ."""
    loaded = eng.fingerprint()
    root = tmp_path / "posbias"
    root.mkdir()
    (root / "a.py").write_text("x = 1\n")
    monkeypatch.setattr(eng, "__file__", str(root / "training" / "engine.py"))
    now = dict(eng._read_fingerprint())            # what the files would say, read again
    assert now["posbias_sources"] != loaded["posbias_sources"]
    assert eng.fingerprint() == loaded and eng.fingerprint() is not eng.fingerprint()   # a copy each time
