"""The GitHub workflows run what we run: each step is a make target that exists (or .ci/run), so a green
workflow means the same commands passed that the README and the GPU host use."""

from __future__ import annotations

import fnmatch
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


def test_there_are_the_three_workflows():
    assert {path.stem for path in WORKFLOWS} == {"ci", "gpu", "book"}


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
    # what a GPU run reads: every file but the prose about the repository, the drafts, the runs it records
    # and the CI machinery of its own
    not_run = (
        "README.md",
        "CONTRIBUTING.md",
        "ARCHITECTURE.md",
        ".gitignore",
        ".ci/",
        ".github/",
        "drafts/",
        "runs/",
        "_static/",
        "_config.yml",
        "_toc.yml",
    )
    run_by_the_gpu = [path for path in tracked if not path.startswith(not_run)]
    missed = [path for path in run_by_the_gpu if not any(fnmatch.fnmatch(path, p) for p in patterns)]
    assert run_by_the_gpu and missed == [], f"changes to these would not run the GPU workflow: {missed[:5]}"
