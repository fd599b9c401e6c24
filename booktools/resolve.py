"""Does the ``gpu`` extra install? pip's resolver run for a GPU server, on any machine, installing nothing.

``make resolve-gpu`` (or ``python -m booktools.resolve``) reads the ``gpu`` extra from ``pyproject.toml`` and asks
pip what it would install for CPython 3.12 on manylinux x86_64 (``pip install --dry-run --report`` with
``--python-version``, ``--platform`` and ``--only-binary=:all:``, into a throw-away ``--target``), then prints the
version of each package it chose, the GPU stack first. It needs the package index; pip fetches each candidate's
metadata, and downloads a wheel only where the index does not serve the metadata on its own. Exit status 1 when
the requirements do not resolve, with pip's explanation.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

from booktools.paths import PYPROJECT
from support.env import GPU_LIBRARIES

#: manylinux tags a current Linux x86_64 server accepts (glibc 2.17 to 2.39), and pure-Python wheels.
PLATFORMS: tuple[str, ...] = (
    *(f"manylinux_2_{minor}_x86_64" for minor in range(17, 40)),
    "manylinux2014_x86_64",
    "any",
)

#: Distributions shown first in the report: the libraries the book is about.
#: The pip distributions of the book's GPU stack (:data:`support.env.GPU_LIBRARIES`), listed first.
GPU_STACK = (*GPU_LIBRARIES.values(), "jaxlib")


def extra_requirements(extra: str = "gpu", pyproject: Path = PYPROJECT) -> list[str]:
    """The requirement strings of one optional-dependency group of ``pyproject.toml``."""
    groups = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]
    if extra not in groups:
        raise ValueError(f"pyproject.toml has no extra {extra!r}; it has {', '.join(sorted(groups))}")
    return list(groups[extra])


def resolver_command(
    requirements: list[str], report: Path, target: Path, python_version: str = "3.12", python: str = sys.executable
) -> list[str]:
    """The pip command that resolves ``requirements`` for ``python_version`` on Linux x86_64 and installs nothing.

    >>> command = resolver_command(["torch>=2.11"], Path("r.json"), Path("t"))
    >>> command[3:6], "--dry-run" in command, command[-1]
    (['install', '--dry-run', '--quiet'], True, 'torch>=2.11')
    >>> command.count("--platform") == len(PLATFORMS)
    True
    """
    platforms = [flag for tag in PLATFORMS for flag in ("--platform", tag)]
    return [
        python,
        "-m",
        "pip",
        "install",
        "--dry-run",
        "--quiet",
        "--ignore-installed",
        "--report",
        str(report),
        "--target",
        str(target),
        "--python-version",
        python_version,
        *platforms,
        "--only-binary=:all:",
        *requirements,
    ]


def chosen_versions(report: dict) -> dict[str, str]:
    """``{distribution: version}`` of what a pip installation report would install, the GPU stack first.

    >>> chosen_versions({"install": [{"metadata": {"name": "pandas", "version": "3.0.6"}},
    ...                              {"metadata": {"name": "torch", "version": "2.14.1"}}]})
    {'torch': '2.14.1', 'pandas': '3.0.6'}
    """
    found = {item["metadata"]["name"]: item["metadata"]["version"] for item in report.get("install", [])}
    first = [name for name in GPU_STACK if name in found]
    rest = sorted((name for name in found if name not in GPU_STACK), key=str.lower)
    return {name: found[name] for name in [*first, *rest]}


def resolve(extra: str = "gpu", python_version: str = "3.12") -> dict[str, str]:
    """Run pip's resolver for ``extra``; raise :class:`RuntimeError` with pip's explanation when it fails."""
    requirements = extra_requirements(extra)
    with tempfile.TemporaryDirectory(prefix="resolve-") as scratch:
        report = Path(scratch) / "report.json"
        command = resolver_command(requirements, report, Path(scratch) / "target", python_version)
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0 or not report.exists():
            lines = [line for line in done.stderr.splitlines() if not line.startswith("WARNING: Location")]
            raise RuntimeError(
                f"the {extra!r} extra does not resolve for Python {python_version}:\n" + "\n".join(lines[-15:])
            )
        return chosen_versions(json.loads(report.read_text()))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m booktools.resolve", description=__doc__.split("\n")[0])
    parser.add_argument("--extra", default="gpu")
    parser.add_argument("--python-version", default="3.12")
    args = parser.parse_args(argv)
    try:
        versions = resolve(args.extra, args.python_version)
    except RuntimeError as error:
        print(error, file=sys.stderr)
        return 1
    print(
        f"pip would install {len(versions)} distributions for the {args.extra!r} extra "
        f"(CPython {args.python_version}, manylinux x86_64):"
    )
    for name, version in versions.items():
        print(f"  {name:<28} {version}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
