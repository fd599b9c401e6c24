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

from booktools.paths import PYPROJECT


def version(pyproject: Path = PYPROJECT) -> str:
    """The book's version: ``project.version`` of ``pyproject.toml``."""
    return tomllib.loads(pyproject.read_text())["project"]["version"]


def titled(title: str, edition: str) -> str:
    """``title`` followed by the edition, once."""
    return title if title.endswith(f" {edition}") else f"{title} {edition}"


def _set_edition(app, config) -> None:
    edition = version()
    config.version = config.release = edition
    config.html_title = titled(config.html_title or config.project, edition)


def setup(app):
    app.connect("config-inited", _set_edition)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
