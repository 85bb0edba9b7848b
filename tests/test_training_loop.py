"""posbias.training.loop: training is deterministic, resumes exactly, flushes subnormals without changing a bit."""
import json
import os
import random
import signal

import numpy as np
import pytest
import torch
from training_helpers import _crash_at_step, _sigterm_in_step, _unit, _without_wall_time

from posbias import training as train
from posbias.training import checkpoints as ck


def test_training_is_deterministic_and_resumes(tmp_path, monkeypatch):
    torch.set_num_threads(1)
    u = _unit()
    ref = train.train_units([u], progress=False)[0]
    again = train.train_units([u], progress=False)[0]
    assert ref["curves"] == again["curves"] and ref["ic_accuracy"] == again["ic_accuracy"]
    # a Ctrl-C in step 4 with a checkpoint after every step; the next run resumes from step 4
    _crash_at_step(monkeypatch, 4, KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        train.train_units([u], checkpoint_dir=tmp_path, checkpoint_seconds=0.0, progress=False)
    monkeypatch.undo()
    assert (tmp_path / "state.pt").exists()
    lines = []
    resumed = train.train_units([u], checkpoint_dir=tmp_path, checkpoint_seconds=0.0, progress=False,
                                log=lines.append)[0]
    assert any("resumed from step 4/" in s for s in lines)
    assert resumed["curves"] == ref["curves"] and resumed["ic_accuracy"] == ref["ic_accuracy"]
    assert not (tmp_path / "state.pt").exists()


def test_sigterm_stops_between_steps_checkpoints_and_resumes_exactly(tmp_path, monkeypatch):
    torch.set_num_threads(1)
    u = _unit(steps=8)

    def seed_all():
        torch.manual_seed(123), np.random.seed(5), random.seed(7)

    seed_all()
    ref = train.train_units([u], progress=False, log=lambda s: None)[0]
    ref_rng = (torch.get_rng_state(), np.random.get_state()[1].copy(), random.getstate())

    lines = []
    seed_all()
    previous = signal.getsignal(signal.SIGTERM)
    with monkeypatch.context() as m, pytest.raises(train.Interrupted) as stop:
        _sigterm_in_step(m)
        train.train_units([u], checkpoint_dir=tmp_path, checkpoint_seconds=1e9, progress=False, log=lines.append)
    assert signal.getsignal(signal.SIGTERM) is previous          # the handler is restored
    assert stop.value.signum == signal.SIGTERM and stop.value.step == 3   # the third step was finished
    assert torch.load(tmp_path / "state.pt", weights_only=False)["step"] == 3
    assert lines[-1].startswith("SIGTERM at step 3/8: checkpoint saved")
    assert not list(tmp_path.glob("*.tmp"))

    torch.manual_seed(999), np.random.seed(0), random.seed(0)      # the resumed process starts elsewhere
    lines.clear()
    resumed = train.train_units([u], checkpoint_dir=tmp_path, progress=False, log=lines.append)[0]
    assert lines[0].startswith("resumed from step 3/8") and "trained 5 of 8 steps" in lines[-1]
    assert _without_wall_time(resumed) == _without_wall_time(ref)  # bit-identical, curves included
    assert torch.equal(torch.get_rng_state(), ref_rng[0])         # global RNGs continue as if never stopped
    assert (np.random.get_state()[1] == ref_rng[1]).all() and random.getstate() == ref_rng[2]
    assert not (tmp_path / "state.pt").exists()


def test_ensemble_result_equals_alone(monkeypatch):
    # a mixed ensemble (mask, PE, residual, seed differ) stores, for each member, exactly the result of
    # training that member alone: every field but the ensemble's own size and wall time. On the CPU: on a
    # GPU the batched products of another ensemble size round otherwise (tests/test_cuda.py)
    monkeypatch.setenv("POSBIAS_DEVICE", "cpu")
    torch.set_num_threads(1)
    units = [_unit(0), _unit(1, pe="rope", residual=True), _unit(2, mask="decay")]
    together = train.train_units(units, progress=False)
    own = {"train_seconds_ensemble", "ensemble_size"}
    for u, got in zip(units, together):
        alone = train.train_units([u], progress=False)[0]
        assert set(got) == set(alone) and {"curves", "ic_accuracy", "sweep_accuracy", "mean_attention"} <= set(got)
        assert {k: v for k, v in got.items() if k not in own} == {k: v for k, v in alone.items() if k not in own}


_ALLOCATOR_CHILD = """
import json, sys, torch
from posbias import training as train
from posbias.science.model import MemberConfig
torch.set_num_threads(1)
u = train.Unit(2, MemberConfig("causal", "none"), None, 0, 4, batch_size=128, eval_every=2, n_test=64,
               n_sweep=8, n_sink=16)
r = train.train_units([u], progress=False, log=lambda s: None)[0]
r.pop("train_seconds_ensemble")
json.dump({"tuned": train.tune_allocator(), "result": r}, sys.stdout)
"""


@pytest.mark.skipif(__import__("platform").libc_ver()[0] != "glibc", reason="mallopt is glibc's")
def test_allocator_tuning_leaves_results_bit_identical():
    """tune_allocator changes where glibc keeps freed buffers, never what is computed: a unit trained
    with the full batch of 128 (activations of MBs, above glibc's default mmap threshold) in a
    process with the tuning and in one without gives the identical result, losses to the last bit."""
    import subprocess
    import sys

    out = {}
    for flag in ("0", "1"):
        env = {**os.environ, "POSBIAS_TUNE_MALLOC": flag, "POSBIAS_THREADS": "1"}
        run = subprocess.run([sys.executable, "-c", _ALLOCATOR_CHILD], env=env, capture_output=True, text=True,
                             check=True)
        out[flag] = json.loads(run.stdout)
    assert out["0"]["tuned"] is False and out["1"]["tuned"] is True
    assert out["0"]["result"]["curves"]["loss"][-1] > 0
    assert out["0"]["result"] == out["1"]["result"]


def _subnormal() -> torch.Tensor:
    return torch.tensor(1e-30) * torch.tensor(1e-10)        # 1e-40, below 2^-126: a subnormal float


@pytest.mark.skipif(__import__("platform").machine() not in ("x86_64", "AMD64"), reason="x86's FTZ/DAZ flags")
def test_flushed_denormals_flushes_inside_the_block_only_and_can_be_turned_off(monkeypatch):
    assert _subnormal() > 0
    monkeypatch.delenv("POSBIAS_FLUSH_DENORMAL", raising=False)
    with train.flushed_denormals() as on:
        assert on and _subnormal() == 0
    assert _subnormal() > 0                               # off again after training
    monkeypatch.setenv("POSBIAS_FLUSH_DENORMAL", "0")
    with train.flushed_denormals() as on:
        assert not on and _subnormal() > 0


def _count_subnormals(fn) -> int:
    """Subnormal entries in the outputs of every aten op ``fn()`` runs."""
    from torch.utils._python_dispatch import TorchDispatchMode

    seen = [0]

    class Count(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            for t in out if isinstance(out, (tuple, list)) else [out]:
                if isinstance(t, torch.Tensor) and t.is_floating_point():
                    a = t.abs()
                    seen[0] += int(((a > 0) & (a < torch.finfo(t.dtype).tiny)).sum())
            return out

    with Count():
        fn()
    return seen[0]


@pytest.mark.skipif(__import__("platform").machine() not in ("x86_64", "AMD64"), reason="x86's FTZ/DAZ flags")
def test_flushing_subnormals_leaves_training_bit_identical(monkeypatch):
    """tests/data/rope-step-35729.pt is one network of Figure 3's paper campaign (no mask, RoPE, seed
    0) at step 35,729 of 100,000, cut from the ensemble's checkpoint: late in training its backward
    pass makes subnormal numbers (asserted). Ten steps from it with flushing on and off end in the
    same weights and losses, to the last bit; AdamW's moments differ only where one of them is
    subnormal (flushed to 0 on one side), the entries that cannot move a weight."""
    torch.set_num_threads(1)
    path = __import__("pathlib").Path(__file__).parent / "data" / "rope-step-35729.pt"
    st = ck.load(path, None, torch.device("cpu"), ck.quiet)
    u = train.Unit.from_params(st["units"][0])
    out = {}
    for flag in ("0", "1"):
        monkeypatch.setenv("POSBIAS_FLUSH_DENORMAL", flag)
        run = train.Ensemble.from_checkpoint(path)
        assert run.units == [u] and run.start == 35_729
        with train.flushed_denormals() as on:
            assert on == (flag == "1")
            if not on:
                assert _count_subnormals(lambda: run.step(run.start, False)) > 1000
            for i in range(int(not on), 10):
                run.step(run.start + i, False)
        moments = [v for s in run.opt.state.values() for v in s.values() if torch.is_tensor(v) and v.dim()]
        out[flag] = (list(run.net.state_dict().values()), moments, run.loss_acc)
    assert len(out["0"][0]) == len(out["1"][0]) > 0 and len(out["0"][1]) == len(out["1"][1]) > 0
    assert all(torch.equal(a, b) for a, b in zip(out["0"][0], out["1"][0]))
    assert torch.equal(out["0"][2], out["1"][2]) and float(out["0"][2].sum()) > 0
    tiny = torch.finfo(torch.float32).tiny
    differ = 0
    for a, b in zip(out["0"][1], out["1"][1]):
        d = a != b
        differ += int(d.sum())
        assert bool(((a[d].abs() < tiny) & (b[d].abs() < tiny)).all())     # both below 2^-126 there
    assert differ > 0                # the moments did hold subnormals, so the comparison above tested something


_FLUSH_THREADS = """
import sys, numpy as np, torch
from posbias.training.loop import flushed_denormals
torch.set_num_threads(1)
x = torch.from_numpy(np.full((1 << 20,), 1e-39, dtype=np.float32))     # subnormal
def kept():                       # outputs not flushed to zero, of 2^20, half of them on each thread
    return int(((x * 1.0001) != 0).sum())
if sys.argv[1] == "pool-first":
    torch.set_num_threads(2)
    kept()                        # the second thread exists before the block, not flushing
with flushed_denormals() as on:
    torch.set_num_threads(2)
    inside = kept()               # with "pool-inside", the second thread is made here, flushing
print(on, inside, kept())
"""


@pytest.mark.skipif(__import__("platform").machine() not in ("x86_64", "AMD64")
                    or __import__("sys").platform != "linux", reason="x86's FTZ/DAZ flags, libgomp on Linux")
@pytest.mark.parametrize("when", ["pool-first", "pool-inside"])
def test_flushing_reaches_every_torch_thread_and_ends_with_the_block(when):
    """With two torch threads, every output of a parallel product of subnormals is flushed inside the
    block and none after it, whether the thread pool existed before the block (its threads do not
    inherit the flag) or was made inside it (they would keep it)."""
    proc = __import__("subprocess").run([__import__("sys").executable, "-c", _FLUSH_THREADS, when],
                                        capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["True", "0", str(1 << 20)]


def test_sittings_record_whether_subnormals_were_flushed(tmp_path, monkeypatch):
    from posbias.storage import store

    monkeypatch.setattr(store, "CACHE_DIR_ENV_DEFAULT", None, raising=False)
    st = {}
    orig = ck.save

    def keep(path, obj):
        st.update(obj)
        orig(path, obj)

    monkeypatch.setattr(ck, "save", keep)
    train.train_units([_unit(steps=2)], checkpoint_dir=tmp_path, progress=False, log=lambda s: None)
    assert st["sittings"][-1]["flush_denormal"] in (True, False)
    assert st["sittings"][-1]["flush_denormal"] == (__import__("platform").machine() in ("x86_64", "AMD64"))
