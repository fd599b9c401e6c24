"""The package's architecture as a maintainer reads it: chapters' code never imports the book's tooling, no module
imports itself back through others (every import counts, those inside functions too), and the package's table of
contents lists every subpackage and shared module there is."""

from __future__ import annotations

import ast

from booktools.paths import ROOT

PACKAGES = ("support", "booktools")


def module_name(path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, set[str]]:
    """Every module of the two packages and the modules of the two packages it imports, anywhere in its code."""
    found = {}
    paths = [p for package in PACKAGES for p in (ROOT / package).rglob("*.py")]
    names = {module_name(p) for p in paths}
    for path in paths:
        name, imported = module_name(path), set()
        package = name if path.stem == "__init__" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                imported |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(package.split(".")[: len(package.split(".")) - node.level + 1] + [base]).strip(".")
                imported |= {f"{base}.{alias.name}" for alias in node.names} | {base}
        found[name] = {target for target in imported if target in names and target != name}
    return found


def test_the_chapters_package_never_imports_the_books_tooling():
    leaks = {name: sorted(t for t in targets if t.startswith("booktools")) for name, targets in modules().items()}
    assert {name: t for name, t in leaks.items() if name.startswith("support") and t} == {}


def test_no_module_imports_itself_back():
    graph = modules()
    cycles = set()

    def visit(name, path):
        for target in graph.get(name, ()):
            if target in path:
                cycle = path[path.index(target) :]
                cycles.add(" -> ".join([*cycle, target]))
            elif len(path) < 12:
                visit(target, [*path, target])

    for start in graph:
        visit(start, [start])
    packages_importing_their_own_modules = {c for c in cycles if not _is_package_reexport(c)}
    assert packages_importing_their_own_modules == set()


def _is_package_reexport(cycle: str) -> bool:
    """A package's ``__init__`` that re-exports one of its modules, which imports a sibling through the package,
    is one module under two names, not a circle: only that two-step cycle is let through."""
    steps = cycle.split(" -> ")
    if len(steps) != 3:
        return False
    a, b = steps[0], steps[1]
    return b.startswith(a + ".") or a.startswith(b + ".")


def test_the_package_table_of_contents_lists_what_there_is():
    table = (ROOT / "support" / "__init__.py").read_text()
    entries = [p.stem if p.suffix == ".py" else p.name for p in (ROOT / "support").iterdir()]
    shown = [e for e in entries if not e.startswith(("_", ".")) and e not in ("chapter_needs",) and "." not in e]
    missing = [e for e in shown if f"``{e}``" not in table]
    assert missing == [], f"support/__init__.py does not list: {missing}"
