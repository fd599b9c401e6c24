"""booktools.room on the CPU: the seats' folders (an existing seat's work untouched), each seat's server command,
the refusals, the one-kernel decision, and the wait-and-stop loop with stand-in servers."""

from __future__ import annotations

import asyncio
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import nbformat
import pytest

from booktools import room, workshop


@pytest.fixture
def edition(tmp_path) -> Path:
    """A participant edition as booktools.workshop writes one: a chapter, its README and check_setup.py."""
    folder = tmp_path / "workshop"
    folder.mkdir()
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")]), folder / "00_start.ipynb")
    (folder / "README.md").write_text(workshop.readme(["00_start"], None))
    (folder / "check_setup.py").write_text(workshop.SETUP_SCRIPT.format(chapters=["00_start"]))
    return folder


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def sleeper(started: list):
    """A launcher whose 'server' sleeps: what the wait-and-stop loop stops."""

    def launch(seat, command, environment, logs):
        started.append((seat, command, environment))
        return subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True, cwd=seat.folder
        )

    return launch


def test_each_seat_gets_its_own_port_folder_and_token(edition, tmp_path):
    seats = room.plan_seats(edition, tmp_path / "room", 3, 8801, {})
    commands = [room.server_command(seat, ip="0.0.0.0", cull_after=600) for seat in seats]
    assert [seat.port for seat in seats] == [8801, 8802, 8803]
    assert len({seat.token for seat in seats}) == 3
    for seat, command in zip(seats, commands, strict=True):
        assert command[:3] == [sys.executable, "-m", "jupyterlab"]
        assert f"--ServerApp.port={seat.port}" in command
        assert f"--ServerApp.root_dir={(tmp_path / 'room' / seat.name).resolve()}" in command
        assert "--ServerApp.ip=0.0.0.0" in command and "--no-browser" in command
        assert "--ServerApp.terminals_enabled=False" in command
        assert "--ServerApp.kernel_manager_class=booktools.room_kernels.OneKernelPerSeat" in command
        assert "--MappingKernelManager.cull_idle_timeout=600" in command
        assert "--MappingKernelManager.cull_connected=True" in command
        assert not any(seat.token in part for part in command)  # ps shows a command line to every user
        environment = room.server_environment(seat, {"PATH": "/bin"})
        assert environment["JUPYTER_TOKEN"] == seat.token
        assert environment["XLA_PYTHON_CLIENT_PREALLOCATE"] == "false"


def test_a_second_start_keeps_a_seats_work_and_its_token(edition, tmp_path, capsys):
    into = tmp_path / "room"
    assert room.open_room(edition, into, 2, first_port=free_port(), launch=sleeper([]), stop_after=0.2) == 0
    work = into / "seat-1" / "my_answer.py"
    work.write_text("x = 42\n")
    (into / "seat-1" / "00_start.ipynb").write_text("the participant's edit")
    first = room.read_tokens(into)
    capsys.readouterr()
    assert room.open_room(edition, into, 3, first_port=free_port(), launch=sleeper([]), stop_after=0.2) == 0
    said = capsys.readouterr().out
    assert work.read_text() == "x = 42\n"
    assert (into / "seat-1" / "00_start.ipynb").read_text() == "the participant's edit"
    assert (into / "seat-3" / "check_setup.py").exists()  # a new seat gets the edition
    assert "seat-1 is there already: used as it is" in said
    assert {k: v for k, v in room.read_tokens(into).items() if k in first} == first
    assert first["seat-1"] in (into / "room.md").read_text()


@pytest.mark.parametrize(
    "arguments, said",
    [
        (["--edition", "{missing}", "--seats", "2"], "no edition folder"),
        (["--edition", "{not_edition}", "--seats", "2"], "is not a participant edition"),
        (["--edition", "{edition}", "--seats", "0"], "at least one seat, not 0"),
    ],
)
def test_refusals_say_why_with_status_2(edition, tmp_path, capsys, arguments, said):
    (tmp_path / "other").mkdir()
    names = {"missing": tmp_path / "nothing", "not_edition": tmp_path / "other", "edition": edition}
    argv = [part.format(**names) for part in arguments] + ["--into", str(tmp_path / "room"), "--dry-run"]
    assert room.main(argv) == 2
    error = capsys.readouterr().err
    assert said in error and "Traceback" not in error


def test_a_taken_port_is_refused_before_anything_starts(edition, tmp_path, capsys):
    started: list = []
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(room.RoomError, match=f"port {port} on 127.0.0.1 is taken"):
            room.open_room(edition, tmp_path / "room", 2, first_port=port, launch=sleeper(started))
        argv = ["--edition", str(edition), "--seats", "1", "--into", str(tmp_path / "room"), "--first-port", str(port)]
        assert room.main(argv) == 2
    assert started == [] and not (tmp_path / "room").exists()
    assert "--first-port" in capsys.readouterr().err


def test_a_dry_run_prints_and_starts_nothing(edition, tmp_path, capsys):
    assert room.main(["--edition", str(edition), "--seats", "2", "--into", str(tmp_path / "room"), "--dry-run"]) == 0
    said = capsys.readouterr().out
    assert "seat-2" in said and "--ServerApp.terminals_enabled=False" in said
    assert not (tmp_path / "room").exists()


def test_one_kernel_per_seat():
    assert room.kernel_refusal({}) is None
    refusal = room.kernel_refusal({"chapter-1": "idle"})
    assert refusal is not None and "Shut Down Kernel" in refusal and "Running" in refusal
    assert room.kernel_refusal({"chapter-1": "busy"}, asked="chapter-1") is None  # its own kernel, reused
    assert room.kernel_refusal({"chapter-1": "dead"}) is None  # died: it holds no share
    assert room.kernel_refusal({"chapter-1": "idle"}, asked="someone-elses") == refusal


def test_the_room_stops_every_server_at_sigterm(edition, tmp_path, capsys):
    started: list = []
    threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGTERM)).start()
    begun = time.monotonic()
    assert room.open_room(edition, tmp_path / "room", 2, first_port=free_port(), launch=sleeper(started)) == 0
    assert time.monotonic() - begun < 30
    assert len(started) == 2 and "stopping 2 server(s)" in capsys.readouterr().out
    assert signal.getsignal(signal.SIGTERM) is not None


def test_a_dead_server_is_named_and_the_others_keep_running(tmp_path):
    seats = [room.Seat(n, tmp_path, 8800 + n, "t") for n in (1, 2)]
    dies = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"], start_new_session=True)
    lives = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    said: list[str] = []
    assert room.serve([(seats[0], dies), (seats[1], lives)], poll=0.1, stop_after=1.5, log=said.append) == 0
    assert any("seat-1 stopped (exit status 3)" in line for line in said)
    assert not any("seat-2 stopped" in line for line in said)
    assert lives.returncode is not None  # stopped with the room


@pytest.mark.skipif(
    importlib.util.find_spec("jupyter_server") is None,
    reason="jupyter_server is not installed here (the gpu extra's jupyterlab brings it)",
)
@pytest.mark.slow
@pytest.mark.timeout(120)
def test_the_servers_kernel_manager_allows_one_kernel(tmp_path):
    from tornado.web import HTTPError  # noqa: PLC0415 - with jupyter_server, which may be missing

    from booktools.room_kernels import OneKernelPerSeat  # noqa: PLC0415 - it needs jupyter_server

    async def seat() -> None:
        manager = OneKernelPerSeat(root_dir=str(tmp_path))
        first = await manager.start_kernel(path="")
        with pytest.raises(HTTPError) as refused:
            await manager.start_kernel(path="")
        assert refused.value.status_code == 403 and "Shut Down Kernel" in refused.value.log_message
        assert await manager.start_kernel(kernel_id=first, path="") == first  # its own: reused
        await manager.restart_kernel(first)
        assert manager.list_kernel_ids() == [first]
        await manager.shutdown_kernel(first)
        second = await manager.start_kernel(path="")
        await manager.shutdown_kernel(second)

    asyncio.run(seat())
