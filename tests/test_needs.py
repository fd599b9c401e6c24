"""support.needs and booktools.runs.chapter_needs: a chapter's need is the smallest peak seen in a run it passed
under a memory limit; the committed needs file is what the committed runs give; a chapter stops before it starts
when this process cannot hold that peak."""

import nbformat
import pytest

from booktools import runs
from support import needs
from support.env import GpuUnavailableError
from support.units import GIB

CHAPTER = "chapters/04_x.ipynb"


def measured_runs():
    return [
        runs.RunGroup("H100", "execute", False, 10.0, 0, [runs.ChapterRun(CHAPTER, 5.0, 60 * GIB, True)]),
        runs.RunGroup("24 GB", "nbval", False, 10.0, 0, [runs.ChapterRun(CHAPTER, 5.0, 14 * GIB, True)], 24 * GIB),
        runs.RunGroup("16 GB", "nbval", False, 10.0, 0, [runs.ChapterRun(CHAPTER, 5.0, 13 * GIB, True)], 16 * GIB),
        runs.RunGroup("8 GB", "nbval", False, 10.0, 0, [runs.ChapterRun(CHAPTER, 5.0, 7 * GIB, False)], 8 * GIB),
        runs.RunGroup("4 at once", "nbval", True, 9, 0, [runs.ChapterRun("chapters/05_y.ipynb", 5, None, True)]),
    ]


def test_a_need_is_the_smallest_peak_of_a_passing_run_under_a_limit_with_that_limit():
    found = runs.chapter_needs(measured_runs())
    # the whole-GPU run and the failed 8 GB run prove nothing; 05_y ran only in a parallel group
    assert found == {"04_x": needs.Need("04_x", 13 * GIB, 16 * GIB, "16 GB")}


def test_a_chapter_on_several_gpus_has_no_need_its_processes_together_are_not_one_process(tmp_path):
    two = tmp_path / "07_two.ipynb"
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("import cupy")])
    notebook.metadata["book"] = {"gpus": 2}
    nbformat.write(notebook, two)
    one = tmp_path / "06_one.ipynb"
    notebook.metadata["book"] = {}
    nbformat.write(notebook, one)
    limited = [runs.ChapterRun(str(path), 5.0, 17 * GIB, True) for path in (two, one)]
    found = runs.chapter_needs([runs.RunGroup("16 GB", "nbval", False, 10.0, 0, limited, 16 * GIB)])
    assert list(found) == ["06_one"] and runs.gpus_needed(str(two)) == 2


def test_the_needs_file_is_written_and_read_back(tmp_path):
    path = tmp_path / "needs.json"
    runs.write_needs(measured_runs(), path)
    assert needs.of("04_x", path) == needs.Need("04_x", 13 * GIB, 16 * GIB, "16 GB")
    assert needs.of("05_y", path) is None
    assert needs.load(tmp_path / "none.json") == {}


def test_the_committed_needs_file_is_the_one_the_committed_runs_give():
    assert needs.load() == runs.chapter_needs(runs.load()), "run `python -m booktools.runs needs`"


def test_a_chapter_stops_before_it_starts_when_its_peak_does_not_fit_this_process(fake_gpu, records):
    (small,) = fake_gpu("NVIDIA A2", 16, compute_capability=(8, 6)).gpus
    path = records.needs
    runs.write_needs(measured_runs(), path)
    with pytest.raises(GpuUnavailableError, match=r"Chapter 04_x needs about 13.0 GiB.*16.0 GiB limit \(16 GB\)"):
        needs.check_gpu("04_x", path=path, free=(12 * GIB, 16 * GIB))
    assert needs.check_gpu("04_x", path=path, free=(14 * GIB, 16 * GIB)) == small
    assert needs.check_gpu("05_y", path=path, free=(1 * GIB, 16 * GIB)) == small  # never measured: no check
