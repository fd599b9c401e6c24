"""The teacher's plan of one agenda, as a file beside the expected-output sheet: ``python -m booktools.plan
two-hours _build/workshop-teacher/plan.md`` (``make workshop AGENDA=two-hours`` runs it).

It is the agenda as the teachers' page prints it (:func:`booktools.teaching.agenda_text`), paced with the recorded
rehearsals (:func:`booktools.rehearse.load`), so that the teacher has the slots, what is live-coded, discussed or
run through, and the exercise of each chapter on the day without the book's site.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from booktools import agendas, rehearse, teaching


def plan_text(agenda: str) -> str:
    """The plan of ``agenda`` as Markdown: a heading and the teachers' page's text in a code block."""
    body = teaching.agenda_text(agenda, rehearsals=rehearse.load())
    return f"# The plan of the {agenda} agenda (from the teachers' page)\n\n```text\n{body}\n```\n"


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
