"""Draft chapters (drafts/*.py, Jupytext percent scripts): they stay notebooks in waiting, not text that rots.

A draft is a chapter written and CPU-tested but not yet executed on the GPU host, so it has no outputs to
commit; it becomes ``chapters/<name>.ipynb`` with ``jupytext --to ipynb`` when it is executed there. Until then
these checks keep it convertible, its code valid Python within the page's width, and its metadata saying what
it needs. With no draft in the folder (as since chapter 7 was published) they have nothing to check.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from booktools import notebooks

DRAFTS = sorted((Path(__file__).resolve().parents[1] / "drafts").glob("*.py"))


@pytest.fixture(params=DRAFTS, ids=lambda p: p.stem)
def draft(request, skip_or_fail):
    try:
        import jupytext
    except ImportError:
        skip_or_fail("jupytext is not installed (the test extra has it)")
    return jupytext.read(request.param)


def test_a_draft_converts_to_a_notebook_that_says_what_it_needs(draft):
    assert notebooks.needs_gpu(draft) and notebooks.gpus_needed(draft) >= 1
    assert draft.cells[0].cell_type == "markdown" and draft.cells[0].source.startswith("# ")
    assert any(cell.cell_type == "code" for cell in draft.cells)


def test_a_drafts_code_is_python_within_the_page_width(draft):
    for cell in notebooks.code_cells(draft):
        ast.parse(cell.source)
        too_long = [line for line in cell.source.splitlines() if len(line) > notebooks.CODE_COLUMNS]
        assert not too_long, too_long
