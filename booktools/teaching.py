"""Planning a workshop from what the book measured: what each chapter costs, what each agenda needs, and what a
rehearsal on one GPU showed. The teachers' page (``chapters/90_for_teachers.ipynb``) shows these; nothing here
needs a GPU, and nothing here extrapolates: a seat count is stated only where a rehearsal ran it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from booktools.runs import RunGroup, chapter_name, chapter_needs, load
from support.units import GIB

#: The agendas of the teachers' page, each the chapters a participant runs, in order (``make rehearse AGENDA=``).
AGENDAS: dict[str, list[str]] = {
    "two-hours": ["00_getting_started", "01_why_gpus", "03_zero_copy", "06_ecg_pipeline"],
    "half-day": [
        "00_getting_started",
        "01_why_gpus",
        "02_memory_layouts",
        "03_zero_copy",
        "04_memory_pools",
        "06_ecg_pipeline",
    ],
    "full-day": [
        "00_getting_started",
        "01_why_gpus",
        "02_memory_layouts",
        "03_zero_copy",
        "04_memory_pools",
        "04_watching_memory",
        "05_unified_memory",
        "06_ecg_pipeline",
    ],
}

TIME = "run time (H100 80GB)"
PEAK = "peak seen (GiB)"
LIMIT = "passed under"


def agenda(name: str) -> list[str]:
    """The chapters of the agenda ``name``; an unknown name is refused with the known ones.

    >>> agenda("two-hours")[:2]
    ['00_getting_started', '01_why_gpus']
    >>> agenda("1h")
    Traceback (most recent call last):
    ...
    ValueError: no agenda '1h': choose one of two-hours, half-day, full-day
    """
    if name not in AGENDAS:
        raise ValueError(f"no agenda {name!r}: choose one of {', '.join(AGENDAS)}")
    return list(AGENDAS[name])


def planning_rows(chapters: Sequence[str], groups: Sequence[RunGroup] | None = None, full: str = "H100 80GB"):
    """Per chapter (``01_why_gpus``): its run time on the ``full`` GPU, and the peak of GPU memory seen while it
    passed under a per-process limit, with that limit (:func:`booktools.runs.chapter_needs`). A peak seen is not a
    requirement: a chapter may run in less. Where a chapter never passed under a limit, the row says whether it
    failed under one (then it runs on a whole GPU only) or was never tried; None where nothing was measured."""
    groups = load() if groups is None else groups
    on_full = next((g for g in groups if g.label == full and not g.parallel), None)
    needs = chapter_needs(groups)
    rows = []
    for name in chapters:
        run = None if on_full is None else next((c for c in on_full.chapters if chapter_name(c.notebook) == name), None)
        need = needs.get(name)
        if need is not None:
            limit = need.label
        else:
            failed = [
                g.label
                for g in groups
                if g.limit_bytes and any(chapter_name(c.notebook) == name and not c.passed for c in g.chapters)
            ]
            limit = f"failed under {', '.join(failed)}" if failed else "never run under a limit"
        rows.append(
            {
                "chapter": name,
                TIME: None if run is None else run.seconds,
                PEAK: None if need is None else need.peak_bytes / GIB,
                LIMIT: limit,
            }
        )
    return rows


def largest_need(chapters: Sequence[str], groups: Sequence[RunGroup] | None = None) -> tuple[str, int] | None:
    """The chapter of ``chapters`` with the largest peak seen under a limit it passed, and that peak in bytes
    (:func:`booktools.runs.chapter_needs`); None when none of them passed under a limit."""
    needs = chapter_needs(load() if groups is None else groups)
    found = [(name, needs[name].peak_bytes) for name in chapters if name in needs]
    return max(found, key=lambda item: item[1]) if found else None


def share_for(chapters: Sequence[str], groups: Sequence[RunGroup] | None = None) -> int | None:
    """The smallest whole number of GiB that holds :func:`largest_need`: the ``--limit`` the chapters' first cells
    accept. None when none of them passed under a limit.

    >>> from booktools.runs import ChapterRun
    >>> run = RunGroup("16 GB", "nbval", False, 1.0, 0, [ChapterRun("a.ipynb", 1.0, int(13.7 * GIB), True)], 16 * GIB)
    >>> share_for(["a"], [run])
    14
    """
    need = largest_need(chapters, groups)
    return None if need is None else -(-need[1] // GIB)


def errors_in_log(path: Path) -> list[str]:
    """The distinct errors a pytest log reports (``SomethingError: message`` lines, colours stripped), in order."""
    if not path.exists():
        return []
    text = re.sub(r"\x1b\[[0-9;]*m", "", path.read_text(errors="replace"))
    found = re.findall(r"^(\w*(?:Error|Exception)): (.+)$", text, flags=re.MULTILINE)
    seen: list[str] = []
    for name, message in found:
        line = f"{name}: {message.strip()}"[:160]
        if line not in seen:
            seen.append(line)
    return seen


def runs_together(groups: Sequence[RunGroup] | None = None) -> list[dict]:
    """The recorded runs of several chapters at once on one GPU (``--parallel``): what ran, under which limit, how
    many passed. They show that the chapters named ran side by side, nothing about other chapters."""
    groups = load() if groups is None else groups
    return [
        {
            "run": group.label,
            "chapters at once": ", ".join(chapter_name(c.notebook) for c in group.chapters),
            "passed": f"{sum(c.passed for c in group.chapters)} of {len(group.chapters)}",
            "wall time (s)": group.wall_seconds,
            "GPU peak (GiB)": None if group.peak_bytes is None else group.peak_bytes / GIB,
        }
        for group in groups
        if group.parallel
    ]
