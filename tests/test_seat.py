"""The participant edition's first check (booktools.seat): the book's own check, its stop worded for a seat and
shown without a traceback. The messages come from support.env.require_gpu itself, so a change of its wording that
loses the participant's advice fails here."""

from __future__ import annotations

import json

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

from booktools import notebooks, seat, workshop
from booktools.paths import ROOT
from support import env
from support.units import GIB

ONE_GPU = env.GpuProbe(gpus=(env.Gpu(0, "NVIDIA Test GPU", 80 * GIB, (9, 0), 132),), driver_version="580.0")


@pytest.fixture
def needs_file(tmp_path):
    """A chapter's recorded need, as ``support/chapter_needs.json`` holds one: these tests do not depend on which
    chapters the book's own records hold a need for (a chapter whose last run under the limit failed has none)."""
    need = {"chapter": "06_ecg_pipeline", "peak_bytes": 11 * GIB, "limit_bytes": 16 * GIB, "label": "16 GB (MPS limit)"}
    path = tmp_path / "chapter_needs.json"
    path.write_text(json.dumps({"06_ecg_pipeline": need}))
    return path


@pytest.fixture
def one_gpu(monkeypatch):
    monkeypatch.setattr(env, "_probe_once", lambda: ONE_GPU)
    monkeypatch.delenv("GPU_INTEROP_SKIP_MEMORY_CHECK", raising=False)


def test_no_gpu_gives_the_reason_and_a_participant_s_way_out(monkeypatch):
    monkeypatch.setattr(env, "_probe_once", lambda: env.GpuProbe(problem="no NVIDIA driver: libcuda.so.1 missing"))
    with pytest.raises(seat.SeatNotReady) as stopped:
        seat.check_gpu("01_why_gpus")
    message = str(stopped.value)
    assert message.startswith("This needs a CUDA GPU, and none is usable: no NVIDIA driver: libcuda.so.1 missing.")
    assert "the kernel your teacher named" in message and "without a GPU" in message
    assert "Restart Kernel" in message  # the probe is cached in the kernel: a fixed seat needs a fresh one
    assert "environment.yml" not in message and "gpu extra" not in message  # the installer's advice is gone


def test_too_little_memory_says_to_shut_down_finished_kernels(one_gpu, needs_file):
    with pytest.raises(seat.SeatNotReady) as stopped:
        seat.check_gpu("06_ecg_pipeline", path=needs_file, free=(2 * GIB, 16 * GIB))
    message = str(stopped.value)
    assert "needs about" in message and "this process can use 2.0 GiB" in message
    assert "Shut Down All Kernels" in message and "%env GPU_INTEROP_SKIP_MEMORY_CHECK=1" in message
    assert "larger share" not in message  # the server's way out, not the participant's


def test_too_few_gpus_asks_for_the_teacher(one_gpu):
    # no chapter asks for more GPUs than a seat has today (chapter 7 asks for what it finds); if one does, the stop
    # is worded for a participant all the same
    with pytest.raises(seat.SeatNotReady, match="needs 2 GPUs and this machine has 1.*fewer GPUs.*tell your teacher"):
        seat.check_gpu("07_many_gpus", gpus=2)
    try:
        seat.check_gpu("07_many_gpus", gpus=2)
    except seat.SeatNotReady as stopped:
        assert "published outputs" not in str(stopped)  # the installer's way out is gone here too


def test_a_memory_read_the_driver_refuses_is_a_stop_too(one_gpu, needs_file, monkeypatch):
    def refused(*args, **kwargs):
        raise OSError("cuDevicePrimaryCtxRetain failed with CUDA_ERROR_OUT_OF_MEMORY")

    monkeypatch.setattr(env, "memory_this_process_sees", refused)
    with pytest.raises(seat.SeatNotReady, match="could not be read.*CUDA_ERROR_OUT_OF_MEMORY.*Shut Down All Kernels"):
        seat.check_gpu("06_ecg_pipeline", path=needs_file)


def test_a_file_the_check_cannot_read_is_not_called_the_seat_s_memory(one_gpu, tmp_path):
    with pytest.raises(IsADirectoryError):  # the needs file's path names a folder: the book's fault, not the seat's
        seat.check_gpu("06_ecg_pipeline", path=tmp_path, free=(60 * GIB, 80 * GIB))


def test_a_seat_that_can_run_the_chapter_gets_the_book_s_answer(one_gpu):
    assert seat.check_gpu("01_why_gpus", free=(60 * GIB, 80 * GIB)).name == "NVIDIA Test GPU"


def test_an_unknown_reason_keeps_the_message_and_asks_for_the_teacher():
    assert seat.for_participant("Something else went wrong") == ("Something else went wrong. " + seat.OTHER_ADVICE)


def test_every_chapter_of_the_edition_starts_with_the_seat_s_check():
    for path in workshop.participant_chapters(notebooks.chapter_notebooks()):
        book = nbformat.read(path, as_version=4)
        checks = [cell for cell in book.cells if cell.cell_type == "code" and "needs.check_gpu(" in cell.source]
        assert checks, f"{path.name} has no first check for the edition to word for a seat"
        edition = workshop.participant_notebook(book, path.name)
        sources = [cell.source for cell in edition.cells if cell.cell_type == "code"]
        assert not any("needs.check_gpu(" in source for source in sources), path.name
        assert any(source.startswith("from booktools import seat\n") for source in sources), path.name


def test_in_a_kernel_the_participant_reads_one_message_not_a_traceback(tmp_path):
    notebook = nbformat.v4.new_notebook()
    notebook.cells = [
        nbformat.v4.new_code_cell(
            "from support import env\n"
            "env._probe_once = lambda: env.GpuProbe(problem='no NVIDIA driver here')\n"  # a machine without a GPU
        ),
        nbformat.v4.new_code_cell(workshop.seat_check('from support import needs\nneeds.check_gpu("01_why_gpus")')),
    ]
    client = NotebookClient(notebook, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(ROOT)}})
    with pytest.raises(CellExecutionError):
        client.execute()
    error = next(o for o in notebook.cells[1].outputs if o.output_type == "error")
    assert error.ename == "SeatNotReady"
    assert len(error.traceback) == 1  # IPython printed _render_traceback_'s line in place of the frames
    assert error.traceback[0].startswith("SeatNotReady: This needs a CUDA GPU, and none is usable: no NVIDIA driver")
