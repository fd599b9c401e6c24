"""booktools.rehearse on the CPU: the plan is checked before anything starts, every seat runs at once under a
stand-in MPS that is stopped on every path, a seat goes on after a failed chapter, and the record says it all."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace as Process

import nbformat
import pytest
from test_mps import calls, control  # noqa: F401 - the stand-in nvidia-cuda-mps-control fixture

from booktools import freshness, rehearse
from booktools.notebooks import NotebookFailed
from support import claims, env
from support.units import GIB

MACHINE = ("NVIDIA H100 80GB HBM3", "580.1", 80 * GIB)


def fake_seat(folder: Path, chapters, out: Path) -> list[str]:
    """A seat that 'runs' each chapter by checking its notebook is there; chapter 03 fails at seats 3 and up.
    It leaves the environment it saw beside its record."""
    code = f"""
import json, os, pathlib, sys
folder, seat = pathlib.Path({str(folder)!r}), int({folder.name[-2:]!r})
rows = []
for name in {list(chapters)!r}:
    there = (folder / (name + ".ipynb")).exists()
    fails = name.startswith("03") and seat >= 3
    rows.append(dict(chapter=name, passed=there and not fails, seconds=1.5 * seat,
                     error=None if there and not fails else "cell 7: AssertionError"))
out = pathlib.Path({str(out)!r})
out.write_text(json.dumps(dict(chapters=rows, peak=2**30 * seat)))
pathlib.Path(str(out) + ".env").write_text(json.dumps(dict(os.environ)))
"""
    return [sys.executable, "-c", code]


def hanging_seat(folder: Path, chapters, out: Path) -> list[str]:
    """A seat that finishes its first chapter, then hangs."""
    first = json.dumps({"chapters": [{"chapter": chapters[0], "passed": True, "seconds": 1.0}], "peak": None})
    code = f"import pathlib, time; pathlib.Path({str(out)!r}).write_text({first!r}); time.sleep(120)"
    return [sys.executable, "-c", code]


def test_a_plan_that_cannot_fit_is_refused_with_what_would_fit():
    with pytest.raises(rehearse.RehearsalError, match="at most 10G .* or use 5 seats"):
        rehearse.check_plan(8, "16G", 80 * GIB)
    with pytest.raises(rehearse.RehearsalError, match="at least one seat"):
        rehearse.check_plan(0, "16G", 80 * GIB)
    need = ("06_ecg_pipeline", int(13.7 * GIB))
    with pytest.raises(rehearse.RehearsalError, match="9G is below the 13.7 GiB that 06_ecg_pipeline .* at least 14G"):
        rehearse.check_plan(8, "9G", 80 * GIB, need)
    rehearse.check_plan(8, "9G", 80 * GIB)  # with the memory check skipped, there is no need to hold
    rehearse.check_plan(4, "16G", 80 * GIB, need)


def test_a_seats_gpu_memory_is_its_kernels_including_mps_clients():
    class FakeNvml:
        def nvmlDeviceGetHandleByIndex(self, index):
            return index

        def nvmlDeviceGetComputeRunningProcesses(self, handle):
            return [Process(pid=11, usedGpuMemory=GIB), Process(pid=99, usedGpuMemory=5 * GIB)]

        def nvmlDeviceGetMPSComputeRunningProcesses(self, handle):
            return [Process(pid=12, usedGpuMemory=2 * GIB), Process(pid=13, usedGpuMemory=None)]

    assert rehearse.seat_gpu_bytes(FakeNvml(), descendants={11, 12, 13}) == 3 * GIB  # not pid 99, another seat's
    assert rehearse.seat_gpu_bytes(FakeNvml(), descendants={7}) is None  # ids NVML cannot see: unread, not 0


class FakeCards:
    """``support.env.card_memory`` and ``support.env.probe_gpus`` on a machine of three GPUs of different sizes and
    loads, numbered as NVML numbers them (whatever CUDA_VISIBLE_DEVICES says); it keeps the indexes it was asked."""

    def __init__(self, *cards_gib: tuple[float, float]):
        self.cards = [(int(total * GIB), int(used * GIB)) for total, used in cards_gib]
        self.asked: list[int] = []

    def card_memory(self, device: int = 0):
        self.asked.append(device)
        if device >= len(self.cards):
            return None  # NVML has no such GPU
        total, used = self.cards[device]
        return env.CardMemory(used=used, free=total - used, total=total)

    def probe_gpus(self):
        gpus = tuple(env.Gpu(i, f"GPU of {t // GIB} GiB", t, (9, 0), 132) for i, (t, _) in enumerate(self.cards))
        return env.GpuProbe(gpus=gpus, driver_version="580.1")


@pytest.fixture
def cards(monkeypatch) -> FakeCards:
    """GPU 0 of 80 GiB with 70 in use, GPU 1 of 40 GiB with 12 in use, GPU 2 of 24 GiB with 3 in use."""
    fake = FakeCards((80, 70), (40, 12), (24, 3))
    monkeypatch.setattr(env, "card_memory", fake.card_memory)
    monkeypatch.setattr(env, "probe_gpus", fake.probe_gpus)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(rehearse.mps, "index_of_uuid", {"GPU-2a": 2}.get)  # NVML's answer for the one UUID it knows
    return fake


def test_the_gpu_a_rehearsal_reads_is_the_one_mps_limits_not_gpu_0(cards, control):  # noqa: F811
    assert rehearse.this_gpu() == ("GPU of 80 GiB", "580.1", 80 * GIB) and cards.asked == [0]
    assert rehearse.this_gpu(1) == ("GPU of 40 GiB", "580.1", 40 * GIB) and cards.asked[-1] == 1
    # CUDA_VISIBLE_DEVICES=2,0 and device 0: MPS limits the machine's GPU 2, which NVML numbers 2 and CUDA 0
    assert rehearse.this_gpu(0, {"CUDA_VISIBLE_DEVICES": "2,0"})[2] == 24 * GIB and cards.asked[-1] == 2
    # a GPU named by UUID, as NVIDIA's MPS documentation recommends: NVML finds its index
    assert rehearse.this_gpu(0, {"CUDA_VISIBLE_DEVICES": "GPU-2a"})[2] == 24 * GIB and cards.asked[-1] == 2
    with pytest.raises(rehearse.RehearsalError, match=r"GPU 0.*cannot be read \(CUDA_VISIBLE_DEVICES=GPU-8f1c names"):
        rehearse.this_gpu(0, {"CUDA_VISIBLE_DEVICES": "GPU-8f1c"})
    with pytest.raises(rehearse.RehearsalError, match="no GPU 5 to rehearse on: CUDA sees 3"):
        rehearse.this_gpu(5)
    # the plan is checked against GPU 1's 40 GiB, not GPU 0's 80, before MPS starts
    with pytest.raises(rehearse.RehearsalError, match="4 seats of 16G need 64.0 GiB and this GPU has 40.0 GiB"):
        rehearse.rehearse("two-hours", 4, "16G", device=1, memory_check=False, command=fake_seat, log=lambda s: None)
    assert not (control.parent / "calls.log").exists()


def test_a_seats_gpu_memory_is_read_on_the_gpus_mps_limits(monkeypatch):
    monkeypatch.setattr(rehearse.mps, "index_of_uuid", {"GPU-2a": 2}.get)

    class FakeNvml:  # pid 11 holds 1 GiB on NVML's GPU 0 and 4 GiB on its GPU 2
        def nvmlDeviceGetHandleByIndex(self, index):
            return index

        def nvmlDeviceGetComputeRunningProcesses(self, handle):
            return [Process(pid=11, usedGpuMemory={0: GIB, 2: 4 * GIB}.get(handle, 0))]

    variable = rehearse.mps.DEVICES_VARIABLE
    assert rehearse.limited_indexes({}) == [0]  # outside MPS, or booktools.mps's default
    assert rehearse.limited_indexes({variable: "1"}) == [1]
    assert rehearse.limited_indexes({variable: "0", "CUDA_VISIBLE_DEVICES": "2,0"}) == [2]
    assert rehearse.limited_indexes({variable: "0,1", "CUDA_VISIBLE_DEVICES": "GPU-8f1c,0"}) == [0]
    assert rehearse.limited_indexes({variable: "0,1", "CUDA_VISIBLE_DEVICES": "GPU-2a,0"}) == [2, 0]
    assert rehearse.seat_gpu_bytes(FakeNvml(), descendants={11}, indexes=[2]) == 4 * GIB
    assert rehearse.seat_gpu_bytes(FakeNvml(), descendants={11}, indexes=[0, 2]) == 5 * GIB
    assert rehearse.seat_gpu_bytes(FakeNvml(), descendants={11}, indexes=[]) is None


@pytest.mark.slow
def test_a_rehearsal_records_the_total_and_peak_of_the_gpu_it_limits(cards, control):  # noqa: F811
    done = rehearse.rehearse(
        "two-hours", 2, "16G", chapters=["00_getting_started"], device=1, command=fake_seat, log=lambda s: None
    )
    assert calls(control)[2] == "set_default_device_pinned_mem_limit 1 16G"
    assert (done.gpu, done.gpu_total_bytes, done.gpu_peak_bytes) == ("GPU of 40 GiB", 40 * GIB, 12 * GIB)
    assert set(cards.asked) == {1}  # NVML's GPU 0 never read
    assert "GPU peak 12.0 GiB of 40.0 GiB" in done.summary()
    newest = rehearse.records.load(rehearse.records.REHEARSALS)[-1]  # what the teachers' page reads: same fields
    assert set(rehearse.asdict(done)) - {"number"} == set(newest) and type(newest["gpu_total_bytes"]) is int


@pytest.mark.slow
def test_every_seat_runs_the_agenda_at_once_as_a_participant_and_mps_stops(control, monkeypatch):  # noqa: F811
    monkeypatch.setenv("PYTHONPATH", "/the/repository")
    done = rehearse.rehearse(
        "two-hours", 4, "16G", machine=lambda: MACHINE, command=fake_seat, read_gpu=lambda: 30 * GIB, log=lambda s: None
    )
    assert calls(control) == ["get_server_list", "start", "set_default_device_pinned_mem_limit 0 16G", "quit"]
    assert [seat.edition for seat in done.seats] == ["teacher", "participant", "participant", "participant"]
    assert [c.chapter for c in done.seats[0].chapters] == rehearse.teaching.agenda("two-hours") == done.chapters
    assert done.passed_seats == 1 and done.seats[2].chapters[2].error == "cell 7: AssertionError"
    assert done.seats[3].peak_bytes == 4 * GIB and done.gpu_peak_bytes == 30 * GIB
    assert done.summary().startswith(
        "two-hours (4 chapters: 00_getting_started, 01_why_gpus, 03_zero_copy, 06_ecg_pipeline), 4 seats of 16G on "
        "NVIDIA H100 80GB HBM3: 1 of 3 participant seats passed every chapter; the teacher's seat passed"
    )
    assert done.cells == {chapter: rehearse.code_of(chapter) for chapter in done.chapters} and done.versions() == ""
    assert all(done.cells.values())  # every chapter's code found, as the seats got it


@pytest.mark.slow
def test_a_rehearsal_records_each_chapters_code_as_the_seats_got_it_not_as_it_is_after(control, monkeypatch):  # noqa: F811
    started = []

    def seat(folder, chapters, out):
        started.append(folder)
        return fake_seat(folder, chapters, out)

    # the code a chapter has changes while the seats run (a teacher edits it): the record keeps what the seats got
    monkeypatch.setattr(rehearse, "code_of", lambda chapter, folder=None: "edited" if started else "as given")
    done = rehearse.rehearse(
        "two-hours", 2, "16G", machine=lambda: MACHINE, command=seat, read_gpu=lambda: 30 * GIB, log=lambda s: None
    )
    assert started and set(done.cells.values()) == {"as given"}


@pytest.mark.slow
def test_a_seat_sees_a_participants_environment(control, monkeypatch, tmp_path):  # noqa: F811
    """No PYTHONPATH into the repository, JAX without preallocation, the limit named, the check as asked."""
    monkeypatch.setenv("PYTHONPATH", "/the/repository")
    kept, real = tmp_path / "env.json", rehearse.read_seat

    def read_and_keep(out, *args):  # the seat's environment file, before the scratch folder goes
        kept.write_text(Path(str(out) + ".env").read_text())
        return real(out, *args)

    monkeypatch.setattr(rehearse, "read_seat", read_and_keep)
    rehearse.rehearse(
        "two-hours",
        1,
        "16G",
        chapters=["00_getting_started"],
        memory_check=False,
        machine=lambda: MACHINE,
        command=fake_seat,
        read_gpu=lambda: None,
        log=lambda s: None,
    )
    environment = json.loads(kept.read_text())
    assert "PYTHONPATH" not in environment and environment["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"
    assert environment["GPU_INTEROP_SKIP_MEMORY_CHECK"] == "1" and environment["GPU_INTEROP_MPS_LIMIT"] == "16G"


@pytest.mark.slow
def test_a_seat_past_its_time_is_stopped_and_keeps_what_it_finished(control):  # noqa: F811
    started = time.monotonic()
    done = rehearse.rehearse(
        "two-hours",
        1,
        "16G",
        timeout_s=1,
        machine=lambda: MACHINE,
        command=hanging_seat,
        read_gpu=lambda: None,
        log=lambda s: None,
    )
    assert time.monotonic() - started < 30 and calls(control)[-1] == "quit"
    chapters = done.seats[0].chapters
    assert chapters[0].passed and [c.error for c in chapters[1:]] == ["not finished within 1 s"] * 3


def test_a_chapter_outside_the_agenda_is_refused(control):  # noqa: F811
    with pytest.raises(rehearse.RehearsalError, match="not in the agenda two-hours: 05_unified_memory"):
        rehearse.rehearse("two-hours", 1, "16G", chapters=["05_unified_memory"], machine=lambda: MACHINE)


def test_a_book_that_is_not_installed_is_named_before_any_seat_starts(control, monkeypatch):  # noqa: F811
    monkeypatch.setattr(rehearse.sys, "executable", "/bin/false")
    with pytest.raises(rehearse.RehearsalError, match="cannot import the book outside its repository"):
        rehearse.rehearse("two-hours", 1, "16G", machine=lambda: MACHINE, command=fake_seat, log=lambda s: None)
    assert calls(control)[-1] == "quit"


@pytest.mark.slow
def test_the_seat_command_executes_real_notebooks_and_goes_on_after_a_failure(tmp_path):
    for name, code in (("01_a", "print('fine')"), ("02_b", "raise ValueError('broken')"), ("03_c", "x = 1")):
        chapter = nbformat.v4.new_notebook()
        chapter.cells.append(nbformat.v4.new_code_cell(code))
        nbformat.write(chapter, tmp_path / f"{name}.ipynb")
    out = tmp_path / "seat.json"
    command = rehearse.seat_command(tmp_path, ["01_a", "02_b", "03_c"], out)
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr
    seat = rehearse.read_seat(out, 1, "participant", ["01_a", "02_b", "03_c"], "never")
    assert [(c.chapter, c.passed) for c in seat.chapters] == [("01_a", True), ("02_b", False), ("03_c", True)]
    assert "ValueError: broken" in seat.chapters[1].error and (tmp_path / "02_b.failed.ipynb").exists()
    rehearse.keep_failed([(tmp_path, "participant")], tmp_path / "kept")
    assert (tmp_path / "kept" / tmp_path.name / "02_b.failed.ipynb").exists()


def test_the_teachers_seat_has_the_solutions_and_the_others_do_not(tmp_path):
    folders = rehearse.prepare_seats(["03_zero_copy"], 2, tmp_path)
    teacher, participant = (nbformat.read(folder / "03_zero_copy.ipynb", as_version=4) for folder, _ in folders)
    assert [kind for _, kind in folders] == ["teacher", "participant"]
    assert any("solution-start" in cell.source for cell in teacher.cells)
    assert not any("solution-start" in cell.source for cell in participant.cells)
    assert (folders[1][0] / "diagrams" / "dlpack_handshake.png").exists()


def test_a_seat_goes_on_after_a_failed_chapter_or_a_dead_kernel(tmp_path):
    def execute(path: Path) -> None:
        if path.stem == "01_b":
            raise NotebookFailed(f"{path}: 1 cell(s) failed, outputs in x:\ncell 4: OutOfMemoryError: 2 GiB", path)
        if path.stem == "02_c":
            raise RuntimeError("Kernel died before replying to kernel_info")

    out = tmp_path / "seat.json"
    results, peak = rehearse.run_seat(
        tmp_path, ["00_a", "01_b", "02_c", "03_d"], out=out, execute=execute, read=lambda: None
    )
    assert [(r.chapter, r.passed, r.error) for r in results] == [
        ("00_a", True, None),
        ("01_b", False, "cell 4: OutOfMemoryError: 2 GiB"),
        ("02_c", False, "RuntimeError: Kernel died before replying to kernel_info"),
        ("03_d", True, None),
    ]
    assert peak is None and len(json.loads(out.read_text())["chapters"]) == 4


@pytest.mark.slow
def test_a_seat_that_cannot_start_still_stops_mps(control):  # noqa: F811
    with pytest.raises(FileNotFoundError):
        rehearse.rehearse(
            "two-hours",
            1,
            "16G",
            machine=lambda: MACHINE,
            command=lambda folder, chapters, out: ["/no/such/python"],
            read_gpu=lambda: None,
            log=lambda s: None,
        )
    assert calls(control)[-1] == "quit"


def test_records_are_appended_and_read_back(tmp_path):
    seat = rehearse.Seat(1, "teacher", [rehearse.ChapterAtSeat("00_a", True, 3.0)], GIB)
    made = rehearse.Rehearsal("two-hours", "16G", *MACHINE, "2026-11-24", 60.0, 20 * GIB, [seat], ["00_a"])
    rehearse.record(made, tmp_path / "r.json")
    assert made.number == 1 and made.name == "rehearsal 1"  # what the command prints after names the record
    rehearse.record(made, tmp_path / "r.json")
    assert made.number == 2
    loaded = rehearse.load(tmp_path / "r.json")
    assert [r.number for r in loaded] == [1, 2]
    assert [asdict(r) | {"number": None} for r in loaded] == [asdict(made) | {"number": None}] * 2
    assert json.loads((tmp_path / "r.json").read_text())["rehearsals"][0]["seats"][0]["edition"] == "teacher"


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--agenda", "a-week"], "no agenda 'a-week': choose one of two-hours, half-day, full-day"),
        (["--limit", "16GB"], "not '16GB'"),
    ],
)
def test_bad_input_is_one_sentence_and_exit_status_2(argv, said, capsys, monkeypatch):
    monkeypatch.setattr(rehearse, "this_gpu", lambda device=0: MACHINE)
    assert rehearse.main(argv) == 2
    assert said in capsys.readouterr().err


def test_a_seat_with_two_kernels_runs_two_chapters_at_once_and_reports_in_agenda_order(tmp_path):
    running, most, lock = set(), [0], threading.Lock()
    waits = {"00_a": 0.6, "01_b": 0.1, "02_c": 0.3, "03_d": 0.1}

    def execute(path: Path) -> None:
        with lock:
            running.add(path.stem)
            most[0] = max(most[0], len(running))
        time.sleep(waits[path.stem])
        with lock:
            running.discard(path.stem)
        if path.stem == "02_c":
            raise RuntimeError("CUDA out of memory")

    out = tmp_path / "seat.json"
    results, _ = rehearse.run_seat(tmp_path, list(waits), out=out, execute=execute, read=lambda: None, kernels=2)
    assert most[0] == 2  # never more, and at some point both
    assert [(r.chapter, r.passed) for r in results] == [("00_a", True), ("01_b", True), ("02_c", False), ("03_d", True)]
    written = json.loads(out.read_text())
    assert [c["chapter"] for c in written["chapters"]] == list(waits)
    seat = rehearse.read_seat(out, 4, "participant", list(waits), "never", 2)
    assert max(waits.values()) <= seat.seconds == written["wall"] < sum(c.seconds for c in seat.chapters)
    most[0] = 0
    one_at_a_time, _ = rehearse.run_seat(tmp_path, ["01_b", "03_d"], execute=execute, read=lambda: None)
    assert [r.chapter for r in one_at_a_time] == ["01_b", "03_d"] and most[0] == 1
    with pytest.raises(rehearse.RehearsalError, match="at least one kernel, not 0"):
        rehearse.run_seat(tmp_path, ["01_b"], execute=execute, read=lambda: None, kernels=0)


def test_the_last_seat_can_hold_two_kernels_and_the_record_says_so(control, monkeypatch):  # noqa: F811
    asked, said = [], []

    def seat(folder, chapters, out, kernels=1):
        asked.append(kernels)
        return fake_seat(folder, chapters, out)

    def rehearse_two_kernels(seats, **more):
        asked.clear()
        return rehearse.rehearse(
            "two-hours",
            seats,
            "16G",
            two_kernels=True,
            machine=lambda: MACHINE,
            command=seat,
            read_gpu=lambda: None,
            log=said.append,
            **more,
        )

    done = rehearse_two_kernels(3)
    assert asked == [1, 1, 2] and [s.kernels for s in done.seats] == [1, 1, 2]
    assert said[-1].endswith("one share each: 4 shares of 16G, 64.0 GiB of the card's 80.0 GiB")
    assert "; seat 3 ran 2 kernels at once and FAILED" in done.summary()  # the fake fails chapter 03 at seat 3
    assert rehearse.seat_command(Path("f"), ["00_a"], Path("o"), kernels=2)[-3:] == ["--kernels", "2", "00_a"]
    assert "--kernels" not in rehearse.seat_command(Path("f"), ["00_a"], Path("o"))
    rehearse_two_kernels(5)
    assert asked[-1] == 2 and said[-1].endswith("96.0 GiB of the card's 80.0 GiB (more than the card holds)")
    one = rehearse_two_kernels(2, chapters=["00_getting_started"])
    assert asked == [1, 1] and "kernels at once" not in one.summary()  # one chapter: one kernel


def test_records_from_before_two_kernel_seats_read_as_one_kernel_each():
    old = {"seat": 1, "edition": "teacher", "chapters": [], "peak_bytes": None}
    data = {
        "agenda": "two-hours", "limit": "16G", "gpu": "H100", "driver": "580", "gpu_total_bytes": 80 * GIB,
        "date": "2026-11-24", "wall_seconds": 1.0, "gpu_peak_bytes": None, "seats": [old],
    }  # fmt: skip
    seat = rehearse.Rehearsal.from_dict(data).seats[0]
    assert seat.kernels == 1 and seat.wall_seconds is None and seat.seconds == 0.0  # the sum of no chapters


@pytest.mark.slow
def test_the_seat_command_runs_real_notebooks_two_at_a_time(tmp_path):
    for name in ("01_a", "02_b"):
        chapter = nbformat.v4.new_notebook()
        span = f"pathlib.Path('{name}.span').write_text(f'{{start}} {{time.time()}}')"
        code = f"import pathlib, time\nstart = time.time()\ntime.sleep(3)\n{span}"
        chapter.cells.append(nbformat.v4.new_code_cell(code))
        nbformat.write(chapter, tmp_path / f"{name}.ipynb")
    out = tmp_path / "seat.json"
    command = rehearse.seat_command(tmp_path, ["01_a", "02_b"], out, kernels=2)
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    (a0, a1), (b0, b1) = ([float(x) for x in (tmp_path / f"{n}.span").read_text().split()] for n in ("01_a", "02_b"))
    assert max(a0, b0) < min(a1, b1)  # the two kernels ran at the same time
    assert all(c.passed for c in rehearse.read_seat(out, 1, "participant", ["01_a", "02_b"], "never", 2).chapters)


def test_the_summary_tells_claims_that_did_not_hold_from_other_errors():
    """A teacher reads the kinds differently: a claim measured the room's contention too, a chapter not finished
    says the rehearsal ran out of time, another error is one to fix."""
    stopped = "cell 99: ClaimError: ecg.read_to_plot_warm does not hold: 0.529, needs at most 0.5; the earlier"
    seats = [
        rehearse.Seat(1, "teacher", [rehearse.ChapterAtSeat("06_ecg_pipeline", False, 9.0, stopped)]),
        rehearse.Seat(2, "participant", [rehearse.ChapterAtSeat("06_ecg_pipeline", False, 9.0, stopped)]),
        rehearse.Seat(3, "participant", [rehearse.ChapterAtSeat("03_zero_copy", False, 1.0, "cell 4: CUDAError")]),
        rehearse.Seat(4, "participant", [rehearse.ChapterAtSeat("03_zero_copy", False, 0.0, "not finished within 9")]),
    ]
    done = rehearse.Rehearsal("two-hours", "16G", "H100", "580", 80 * GIB, "2026-11-26", 9.0, None, seats)
    assert done.what_failed() == (
        "; claims that did not hold: ecg.read_to_plot_warm at 2 seats; 1 chapter not finished; "
        "1 chapter stopped at another error"
    )
    assert done.summary().endswith(done.what_failed() + done.versions())
    seats[2].chapters[0] = seats[3].chapters[0] = rehearse.ChapterAtSeat("03_zero_copy", True, 1.0)
    assert done.what_failed() == "; claims that did not hold: ecg.read_to_plot_warm at 2 seats"  # no empty kinds
    for seat in seats:
        seat.chapters = [rehearse.ChapterAtSeat("00_getting_started", True, 1.0)]
    assert done.what_failed() == ""  # every chapter passed: nothing added to the summary


def test_a_real_claims_error_is_read_as_the_claim_and_its_figure():
    """The seat's error is ``cell N: ClaimError: <message>`` (booktools.notebooks); the message is support.claims'
    own, so a change to its wording fails here rather than turning every claim into another error."""
    for make_claim, name, figure in (
        (
            lambda: claims.at_most("ecg.warm", 0.529, 0.5, says="fast", control=1.5, control_is="before"),
            "ecg.warm",
            "0.529",
        ),
        (
            lambda: claims.beats(
                "interop.polars",
                0.115,
                0.0877,
                unit="s",
                higher_is_better=False,
                by=1.0,
                control_is="the GPU engine",
                says="the CPU wins",
            ),  # fmt: skip
            "interop.polars",
            "115 ms against 87.7 ms",
        ),
    ):
        with pytest.raises(claims.ClaimError) as raised:
            make_claim()
        chapter = rehearse.ChapterAtSeat("06", False, 1.0, f"cell 1: ClaimError: {raised.value}")
        assert chapter.failed_claim == name and chapter.claim_figure == figure
    cut = rehearse.ChapterAtSeat("06", False, 1.0, "cell 1: ClaimError: a.b does not hold")
    assert cut.failed_claim == "a.b" and cut.claim_figure is None  # cut before its figure
    assert rehearse.ChapterAtSeat("06", False, 1.0, "interrupted").never_finished


def test_a_rehearsal_says_which_chapters_ran_an_earlier_version_or_an_unrecorded_one(tmp_path):
    for name, code in (("00_a", "x = 1"), ("01_b", "y = 2")):
        chapter = nbformat.v4.new_notebook()
        chapter.cells.append(nbformat.v4.new_code_cell(code))
        nbformat.write(chapter, tmp_path / f"{name}.ipynb")
    now = {name: rehearse.code_of(name, tmp_path) for name in ("00_a", "01_b")}
    seat = rehearse.Seat(1, "teacher", [rehearse.ChapterAtSeat("00_a", True, 3.0)], GIB)
    made = rehearse.Rehearsal("two-hours", "16G", *MACHINE, "2026-11-26", 60.0, None, [seat], ["00_a", "01_b"])
    assert made.versions(tmp_path) == "; which version of 00_a, 01_b ran is not recorded"  # a record from before
    made.cells = dict(now)
    assert made.versions(tmp_path) == ""
    edited = nbformat.read(tmp_path / "01_b.ipynb", as_version=4)
    edited.cells[0].source = "y = 3"
    nbformat.write(edited, tmp_path / "01_b.ipynb")
    assert made.versions(tmp_path) == "; ran an earlier version of 01_b (its code cells changed since)"
    rehearse.record(made, tmp_path / "r.json")
    assert rehearse.load(tmp_path / "r.json")[0].cells == now
    made.cells = {"00_a": None, "01_b": now["01_b"]}  # a notebook that was not there when it ran
    assert (
        made.versions(tmp_path)
        == "; ran an earlier version of 01_b (its code cells changed since); which version of 00_a ran is not recorded"
    )


def test_a_chapters_recorded_code_covers_the_support_files_its_fingerprint_lists(tmp_path):
    """A chapter's code lives in the support/ files it imports too: a change there makes a rehearsal of it one of
    an earlier version, though its cells are the same; a support file it does not list does not."""
    folder, support = tmp_path / "chapters", tmp_path / "support"
    folder.mkdir()
    support.mkdir()
    (support / "a.py").write_text("def f():\n    return 1\n")
    (support / "other.py").write_text("x = 1\n")
    chapter = nbformat.v4.new_notebook()
    chapter.cells.append(nbformat.v4.new_code_cell("from support.a import f"))
    chapter.metadata["book"] = {"fingerprint": {"support": {"support/a.py": "whatever"}, "cells": ""}}
    nbformat.write(chapter, folder / "06_e.ipynb")
    seat = rehearse.Seat(1, "teacher", [rehearse.ChapterAtSeat("06_e", True, 3.0)], GIB)
    made = rehearse.Rehearsal("two-hours", "16G", *MACHINE, "2026-11-26", 60.0, None, [seat], ["06_e"])
    made.cells = {"06_e": rehearse.code_of("06_e", folder)}
    made.support = {"06_e": rehearse.support_of("06_e", folder)}
    assert made.versions(folder) == "" and made.ran_current("06_e", folder)
    (support / "a.py").write_text('def f():\n    "Now documented."\n    return 1  # the same code\n')
    (support / "other.py").write_text("x = 2\n")  # not the chapter's
    assert made.versions(folder) == ""  # a docstring, a comment, another chapter's file: the same code
    (support / "a.py").write_text("def f():\n    return 2\n")
    assert made.versions(folder) == "; ran an earlier version of 06_e (its support files changed since)"
    assert made.ran_current("06_e", folder) is False
    made.cells = {}  # cells unrecorded, support recorded and changed: an earlier version whatever its cells were
    assert made.ran_current("06_e", folder) is False
    made.support = {}
    assert made.ran_current("06_e", folder) is None
    assert made.versions(folder) == "; which version of 06_e ran is not recorded"
    made.cells = {"06_e": rehearse.code_of("06_e", folder)}
    made.support = {"07_other": "abc"}  # the record keeps support files, but left this chapter's out: unknown
    assert made.ran_current("06_e", folder) is None
    made.support = {}
    rehearse.record(made, tmp_path / "r.json")
    assert '"number"' not in (tmp_path / "r.json").read_text()  # its place in the file is not written into it
    assert [r.name for r in rehearse.load(tmp_path / "r.json")] == ["rehearsal 1"]


def test_a_chapters_recorded_code_covers_what_only_its_fresh_processes_run(tmp_path):
    """Chapter 6 times its command line in fresh processes the kernel never imports: the notebook names those files
    (booktools.freshness.CHILD_KEY), and a change to one makes a rehearsal of the chapter an earlier version."""
    folder, support = tmp_path / "chapters", tmp_path / "support"
    folder.mkdir()
    support.mkdir()
    (support / "cli.py").write_text("def main():\n    return 0\n")
    chapter = nbformat.v4.new_notebook()
    chapter.cells.append(nbformat.v4.new_code_cell("import subprocess"))
    chapter.metadata["book"] = {"fingerprint": {"support": {}, "cells": ""}, freshness.CHILD_KEY: ["support/cli.py"]}
    nbformat.write(chapter, folder / "06_e.ipynb")
    seat = rehearse.Seat(1, "teacher", [rehearse.ChapterAtSeat("06_e", True, 3.0)], GIB)
    made = rehearse.Rehearsal("two-hours", "16G", *MACHINE, "2026-11-26", 60.0, None, [seat], ["06_e"])
    made.cells = {"06_e": rehearse.code_of("06_e", folder)}
    made.support = {"06_e": rehearse.support_of("06_e", folder)}
    assert made.ran_current("06_e", folder)
    (support / "cli.py").write_text("def main():\n    return 2\n")
    assert made.ran_current("06_e", folder) is False
