"""booktools.teaching: the teacher's tables from recorded runs."""

from __future__ import annotations

import pytest

from booktools import teaching
from booktools.runs import ChapterRun, RunGroup
from support.units import GIB


def _chapter(name: str, seconds: float, peak: int) -> ChapterRun:
    return ChapterRun(f"chapters/{name}.ipynb", seconds, peak, True)


def test_planning_rows_read_times_on_the_full_gpu_and_needs_under_a_limit():
    full = RunGroup("H100 80GB", "execute", False, 10.0, 5 * GIB, [_chapter("01_why_gpus", 80.0, 5 * GIB)], None)
    limited = RunGroup("16 GB", "nbval", False, 10.0, 4 * GIB, [_chapter("01_why_gpus", 60.0, 4 * GIB)], 16 * GIB)
    rows = teaching.planning_rows(["01_why_gpus", "99_unmeasured"], [full, limited])
    assert rows[0] == {"chapter": "01_why_gpus", "run time (H100 80GB)": 80.0, "GPU memory it needs": 4.0}
    assert rows[1]["run time (H100 80GB)"] is None and rows[1]["GPU memory it needs"] is None
    with pytest.raises(ValueError, match="positive"):
        teaching.participants_per_gpu(80, need_gib=0)
