"""booktools.mps on the CPU: a stand-in nvidia-cuda-mps-control records what it is asked; MPS must be stopped
on every path (success, failure, an exception) and never started twice."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import types
from pathlib import Path

import pytest

from booktools import mps, processes
from support.memory import guards, managed
from support.units import GIB

FAKE_CONTROL = """#!/bin/sh
# records each call; "get_server_list" succeeds only while the daemon "runs"
state="$(dirname "$0")/running"
if [ "$1" = "-d" ]; then echo "start" >> "$LOG"; touch "$state"; exit 0; fi
read line
echo "$line" >> "$LOG"
case "$line" in
  get_server_list) [ -f "$state" ] && exit 0 || exit 1 ;;
  quit) rm -f "$state" ;;
esac
exit 0
"""


@pytest.fixture
def control(tmp_path, monkeypatch) -> Path:
    path = tmp_path / "nvidia-cuda-mps-control"
    path.write_text(FAKE_CONTROL)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("LOG", str(tmp_path / "calls.log"))
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    return path


def calls(control: Path) -> list[str]:
    return (control.parent / "calls.log").read_text().split("\n")[:-1]


def test_the_command_runs_under_the_limit_and_mps_stops(control):
    status = mps.run_with_limit([sys.executable, "-c", "print('work')"], "16G")
    assert status == 0
    assert calls(control) == ["get_server_list", "start", "set_default_device_pinned_mem_limit 0 16G", "quit"]


def test_every_gpu_named_gets_the_limit_as_chapter_7_needs_on_two(control, capsys):
    assert mps.main(["--limit", "16G", "--device", "0", "--device", "1", "--", sys.executable, "-c", "0"]) == 0
    assert calls(control)[2:] == [
        "set_default_device_pinned_mem_limit 0 16G",
        "set_default_device_pinned_mem_limit 1 16G",
        "quit",
    ]
    assert "limited to 16G on GPUs 0, 1:" in capsys.readouterr().out


def test_the_command_learns_the_limit_and_the_gpus_limited(control):
    with mps.limited("16G", device=[1, 0]) as environment:
        assert environment[mps.LIMIT_VARIABLE] == "16G" and environment[mps.DEVICES_VARIABLE] == "1,0"
    with mps.limited("8G") as environment:
        assert environment[mps.DEVICES_VARIABLE] == "0"


def test_a_failing_command_returns_its_status_and_mps_still_stops(control):
    assert mps.run_with_limit([sys.executable, "-c", "raise SystemExit(3)"], "8192M", device=0) == 3
    assert calls(control)[-1] == "quit"


class Interrupted(mps.subprocess.Popen):
    """A process whose wait is cut by Ctrl-C, for the command run under MPS (not for MPS's own control calls)."""

    def wait(self, timeout=None):
        if timeout is None and self.args[0] == sys.executable:  # the command's wait: Ctrl-C arrives
            raise KeyboardInterrupt
        return super().wait(timeout)


def test_an_interruption_still_stops_mps(control, monkeypatch):
    monkeypatch.setattr(mps.subprocess, "Popen", Interrupted)
    with pytest.raises(KeyboardInterrupt):
        mps.run_with_limit([sys.executable, "-c", "pass"], "16G")
    assert calls(control)[-1] == "quit"


def test_an_interrupted_run_ends_in_one_line_not_a_traceback(control, monkeypatch, capsys):
    """The room's check on the H100 (runs/probes/room_check_*) ended its Ctrl-C in a KeyboardInterrupt traceback."""

    monkeypatch.setattr(mps.subprocess, "Popen", Interrupted)
    assert mps.main(["--limit", "16G", "--", sys.executable, "-c", "pass"]) == mps.INTERRUPTED == 130
    said = capsys.readouterr()
    assert "Traceback" not in said.err and said.err.strip() == "mps: interrupted"
    assert calls(control)[-1] == "quit" and "mps: MPS stopped" in said.out


def test_the_command_line_ends_as_the_signal_killed_it_so_a_shell_loop_stops(tmp_path):
    """After its cleanup, python -m booktools.mps dies by the signal that stopped it (bash stops a loop then)."""
    for status, expected in ((mps.INTERRUPTED, -signal.SIGINT), (mps.TERMINATED, -signal.SIGTERM), (2, 2), (0, 0)):
        ended = subprocess.run(
            [sys.executable, "-c", f"from booktools import mps; mps.end_as_signalled({status})"],
            cwd=Path(__file__).parents[1],
            check=False,
        )
        assert ended.returncode == expected, status


FAILING_START = FAKE_CONTROL.replace('touch "$state"; exit 0; fi', "echo no GPU >&2; exit 1; fi")
SLOW_START = FAKE_CONTROL.replace('touch "$state"; exit 0; fi', 'touch "$state"; kill -INT $PPID; sleep 1; exit 0; fi')


@pytest.fixture
def ctrl_c_raises():
    """Python's own Ctrl-C handler meanwhile. A shell starts a background job (``make test &``) with SIGINT ignored,
    and Python then keeps it ignored, so a Ctrl-C sent to the tests would do nothing; the handler before comes back
    after."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def test_a_start_that_failed_is_not_asked_to_quit_and_one_cut_short_is(control, ctrl_c_raises):
    control.write_text(FAILING_START)
    with pytest.raises(mps.MpsError, match="could not start MPS: no GPU"):
        mps.run_with_limit([sys.executable, "-c", "pass"], "16G")
    assert calls(control) == ["get_server_list", "start"]  # nothing started: no quit to wait on
    (control.parent / "calls.log").unlink()
    control.write_text(SLOW_START)  # Ctrl-C arrives while the daemon starts
    with pytest.raises(KeyboardInterrupt):
        mps.run_with_limit([sys.executable, "-c", "pass"], "16G")
    assert calls(control) == ["get_server_list", "start", "quit"]


def test_an_interrupted_command_finishes_stopping_before_mps_is_asked_to_quit(control, tmp_path):
    """A room stops its servers when told to; MPS quits only after (subprocess.run would kill it at 0.25 s)."""
    stopped = tmp_path / "stopped"
    slow_to_stop = (
        "import signal, sys, time\n"
        "def stop(*_):\n"
        f"    time.sleep(1.0); open({str(stopped)!r}, 'w').write('done'); sys.exit(0)\n"
        "signal.signal(signal.SIGTERM, stop)\n"
        "print('ready', flush=True)\n"
        "time.sleep(30)\n"
    )
    child = mps.subprocess.Popen([sys.executable, "-c", slow_to_stop], stdout=mps.subprocess.PIPE, text=True)
    assert child.stdout.readline().strip() == "ready"
    processes.let_it_stop(child, forward=True, grace=10)
    assert stopped.read_text() == "done" and child.returncode == 0
    stuck = mps.subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "print('ready', flush=True)\ntime.sleep(30)",
        ],
        stdout=mps.subprocess.PIPE,
        text=True,
    )
    assert stuck.stdout.readline().strip() == "ready"
    processes.let_it_stop(stuck, forward=True, grace=0.5)  # the control: one that ignores the signal is killed
    assert stuck.returncode == -9


def test_mps_already_running_is_refused_and_left_alone(control):
    (control.parent / "running").touch()
    with pytest.raises(mps.MpsError, match="already runs"):
        mps.run_with_limit([sys.executable, "-c", "pass"], "16G")
    assert calls(control) == ["get_server_list"]


def test_bad_arguments_are_named_before_anything_starts(monkeypatch, capsys):
    with pytest.raises(mps.MpsError, match="not '16GB'"):
        mps.run_with_limit(["true"], "16GB")
    with pytest.raises(mps.MpsError, match="give the command"):
        mps.run_with_limit([], "16G")
    monkeypatch.setenv("PATH", "/nonexistent")
    assert mps.main(["--limit", "16G", "--", "true"]) == 2
    assert "nvidia-cuda-mps-control is not on PATH" in capsys.readouterr().err


def test_the_guards_answer_for_the_share_a_process_sees():
    alone = dict(guards.decisions(free=78 * GIB, total=80 * GIB, environ={}))
    # under an MPS limit of 16 GB a client sees the card's total but only its share free (measured on the H100)
    shared = dict(guards.decisions(free=int(15.5 * GIB), total=int(79.2 * GIB), environ={}))
    default_jax = 'JAX with "preallocate 75 % (JAX\'s default)"'
    assert alone[default_jax] == "allowed" and alone["JAX with 'grow on demand'"] == "allowed"
    assert shared[default_jax].startswith("refused: ") and "but only 15.50 GiB is free" in shared[default_jax]
    assert shared["JAX with 'grow on demand'"] == "allowed"
    managed = [answer for question, answer in shared.items() if "managed" in question]
    assert len(managed) == 1 and managed[0].startswith("refused: a managed allocation of 23.25 GiB")
    assert alone["a managed allocation of 117.00 GiB"].startswith("refused")


def test_managed_memory_within_a_share_is_read_before_and_after_its_prefetch(monkeypatch):

    free = [10 * GIB]
    events = []

    def fake_array(shape, dtype):
        events.append(("allocate", shape))
        free[0] -= shape[0] * 4
        return types.SimpleNamespace(fill=lambda value: events.append(("fill", value)))

    monkeypatch.setattr(managed, "managed_array", fake_array)
    monkeypatch.setattr(managed, "prefetch", lambda array: events.append(("prefetch",)))
    rmm = types.ModuleType("rmm")
    rmm.mr = types.SimpleNamespace(available_device_memory=lambda: (free[0], 16 * GIB))
    cupy = types.ModuleType("cupy")
    cupy.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(deviceSynchronize=lambda: events.append(("sync",))))
    monkeypatch.setitem(sys.modules, "rmm", rmm)
    monkeypatch.setitem(sys.modules, "cupy", cupy)
    before, after = guards.managed_within_share(2 * GIB)
    assert (before, after) == (10 * GIB, 8 * GIB)
    assert [e[0] for e in events] == ["allocate", "prefetch", "fill", "sync"]  # read only once the pages are there


def test_mps_that_does_not_quit_in_time_is_named_and_the_signal_handler_restored(control, capsys):
    slow = control.read_text().replace("read line\n", 'read line\n[ "$line" = quit ] && sleep 3\n')
    control.write_text(slow)
    before = signal.getsignal(signal.SIGTERM)
    with mps.limited("16G", quit_timeout=0.5):
        pass
    assert "did not stop within 0.5 s, a CUDA process still runs under it" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGTERM) == before


def test_a_sigterm_is_told_from_ctrl_c_by_its_class_not_its_message(control, monkeypatch, capsys):
    class Terminated(mps.subprocess.Popen):
        def wait(self, timeout=None):
            if timeout is None and self.args[0] == sys.executable:
                raise processes.Terminated("any words")
            return super().wait(timeout)

    monkeypatch.setattr(mps.subprocess, "Popen", Terminated)
    assert mps.main(["--limit", "16G", "--", sys.executable, "-c", "pass"]) == mps.TERMINATED == 143
    assert calls(control)[-1] == "quit"


class FakePynvml(types.ModuleType):
    """nvidia-ml-py with two GPUs (one UUID as bytes, as older releases return it), and a shutdown that may fail."""

    class NVMLError(Exception):
        pass

    def __init__(self, *, shutdown_fails: bool = False):
        super().__init__("pynvml")
        self.uuids = [b"GPU-aaaa-1111", "GPU-aaab-2222"]
        self.shutdown_fails, self.open = shutdown_fails, 0

    def nvmlInit(self):  # noqa: N802 - NVML's own names
        self.open += 1

    def nvmlShutdown(self):  # noqa: N802
        self.open -= 1
        if self.shutdown_fails:
            raise self.NVMLError("shutdown failed")

    def nvmlDeviceGetCount(self):  # noqa: N802
        return len(self.uuids)

    def nvmlDeviceGetHandleByIndex(self, index):  # noqa: N802
        return index

    def nvmlDeviceGetUUID(self, handle):  # noqa: N802
        return self.uuids[handle]


def test_a_gpu_named_by_uuid_is_found_through_nvml_or_not_at_all(monkeypatch):
    fake = FakePynvml()
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    assert mps.index_of_uuid("GPU-aaaa") == 0 and mps.index_of_uuid("GPU-aaab-2222") == 1  # bytes and str
    assert mps.index_of_uuid("GPU-aaa") is None, "a prefix two GPUs share names neither"
    assert mps.index_of_uuid("GPU-ffff") is None and fake.open == 0, "NVML is shut down on every path"
    assert mps.nvml_index(1, {"CUDA_VISIBLE_DEVICES": "0,GPU-aaab"}) == 1
    monkeypatch.setitem(sys.modules, "pynvml", FakePynvml(shutdown_fails=True))
    assert mps.index_of_uuid("GPU-aaaa") == 0, "a failed shutdown neither raises nor replaces the answer"
