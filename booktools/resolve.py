"""Does the ``gpu`` extra install? The dependency resolution of a GPU server, run on any machine, installing nothing.

``make resolve-gpu`` (or ``python -m booktools.resolve``) is one call of uv's resolver::

    uv pip compile pyproject.toml --extra gpu --python-platform x86_64-manylinux_2_28 --python-version 3.12 \\
        --only-binary :all: --no-binary gatspy

for CPython 3.12 on Linux x86_64 with glibc 2.28 or newer, then prints the version of each package it chose, the
GPU stack first, and names the packages it allowed to come from source. Wheels only, except for the packages PyPI
has no wheel of (:data:`SOURCE_BUILDS`), which a server's pip builds too: uv reads the wheels' metadata from the
package index (PyPI, or ``UV_DEFAULT_INDEX``) without downloading them, and builds those few source distributions
with this machine's Python to read theirs. Exit status 1 when the requirements do not resolve, with uv's whole
explanation.

Why uv and not ``pip install --dry-run --report``: pip resolves for another platform only with wheels it can read
the metadata of, and older pips download them instead (six torch wheels of about 530 MB each with pip 23.2, which
then reported a conflict that a current pip does not find; pip 24.0, the one Python 3.12's ``venv`` ships, was
still resolving after 10 minutes). uv is the maintained tool built for resolving for a platform that is not the
one it runs on; it comes with the ``test`` extra (``make resolve-gpu`` installs it into ``.venv``).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from booktools.paths import PYPROJECT
from support.env import GPU_LIBRARIES

#: The platform a GPU server is: Linux x86_64 with glibc 2.28 or newer, the oldest RAPIDS' wheels run on.
PLATFORM = "x86_64-manylinux_2_28"
PYTHON_VERSION = "3.12"
#: The packages of the extra that PyPI has only as source distributions, built from source as a server's pip
#: builds them (gatspy: py-ecg-detectors' dependency). Every other package must come as a wheel; when one stops
#: doing so, uv's explanation names it ("Wheels are required for ...").
SOURCE_BUILDS = ("gatspy",)

#: The pip distributions of the book's GPU stack (:data:`support.env.GPU_LIBRARIES`), listed first.
GPU_DISTRIBUTIONS = (*GPU_LIBRARIES.values(), "jaxlib")


def extra_requirements(extra: str = "gpu", pyproject: Path = PYPROJECT) -> list[str]:
    """The requirement strings of one optional-dependency group of ``pyproject.toml``."""
    groups = tomllib.loads(pyproject.read_text())["project"]["optional-dependencies"]
    if extra not in groups:
        raise ValueError(f"pyproject.toml has no extra {extra!r}; it has {', '.join(sorted(groups))}")
    return list(groups[extra])


def uv_binary() -> str:
    """The uv executable: the one the ``uv`` package installed, else one on ``PATH``."""
    try:
        import uv

        return uv.find_uv_bin()
    except (ImportError, FileNotFoundError):
        pass
    found = shutil.which("uv")
    if found is None:
        raise RuntimeError(
            "uv is not installed here; `make resolve-gpu` installs it into .venv (it is in the test extra), "
            "or: python -m pip install uv"
        )
    return found


def resolver_command(uv: str = "uv", extra: str = "gpu", python_version: str = PYTHON_VERSION) -> list[str]:
    """The uv command that resolves ``extra`` of ``pyproject.toml`` for a GPU server, installing nothing.

    >>> command = resolver_command()
    >>> command[:3], command[4:6], command[command.index("--python-platform") + 1]
    (['uv', 'pip', 'compile'], ['--extra', 'gpu'], 'x86_64-manylinux_2_28')
    >>> command[command.index("--only-binary") + 1], command[command.index("--no-binary") + 1]
    (':all:', 'gatspy')
    """
    return [
        uv,
        "pip",
        "compile",
        str(PYPROJECT),
        "--extra",
        extra,
        "--python-platform",
        PLATFORM,
        "--python-version",
        python_version,
        "--only-binary",
        ":all:",
        *[option for name in SOURCE_BUILDS for option in ("--no-binary", name)],  # overrides :all: for these
        "--no-header",
        "--no-annotate",
    ]


def chosen_versions(compiled: str) -> dict[str, str]:
    """``{distribution: version}`` from ``uv pip compile``'s output (``name==version`` lines), the GPU stack first.

    >>> chosen_versions("pandas==3.0.6\\n# a comment\\ntorch==2.14.1\\n")
    {'torch': '2.14.1', 'pandas': '3.0.6'}
    """
    found = dict(re.findall(r"(?m)^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+)", compiled))
    first = [name for name in GPU_DISTRIBUTIONS if name in found]
    rest = sorted((name for name in found if name not in GPU_DISTRIBUTIONS), key=str.lower)
    return {name: found[name] for name in [*first, *rest]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m booktools.resolve", description=__doc__.split("\n")[0])
    parser.add_argument("--extra", default="gpu")
    parser.add_argument("--python-version", default=PYTHON_VERSION)
    args = parser.parse_args(argv)
    try:
        command = resolver_command(uv_binary(), args.extra, args.python_version)
    except RuntimeError as error:
        print(error, file=sys.stderr)
        return 1
    environ = {**os.environ, "UV_PYTHON_DOWNLOADS": "never"}  # source builds use this machine's Python
    done = subprocess.run(command, capture_output=True, text=True, env=environ, cwd=PYPROJECT.parent)
    versions = chosen_versions(done.stdout) if done.returncode == 0 else {}
    if not versions:
        print(
            f"the {args.extra!r} extra does not resolve for CPython {args.python_version} on {PLATFORM} "
            f"(uv exit status {done.returncode}):\n{(done.stderr or done.stdout).strip()}",
            file=sys.stderr,
        )
        return 1
    print(
        f"{len(versions)} distributions would be installed for the {args.extra!r} extra "
        f"(CPython {args.python_version}, {PLATFORM}):"
    )
    for name, version in versions.items():
        print(f"  {name:<28} {version}")
    built = [f"{name}=={versions[name]}" for name in SOURCE_BUILDS if name in versions]
    print(f"built from source, as PyPI has no wheel of them: {', '.join(built) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
