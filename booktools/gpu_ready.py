"""Can this machine run a GPU target of the Makefile? Asked before the target starts, in one line.

``make compare``, ``make execute``, ``make test-gpu`` and ``make test-gpu-16gb`` first run
``python -m booktools.gpu_ready TARGET [NOTEBOOK ...]`` with the Python they will use. It exits 0 when that Python
can run the target here, else 2 with one line on stderr: "needs a CUDA GPU" and what to do on a machine without
one (no notebook is executed to find out), or the libraries that Python lacks, named, and how to get them (not a
``ModuleNotFoundError`` from inside a notebook). ``make execute`` of notebooks that need no GPU (the teachers'
page) runs anywhere. It imports nothing outside the standard library and :mod:`support.env`, so it runs in any
Python, even one that lacks everything the target needs.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace

from support import env

#: The tools each target imports besides the GPU stack (import names).
TOOLS: dict[str, tuple[str, ...]] = {
    "compare": ("pandas", "nbclient", "nbformat", "ipykernel"),
    "execute": ("nbclient", "nbformat", "ipykernel"),
    "test-gpu": ("pytest", "nbval", "nbclient", "nbformat", "ipykernel"),
    "test-gpu-16gb": ("pytest", "nbval", "nbclient", "nbformat", "ipykernel"),
}
#: What a reader without a GPU can do instead, per target.
INSTEAD = {
    "compare": "the book's own figures are on its page Claims and evidence (make book)",
    "execute": "the committed notebooks hold the outputs of the book's GPU run (make book shows them)",
    "test-gpu": "make test runs every check that needs no GPU",
    "test-gpu-16gb": "make test runs every check that needs no GPU",
}
ENVIRONMENT = (
    "the book's GPU environment (make gpu-env creates .venv-gpu, which the GPU targets then use; or PYTHON=...)"
)


def needs_gpu(notebook) -> bool:
    """Whether a notebook needs a CUDA GPU to run: yes, unless its metadata says ``book.needs_gpu: false``. Here,
    where only the standard library is imported, so that :mod:`booktools.notebooks` can use it too."""
    return bool(notebook.metadata.get("book", {}).get("needs_gpu", True))


def notebook_needs_gpu(path: Path) -> bool:
    """Whether the notebook at ``path`` needs a GPU (:func:`needs_gpu`), read as JSON."""
    return needs_gpu(SimpleNamespace(metadata=json.loads(Path(path).read_text())["metadata"]))


def problem(target: str, notebooks: Sequence[Path] = (), probe=None, missing=env.missing_modules) -> str | None:
    """Why ``target`` cannot run here with this Python, in one line; None when it can.

    ``notebooks`` are the ones the target runs (none: every chapter, which needs a GPU); ``probe`` and
    ``missing`` are :func:`support.env.probe_gpus` and :func:`support.env.missing_modules` unless a test passes
    stand-ins.
    """
    gpu = not notebooks or any(notebook_needs_gpu(p) for p in notebooks if Path(p).exists())
    if gpu:
        probe = probe or env.probe_gpus()
        if not probe.available:
            return (
                f"make {target} needs a CUDA GPU, and none is usable here ({probe.problem}): run it on a machine "
                f"with an NVIDIA GPU, in {ENVIRONMENT}; here, {INSTEAD[target]}"
            )
    lacking = missing([*TOOLS[target], *(env.GPU_STACK if gpu else ())])
    if lacking:
        return f"make {target} runs in {sys.executable}, which lacks {', '.join(lacking)}: use {ENVIRONMENT}"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m booktools.gpu_ready", description=__doc__.split("\n")[0])
    parser.add_argument("target", choices=sorted(TOOLS))
    parser.add_argument("notebooks", nargs="*", type=Path, help="the notebooks the target runs (default: all)")
    args = parser.parse_args(argv)
    said = problem(args.target, args.notebooks)
    if said:
        print(said, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
