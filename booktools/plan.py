"""The teacher's plan of one agenda, as a file beside the expected-output sheet: ``python -m booktools.plan
two-hours _build/workshop-teacher/plan.md`` (``make workshop AGENDA=two-hours`` runs it).

It is the agenda as the teachers' page prints it (:func:`booktools.teaching.agenda_text`), paced with the recorded
rehearsals (:func:`booktools.rehearse.load`), so that the teacher has the slots, what is live-coded, discussed or
run through, and the exercise of each chapter on the day without the book's site, and, under it, what each of the
agenda's chapters teaches (objectives and key points, the teachers' page's own paragraphs: :func:`what_each_teaches`).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from booktools import agendas, rehearse, teaching, workshop
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


def objectives(paragraph: str) -> list[tuple[str, str]]:
    """The objectives of one paragraph of :func:`what_each_teaches`, each with the section that teaches it: the
    paragraph writes them ``Objectives: do this (in *Section*); do that (in *Other section*, a note). Key
    points: ...``, the section by its title or the title's beginning, as the participant edition names it. An
    objective without its section is refused, so that a new objective says where the room meets it.

    >>> objectives("**1. X.** Objectives: copy (in *The cost*); find it (in *Proof*, at the end). Key points: y.")
    [('copy', 'The cost'), ('find it', 'Proof')]
    """
    if "Objectives:" not in paragraph:
        return []
    listed = paragraph.split("Objectives:", 1)[1].split("Key points:", 1)[0].strip().rstrip(".")
    found = []
    for item in (part.strip() for part in listed.split(";")):
        match = re.fullmatch(r"(.+?)\s*\(in\s+\*([^*]+)\*[^)]*\)", item, flags=re.S)
        if match is None:
            raise ValueError(f"an objective without its section, '(in *Section*)': {item!r}")
        found.append((" ".join(match[1].split()), " ".join(match[2].split())))
    return found


def reached(chapter: dict, paragraph: str) -> tuple[list[str], list[str]]:
    """The objectives of ``paragraph`` (:func:`objectives`) that ``chapter`` (a slot's
    :func:`booktools.teaching.chapter_plan`) discusses or live-codes, and those whose section it only runs through
    or reads: what the agenda reaches, and what it leaves to the book. Raises ValueError for a section the
    chapter does not have."""
    how = {part["section"]: part["how"] for part in chapter["parts"]}
    discussed, left = [], []
    for objective, section in objectives(paragraph):
        titles = [title for title in how if title.startswith(section)]
        if not titles:
            raise ValueError(f"{chapter['chapter']} has no section '{section}' (objective: {objective})")
        if len(titles) > 1:
            raise ValueError(f"'{section}' begins several sections of {chapter['chapter']}: {titles}; name one")
        (discussed if how[titles[0]].startswith("live") else left).append(objective)
    return discussed, left


def section_saving(part: dict) -> float:
    """Minutes a section of a slot's plan (a part of :func:`booktools.teaching.chapter_plan`) saves when the room
    runs it through instead of discussing it: the plan's own figure (``saves``), from the costs it planned with.

    >>> section_saving({"how": "live 1, talk 2", "saves": 3.8}), section_saving({"how": "run through", "saves": 0.0})
    (3.8, 0.0)
    """
    return part["saves"]


#: How many discussed sections a chapter's cut list names, from its last; it says how many more there are.
CUTS_SHOWN = 3


def cut_list(chapter: dict) -> str:
    """What to cut in ``chapter`` (a slot's :func:`booktools.teaching.chapter_plan`) when the room runs late, in
    the reverse of the order the plan filled the slot: the last :data:`CUTS_SHOWN` discussed sections from the last
    up (each run through instead, with the minutes it saves), then the exercise (left to after the workshop).

    >>> print(cut_list({"chapter": "ch", "exercise": "Exercise 1.2: Find the copy", "parts": [
    ...     {"section": "A", "how": "live 1, talk 2", "saves": 3.8}, {"section": "B", "how": "run through", "saves": 0},
    ...     {"section": "C", "how": "live 0, talk 1", "saves": 0.68}]}))
    ch: "C" run through (0.7 min); then "A" run through (3.8 min); then Exercise 1.2 left to after the workshop (10 min)
    """
    discussed = [
        f'"{part["section"]}" run through ({section_saving(part):.1f} min)'
        for part in reversed(chapter["parts"])
        if section_saving(part) > 0
    ]
    cuts = discussed[:CUTS_SHOWN]
    if len(discussed) > CUTS_SHOWN:
        cuts.append(f"the {len(discussed) - CUTS_SHOWN} discussed sections above them, last first")
    if chapter["exercise"] is not None:
        cuts.append(f"{chapter['exercise'].split(':')[0]} left to after the workshop ({teaching.EXERCISE_MINUTES} min)")
    return f"{chapter['chapter']}: " + ("; then ".join(cuts) if cuts else "nothing: it is run through already")


def chapters_reached(agenda: str, rehearsals) -> list[tuple[str, dict, str, list[str], list[str]]]:
    """For each chapter of ``agenda``, in order: its name, its slot's plan (:func:`booktools.teaching.chapter_plan`,
    paced from ``rehearsals``), what the teachers' page says it teaches (:func:`what_each_teaches`), and the
    objectives the slot discusses and those it leaves to the book (:func:`reached`)."""
    plans = {
        slot["chapter"]["chapter"]: slot["chapter"]
        for slot in teaching.agenda_plan(agenda, rehearsals=rehearsals)
        if slot["chapter"] is not None
    }
    chapters = list(agendas.AGENDAS[agenda])
    return [
        (chapter, plans[chapter], paragraph, *reached(plans[chapter], paragraph))
        for chapter, paragraph in zip(chapters, what_each_teaches(chapters), strict=True)
    ]


def agenda_reach(agenda: str) -> list[str]:
    """For each chapter of ``agenda``: the objectives its slot discusses, those it leaves to the book
    (:func:`reached`), and what to cut when the room runs late (:func:`cut_list`); the teachers' page prints them."""
    lines = [f"{agenda}:"]
    for chapter, plan, _, discussed, left in chapters_reached(agenda, rehearse.load()):
        lines.append(
            f"  {chapter}: discussed {len(discussed)} of {len(discussed) + len(left)} objectives"
            + (f"; left to the book: {'; '.join(left)}" if left else "")
        )
        lines.append(f"    if late, cut {cut_list(plan)}")
    return lines


def cell_number(chapter: str, text: str, folder: Path = CHAPTERS) -> int | None:
    """The ``In [n]`` of the first code cell of ``chapter``'s participant edition whose source holds ``text`` (a
    claim's name), when the chapter is run once from the top (empty cells are not run, so not numbered); None
    where no cell holds it."""
    cells = workshop.chapter_edition(chapter, folder).cells
    numbered = workshop.run_numbers(cells)
    return next((number for place, number in numbered.items() if text in cells[place].source), None)


def what_may_stop_the_room(chapters: list[str], rehearsals, claim_runs=None) -> list[str]:
    """One line per claim of ``chapters`` that stopped seats at a recorded rehearsal (of any agenda): the claim,
    the cell that states it (``In [n]``), at how many seats it stopped in each rehearsal, and its figure where its
    chapter ran alone (:func:`booktools.teaching.claims_the_room_failed`): what to tell the room before that cell."""
    rows = [r for r in teaching.claims_the_room_failed(rehearsals, claim_runs) if r["chapter"] in chapters]
    lines = []
    for chapter in chapters:
        for claim in dict.fromkeys(r["claim"] for r in rows if r["chapter"] == chapter):
            seen = [r for r in rows if (r["chapter"], r["claim"]) == (chapter, claim)]
            number = cell_number(chapter, f'"{claim}"')
            where = f"In [{number}]" if number else "its cell"
            stops = "; ".join(
                f"{r['stopped seats']} of {r['seats']} seats ({r['rehearsal']}"
                + (f", at {r['stopped at']})" if r["stopped at"] else ")")
                for r in seen
            )
            lines.append(f"- {chapter}, {where}: `{claim}` stopped {stops}; alone: {seen[-1]['alone']}")
    return lines


def plan_text(agenda: str) -> str:
    """The plan of ``agenda`` as Markdown: a heading, the teachers' page's text in a code block, what each of its
    chapters teaches, and the claims that stopped seats at the rehearsals (:func:`what_may_stop_the_room`)."""
    rehearsals = rehearse.load()
    body = teaching.agenda_text(agenda, rehearsals=rehearsals)  # refuses an agenda it does not know
    chapters = list(agendas.AGENDAS[agenda])
    paragraphs = []
    for _, _, paragraph, discussed, left in chapters_reached(agenda, rehearsals):
        if left:
            paragraph += (
                "\n\n*In this agenda*, discussed: "
                + ("; ".join(discussed) or "none")
                + ". *Left to the book* (their sections are run through, not discussed): "
                + "; ".join(left)
                + "."
            )
        paragraphs.append(paragraph)
    teaches = "\n\n".join(paragraphs)
    stops = what_may_stop_the_room(chapters, rehearsals) or ["- none in the rehearsals on record"]
    return (
        f"# The plan of the {agenda} agenda (from the teachers' page)\n\n```text\n{body}\n```\n\n"
        f"## What each chapter teaches\n\n{teaches}\n\n"
        "## Claims that stopped seats at the rehearsals\n\n"
        "Timing claims the rest of the room slows: say before the cell that it may stop, and that the seats\n"
        "then click the cell under it and run that one and all below (Run → Run Selected Cell and All Below;\n"
        "from the cell that stopped, it would run the claim again). Cells are numbered as the expected-output\n"
        "sheet numbers them.\n\n" + "\n".join(stops) + "\n"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m booktools.plan", description=__doc__.split("\n")[0])
    parser.add_argument("agenda", help=f"one of: {', '.join(agendas.AGENDAS)}")
    parser.add_argument("out", type=Path, help="the file to write (its folder is made)")
    args = parser.parse_args(argv)
    try:
        text = plan_text(args.agenda)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text)
    except (ValueError, OSError) as error:
        print(f"plan: {error}", file=sys.stderr)
        return 2
    print(f"the teacher's plan: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
