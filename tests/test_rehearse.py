"""booktools.rehearse on the CPU: the plan is checked before anything starts, every seat runs at once under a
stand-in MPS that is stopped on every path, a seat goes on after a failed chapter, and the record says it all."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import nbformat
import pytest
from test_mps import calls, control  # noqa: F401 - the stand-in nvidia-cuda-mps-control fixture

from booktools import rehearse
from booktools.notebooks import NotebookFailed
from support.units import GIB

MACHINE = ("NVIDIA H100 80GB HBM3", "580.1", 80 * GIB)


def fake_seat(folder: Path, chapters, out: Path) -> list[str]:
    """A seat that 'runs' each chapter by checking its notebook is there; chapter 03 fails at seats 3 and up."""
    code = f"""
import json, pathlib, sys
folder, seat = pathlib.Path({str(folder)!r}), int({folder.name[-2:]!r})
rows = []
for name in {list(chapters)!r}:
    there = (folder / (name + ".ipynb")).exists()
    fails = name.startswith("03") and seat >= 3
    rows.append(dict(chapter=name, passed=there and not fails, seconds=1.5 * seat,
                     error=None if there and not fails else "cell 7: AssertionError"))
pathlib.Path({str(out)!r}).write_text(json.dumps(dict(chapters=rows, peak=2**30 * seat)))
"""
    return [sys.executable, "-c", code]


def test_a_plan_that_cannot_fit_is_refused_with_what_would_fit():
    with pytest.raises(rehearse.RehearsalError, match="at most 10G .* or use 5 seats"):
        rehearse.check_plan(8, "16G", 80 * GIB)
    with pytest.raises(rehearse.RehearsalError, match="at least one seat"):
        rehearse.check_plan(0, "16G", 80 * GIB)
    rehearse.check_plan(8, "9G", 80 * GIB)


def test_every_seat_runs_the_agenda_at_once_and_mps_stops(control):  # noqa: F811
    done = rehearse.rehearse(
        "two-hours", 4, "9G", machine=lambda: MACHINE, command=fake_seat, read_gpu=lambda: 30 * GIB, log=lambda s: None
    )
    assert calls(control) == ["get_server_list", "start", "set_default_device_pinned_mem_limit 0 9G", "quit"]
    assert [seat.edition for seat in done.seats] == ["teacher", "participant", "participant", "participant"]
    assert [c.chapter for c in done.seats[0].chapters] == rehearse.teaching.agenda("two-hours")
    assert done.passed_seats == 2 and done.seats[2].chapters[2].error == "cell 7: AssertionError"
    assert done.seats[3].peak_bytes == 4 * GIB and done.gpu_peak_bytes == 30 * GIB
    assert done.summary().startswith("two-hours, 4 seats of 9G on NVIDIA H100 80GB HBM3: 2 passed every chapter")


def test_the_teachers_seat_has_the_solutions_and_the_others_do_not(tmp_path):
    folders = rehearse.prepare_seats(["03_zero_copy"], 2, tmp_path)
    teacher, participant = (nbformat.read(folder / "03_zero_copy.ipynb", as_version=4) for folder, _ in folders)
    assert [kind for _, kind in folders] == ["teacher", "participant"]
    assert any("solution-start" in cell.source for cell in teacher.cells)
    assert not any("solution-start" in cell.source for cell in participant.cells)
    assert (folders[1][0] / "diagrams" / "dlpack_handshake.png").exists()


def test_a_seat_goes_on_after_a_failed_chapter(tmp_path):
    def execute(path: Path) -> None:
        if path.stem == "01_b":
            raise NotebookFailed(f"{path}: 1 cell(s) failed, outputs in x:\ncell 4: OutOfMemoryError: 2 GiB", path)

    results, peak = rehearse.run_seat(tmp_path, ["00_a", "01_b", "02_c"], execute=execute, read=lambda: None)
    assert [(r.chapter, r.passed, r.error) for r in results] == [
        ("00_a", True, None),
        ("01_b", False, "cell 4: OutOfMemoryError: 2 GiB"),
        ("02_c", True, None),
    ]
    assert peak is None


def test_a_seat_that_cannot_start_still_stops_mps(control):  # noqa: F811
    with pytest.raises(FileNotFoundError):
        rehearse.rehearse(
            "two-hours",
            1,
            "9G",
            machine=lambda: MACHINE,
            command=lambda folder, chapters, out: ["/no/such/python"],
            read_gpu=lambda: None,
            log=lambda s: None,
        )
    assert calls(control)[-1] == "quit"


def test_records_are_appended_and_read_back(tmp_path):
    seat = rehearse.Seat(1, "teacher", [rehearse.ChapterAtSeat("00_a", True, 3.0)], GIB)
    made = rehearse.Rehearsal("two-hours", "9G", *MACHINE, "2026-11-24", 60.0, 20 * GIB, [seat])
    rehearse.record(made, tmp_path / "r.json")
    rehearse.record(made, tmp_path / "r.json")
    assert rehearse.load(tmp_path / "r.json") == [made, made]
    assert json.loads((tmp_path / "r.json").read_text())["rehearsals"][0]["seats"][0]["edition"] == "teacher"


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--agenda", "a-week"], "no agenda 'a-week': choose one of two-hours, half-day, full-day"),
        (["--limit", "16GB"], "not '16GB'"),
    ],
)
def test_bad_input_is_one_sentence_and_exit_status_2(argv, said, capsys, monkeypatch):
    monkeypatch.setattr(rehearse, "this_gpu", lambda: MACHINE)
    assert rehearse.main(argv) == 2
    assert said in capsys.readouterr().err
