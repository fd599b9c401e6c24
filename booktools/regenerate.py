"""Every generated file of the book, rewritten from the records in one go: ``make regenerate``.

=======================================  =================================  ====================================
file                                     made from                          by
=======================================  =================================  ====================================
``README.md`` (the table of runs)        ``runs/chapter_runs.json``         :func:`booktools.runs.runs_table`
``chapters/91_claims_and_evidence.md``   ``runs/claims.json``, the titles   :func:`booktools.evidence.page`
``support/chapter_needs.json``           ``runs/chapter_runs.json``         :func:`booktools.runs.write_needs`
``chapters/diagrams/*.png``              the code that draws them           :func:`booktools.diagrams.write_all`
=======================================  =================================  ====================================

Nothing here measures: the records are written by the runs on a GPU host (``make execute``, ``make test-gpu``,
``make rehearse``), and these files only show them. ``into`` writes the same files under another folder (a copy
of the repository's layout), which is how ``tests/test_regenerate.py`` checks that the committed ones are current.
"""

from __future__ import annotations

import sys
from pathlib import Path

from booktools import diagrams, evidence, runs
from booktools.paths import ROOT
from support.needs import NEEDS_FILE

#: The generated files, relative to the repository (the diagrams: one PNG per :data:`booktools.diagrams.DIAGRAMS`).
TEXT_FILES = (
    runs.README.relative_to(ROOT),
    evidence.PAGE.relative_to(ROOT),
    NEEDS_FILE.relative_to(ROOT),
)
DIAGRAM_FOLDER = diagrams.FOLDER.relative_to(ROOT)


def regenerate(into: Path = ROOT, *, drawings: bool = True) -> list[Path]:
    """Rewrite every generated file from the committed records, under ``into`` (the repository by default);
    return the paths written. ``drawings=False`` leaves the diagrams out (they take seconds to draw)."""
    into = Path(into)
    readme, page, needs = (into / name for name in TEXT_FILES)
    for path in (readme, page, needs):
        path.parent.mkdir(parents=True, exist_ok=True)
    readme.write_text(runs.readme_with_table(runs.README.read_text(), runs.runs_table(runs.load())))
    evidence.write_page(evidence.load(), page)
    runs.write_needs(runs.load(), needs)
    return [readme, page, needs, *(diagrams.write_all(into / DIAGRAM_FOLDER) if drawings else [])]


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] in ("-h", "--help"):
        print(__doc__.split("\n")[0])
        print("usage: python -m booktools.regenerate [FOLDER]   (default: the repository itself)")
        return 0
    for path in regenerate(Path(argv[0]) if argv else ROOT):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
