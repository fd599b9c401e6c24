"""The participant edition of the book for a workshop: ``make workshop`` writes ``_build/workshop/``.

Exercises and their solutions are written with ``sphinx-exercise``'s gated directives, so that a solution can
hold code cells that run with the chapter (and are checked by nbval like every other cell)::

    ```{exercise-start}            <- markdown cell: the exercise, kept for participants
    :label: ex-layouts-predict
    ```
    ... the exercise's text and any starter code cells ...
    ```{exercise-end}
    ```
    ```{solution-start} ex-layouts-predict     <- markdown cell: everything from here ...
    :class: dropdown
    ```
    ... solution code cells and their explanation ...
    ```{solution-end}                          <- ... to here is left out of the participant edition
    ```

The participant edition keeps every cell outside a solution, clears every output (participants run the chapter
themselves), and adds a README. :func:`check_edition` verifies that no solution survived and every exercise did.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from booktools.paths import BUILD, ROOT

OUT = BUILD / "workshop"
SOLUTION_START = re.compile(r"```\{solution-start\}")
SOLUTION_END = re.compile(r"```\{solution-end\}")
EXERCISE_LABEL = re.compile(r"```\{exercise(?:-start)?\}[^\n]*\n:label:\s*(\S+)")

README = """# Workshop edition of the GPU Interop Book

One notebook per chapter, with the exercises and without their solutions or outputs. Open them in JupyterLab on
the GPU server your teacher gave you (`jupyter lab`), run each chapter from the top, and work the exercises where
they appear. First check your seat with `make doctor` (from the book's repository) or ask a helper.

The published book, with every output and the solutions, is the reference after the workshop.
"""


class WorkshopError(ValueError):
    """A chapter's exercise markup is broken: the message names the notebook and the cell."""


def exercise_labels(notebook) -> list[str]:
    """The labels of the exercises in a notebook, in order."""
    return [
        label
        for cell in notebook.cells
        if cell.cell_type == "markdown"
        for label in EXERCISE_LABEL.findall(cell.source)
    ]


def participant_cells(notebook, name: str = "notebook") -> list:
    """The notebook's cells without its solutions (from a ``solution-start`` cell to its ``solution-end`` cell)."""
    kept, inside = [], False
    for index, cell in enumerate(notebook.cells):
        text = cell.source if cell.cell_type == "markdown" else ""
        if SOLUTION_START.search(text):
            if inside:
                raise WorkshopError(f"{name}, cell {index}: a solution starts inside another solution")
            inside = True
        if not inside:
            kept.append(cell)
        if SOLUTION_END.search(text):
            if not inside:
                raise WorkshopError(f"{name}, cell {index}: a solution ends that never started")
            inside = False
    if inside:
        raise WorkshopError(f"{name}: a solution starts and never ends (add a solution-end cell)")
    return kept


def participant_notebook(notebook, name: str = "notebook"):
    """A copy of ``notebook`` for participants: solutions removed, outputs and execution counts cleared."""
    import copy

    edition = copy.deepcopy(notebook)
    edition.cells = participant_cells(edition, name)
    for cell in edition.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return edition


def check_edition(original, edition, name: str = "notebook") -> None:
    """Raise :class:`WorkshopError` if a solution survived in ``edition`` or an exercise of ``original`` did not."""
    for index, cell in enumerate(edition.cells):
        if cell.cell_type == "markdown" and (SOLUTION_START.search(cell.source) or SOLUTION_END.search(cell.source)):
            raise WorkshopError(f"{name}, cell {index}: a solution survived in the participant edition")
        if cell.cell_type == "code" and cell.outputs:
            raise WorkshopError(f"{name}, cell {index}: an output survived in the participant edition")
    missing = [label for label in exercise_labels(original) if label not in exercise_labels(edition)]
    if missing:
        raise WorkshopError(f"{name}: exercises missing from the participant edition: {', '.join(missing)}")


def write_edition(chapters: list[Path], out: Path = OUT) -> list[Path]:
    """Write the participant edition of ``chapters`` into ``out`` (with a README); return the notebooks written."""
    import nbformat

    out.mkdir(parents=True, exist_ok=True)
    written = []
    for path in chapters:
        original = nbformat.read(path, as_version=4)
        edition = participant_notebook(original, path.name)
        check_edition(original, edition, path.name)
        target = out / path.name
        nbformat.write(edition, target)
        written.append(target)
    (out / "README.md").write_text(README)
    return written


if __name__ == "__main__":
    from booktools import notebooks

    for written in write_edition(notebooks.chapter_notebooks(), Path(sys.argv[1]) if len(sys.argv) > 1 else OUT):
        print(written.relative_to(ROOT) if written.is_relative_to(ROOT) else written)
