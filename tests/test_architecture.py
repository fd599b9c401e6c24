"""The package's architecture as a maintainer reads it: the import contracts hold (import-linter, configured in
pyproject.toml's [tool.importlinter]: chapters' code never imports the book's tooling, and no package's modules
import each other in a circle, those inside functions too), lazy imports are kept for the GPU libraries (ruff's
PLC0415 with TID253, [tool.ruff.lint]), and the tables of contents list every module there is."""

from __future__ import annotations

import ast
import importlib.util
import subprocess
import sys
import tomllib

import pytest

from booktools.paths import PYPROJECT, ROOT


def test_the_import_contracts_hold(skip_or_fail):
    """``lint-imports`` (import-linter) checks the contracts; its report names each broken one and the imports."""
    if importlib.util.find_spec("importlinter") is None:
        skip_or_fail("import-linter is not installed here (the test extra has it: pip install -e '.[test]')")
    done = subprocess.run(
        [sys.executable, "-c", "from importlinter.cli import lint_imports_command; lint_imports_command()"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    contracts = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]["contracts"]
    assert f"Contracts: {len(contracts)} kept, 0 broken." in done.stdout


def test_the_contracts_name_what_the_old_rules_named():
    """support never imports booktools, and no package has a circle among its modules."""
    config = tomllib.loads(PYPROJECT.read_text())["tool"]["importlinter"]
    kinds = {(c["type"], tuple(c.get("source_modules", c.get("ancestors", [])))) for c in config["contracts"]}
    assert ("forbidden", ("support",)) in kinds
    assert ("acyclic_siblings", ("support", "booktools")) in kinds


def test_lazy_imports_are_for_the_gpu_libraries_only(skip_or_fail):
    """ruff's PLC0415 (an import inside a function) is on for support/, booktools/, tests/ and conftest.py, and lets
    through only the libraries of banned-module-level-imports (TID253), which there must not be imported at the
    top (a line that must says why in its noqa)."""
    if importlib.util.find_spec("ruff") is None:
        skip_or_fail("ruff is not installed here (the test extra has it: pip install -e '.[test]')")
    command = [sys.executable, "-m", "ruff"]
    done = subprocess.run(
        [
            *command,
            "check",
            "--select",
            "PLC0415,TID253",
            "--output-format",
            "concise",
            "support",
            "booktools",
            "tests",
            "conftest.py",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-1000:]
    lazy = tomllib.loads(PYPROJECT.read_text())["tool"]["ruff"]["lint"]["flake8-tidy-imports"]
    assert {"cupy", "cudf", "rmm", "numba", "torch", "jax"} <= set(lazy["banned-module-level-imports"])


def _listed(init_source: str) -> str:
    return ast.get_docstring(ast.parse(init_source)) or ""


def test_the_package_table_of_contents_lists_what_there_is():
    table = (ROOT / "support" / "__init__.py").read_text()
    entries = [p.stem if p.suffix == ".py" else p.name for p in (ROOT / "support").iterdir()]
    shown = [e for e in entries if not e.startswith(("_", ".")) and e not in ("chapter_needs",) and "." not in e]
    missing = [e for e in shown if f"``{e}``" not in table]
    assert missing == [], f"support/__init__.py does not list: {missing}"


def test_the_tooling_table_of_contents_lists_every_module():
    table = _listed((ROOT / "booktools" / "__init__.py").read_text())
    missing = [p.stem for p in (ROOT / "booktools").glob("*.py") if not p.stem.startswith("_")]
    missing = [name for name in missing if f"``{name}``" not in table]
    assert missing == [], f"booktools/__init__.py does not list: {missing}"


SUBPACKAGES = sorted(p.parent for p in (ROOT / "support").glob("*/__init__.py"))


@pytest.mark.parametrize("package", SUBPACKAGES, ids=lambda p: p.name)
def test_each_subpackage_lists_its_modules(package):
    """A subpackage's ``__init__`` docstring names each of its modules as ``support.<package>.<module>`` (the
    way :mod:`~support.memory.pools` is written), so a reader finds the one idea of each."""
    table = _listed((package / "__init__.py").read_text())
    modules = sorted(p.stem for p in package.glob("*.py") if not p.stem.startswith("_"))
    missing = [name for name in modules if f"support.{package.name}.{name}`" not in table]
    assert modules and missing == [], f"support/{package.name}/__init__.py does not list: {missing}"
