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
           "host_kind", "device_info", "MIXED", "SUMMARY_FIELDS", "sitting_numerics", "summary", "with_summary",
           "summary_contradictions", "uncommitted_sittings", "unit_words", "SUMMARY_PROBLEM", "summary_problem",
           "record_threads", "code_gaps", "suite_record_provenance",
           "collect", "canonical_json", "sha256_bytes", "sha256_file"]

ROOT = Path(__file__).resolve().parents[2]
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
    """``{"commit": sha or None, "dirty": bool or None}`` of the repository holding the code; without a
    commit, ``commit_missing_reason`` says why (git's own words: no repository, no git), so that a
    sitting never lacks its commit silently (issue 95). ``dirty`` looks at tracked files of ``posbias/``
    and ``notebooks/`` only.

    ``POSBIAS_GIT_COMMIT`` overrides (for builds from an exported tree)."""
    if os.environ.get("POSBIAS_GIT_COMMIT"):
        return {"commit": os.environ["POSBIAS_GIT_COMMIT"], "dirty": os.environ.get("POSBIAS_GIT_DIRTY") == "1"}
    why = None
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        commit = head.stdout.strip() or None
        if commit is None:
            why = (head.stderr.strip().splitlines() or [f"git rev-parse HEAD exited {head.returncode}"])[0][:200]
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", "posbias", "notebooks"],
                                cwd=root, capture_output=True, text=True, timeout=10)
        dirty = bool(status.stdout.strip()) if status.returncode == 0 else None
    except (OSError, subprocess.SubprocessError) as e:
        commit, dirty, why = None, None, f"git could not be run ({type(e).__name__}: {str(e)[:160]})"
    return {"commit": commit, "dirty": dirty, **({"commit_missing_reason": why} if commit is None else {})}


def package_versions() -> dict[str, str]:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return out


def suite_record_provenance(command: str, wall_seconds: float | None = None, **extra: Any) -> dict[str, Any]:
    """The provenance of a record the test suite writes into ``data/mutants/`` (a mutmut run or sample, the
    mutation suite's kill table): the command that made it, the code's commit (:func:`git_state`), the package
    versions (mutmut's too), the machine (:func:`cpu_info`), the UTC date and the wall time, plus ``extra``."""
    import time

    versions = package_versions()
    try:
        versions["mutmut"] = importlib.metadata.version("mutmut")
    except importlib.metadata.PackageNotFoundError:
        pass
    return {"command": command, "git": git_state(), "versions": versions, "cpu": cpu_info(),
            "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            **({"wall_seconds": round(wall_seconds)} if wall_seconds is not None else {}), **extra}


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
    (:data:`posbias.science.model.DEFAULT_ENGINE` unless ``engine``). Two runs agreeing in all four (and in the
    commit) give the same bits; on a different capability the same code rounds differently (issue 66:
    decay|2 seed 0 trained on an AVX2 and an AVX-512 host separates within 5,000 steps)."""
    out: dict[str, Any] = {"cpu_capability": None, "torch_threads": None, "flush_denormal": flushes_denormals(),
                           "engine": engine}
    try:
        import torch  # lazy: torch costs ~1.4s at import (and is optional here)

        out["cpu_capability"] = torch.backends.cpu.get_cpu_capability()
        out["torch_threads"] = torch.get_num_threads()
        if engine is None:
            # lazy: posbias.science.model (torch) costs ~1.4s at import
            from posbias.science.model import DEFAULT_ENGINE

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
    """The device one of ``prov``'s sittings ran on: its own, else the record's (unless that says
    :data:`MIXED`), else the CPU."""
    own = prov.get("device")
    return str(sitting.get("device") or (own if own != MIXED else None) or "cpu")


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


# --------------------------------------------------------------------------- a unit's summary

#: What a summary field says where its sittings disagree; the distinct values, in the order the
#: sittings first give them, are listed under the summary's ``mixed`` (``{"device": ["cuda", "cpu"]}``).
MIXED = "mixed"
#: The fields of a trained unit's summary (the top of its provenance) that describe where and with what it
#: trained: each is derived from the unit's sittings (:func:`summary`), never set beside them. ``packages``
#: and ``git`` are summarised key by key (``packages.torch``, ``git.commit``, ``git.dirty``).
SUMMARY_FIELDS = ("device", "device_name", "cpu", "cpu_count", "machine", "cuda_available", "platform", "python",
                  "packages", "git", "numerics", "torch_threads")
_BY_KEY = ("packages", "git")
#: Keys of a sitting's ``git`` that are no fact of the code (why a commit is missing): not summarised.
_NOT_SUMMARISED = ("commit_missing_reason",)


def sitting_numerics(sitting: dict[str, Any]) -> dict[str, Any] | None:
    """What decides the bits of one sitting's training: its :func:`numerics` and the kind of device it ran
    on (``"GPU <name>"``, else :func:`kernel_kind` of its CPU: Intel and AMD AVX-512 hosts round otherwise,
    and a GPU sitting's ``numerics`` name only its host's CPU). None for a sitting without numerics."""
    if sitting.get("numerics") is None:
        return None
    dev = sitting_device(sitting, {})
    host = f"GPU {sitting.get('device_name') or dev}" if is_gpu(dev) else kernel_kind(sitting.get("cpu"))
    return {**sitting["numerics"], "host": host}


def summary(sittings: list[dict[str, Any]]) -> dict[str, Any]:
    """A unit's summary, derived from its ``sittings`` (oldest first) and from nothing else: each field
    of :data:`SUMMARY_FIELDS` is the sittings' common value (None where none records it), or
    :data:`MIXED` with the distinct values listed under ``mixed`` (``"packages.torch"``, ``"git.commit"``
    for the keyed fields); ``numerics_uniform`` is True only where every sitting records its numerics
    and they agree, with the kind of device they ran on (:func:`sitting_numerics`), False where they
    do not, None where no sitting records them."""
    out: dict[str, Any] = {}
    mixed: dict[str, list[Any]] = {}

    def common(name: str, values: list[Any]) -> Any:
        distinct: list[Any] = []
        for v in values:
            if v not in distinct:
                distinct.append(v)
        if len(distinct) <= 1:
            return distinct[0] if distinct else None
        mixed[name] = distinct
        return MIXED

    for f in SUMMARY_FIELDS:
        if f in _BY_KEY:
            keys = dict.fromkeys(k for s in sittings for k in (s.get(f) or {}) if k not in _NOT_SUMMARISED)
            out[f] = {k: common(f"{f}.{k}", [(s.get(f) or {}).get(k) for s in sittings]) for k in keys}
        else:
            out[f] = common(f, [s.get(f) for s in sittings])
    nums = [sitting_numerics(s) for s in sittings]
    if any(n is not None for n in nums):
        out["numerics_uniform"] = all(n is not None for n in nums) and all(n == nums[0] for n in nums)
    else:
        out["numerics_uniform"] = None
    out["mixed"] = mixed
    return out


def with_summary(prov: dict[str, Any], sittings: list[dict[str, Any]]) -> dict[str, Any]:
    """``prov`` (a record's provenance: its start, wall time, seeds) with ``sittings`` and their
    :func:`summary` over every summary field it had: what a stored unit's provenance is. Without
    sittings, ``prov`` as it is (a record without sittings is its own one sitting)."""
    if not sittings:
        return dict(prov)
    summ = summary(sittings)
    if not summ["mixed"]:
        del summ["mixed"]                   # nothing mixed: no list to give
    return {**prov, **summ, "sittings": sittings}


def _at(prov: dict[str, Any], name: str) -> Any:
    head, _, key = name.partition(".")
    value = prov.get(head)
    return (value or {}).get(key) if key and isinstance(value, dict) else (None if key else value)


def _names(summ: dict[str, Any], prov: dict[str, Any]) -> list[str]:
    """The field names to compare: every flat summary field, and every key of a keyed one in either."""
    out = []
    for f in SUMMARY_FIELDS:
        if f in _BY_KEY:
            keys = dict.fromkeys([*(summ.get(f) or {}), *((prov.get(f) or {}) if isinstance(prov.get(f), dict)
                                                         else {})])
            out += [f"{f}.{k}" for k in keys if k not in _NOT_SUMMARISED]
        else:
            out.append(f)
    return out + ["numerics_uniform"]


def summary_contradictions(prov: dict[str, Any]) -> list[tuple[str, str]]:
    """Where a stored unit's provenance ``prov`` contradicts itself, as ``(field, what)`` pairs (empty
    when it does not):

    - a summary field (:data:`SUMMARY_FIELDS`, ``numerics_uniform``) whose stated value, or list of
      mixed values, is not what :func:`summary` derives from its sittings (a field a summary lacks
      reads as None);
    - a sitting that records no commit and does not say why (its ``git.commit_missing_reason``, or the
      record's ``commit_missing_reason`` for sittings stored before sittings could say it).

    A record without sittings is one sitting, its own provenance: only the second rule applies."""
    out: list[tuple[str, str]] = []
    sittings = prov.get("sittings") or []
    if sittings:
        want, stated_mixed = summary(sittings), prov.get("mixed") or {}
        for name in _names(want, prov):
            got, should = _at(prov, name), _at(want, name)
            got_list, should_list = stated_mixed.get(name), want["mixed"].get(name)
            if got != should or (should == MIXED and got_list != should_list):
                said = f"{got!r}" + (f" {got_list!r}" if got == MIXED else "")
                out.append((name, f"says {said}, its sittings {should!r}"
                                  + (f" {should_list!r}" if should == MIXED else "")))
        extra = sorted(set(stated_mixed) - set(want["mixed"]))
        if extra:
            out.append(("mixed", f"lists {', '.join(extra)} as mixed, its sittings agree in them"))
    for i, s in enumerate(sittings or [prov]):
        git = s.get("git") or {}
        if not git.get("commit") and not git.get("commit_missing_reason") and not prov.get("commit_missing_reason"):
            where = f"sitting {i + 1} of {len(sittings)}" if sittings else "the record (its own sitting)"
            out.append(("git.commit", f"{where} records no commit and does not say why"))
    return out


def unit_words(params: dict[str, Any], seed: bool = True) -> str:
    """A trained unit named from its stored ``params`` for a message: ``"decay/none depth 2 seed 9, 500,000
    steps"``, with its window, prefix, trained slots, residual stream and test draw where set; without
    ``seed``, the configuration its seeds share."""
    p = params
    extra = [f"{k} {p[k]}" for k in ("window", "prefix", "target_slots") if p.get(k) is not None]
    extra += ["residual"] if p.get("residual") else []
    extra += [f"test draw {p['test_seed']}"] if p.get("test_seed") is not None else []
    steps = f", {p['steps']:,} steps" if isinstance(p.get("steps"), int) else ""
    which = f" seed {p.get('seed')}" if seed else ""
    return (f"{p.get('mask')}/{p.get('pe')} depth {p.get('depth')}{which}{steps}"
            + (f" ({', '.join(extra)})" if extra else ""))


def uncommitted_sittings(prov: dict[str, Any]) -> list[dict[str, Any]]:
    """The sittings of a stored unit (a record without sittings: the record) that trained from a tree
    with uncommitted changes to ``posbias/`` or ``notebooks/`` (``git.dirty`` true)."""
    return [s for s in prov.get("sittings") or [prov] if (s.get("git") or {}).get("dirty") is True]


#: How a record's problem begins when its summary contradicts its sittings (its hash verifies).
SUMMARY_PROBLEM = "its summary contradicts its sittings"


def summary_problem(rec: dict[str, Any]) -> str | None:
    """Why a stored record's provenance contradicts itself (:func:`summary_contradictions`:
    a summary field that is not what its sittings say, a sitting with no commit and no reason), naming the
    unit and each field; None when it does not."""
    found = summary_contradictions(rec.get("provenance") or {})
    if not found:
        return None
    params = rec.get("params") or {}
    unit = unit_words(params) if "depth" in params else rec.get("experiment", "this record")
    return f"{SUMMARY_PROBLEM} ({unit}): " + "; ".join(f"{field} {what}" for field, what in found)


def record_threads(prov: dict[str, Any]) -> int | None:
    """The torch thread count a record was computed with: its summary's, or where its sittings differ
    ("mixed"), its last sitting's (no one count reproduces it)."""
    n = prov.get("torch_threads")
    if isinstance(n, int):
        return n
    last = (prov.get("sittings") or [{}])[-1].get("torch_threads")
    return last if isinstance(last, int) else None


def code_gaps(data: Path, experiment: str = "wu-units") -> dict[str, list[dict[str, Any]]]:
    """The records of ``experiment`` in ``data`` (``store.DATA``) whose code is not all in a commit, for the
    Status page: ``"uncommitted"``, those with a sitting from a tree with uncommitted changes
    (:func:`uncommitted_sittings`), and ``"no commit"``, those with a sitting that records no commit.
    Each ``{file, params, unit, sittings, of, commits, reason}``: the unit in words, how many of its
    ``of`` sittings, their commits (short) and, for no commit, why (the sitting's or the record's
    ``commit_missing_reason``)."""
    folder = Path(data) / experiment
    out: dict[str, list[dict[str, Any]]] = {"uncommitted": [], "no commit": []}
    for path in sorted(folder.glob("*.json")):
        rec = json.loads(path.read_text(encoding="utf-8"))
        prov, params = rec.get("provenance") or {}, rec.get("params") or {}
        sittings = prov.get("sittings") or [prov]
        dirty = uncommitted_sittings(prov)
        lost = [s for s in sittings if not (s.get("git") or {}).get("commit")]
        base = {"file": f"{experiment}/{path.name}", "params": params, "of": len(sittings),
                "unit": unit_words(params) if "depth" in params else path.stem}
        if dirty:
            out["uncommitted"].append({**base, "sittings": len(dirty), "commits": list(dict.fromkeys(
                str((s.get("git") or {}).get("commit"))[:7] for s in dirty))})
        if lost:
            why = [(s.get("git") or {}).get("commit_missing_reason") or prov.get("commit_missing_reason") for s in lost]
            out["no commit"].append({**base, "sittings": len(lost), "commits": [],
                                     "reason": "; ".join(dict.fromkeys(str(w) for w in why))})
    return out


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
