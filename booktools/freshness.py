"""Freshness: whether a chapter's committed outputs still come from the code they run.

``make execute`` (:func:`booktools.notebooks.execute_notebook`) ends each run with one more step in the same
kernel, :data:`PROBE_SOURCE`, which lists the ``support`` modules the kernel had imported and the versions of
the book's libraries; the step is then removed from the notebook, and :func:`fingerprint` keeps, in the
notebook's metadata (``book.fingerprint``), a hash of each of those ``support/`` files, a hash of the notebook's
code cells, and the versions. The kernel's ``sys.modules`` is what really ran: it includes modules imported
inside functions and by other ``support`` modules, which reading the notebook's import lines would miss, and it
is computed where the code ran. Modules imported only by a fresh process, and never by the kernel, are not in
it: a notebook names those in its metadata (``book.child_process_support``, paths such as
``support/ecg/__main__.py``: chapter 6 times its command line in fresh processes), and the fingerprint hashes them
too. :func:`untracked_support` reads the recorded files' source for every ``support`` module they can import,
inside functions too, and lists those the record does not hold: a test has each published notebook name them, or
say why no process of that chapter runs them.

:func:`freshness` compares a notebook's fingerprint with the files now: the outputs are *stale* when a file it ran
changed (its code: docstrings and comments do not count) or is gone, or its code cells changed; *never
fingerprinted* when the notebook has none. The versions are shown, not compared (the machine that checks is rarely
the one that ran). ``python -m booktools.notebooks fresh`` lists every published notebook that is not fresh; as a
Sphinx extension (``_config.yml``, ``sphinx: extra_extensions``) this module puts a visible note at the top of such
a chapter when the book is built, so the note appears and disappears with the code."""

from __future__ import annotations

import ast
import functools
import hashlib
import io
import itertools
import json
import re
import tokenize
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from booktools.paths import ROOT
from support.env import GPU_STACK

#: Where the fingerprint lives in a notebook's metadata: ``metadata["book"]["fingerprint"]``.
BOOK_KEY, FINGERPRINT_KEY = "book", "fingerprint"
#: The libraries whose versions a fingerprint records (those the kernel imported): the banner's
#: (:data:`support.env.GPU_STACK`) and the few more the chapters import.
LIBRARIES = (*GPU_STACK, "jaxlib", "polars", "pandas")
#: Where a notebook names the ``support/`` files only its fresh processes run: ``metadata["book"][CHILD_KEY]``.
CHILD_KEY = "child_process_support"
#: The line the probe step prints before its JSON.
MARK = "book-fingerprint: "

PROBE_SOURCE = f"""\
def _book_fingerprint():
    import json, os, sys

    support = sys.modules.get("support")
    base = os.path.dirname(os.path.abspath(support.__file__)) if support else None
    files = sorted(
        "support/" + os.path.relpath(os.path.abspath(module.__file__), base).replace(os.sep, "/")
        for name, module in list(sys.modules.items())
        if base and (name == "support" or name.startswith("support."))
        and getattr(module, "__file__", None)
    )
    versions = {{
        name: str(getattr(sys.modules[name], "__version__", ""))
        for name in {LIBRARIES!r}
        if name in sys.modules
    }}
    found = {{"support": files, "libraries": versions, "python": sys.version.split()[0]}}
    print({MARK!r} + json.dumps(found))


_book_fingerprint()
del _book_fingerprint
"""


def file_hash(path: Path) -> str:
    r"""The first 16 hex digits of the SHA-256 of the code a file holds: for a Python file its text without its
    docstrings, comments and blank lines (:func:`_code_of`), so a corrected docstring or comment does not make
    the outputs of the code stale (nothing a chapter printed came from them); for any other file its bytes.

    >>> def code(text):
    ...     return _code_of(text.encode(), ".py")
    >>> code("def f():\n    'Old words.'\n    return 1  # one\n") == code("def f():\n\n    return 1\n")
    True
    >>> code("'Module → ×.'\nx = 'é'  # é\n") == code("\nx = 'é'\n")
    True
    >>> code("def f():\n    return 1\n") == code("def f():\n    return 2\n")
    False
    """
    path = Path(path)
    return code_hash(path.read_bytes(), path.suffix)


@functools.lru_cache(maxsize=1024)
def code_hash(data: bytes, suffix: str) -> str:
    """:func:`file_hash` of a file's bytes ``data`` and name ending ``suffix`` (``".py"``): for a file read from
    elsewhere than the disk (an older commit's, from git). Remembered by the bytes themselves: the teachers' page
    asks it for the same support files once per rehearsal and chapter, and parsing them is the slow part."""
    return hashlib.sha256(_code_of(data, suffix)).hexdigest()[:16]


def _code_of(data: bytes, suffix: str) -> bytes:
    """What :func:`file_hash` hashes: a Python file's text with its docstrings and comments blanked out and its
    blank lines and trailing spaces dropped, else the bytes as they are (also for Python that does not parse).

    Text, not a dump of the syntax tree: the tree's dump differs between Python versions (3.12 added fields), and
    a fingerprint taken on the GPU host's Python must match the same code read by another Python.
    """
    if suffix != ".py":
        return data
    try:
        text = data.decode("utf-8")
        tree = ast.parse(text)
    except (SyntaxError, UnicodeDecodeError):
        return data
    lines = text.splitlines()

    def column(line: int, byte_offset: int) -> int:  # the syntax tree counts UTF-8 bytes, tokenize characters
        return len(lines[line - 1].encode()[:byte_offset].decode(errors="ignore"))

    spans = []  # (first line, column, last line, column), lines from 1
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                if isinstance(first.value.value, str):
                    start, end = first.lineno, first.end_lineno
                    spans.append((start, column(start, first.col_offset), end, column(end, first.end_col_offset)))
    try:
        for token in tokenize.generate_tokens(io.StringIO(text).readline):
            if token.type == tokenize.COMMENT:
                spans.append((*token.start, *token.end))
    except (tokenize.TokenError, SyntaxError):
        return data
    for start, first_column, end, last_column in sorted(spans, reverse=True):
        head, tail = lines[start - 1][:first_column], lines[end - 1][last_column:]
        lines[start - 1 : end] = [head + tail]
    kept = [line.rstrip() for line in lines if line.strip()]
    return "\n".join(kept).encode()


def cells_hash(notebook: Mapping) -> str:
    """The first 16 hex digits of the SHA-256 of the notebook's code cells, in order (outputs left out)."""
    sources = [_source(cell) for cell in notebook.get("cells", []) if cell.get("cell_type") == "code"]
    return hashlib.sha256("\n\x00\n".join(sources).encode()).hexdigest()[:16]


def _source(cell: Mapping) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def parse_probe_output(text: str) -> dict:
    """What :data:`PROBE_SOURCE` printed: ``{"support": [...], "libraries": {...}, "python": ...}``."""
    for line in reversed(text.splitlines()):
        if line.startswith(MARK):
            return json.loads(line[len(MARK) :])
    raise ValueError(f"the fingerprint step printed no line starting with {MARK!r}: {text[-300:]!r}")


def support_names(notebook: Mapping, imported: Iterable[str]) -> list[str]:
    """The ``support/`` files a run of ``notebook`` depends on: those its kernel ``imported`` and those its
    metadata says its fresh processes run (:data:`CHILD_KEY`), sorted. The fingerprint and a rehearsal's record of
    the code (``booktools.rehearse.support_hash``) both list these.

    >>> support_names({"metadata": {"book": {CHILD_KEY: ["support/cli.py"]}}}, ["support/a.py", "support/cli.py"])
    ['support/a.py', 'support/cli.py']
    """
    return sorted({*imported, *notebook.get("metadata", {}).get(BOOK_KEY, {}).get(CHILD_KEY, [])})


def reachable_support(files: Iterable[str], root: Path = ROOT) -> set[str]:
    """The ``support/`` files that ``files`` (paths such as ``support/memory/torch_setups.py``) can import, directly
    or through one another, at a module's top or inside a function, or name as a fresh process's target
    (``"support.memory.oom:provoke"``), read from their source (nothing is run), the packages on the way included.
    A module imported inside a function runs only where the function runs: in the kernel (then the fingerprint
    lists it), in a fresh process or a Dask worker (then the notebook must name it, :data:`CHILD_KEY`), or nowhere
    in that chapter; this list is what to check against, an upper bound.

    >>> "support/ecg/step_speed.py" in reachable_support(["support/memory/torch_setups.py"])  # in its fresh process
    True
    """
    seen = {name for name in files if (root / name).is_file()}
    todo = list(seen)
    while todo:
        for found in _imported_support(todo.pop(), root):
            if found not in seen:
                seen.add(found)
                todo.append(found)
    return seen


#: A function a fresh process runs, named as :func:`support.fresh_process.call` takes it.
_TARGET = re.compile(r"support(\.\w+)+:\w+")


def _imported_support(name: str, root: Path) -> set[str]:
    path = root / name
    if path.suffix != ".py":
        return set()  # a data file a process reads imports nothing
    package = ".".join(Path(name).with_suffix("").parts[:-1])  # the package a relative import starts from
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (SyntaxError, ValueError):
        return set()  # code that does not parse imports nothing this reading can follow
    return _support_files(_modules_in(tree, package), root)


def _modules_in(tree: ast.AST, package: str = "") -> set[str]:
    """The module names a tree imports, names as a fresh process's target (``"support.memory.oom:provoke"``), or
    runs with ``-m`` (``["-m", "support.ecg"]``), relative imports resolved against ``package``."""
    modules = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                if node.level > len(parts):
                    continue  # above the top package: Python refuses it
                base = ".".join([*parts[: len(parts) - node.level + 1], *([node.module] if node.module else [])])
            modules |= {base} | {f"{base}.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _TARGET.fullmatch(node.value):
            modules.add(node.value.split(":")[0])
        elif isinstance(node, ast.List | ast.Tuple):
            words = [item.value if isinstance(item, ast.Constant) else None for item in node.elts]
            ran = (after for before, after in itertools.pairwise(words) if before == "-m" and isinstance(after, str))
            modules |= {f"{module}.__main__" for module in ran}
    return modules


def _support_files(modules: Iterable[str], root: Path) -> set[str]:
    found = set()
    for module in modules:
        parts = module.split(".")
        if parts[0] != "support":
            continue
        for end in range(1, len(parts) + 1):  # the packages on the way, then the module (a name may be a function)
            stem = "/".join(parts[:end])
            for candidate in (f"{stem}.py", f"{stem}/__init__.py"):
                if (root / candidate).is_file():
                    found.add(candidate)
    return found


def untracked_support(notebook: Mapping, root: Path = ROOT) -> list[str]:
    """The ``support/`` files that the files a notebook's run recorded (its fingerprint, and the files it names as
    its fresh processes', :data:`CHILD_KEY`) can import (:func:`reachable_support`) and that its record does not
    hold: each one runs in a fresh process or a worker that the notebook does not name, or nowhere in that chapter.
    The notebook's code cells are read too, for a process a cell starts itself. Empty for a notebook with no
    fingerprint (its note already says it was never fingerprinted)."""
    book = notebook.get("metadata", {}).get(BOOK_KEY, {})
    recorded = set(book.get(FINGERPRINT_KEY, {}).get("support", {}))
    if not recorded:
        return []
    named = set(book.get(CHILD_KEY, []))
    from_cells = _support_files(_cells_modules(notebook), root)  # a cell may start a process itself
    return sorted(reachable_support(recorded | named | from_cells, root) - recorded - named)


def _cells_modules(notebook: Mapping) -> set[str]:
    modules = set()
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        lines = [line for line in _source(cell).splitlines() if not line.lstrip().startswith(("%", "!"))]
        try:
            modules |= _modules_in(ast.parse("\n".join(lines)))
        except SyntaxError:
            continue  # a cell of IPython syntax this reading does not follow
    return modules


def fingerprint(found: Mapping, notebook: Mapping, root: Path = ROOT) -> dict:
    """The fingerprint of a run: a hash of each ``support/`` file the kernel imported (``found``, as
    :func:`parse_probe_output` gives it) or the notebook says its fresh processes run (:data:`CHILD_KEY`), as it is
    under ``root`` now, of the notebook's code cells, and the library versions. A named file that is not there is
    kept with no hash (None), so that :func:`freshness` calls the outputs stale until they run again with the file
    there (or with the notebook no longer naming it), instead of leaving it out of the record."""
    names = support_names(notebook, found["support"])
    files = {name: file_hash(root / name) if (root / name).is_file() else None for name in names}
    return {
        "support": files,
        "cells": cells_hash(notebook),
        "libraries": dict(sorted(found.get("libraries", {}).items())),
        "python": found.get("python", ""),
    }


def record(notebook, found: Mapping, root: Path = ROOT) -> None:
    """Keep the fingerprint of this run in the notebook's metadata (``book.fingerprint``), in place."""
    notebook["metadata"].setdefault(BOOK_KEY, {})[FINGERPRINT_KEY] = fingerprint(found, notebook, root)


@dataclass(frozen=True)
class Freshness:
    """Whether a notebook's outputs come from the code as it is: ``status`` is fresh, stale or never
    fingerprinted; ``reasons`` say what changed."""

    status: str
    reasons: list[str] = field(default_factory=list)
    libraries: dict[str, str] = field(default_factory=dict)

    @property
    def fresh(self) -> bool:
        return self.status == "fresh"

    def line(self) -> str:
        return self.status + (": " + "; ".join(self.reasons) if self.reasons else "")


def freshness(notebook: Mapping, root: Path = ROOT) -> Freshness:
    """Compare the notebook's fingerprint with the files under ``root`` and its own code cells now."""
    found = notebook.get("metadata", {}).get(BOOK_KEY, {}).get(FINGERPRINT_KEY)
    if not found:
        return Freshness("never fingerprinted", ["no record of the code its outputs came from"])
    reasons = []
    recorded_files = found.get("support", {})
    for name, recorded in sorted(recorded_files.items()):
        path = root / name
        if not path.is_file():
            reasons.append(f"{name} is gone" if recorded is not None else f"{name} was missing when it ran")
        elif file_hash(path) != recorded:
            reasons.append(f"{name} changed")
    children = notebook.get("metadata", {}).get(BOOK_KEY, {}).get(CHILD_KEY, [])
    reasons += [f"{name} is not in the record of its run" for name in children if name not in recorded_files]
    if found.get("cells") and found["cells"] != cells_hash(notebook):
        reasons.append("its code cells changed")
    return Freshness("stale" if reasons else "fresh", reasons, dict(found.get("libraries", {})))


def report(notebooks: Iterable[Path], root: Path = ROOT) -> dict[str, Freshness]:
    """Each notebook's freshness, keyed by its path relative to ``root``."""
    return {
        str(Path(path).resolve().relative_to(root.resolve())): freshness(json.loads(Path(path).read_text()), root)
        for path in notebooks
    }


def note(found: Freshness) -> str:
    """The note a chapter that is not fresh carries at its top (MyST markdown), or "" for a fresh one."""
    if found.fresh:
        return ""
    if found.status == "never fingerprinted":
        what = (
            "The outputs of this chapter predate the book's record of the code they run: they were never "
            "fingerprinted, so nothing here says that they still match the code."
        )
    else:
        what = "The outputs of this chapter predate a change to the code they run: " + "; ".join(found.reasons) + "."
    ran = ", ".join(f"{name} {version}" for name, version in found.libraries.items() if version)
    return (
        "```{warning}\n"
        + what
        + (f" They were produced with {ran}." if ran else "")
        + " Until the chapter is executed again (`make execute`), a figure below may differ from what the code "
        "gives now.\n```\n"
    )


def with_note(notebook: dict, text: str) -> dict:
    """The notebook with ``text`` after the first heading of its first markdown cell (a new first cell when it
    has none); the notebook is changed in place and returned."""
    if not text:
        return notebook
    for cell in notebook.get("cells", []):
        if cell.get("cell_type") != "markdown":
            continue
        lines = _source(cell).splitlines(keepends=True)
        for index, line in enumerate(lines):
            if line.startswith("# "):
                cell["source"] = "".join([*lines[: index + 1], "\n", text, "\n", *lines[index + 1 :]])
                return notebook
        break
    notebook.setdefault("cells", []).insert(0, {"cell_type": "markdown", "metadata": {}, "source": text})
    return notebook


def _notebook_note(srcdir: Path, docname: str, text: str | None = None) -> str | None:
    """The note for ``docname`` (None when it is not a notebook), from ``text`` or the file."""
    path = Path(srcdir) / f"{docname}.ipynb"
    if not path.is_file():
        return None
    try:
        notebook = json.loads(path.read_text() if text is None else text)
    except ValueError:  # not a notebook in JSON: the page is left as it is
        return None
    return note(freshness(notebook, Path(srcdir)))


def _mark_if_not_fresh(app, docname: str, source: list[str]) -> None:
    """Sphinx ``source-read``: put the note at the top of a chapter notebook whose outputs are not fresh."""
    text = _notebook_note(Path(app.srcdir), docname, source[0])
    if text is None:
        return
    if getattr(app, "env", None) is not None:
        _notes(app.env)[docname] = text
    if text:
        source[0] = json.dumps(with_note(json.loads(source[0]), text))


def _notes(env) -> dict[str, str]:
    if not hasattr(env, "book_freshness_notes"):
        env.book_freshness_notes = {}
    return env.book_freshness_notes


def _outdated_by_the_code(app, env, added, changed, removed) -> list[str]:
    """Sphinx ``env-get-outdated``: a notebook page is read again when its note would change (a ``support/`` file
    it ran changed or came back), though the notebook itself did not; so the note comes and goes with the code."""
    notes = _notes(env)
    return [
        docname
        for docname, shown in notes.items()
        if docname not in changed and docname in env.found_docs and _notebook_note(app.srcdir, docname) != shown
    ]


def _merge_notes(app, env, docnames, other) -> None:
    _notes(env).update({name: text for name, text in _notes(other).items() if name in docnames})


def setup(app) -> dict:
    """The Sphinx extension: the staleness note, decided at build time from the notebook and the code."""
    app.connect("source-read", _mark_if_not_fresh)
    app.connect("env-get-outdated", _outdated_by_the_code)
    app.connect("env-merge-info", _merge_notes)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
