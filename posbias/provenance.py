"""Provenance of a result: code version, environment, device, time."""
from __future__ import annotations

import datetime as _dt
import hashlib
import importlib.metadata
import json
import os
import platform
import subprocess
from pathlib import Path
from typing import Any

__all__ = ["ROOT", "git_state", "package_versions", "cpu_info", "flushes_denormals", "numerics", "kernel_kind",
           "host_kind", "device_info",
           "collect", "canonical_json", "sha256_bytes", "sha256_file"]

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("posbias", "torch", "numpy", "scipy", "matplotlib", "seaborn", "jupyter-book", "jupytext",
            "papermill", "transformers")


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys and no whitespace: the form that is hashed."""
    return json.dumps(obj, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=True)


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def git_state(root: Path = ROOT) -> dict[str, Any]:
    """``{"commit": sha or None, "dirty": bool or None}`` of the repository holding the code.

    ``POSBIAS_GIT_COMMIT`` overrides (for builds from an exported tree)."""
    if os.environ.get("POSBIAS_GIT_COMMIT"):
        return {"commit": os.environ["POSBIAS_GIT_COMMIT"], "dirty": os.environ.get("POSBIAS_GIT_DIRTY") == "1"}
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                                timeout=10).stdout.strip() or None
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", "posbias", "notebooks"],
                                cwd=root, capture_output=True, text=True, timeout=10)
        dirty = bool(status.stdout.strip()) if status.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        commit, dirty = None, None
    return {"commit": commit, "dirty": dirty}


def package_versions() -> dict[str, str]:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return out


def cpu_info() -> dict[str, Any]:
    """The processor, as far as floating-point roundings go: model name, family/model/stepping (from
    ``/proc/cpuinfo`` where it exists) and the vector kernels torch dispatches to. Two CPUs with
    equal records run the same kernels; on different ones the same code may round differently."""
    info: dict[str, Any] = {"model_name": platform.processor() or platform.machine()}
    try:
        fields = {}
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if not line.strip():
                break                                   # the first processor is enough
            key, _, value = line.partition(":")
            fields[key.strip()] = value.strip()
        info = {"model_name": fields.get("model name", info["model_name"]), "vendor": fields.get("vendor_id"),
                "family": fields.get("cpu family"), "model": fields.get("model"), "stepping": fields.get("stepping")}
    except OSError:
        pass
    try:
        import torch  # lazy: torch costs ~1.4s at import (and is optional here)

        info["torch_capability"] = torch.backends.cpu.get_cpu_capability()
    except (ImportError, AttributeError):
        pass
    return info


def flushes_denormals() -> bool | None:
    """Whether the calling thread flushes subnormal floats to zero now, measured (not asked of a flag):
    ``2^-126 / 2`` computed by torch is 0 with flushing (FTZ/DAZ) and ``2^-127`` without. None without torch."""
    try:
        import torch  # lazy: torch costs ~1.4s at import (and is optional here)
    except ImportError:
        return None
    tiny = torch.tensor([2.0 ** -126], dtype=torch.float32)
    return bool((tiny / 2).item() == 0.0)


def numerics(engine: str | None = None) -> dict[str, Any]:
    """What decides a trained unit's numbers to the last bit, beside its parameters and the code: the
    vector kernels torch dispatches to (``torch.backends.cpu.get_cpu_capability()``: AVX2, AVX512, ...),
    the torch thread count, whether subnormals are flushed (measured on the calling thread: inside
    training's ``flushed_denormals`` block it says True) and the model's engine version
    (:data:`posbias.model.DEFAULT_ENGINE` unless ``engine``). Two runs agreeing in all four (and in the
    commit) give the same bits; on a different capability the same code rounds differently (issue 66:
    decay|2 seed 0 trained on an AVX2 and an AVX-512 host separates within 5,000 steps)."""
    out: dict[str, Any] = {"cpu_capability": None, "torch_threads": None, "flush_denormal": flushes_denormals(),
                           "engine": engine}
    try:
        import torch  # lazy: torch costs ~1.4s at import (and is optional here)

        out["cpu_capability"] = torch.backends.cpu.get_cpu_capability()
        out["torch_threads"] = torch.get_num_threads()
        if engine is None:
            from .model import DEFAULT_ENGINE  # lazy: posbias.model (torch) costs ~1.4s at import

            out["engine"] = DEFAULT_ENGINE
    except (ImportError, AttributeError):
        pass
    return out


def kernel_kind(cpu: dict[str, Any] | None) -> str | None:
    """The kind of host a record's ``cpu`` (:func:`cpu_info`) names, as far as training's bits go: the
    vendor (MKL picks its matrix kernels by it) and torch's capability (ATen's vector kernels), e.g.
    ``"AuthenticAMD AVX2"``; None for a record without the CPU. Measured for issue 66: units trained on
    AMD family 25 model 17 and family 26 model 2 (both AVX512) agree bit for bit; AMD AVX2 gives other
    bits, reproduced on an AVX-512 AMD host with ``ATEN_CPU_CAPABILITY=avx2``; Intel AVX512 other bits
    again, which no setting of an AMD host reproduces."""
    if not cpu or not cpu.get("torch_capability"):
        return None
    return f"{cpu.get('vendor') or cpu.get('model_name')} {cpu['torch_capability']}"


def is_gpu(device: str | None) -> bool:
    """Whether a sitting's ``device`` (``"cpu"``, ``"cuda"``, ``"cuda:1"``; None reads as the CPU) is an
    accelerator, whose kernels round otherwise than any CPU's."""
    return str(device or "cpu").split(":")[0] != "cpu"


def sitting_device(sitting: dict[str, Any], prov: dict[str, Any]) -> str:
    """The device one of ``prov``'s sittings ran on: its own, else the record's, else the CPU."""
    return str(sitting.get("device") or prov.get("device") or "cpu")


def host_kind(prov: dict[str, Any]) -> str:
    """The kind of host (:func:`kernel_kind`) a stored result's provenance ``prov`` says it was computed
    on, over all its sittings: that kind; ``"mixed"`` where its sittings ran on hosts of two kinds (no
    single host reproduces its bits); ``"not recorded"`` where a sitting (or, without sittings, the
    record) does not name its CPU's kernels; ``"GPU"`` where a sitting ran on CUDA."""
    sittings = prov.get("sittings") or [prov]
    kinds = set()
    for s in sittings:
        kinds.add("GPU" if is_gpu(sitting_device(s, prov)) else kernel_kind(s.get("cpu")))
    if None in kinds:
        return "not recorded"
    return kinds.pop() if len(kinds) == 1 else "mixed"


def device_info(device: str | None = None) -> dict[str, Any]:
    """The compute device in use, the processor (:func:`cpu_info`), the thread count and :func:`numerics`
    (imports torch lazily)."""
    info: dict[str, Any] = {"machine": platform.machine(), "cpu_count": os.cpu_count(), "cpu": cpu_info(),
                            "numerics": numerics()}
    try:
        import torch  # lazy: torch costs ~1.4s at import (and is optional here)

        info["torch_threads"] = torch.get_num_threads()
        info["cuda_available"] = torch.cuda.is_available()
        if device is None:
            device = "cuda" if torch.cuda.is_available() else "cpu"
        info["device"] = device
        if device.startswith("cuda") and torch.cuda.is_available():
            info["device_name"] = torch.cuda.get_device_name(0)
    except ImportError:
        info["device"] = device or "cpu"
    return info


def now_iso() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def collect(*, started: str | None = None, wall_seconds: float | None = None, seeds: list[int] | None = None,
            device: str | None = None) -> dict[str, Any]:
    """A provenance record: git commit and dirty flag, package versions, python, device, time, seeds."""
    return {
        "git": git_state(),
        "packages": package_versions(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        **device_info(device),
        "started": started or now_iso(),
        "wall_seconds": wall_seconds,
        "seeds": seeds or [],
    }


def source_date_epoch(root: Path = ROOT) -> str:
    """``SOURCE_DATE_EPOCH`` if set, else the commit time of HEAD: fixed for a commit, so builds repeat."""
    if os.environ.get("SOURCE_DATE_EPOCH"):
        return os.environ["SOURCE_DATE_EPOCH"]
    try:
        out = subprocess.run(["git", "log", "-1", "--format=%ct"], cwd=root, capture_output=True, text=True,
                             timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        out = ""
    return out or "1767225600"  # 2026-01-01, for trees exported without git
