"""Freshness (booktools.freshness): a notebook's outputs against the code they ran, on a made-up book; the run's
fingerprint taken by a real kernel; and the listing of the published notebooks, which informs and never fails."""

import json
import warnings

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

from booktools import freshness, notebooks


def made_up_book(tmp_path):
    """A book of one chapter that ran support/tool.py, fingerprinted as it was run."""
    (tmp_path / "support").mkdir()
    (tmp_path / "support" / "__init__.py").write_text("")
    (tmp_path / "support" / "tool.py").write_text("def answer():\n    return 42\n")
    (tmp_path / "chapters").mkdir()
    notebook = new_notebook(
        cells=[new_markdown_cell("# A chapter\n\nWhy it matters."), new_code_cell("from support import tool")]
    )
    found = {"support": ["support/__init__.py", "support/tool.py"], "libraries": {"cupy": "14.2.0"}, "python": "3"}
    freshness.record(notebook, found, tmp_path)
    path = tmp_path / "chapters" / "01_a.ipynb"
    nbformat.write(notebook, str(path))
    return path


def test_a_notebook_is_fresh_until_a_support_file_it_ran_changes(tmp_path):
    path = made_up_book(tmp_path)
    assert freshness.report([path], tmp_path)["chapters/01_a.ipynb"].fresh
    (tmp_path / "support" / "tool.py").write_text("def answer():\n    return 43\n")
    found = freshness.report([path], tmp_path)["chapters/01_a.ipynb"]
    assert found.status == "stale" and found.reasons == ["support/tool.py changed"]
    (tmp_path / "support" / "tool.py").unlink()
    assert freshness.report([path], tmp_path)["chapters/01_a.ipynb"].reasons == ["support/tool.py is gone"]


def test_a_file_the_notebook_did_not_run_does_not_make_it_stale(tmp_path):
    path = made_up_book(tmp_path)
    (tmp_path / "support" / "other.py").write_text("x = 1\n")
    assert freshness.report([path], tmp_path)["chapters/01_a.ipynb"].fresh


def test_a_file_only_the_chapter_s_fresh_processes_run_is_fingerprinted_when_the_notebook_names_it(tmp_path):
    (tmp_path / "support").mkdir()
    (tmp_path / "support" / "cli.py").write_text("def main():\n    return 0\n")
    notebook = new_notebook(cells=[new_code_cell("import subprocess")])
    found = {"support": [], "libraries": {}, "python": "3"}
    freshness.record(notebook, found, tmp_path)
    assert freshness.fingerprint(found, notebook, tmp_path)["support"] == {}  # the kernel never imported it
    notebook.metadata["book"][freshness.CHILD_KEY] = ["support/cli.py"]
    freshness.record(notebook, found, tmp_path)
    assert list(notebook.metadata["book"]["fingerprint"]["support"]) == ["support/cli.py"]
    assert freshness.freshness(notebook, tmp_path).fresh
    (tmp_path / "support" / "cli.py").write_text("def main():\n    return 2\n")
    assert freshness.freshness(notebook, tmp_path).reasons == ["support/cli.py changed"]


def test_a_fresh_process_file_that_is_missing_or_named_after_the_run_makes_it_stale(tmp_path):
    (tmp_path / "support").mkdir()
    notebook = new_notebook(cells=[new_code_cell("import subprocess")])
    notebook.metadata["book"] = {freshness.CHILD_KEY: ["support/cli.py"]}
    found = {"support": [], "libraries": {}, "python": "3"}
    freshness.record(notebook, found, tmp_path)  # the metadata names a file that is not there
    assert notebook.metadata["book"]["fingerprint"]["support"] == {"support/cli.py": None}
    assert freshness.freshness(notebook, tmp_path).reasons == ["support/cli.py was missing when it ran"]
    (tmp_path / "support" / "cli.py").write_text("def main():\n    return 0\n")
    assert freshness.freshness(notebook, tmp_path).reasons == ["support/cli.py changed"]
    (tmp_path / "support" / "cli.py").unlink()
    notebook.metadata["book"][freshness.CHILD_KEY] = []  # no longer named: still stale until it runs again
    assert freshness.freshness(notebook, tmp_path).reasons == ["support/cli.py was missing when it ran"]
    (tmp_path / "support" / "cli.py").write_text("def main():\n    return 0\n")
    notebook.metadata["book"][freshness.CHILD_KEY] = ["support/cli.py"]
    freshness.record(notebook, found, tmp_path)
    assert freshness.freshness(notebook, tmp_path).fresh
    notebook.metadata["book"][freshness.CHILD_KEY].append("support/report.py")  # named after the run
    (tmp_path / "support" / "report.py").write_text("x = 1\n")
    assert freshness.freshness(notebook, tmp_path).reasons == ["support/report.py is not in the record of its run"]


def test_an_edited_code_cell_makes_it_stale_and_an_edited_markdown_cell_does_not(tmp_path):
    path = made_up_book(tmp_path)
    notebook = json.loads(path.read_text())
    notebook["cells"][0]["source"] = "# A chapter\n\nWhy it matters, said better."
    assert freshness.freshness(notebook, tmp_path).fresh
    notebook["cells"][1]["source"] = "from support import tool\nprint(tool.answer())"
    assert freshness.freshness(notebook, tmp_path).reasons == ["its code cells changed"]


def test_a_notebook_without_a_fingerprint_is_never_fingerprinted(tmp_path):
    assert freshness.freshness(new_notebook(), tmp_path).status == "never fingerprinted"


def test_the_book_notes_a_stale_chapter_at_its_top_and_leaves_a_fresh_one_alone(tmp_path):
    path = made_up_book(tmp_path)
    app = type("App", (), {"srcdir": str(tmp_path)})()
    source = [path.read_text()]
    freshness._mark_if_not_fresh(app, "chapters/01_a", source)
    assert source == [path.read_text()]  # fresh: the page is the notebook as committed
    (tmp_path / "support" / "tool.py").write_text("def answer():\n    return 43\n")
    freshness._mark_if_not_fresh(app, "chapters/01_a", source)
    first = json.loads(source[0])["cells"][0]["source"]
    assert first.startswith("# A chapter\n")
    assert "The outputs of this chapter predate a change to the code they run: support/tool.py changed" in first
    assert "cupy 14.2.0" in first and first.rstrip().endswith("Why it matters.")
    source = ["{}"]
    freshness._mark_if_not_fresh(app, "chapters/91_claims", source)  # not a notebook: left alone
    assert source == ["{}"]


def test_make_execute_records_what_the_kernel_imported_from_support(tmp_path, monkeypatch):
    """A real kernel: the fingerprint names the support modules it imported (here support.units, through a
    function-level import too), hashes them as they are in the repository, and is fresh right after the run."""
    notebook = new_notebook(cells=[new_code_cell("from support import units\nprint(units.describe_bytes(2048))")])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = tmp_path / "run_me.ipynb"
    nbformat.write(notebook, str(path))
    notebooks.execute_notebook(path, timeout_s=120)
    ran = json.loads(path.read_text())
    recorded = ran["metadata"]["book"]["fingerprint"]
    assert "support/units.py" in recorded["support"] and "support/__init__.py" in recorded["support"]
    assert len(ran["cells"]) == 1 and ran["cells"][0]["execution_count"] == 1  # the step left no cell behind
    assert freshness.freshness(ran).fresh


def test_the_published_notebooks_are_listed_and_the_listing_never_fails():
    """Information, not a gate: a chapter that is not fresh is listed here (and noted in the built book)."""
    found = freshness.report(notebooks.published_notebooks())
    assert found and all(state.status in ("fresh", "stale", "never fingerprinted") for state in found.values())
    not_fresh = [f"{name}: {state.line()}" for name, state in found.items() if not state.fresh]
    if not_fresh:
        warnings.warn("outputs older than their code:\n" + "\n".join(not_fresh), stacklevel=1)


def test_a_corrected_docstring_or_comment_leaves_it_fresh_and_a_changed_line_of_code_does_not(tmp_path):
    path = made_up_book(tmp_path)
    (tmp_path / "support" / "tool.py").write_text(
        '"""The tool."""\n\n\ndef answer():\n    """42."""\n    return 42  # sure\n'
    )
    assert freshness.report([path], tmp_path)["chapters/01_a.ipynb"].fresh
    (tmp_path / "support" / "tool.py").write_text('"""The tool."""\n\n\ndef answer():\n    return 41 + 1\n')
    assert freshness.report([path], tmp_path)["chapters/01_a.ipynb"].status == "stale"


#: Files that a published notebook's recorded files can import (``freshness.untracked_support``) and that no
#: process of that chapter runs, each with why. Every other such file must be named in the notebook's metadata
#: (``book.child_process_support``), so that a change to it marks the chapter's outputs as older than their code.
NOT_RUN_BY_THE_CHAPTER = {
    "01_why_gpus.ipynb": {
        "support/layouts/kernels.py": "imported inside support.layouts.aos_soa's launch helpers, which chapter 1 "
        "never calls (its kernel imported aos_soa and not this module); its fresh process, "
        "support.why_gpus.crossover's cold start, imports no layouts module",
    },
    "07_many_gpus.ipynb": {
        "support/ecg/cpu_peers.py": "imported inside support.ecg.pipeline.time_shared_stages (chapter 6's CPU "
        "columns), which chapter 7's workers never call",
    },
}


def test_a_module_only_a_fresh_process_imports_is_found_from_the_source(tmp_path):
    (tmp_path / "support").mkdir()
    (tmp_path / "support" / "__init__.py").write_text("")
    (tmp_path / "support" / "kernel_side.py").write_text(
        "def in_a_fresh_process():\n    from support import child_side\n\n    return child_side.x\n\n\n"
        'TARGET = "support.far:run"  # what fresh_process.call runs\n'
    )
    (tmp_path / "support" / "far.py").write_text("def run():\n    return 3\n")
    (tmp_path / "support" / "child_side.py").write_text("from . import deeper\n\nx = deeper.y\n")
    (tmp_path / "support" / "deeper.py").write_text("y = 1\n")
    (tmp_path / "support" / "unrelated.py").write_text("z = 2\n")
    notebook = new_notebook(cells=[new_code_cell("from support import kernel_side")])
    freshness.record(notebook, {"support": ["support/__init__.py", "support/kernel_side.py"]}, tmp_path)
    found = ["support/child_side.py", "support/deeper.py", "support/far.py"]
    assert freshness.untracked_support(notebook, tmp_path) == found
    notebook.metadata["book"][freshness.CHILD_KEY] = found
    assert freshness.untracked_support(notebook, tmp_path) == []


def test_a_process_a_cell_starts_or_runs_with_dash_m_is_found_and_a_data_file_is_not_read_as_code(tmp_path):
    (tmp_path / "support" / "tool").mkdir(parents=True)
    for name in ("__init__.py", "tool/__init__.py", "tool/__main__.py", "started.py", "lone.py"):
        (tmp_path / "support" / name).write_text("x = 1\n")
    (tmp_path / "support" / "runs.py").write_text('COMMAND = ["python", "-m", "support.tool", "--hours", "2"]\n')
    (tmp_path / "support" / "signal.csv").write_text("time,ecg mV\n0,1\n")
    cells = [new_code_cell('%env X=1\nfresh_process.call("support.started:main")'), new_code_cell("import support")]
    notebook = new_notebook(cells=cells)
    freshness.record(notebook, {"support": ["support/__init__.py", "support/runs.py"]}, tmp_path)
    notebook.metadata["book"][freshness.CHILD_KEY] = ["support/signal.csv"]  # a file a process reads
    assert freshness.untracked_support(notebook, tmp_path) == [
        "support/started.py",
        "support/tool/__init__.py",
        "support/tool/__main__.py",
    ]


def test_every_module_a_chapter_can_run_is_in_its_record_or_said_not_to_run():
    """The kernel's imports are what it really ran; a fresh process or a Dask worker imports more, and the
    notebook names those files (``book.child_process_support``) or this test says why that chapter never runs
    them. A chapter that names a file its last run did not record is stale until it runs again. A stale chapter's
    unnamed files are listed, not failed: a module its changed code now imports may be its kernel's, which the
    next execution records (name those a fresh process imports before executing it)."""
    unexplained, said_for_nothing, while_stale = {}, {}, {}
    for path in notebooks.published_notebooks():
        said = NOT_RUN_BY_THE_CHAPTER.get(path.name, {})
        notebook = json.loads(path.read_text())
        untracked = freshness.untracked_support(notebook)
        if left := [name for name in untracked if name not in said]:
            (unexplained if freshness.freshness(notebook).fresh else while_stale)[path.name] = left
        if stale := [name for name in said if name not in untracked]:  # an exemption nothing needs any more
            said_for_nothing[path.name] = stale
    if while_stale:
        warnings.warn(f"stale chapters that can import, outside their record: {while_stale}", stacklevel=1)
    assert not said_for_nothing, f"NOT_RUN_BY_THE_CHAPTER names files no longer reached: {said_for_nothing}"
    assert not unexplained, (
        f"support files these chapters can import outside their kernel, named nowhere: {unexplained}; add each to "
        "the notebook's metadata book.child_process_support (then execute it), or, if no process of the chapter "
        "runs it, to NOT_RUN_BY_THE_CHAPTER with why"
    )
