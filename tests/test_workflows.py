"""The GitHub workflows run what we run: each step is a make target that exists (or .ci/run), so a green
workflow means the same commands passed that the README and the GPU host use. The container workflow builds the
image and the devcontainer with actions (no command of ours), on every change to what the image copies."""

from __future__ import annotations

import fnmatch
import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

from booktools.paths import ROOT

WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))


def make_targets() -> set[str]:
    return set(re.findall(r"^([a-z][a-z0-9-]*):", (ROOT / "Makefile").read_text(), flags=re.MULTILINE))


def run_commands(path: Path) -> list[str]:
    workflow = yaml.safe_load(path.read_text())
    return [step["run"] for job in workflow["jobs"].values() for step in job.get("steps", []) if "run" in step]


def test_there_are_the_four_workflows():
    assert {path.stem for path in WORKFLOWS} == {"ci", "gpu", "book", "container"}


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_every_step_calls_a_make_target_that_exists(path):
    targets = make_targets()
    for command in run_commands(path):
        words = shlex.split(command, comments=True)
        if words == [".ci/run"]:
            continue
        assert words[0] == "make", f"{path.name}: {command!r} is not a make target"
        called = [word for word in words[1:] if "=" not in word]
        assert called and set(called) <= targets, f"{path.name}: {command!r} calls a target the Makefile lacks"


def test_a_change_to_anything_the_chapters_run_triggers_the_gpu_workflow():
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "gpu.yml").read_text())
    triggers = workflow[True] if True in workflow else workflow["on"]  # YAML 1.1 reads `on` as True
    patterns = triggers["pull_request"]["paths"]
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    # what a GPU run reads: every file but the prose about the repository and its licences, the drafts, the runs
    # it records and the CI machinery of its own
    not_run = (
        *("README.md", "CONTRIBUTING.md", "ARCHITECTURE.md", "LICENSE", ".gitignore", ".ci/", ".github/"),
        *("drafts/", "runs/", "_static/", "_config.yml", "_toc.yml"),
        *("CHANGELOG.md", "CITATION.cff", "Dockerfile", ".dockerignore", ".devcontainer/"),  # the container workflow's
    )
    run_by_the_gpu = [path for path in tracked if not path.startswith(not_run)]
    missed = [path for path in run_by_the_gpu if not any(fnmatch.fnmatch(path, p) for p in patterns)]
    assert run_by_the_gpu and missed == [], f"changes to these would not run the GPU workflow: {missed[:5]}"


def triggers(name: str) -> dict:
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / f"{name}.yml").read_text())
    return workflow[True] if True in workflow else workflow["on"]  # YAML 1.1 reads `on` as True


def test_a_change_to_what_the_image_copies_rebuilds_it():
    """The image copies the lock, then the whole working tree but .dockerignore's paths: every tracked file the
    image or the devcontainer uses triggers the container workflow (on a push to main and on a pull request)."""
    on = triggers("container")
    assert on["push"]["paths"] == on["pull_request"]["paths"]
    patterns = on["push"]["paths"]
    copied = re.findall(r"^COPY (\S+)", (ROOT / "Dockerfile").read_text(), flags=re.MULTILINE)
    assert "locks/gpu-cp312-linux-x86_64.txt" in copied and "." in copied
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    used = [p for p in tracked if p.startswith(("locks/", "support/", "booktools/", ".devcontainer/")) or "/" not in p]
    used = [p for p in used if p.endswith((".py", ".txt", ".toml", ".json", ".md")) or p in ("Dockerfile", "Makefile")]
    missed = [
        p
        for p in used
        if p not in ("CHANGELOG.md", "CITATION.cff", "CONTRIBUTING.md", "ARCHITECTURE.md")
        and not any(fnmatch.fnmatch(p, x) for x in patterns)
    ]
    assert missed == [], f"changes to these would not rebuild the image: {missed}"


def test_the_image_installs_the_lock_make_gpu_env_installs():
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert re.search(r"^ARG CUDA_IMAGE=nvidia/cuda:13\.\S+-runtime-ubuntu24\.04$", dockerfile, flags=re.MULTILINE)
    assert "python3.12 -m venv" in dockerfile and "--requirement /tmp/lock.txt" in dockerfile
    planned = subprocess_output(["make", "--no-print-directory", "-n", "gpu-env"])
    assert "--constraint locks/gpu-cp312-linux-x86_64.txt" in planned


def subprocess_output(command: list[str]) -> str:
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True).stdout


def test_the_devcontainer_is_built_from_the_dockerfile():
    text = (ROOT / ".devcontainer" / "devcontainer.json").read_text()
    config = json.loads("\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//")))
    assert config["build"] == {"dockerfile": "../Dockerfile", "context": ".."}
    assert config["hostRequirements"]["gpu"] == "optional"  # CI has no GPU; a GPU host passes its GPU in
