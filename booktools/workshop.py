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
themselves), copies the files the chapters open (their diagrams, chapter 6's command-line records), and adds a
README that says where the folder goes. The teachers' page stays out. :func:`check_edition` verifies that no
solution survived and every exercise did; :func:`missing_files` that every file a notebook names is there.
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

#: Pages for the teacher, not the participants.
TEACHERS_ONLY = ("90_for_teachers",)
#: Files beside the notebooks that chapters open: diagrams, and chapter 6's records of its command line's runs.
ASSETS = ("diagrams", "ecg_cli_metrics.json", "ecg_cli_second_run.json")
#: A relative file a notebook names: a Markdown image, or a string in code such as "ecg_cli_metrics.json".
NAMED_FILE = re.compile(r"""\]\(([\w./-]+\.(?:png|svg|jpg))\)|["']([\w./-]+\.(?:json|csv|png|npz|npy))["']""")

README = """# Workshop edition of the GPU Interop Book

One notebook per chapter, with the exercises and without their solutions or outputs, and the files the chapters
open (`diagrams/`, chapter 6's `ecg_cli_*.json`). Keep the folder as it is: the notebooks read those files
from beside them.

The chapters import the book's `support` package. It is importable wherever the book is installed, which the
server's setup does once for everyone (`make gpu-env` in the book's repository, or `pip install -e
"/path/to/book[gpu,test]"`); then the folder can live anywhere, a participant's home directory included.

Open the notebooks in JupyterLab on the GPU server your teacher gave you (`jupyter lab`), run chapter 0 first
(its first cells check the seat), run each chapter from the top, and work the exercises where they appear.

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


def named_files(notebook) -> set[str]:
    """The relative paths a notebook's Markdown images and code strings name (``diagrams/ecg_flow.png``)."""
    return {
        first or second
        for cell in notebook.cells
        for first, second in NAMED_FILE.findall(cell.source)
        if not (first or second).startswith(("/", "http"))
    }


def missing_files(folder: Path, source: Path) -> list[str]:
    """The files the notebooks in ``folder`` name that exist beside the book's chapters (``source``) but not in
    ``folder``: what a participant would miss. Names that are nowhere (a file a cell writes) are not counted."""
    import nbformat

    missing = []
    for path in sorted(folder.glob("*.ipynb")):
        for name in sorted(named_files(nbformat.read(path, as_version=4))):
            if (source / name).exists() and not (folder / name).exists():
                missing.append(f"{path.name}: {name}")
    return missing


def participant_chapters(chapters: list[Path]) -> list[Path]:
    """``chapters`` without the teachers' pages."""
    return [path for path in chapters if path.stem not in TEACHERS_ONLY]


def write_edition(chapters: list[Path], out: Path = OUT) -> list[Path]:
    """Write the participant edition of ``chapters`` (the teachers' page left out) into ``out``, with the files they
    open and a README; return the notebooks written. Raises :class:`WorkshopError` if a named file is missing."""
    import shutil

    import nbformat

    out.mkdir(parents=True, exist_ok=True)
    written = []
    chapters = participant_chapters(list(chapters))
    source = chapters[0].parent if chapters else out
    for asset in ASSETS:
        if (source / asset).is_dir():
            shutil.copytree(source / asset, out / asset, dirs_exist_ok=True)
        elif (source / asset).exists():
            shutil.copy2(source / asset, out / asset)
    for path in chapters:
        original = nbformat.read(path, as_version=4)
        edition = participant_notebook(original, path.name)
        check_edition(original, edition, path.name)
        target = out / path.name
        nbformat.write(edition, target)
        written.append(target)
    (out / "README.md").write_text(README)
    missing = missing_files(out, source)
    if missing:
        raise WorkshopError(f"files the participant edition lacks (add them to workshop.ASSETS): {'; '.join(missing)}")
    return written


if __name__ == "__main__":
    from booktools import notebooks

    out = Path(sys.argv[1]) if len(sys.argv) > 1 else OUT
    try:
        written = write_edition(notebooks.chapter_notebooks(), out)
    except WorkshopError as error:
        print(f"workshop: {error}", file=sys.stderr)
        sys.exit(2)
    for path in written:
        print(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)
    print(f"the participant edition is in {out}: copy the whole folder to the participants (its README says how)")
