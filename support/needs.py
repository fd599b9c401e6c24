"""What each chapter was seen to need on the GPU, and the check its first cell makes.

A chapter's need is a fact about a run, not a requirement: the peak of GPU memory in use seen while it passed
under a per-process memory limit (CUDA MPS), with that limit. ``booktools.runs`` writes these facts into
``chapter_needs.json`` beside this module whenever it records a run; a test keeps the file equal to what the
recorded runs give.

>>> need = Need("02_memory_layouts", peak_bytes=13 * 2**30, limit_bytes=16 * 2**30, label="16 GB (MPS limit)")
>>> need.describe()
'it peaked at 13.0 GiB while passing under a 16.0 GiB limit (16 GB (MPS limit))'
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from support import env
from support.units import GIB

#: Written by ``booktools.runs``; read here.
NEEDS_FILE = Path(__file__).with_name("chapter_needs.json")


@dataclass(frozen=True)
class Need:
    """The smallest peak of GPU memory in use seen in a passing run of ``chapter`` under a memory limit."""

    chapter: str
    peak_bytes: int  # GPU memory in use above the run's start, sampled from NVML: contexts included
    limit_bytes: int  # the per-process limit the run passed under
    label: str  # the setup the run names, e.g. "16 GB (MPS limit)"

    def describe(self) -> str:
        return (
            f"it peaked at {self.peak_bytes / GIB:.1f} GiB while passing under a "
            f"{self.limit_bytes / GIB:.1f} GiB limit ({self.label})"
        )


def load(path: Path = NEEDS_FILE) -> dict[str, Need]:
    """Every chapter's :class:`Need`, by notebook name; empty when nothing was recorded."""
    if not path.exists():
        return {}
    return {name: Need(**fields) for name, fields in json.loads(path.read_text()).items()}


def of(chapter: str, path: Path = NEEDS_FILE) -> Need | None:
    """``chapter``'s need (``"06_ecg_pipeline"``), or None when it never passed under a limit."""
    return load(path).get(chapter)


def check_gpu(chapter: str, *, gpus: int = 1, path: Path = NEEDS_FILE, free=None) -> env.Gpu:
    """Stop a chapter before it starts, with the reason and a way out, when this process cannot run it.

    It needs a GPU (``gpus`` of them), and the memory this process can use on GPU 0 (its MPS share, or what is
    free on the card) must hold the chapter's recorded peak. Returns GPU 0.
    """
    need = of(chapter, path)
    return env.require_gpu(
        need.peak_bytes if need else None,
        gpus=gpus,
        what=f"Chapter {chapter}",
        why=need.describe() if need else "",
        free=free,
    )
