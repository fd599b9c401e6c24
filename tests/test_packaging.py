"""What an install of the project holds: setuptools finds every package under support/ and booktools/ by itself
(pyproject.toml's [tool.setuptools.packages.find]), so a new subpackage cannot silently go missing from an
install, and the data files the package reads ship with it."""

from __future__ import annotations

import tomllib

from setuptools import find_packages

from booktools.paths import PYPROJECT, ROOT

CONFIG = tomllib.loads(PYPROJECT.read_text())["tool"]["setuptools"]


def found_packages(where) -> set[str]:
    """The packages the build backend installs from ``where``, with the project's own discovery settings."""
    find = CONFIG["packages"]["find"]
    assert find.get("namespaces") is False  # folders without __init__.py (support/ecg/data) are data, not packages
    return set(find_packages(where=str(where), include=find["include"], exclude=find.get("exclude", ())))


def test_packages_are_discovered_not_listed():
    assert set(CONFIG["packages"]) == {"find"}, "a hand-kept list of packages goes stale"


def test_every_package_of_the_repository_is_installed():
    on_disk = {
        ".".join(path.parent.relative_to(ROOT).parts)
        for top in ("support", "booktools")
        for path in (ROOT / top).rglob("__init__.py")
    }
    assert found_packages(ROOT) == on_disk


def test_a_new_subpackage_would_be_installed(tmp_path):
    for package in ("support", "support/new_topic", "support/new_topic/deeper", "booktools", "elsewhere"):
        (tmp_path / package).mkdir(parents=True)
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "support" / "new_topic" / "data").mkdir()  # data, not a package
    assert found_packages(tmp_path) == {"support", "support.new_topic", "support.new_topic.deeper", "booktools"}


def test_the_data_the_package_reads_ships_with_it():
    data = CONFIG["package-data"]
    assert "chapter_needs.json" in data["support"]  # support.needs reads it beside itself
    for pattern in data["support.ecg"]:
        assert list((ROOT / "support" / "ecg").glob(pattern)), f"support/ecg/{pattern} matches no file"
