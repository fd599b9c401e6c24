"""booktools.notebooks: what makes a notebook ready to publish, and executing one (on the CPU)."""

import warnings

import nbformat
import pytest
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

from booktools import notebooks
from support.env import Gpu, GpuProbe

BANNER = "GPU 0: NVIDIA H100 80GB HBM3 · 79.2 GiB · compute capability 9.0 · 132 SMs\n"


def executed(*sources_and_outputs, needs_gpu=True):
    cells = [new_markdown_cell("# A chapter")]
    for count, (source, outputs) in enumerate(sources_and_outputs, start=1):
        cells.append(new_code_cell(source, execution_count=count, outputs=outputs))
    notebook = new_notebook(cells=cells)
    if not needs_gpu:
        notebook.metadata["book"] = {"needs_gpu": False}
    return notebook


def stream(text):
    return new_output("stream", name="stdout", text=text)


def good_notebook():
    return executed(("from support import env\nenv.banner()", [stream(BANNER)]), ("%time x = 1\n!nvidia-smi", []))


def test_a_gpu_run_with_banner_is_ready():
    assert notebooks.notebook_problems(good_notebook()) == []


def test_unexecuted_cells_are_reported():
    notebook = good_notebook()
    notebook.cells[2].execution_count = None
    assert notebooks.notebook_problems(notebook) == ["1 of 2 code cells were never executed"]


def test_out_of_order_execution_is_reported():
    notebook = good_notebook()
    notebook.cells[1].execution_count, notebook.cells[2].execution_count = 2, 1
    assert "top to bottom" in notebooks.notebook_problems(notebook)[0]


def test_error_outputs_are_reported():
    notebook = good_notebook()
    notebook.cells[2].outputs = [new_output("error", ename="ZeroDivisionError", evalue="", traceback=[])]
    assert notebooks.notebook_problems(notebook) == ["code cell 2 has an error output: ZeroDivisionError"]


def test_cells_that_do_not_parse_are_reported():
    notebook = executed(("env.banner(", [stream(BANNER)]))
    assert notebooks.notebook_problems(notebook)[0].startswith("code cell 1 does not parse")


def test_a_gpu_notebook_without_a_gpu_banner_is_reported():
    notebook = executed(("env.banner()", [stream("No usable CUDA GPU: no NVIDIA driver\n")]))
    assert notebooks.notebook_problems(notebook) == [
        "no environment banner naming an NVIDIA GPU in the outputs (support.env.banner())"
    ]


def test_a_notebook_without_outputs_is_reported():
    problems = notebooks.notebook_problems(executed(("x = 1", []), needs_gpu=False))
    assert problems == ["no code cell has outputs"]


def test_a_cpu_notebook_needs_no_gpu_banner():
    notebook = executed(("print(1)", [stream("1\n")]), needs_gpu=False)
    assert not notebooks.needs_gpu(notebook) and notebooks.gpus_needed(notebook) == 0
    assert notebooks.notebook_problems(notebook) == []


def test_too_few_gpus_says_how_many_are_needed():
    gpu = Gpu(0, "NVIDIA H100 80GB HBM3", 80 * 2**30, (9, 0), 132)
    one = GpuProbe(gpus=(gpu,), cuda_version="13.0")
    assert notebooks.too_few_gpus(1, one) is None and notebooks.too_few_gpus(0, one) is None
    assert notebooks.too_few_gpus(2, one) == "needs 2 GPUs; this machine has 1"
    assert notebooks.too_few_gpus(2, GpuProbe(gpus=(gpu, gpu), cuda_version="13.0")) is None


def test_a_notebook_says_how_many_gpus_it_needs():
    notebook = good_notebook()
    assert notebooks.gpus_needed(notebook) == 1
    notebook.metadata["book"] = {"needs_gpu": True, "gpus": 2}
    assert notebooks.gpus_needed(notebook) == 2


def test_strip_volatile_metadata_keeps_tags():
    notebook = good_notebook()
    notebook.metadata["widgets"] = {"state": {}}
    notebook.cells[1].metadata.update(execution={"iopub.status.busy": "2026-11-22T10:00:00"}, tags=["hide-input"])
    notebooks.strip_volatile_metadata(notebook)
    assert "widgets" not in notebook.metadata
    assert notebook.cells[1].metadata == {"tags": ["hide-input"]}


def test_slow_cells_name_the_cells_that_took_long_from_nbclients_times():
    notebook = good_notebook()
    code = [i for i, cell in enumerate(notebook.cells) if cell.cell_type == "code"]
    slow, quick = notebook.cells[code[0]], notebook.cells[code[1]]
    slow.metadata["execution"] = {
        "iopub.execute_input": "2026-11-26T11:00:00.000000Z",
        "shell.execute_reply": "2026-11-26T11:00:12.500000Z",
    }
    quick.metadata["execution"] = {
        "iopub.execute_input": "2026-11-26T11:00:13Z",
        "shell.execute_reply": "2026-11-26T11:00:14Z",
    }
    first_line = next(line for line in slow.source.splitlines() if line.strip())
    assert notebooks.slow_cells(notebook) == [f"cell {code[0]}: 12.5 s  {first_line[:70]}"]
    assert len(notebooks.slow_cells(notebook, at_least_s=1.0)) == 2
    assert notebooks.slow_cells(notebooks.strip_volatile_metadata(notebook)) == []


def test_toc_files_walks_parts_chapters_and_sections(tmp_path):
    (tmp_path / "_toc.yml").write_text(
        "format: jb-book\nroot: intro\nparts:\n- caption: One\n  chapters:\n  - file: chapters/01_a\n"
        "    sections:\n    - file: chapters/01_b\n- caption: Two\n  chapters:\n  - file: chapters/02_c\n"
    )
    assert notebooks.toc_files(tmp_path) == ["intro", "chapters/01_a", "chapters/01_b", "chapters/02_c"]


@pytest.mark.slow
def test_execute_notebook_runs_in_the_notebooks_folder(tmp_path):
    notebook = new_notebook(cells=[new_code_cell("import os\nprint(os.path.basename(os.getcwd()))")])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    folder = tmp_path / "chapters"
    folder.mkdir()
    path = folder / "run_me.ipynb"
    nbformat.write(notebook, str(path))
    notebooks.execute_notebook(path, timeout_s=120)
    cell = notebooks.read_notebook(path).cells[0]
    assert cell.execution_count == 1
    assert cell.outputs[0]["text"] == "chapters\n"
    assert "execution" not in cell.metadata  # recorded for the log's slow cells, then stripped


@pytest.mark.slow
def test_a_failing_notebook_runs_every_cell_and_leaves_the_original_alone(tmp_path):
    cells = [new_code_cell("raise ValueError('first')"), new_code_cell("print('second ran')"), new_code_cell("1 / 0")]
    notebook = new_notebook(cells=cells)
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    path = tmp_path / "fails.ipynb"
    nbformat.write(notebook, str(path))
    before = path.read_text()
    with pytest.raises(
        notebooks.NotebookFailed, match=r"2 cell\(s\) failed(.|\n)*In \[1\], cell 0: ValueError(.|\n)*In \[3\], cell 2"
    ):
        notebooks.execute_notebook(path, timeout_s=120)
    assert path.read_text() == before
    ran = notebooks.read_notebook(notebooks.failed_copy_of(path))
    assert ran.cells[1].outputs[0]["text"] == "second ran\n"


def test_check_command_fails_on_a_notebook_that_is_not_ready(tmp_path, capsys):
    path = tmp_path / "bad.ipynb"
    nbformat.write(executed(("x = 1", [])), str(path))
    assert notebooks._main(["check", str(path)]) == 1
    assert "no environment banner" in capsys.readouterr().out


@pytest.mark.parametrize("argv", [[], ["execute"], ["publish"]])
def test_command_line_rejects_incomplete_commands(argv):
    with pytest.raises(SystemExit):
        notebooks._main(argv)


def test_strict_warnings_raise_the_libraries_deprecations_and_leave_the_others(tmp_path):
    startup = notebooks.strict_warnings(tmp_path)
    assert startup.parent == tmp_path / "profile_default" / "startup"
    with warnings.catch_warnings():
        exec(startup.read_text(), {})
        for module in ("__main__", "cupy._core", "torch.utils.dlpack", "support.ecg.vae", "jax"):
            with pytest.raises(DeprecationWarning):
                warnings.warn_explicit("old name", DeprecationWarning, "x.py", 1, module=module)
        warnings.simplefilter("ignore")  # below the strict filters: what they leave alone is ignored here
        exec(startup.read_text(), {})
        warnings.warn_explicit("not ours", DeprecationWarning, "x.py", 1, module="ipykernel.kernelbase")
        warnings.warn_explicit("not ours", DeprecationWarning, "x.py", 1, module="cupyish")
