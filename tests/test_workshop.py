"""booktools.workshop: the participant edition drops every solution (code cells included) and every output, keeps
every exercise, and names broken exercise markup."""

from __future__ import annotations

import nbformat
import pytest

from booktools import notebooks, workshop
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


def test_the_participant_edition_keeps_exercises_and_drops_solutions_and_outputs():
    original = chapter_with_an_exercise()
    edition = workshop.participant_notebook(original, "ch.ipynb")
    sources = [cell.source for cell in edition.cells]
    assert sources == ["# A chapter", "x = 1", EXERCISE, "# your prediction here", EXERCISE_END, "## Next section"]
    assert all(not cell.outputs for cell in edition.cells if cell.cell_type == "code")
    assert workshop.exercise_labels(edition) == ["ex-predict"]
    workshop.check_edition(original, edition, "ch.ipynb")
    assert len(original.cells) == 9 and original.cells[6].outputs, "the original is left as it was"


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
    lost.cells = [cell for cell in lost.cells if "exercise-start" not in cell.source]
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


def test_make_workshop_writes_every_chapter_the_files_they_open_and_a_readme(tmp_path):
    written = workshop.write_edition(notebooks.chapter_notebooks(), tmp_path)
    chapters = [path.name for path in notebooks.chapter_notebooks() if not path.name.startswith("90_")]
    assert [path.name for path in written] == chapters and "90_for_teachers.ipynb" not in chapters
    assert (tmp_path / "README.md").read_text().startswith("# Workshop edition")
    for path in written:
        assert all(not cell.get("outputs") for cell in nbformat.read(path, as_version=4).cells)
    assert (tmp_path / "diagrams" / "ecg_flow.png").exists() and (tmp_path / "ecg_cli_metrics.json").exists()
    assert workshop.missing_files(tmp_path, notebooks.ROOT / "chapters") == []


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
