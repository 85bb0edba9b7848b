"""The CUDA path of training, run where torch sees a GPU and skipped elsewhere (CI has none; a maintainer
runs it on a GPU machine, as `benchmarks/README.md` records): on the GPU a unit trains to the same bits
twice, resumes from a checkpoint to the same bits, agrees with the CPU within float32 accumulation, and a
checkpoint written there resumes on the CPU. Unlike the CPU's, a unit's bits on the GPU depend on its
ensemble: the batched products of another ensemble size round otherwise, within the same tolerance."""
import pytest
import torch
from training_helpers import _crash_at_step, _unit

from posbias import training as train
from posbias.training import units as units_mod

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device torch can see")

# Training losses of one unit on the CPU and on the GPU, from the same weights and batches, differ by the
# order of float32 sums only (an ensemble against alone on the GPU: 2.4e-7 after 6 steps). Measured on
# the CPU for this 30-step unit: another seed moves its losses by 7.9e-2, the decay mask in place of the
# causal one by only 1.3e-4, and RoPE in place of No PE by nothing at float32 (attention is still near
# uniform this early). So the tolerance catches wrong arithmetic and wrong data, barely a wrong mask,
# and not a wrong position encoding.
LOSS_TOLERANCE = 1e-4


def _train(u, **kw):
    return train.train_units([u], progress=False, **kw)[0]


def test_the_gpu_is_the_device_chosen(monkeypatch):
    monkeypatch.setenv("POSBIAS_DEVICE", "auto")
    assert units_mod.device() == torch.device("cuda")


def _resumed_after_a_crash(u, tmp_path, monkeypatch, on: str):
    """``u`` trained on the GPU, stopped by an exception in step 7 (a checkpoint after every step), then
    resumed on the device ``on``: the resumed run's result."""
    monkeypatch.setenv("POSBIAS_DEVICE", "cuda")
    _crash_at_step(monkeypatch, 7, KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        _train(u, checkpoint_dir=tmp_path, checkpoint_seconds=0.0)
    monkeypatch.undo()
    monkeypatch.setenv("POSBIAS_DEVICE", on)
    lines = []
    resumed = _train(u, checkpoint_dir=tmp_path, checkpoint_seconds=0.0, log=lines.append)
    assert any("resumed from step 7/" in s for s in lines)
    return resumed


def test_cuda_training_is_deterministic_and_resumes_to_the_same_bits(tmp_path, monkeypatch):
    monkeypatch.setenv("POSBIAS_DEVICE", "cuda")
    u = _unit(steps=12)
    ref, again = _train(u), _train(u)
    assert ref["curves"] == again["curves"] and ref["ic_accuracy"] == again["ic_accuracy"]
    resumed = _resumed_after_a_crash(u, tmp_path, monkeypatch, on="cuda")
    assert resumed["curves"] == ref["curves"] and resumed["ic_accuracy"] == ref["ic_accuracy"]


@pytest.mark.parametrize("pe", ["none", "rope"])
def test_cuda_agrees_with_the_cpu_within_float32_sums(monkeypatch, pe):
    u = _unit(steps=30, pe=pe)
    monkeypatch.setenv("POSBIAS_DEVICE", "cpu")
    cpu = _train(u)
    monkeypatch.setenv("POSBIAS_DEVICE", "cuda")
    gpu = _train(u)
    assert cpu["curves"]["step"] == gpu["curves"]["step"]
    gap = max(abs(a - b) for a, b in zip(cpu["curves"]["loss"], gpu["curves"]["loss"]))
    assert gap < LOSS_TOLERANCE, f"CPU and GPU losses {gap:.2e} apart"


def test_a_checkpoint_written_on_the_gpu_resumes_on_the_cpu(tmp_path, monkeypatch):
    u = _unit(steps=12)
    monkeypatch.setenv("POSBIAS_DEVICE", "cuda")
    ref = _train(u)
    resumed = _resumed_after_a_crash(u, tmp_path, monkeypatch, on="cpu")
    gap = max(abs(a - b) for a, b in zip(ref["curves"]["loss"], resumed["curves"]["loss"]))
    assert gap < LOSS_TOLERANCE


def test_on_the_gpu_a_unit_in_an_ensemble_agrees_with_it_alone_within_float32_sums(monkeypatch):
    monkeypatch.setenv("POSBIAS_DEVICE", "cuda")
    units = [_unit(0, steps=30), _unit(1, steps=30, pe="rope", residual=True), _unit(2, steps=30, mask="decay")]
    together = train.train_units(units, progress=False)
    for u, got in zip(units, together):
        alone = _train(u)
        gap = max(abs(a - b) for a, b in zip(got["curves"]["loss"], alone["curves"]["loss"]))
        assert gap < LOSS_TOLERANCE, f"{u.config}: ensemble and alone {gap:.2e} apart"
