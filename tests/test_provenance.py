"""posbias.provenance: what a stored result says about the code, the environment and the processor."""
from pathlib import Path

import torch

from posbias import provenance


def test_cpu_info_names_the_processor_and_torch_kernels():
    cpu = provenance.cpu_info()
    assert cpu["model_name"] and cpu["torch_capability"] == torch.backends.cpu.get_cpu_capability()
    if Path("/proc/cpuinfo").exists():
        first = Path("/proc/cpuinfo").read_text().split("\n\n")[0]
        assert f"model name\t: {cpu['model_name']}" in first and f"cpu family\t: {cpu['family']}" in first
    assert provenance.cpu_info() == cpu                         # stable: records of one machine compare equal


def test_collect_records_the_cpu_threads_and_commit():
    rec = provenance.collect(wall_seconds=1.5, seeds=[3], device="cpu")
    assert rec["cpu"] == provenance.cpu_info() and rec["torch_threads"] == torch.get_num_threads()
    assert rec["wall_seconds"] == 1.5 and rec["seeds"] == [3] and rec["device"] == "cpu"
    assert set(rec["git"]) == {"commit", "dirty"} and rec["packages"]["torch"] == torch.__version__


def test_numerics_records_what_decides_a_units_bits():
    """The kernels torch dispatches to, the thread count, the engine, and the subnormal mode as it is
    (measured on the calling thread: on while flushing, off after)."""
    from posbias.model import DEFAULT_ENGINE

    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        can_flush = torch.set_flush_denormal(True)
        on = provenance.numerics()
        torch.set_flush_denormal(False)
        off = provenance.numerics(engine="v3")
    finally:
        torch.set_flush_denormal(False)
        torch.set_num_threads(before)
    assert on["cpu_capability"] == torch.backends.cpu.get_cpu_capability() and on["torch_threads"] == 1
    assert on["engine"] == DEFAULT_ENGINE and off["engine"] == "v3"
    assert on["flush_denormal"] is can_flush and off["flush_denormal"] is False
    assert provenance.collect(device="cpu")["numerics"] == provenance.numerics()


def test_kernel_kind_is_vendor_and_torch_capability():
    zen4 = {"vendor": "AuthenticAMD", "family": "25", "model": "17", "torch_capability": "AVX512"}
    zen5 = {**zen4, "family": "26", "model": "2"}
    assert provenance.kernel_kind(zen4) == provenance.kernel_kind(zen5) == "AuthenticAMD AVX512"
    assert provenance.kernel_kind({**zen4, "torch_capability": "AVX2"}) == "AuthenticAMD AVX2"
    assert provenance.kernel_kind({**zen4, "vendor": "GenuineIntel"}) == "GenuineIntel AVX512"
    assert provenance.kernel_kind(None) is None and provenance.kernel_kind({"model_name": "x"}) is None
    assert provenance.kernel_kind(provenance.cpu_info()).endswith(torch.backends.cpu.get_cpu_capability())


def test_a_training_sitting_records_its_numerics(tmp_path):
    """Each sitting of a training (kept in its checkpoint, copied into the stored units' provenance)
    records the numerics it trained under: subnormals flushed inside training, one thread, the engine."""
    from posbias.model import DEFAULT_ENGINE, MemberConfig
    from posbias.training import checkpoints as ck
    from posbias.training.loop import train_units
    from posbias.training.units import Unit

    unit = Unit(1, MemberConfig("decay"), None, 0, steps=2, batch_size=8, eval_every=2, n_test=16, n_sweep=4,
                n_sink=4)
    import os

    can_flush = torch.set_flush_denormal(False)     # whether this CPU can flush (and leave it off)
    can_flush = can_flush and os.environ.get("POSBIAS_FLUSH_DENORMAL", "1").strip() != "0"
    train_units([unit], checkpoint_dir=tmp_path, progress=False, threads=1, keep_checkpoint=True, log=lambda _: None)
    (sitting,) = ck.load(tmp_path / "state.pt", [unit], torch.device("cpu"), lambda _: None)["sittings"]
    assert sitting["numerics"] == {"cpu_capability": torch.backends.cpu.get_cpu_capability(), "torch_threads": 1,
                                   "flush_denormal": can_flush, "engine": DEFAULT_ENGINE}
    assert provenance.flushes_denormals() is False                  # and flushing stopped with the training


def test_host_kind_reads_every_sitting():
    """One kind where every sitting names the same kernels; mixed across kinds; not recorded where a
    sitting lacks them; GPU where a sitting ran on CUDA; a record without sittings reads its own CPU."""
    amd = {"vendor": "AuthenticAMD", "torch_capability": "AVX512"}
    amd2 = {**amd, "torch_capability": "AVX2"}
    assert provenance.host_kind({"sittings": [{"cpu": amd}, {"cpu": dict(amd, model="2")}]}) == "AuthenticAMD AVX512"
    assert provenance.host_kind({"sittings": [{"cpu": amd}, {"cpu": amd2}]}) == "mixed"
    assert provenance.host_kind({"sittings": [{"cpu": amd}, {"cpu": {"vendor": "AuthenticAMD"}}]}) == "not recorded"
    assert provenance.host_kind({"sittings": [{"cpu": amd, "device": "cuda"}]}) == "GPU"
    assert provenance.host_kind({"cpu": amd2}) == "AuthenticAMD AVX2"
    assert provenance.host_kind({}) == "not recorded"


def test_is_gpu_and_sitting_device_are_the_one_reading_of_a_device():
    """Every CUDA index is a GPU, the CPU and a missing device are not; a sitting without a device takes
    the record's, and a record without one ran on the CPU. Status, host kind and check-data all read it."""
    from posbias.training.status import kind

    assert [provenance.is_gpu(d) for d in ("cuda", "cuda:1", "cpu", None, "")] == [True, True, False, False, False]
    assert provenance.sitting_device({}, {"device": "cuda:0"}) == "cuda:0"
    assert provenance.sitting_device({"device": "cpu"}, {"device": "cuda:0"}) == "cpu"
    assert provenance.sitting_device({}, {}) == "cpu"
    assert (kind("cuda:1"), kind(None)) == ("gpu", "cpu")
    assert provenance.host_kind({"device": "cuda", "sittings": [{"cpu": {"vendor": "A", "torch_capability": "X"}}]}) \
        == "GPU"                                                  # the record's device, where the sitting has none
