"""The book's edition, read from ``pyproject.toml``: the one place its version is written.

A Sphinx extension (``_config.yml`` loads it under ``sphinx.local_extensions``): the page header (the theme's
sidebar title, and every page's ``<title>``) reads "GPU Interop Book 0.2.0", and Sphinx's ``version`` and
``release`` are set, so that a reader, a course and a citation name the same edition. How a release is made (bump
the version here, a CHANGELOG entry, CITATION.cff, a tag): the README's "Releases".

>>> import re; bool(re.fullmatch(r"\\d+\\.\\d+\\.\\d+", version()))
True
>>> titled("GPU Interop Book", "0.2.0")
'GPU Interop Book 0.2.0'
>>> titled("GPU Interop Book 0.2.0", "0.2.0")
'GPU Interop Book 0.2.0'
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from booktools.paths import BUILD, PYPROJECT

#: What the site serves beside the pages when it is there: ``downloads/`` holds the participant edition's archive
#: (``make workshop-archive``) and the whole book's PDF (``make pdf``), which the book workflow builds first.
SITE_EXTRA = BUILD / "site-extra"
#: The kind of each download, as the header names it.
KINDS = {".zip": "the participant edition (zip)", ".pdf": "the whole book (PDF)"}


def version(pyproject: Path = PYPROJECT) -> str:
    """The book's version: ``project.version`` of ``pyproject.toml``."""
    return tomllib.loads(pyproject.read_text())["project"]["version"]


def titled(title: str, edition: str) -> str:
    """``title`` followed by the edition, once."""
    return title if title.endswith(f" {edition}") else f"{title} {edition}"


def downloads(site_extra: Path | None = None) -> list[Path]:
    """The files of ``site_extra/downloads`` (default :data:`SITE_EXTRA`) the header offers, archive first."""
    folder = (site_extra or SITE_EXTRA) / "downloads"
    found = [path for path in folder.glob("*") if path.suffix in KINDS] if folder.is_dir() else []
    return sorted(found, key=lambda path: list(KINDS).index(path.suffix))


def _set_edition(app, config) -> None:
    edition = version()
    config.version = config.release = edition
    config.html_title = titled(config.html_title or config.project, edition)
    if downloads():
        config.html_extra_path = [*config.html_extra_path, str(SITE_EXTRA)]


def _announce_downloads(app, pagename, templatename, context, doctree) -> None:
    """Above every page, when the site has them: this edition's downloads, linked relative to the page."""
    files = downloads()
    if files and "pathto" in context:
        links = " · ".join(
            f'<a href="{context["pathto"](f"downloads/{path.name}", 1)}">{KINDS[path.suffix]}</a>' for path in files
        )
        context["theme_announcement"] = f"Download edition {version()}: {links}"


def setup(app):
    app.connect("config-inited", _set_edition)
    app.connect("html-page-context", _announce_downloads)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
