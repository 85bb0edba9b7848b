"""Synthetic sittings and summaries for the tests of a unit's provenance (issue 95): a GPU sitting like those
the confirmation units began with, CPU sittings, and one edit per kind of contradiction between a summary
and its sittings."""
from posbias.storage import provenance

NUM = {"cpu_capability": "AVX512", "torch_threads": 1, "flush_denormal": True, "engine": "v2"}
AMD = {"vendor": "AuthenticAMD", "model_name": "AMD EPYC", "torch_capability": "AVX512"}
INTEL = {"vendor": "GenuineIntel", "model_name": "Intel(R) Xeon(R) Processor", "torch_capability": "AVX512"}


def _sitting(**kw):
    """A sitting as training records it (provenance.collect plus where it began), CPU by default."""
    base = {"device": "cpu", "cpu": AMD, "cpu_count": 2, "machine": "x86_64", "cuda_available": False,
            "platform": "Linux", "python": "3.11.7", "packages": {"torch": "2.13.0+cpu", "numpy": "2.4.6"},
            "git": {"commit": "a" * 40, "dirty": False}, "numerics": NUM, "torch_threads": 1, "from_step": 0}
    return {**base, **kw}


GPU = _sitting(device="cuda", device_name="NVIDIA H200", cpu=INTEL, cpu_count=16, cuda_available=True,
               python="3.12.3", packages={"torch": "2.11.0", "numpy": "2.5.2"},
               git={"commit": "d" * 40, "dirty": True})


def _consistent(**record):
    """A provenance whose summary is derived from a GPU sitting and a CPU one (``record``: its own fields)."""
    return provenance.with_summary({"started": "t", "seeds": [0], **record}, [GPU, _sitting(from_step=5)])


#: One edit per kind of contradiction between a summary and its sittings, and the field it names.
CONTRADICTIONS = {
    "device": (lambda p: p.update(device="cpu"), "device"),
    "python": (lambda p: p.update(python="3.11.7"), "python"),
    "torch": (lambda p: p["packages"].update(torch="2.13.0+cpu"), "packages.torch"),
    "numerics": (lambda p: p.update(numerics={**NUM, "torch_threads": 2}), "numerics"),
    "numerics_uniform": (lambda p: p.update(numerics_uniform=True), "numerics_uniform"),
    "threads": (lambda p: p.update(torch_threads=2), "torch_threads"),
    "commit": (lambda p: p["git"].update(commit=None), "git.commit"),
    "dirty": (lambda p: p["git"].update(dirty=False), "git.dirty"),
    "mixed list": (lambda p: p["mixed"].update(device=["cpu", "cuda"]), "device"),
    "mixed where the sittings agree": (lambda p: p["mixed"].update(torch_threads=[1, 2]), "mixed"),
    "a field no sitting records": (lambda p: p["packages"].update(scipy="1.17.1"), "packages.scipy"),
    "a sitting without a commit": (lambda p: p["sittings"][1]["git"].update(commit=None), "git.commit"),
}
