"""Planning a workshop from what the book measured: what each chapter costs, what each agenda needs, and what a
rehearsal on one GPU showed. The teachers' page (``chapters/90_for_teachers.ipynb``) shows these; nothing here
needs a GPU, and nothing here extrapolates: a seat count is stated only where a rehearsal ran it.
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Sequence
from pathlib import Path

from booktools import evidence, workshop
from booktools.agendas import AGENDAS, PLANS, SHOWN_NOT_RUN, agenda, plan  # noqa: F401 - the page reads them here
from booktools.notebooks import CODE_COLUMNS, headings
from booktools.paths import CHAPTERS
from booktools.runs import RunGroup, chapter_name, chapter_needs, limit_bytes, load
from support.units import GIB

#: Talk and typing per code cell, in seconds, beside the cell's own run time: assumptions, stated on the
#: teachers' page, not measurements. The teacher types a live-coded cell and explains it while the room types
#: along; the room runs a discussed cell itself and the teacher explains what it printed; a cell run through is
#: one Shift-Enter, its text left to be read in the book afterwards.
TALK_SECONDS = {"live-coded": 150, "room runs, discussed": 45, "room runs through": 4}
#: Minutes for the one exercise a chapter's slot holds: an assumption, like :data:`TALK_SECONDS`.
EXERCISE_MINUTES = 10
#: Which exercise a slot takes first, by its title: finding the copy is the book's central skill.
EXERCISE_PREFERENCE = ("Find the copy", "Find the leak", "Predict, then measure", "Extend")

#: A chapter's set-up calls (the GPU check, the banner, the one pool): a section whose first code cell makes one at
#: its top level (:func:`sets_up`) is discussed but never live-coded, since the room came for the code after it.
SETUP_CALLS = frozenset({"check_gpu", "use_one_pool", "banner"})

TIME = "run time (H100 80GB)"
PEAK = "peak seen (GiB)"
LIMIT = "passed under"


def planning_rows(chapters: Sequence[str], groups: Sequence[RunGroup] | None = None, full: str = "H100 80GB"):
    """Per chapter (``01_why_gpus``): its run time on the ``full`` GPU, and the peak of GPU memory seen while it
    passed under a per-process limit, with that limit (:func:`booktools.runs.chapter_needs`). A peak seen is not a
    requirement: a chapter may run in less. Where a chapter never passed under a limit, the row says whether it
    failed under one (then it runs on a whole GPU only) or was never tried; None where nothing was measured."""
    groups = load() if groups is None else groups
    on_full = next((g for g in groups if g.label == full and not g.parallel), None)
    needs = chapter_needs(groups)
    rows = []
    for name in chapters:
        run = None if on_full is None else next((c for c in on_full.chapters if chapter_name(c.notebook) == name), None)
        need = needs.get(name)
        if need is not None:
            limit = need.label
        else:
            failed = [
                g.label
                for g in groups
                if g.limit_bytes and any(chapter_name(c.notebook) == name and not c.passed for c in g.chapters)
            ]
            limit = f"failed under {', '.join(failed)}" if failed else "never run under a limit"
        rows.append(
            {
                "chapter": name,
                TIME: None if run is None else run.seconds,
                PEAK: None if need is None else need.peak_bytes / GIB,
                LIMIT: limit,
            }
        )
    return rows


def largest_need(chapters: Sequence[str], groups: Sequence[RunGroup] | None = None) -> tuple[str, int] | None:
    """The chapter of ``chapters`` with the largest peak seen under a limit it passed, and that peak in bytes
    (:func:`booktools.runs.chapter_needs`); None when none of them passed under a limit."""
    needs = chapter_needs(load() if groups is None else groups)
    found = [(name, needs[name].peak_bytes) for name in chapters if name in needs]
    return max(found, key=lambda item: item[1]) if found else None


def share_for(chapters: Sequence[str], groups: Sequence[RunGroup] | None = None) -> int | None:
    """The smallest whole number of GiB that holds :func:`largest_need`: the ``--limit`` the chapters' first cells
    accept. None when none of them passed under a limit.

    >>> from booktools.runs import ChapterRun
    >>> run = RunGroup("16 GB", "nbval", False, 1.0, 0, [ChapterRun("a.ipynb", 1.0, int(13.7 * GIB), True)], 16 * GIB)
    >>> share_for(["a"], [run])
    14
    """
    need = largest_need(chapters, groups)
    return None if need is None else -(-need[1] // GIB)


def errors_in_log(path: Path) -> list[str]:
    """The distinct errors a pytest log reports (``SomethingError: message`` lines, colours stripped), in order."""
    if not path.exists():
        return []
    text = re.sub(r"\x1b\[[0-9;]*m", "", path.read_text(errors="replace"))
    found = re.findall(r"^(\w*(?:Error|Exception)): (.+)$", text, flags=re.MULTILINE)
    seen: list[str] = []
    for name, message in found:
        line = f"{name}: {message.strip()}"[:160]
        if line not in seen:
            seen.append(line)
    return seen


def runs_together(groups: Sequence[RunGroup] | None = None) -> list[dict]:
    """The recorded runs of several chapters at once on one GPU (``--parallel``): what ran, under which limit, how
    many passed. They show that the chapters named ran side by side, nothing about other chapters."""
    groups = load() if groups is None else groups
    return [
        {
            "run": group.label,
            "chapters at once": ", ".join(chapter_name(c.notebook) for c in group.chapters),
            "passed": f"{sum(c.passed for c in group.chapters)} of {len(group.chapters)}",
            "wall time (s)": group.wall_seconds,
            "GPU peak (GiB)": None if group.peak_bytes is None else group.peak_bytes / GIB,
        }
        for group in groups
        if group.parallel
    ]


def rehearsal_label(rehearsal, chapter: str | None = None) -> str:
    """A rehearsal as the teachers' page names it: its name (:attr:`booktools.rehearse.Rehearsal.name`, its number in
    ``runs/rehearsals.json``), then its agenda (with the chapters it ran where it ran only some), seats, share and
    date, ``"rehearsal 10 (two-hours, 4 seats of 16G, 2026-11-26)"``; records alike in all else differ by the
    number. With ``chapter``, it says where the seats ran an earlier version of that chapter's code, or one not
    recorded (:meth:`booktools.rehearse.Rehearsal.ran_current`)."""
    part = ""
    if rehearsal.chapters and list(rehearsal.chapters) != list(AGENDAS.get(rehearsal.agenda, [])):
        named = ", ".join(rehearsal.chapters)  # whole names: two chapters start with 04
        part = f": chapter{'' if len(rehearsal.chapters) == 1 else 's'} {named};"
    version = ""
    if chapter is not None:
        current = rehearsal.ran_current(chapter)
        if current is False:
            version = f"; ran an earlier version of {chapter}"
        elif current is None:
            version = f"; which version of {chapter} ran is not recorded"
    count = len(rehearsal.seats)
    seats = f"{count} seat{'' if count == 1 else 's'} of {rehearsal.limit}, {rehearsal.date}"
    return f"{rehearsal.name} ({rehearsal.agenda}{part}{'' if part else ','} {seats}{version})"


#: Where a seat's first error says it stopped: ``"In [54], cell 99"`` (records since the sheet's numbers were kept)
#: or ``"cell 99"`` (the cell's place in the seat's notebook), before the error's own words.
STOPPED_AT = re.compile(r"^((?:In \[\d+\], )?cell \d+):")


def stopped_at(errors: Sequence[str | None]) -> str:
    """Where the seats' ``errors`` say Run All stopped, each place once, in order: ``"In [54], cell 99"``; empty
    where no error names its cell.

    >>> stopped_at(["In [54], cell 99: ClaimError: x", "cell 97: ClaimError: x", "In [54], cell 99: ClaimError: y"])
    'In [54], cell 99 or cell 97'
    """
    found = [m[1] for error in errors if (m := STOPPED_AT.match(error or ""))]
    return " or ".join(dict.fromkeys(found))


def claims_the_room_failed(rehearsals: Sequence, claim_runs: Sequence | None = None) -> list[dict]:
    """Each claim that stopped a chapter at a rehearsal's seats, beside the same claim where its chapter ran alone.

    ``rehearsals`` are :class:`booktools.rehearse.Rehearsal` records. A row per rehearsal and claim: at how many
    seats it stopped the chapter, the figures those seats printed (read from their errors), and the same claim's
    figure where its chapter ran alone on a GPU of the same name (``runs/claims.json``), with its verdict: the
    control of a seat's failure. The run alone is the latest (by date, then by its place in the file) under the
    rehearsal's own limit, or, where none ran under it, on the whole GPU. Both sides show the same fields: the
    value, and for a comparison "against" its control. Where the claim held alone and failed at the seats, the
    room's contention moved the figure; where it failed alone too, the chapter needs fixing, not the room.
    """
    claim_runs = evidence.load() if claim_runs is None else claim_runs
    rows = []
    for rehearsal in rehearsals:
        failed: dict[tuple[str, str], list[tuple[str, str | None]]] = {}
        for seat in rehearsal.seats:
            for chapter in seat.chapters:
                if chapter.failed_claim is not None:
                    figure = chapter.claim_figure or "(not in the error)"
                    failed.setdefault((chapter.chapter, chapter.failed_claim), []).append((figure, chapter.error))
        for (chapter, name), seen in failed.items():
            alone = _claim_alone(claim_runs, rehearsal.gpu, limit_bytes(rehearsal.limit), chapter, name)
            where = stopped_at([error for _, error in seen])
            figures = ", ".join(figure for figure, _ in seen)
            rows.append(
                {
                    "rehearsal": rehearsal_label(rehearsal, chapter),
                    "chapter": chapter,
                    "seats": len(rehearsal.seats),
                    "claim": name,
                    "stopped seats": len(seen),
                    "stopped at": where,
                    "at the seats": figures
                    + (f"; Run All stopped at {where}: run the cells below it" if where else ""),
                    "alone": "not recorded alone on this GPU" if alone is None else alone,
                }
            )
    return rows


def errors_the_room_met(rehearsals: Sequence, width: int = 160) -> list[dict]:
    """Each error other than a claim that stopped a chapter at a rehearsal's seats: a crash, a refusal, an assert.

    ``rehearsals`` are :class:`booktools.rehearse.Rehearsal` records, which keep a chapter's first error at each
    seat only. A row per rehearsal, chapter and error (the seat's own cell number and message, shortened to at most
    ``width`` characters), with the number of seats it stopped there. Claims that did not hold are
    :func:`claims_the_room_failed`'s; chapters a seat never finished are left out (the rehearsal's summary counts
    them). Most of these are a fault to fix or a set-up to change; a plain ``assert`` on a timing is the room's
    contention as much as a claim is, and the teacher reads its message to tell which.
    """
    rows = []
    for rehearsal in rehearsals:
        seen: dict[tuple[str, str], int] = {}
        for seat in rehearsal.seats:
            for chapter in seat.chapters:
                if chapter.failure != "other":
                    continue
                error = chapter.error or "(no message)"
                error = error if len(error) <= width else error[: width - 2].rstrip() + " …"
                seen[(chapter.chapter, error)] = seen.get((chapter.chapter, error), 0) + 1
        rows.extend(
            {
                "rehearsal": rehearsal_label(rehearsal, chapter),
                "chapter": chapter,
                "error": error,
                "stopped seats": seats,
            }
            for (chapter, error), seats in seen.items()
        )
    return rows


def _claim_alone(claim_runs: Sequence, gpu: str, share: int, chapter: str, name: str) -> str | None:
    """The claim's figure and verdict in the latest run of its chapter alone on ``gpu``: under the ``share`` a
    rehearsal's seats had where such a run exists, else on the whole GPU; None where neither recorded it."""
    for limit in (share, None):
        found = [
            (evidence.chapter_date(run, chapter), place, run, claim)
            for place, run in enumerate(claim_runs)
            if run.gpu == gpu and run.limit_bytes == limit and (claim := evidence.find(run, chapter, name))
        ]
        if found:
            _, _, run, claim = max(found, key=lambda item: item[:2])
            figure = evidence.describe(claim["value"], claim["unit"])
            if claim["kind"] in ("beats", "ahead"):
                figure += f" against {evidence.describe(claim['control'], claim['unit'])}"
            return f"{figure} {'✓' if claim['holds'] else '✗'} ({evidence.run_name(run, chapter)})"
    return None


def sets_up(source: str) -> bool:
    """Whether a code cell calls one of :data:`SETUP_CALLS` as a statement of its own (``use_one_pool()``,
    ``pool = memory.use_one_pool()``, ``print(use_one_pool())``), read with :mod:`ast`: a name inside a string or
    a comment is no call. A cell Python cannot parse (an IPython magic) sets nothing up.

    >>> sets_up("from support.memory import use_one_pool\\n\\nprint(use_one_pool())"), sets_up('"use_one_pool()"')
    (True, False)
    """
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False

    def called(node) -> str | None:
        if not isinstance(node, ast.Call):
            return None
        if isinstance(node.func, ast.Name) and node.func.id == "print" and node.args:
            return called(node.args[0])
        return getattr(node.func, "id", None) or getattr(node.func, "attr", None)

    return any(
        called(statement.value) in SETUP_CALLS
        for statement in tree.body
        if isinstance(statement, ast.Expr | ast.Assign | ast.AnnAssign) and statement.value is not None
    )


def points_later(text: str, chapter: str) -> bool:
    """Whether ``text`` (an exercise's prompt) links to a chapter numbered after ``chapter`` (``06_ecg_pipeline.ipynb``
    from chapter 1, say): an exercise that needs a tool the room meets only later.

    >>> points_later("with the traffic meter of [chapter 6](06_ecg_pipeline.ipynb)", "01_why_gpus")
    True
    >>> points_later("see [chapter 0](00_getting_started.ipynb)", "01_why_gpus")
    False
    """
    here = int(chapter[:2]) if chapter[:2].isdigit() else 0
    return any(int(number) > here for number in re.findall(r"\]\((\d\d)_[A-Za-z0-9_]+\.ipynb", text))


def chapter_sections(chapter: str, folder: Path | None = None) -> list[dict]:
    """A chapter as the participant edition has it (:mod:`booktools.workshop`), in parts: each section (from a
    ``#`` or ``##`` heading) and each exercise (from its ``### Exercise N.k`` heading), with its code cells.
    Each part: ``title``, ``cells`` (code cells), ``exercise`` (True for an exercise), ``setup`` (True where its
    first code cell sets the chapter up: :func:`sets_up`), ``later`` (True for an exercise whose text links to a
    later chapter, whose tools the room has not met yet: :func:`points_later`), ``text`` (its cells' sources, the
    markdown and the code)."""
    edition = workshop.chapter_edition(chapter, CHAPTERS if folder is None else folder)
    parts: list[dict] = []
    for cell in edition.cells:
        if cell.cell_type == "markdown":
            title, exercise = None, False
            for level, text in headings(cell.source):
                if level <= 2 or (level == 3 and re.match(r"Exercise \d+\.\d+: .+", text)):
                    title, exercise = text, level == 3
            if title is not None:
                parts.append(
                    {
                        "title": title.replace("`", "").replace("**", ""),
                        "cells": 0,
                        "exercise": exercise,
                        "setup": False,
                        "later": exercise and points_later(cell.source, chapter),
                        "text": "",
                    }
                )
            if parts:
                parts[-1]["text"] += cell.source + "\n"
        elif parts:
            if parts[-1]["cells"] == 0:
                parts[-1]["setup"] = sets_up(cell.source)
            parts[-1]["cells"] += 1
            parts[-1]["text"] += cell.source + "\n"
    return parts


def tools_named(prompt: str) -> list[str]:
    """The code names an exercise's prompt writes in backticks that look like a tool, not a variable: with a dot, an
    underscore or a capital (``traffic.TrafficMeter``, ``time_cuda``; not ``x`` or ``lengths``), in order, once
    each: the tools it asks the room to use.

    >>> tools_named("Find where with `traffic.TrafficMeter`, then `time_cuda` it into `x`; `traffic.TrafficMeter`")
    ['traffic.TrafficMeter', 'time_cuda']
    """
    names = re.findall(r"`([A-Za-z_][\w.]*)`", prompt)
    return list(dict.fromkeys(name for name in names if re.search(r"[._A-Z]", name)))


def where_met(parts: Sequence[dict], exercise: dict) -> dict[str, list[str]]:
    """For each tool ``exercise`` (a part of :func:`chapter_sections`) names (:func:`tools_named`), the titles of the
    sections before it, not exercises, whose text or code mentions it, in order: where the room meets the tool. A
    tool the exercise defines itself (``def tool`` or ``tool =`` in its cells), or no earlier section mentions as a
    name of its own (``torch.as_tensor`` is not ``as_tensor``), is left out."""
    before = [part for part in parts[: parts.index(exercise)] if not part["exercise"]]
    met = {}
    for tool in tools_named(exercise["text"]):
        if re.search(rf"^\s*(def {re.escape(tool)}\b|{re.escape(tool)}\s*=)", exercise["text"], flags=re.M):
            continue
        named = re.compile(rf"(?<![\w.]){re.escape(tool)}\b")
        sections = [part["title"] for part in before if named.search(part["text"])]
        if sections:
            met[tool] = sections
    return met


def chapter_plan(chapter: str, minutes: float, run_seconds: float, folder: Path | None = None) -> dict:
    """How ``chapter`` fits a slot of ``minutes``, its measured ``run_seconds`` spread evenly over its code cells:
    every section's cells are run in order (a later cell uses what an earlier one made, so none is skipped),
    first each at :data:`TALK_SECONDS` ``room runs through``; then one exercise (:data:`EXERCISE_PREFERENCE`, for
    :data:`EXERCISE_MINUTES`; not one that links to a later chapter while another is there) if it fits; then
    sections from the top are discussed, and the first cell of each discussed section is live-coded (not a set-up
    cell: :func:`sets_up`), while the slot holds them. Returns the parts (section, cells, how, minutes), the
    exercise (or None), the tools it names that the room meets only in sections run through, not discussed
    (``exercise needs``: tool → the first such section, :func:`where_met`: show its output before the exercise), the
    planned minutes and the slot's. Each part's ``saves`` is the minutes it gives back run through instead of as
    planned (0 for a section run through), by the same costs the plan was made with."""
    parts = chapter_sections(chapter, folder)
    code_cells = sum(part["cells"] for part in parts if not part["exercise"])
    per_cell = run_seconds / max(code_cells, 1)
    sections = [dict(part, live=0, discussed=False) for part in parts if not part["exercise"]]
    exercises = [part for part in parts if part["exercise"]]
    budget = minutes * 60

    def cost(section) -> float:
        talk = TALK_SECONDS["room runs, discussed" if section["discussed"] else "room runs through"]
        live = section["live"] * (TALK_SECONDS["live-coded"] - talk)
        return section["cells"] * (per_cell + talk) + live

    spent = sum(cost(section) for section in sections)
    chosen = None
    ready = [e for e in exercises if not e["later"]] or exercises  # one that needs a later chapter comes last
    for preferred in EXERCISE_PREFERENCE:
        chosen = chosen or next((e for e in ready if e["title"].split(": ", 1)[1] == preferred), None)
    chosen = chosen or (ready[0] if ready else None)
    exercise_seconds = 0.0 if chosen is None else EXERCISE_MINUTES * 60 + chosen["cells"] * per_cell
    if chosen is not None and spent + exercise_seconds > budget:
        chosen, exercise_seconds = None, 0.0
    spent += exercise_seconds
    for upgrade in ("discussed", "live"):
        for section in sections:
            if not section["cells"] or (upgrade == "live" and (not section["discussed"] or section["setup"])):
                continue
            before = cost(section)
            if upgrade == "discussed":
                section["discussed"] = True
            else:
                section["live"] = 1
            if spent - before + cost(section) > budget:
                section["discussed" if upgrade == "discussed" else "live"] = False if upgrade == "discussed" else 0
                break
            spent += cost(section) - before
    rows = []
    run_through = {section["title"] for section in sections if not section["discussed"]}
    met = {} if chosen is None else where_met(parts, chosen)  # a tool met only in sections run through, the first
    needs = {tool: titles[0] for tool, titles in met.items() if all(title in run_through for title in titles)}
    for section in sections:
        if section["discussed"]:
            how = f"live {section['live']}, talk {section['cells'] - section['live']}"
        else:
            how = "run through" if section["cells"] else "read"
        through = cost({**section, "discussed": False, "live": 0})  # its cost if run through
        rows.append(
            {
                "section": section["title"],
                "cells": section["cells"],
                "how": how,
                "min": cost(section) / 60,
                "saves": (cost(section) - through) / 60,  # minutes it gives back when run through instead
            }
        )
    return {
        "chapter": chapter,
        "parts": rows,
        "exercise": None if chosen is None else chosen["title"],
        "exercise needs": needs,
        "exercises": len(exercises),
        "exercise minutes": exercise_seconds / 60,
        "planned minutes": spent / 60,
        "slot minutes": minutes,
        "run seconds": run_seconds,
    }


def counted(rehearsals: Sequence) -> list:
    """The rehearsals that count as having rehearsed a room: those that kept the memory check (a share chosen too
    small on purpose, ``--skip-memory-check``, shows a failure, not a room that works) and ran to the end."""
    return [r for r in rehearsals if r.memory_check and not r.interrupted]


def chapters_ran(rehearsal) -> list[str]:
    """The chapters ``rehearsal``'s seats ran: those it names, or, in a record that names none, those its seats
    report."""
    return list(rehearsal.chapters) or sorted({c.chapter for seat in rehearsal.seats for c in seat.chapters})


def rehearsed(chapter: str, rehearsals: Sequence) -> list:
    """The counted rehearsals (:func:`counted`) whose seats ran ``chapter``, whatever agenda each named. The agenda a
    rehearsal names only chooses and checks its chapters (:func:`booktools.rehearse.rehearse`): the seats run the
    same code of a chapter whatever it names. The room is not the same: which other chapters the seats ran, and
    when they reached this one, differ, and a timing claim measures that too."""
    return [r for r in counted(rehearsals) if chapter in chapters_ran(r)]


def unrehearsed(agenda: str, rehearsals: Sequence) -> list[str]:
    """The chapters of ``agenda`` that no counted rehearsal ran (:func:`rehearsed`)."""
    return [chapter for chapter in AGENDAS[agenda] if not rehearsed(chapter, rehearsals)]


def rehearsed_at(agenda: str, share: str, rehearsals: Sequence) -> list[str]:
    """The chapters of ``agenda`` that a counted rehearsal ran with the share ``share`` (``"11G"``) at each seat
    (:func:`rehearsed`), in the agenda's order: all of them, some, or none. Any version of a chapter's code and any
    GPU count here; :func:`seats_by_chapter` says which version ran in which room."""
    return [c for c in AGENDAS[agenda] if any(r.limit == share for r in rehearsed(c, rehearsals))]


def share_note(agenda: str, share: str, rehearsals: Sequence) -> str:
    """What the page adds after an agenda's least share: nothing where a counted rehearsal ran each of its chapters
    at that share (:func:`rehearsed_at`), else how many did.

    >>> share_note("two-hours", "11G", [])
    ' (no rehearsal at it)'
    """
    ran, chapters = rehearsed_at(agenda, share, rehearsals), AGENDAS[agenda]
    if len(ran) == len(chapters):
        return ""
    return " (no rehearsal at it)" if not ran else f" (rehearsed at it: {len(ran)} of its {len(chapters)} chapters)"


def room_of(rehearsal) -> tuple:
    """What a rehearsal's room was, as :func:`seats_by_chapter` groups them: the GPU, the seats (the teacher's
    counted), the share, the seats that ran two kernels at once (two shares each), and whether a teacher's seat
    ran the book's own notebooks."""
    doubled = sum(seat.kernels > 1 for seat in rehearsal.seats)
    teacher = any(seat.edition == "teacher" for seat in rehearsal.seats)
    return rehearsal.gpu, len(rehearsal.seats), rehearsal.limit, doubled, teacher


def room_text(room: tuple) -> str:
    """A room of :func:`room_of` in words: ``"5 seats of 14G on NVIDIA H100 80GB HBM3, the teacher's among them"``."""
    gpu, seats, share, doubled, teacher = room
    said = f"{seats} seat{'' if seats == 1 else 's'} of {share} on {gpu}"
    if doubled:
        said += f", {doubled} of them running two kernels at once"
    return said + (", the teacher's among them" if teacher else ", no teacher's seat")


def _what_stopped(chapter_at_seat) -> str:
    """What stopped a chapter at a seat, as :func:`how_the_seats_fared` counts it: the claim's name, ``"not
    finished"``, or the error's kind (``"another error (AssertionError)"``)."""
    kind = chapter_at_seat.failure
    if kind == "claim":
        return chapter_at_seat.failed_claim
    if kind == "unfinished":
        return "not finished"
    words = STOPPED_AT.sub("", chapter_at_seat.error or "").strip()
    name = words.split(":", 1)[0].strip() if ":" in words else ""
    return f"another error ({name})" if name and " " not in name else "another error"


def how_the_seats_fared(rehearsals: Sequence, chapter: str) -> str:
    """How the seats of ``rehearsals`` (one or several) fared in ``chapter``: the participant seats that passed it,
    the teacher's seats, and what stopped the others (each claim by name, since a claim measures the room's
    contention too; another error by its kind; a chapter never finished), with the number of seats and whose:
    ``"3 of 4 participant seats passed; the teacher's seat passed; stopped: ecg.read_to_plot_warm at 1 seat"``."""
    at_seats = [(r, seat, c) for r in rehearsals for seat in r.seats for c in seat.chapters if c.chapter == chapter]
    participants = [c for _, seat, c in at_seats if seat.edition == "participant"]
    teachers = [c for _, seat, c in at_seats if seat.edition == "teacher"]
    said = f"{sum(c.passed for c in participants)} of {len(participants)} participant seats passed"
    if len(teachers) == 1:
        said += f"; the teacher's seat {'passed' if teachers[0].passed else 'FAILED'}"
    elif teachers:
        said += f"; {sum(c.passed for c in teachers)} of {len(teachers)} teacher's seats passed"
    stopped: dict[str, list[tuple[str, str]]] = {}
    for r, seat, c in at_seats:
        if not c.passed:
            stopped.setdefault(_what_stopped(c), []).append((seat.edition, r.name))
    if stopped:
        parts = []
        for what, whose in stopped.items():
            n, theirs = len(whose), sum(edition == "teacher" for edition, _ in whose)
            mine = "" if not theirs else " (the teacher's)" if n == 1 else f" ({theirs} of them the teacher's)"
            where = ""
            if len(rehearsals) > 1:  # pooled: say which of them
                names = list(dict.fromkeys(name.removeprefix("rehearsal ") for _, name in whose))
                where = f" in rehearsal{'s' if len(names) > 1 else ''} {', '.join(names)}"
            parts.append(f"{what} at {n} seat{'' if n == 1 else 's'}{mine}{where}")
        said += "; stopped: " + ", ".join(parts)
    return said


def seats_by_chapter(agenda_name: str, rehearsals: Sequence) -> list[dict]:
    """Each room (:func:`room_of`: GPU, seats, share, two-kernel seats, teacher) that a counted rehearsal ran with a
    chapter of ``agenda_name`` (:func:`rehearsed`, whatever agenda it named), most seats first, with, for each
    chapter of the agenda, every such rehearsal in that room that ran the chapter's current code
    (:meth:`booktools.rehearse.Rehearsal.ran_current`) or, only where none did, every one that ran it at all
    (``version`` says ``"earlier or not recorded"``), and how their seats fared together
    (:func:`how_the_seats_fared`). A chapter no rehearsal in that room ran has ``rehearsals`` empty."""
    rooms = sorted(
        {room_of(r) for chapter in AGENDAS[agenda_name] for r in rehearsed(chapter, rehearsals)},
        key=lambda room: (room[0], -room[1], limit_bytes(room[2]), room[3], not room[4]),
    )
    rows = []
    for room in rooms:
        for chapter in AGENDAS[agenda_name]:
            ran = [r for r in rehearsed(chapter, rehearsals) if room_of(r) == room]
            current = [r for r in ran if r.ran_current(chapter)]
            chosen = current or ran
            row = {"room": room, "chapter": chapter, "rehearsals": chosen, "version": None, "said": ""}
            if chosen:
                names = ", ".join(r.name.removeprefix("rehearsal ") for r in chosen)
                row["version"] = "current" if current else "earlier or not recorded"
                row["named"] = f"rehearsal{'s' if len(chosen) > 1 else ''} {names}"
                row["said"] = how_the_seats_fared(chosen, chapter)
            rows.append(row)
    return rows


def room_sizes_text(agenda_name: str, rehearsals: Sequence, width: int = 88) -> str:
    """:func:`seats_by_chapter` as the teachers' page prints it under an agenda, within ``width`` columns: each room,
    then a line per chapter rehearsed in it (its rehearsals, the version where not the current one, how their seats
    fared together), then the chapters none ran in it; ``"rehearsed: not yet"`` where no counted rehearsal ran any
    of the agenda's chapters."""
    rows = seats_by_chapter(agenda_name, rehearsals)
    if not rows:
        return f"  rehearsed: not yet (make rehearse AGENDA={agenda_name})"
    lines = []

    def add(said: str) -> None:
        lines.append(textwrap.fill(said, width, initial_indent="    ", subsequent_indent="      "))

    for room in dict.fromkeys(row["room"] for row in rows):
        here = [row for row in rows if row["room"] == room]
        lines.append(textwrap.fill(room_text(room) + ":", width, initial_indent="  ", subsequent_indent="    "))
        for row in here:
            if row["rehearsals"]:
                version = "" if row["version"] == "current" else f" ({row['version']} version)"
                add(f"{row['chapter']}: {row['named']}{version}: {row['said']}")
        if missing := [row["chapter"] for row in here if not row["rehearsals"]]:
            add(f"not rehearsed in this room: {', '.join(missing)}")
    return "\n".join(lines)


def seconds_at_the_seats(chapters: Sequence[str], rehearsals: Sequence) -> dict[str, tuple[float, str]]:
    """For each of ``chapters``, the slowest passing seat over every counted rehearsal that ran the chapter's
    current code (:func:`counted`; :meth:`booktools.rehearse.Rehearsal.ran_current`; any agenda, any number of
    seats: more seats are not always slower), or, only where none did, over those of earlier or unrecorded
    versions; with what it was taken over and the rehearsal of that seat (:func:`rehearsal_label`): the run time a
    room waits for. Rehearsals that skipped the memory check or were interrupted are left out, and so is one where
    no seat passed the chapter."""
    found: dict[str, tuple[float, str]] = {}
    kept = counted(rehearsals)
    for chapter in chapters:
        current, other = [], []
        for place, rehearsal in enumerate(kept):
            passed = [c.seconds for seat in rehearsal.seats for c in seat.chapters if c.chapter == chapter and c.passed]
            if passed:
                (current if rehearsal.ran_current(chapter) else other).append((max(passed), place, rehearsal))
        ran = current or other
        if ran:
            seconds, _, slowest = max(ran, key=lambda item: item[:2])
            n = len(ran)
            over = (
                f"{n} rehearsal{'s' if n > 1 else ''} of its current code"
                if current
                else f"{n} rehearsal{'s' if n > 1 else ''} of an earlier or unrecorded version (none of the current)"
            )
            found[chapter] = (seconds, f"{over}, {rehearsal_label(slowest)}")
    return found


def agenda_plan(
    name: str, groups: Sequence[RunGroup] | None = None, folder: Path | None = None, rehearsals: Sequence | None = None
) -> list[dict]:
    """The agenda ``name`` slot by slot: its start (minutes from the beginning), its minutes, and for a chapter
    its :func:`chapter_plan` from the chapter's run time: on the full H100 (:func:`planning_rows`), or its slowest
    passing seat over the rehearsals of its current code among ``rehearsals`` (:class:`booktools.rehearse.Rehearsal`
    records; none by default; earlier versions only where none ran the current one) where that is longer
    (:func:`seconds_at_the_seats`), since a room waits for its cells as the seats did."""
    rehearsals = [] if rehearsals is None else rehearsals
    times = {row["chapter"]: row[TIME] for row in planning_rows(agenda(name), groups)}
    at_seats = seconds_at_the_seats(agenda(name), rehearsals)
    slots, start = [], 0
    for what, minutes in plan(name)["slots"]:
        slot = {"start": start, "minutes": minutes, "what": what, "chapter": None}
        if what in times:
            if times[what] is None:
                raise ValueError(f"{what} has no measured run time on the full GPU: make execute NOTEBOOKS=...")
            seats, where = at_seats.get(what, (0.0, ""))
            slot["chapter"] = chapter_plan(what, minutes, max(times[what], seats), folder)
            slot["chapter"]["alone seconds"] = times[what]
            if seats > times[what]:
                slot["chapter"]["timed at"] = f"slowest passing seat over {where}"
            elif where:
                slot["chapter"]["timed at"] = f"alone on the whole GPU (not slower at the slowest seat over {where})"
            else:
                slot["chapter"]["timed at"] = "alone on the whole GPU (no rehearsal on record ran it)"
        slots.append(slot)
        start += minutes
    return slots


def agenda_text(
    name: str, groups: Sequence[RunGroup] | None = None, folder: Path | None = None, rehearsals: Sequence | None = None
) -> str:
    """The agenda ``name`` as the teachers' page prints it, within 88 columns: each slot with its start and its
    minutes; for a chapter, where its run time comes from, its sections (code cells, how they are run, planned
    minutes) and its exercise."""
    slots = agenda_plan(name, groups, folder, rehearsals)
    total = plan(name)["minutes"]
    used = sum(slot["minutes"] for slot in slots)
    lines = [f"{name}: {used} of {total} minutes planned", f"{'':16}{'section':<41}code  {'how':<16}{'min':>5}"]
    for slot in slots:
        start = f"{slot['start'] // 60}:{slot['start'] % 60:02d}"
        lines += textwrap.wrap(
            f"{start}  {slot['minutes']:>3} min  {slot['what']}", CODE_COLUMNS, subsequent_indent=" " * 16
        )
        chapter = slot["chapter"]
        if chapter is None:
            continue
        lines += textwrap.wrap(
            f"run time {chapter['run seconds']:.0f} s, {chapter['timed at']}",
            CODE_COLUMNS,
            initial_indent=" " * 16,
            subsequent_indent=" " * 18,
        )
        for part in chapter["parts"]:
            label = textwrap.shorten(part["section"], 40, placeholder="…")
            lines.append(f"{'':16}{label:<41}{part['cells']:>4}  {part['how']:<16}{part['min']:>5.1f}")
        exercise = chapter["exercise"] or ("none fits this slot" if chapter["exercises"] else "none in this chapter")
        lines.append(f"{'':16}exercise: {exercise} ({chapter['exercise minutes']:.0f} min)")
        for tool, section in chapter["exercise needs"].items():
            lines += textwrap.wrap(
                f'it uses {tool}, met in "{section}", run through here: show that section\'s output first',
                CODE_COLUMNS,
                initial_indent=" " * 18,
                subsequent_indent=" " * 20,
            )
        lines.append(f"{'':16}planned {chapter['planned minutes']:.1f} of {chapter['slot minutes']} min")
    return "\n".join(lines)
