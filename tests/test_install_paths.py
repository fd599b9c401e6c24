"""The two install paths of a GPU server, pip's `gpu` extra and conda's environment.yml, name the same packages with
the same version ranges; the project refers to no file outside itself. (`make resolve-gpu` runs pip's resolver
for the extra against the package index; it needs the network, so it is a make target, not a test.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from booktools import resolve
from booktools.paths import ROOT
from support import env

#: conda package name -> pip distribution name, where they differ.
CONDA_TO_PIP = {
    "cudf": "cudf-cu13",
    "rmm": "rmm-cu13",
    "cupy": "cupy-cuda13x",
    "pytorch-gpu": "torch",
    "dask-cudf": "dask-cudf-cu13",
}
#: conda entries with no pip counterpart in the extras: the interpreter, CUDA itself, pip, and jaxlib, which pip
#: gets through jax's `cuda13` extra.
CONDA_ONLY = {"python", "cuda-version", "pip", "jaxlib"}


def conda_specifier(spec: str) -> SpecifierSet:
    """A conda version spec as a pip specifier set: ``=26.10`` means ``==26.10.*``."""
    spec = spec.strip()
    if not spec:
        return SpecifierSet()
    if re.fullmatch(r"=[\d.]+", spec):
        return SpecifierSet(f"=={spec[1:]}.*")
    return SpecifierSet(spec)


def conda_packages(path: Path = ROOT / "environment.yml") -> dict[str, SpecifierSet]:
    packages = {}
    for entry in yaml.safe_load(path.read_text())["dependencies"]:
        if not isinstance(entry, str):
            continue  # the pip: section (the project itself)
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)\s*(.*)", entry)
        name, spec = match.group(1), match.group(2)
        if name not in CONDA_ONLY:
            packages[CONDA_TO_PIP.get(name, name)] = conda_specifier(spec)
    return packages


def pip_packages(*extras: str) -> dict[str, SpecifierSet]:
    packages = {}
    for extra in extras:
        for line in resolve.extra_requirements(extra):
            requirement = Requirement(line)
            packages.setdefault(requirement.name, requirement.specifier)
    return packages


def test_conda_versions_read_as_pip_specifiers():
    assert conda_specifier("=26.10") == SpecifierSet("==26.10.*")
    assert conda_specifier(">=14,<15") == SpecifierSet(">=14,<15")
    assert conda_specifier("") == SpecifierSet()


def test_the_gpu_extra_and_environment_yml_name_the_same_stack_with_the_same_ranges():
    conda = conda_packages()
    pip = pip_packages("gpu", "test")
    missing_from_pip = sorted(set(conda) - set(pip))
    assert missing_from_pip == [], f"environment.yml has packages the gpu/test extras lack: {missing_from_pip}"
    gpu_only = sorted(set(pip_packages("gpu")) - set(conda))
    assert gpu_only == [], f"the gpu extra has packages environment.yml lacks: {gpu_only}"
    differing = {name: (str(conda[name]), str(pip[name])) for name in conda if conda[name] != pip[name]}
    for name in list(differing):
        if name in pip_packages("test") and not conda[name]:
            del differing[name]  # a tool of the test extra that conda leaves unpinned
    assert differing == {}, f"version ranges differ (environment.yml, pyproject.toml): {differing}"


def test_the_gpu_extra_pins_the_major_versions_the_chapters_ran_with():
    gpu = pip_packages("gpu")
    for name in env.GPU_LIBRARIES.values():
        if name != "numpy" and name != "numba":  # both follow what cuDF and numba-cuda ask for
            assert gpu[name], f"{name} needs a version range in the gpu extra"
    assert "cuda13" in Requirement(next(r for r in resolve.extra_requirements("gpu") if r.startswith("jax"))).extras


def test_an_unknown_extra_is_named():
    with pytest.raises(ValueError, match="no extra 'cuda'"):
        resolve.extra_requirements("cuda")


@pytest.mark.parametrize("name", ["README.md", "Makefile", "pyproject.toml", "environment.yml", ".ci/run"])
def test_the_project_refers_to_no_file_outside_itself(name):
    text = (ROOT / name).read_text()
    assert not re.search(r"(?<![\w.])\.\./", text), f"{name} points outside the repository"
