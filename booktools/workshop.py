"""The participant edition of the book for a workshop: ``make workshop`` writes ``_build/workshop/``.

Exercises and their solutions are written with ``sphinx-exercise``'s gated directives, so that a solution can
hold code cells that run with the chapter (and are checked by nbval like every other cell)::

    ```{exercise-start}            <- markdown cell: the exercise, kept for participants
    :label: ex-layouts-predict
    ```
    ... the exercise's text and any starter code cells ...
    ```{exercise-end}
    ```
    ```{solution-start} ex-layouts-predict     <- markdown cell: everything from here ...
    :class: dropdown
    ```
    ... solution code cells and their explanation ...
    ```{solution-end}                          <- ... to here is left out of the participant edition
    ```

A participant opens the edition in Jupyter, which renders none of that markup, so the edition is written as
Jupyter shows it: each exercise becomes a heading with its number as the book numbers it ("Exercise 3.2:
Find the copy", counted within the chapter, a chapter's second page going on with its number), the task in
plain Markdown, its starter cells, and an empty code cell to write in. Solutions and every output are left out
(participants run the chapter themselves); links to pages the edition lacks point at the published book (its
address is ``html.baseurl`` in ``_config.yml``, or ``--book-url``) or become plain text; chapter 0's set-up
section is replaced by a participant's. The files the chapters open (their diagrams, chapter 6's command-line
records) are copied, with a README and ``check_setup.py``, the check a participant runs before the day
(:func:`check_seat`: the GPU, its driver, the libraries, the share against the edition's chapters, the files).
``--agenda NAME`` writes only that agenda's chapters (:data:`booktools.agendas.AGENDAS`). The teachers' page
stays out; the teacher gets ``expected_outputs.md`` beside the edition (:func:`expected_sheet`).

:func:`check_edition` verifies that no solution survived and every exercise did; :func:`missing_files` that every
file a notebook names is there; :func:`read_through` reads the written edition as a participant would.
"""

from __future__ import annotations

import argparse
import copy
import re
import shutil
import sys
from collections.abc import Sequence
from pathlib import Path

import nbformat
import yaml

from booktools import agendas, doctor, notebooks, seat
from booktools.paths import BUILD, ROOT
from support import needs

OUT = BUILD / "workshop"
SOLUTION_START = re.compile(r"```\{solution-start\}")
SOLUTION_END = re.compile(r"```\{solution-end\}")
EXERCISE_LABEL = re.compile(r"```\{exercise(?:-start)?\}[^\n]*\n:label:\s*(\S+)")
#: An exercise's opening fence, its options and its closing fence: the markup Jupyter would show as text.
EXERCISE_FENCE = re.compile(r"```\{exercise(?:-start)?\}[^\n]*\n(?::[\w-]+:[^\n]*\n)*```[ \t]*\n?")
EXERCISE_END_FENCE = re.compile(r"```\{exercise-end\}[^\n]*\n```[ \t]*\n?")
#: The bold lead of an exercise's task ("**Find the copy.**"): its title.
LEAD = re.compile(r"^\s*\*\*([^*]+?)\.?\*\*\s*")
#: MyST markup that Jupyter shows as literal text: a directive fence, a role, a target.
MYST_MARKUP = re.compile(r"```\{[\w-]+\}|:::\{[\w-]+\}|\{[\w-]+\}`|^\([\w-]+\)=\s*$|^:label:", re.MULTILINE)
#: A Markdown link or image: the text and the target.
LINK = re.compile(r"(!?)\[([^\]]*)\]\(([^)\s]+)\)")

#: Pages for the teacher, not the participants.
TEACHERS_ONLY = ("90_for_teachers",)
#: Files beside the notebooks that chapters open: diagrams, and chapter 6's records of its command line's runs.
ASSETS = ("diagrams", "ecg_cli_metrics.json", "ecg_cli_second_run.json")
#: A relative file a notebook names: a Markdown image, or a string in code such as "ecg_cli_metrics.json".
NAMED_FILE = re.compile(r"""\]\(([\w./-]+\.(?:png|svg|jpg))\)|["']([\w./-]+\.(?:json|csv|png|npz|npy))["']""")
#: Chapter 0's set-up section for readers who install the book; the edition gives a participant's instead.
BOOK_SETUP_HEADING = "## Running the book yourself"
#: What chapter 0 says of the outputs and of the teachers' page, and what the edition says instead.
CHAPTER_0_SENTENCES = {
    "The outputs you read are the outputs of that run:": (
        "This edition has no outputs: you run each chapter yourself, and the published book shows the outputs "
        "of the book's own run:"
    ),
}
#: Paragraphs of the book that do not apply to the edition (they start with these words): left out.
NOT_FOR_PARTICIPANTS = ("Teaching a workshop from the book?",)
#: Chapter 0's sections for whoever installs the book (they start with these headings): left out of the edition,
#: whose participants use the server their teacher set up.
SERVER_SECTIONS = ("### When `pip install` fails",)
#: What ``_config.yml`` holds where the book's address is not filled in yet.
PLACEHOLDER = "FILL-IN"
#: Where the files and tests that chapters name are, said to a participant: the edition is a folder of notebooks, and
#: the book's repository is not beside it (the published book links to it from every page).
ELSEWHERE = "in the book's source repository rather than this folder"
#: Every chapter's sentences that the edition cannot keep (it has no solutions and no repository beside it), as
#: patterns, and what it says instead.
EDITION_SENTENCES = {
    re.compile(r"Each\s+solution\s+runs\s+with\s+the\s+chapter\s+and\s+checks\s+what\s+it\s+claims\."): (
        "The solutions are in the published book, each run with its chapter."
    ),
    re.compile(r"(`(?:runs|tests)/[^`]*`)\s+in\s+the\s+repository\b"): rf"\1 {ELSEWHERE}",
    re.compile(
        r"`((?:runs|tests)/[^`]*)`(?!\s+in\s+the\s+repository\b|\s+\(?in\s+the\s+book's\s+source\s+repository)"
    ): (rf"`\1` ({ELSEWHERE})"),
    re.compile(r"the book's unit tests(?!, in its source repository)"): (
        "the book's unit tests, in its source repository rather than this folder,"
    ),
    re.compile(r"\b(the|its) unit tests\b(?! \(in the book's source repository)"): rf"\1 unit tests ({ELSEWHERE})",
    re.compile(
        r"(?<!book's )the CPU tests\b"
    ): "the book's CPU tests, in its source repository rather than this folder",
}

#: The participant's set-up check every edition holds, and the line by which it is the book's
#: (:func:`booktools.room.check_edition` knows an edition by them).
SETUP_FILE = "check_setup.py"
SETUP_SIGNATURE = "from booktools.workshop import check_seat"

SETUP_SCRIPT = """\"\"\"Check this seat before the workshop day: run `python check_setup.py` in this folder,
with the Python (or the Jupyter kernel) your teacher set up. One line per check; the last line says whether
the seat is ready.\"\"\"

import sys

try:
    from booktools.workshop import check_seat
except ImportError as error:
    sys.exit(
        f"the book is not installed in this Python ({{error}}): run this with the Python or Jupyter kernel your "
        "teacher named for the workshop; if that is the one, tell your teacher. Without the workshop's server or a "
        "GPU, you can still follow: {follow}"
    )

sys.exit(check_seat({chapters!r}))
"""


def setup_script(chapters: Sequence[str]) -> str:
    """The edition's ``check_setup.py`` for ``chapters`` (:data:`SETUP_SCRIPT` filled in)."""
    return SETUP_SCRIPT.format(chapters=list(chapters), follow=seat.FOLLOW_WITHOUT_A_GPU)


class WorkshopError(ValueError):
    """A chapter's exercise markup is broken: the message names the notebook and the cell."""


def book_url(config: Path = ROOT / "_config.yml") -> str | None:
    """The published book's address: ``html.baseurl`` in the book's ``_config.yml``; None when it is not set or
    is still the placeholder (:data:`PLACEHOLDER`) the repository ships with."""
    if not config.exists():
        return None
    settings = yaml.safe_load(config.read_text()) or {}
    url = str((settings.get("html") or {}).get("baseurl") or "").strip()
    if PLACEHOLDER in url:  # the book's own _config.yml until it is published somewhere
        return None
    return url.rstrip("/") or None


def exercise_labels(notebook) -> list[str]:
    """The labels of the exercises in a notebook, in order."""
    return [
        label
        for cell in notebook.cells
        if cell.cell_type == "markdown"
        for label in EXERCISE_LABEL.findall(cell.source)
    ]


def exercise_numbers(chapters: list[Path]) -> dict[str, str]:
    """Each exercise's number as the book gives it (``"3.2"``): the chapter's number (the file name's first two
    digits) and the exercise's place in it, a chapter's second page going on from its first."""
    numbers, counts = {}, {}
    for path in sorted(chapters):
        chapter = int(path.name[:2]) if path.name[:2].isdigit() else 0
        for label in exercise_labels(nbformat.read(path, as_version=4)):
            counts[chapter] = counts.get(chapter, 0) + 1
            numbers[label] = f"{chapter}.{counts[chapter]}"
    return numbers


def participant_cells(notebook, name: str = "notebook") -> list:
    """The notebook's cells without its solutions (from a ``solution-start`` cell to its ``solution-end`` cell)."""
    kept, inside = [], False
    for index, cell in enumerate(notebook.cells):
        text = cell.source if cell.cell_type == "markdown" else ""
        if SOLUTION_START.search(text):
            if inside:
                raise WorkshopError(f"{name}, cell {index}: a solution starts inside another solution")
            inside = True
        if not inside:
            kept.append(cell)
        if SOLUTION_END.search(text):
            if not inside:
                raise WorkshopError(f"{name}, cell {index}: a solution ends that never started")
            inside = False
    if inside:
        raise WorkshopError(f"{name}: a solution starts and never ends (add a solution-end cell)")
    return kept


def exercise_heading(text: str, number: str) -> str:
    """An exercise's Markdown as Jupyter should show it: ``### Exercise 3.2: Find the copy`` and the task.

    >>> print(exercise_heading("```{exercise-start}\\n:label: ex-a\\n```\\n**Find the copy.** Where is it?", "3.2"))
    ### Exercise 3.2: Find the copy
    <BLANKLINE>
    Where is it?
    """
    task = EXERCISE_FENCE.sub("", text, count=1).strip()
    lead = LEAD.match(task)
    title = lead.group(1).strip() if lead else "Exercise"
    task = task[lead.end() :] if lead else task
    return f"### Exercise {number}: {title}\n\n{task}".rstrip()


def answer_cell(label: str):
    """The empty code cell a participant writes an exercise's answer in (a stable id, from the label)."""
    cell = nbformat.v4.new_code_cell("")
    cell.id = re.sub(r"[^A-Za-z0-9_-]", "-", f"answer-{label}")[:64]
    cell.metadata = {"tags": ["answer"]}
    return cell


#: An exercise that asks for a prediction: its text says so.
PREDICTION = re.compile(r"\bpredict", re.IGNORECASE)
#: What the prediction cell says until the participant writes in it.
PREDICTION_PROMPT = "**Your prediction** (double-click here and write it, before you run the cell below):"


def prediction_cell(label: str):
    """The Markdown cell a participant writes an exercise's prediction in, before the code cell: prose typed into
    a code cell is a syntax error when run."""
    cell = nbformat.v4.new_markdown_cell(PREDICTION_PROMPT)
    cell.id = re.sub(r"[^A-Za-z0-9_-]", "-", f"prediction-{label}")[:64]
    cell.metadata = {"tags": ["prediction"]}
    return cell


def render_exercises(cells: list, numbers: dict[str, str], name: str = "notebook") -> list:
    """``cells`` with each exercise's markup replaced by its numbered heading and an empty cell after its starter
    cells (where its ``exercise-end`` cell was); an exercise that asks for a prediction gets a Markdown cell to
    write it in before that empty cell."""
    rendered, open_label, predicts = [], None, False
    for index, cell in enumerate(cells):
        text = cell.source if cell.cell_type == "markdown" else ""
        labels = EXERCISE_LABEL.findall(text)
        if labels:
            if open_label is not None:
                raise WorkshopError(f"{name}, cell {index}: an exercise starts before {open_label} ends")
            open_label = labels[0]
            if open_label not in numbers:
                raise WorkshopError(f"{name}, cell {index}: the exercise {open_label} has no number")
            cell.source = exercise_heading(text, numbers[open_label])
            predicts = bool(PREDICTION.search(cell.source))
            rendered.append(cell)
            continue
        if EXERCISE_END_FENCE.search(text):
            if open_label is None:
                raise WorkshopError(f"{name}, cell {index}: an exercise ends that never started")
            if predicts:
                rendered.append(prediction_cell(open_label))
            rendered.append(answer_cell(open_label))
            rest = EXERCISE_END_FENCE.sub("", text).strip()
            if rest:
                cell.source = rest
                rendered.append(cell)
            open_label, predicts = None, False
            continue
        if open_label is not None and PREDICTION.search(text):
            predicts = True
        rendered.append(cell)
    if open_label is not None:
        raise WorkshopError(f"{name}: the exercise {open_label} never ends (add an exercise-end cell)")
    return rendered


def edition_links(text: str, pages: set[str], url: str | None) -> str:
    """``text`` with each link to a book page the edition lacks pointed at the published book (``url``), or, with
    no address known, left as its words; links to the edition's pages, files and the web are kept.

    Words left alone say where the page is, "(in the published book)", except where a bracket would land inside
    a phrase: before a possessive ("chapter 4's pool") they stay bare, and inside brackets of the sentence they
    read "in the published book" without brackets of their own.

    >>> edition_links("on [chapter 4](04_x.ipynb)'s pool ([chapter 2](02_y.ipynb))", set(), None)
    "on chapter 4's pool (chapter 2 in the published book)"

    Two such links in one pair of brackets share the words, after the last of them that is not a possessive; a link
    in a pair nested inside keeps its own:

    >>> edition_links("(see [chapter 2](02_y.ipynb) and [chapter 4](04_x.ipynb))", set(), None)
    '(see chapter 2 and chapter 4 in the published book)'

    A link written inside a code span is code, not a link, and stays as it is.
    """

    def leaves_edition(bang: str, target: str) -> bool:
        page = target.partition("#")[0]
        if bang or target.startswith(("http:", "https:", "mailto:", "#")) or not page.endswith((".ipynb", ".md")):
            return False
        return Path(page).stem not in pages

    def shares_words_with_a_later_link(after: str) -> bool:
        """Whether ``after`` (the text after a link inside brackets) holds, in the same pair of brackets and
        paragraph, another link that leaves the edition and is no possessive: it then says where both are."""
        links = {found.start(): found for found in LINK.finditer(after)}
        depth, index, in_code = 0, 0, False
        while index < len(after):
            character = after[index]
            if after.startswith("\n\n", index):
                return False
            if character == "`":
                in_code = not in_code
            elif not in_code and index in links:
                later = links[index]
                possessive = after[later.end() :].startswith(("'s", "’s"))
                if depth == 0 and leaves_edition(later.group(1), later.group(3)) and not possessive:
                    return True
                index = later.end()
                continue
            elif not in_code and character == "(":
                depth += 1
            elif not in_code and character == ")":
                depth -= 1
                if depth < 0:  # the brackets the link is in have closed
                    return False
            index += 1
        return False

    def relink(match: re.Match) -> str:
        bang, words, target = match.groups()
        page, _, anchor = target.partition("#")
        before = match.string[: match.start()].rsplit("\n\n", 1)[-1]  # this paragraph, up to the link
        if not leaves_edition(bang, target) or before.count("`") % 2:  # kept, or written inside a code span
            return match.group(0)
        if url is None:
            before = re.sub(r"`[^`]*`", "", before)  # brackets in code are not the sentence's
            after = match.string[match.end() :]
            if after.startswith(("'s", "’s")):
                return words
            if before.count("(") > before.count(")"):  # inside the sentence's own brackets
                return words if shares_words_with_a_later_link(after) else f"{words} in the published book"
            return f"{words} (in the published book)"
        return f"[{words}]({url}/chapters/{Path(page).stem}.html{'#' + anchor if anchor else ''})"

    return LINK.sub(relink, text)


def participant_setup(url: str | None) -> str:
    """Chapter 0's set-up section as a participant of a workshop needs it."""
    where = f"[the published book]({url})" if url else "the published book (your teacher has its address)"
    return f"""## Before the workshop, and without a GPU

Your teacher has installed the book's libraries on the workshop's GPU server and given you this folder and a
Jupyter server (or a kernel) to run it in. Before the day, as soon as your seat's address works, run the set-up
check in this folder: from a terminal where your server has one (`python check_setup.py`), or from a new cell
of this notebook (insert a cell, paste these two lines, run it), as a process of its own, so that this notebook's
kernel stays clear of the GPU for the cells below (a workshop's servers often have no terminal):

```python
import sys
!{{sys.executable}} check_setup.py
```

One line per check (the GPU and its driver, each library used once on the GPU, the memory your seat can use
against what these chapters need, the files beside the notebooks); its last line says whether the seat is ready,
and each problem comes with what to do.

Run each chapter from the top, one cell after the other: a later cell uses what the earlier ones made. Each
exercise has an empty cell under it for your answer. A cell that checks a claim prints a line starting with ✓;
on a GPU the whole room shares, a timing claim can miss its bar and stop the chapter there (`ClaimError`). That
is the book checking itself, not your mistake: read the figure it printed beside its control, then click the
cell under it and run from there (Run → Run Selected Cell and All Below).

Without a GPU you can still follow: {where} shows every chapter executed on the book's GPU, with its outputs
and the solutions, and chapter 6's pipeline runs on the CPU wherever the book's libraries are installed, from a
terminal or from a notebook cell (`!{{sys.executable}} -m support.ecg --device cpu --hours 0.2 --out ecg-run`
after `import sys`: the kernel's own Python, as for the set-up check; a workshop server may have its terminals
turned off); it writes its figures (`stream.png`, `lengths.png`) and its scores (`metrics.json`) into `ecg-run`.
For that route on a computer of your own, ask your teacher where the book's source is and how to install it
without a GPU; the other chapters need the GPU.

Every chapter starts by printing its environment:"""


def fit_chapter_0(cells: list, url: str | None) -> list:
    """Chapter 0's text for the edition: its sentences about the book's outputs and teachers replaced or left
    out, and its set-up section (:data:`BOOK_SETUP_HEADING`) replaced by :func:`participant_setup`."""
    for cell in cells:
        if cell.cell_type != "markdown":
            continue
        text = cell.source
        for said, instead in CHAPTER_0_SENTENCES.items():
            text = text.replace(said, instead)
        paragraphs = text.split("\n\n")
        text = "\n\n".join(p for p in paragraphs if not p.lstrip().startswith(NOT_FOR_PARTICIPANTS))
        if text.lstrip().startswith(BOOK_SETUP_HEADING):
            text = participant_setup(url)
        cell.source = text
    return [c for c in cells if not (c.cell_type == "markdown" and c.source.lstrip().startswith(SERVER_SECTIONS))]


def fit_for_edition(text: str) -> str:
    """A chapter's markdown with :data:`EDITION_SENTENCES` replaced: no promise of solutions the edition lacks, the
    book's source repository, not the participant's folder, named for the files and tests it points at, and the
    book's own run, not the participant's copy, named where the text speaks of it."""
    for pattern, instead in EDITION_SENTENCES.items():
        text = pattern.sub(instead, text)
    return text


def participant_notebook(notebook, name: str = "notebook", numbers: dict[str, str] | None = None, pages=None, url=None):
    """A copy of ``notebook`` for participants: solutions removed, exercises rendered for Jupyter (numbered from
    ``numbers``; without them, 1, 2, ... within this notebook), outputs and execution counts cleared, links to
    pages outside ``pages`` (the edition's chapter names) pointed at the published book (``url``)."""
    edition = copy.deepcopy(notebook)
    cells = participant_cells(edition, name)
    if numbers is None:
        chapter = int(name[:2]) if name[:2].isdigit() else 0
        numbers = {label: f"{chapter}.{i}" for i, label in enumerate(exercise_labels(edition), 1)}
    cells = render_exercises(cells, numbers, name)
    if name.startswith("00_"):
        cells = fit_chapter_0(cells, url)
    for cell in cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
            cell.source = seat_check(cell.source)
        else:
            cell.source = fit_for_edition(cell.source)
            if pages is not None:
                cell.source = edition_links(cell.source, set(pages), url)
    edition.cells = cells
    return edition


#: The book's first check of a chapter, which the edition words for a seat (:mod:`booktools.seat`).
BOOK_CHECK = re.compile(r"\bneeds\.check_gpu\(")


def seat_check(source: str) -> str:
    """A code cell's ``source`` with the book's GPU check (``needs.check_gpu``) replaced by the seat's
    (:func:`booktools.seat.check_gpu`: the same check, its stop worded for a participant, no traceback).

    >>> print(seat_check('from support import env, needs\\n\\nneeds.check_gpu("01_a")\\nenv.banner()'))
    from booktools import seat
    from support import env, needs
    <BLANKLINE>
    seat.check_gpu("01_a")
    env.banner()
    """
    if not BOOK_CHECK.search(source):
        return source
    return "from booktools import seat\n" + BOOK_CHECK.sub("seat.check_gpu(", source)


def chapter_edition(chapter: str, folder: Path):
    """``chapter``'s participant notebook (:func:`participant_notebook`), its exercises numbered as the edition of
    every chapter in ``folder`` numbers them: what the room has in front of it, for the teacher's tables."""
    numbers = exercise_numbers(participant_chapters(notebooks.chapters_in(folder)))
    return participant_notebook(notebooks.read_notebook(folder / f"{chapter}.ipynb"), f"{chapter}.ipynb", numbers)


def run_numbers(cells) -> dict[int, int]:
    """The ``In [n]`` each code cell of ``cells`` gets when the notebook is run once from the top, by the cell's
    place in ``cells``: an empty cell is not run, so Jupyter gives it no number (and none here). The
    expected-output sheet and the teacher's plan both number cells with it.

    >>> cells = [nbformat.v4.new_markdown_cell("# A"), nbformat.v4.new_code_cell("x = 1"),
    ...          nbformat.v4.new_code_cell(""), nbformat.v4.new_code_cell("x")]
    >>> run_numbers(cells)
    {1: 1, 3: 2}
    """
    ran = [place for place, cell in enumerate(cells) if cell.cell_type == "code" and cell.source.strip()]
    return {place: number for number, place in enumerate(ran, start=1)}


def check_edition(original, edition, name: str = "notebook") -> None:
    """Raise :class:`WorkshopError` if a solution or output survived in ``edition``, an exercise of ``original``
    is not there with its empty cell, or MyST markup shows."""
    for index, cell in enumerate(edition.cells):
        if cell.cell_type == "markdown" and (SOLUTION_START.search(cell.source) or SOLUTION_END.search(cell.source)):
            raise WorkshopError(f"{name}, cell {index}: a solution survived in the participant edition")
        if cell.cell_type == "code" and cell.outputs:
            raise WorkshopError(f"{name}, cell {index}: an output survived in the participant edition")
    for index, cell in enumerate(edition.cells):
        if cell.cell_type == "markdown" and (markup := MYST_MARKUP.search(cell.source)):
            raise WorkshopError(f"{name}, cell {index}: MyST markup Jupyter shows as text: {markup.group(0)!r}")
    answered = {cell.id.removeprefix("answer-") for cell in edition.cells if cell.id.startswith("answer-")}
    missing = [label for label in exercise_labels(original) if label[:57] not in answered]
    if missing:
        raise WorkshopError(f"{name}: exercises missing from the participant edition: {', '.join(missing)}")


def named_files(notebook) -> set[str]:
    """The relative paths a notebook's Markdown images and code strings name (``diagrams/ecg_flow.png``)."""
    return {
        first or second
        for cell in notebook.cells
        for first, second in NAMED_FILE.findall(cell.source)
        if not (first or second).startswith(("/", "http"))
    }


def missing_files(folder: Path, source: Path) -> list[str]:
    """The files the notebooks in ``folder`` name that exist beside the book's chapters (``source``) but not in
    ``folder``: what a participant would miss. Names that are nowhere (a file a cell writes) are not counted."""
    missing = []
    for path in sorted(folder.glob("*.ipynb")):
        for name in sorted(named_files(nbformat.read(path, as_version=4))):
            if (source / name).exists() and not (folder / name).exists():
                missing.append(f"{path.name}: {name}")
    return missing


def copy_assets(source: Path, out: Path, named: set[str]) -> None:
    """Copy :data:`ASSETS` from beside the book's chapters (``source``) into the edition (``out``): each file, and of
    each folder only the files the edition's notebooks name (``named``, :func:`named_files`): a diagram no chapter of
    the agenda shows stays out, and one an earlier edition in ``out`` copied is removed. The folder itself is made
    even when empty, as the set-up check looks for it."""
    for asset in ASSETS:
        if (source / asset).is_dir():
            if (out / asset).exists() and (out / asset).resolve() == (source / asset).resolve():
                raise WorkshopError(f"{out / asset} is the book's own {asset}: write the edition into its own folder")
            (out / asset).mkdir(parents=True, exist_ok=True)
            for old in sorted((out / asset).rglob("*")):
                if old.is_file() and old.relative_to(out).as_posix() not in named:
                    old.unlink()
            for name in sorted(named):
                if name.startswith(f"{asset}/") and (source / name).is_file():
                    (out / name).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copy2(source / name, out / name)
        elif (source / asset).exists():
            shutil.copy2(source / asset, out / asset)


def participant_chapters(chapters: list[Path]) -> list[Path]:
    """``chapters`` without the teachers' pages."""
    return [path for path in chapters if path.stem not in TEACHERS_ONLY]


def write_edition(
    chapters: list[Path], out: Path = OUT, *, url: str | None = None, teacher_out: Path | None = None
) -> list[Path]:
    """Write the participant edition of ``chapters`` (the teachers' page left out) into ``out``, with the files they
    open, a README and ``check_setup.py``; return the notebooks written. With ``teacher_out``, the teacher's
    expected-output sheet goes there. Raises :class:`WorkshopError` if a named file is missing."""
    chapters = participant_chapters(list(chapters))
    source = chapters[0].parent if chapters else out
    if chapters and (source.resolve() == out.resolve() or source.resolve().is_relative_to(out.resolve())):
        raise WorkshopError(f"{out} holds the book's chapters: write the edition into a folder of its own")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    numbers = exercise_numbers(participant_chapters(notebooks.chapters_in(source)))
    pages = {path.stem for path in chapters}
    for path in chapters:
        original = nbformat.read(path, as_version=4)
        edition = participant_notebook(original, path.name, numbers, pages, url)
        check_edition(original, edition, path.name)
        target = out / path.name
        nbformat.write(edition, target)
        written.append(target)
    for stale in sorted(set(out.glob("*.ipynb")) - set(written)):  # an earlier edition's chapter, not this one's
        stale.unlink()
    copy_assets(source, out, set().union(*(named_files(nbformat.read(t, as_version=4)) for t in written)))
    (out / "README.md").write_text(readme([path.stem for path in chapters], url))
    (out / SETUP_FILE).write_text(setup_script([path.stem for path in chapters]))
    missing = missing_files(out, source)
    if missing:
        raise WorkshopError(f"files the participant edition lacks (add them to workshop.ASSETS): {'; '.join(missing)}")
    if teacher_out is not None:
        teacher_out.mkdir(parents=True, exist_ok=True)
        (teacher_out / "expected_outputs.md").write_text(expected_sheet(chapters, out))
    return written


def _output_text(output, lines: int) -> str:
    """The first ``lines`` lines of one output as text: a stream, or a result's plain text; a figure is named."""
    if output.get("output_type") == "stream":
        text = output.get("text", "")
    elif output.get("output_type") == "error":
        text = f"{output.get('ename')}: {output.get('evalue')}"
    else:
        data = output.get("data", {})
        if "image/png" in data or "image/svg+xml" in data:
            return "(a figure)"
        text = data.get("text/plain", "")
    text = "".join(text) if isinstance(text, list) else text
    kept = text.rstrip("\n").splitlines()
    return "\n".join(kept[:lines] + ([f"... ({len(kept) - lines} more lines)"] if len(kept) > lines else []))


SOLUTION_LABEL = re.compile(r"```\{solution-start\}[ \t]+(\S+)")


def solutions(notebook, lines: int = 8) -> dict[str, list[str]]:
    """Each solution of the book's executed ``notebook`` as Markdown lines for the teacher's sheet, keyed by the id
    of its exercise's answer cell in the edition (:func:`answer_cell`): the explanation, each code cell's source
    and the first ``lines`` lines of what it printed."""
    found: dict[str, list[str]] = {}
    key = None
    for cell in notebook.cells:
        text = cell.source if cell.cell_type == "markdown" else ""
        start = SOLUTION_LABEL.search(text)
        if start:
            key = answer_cell(start.group(1)).id
            found[key] = []
            text = re.sub(r"```\{solution-start\}[^\n]*\n(:[a-z]+:[^\n]*\n)*```\n?", "", text)
        if key is None:
            continue
        ended = bool(SOLUTION_END.search(text))
        if cell.cell_type == "code":
            shown = [part for part in (_output_text(output, lines) for output in cell.get("outputs", [])) if part]
            found[key] += ["```python", *cell.source.splitlines(), "```", ""]
            if shown:
                found[key] += ["```text", *"\n".join(shown).splitlines(), "```", ""]
        else:
            prose = re.sub(r"```\{solution-end\}\s*```", "", text).strip()
            if prose:
                found[key] += [*prose.splitlines(), ""]
        if ended:
            key = None
    return found


def expected_sheet(chapters: Sequence[Path], edition: Path, lines: int = 8) -> str:
    """The teacher's expected-output sheet for the participant edition in ``edition``: per chapter (the book's
    executed notebooks, ``chapters``), each code cell of the edition that printed something in the book's run,
    under its section, numbered as Jupyter numbers it when the chapter runs from the top once (``In [12]``; an
    empty cell is not run, so the participant's answer cell is ``In [ ]``), with
    the first ``lines`` lines of what it printed. Figures are named, not drawn; claims show their ✓ line. Under
    each exercise's answer cell, the book's solution (:func:`solutions`), which the edition leaves out."""
    text = [
        "# Expected outputs, for the teacher",
        "",
        "What each cell of the participant edition printed in the book's own run on its GPU, to compare with a",
        "participant's screen. Timings and addresses differ from GPU to GPU and run to run; a ✓ line should not.",
        "The numbers are Jupyter's `In [n]` when a chapter is run once from the top in a fresh kernel; an empty",
        "cell is not run, so an answer cell is `In [ ]` until the participant runs it.",
        "",
    ]
    for path in chapters:
        executed = notebooks.read_notebook(path)
        book = {cell.get("id"): cell for cell in executed.cells}
        answers = solutions(executed, lines)
        participant = edition / path.name
        if not participant.exists():
            continue
        text += [f"## {path.stem}", ""]
        cells = notebooks.read_notebook(participant).cells
        numbered = run_numbers(cells)
        for place, cell in enumerate(cells):
            if cell.cell_type == "markdown" and cell.source.lstrip().startswith("#"):
                heading = cell.source.lstrip().splitlines()[0].lstrip("#").strip()
                text += [f"### {heading}", ""]
                continue
            if cell.cell_type != "code":
                continue
            if not cell.source.strip():  # an empty cell is not run, so Jupyter gives it no number
                text += ["In [ ]: (the participant's answer; once it is run, the numbers below are one higher)", ""]
                if answers.get(cell.get("id")):
                    text += ["Solution, from the book:", "", *answers[cell.get("id")]]
                continue
            count = numbered[place]
            outputs = book.get(cell.get("id"), {}).get("outputs", [])
            shown = [_output_text(output, lines) for output in outputs]
            shown = [part for part in shown if part.strip()]
            if shown:
                text += [f"In [{count}]:", "", "```text", *"\n".join(shown).splitlines(), "```", ""]
    return "\n".join(text).rstrip() + "\n"


def readme(chapters: list[str], url: str | None) -> str:
    """The edition's README: what the folder holds, the set-up check, how to run it, where the book is."""
    where = (
        f"The published book, with every output and the solutions: {url}"
        if url
        else (
            "The published book, with every output and the solutions, is the reference after the workshop "
            "(your teacher has its address)."
        )
    )
    return f"""# Workshop edition of the GPU Interop Book

One notebook per chapter of this workshop ({", ".join(chapters)}), with the exercises (each under a heading
"Exercise N.k", with an empty cell to write your answer in, and a text cell before it where the exercise asks for a
prediction) and without their solutions or outputs, and the files
the chapters open (`diagrams/`, chapter 6's `ecg_cli_*.json`). Keep the folder as it is: the notebooks read
those files from beside them.

Before the day, check your seat: `python check_setup.py` in this folder, with the Python or kernel your teacher
named (from a notebook cell: `!{{sys.executable}} check_setup.py` after `import sys`, a process of its own; not
`%run`, which would use the GPU in the notebook's own kernel). It checks the GPU and its driver, uses each
library once on the GPU, compares the memory your seat can use with what these chapters need, and checks the
files; each problem comes with what to do.

The chapters import the book's `support` and `booktools` packages, installed once on the server for everyone;
the folder can live anywhere, a home directory included. Run chapter 0 first, then each chapter from the top,
one cell after the other.

Without a GPU you can still follow: chapter 0's section "Before the workshop, and without a GPU" says where the
book's executed chapters are and which chapter runs on the CPU.

Where a chapter names a file under `runs/` or `tests/` (a record of the book's own runs, a probe, a test), that
file is in the book's source repository, not in this folder: each page of the published book links to it.

{where}
"""


def check_seat(chapters: list[str], folder: Path | None = None) -> int:
    """The set-up check a participant runs from the edition (``check_setup.py``): the book's doctor
    (:mod:`booktools.doctor`: driver, libraries, one use of each on the GPU) with the memory check against the
    largest need of ``chapters`` (:mod:`support.needs`), then the files the notebooks open. Prints one line per
    check and returns the exit status (1 on a blocker)."""
    folder = Path.cwd() if folder is None else folder
    machine = doctor.probe_machine()
    measured = [need.peak_bytes for name in chapters if (need := needs.of(name)) is not None]
    machine.needed = max(measured) if measured else None
    findings = doctor.diagnose(machine)
    absent = [f"{name}.ipynb" for name in chapters if not (folder / f"{name}.ipynb").exists()]
    absent += [asset for asset in ASSETS if not (folder / asset).exists()]
    if absent:
        findings.append(
            doctor.Finding("FAIL", f"not in {folder}: {', '.join(absent)}", "run this in the edition's folder")
        )
    else:
        findings.append(doctor.Finding("ok", f"the edition's {len(chapters)} chapters and their files are here"))
    for finding in findings:
        print(for_participant(finding).line())
    blockers = sum(finding.level == "FAIL" for finding in findings)
    if any(f.level == "FAIL" and f.kind == doctor.NO_GPU for f in findings):
        print(WITHOUT_A_GPU)  # before the last line, which says whether the seat is ready
    print(f"{blockers} problem(s): this seat is not ready" if blockers else "this seat is ready for the workshop")
    return 1 if blockers else 0


#: The set-up check's last line on a machine without a usable GPU: what a participant can still do.
WITHOUT_A_GPU = (
    "no GPU here: on the workshop's GPU server, tell your teacher; on a computer of your own, you can still follow "
    f"({seat.FOLLOW_WITHOUT_A_GPU})"
)


#: What a participant does about a problem the book's doctor would have its installer fix.
PARTICIPANT_FIX = (
    "use the Python or Jupyter kernel your teacher named for the workshop; if it is that one, tell your teacher"
)
#: ... and about a machine without a usable GPU.
PARTICIPANT_GPU_FIX = "run this on the workshop's GPU server, in the kernel your teacher named; else tell your teacher"


#: Words of the book's installation, which a participant does not run.
INSTALLERS_WORDS = re.compile(r"\bmake\b|\bpip\b|\bconda\b|\bextras?\b")


def for_participant(finding: doctor.Finding) -> doctor.Finding:
    """``finding`` with a fix a participant can act on: the doctor's fixes name the book's installation (``make``,
    ``pip``, ``conda``) or the machine (its driver, its GPU, the server's environment), which a participant does
    not run; a participant uses the server and kernel the teacher set up, and passes any other fix on."""
    if finding.level == "ok" or not finding.fix:
        return finding
    what = finding.what  # without the installer's note
    if finding.kind == doctor.NO_GPU:
        return doctor.Finding(finding.level, what, PARTICIPANT_GPU_FIX, kind=finding.kind)
    if INSTALLERS_WORDS.search(finding.fix):
        return doctor.Finding(finding.level, what, PARTICIPANT_FIX, kind=finding.kind)
    return doctor.Finding(finding.level, what, f"tell your teacher, who can: {finding.fix}", kind=finding.kind)


def read_through(folder: Path) -> list[str]:
    """The edition in ``folder`` read as a participant reads it in Jupyter: the problems found, [] when none. Each
    notebook opens with nbformat; no MyST markup shows; each ``Exercise N.k`` heading is followed, before the next
    heading, by an empty code cell; every link and image resolves inside the folder or is absolute."""
    problems = []
    for path in sorted(folder.glob("*.ipynb")):
        cells = nbformat.read(path, as_version=4).cells
        for index, cell in enumerate(cells):
            if cell.cell_type != "markdown":
                continue
            if markup := MYST_MARKUP.search(cell.source):
                problems.append(f"{path.name}, cell {index}: markup shows as text: {markup.group(0)!r}")
            for _, _, target in LINK.findall(cell.source):
                if PLACEHOLDER in target:
                    problems.append(f"{path.name}, cell {index}: a link to a placeholder address: {target}")
                    continue
                page = target.partition("#")[0]
                if target.startswith(("http:", "https:", "mailto:", "#")) or (folder / page).exists():
                    continue
                problems.append(f"{path.name}, cell {index}: a link to what the edition lacks: {target}")
            if re.match(r"#+ Exercise \d+\.\d+: \S", cell.source):
                following = []
                for later in cells[index + 1 :]:
                    if later.cell_type == "markdown" and later.source.lstrip().startswith("#"):
                        break
                    following.append(later)
                if not any(c.cell_type == "code" and not c.source.strip() for c in following):
                    problems.append(f"{path.name}, cell {index}: an exercise with no empty cell to write in")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m booktools.workshop", description=__doc__.split("\n")[0])
    parser.add_argument("out", nargs="?", type=Path, default=OUT, help=f"the edition's folder (default {OUT})")
    parser.add_argument("--agenda", help=f"only this agenda's chapters: {', '.join(agendas.AGENDAS)}")
    parser.add_argument("--book-url", help="the published book's address (default: html.baseurl in _config.yml)")
    parser.add_argument(
        "--teacher-out",
        type=Path,
        help="the folder of the teacher's expected-output sheet, which holds the solutions (default: the edition's "
        "folder's name with -teacher, beside it)",
    )
    args = parser.parse_args(argv)
    teacher_out = args.teacher_out or args.out.parent / f"{args.out.name}-teacher"
    chapters = participant_chapters(notebooks.chapter_notebooks())
    try:
        if args.agenda:
            chosen = agendas.agenda(args.agenda)
            chapters = [path for path in chapters if path.stem in chosen]
        url = args.book_url or book_url()
        if teacher_out.resolve() == args.out.resolve() or teacher_out.resolve().is_relative_to(args.out.resolve()):
            raise WorkshopError(
                f"the teacher's sheet holds the solutions: put it outside the edition, not in {teacher_out}"
            )
        written = write_edition(chapters, args.out, url=url, teacher_out=teacher_out)
    except (WorkshopError, ValueError, OSError) as error:
        print(f"workshop: {error}", file=sys.stderr)
        return 2
    for path in written:
        print(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)
    print(f"the participant edition is in {args.out}: copy the whole folder to the participants (its README says how)")
    print(
        f"the teacher's expected-output sheet: {teacher_out / 'expected_outputs.md'}; it holds the solutions: keep it "
        "where participants cannot read it (--teacher-out)"
    )
    if not url:
        print("no address for the published book (html.baseurl in _config.yml, or --book-url): the edition says to ask")
    return 0


if __name__ == "__main__":
    sys.exit(main())
