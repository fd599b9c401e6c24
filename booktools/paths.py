"""Where the book's files are: the one place that computes the repository's root.

>>> (ROOT / "pyproject.toml").exists()
True
"""

from __future__ import annotations

from pathlib import Path

#: The repository: the folder that holds ``pyproject.toml``, ``chapters/`` and ``runs/``.
ROOT = Path(__file__).resolve().parent.parent
CHAPTERS = ROOT / "chapters"
RUNS = ROOT / "runs"
README = ROOT / "README.md"
PYPROJECT = ROOT / "pyproject.toml"
BUILD = ROOT / "_build"
