"""posbias.storage.provenance: what a stored result says about the code, the environment and the processor."""
import copy
from pathlib import Path

import pytest
import torch
from provenance_helpers import AMD, CONTRADICTIONS, GPU, INTEL, NUM, _consistent, _sitting

from posbias.storage import provenance


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
    from posbias.science.model import DEFAULT_ENGINE

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
    from posbias.science.model import DEFAULT_ENGINE, MemberConfig
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


# --------------------------------------------------------------------------- a unit's summary (issue 95)

def test_a_summary_is_the_sittings_common_value_or_mixed_with_the_list():
    """Where the sittings agree, the summary says their value; where they do not, "mixed" and the distinct
    values in the order the sittings first give them. The GPU sittings of issue 95's confirmation units
    record the same numerics as their CPU sitting (a GPU sitting's numerics name its host's CPU), so the
    numerics agree and numerics_uniform is still False: the device they ran on differs."""
    same = provenance.summary([_sitting(), _sitting(from_step=5)])
    assert same["device"] == "cpu" and same["python"] == "3.11.7" and same["packages"]["torch"] == "2.13.0+cpu"
    assert same["numerics"] == NUM and same["numerics_uniform"] is True and same["mixed"] == {}
    assert same["git"] == {"commit": "a" * 40, "dirty": False} and same["device_name"] is None

    cpu = _sitting(from_step=19025)
    s = provenance.summary([GPU, GPU, cpu])
    assert s["device"] == "mixed" and s["mixed"]["device"] == ["cuda", "cpu"]
    assert s["python"] == "mixed" and s["mixed"]["python"] == ["3.12.3", "3.11.7"]
    assert s["packages"]["torch"] == "mixed" and s["mixed"]["packages.torch"] == ["2.11.0", "2.13.0+cpu"]
    assert s["git"]["commit"] == "mixed" and s["mixed"]["git.commit"] == ["d" * 40, "a" * 40]
    assert s["git"]["dirty"] == "mixed" and s["mixed"]["git.dirty"] == [True, False]
    assert s["numerics"] == NUM and s["numerics_uniform"] is False
    assert s["cpu"] == "mixed" and s["mixed"]["cpu"] == [INTEL, AMD]
    # two CPUs of one vendor and the same numerics are uniform; Intel and AMD AVX-512 round otherwise
    assert provenance.summary([_sitting(), _sitting(cpu={**AMD, "model": "2"})])["numerics_uniform"] is True
    assert provenance.summary([_sitting(), _sitting(cpu=INTEL)])["numerics_uniform"] is False


def test_numerics_uniform_is_true_only_when_every_sitting_records_the_same_numerics():
    other = {**NUM, "torch_threads": 2}
    assert provenance.summary([_sitting(), _sitting(numerics=other)])["numerics_uniform"] is False
    part = provenance.summary([{k: v for k, v in _sitting().items() if k != "numerics"}, _sitting()])
    assert part["numerics"] == "mixed" and part["mixed"]["numerics"] == [None, NUM]
    assert part["numerics_uniform"] is False                       # one sitting's numerics are not known
    none = provenance.summary([{k: v for k, v in _sitting().items() if k != "numerics"}])
    assert none["numerics"] is None and none["numerics_uniform"] is None     # nothing recorded, nothing claimed


def test_with_summary_keeps_the_records_own_fields_and_replaces_the_storing_processs():
    """A stored unit's provenance: the record's start, wall time and seeds, then the summary of its sittings
    over whatever the storing process (a campaign driver, which trains nothing) said of itself."""
    driver = {**_sitting(python="3.13.0", torch_threads=2, numerics={**NUM, "flush_denormal": False}),
              "started": "t", "wall_seconds": 5.0, "seeds": [3]}
    prov = provenance.with_summary(driver, [GPU, _sitting()])
    assert prov["started"] == "t" and prov["wall_seconds"] == 5.0 and prov["seeds"] == [3]
    assert prov["python"] == "mixed" and prov["torch_threads"] == 1 and prov["numerics"] == NUM
    assert prov["sittings"] == [GPU, _sitting()] and provenance.summary_contradictions(prov) == []
    assert "mixed" not in provenance.with_summary(driver, [_sitting()])        # no list where nothing is mixed
    assert provenance.with_summary(driver, []) == driver                       # its own one sitting


def test_a_summary_derived_from_its_sittings_contradicts_nothing():
    assert provenance.summary_contradictions(_consistent()) == []
    legacy = {"git": {"commit": "a" * 40, "dirty": False}, "device": "cpu"}   # no sittings: its own one sitting
    assert provenance.summary_contradictions(legacy) == []


@pytest.mark.parametrize("kind", list(CONTRADICTIONS))
def test_each_kind_of_contradiction_is_found_and_named(kind):
    edit, field = CONTRADICTIONS[kind]
    prov = copy.deepcopy(_consistent())
    edit(prov)
    found = provenance.summary_contradictions(prov)
    assert found and field in [f for f, _ in found], found


def test_a_sitting_without_a_commit_must_say_why():
    """A sitting (or a record without sittings) that records no commit needs a reason: its own
    ``git.commit_missing_reason`` (what git_state writes now), or the record's (stated for sittings stored
    before sittings could say it); with one, a mixed commit is no contradiction."""
    lost = _sitting(git={"commit": None, "dirty": None})
    prov = provenance.with_summary({}, [lost, _sitting()])
    assert [f for f, _ in provenance.summary_contradictions(prov)] == ["git.commit"]
    assert "sitting 1 of 2 records no commit" in provenance.summary_contradictions(prov)[0][1]
    assert provenance.summary_contradictions({**prov, "commit_missing_reason": "not recorded at the time"}) == []
    said = _sitting(git={"commit": None, "dirty": None, "commit_missing_reason": "fatal: not a git repository"})
    assert provenance.summary_contradictions(provenance.with_summary({}, [said, _sitting()])) == []
    assert provenance.summary(([said]))["git"] == {"commit": None, "dirty": None}     # a reason is no fact of code
    assert [f for f, _ in provenance.summary_contradictions({"git": {"commit": None}})] == ["git.commit"]


def test_git_state_says_why_it_has_no_commit(tmp_path, monkeypatch):
    monkeypatch.delenv("POSBIAS_GIT_COMMIT", raising=False)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    state = provenance.git_state(tmp_path)
    assert state["commit"] is None and "not a git repository" in state["commit_missing_reason"].lower()
    here = provenance.git_state()
    assert here["commit"] and "commit_missing_reason" not in here


def test_a_mixed_record_device_is_no_device_for_its_sittings():
    assert provenance.sitting_device({}, {"device": "mixed"}) == "cpu"
    assert provenance.sitting_device({"device": "cuda"}, {"device": "mixed"}) == "cuda"


def test_uncommitted_sittings_and_unit_words():
    prov = provenance.with_summary({}, [GPU, _sitting()])
    assert provenance.uncommitted_sittings(prov) == [GPU]
    assert provenance.uncommitted_sittings({"git": {"dirty": True}}) == [{"git": {"dirty": True}}]
    assert provenance.uncommitted_sittings({"git": {"dirty": None}}) == []
    p = {"mask": "decay", "pe": "none", "depth": 2, "seed": 9, "steps": 500000, "window": None, "prefix": None,
         "target_slots": None, "residual": False, "test_seed": 20250201}
    assert provenance.unit_words(p) == "decay/none depth 2 seed 9, 500,000 steps (test draw 20250201)"
