"""Run a ``python -m`` module of this package in a fresh Python process and read the JSON line it prints.

Allocators, JAX's memory settings, cuDF's spilling and PyTorch's allocator are each chosen once per process, so
the experiments that compare them start one process per setting. Each such module prints its result as one
JSON object on its last line of standard output.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]


def run_module(
    module: str, arguments: Sequence[str], *, what: str, env: Mapping[str, str] | None = None, timeout: float = 300
) -> dict:
    """Run ``python -m module arguments…`` from the project root; return the JSON object of its last line.

    ``what`` names the experiment in the error raised when the process fails, which quotes the last lines of its
    standard error.
    """
    done = subprocess.run(
        [sys.executable, "-m", module, *arguments],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=PROJECT_ROOT,
        env=None if env is None else dict(env),
    )
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-5:])
        raise RuntimeError(f"{what} failed in its process (exit {done.returncode}):\n{tail}")
    lines = done.stdout.strip().splitlines()
    if not lines:
        raise RuntimeError(f"{what} printed no result (expected one JSON line)")
    return json.loads(lines[-1])
