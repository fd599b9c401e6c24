"""The book's own housekeeping: which notebooks it has, whether they are ready to publish, executing them.

The chapters are published with the outputs of a run on a GPU host, so a notebook is ready when every code
cell ran, in order, without errors, and its banner names the NVIDIA GPU it ran on (see :mod:`support.env`).

Command line (what ``make execute`` calls on a GPU host)::

    python -m booktools.notebooks execute chapters/00_getting_started.ipynb [...]
    python -m booktools.notebooks check                # report notebooks that are not ready to publish
    python -m booktools.notebooks fresh                # list published notebooks whose outputs predate their code
"""

from __future__ import annotations

import argparse
import ast
import datetime as dt
import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

import nbclient
import nbformat
import yaml

from booktools import freshness
from booktools.gpu_ready import needs_gpu
from booktools.paths import ROOT
from support.env import BANNER_GPU_LINE

__all__ = [
    "ROOT",
    "chapter_notebooks",
    "code_cells",
    "NotebookFailed",
    "execute_notebook",
    "failed_copy_of",
    "needs_gpu",
    "notebook_problems",
    "read_notebook",
    "strip_volatile_metadata",
    "toc_files",
    "published_notebooks",
]


#: Cell metadata that changes on every run and says nothing about the content.
VOLATILE_CELL_METADATA = ("execution", "collapsed", "scrolled", "ExecuteTime")
#: Notebook metadata likewise.
VOLATILE_NOTEBOOK_METADATA = ("widgets", "vscode", "papermill")


def read_notebook(path: Path | str):
    """The notebook at ``path`` as an ``nbformat`` node (version 4)."""
    return nbformat.read(str(path), as_version=4)


def chapter_notebooks(root: Path = ROOT) -> list[Path]:
    """The chapter notebooks on disk, in file-name order (``chapters/NN_topic.ipynb``); a failed run's copy
    (``NN_topic.failed.ipynb``, see :func:`execute_notebook`) is not a chapter."""
    return chapters_in(root / "chapters")


def chapters_in(folder: Path) -> list[Path]:
    """The chapter notebooks in ``folder`` (the book's ``chapters/`` or a copy of it), in file-name order, without
    a failed run's copy: the one place that tells a chapter from the other notebooks a folder may hold."""
    return sorted(path for path in Path(folder).glob("*.ipynb") if not path.name.endswith(".failed.ipynb"))


def headings(markdown: str) -> Iterator[tuple[int, str]]:
    r"""The ATX headings of a Markdown cell's text, as ``(level, text)``, skipping lines inside fenced blocks (a
    line starting with three backticks opens or closes one): the one place that reads a chapter's sections, for
    the claims page (:func:`booktools.evidence.claim_sections`) and the teachers' plan
    (:func:`booktools.teaching.chapter_sections`).

    >>> list(headings("# One\n```\n# not a heading\n```\n### Three `x`\n#### Four\n#no"))
    [(1, 'One'), (3, 'Three `x`'), (4, 'Four')]
    """
    fenced = False
    for line in markdown.splitlines():
        fenced ^= line.lstrip().startswith("```")
        found = re.match(r"(#{1,6}) (.+)", line)
        if found and not fenced:
            yield len(found.group(1)), found.group(2)


def _toc_entries(node) -> Iterator[str]:
    if isinstance(node, dict):
        if "file" in node:
            yield node["file"]
        for key in ("root", "parts", "chapters", "sections"):
            value = node.get(key)
            if isinstance(value, str):
                yield value
            elif value is not None:
                yield from _toc_entries(value)
    elif isinstance(node, list):
        for item in node:
            yield from _toc_entries(item)


def toc_files(root: Path = ROOT) -> list[str]:
    """Every file that ``_toc.yml`` lists, as written there (no suffix), in order."""
    return list(_toc_entries(yaml.safe_load((root / "_toc.yml").read_text())))


def published_notebooks(root: Path = ROOT) -> list[Path]:
    """The notebooks ``_toc.yml`` lists (the published book), in order."""
    return [root / f"{entry}.ipynb" for entry in toc_files(root) if (root / f"{entry}.ipynb").is_file()]


#: The columns of code the book's page shows whole (on a laptop's screen); ``make lint`` holds notebook code
#: to it, and the browser test measures that the page shows it.
CODE_COLUMNS = 88


def gpus_needed(notebook) -> int:
    """How many GPUs a notebook needs: ``book.gpus`` in its metadata, 1 when it needs a GPU and says nothing,
    0 when it needs none."""
    if not needs_gpu(notebook):
        return 0
    return int(notebook.metadata.get("book", {}).get("gpus", 1))


def too_few_gpus(needed: int, probe) -> str | None:
    """Why a notebook that needs ``needed`` GPUs cannot run on the machine ``probe`` describes
    (:func:`support.env.probe_gpus`), or None when it has enough."""
    have = len(probe.gpus)
    if needed <= 1 or have >= needed:
        return None
    return f"needs {needed} GPUs; this machine has {have}"


def code_cells(notebook) -> list:
    """The code cells that hold code (empty cells are left out)."""
    return [cell for cell in notebook.cells if cell.cell_type == "code" and cell.source.strip()]


def _python_source(cell_source: str) -> str:
    """Cell source with IPython syntax (magics, shell escapes) turned into Python."""
    try:
        from IPython.core.inputtransformer2 import TransformerManager  # noqa: PLC0415 - optional, see below
    except ImportError:
        return "\n".join("" if line.lstrip()[:1] in ("%", "!") else line for line in cell_source.splitlines())
    return TransformerManager().transform_cell(cell_source)


def _output_text(output) -> str:
    if output.get("output_type") == "stream":
        return output.get("text", "")
    data = output.get("data", {})
    return str(data.get("text/plain", "")) + str(data.get("text/html", ""))


def notebook_problems(notebook) -> list[str]:
    """Why a committed notebook is not ready to publish; an empty list when it is.

    Checks that every code cell parses, that every cell was executed once, in order, without errors, and that
    a GPU notebook's outputs contain the environment banner naming an NVIDIA GPU.
    """
    problems = []
    cells = code_cells(notebook)
    for number, cell in enumerate(cells, start=1):
        try:
            ast.parse(_python_source(cell.source))
        except SyntaxError as error:
            problems.append(f"code cell {number} does not parse: {error.msg} (line {error.lineno})")
    counts = [cell.get("execution_count") for cell in cells]
    unexecuted = sum(1 for count in counts if not count)
    if unexecuted:
        problems.append(f"{unexecuted} of {len(cells)} code cells were never executed")
    elif counts != list(range(1, len(cells) + 1)):
        problems.append(f"code cells were not executed once each, top to bottom: execution counts {counts}")
    for number, cell in enumerate(cells, start=1):
        for output in cell.get("outputs", []):
            if output.get("output_type") == "error":
                problems.append(f"code cell {number} has an error output: {output.get('ename')}")
    if cells and not any(cell.get("outputs") for cell in cells):
        problems.append("no code cell has outputs")
    if needs_gpu(notebook):
        text = "\n".join(_output_text(o) for cell in cells for o in cell.get("outputs", []))
        if not re.search(BANNER_GPU_LINE, text, flags=re.MULTILINE):
            problems.append("no environment banner naming an NVIDIA GPU in the outputs (support.env.banner())")
    return problems


def strip_volatile_metadata(notebook):
    """Remove run-to-run noise (timestamps, widget state, UI state) from a notebook, in place; return it."""
    for key in VOLATILE_NOTEBOOK_METADATA:
        notebook.metadata.pop(key, None)
    for cell in notebook.cells:
        for key in VOLATILE_CELL_METADATA:
            cell.metadata.pop(key, None)
    return notebook


#: The libraries whose deprecations the book must not use, and the code that calls them (a notebook's cells run
#: as ``__main__``, the book's own code as ``support``): a warning attributed to one of these modules is raised.
STRICT_MODULES = r"(__main__|support|cupy|cupyx|cudf|pylibcudf|rmm|numba|numba_cuda|torch|jax|jaxlib|polars)(\..*)?$"

STRICT_STARTUP = f"""# Written by booktools.notebooks.strict_warnings: make test-gpu runs the chapters with it.
import warnings

for category in (DeprecationWarning, FutureWarning):
    warnings.filterwarnings("error", category=category, module={STRICT_MODULES!r})
"""


def strict_warnings(ipython_dir: Path) -> Path:
    """Make every IPython kernel started with ``IPYTHONDIR=ipython_dir`` turn the deprecation and future warnings
    of the book's libraries (and of the code that calls them) into errors, so that a chapter using a renamed or
    deprecated API fails under ``make test-gpu`` instead of printing a warning nobody reads. Returns the startup
    file it wrote."""
    startup = Path(ipython_dir) / "profile_default" / "startup" / "00-strict-warnings.py"
    startup.parent.mkdir(parents=True, exist_ok=True)
    startup.write_text(STRICT_STARTUP)
    return startup


#: How long a cell must run to be listed in an execution log (:func:`slow_cells`).
SLOW_CELL_SECONDS = 5.0


def slow_cells(notebook, at_least_s: float = SLOW_CELL_SECONDS) -> list[str]:
    """One line per code cell that ran for ``at_least_s`` seconds or more, from the start and end times nbclient
    records in each cell's ``metadata.execution`` (before :func:`strip_volatile_metadata` removes them): its index,
    its seconds and its first line. What a long chapter's time is made of, for its execution log."""
    lines = []
    for index, cell in enumerate(notebook.cells):
        times = cell.get("metadata", {}).get("execution", {})
        if cell.cell_type != "code" or not {"iopub.execute_input", "shell.execute_reply"} <= set(times):
            continue
        started, ended = (dt.datetime.fromisoformat(times[k]) for k in ("iopub.execute_input", "shell.execute_reply"))
        seconds = (ended - started).total_seconds()
        if seconds >= at_least_s:
            first = next((line for line in cell.source.splitlines() if line.strip()), "")
            lines.append(f"cell {index}: {seconds:.1f} s  {first[:70]}")
    return lines


class NotebookFailed(RuntimeError):
    """A notebook's cells raised: the message names each failing cell; the run's outputs are in ``failed_copy``."""

    def __init__(self, message: str, failed_copy: Path):
        super().__init__(message)
        self.failed_copy = failed_copy


def failed_copy_of(path: Path) -> Path:
    """Where a failed run's outputs go: ``06_x.ipynb`` -> ``06_x.failed.ipynb``, beside it (git ignores it)."""
    return path.with_name(f"{path.stem}.failed.ipynb")


def execute_notebook(path: Path | str, timeout_s: int = 1800, kernel_name: str = "python3") -> None:
    """Execute a notebook top to bottom in its own folder and write it back with fresh outputs, and with the
    fingerprint of the code they came from (:mod:`booktools.freshness`, read in the kernel after the last cell).

    Every cell runs, even after one fails, so one run on a GPU host shows every failure, not only the first. If
    any cell raised, the notebook on disk is left as it was, the run's outputs are written to
    :func:`failed_copy_of` the notebook, and :class:`NotebookFailed` names the failing cells.
    """
    path = Path(path)
    notebook = read_notebook(path)
    notebook.cells.append(nbformat.v4.new_code_cell(freshness.PROBE_SOURCE))  # removed after the run
    client = nbclient.NotebookClient(
        notebook,
        timeout=timeout_s,
        kernel_name=kernel_name,
        resources={"metadata": {"path": str(path.parent)}},
        record_timing=True,  # for slow_cells; stripped before the notebook is written
        allow_errors=True,
    )
    client.execute()
    probe = notebook.cells.pop()
    slow = slow_cells(notebook)
    print(f"{path}: cells of {SLOW_CELL_SECONDS:g} s or more: {len(slow)}", *slow, sep="\n", flush=True)
    try:
        found = freshness.parse_probe_output("".join(_output_text(output) for output in probe.get("outputs", [])))
    except ValueError as missing:  # the kernel could not run the step: the book will say "never fingerprinted"
        print(f"{path}: no fingerprint recorded: {missing}", file=sys.stderr)
    else:
        freshness.record(notebook, found, ROOT)
    # In [n] as Jupyter numbered the cell in this run from the top (empty cells are not run, so not numbered; the
    # teacher's expected-output sheet numbers cells the same way), and the cell's index in the notebook, markdown
    # cells counted from 0, for whoever opens the file
    failures = [
        f"In [{cell.get('execution_count')}], cell {index}: "
        f"{output.get('ename')}: {str(output.get('evalue', ''))[:200]}"
        for index, cell in enumerate(notebook.cells)
        for output in cell.get("outputs", [])
        if output.get("output_type") == "error"
    ]
    failed = failed_copy_of(path)
    if failures:
        nbformat.write(strip_volatile_metadata(notebook), str(failed))
        raise NotebookFailed(
            f"{path}: {len(failures)} cell(s) failed, outputs in {failed}:\n" + "\n".join(failures), failed
        )
    failed.unlink(missing_ok=True)
    nbformat.write(strip_volatile_metadata(notebook), str(path))


def _main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m booktools.notebooks", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("execute", help="execute notebooks in place, outputs kept, volatile metadata stripped")
    run.add_argument("notebooks", nargs="+", type=Path)
    run.add_argument("--timeout", type=int, default=1800, help="seconds allowed per cell")
    check = commands.add_parser("check", help="list notebooks that are not ready to publish")
    check.add_argument("notebooks", nargs="*", type=Path)
    fresh = commands.add_parser("fresh", help="list notebooks whose outputs predate their code (exit 0: information)")
    fresh.add_argument("notebooks", nargs="*", type=Path)
    args = parser.parse_args(list(argv) if argv is not None else None)

    if args.command == "execute":
        status = 0
        for path in args.notebooks:
            print(f"executing {path} ...", flush=True)
            try:
                execute_notebook(path, timeout_s=args.timeout)
            except NotebookFailed as failed:
                print(failed, flush=True)
                status = 1
        return status
    if args.command == "fresh":
        found = freshness.report(args.notebooks or published_notebooks())
        for name, state in found.items():
            if not state.fresh:
                print(f"{name}: {state.line()}")
        print(f"{sum(state.fresh for state in found.values())} of {len(found)} notebooks fresh")
        return 0
    failing = 0
    for path in args.notebooks or chapter_notebooks():
        for problem in notebook_problems(read_notebook(path)):
            print(f"{path}: {problem}")
            failing += 1
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(_main())
