"""booktools.workshop: the participant edition drops every solution (code cells included) and every output, keeps
every exercise, and names broken exercise markup."""

from __future__ import annotations

import re

import nbformat
import pytest

from booktools import agendas, doctor, notebooks, plan, teaching, workshop
from booktools.workshop import WorkshopError

EXERCISE = "```{exercise-start}\n:label: ex-predict\n```\nPredict the bandwidth, then measure it."
EXERCISE_END = "```{exercise-end}\n```"
SOLUTION = "```{solution-start} ex-predict\n:class: dropdown\n```\nThe measured figure:"
SOLUTION_END = "```{solution-end}\n```"


def notebook(*cells):
    made = nbformat.v4.new_notebook()
    for kind, source in cells:
        cell = nbformat.v4.new_markdown_cell(source) if kind == "md" else nbformat.v4.new_code_cell(source)
        if kind == "code":
            cell.outputs = [nbformat.v4.new_output("stream", text="42\n")]
            cell.execution_count = 1
        made.cells.append(cell)
    return made


def chapter_with_an_exercise():
    return notebook(
        ("md", "# A chapter"),
        ("code", "x = 1"),
        ("md", EXERCISE),
        ("code", "# your prediction here"),
        ("md", EXERCISE_END),
        ("md", SOLUTION),
        ("code", "print(measure())"),
        ("md", SOLUTION_END),
        ("md", "## Next section"),
    )


def test_the_participant_edition_renders_exercises_for_jupyter_and_drops_solutions_and_outputs():
    original = chapter_with_an_exercise()
    edition = workshop.participant_notebook(original, "03_ch.ipynb")
    sources = [cell.source for cell in edition.cells]
    assert sources == [
        "# A chapter",
        "x = 1",
        "### Exercise 3.1: Exercise\n\nPredict the bandwidth, then measure it.",
        "# your prediction here",
        workshop.PREDICTION_PROMPT,
        "",
        "## Next section",
    ]
    assert edition.cells[4].cell_type == "markdown", "a prediction is prose: a text cell, not a code cell"
    assert edition.cells[5].cell_type == "code" and edition.cells[5].id == "answer-ex-predict"
    assert all(not cell.outputs for cell in edition.cells if cell.cell_type == "code")
    workshop.check_edition(original, edition, "03_ch.ipynb")
    assert len(original.cells) == 9 and original.cells[6].outputs, "the original is left as it was"


def test_an_exercise_is_titled_by_its_bold_lead_and_numbered_as_the_book_numbers_it():
    original = notebook(
        ("md", "```{exercise-start}\n:label: ex-a\n```\n**Find the copy.** Where does it leave the GPU?"),
        ("md", EXERCISE_END),
    )
    edition = workshop.participant_notebook(original, "04_b.ipynb", numbers={"ex-a": "4.2"})
    assert edition.cells[0].source == "### Exercise 4.2: Find the copy\n\nWhere does it leave the GPU?"
    assert edition.cells[1].cell_type == "code" and edition.cells[1].source == ""


def test_the_books_exercises_are_numbered_within_their_chapter_across_its_pages():
    numbers = workshop.exercise_numbers(workshop.participant_chapters(notebooks.chapter_notebooks()))
    assert numbers["ex-zero-copy-extend-frame"] == "3.3"
    assert sorted(value for value in numbers.values() if value.startswith("4.")) == ["4.1", "4.2", "4.3"]


def test_links_to_pages_outside_the_edition_go_to_the_published_book_or_become_words():
    text = "See [chapter 2](02_b.ipynb#a-part), [chapter 1](01_a.ipynb), [docs](https://x.org), ![d](diagrams/d.png)."
    pages = {"01_a"}
    assert workshop.edition_links(text, pages, None) == (
        "See chapter 2 (in the published book), [chapter 1](01_a.ipynb), [docs](https://x.org), ![d](diagrams/d.png)."
    )
    assert "[chapter 2](https://book.example/chapters/02_b.html#a-part)" in workshop.edition_links(
        text, pages, "https://book.example"
    )


def test_a_link_left_as_words_keeps_the_sentence_readable():
    text = (
        "On [chapter 4](04_x.ipynb)'s pool (see [chapter 2](02_y.ipynb)).\n\nA list: 1) first (\n\n"
        "[chapter 5](05_z.ipynb)."
    )
    assert workshop.edition_links(text, set(), None) == (
        "On chapter 4's pool (see chapter 2 in the published book).\n\nA list: 1) first (\n\n"
        "chapter 5 (in the published book)."  # an open bracket of an earlier paragraph does not count
    )
    in_code = "Call `f(x` on [chapter 5](05_z.ipynb)\u2019s data."
    assert workshop.edition_links(in_code, set(), None) == "Call `f(x` on chapter 5\u2019s data."
    assert workshop.edition_links("Call `f(x` in [chapter 5](05_z.ipynb).", set(), None) == (
        "Call `f(x` in chapter 5 (in the published book)."  # a bracket in code is not the sentence's
    )


def test_the_check_catches_a_surviving_solution_or_a_lost_exercise():
    original = chapter_with_an_exercise()
    with pytest.raises(WorkshopError, match="cell 1: an output survived"):
        workshop.check_edition(original, original, "ch.ipynb")
    unsolved = chapter_with_an_exercise()
    for cell in unsolved.cells:
        if cell.cell_type == "code":
            cell.outputs = []
    with pytest.raises(WorkshopError, match="cell 5: a solution survived"):
        workshop.check_edition(original, unsolved, "ch.ipynb")
    lost = workshop.participant_notebook(original)
    lost.cells = [cell for cell in lost.cells if not cell.id.startswith("answer-")]
    with pytest.raises(WorkshopError, match="exercises missing from the participant edition: ex-predict"):
        workshop.check_edition(original, lost, "ch.ipynb")


@pytest.mark.parametrize(
    ("cells", "message"),
    [
        ([("md", SOLUTION), ("code", "x")], "starts and never ends"),
        ([("md", SOLUTION_END)], "ends that never started"),
        ([("md", SOLUTION), ("md", SOLUTION), ("md", SOLUTION_END)], "starts inside another solution"),
    ],
)
def test_broken_markup_is_named(cells, message):
    with pytest.raises(WorkshopError, match=message):
        workshop.participant_notebook(notebook(*cells), "ch.ipynb")


def test_make_workshop_writes_every_chapter_the_files_they_open_a_readme_and_the_setup_check(tmp_path):
    written = workshop.write_edition(notebooks.chapter_notebooks(), tmp_path, teacher_out=tmp_path.parent / "teacher")
    chapters = [path.name for path in notebooks.chapter_notebooks() if not path.name.startswith("90_")]
    assert [path.name for path in written] == chapters and "90_for_teachers.ipynb" not in chapters
    assert (tmp_path / "README.md").read_text().startswith("# Workshop edition")
    assert "python check_setup.py" in (tmp_path / "README.md").read_text()
    compile((tmp_path / "check_setup.py").read_text(), "check_setup.py", "exec")
    for path in written:
        assert all(not cell.get("outputs") for cell in nbformat.read(path, as_version=4).cells)
    assert (tmp_path / "diagrams" / "ecg_flow.png").exists() and (tmp_path / "ecg_cli_metrics.json").exists()
    assert workshop.missing_files(tmp_path, notebooks.ROOT / "chapters") == []
    sheet = (tmp_path.parent / "teacher" / "expected_outputs.md").read_text()
    assert "## 03_zero_copy" in sheet and "✓ " in sheet and "In [ ]: (the participant's answer" in sheet
    # each answer cell is followed by the book's solution, which the edition leaves out
    assert sheet.count("Solution, from the book:") == sheet.count("In [ ]: (the participant's answer") > 0
    assert "def standardize_on_gpu(x):" in sheet  # chapter 1's find-the-copy solution, with its output
    assert not any(workshop.SOLUTION_LABEL.search(line) for line in sheet.splitlines())


def test_a_participant_reads_the_two_hour_edition_and_finds_nothing_that_does_not_apply(tmp_path):
    """The edition opened as a participant opens it: each notebook read with nbformat, no MyST markup, every
    exercise under a numbered heading with an empty cell to write in, every link inside the edition or absolute,
    and chapter 0 speaking to a participant (no server set-up, no outputs to read, no teachers' page)."""
    assert workshop.main([str(tmp_path / "edition"), "--agenda", "half-day"]) == 0
    assert workshop.main([str(tmp_path / "edition"), "--agenda", "two-hours"]) == 0  # the half day's extra go
    edition = tmp_path / "edition"
    assert sorted(path.stem for path in edition.glob("*.ipynb")) == sorted(teaching.agenda("two-hours"))
    assert workshop.read_through(edition) == []
    exercises = 0
    for path in edition.glob("*.ipynb"):
        cells = nbformat.read(path, as_version=4).cells
        exercises += sum(bool(re.match(r"### Exercise \d\.\d: ", c.source)) for c in cells if c.cell_type == "markdown")
    book = sum(
        len(workshop.exercise_labels(nbformat.read(notebooks.ROOT / "chapters" / f"{name}.ipynb", as_version=4)))
        for name in teaching.agenda("two-hours")
    )
    assert exercises == book > 0
    first = "\n".join(c.source for c in nbformat.read(edition / "00_getting_started.ipynb", as_version=4).cells)
    for wrong in (
        "outputs you read",
        "make gpu-env",
        "make doctor",
        "make test",
        "90_for_teachers",
        "jupyter lab chapters",
    ):
        assert wrong not in first, wrong
    assert "check_setup.py" in first and "published book" in first
    assert (tmp_path / "edition-teacher" / "expected_outputs.md").exists()
    every = " ".join(
        " ".join(c.source.split()) for path in edition.glob("*.ipynb") for c in nbformat.read(path, as_version=4).cells
    )  # whitespace collapsed: a sentence may break across lines
    for wrong in ("Each solution runs with the chapter", "FILL-IN", "make resolve-gpu", "When `pip install` fails"):
        assert wrong not in every, wrong
    for path in re.findall(r"`(?:runs|tests)/[^`]*`(.{0,64})", every):
        assert path.startswith((f" ({workshop.ELSEWHERE})", f" {workshop.ELSEWHERE}")), path
    # the participant has the edition only: no sentence may send them to "the repository" as if it were beside it
    for beside in ("in the book's repository", "in the repository", "in its repository"):
        assert beside not in every, beside
    assert "not in this folder" in (edition / "README.md").read_text()


def test_the_edition_s_sentences_are_replaced_once_across_line_breaks():
    text = (
        "Each solution\nruns with the chapter and checks what it claims. See (`runs/probes/` in the\nrepository) "
        "and `tests/test_a.py`; (the book's unit tests show it); the unit tests; the simulator in the CPU tests."
    )
    edited = workshop.fit_for_edition(text)
    assert "Each solution" not in edited and "The solutions are in the published book" in edited
    # "in the repository" said to a reader of the book, whose copy is one: the participant's edition is not
    assert "(`runs/probes/` in the book's source repository rather than this folder)" in edited
    assert "`tests/test_a.py` (in the book's source repository rather than this folder)" in edited
    assert "(the book's unit tests, in its source repository rather than this folder, show it)" in edited
    assert "the unit tests (in the book's source repository rather than this folder)" in edited
    assert "the book's CPU tests, in its source repository rather than this folder." in edited
    assert workshop.fit_for_edition(edited) == edited  # a second pass changes nothing


def test_the_repository_s_placeholder_address_is_no_address(tmp_path):
    config = tmp_path / "_config.yml"
    config.write_text("html:\n  baseurl: https://FILL-IN-OWNER.github.io/FILL-IN-REPOSITORY/\n")
    assert workshop.book_url(config) is None
    config.write_text("html:\n  baseurl: https://example.org/book/\n")
    assert workshop.book_url(config) == "https://example.org/book"


def test_the_read_through_names_a_link_to_the_placeholder_address(tmp_path):
    chapter = notebook(("md", "See [the book](https://FILL-IN-OWNER.github.io/FILL-IN-REPOSITORY/)."))
    nbformat.write(chapter, tmp_path / "01_a.ipynb")
    assert any("a placeholder address" in p for p in workshop.read_through(tmp_path))


def test_the_setup_check_tells_a_participant_what_a_participant_can_do():
    fixes = {
        finding.what: workshop.for_participant(finding).fix
        for finding in (
            workshop.doctor.Finding("FAIL", "not installed: cudf", workshop.doctor.INSTALL_FIX),
            workshop.doctor.Finding(
                "FAIL", "no usable GPU: no driver", "run on a machine with an NVIDIA GPU", kind=workshop.doctor.NO_GPU
            ),
            workshop.doctor.Finding("warn", "the share is small", "ask for a larger share"),
            workshop.doctor.Finding("ok", "driver 580"),
        )
    }
    assert fixes["not installed: cudf"] == workshop.PARTICIPANT_FIX
    assert fixes["no usable GPU: no driver"] == workshop.PARTICIPANT_GPU_FIX
    assert fixes["the share is small"] == "tell your teacher, who can: ask for a larger share"
    assert fixes["driver 580"] == ""


def test_the_read_through_names_markup_a_missing_answer_cell_and_a_broken_link(tmp_path):
    chapter = notebook(
        ("md", "### Exercise 1.1: Predict\n\nPredict it."),
        ("md", "## Next\n\n```{note}\nhi\n```\nSee [two](02_b.ipynb)."),
    )
    nbformat.write(chapter, tmp_path / "01_a.ipynb")
    problems = workshop.read_through(tmp_path)
    assert any("no empty cell to write in" in p for p in problems)
    assert any("markup shows as text: '```{note}'" in p for p in problems)
    assert any("a link to what the edition lacks: 02_b.ipynb" in p for p in problems)


def test_an_unknown_agenda_is_one_line(capsys, tmp_path):
    assert workshop.main([str(tmp_path), "--agenda", "a-week"]) == 2
    assert (
        capsys.readouterr().err.strip() == "workshop: no agenda 'a-week': choose one of two-hours, half-day, full-day"
    )


def test_a_file_a_chapter_opens_but_the_edition_lacks_is_named(tmp_path):
    source, out = tmp_path / "chapters", tmp_path / "edition"
    (source / "diagrams").mkdir(parents=True)
    (source / "diagrams" / "flow.png").write_bytes(b"png")
    (source / "runs.json").write_text("{}")
    chapter = notebook(("md", "![the flow](diagrams/flow.png)"), ("code", 'json.load(open("runs.json"))'))
    chapter.cells.append(nbformat.v4.new_code_cell('Path("written_by_a_cell.json").write_text("{}")'))
    nbformat.write(chapter, source / "01_a.ipynb")
    with pytest.raises(WorkshopError, match=r"lacks \(add them to workshop.ASSETS\): 01_a.ipynb: runs.json$"):
        workshop.write_edition([source / "01_a.ipynb"], out)
    assert (out / "diagrams" / "flow.png").exists()  # diagrams/ is one of the ASSETS


def test_chapters_one_to_six_end_with_three_to_five_exercises_each():
    """The teachers' page promises exercises at the end of chapters 1 to 6 (chapter 4's on its second page)."""
    counts: dict[str, int] = {}
    for path in notebooks.chapter_notebooks():
        number = path.name[:2]
        if "01" <= number <= "06":
            labels = workshop.exercise_labels(nbformat.read(path, as_version=4))
            counts[number] = counts.get(number, 0) + len(labels)
    assert sorted(counts) == ["01", "02", "03", "04", "05", "06"]
    assert all(3 <= count <= 5 for count in counts.values()), counts


def test_every_agenda_s_chapter_has_its_paragraph_on_the_teachers_page(tmp_path):
    for name, chapters in agendas.AGENDAS.items():
        assert len(plan.what_each_teaches(list(chapters))) == len(chapters), name
    assert plan.what_each_teaches(["04_watching_memory"])[0].startswith("**4, second page.")
    page = nbformat.v4.new_notebook()
    page.cells = [nbformat.v4.new_markdown_cell("## What each chapter teaches\n\n**0. Getting started.** Objectives.")]
    nbformat.write(page, tmp_path / "90_for_teachers.ipynb")
    assert plan.what_each_teaches(["00_getting_started"], tmp_path / "90_for_teachers.ipynb")
    with pytest.raises(ValueError, match="says nothing of 06_ecg_pipeline"):
        plan.what_each_teaches(["06_ecg_pipeline"], tmp_path / "90_for_teachers.ipynb")
    page.cells = [nbformat.v4.new_markdown_cell("## Something else\n\n**0. Getting started.** Objectives.")]
    nbformat.write(page, tmp_path / "90_for_teachers.ipynb")
    with pytest.raises(ValueError, match="no section 'What each chapter teaches'"):
        plan.what_each_teaches(["00_getting_started"], tmp_path / "90_for_teachers.ipynb")


def test_a_failed_runs_copy_is_no_chapter_of_the_edition_or_the_teachers_plan(tmp_path):
    for name in ("06_ecg_pipeline.ipynb", "06_ecg_pipeline.failed.ipynb", "90_for_teachers.ipynb"):
        (tmp_path / name).write_text("{}")
    assert [p.name for p in notebooks.chapters_in(tmp_path)] == ["06_ecg_pipeline.ipynb", "90_for_teachers.ipynb"]
    assert workshop.participant_chapters(notebooks.chapters_in(tmp_path)) == [tmp_path / "06_ecg_pipeline.ipynb"]


def test_the_teacher_gets_the_agenda_s_plan_as_a_file(tmp_path, capsys):
    out = tmp_path / "teacher" / "plan.md"
    assert plan.main(["two-hours", str(out)]) == 0
    text = out.read_text()
    assert text.startswith("# The plan of the two-hours agenda") and "06_ecg_pipeline" in text and "run time" in text
    # what each of its chapters teaches, and only its chapters
    teaches = text.split("## What each chapter teaches", 1)[1]
    assert "**0. Getting started.**" in teaches and "**6. The ECG pipeline.**" in teaches
    assert "Key points" in teaches and "**2. Memory layouts.**" not in teaches.split("## Claims that stopped")[0]
    # the claims the rehearsals saw stop seats, with the cell the room sees them in
    stops = text.split("## Claims that stopped seats at the rehearsals", 1)[1]
    assert "`ecg.read_to_plot_warm` stopped" in stops and "06_ecg_pipeline, In [" in stops
    assert "layouts.kernel_keeps_float64_fast" not in stops  # chapter 2 is not in the two-hour agenda
    assert plan.main(["no-such-agenda", str(tmp_path / "x.md")]) == 2
    assert "plan: " in capsys.readouterr().err and not (tmp_path / "x.md").exists()


def test_a_claim_s_cell_is_numbered_as_the_room_runs_it(tmp_path):
    chapter = nbformat.v4.new_notebook()
    chapter.cells = [
        nbformat.v4.new_markdown_cell("# A chapter"),
        nbformat.v4.new_code_cell("x = 1"),
        nbformat.v4.new_code_cell(""),  # not run, so not numbered
        nbformat.v4.new_code_cell('claims.holds("a.b", True, control=False, control_is="c", says="d")'),
    ]
    nbformat.write(chapter, tmp_path / "01_a.ipynb")
    assert plan.cell_number("01_a", '"a.b"', tmp_path) == 2
    assert plan.cell_number("01_a", '"z.z"', tmp_path) is None


def test_each_objective_names_the_section_that_teaches_it_and_the_plan_says_which_the_agenda_reaches():
    page_objectives = {}
    for chapters in agendas.AGENDAS.values():
        for chapter, paragraph in zip(chapters, plan.what_each_teaches(list(chapters)), strict=True):
            page_objectives[chapter] = plan.objectives(paragraph)
            titles = [part["title"] for part in teaching.chapter_sections(chapter) if not part["exercise"]]
            for objective, section in page_objectives[chapter]:  # every section named is the chapter's
                assert any(title.startswith(section) for title in titles), (chapter, objective, section)
    assert all(page_objectives.values())  # every agenda's chapter has objectives
    # a made-up slot: the first section discussed, the second only run through
    slot = {
        "chapter": "01_a",
        "parts": [{"section": "The cost", "how": "live 1, talk 2"}, {"section": "Proof of it", "how": "run through"}],
    }
    paragraph = "**1. A.** Objectives: time a copy (in *The cost*); find it (in\n*Proof*). Key points: y."
    assert plan.reached(slot, paragraph) == (["time a copy"], ["find it"])
    slot["parts"][1]["how"] = "live 0, talk 2"  # the control: discussed, so reached
    assert plan.reached(slot, paragraph) == (["time a copy", "find it"], [])
    with pytest.raises(ValueError, match="no section 'Elsewhere'"):
        plan.reached(slot, "Objectives: x (in *Elsewhere*). Key points: y.")
    with pytest.raises(ValueError, match="an objective without its section"):
        plan.objectives("Objectives: time a copy; find it (in *Proof*). Key points: y.")
    assert plan.objectives("**5. Shown.** Key points: y.") == []


def test_the_plan_names_what_the_agenda_leaves_to_the_book_and_what_an_exercise_needs_shown(tmp_path):
    out = tmp_path / "plan.md"
    assert plan.main(["two-hours", str(out)]) == 0
    text = out.read_text()
    ecg = text.split("**6. The ECG pipeline.**", 1)[1]
    assert "*Left to the book*" in ecg and "prove it with the traffic meter" in ecg.split("*Left to the book*")[1]
    assert 'it uses traffic.TrafficMeter, met in "Proof of zero-copy' in text


def test_each_agenda_says_what_it_reaches_and_what_to_cut_for_every_chapter():
    for agenda in agendas.AGENDAS:
        lines = plan.agenda_reach(agenda)
        assert lines[0] == f"{agenda}:"
        for chapter in agendas.AGENDAS[agenda]:
            reach = next(line for line in lines if line.startswith(f"  {chapter}: discussed "))
            done, of = map(int, reach.split("discussed ")[1].split(" objectives")[0].split(" of "))
            assert 0 <= done <= of and (("left to the book" in reach) == (done < of))
            left = reach.split("left to the book: ", 1)[1].split("; ") if done < of else []
            assert len(left) == of - done, "the objectives named as left are the ones the count leaves"
            assert any(line.startswith(f"    if late, cut {chapter}: ") for line in lines)


def test_a_cut_list_runs_the_last_discussed_sections_through_first_and_says_what_it_leaves_out():
    parts = [{"section": f"S{k}", "how": f"live 1, talk {k}", "saves": 1.0 + k} for k in range(1, 6)]
    parts.insert(2, {"section": "T", "how": "run through", "saves": 0.0})
    said = plan.cut_list({"chapter": "ch", "exercise": None, "parts": parts})
    assert said.startswith('ch: "S5" run through (') and '"S4"' in said and '"S3"' in said and '"S2"' not in said
    assert said.index('"S5"') < said.index('"S4"') < said.index('"S3"') and "the 2 discussed sections above" in said
    assert said.startswith('ch: "S5" run through (6.0 min)')
    # what a section saves is what the plan itself spends on it less what it spends running it through: the same
    # chapter planned in a slot that discusses every section and in one that runs every section through
    roomy = teaching.chapter_plan("00_getting_started", 120, 60.0)["parts"]
    tight = teaching.chapter_plan("00_getting_started", 0.01, 60.0)["parts"]
    assert any(plan.section_saving(part) > 0 for part in roomy) and all(part["saves"] == 0 for part in tight)
    for discussed, through in zip(roomy, tight, strict=True):
        assert through["how"] in ("run through", "read")
        assert discussed["min"] - plan.section_saving(discussed) == pytest.approx(through["min"])
    assert plan.cut_list({"chapter": "ch", "exercise": None, "parts": [parts[2]]}).endswith("run through already")


def test_only_an_exercise_that_asks_for_a_prediction_gets_a_text_cell_for_it():
    asks = notebook(("md", EXERCISE), ("md", EXERCISE_END))
    plain = notebook(("md", EXERCISE.replace("Predict the bandwidth, then measure", "Measure")), ("md", EXERCISE_END))
    kinds = [c.cell_type for c in workshop.participant_notebook(asks, "03_ch.ipynb").cells]
    assert kinds == ["markdown", "markdown", "code"]
    kinds = [c.cell_type for c in workshop.participant_notebook(plain, "03_ch.ipynb").cells]
    assert kinds == ["markdown", "code"]


def test_a_participant_reads_no_installer_notes_and_learns_what_to_do_without_a_gpu(capsys, monkeypatch, tmp_path):
    cpu_build = "torch 2.13.0+cpu is a CPU-only build: it cannot use the GPU"
    note = "the cpu extra's, for make test without a GPU"
    for_installer = doctor.Finding("FAIL", cpu_build, "pip install the gpu extra", note=note)
    assert f"({note})" in for_installer.line()
    shown = workshop.for_participant(for_installer)
    assert shown.what == cpu_build and note not in shown.line()
    assert "pip" not in shown.fix
    no_gpu = doctor.Finding("FAIL", "no usable GPU: no NVIDIA driver", "install the driver", kind=doctor.NO_GPU)
    monkeypatch.setattr(doctor, "probe_machine", lambda: type("Machine", (), {})())
    monkeypatch.setattr(doctor, "diagnose", lambda machine: [no_gpu])
    assert workshop.check_seat([], tmp_path) == 1
    last_two = capsys.readouterr().out.rstrip().splitlines()[-2:]
    assert last_two[0] == workshop.WITHOUT_A_GPU
    assert last_two[1].endswith("problem(s): this seat is not ready"), "the last line says whether the seat is ready"
    kept = workshop.for_participant(doctor.Finding("FAIL", "cuda error (make sure the driver is loaded)", "x"))
    assert kept.what == "cuda error (make sure the driver is loaded)", "a library's own words in brackets are kept"


def test_the_teachers_sheet_never_lands_inside_the_edition(tmp_path, capsys):
    assert workshop.main([str(tmp_path / "edition"), "--teacher-out", str(tmp_path / "edition" / "sheet")]) == 2
    assert "holds the solutions" in capsys.readouterr().err
    assert not (tmp_path / "edition").exists()


def test_an_edition_written_again_keeps_only_the_diagrams_its_chapters_show(tmp_path):
    source, out = tmp_path / "chapters", tmp_path / "edition"
    (source / "diagrams").mkdir(parents=True)
    for name in ("shown.png", "unused.png"):
        (source / "diagrams" / name).write_bytes(b"png")
    (out / "diagrams").mkdir(parents=True)
    (out / "diagrams" / "from_an_earlier_agenda.png").write_bytes(b"png")
    workshop.copy_assets(source, out, {"diagrams/shown.png"})
    assert sorted(p.name for p in (out / "diagrams").iterdir()) == ["shown.png"]
    workshop.copy_assets(source, out, set())
    assert (out / "diagrams").is_dir() and not any((out / "diagrams").iterdir()), "the folder stays, empty"


def test_an_edition_is_never_written_over_the_books_own_chapters(tmp_path, capsys):
    source, out = tmp_path / "book" / "chapters", tmp_path / "edition"  # a copy: a regression must not cost a file
    source.mkdir(parents=True)
    chapter = source / "03_ch.ipynb"
    nbformat.write(chapter_with_an_exercise(), chapter)
    for into in (source, tmp_path / "book"):
        with pytest.raises(WorkshopError, match="holds the book's chapters"):
            workshop.write_edition([chapter], into)
    assert nbformat.read(chapter, as_version=4).cells[6].outputs, "the chapter is left as it was"
    (source / "diagrams").mkdir(parents=True)
    (source / "diagrams" / "kept.png").write_bytes(b"png")
    out.mkdir()
    (out / "diagrams").symlink_to(source / "diagrams")
    with pytest.raises(WorkshopError, match="the book's own diagrams"):
        workshop.copy_assets(source, out, set())
    assert (source / "diagrams" / "kept.png").exists(), "nothing of the book's is deleted"


@pytest.mark.slow
def test_no_edition_speaks_of_commits_which_a_participant_has_none_of(tmp_path):
    """Chapters word the book's own run so that it reads true in the edition too ("the book's own run", "kept next
    to it"), rather than the edition rewriting each sentence: checked over every agenda's edition and the whole."""
    chapters = workshop.participant_chapters(notebooks.chapter_notebooks())
    for agenda in [None, *agendas.AGENDAS]:
        chosen = chapters if agenda is None else [p for p in chapters if p.stem in agendas.agenda(agenda)]
        out = tmp_path / (agenda or "whole")
        workshop.write_edition(chosen, out)
        for path in sorted(out.glob("*.ipynb")):
            for index, cell in enumerate(nbformat.read(path, as_version=4).cells):
                found = re.search(r"\bcommit\w*", cell.source, re.IGNORECASE)
                assert found is None, f"{agenda or 'whole'} edition, {path.name}, cell {index}: {found.group(0)!r}"


def test_links_that_leave_the_edition_inside_one_pair_of_brackets_share_one_mention_of_the_published_book():
    text = "Pools (see [chapter 4](04_x.ipynb), `f(x` and [chapter 5](05_z.ipynb)) and [chapter 2](02_y.ipynb)."
    assert workshop.edition_links(text, set(), None) == (
        "Pools (see chapter 4, `f(x` and chapter 5 in the published book) and chapter 2 (in the published book)."
    )
    kept = "(see [chapter 4](04_x.ipynb) and [the web](https://example.org))"
    assert (
        workshop.edition_links(kept, set(), None)
        == "(see chapter 4 in the published book and [the web](https://example.org))"
    )
    apart = "(see [a](a.ipynb)) and (also [b](b.ipynb)); (see [c](c.ipynb) (and [d](d.ipynb)))"
    assert workshop.edition_links(apart, set(), None) == (
        "(see a in the published book) and (also b in the published book); "
        "(see c in the published book (and d in the published book))"
    )
    in_code = "(see [a](a.ipynb) and `[b](b.ipynb)`)"
    assert workshop.edition_links(in_code, set(), None) == "(see a in the published book and `[b](b.ipynb)`)"
    possessive = "(see [chapter 4](04_x.ipynb) and [chapter 5](05_z.ipynb)'s pool)"
    assert (
        workshop.edition_links(possessive, set(), None) == "(see chapter 4 in the published book and chapter 5's pool)"
    )
