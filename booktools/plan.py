"""The teacher's plan of one agenda, as a file beside the expected-output sheet: ``python -m booktools.plan
two-hours _build/workshop-teacher/plan.md`` (``make workshop AGENDA=two-hours`` runs it).

It is the agenda as the teachers' page prints it (:func:`booktools.teaching.agenda_text`), paced with the recorded
rehearsals (:func:`booktools.rehearse.load`), so that the teacher has the slots, what is live-coded, discussed or
run through, and the exercise of each chapter on the day without the book's site, and, under it, what each of the
agenda's chapters teaches (objectives and key points, the teachers' page's own paragraphs: :func:`what_each_teaches`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from booktools import agendas, rehearse, teaching
from booktools.notebooks import read_notebook
from booktools.paths import CHAPTERS

#: The teachers' page, whose section "What each chapter teaches" holds one paragraph per chapter page.
TEACHERS_PAGE = CHAPTERS / "90_for_teachers.ipynb"


def what_each_teaches(chapters: list[str], page: Path = TEACHERS_PAGE) -> list[str]:
    """The paragraph of the teachers' page's "What each chapter teaches" for each of ``chapters``: the one that
    starts ``**4.`` for a chapter's first page (``04_memory_pools``), ``**4, second page.`` for its second
    (``04_watching_memory``, the next file name of that number). Raises ValueError for a chapter without one."""
    text = "\n\n".join(cell.source for cell in read_notebook(page).cells if cell.cell_type == "markdown")
    heading = "## What each chapter teaches"
    if heading not in text:
        raise ValueError(f"{page.name} has no section '{heading[3:]}'")
    section = text.split(heading, 1)[1].split("\n## ", 1)[0]
    paragraphs = [p.strip() for p in section.split("\n\n") if p.strip().startswith("**")]
    found = []
    for chapter in chapters:
        number = int(chapter[:2])
        same = sorted({path.stem for path in CHAPTERS.glob(f"{chapter[:2]}_*.ipynb")} | {chapter})
        if same.index(chapter) > 1:
            raise ValueError(f"{chapter} is a third page of chapter {number}: the page has no name for it")
        opening = f"**{number}." if same.index(chapter) == 0 else f"**{number}, second page."
        match = [p for p in paragraphs if p.startswith(opening)]
        if not match:
            raise ValueError(f"the teachers' page says nothing of {chapter} under 'What each chapter teaches'")
        found.append(match[0])
    return found


def plan_text(agenda: str) -> str:
    """The plan of ``agenda`` as Markdown: a heading, the teachers' page's text in a code block, and what each of
    its chapters teaches."""
    body = teaching.agenda_text(agenda, rehearsals=rehearse.load())
    teaches = "\n\n".join(what_each_teaches(list(agendas.AGENDAS[agenda])))
    return (
        f"# The plan of the {agenda} agenda (from the teachers' page)\n\n```text\n{body}\n```\n\n"
        f"## What each chapter teaches\n\n{teaches}\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m booktools.plan", description=__doc__.split("\n")[0])
    parser.add_argument("agenda", help=f"one of: {', '.join(agendas.AGENDAS)}")
    parser.add_argument("out", type=Path, help="the file to write (its folder is made)")
    args = parser.parse_args(argv)
    try:
        text = plan_text(args.agenda)
    except ValueError as error:
        print(f"plan: {error}", file=sys.stderr)
        return 2
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(text)
    print(f"the teacher's plan: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
