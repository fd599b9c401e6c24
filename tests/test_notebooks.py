"""The committed chapters: listed in the table of contents, executed on a GPU, ready to publish."""

import ast
import importlib
import json
import re
import types

import pytest

from booktools import freshness, notebooks

CHAPTERS = notebooks.chapter_notebooks()
MAX_NOTEBOOK_BYTES = 4 << 20  # notebooks travel to the GPU host and into git: keep plots small


def test_there_are_chapters():
    assert CHAPTERS, "chapters/ has no notebooks"


def test_table_of_contents_lists_every_chapter_and_nothing_else():
    listed = {entry.removesuffix(".ipynb") for entry in notebooks.toc_files() if entry.startswith("chapters/")}
    pages = sorted((notebooks.ROOT / "chapters").glob("*.md"))  # generated pages: the claims and evidence
    on_disk = {f"chapters/{path.stem}" for path in [*CHAPTERS, *pages]}
    assert listed - on_disk == set(), "_toc.yml lists pages that do not exist"
    assert on_disk - listed == set(), "chapters/ has pages that _toc.yml does not list"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_chapter_is_named_by_number_and_topic(path):
    assert re.fullmatch(r"\d\d_[a-z0-9_]+\.ipynb", path.name), "chapters are named NN_topic.ipynb"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_chapter_was_executed_on_a_gpu_and_is_ready(path):
    assert notebooks.notebook_problems(notebooks.read_notebook(path)) == []


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_chapter_is_small_and_free_of_run_noise(path):
    assert path.stat().st_size < MAX_NOTEBOOK_BYTES, "downsample plots (dpi ~100) to keep notebooks small"
    notebook = notebooks.read_notebook(path)
    for key in notebooks.VOLATILE_NOTEBOOK_METADATA:
        assert key not in notebook.metadata
    for cell in notebook.cells:
        assert not set(notebooks.VOLATILE_CELL_METADATA) & set(cell.metadata), (
            "run `make execute` to strip run metadata"
        )


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_chapter_starts_with_a_title_and_the_environment_banner(path):
    notebook = notebooks.read_notebook(path)
    assert notebook.cells[0].cell_type == "markdown" and notebook.cells[0].source.startswith("# ")
    if notebooks.needs_gpu(notebook):
        first_code = notebooks.code_cells(notebook)[0].source
        # env.banner() prints the book's stack; a chapter that uses more libraries names them: env.banner(more)
        assert "env.banner(" in first_code, "the first code cell prints support.env.banner()"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_what_a_chapter_imports_from_the_books_packages_exists(path):
    """Every ``from support... import name`` of a chapter names a module or attribute that is there (checked on the
    CPU: the modules import their GPU libraries lazily); only the teachers' page uses the book's tooling."""
    notebook = notebooks.read_notebook(path)
    missing = []
    for cell in notebooks.code_cells(notebook):
        for node in ast.walk(ast.parse(notebooks._python_source(cell.source))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in PACKAGES:
                if node.module.startswith("booktools") and notebooks.needs_gpu(notebook):
                    missing.append(f"{node.module} (chapters never import the book's tooling)")
                    continue
                module = importlib.import_module(node.module)
                for alias in node.names:
                    if not hasattr(module, alias.name):
                        try:
                            importlib.import_module(f"{node.module}.{alias.name}")
                        except ModuleNotFoundError:
                            missing.append(f"{node.module}.{alias.name}")
    assert missing == [], f"{path.name} imports what is not there: {missing}"


def _has(module, name: str) -> bool:
    if hasattr(module, name):
        return True
    try:
        importlib.import_module(f"{module.__name__}.{name}")
    except ModuleNotFoundError:
        return False
    return True


def _bound_at_top_level(tree: ast.Module) -> set[str]:
    """The names a cell binds in the notebook's namespace: assignments, loop and ``with`` targets, functions,
    classes and imports of anything but the book's own packages, at the cell's top level or inside its ``if``,
    ``for``, ``while``, ``with`` and ``try`` blocks (not inside a function, a class or a comprehension, whose
    names are their own)."""
    names: set[str] = set()

    def targets(node: ast.AST) -> None:
        for part in ast.walk(node):
            if isinstance(part, ast.Name):
                names.add(part.id)

    def visit(statements: list[ast.stmt]) -> None:
        for statement in statements:
            if isinstance(statement, ast.Assign):
                for target in statement.targets:
                    targets(target)
            elif isinstance(statement, ast.AugAssign | ast.AnnAssign | ast.For | ast.AsyncFor):
                targets(statement.target)
            elif isinstance(statement, ast.With | ast.AsyncWith):
                for item in statement.items:
                    if item.optional_vars is not None:
                        targets(item.optional_vars)
            elif isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(statement.name)
            elif isinstance(statement, ast.Import | ast.ImportFrom):
                module = statement.module if isinstance(statement, ast.ImportFrom) else None
                for alias in statement.names:
                    source = module or alias.name
                    if source.split(".")[0] not in PACKAGES:
                        names.add(alias.asname or alias.name.split(".")[0])
            for field in ("body", "orelse", "finalbody"):
                if not isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    visit(getattr(statement, field, []))
            for handler in getattr(statement, "handlers", []):
                visit(handler.body)

    visit(tree.body)
    return names


@pytest.mark.parametrize("path", notebooks.chapter_notebooks(), ids=lambda p: p.name)
def test_what_a_chapter_reads_from_the_books_modules_exists(path):
    """Every ``module.name`` a chapter reads from a module of the book it imported (``from support import
    memory``, then ``memory.use_one_pool``) is there: a name moved to a submodule fails here, on the CPU, not in
    the middle of a GPU run."""
    bound: dict[str, types.ModuleType] = {}
    missing = []
    trees = [ast.parse(notebooks._python_source(c.source)) for c in notebooks.code_cells(notebooks.read_notebook(path))]
    rebound = {name for tree in trees for name in _bound_at_top_level(tree)}
    for tree in trees:
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] in PACKAGES:
                for alias in node.names:
                    found = getattr(importlib.import_module(node.module), alias.name, None)
                    if found is None:
                        found = importlib.import_module(f"{node.module}.{alias.name}")
                    if isinstance(found, types.ModuleType):
                        bound[alias.asname or alias.name] = found
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] in PACKAGES and alias.asname:
                        bound[alias.asname] = importlib.import_module(alias.name)
        for node in ast.walk(tree):
            name = node.value.id if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) else None
            if name in bound and not _has(bound[node.value.id], node.attr):
                missing.append(f"{node.value.id}.{node.attr}")
    # a cell that binds a module's name again (views = {...} after importing support.interop.views) leaves every
    # cell run after it, an earlier one run again included, with something else where the module was
    shadowed = sorted(set(bound) & rebound)
    assert shadowed == [], f"{path.name} binds names it imported as the book's modules again: {shadowed}; rename"
    assert missing == [], f"{path.name} reads names its modules lack: {sorted(set(missing))}"


PACKAGES = ("support", "booktools")


#: Names the book's libraries renamed or deprecated, with their current names: chapters' code uses the current
#: ones; a cell may show an old name only beside its current one (a demonstration of the trap), and the prose may
#: name the old ones where readers meet them.
OLD_NAMES = {
    "PYTORCH_CUDA_ALLOC_CONF": "PYTORCH_ALLOC_CONF",
    "XLA_PYTHON_CLIENT_MEM_FRACTION": "XLA_CLIENT_MEM_FRACTION",
    "cupy.cuda.ExternalStream": "cupy.cuda.Stream.from_external",
    "rmm.rmm_cupy_allocator": "rmm.allocators.cupy",
}


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_chapters_code_uses_current_names(path):
    cells = notebooks.code_cells(notebooks.read_notebook(path))
    found = [old for old, new in OLD_NAMES.items() for cell in cells if old in cell.source and new not in cell.source]
    assert found == [], f"{path.name} uses old names in its code: {found}"


@pytest.mark.parametrize("path", CHAPTERS, ids=lambda p: p.name)
def test_every_claim_a_chapter_states_held_in_its_published_outputs(path):
    """Each ``claims.*("name", ...)`` call in a chapter's code printed its ✓ line in the committed outputs: the
    published notebook was executed with the claims it states, and each held. A chapter whose outputs predate its
    code (:mod:`booktools.freshness`: the book notes it on the chapter's page, and ``make test`` lists it) waits
    for its execution, and is checked again once executed."""
    notebook = notebooks.read_notebook(path)
    found = freshness.freshness(notebook)
    if found.status == "stale":
        pytest.skip(f"{path.name}'s outputs predate its code ({'; '.join(found.reasons)}): execute it")
    code = "\n".join(cell.source for cell in notebooks.code_cells(notebook))
    names = re.findall(r"claims\.\w+\(\s*f?\"([\w.{}\[\]'\" ]+?)\",", code)
    patterns = [re.escape(name).replace(r"\{", "{").replace(r"\}", "}") for name in names]
    patterns = [re.sub(r"\{[^}]*\}", r"\\w+", pattern) for pattern in patterns]
    outputs = json.dumps([cell.get("outputs", []) for cell in notebook.cells], ensure_ascii=False)
    missing = [name for name, pattern in zip(names, patterns, strict=True) if not re.search(f"✓ {pattern}: ", outputs)]
    assert missing == [], f"{path.name}: claims without a ✓ line in the outputs (execute it): {missing}"


def test_a_name_bound_at_a_cell_s_top_level_is_found_and_one_inside_a_function_or_comprehension_is_not():
    source = (
        "from support.interop import views\nimport numpy as np\nimport torch.nn as tnn\nfrom support import env\n"
        "views = {}\nfor i, (a, b) in []: pass\nwith open('x') as f: pass\ndef f(): local = 1\n"
        "squares = [k for k in range(3)]\nif True:\n    inside = 2\n"
    )
    assert _bound_at_top_level(ast.parse(source)) == {"views", "np", "tnn", "i", "a", "b", "f", "squares", "inside"}
