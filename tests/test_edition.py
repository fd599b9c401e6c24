"""The page header shows the edition pyproject.toml names (booktools/edition.py, loaded by _config.yml), and the
site offers this edition's downloads when the book workflow has built them."""

from __future__ import annotations

import tomllib
from types import SimpleNamespace

import yaml

from booktools import edition
from booktools.paths import PYPROJECT, ROOT


def test_the_book_loads_the_edition_extension():
    config = yaml.safe_load((ROOT / "_config.yml").read_text())
    assert "booktools.edition" in config["sphinx"]["local_extensions"]


def test_make_pdf_is_configured_for_the_file_it_copies_and_a_unicode_engine():
    """`make pdf` copies _build/latex/book.pdf: Sphinx must be told that name (else projectnamenotset.tex), and the
    engine must be xelatex, since the book's text holds ×, → and µ, which pdflatex refuses."""
    latex = yaml.safe_load((ROOT / "_config.yml").read_text())["latex"]
    makefile = (ROOT / "Makefile").read_text()
    assert latex["latex_documents"]["targetname"] == "book.tex" and "_build/latex/book.pdf" in makefile
    assert latex["latex_engine"] == "xelatex"


def test_the_header_shows_pyprojects_version():
    written = tomllib.loads(PYPROJECT.read_text())["project"]["version"]
    config = SimpleNamespace(html_title="GPU Interop Book", project="GPU Interop Book", html_extra_path=[])
    edition._set_edition(None, config)
    assert config.html_title == f"GPU Interop Book {written}" and config.release == written


def test_downloads_are_announced_with_links_relative_to_the_page(tmp_path, monkeypatch):
    (tmp_path / "downloads").mkdir()
    for name in ("book.pdf", "edition.zip", "notes.txt"):
        (tmp_path / "downloads" / name).write_text("x")
    monkeypatch.setattr(edition, "SITE_EXTRA", tmp_path)
    context = {"pathto": lambda target, resource: f"../{target}"}
    edition._announce_downloads(None, "chapters/01_why_gpus", "page.html", context, None)
    assert context["theme_announcement"] == (
        f'Download edition {edition.version()}: <a href="../downloads/edition.zip">the participant edition (zip)</a>'
        ' · <a href="../downloads/book.pdf">the whole book (PDF)</a>'
    )


def test_no_downloads_no_announcement(tmp_path, monkeypatch):
    monkeypatch.setattr(edition, "SITE_EXTRA", tmp_path)
    context = {"pathto": lambda target, resource: target}
    edition._announce_downloads(None, "index", "page.html", context, None)
    assert "theme_announcement" not in context


def test_the_citation_and_the_changelog_name_the_same_edition():
    """CITATION.cff (CFF 1.2.0) cites the version pyproject.toml names, and CHANGELOG.md has its section; a
    release that bumps one and not the others fails here (cffconvert --validate checks the whole schema)."""
    written = edition.version()
    citation = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert citation["cff-version"] == "1.2.0"
    assert str(citation["version"]) == written, f"CITATION.cff cites {citation['version']}, pyproject says {written}"
    assert {"title", "authors", "message"} <= set(citation) and citation["authors"]
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert f"\n## [{written}]" in changelog, f"CHANGELOG.md has no section for {written}"
