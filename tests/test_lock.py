"""The lock file is fresh: it pins every requirement of the extras `make gpu-env` installs (gpu and test, with the
package's own dependencies) inside pyproject.toml's ranges, for the platform it says, and `make lock` is what
writes it. A change to an extra that the lock no longer satisfies fails here: run `make lock` and commit."""

from __future__ import annotations

import re
import subprocess
import tomllib

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from booktools.paths import PYPROJECT, ROOT

LOCKED_EXTRAS = ("gpu", "test")
#: The platform the lock is for: CPython 3.12 on Linux x86_64.
TARGET = {
    **default_environment(),
    "python_version": "3.12",
    "python_full_version": "3.12.0",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "os_name": "posix",
}


def make_variable(name: str) -> str:
    planned = subprocess.run(
        ["make", "--no-print-directory", "-s", "-n", "-p", "help"], cwd=ROOT, capture_output=True, text=True
    ).stdout
    return re.search(rf"^{name} \??= *(.*)$", planned, flags=re.MULTILINE).group(1).strip()


LOCK = ROOT / make_variable("GPU_LOCK")


def pins(text: str) -> dict[str, str]:
    """``{canonical name: version}`` of a requirements file's ``name==version`` lines.

    >>> pins("# via x\\nnumpy==2.4.6\\n    # via cupy\\nCuPy-CUDA13x==14.2.0\\n")
    {'numpy': '2.4.6', 'cupy-cuda13x': '14.2.0'}
    """
    found = {}
    for line in text.splitlines():
        match = re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", line)
        if match:
            found[canonicalize_name(match.group(1))] = match.group(2)
    return found


def requirements() -> list[Requirement]:
    project = tomllib.loads(PYPROJECT.read_text())["project"]
    extras = project["optional-dependencies"]
    listed = [*project["dependencies"], *(r for extra in LOCKED_EXTRAS for r in extras[extra])]
    return [r for r in map(Requirement, listed) if r.marker is None or r.marker.evaluate(TARGET)]


def test_the_lock_exists_and_pins_every_line_exactly():
    assert LOCK.is_file(), f"{LOCK.relative_to(ROOT)} is missing: run `make lock`"
    lines = [line for line in LOCK.read_text().splitlines() if line.strip() and not line.lstrip().startswith("#")]
    loose = [line for line in lines if "==" not in line]
    assert lines and loose == [], f"lines of the lock without an exact pin: {loose[:5]}"


@pytest.mark.parametrize("requirement", requirements(), ids=str)
def test_every_requirement_is_locked_inside_its_range(requirement):
    locked = pins(LOCK.read_text())
    name = canonicalize_name(requirement.name)
    assert name in locked, f"{requirement} is not in {LOCK.name}: run `make lock` and commit it"
    assert requirement.specifier.contains(locked[name], prereleases=True), (
        f"{LOCK.name} pins {name}=={locked[name]}, outside pyproject's {requirement}: run `make lock` and commit it"
    )


def test_make_lock_writes_the_lock_for_the_gpu_servers_platform():
    assert LOCK.read_text().splitlines()[1].strip() == "#    make lock", "the lock was not written by `make lock`"
    planned = subprocess.run(
        ["make", "--no-print-directory", "-n", "lock", "PYTHON=python"], cwd=ROOT, capture_output=True, text=True
    ).stdout
    words = planned.replace("\\\n", " ").split()
    assert all(f"--extra {extra}" in " ".join(words) for extra in LOCKED_EXTRAS), planned
    assert words[words.index("--python-version") + 1] == "3.12", planned
    assert words[words.index("--python-platform") + 1] == "x86_64-manylinux_2_28", planned
    assert words[words.index("--output-file") + 1] == str(LOCK.relative_to(ROOT)), planned
    # wheels only, but for the one dependency PyPI has only as a source distribution
    assert words[words.index("--only-binary") + 1] == ":all:" and words[words.index("--no-binary") + 1] == "gatspy"


def test_make_gpu_env_installs_the_lock():
    planned = subprocess.run(
        ["make", "--no-print-directory", "-n", "gpu-env"], cwd=ROOT, capture_output=True, text=True
    ).stdout
    installs = [line for line in planned.splitlines() if "pip install" in line and "-e" in line.split()]
    assert installs and f"--constraint {LOCK.relative_to(ROOT)}" in installs[-1], planned
