"""booktools.room on the CPU: the seats' folders (an existing seat's work untouched), each seat's server command,
the refusals, the one-kernel decision, and the wait-and-stop loop with stand-in servers."""

from __future__ import annotations

import asyncio
import errno
import importlib.util
import json
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

from booktools import mps, processes, room, workshop


@pytest.fixture(autouse=True)
def ordinary_account(monkeypatch):
    """The room as a workshop's own account starts it (these tests also run as root in some containers)."""
    monkeypatch.setattr(room, "_euid", lambda: 1000)


@pytest.fixture
def edition(tmp_path) -> Path:
    """A participant edition as booktools.workshop writes one: a chapter, its README and check_setup.py."""
    folder = tmp_path / "workshop"
    folder.mkdir()
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("1 + 1")]), folder / "00_start.ipynb")
    (folder / "README.md").write_text(workshop.readme(["00_start"], None))
    (folder / "check_setup.py").write_text(workshop.setup_script(["00_start"]))
    return folder


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def sleeper(started: list):
    """A launcher whose 'server' sleeps: what the wait-and-stop loop stops."""

    def launch(seat, command, environment, logs):
        process = subprocess.Popen(
            [sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True, cwd=seat.folder
        )
        started.append((seat, command, environment, process))
        return process

    return launch


#: A stand-in server that refuses SIGTERM (only SIGKILL stops it); it says so on stdout once it does.
STUBBORN = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print('ready', flush=True); time.sleep(60)"
)


def stubborn_servers(count: int) -> list[subprocess.Popen]:
    processes = [
        subprocess.Popen([sys.executable, "-c", STUBBORN], stdout=subprocess.PIPE, text=True, start_new_session=True)
        for _ in range(count)
    ]
    for process in processes:
        assert process.stdout.readline() == "ready\n"
    return processes


def gone(pid: int) -> bool:
    """Whether a process has exited (a zombie left to an init that does not reap counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return True
    return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")


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


def test_a_port_in_time_wait_is_free_and_a_listening_one_is_taken():
    with socket.socket() as server:
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as Tornado, the servers', does
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        with pytest.raises(room.RoomError, match=f"port {port} on 127.0.0.1 is taken"):
            room.check_ports("127.0.0.1", [port])  # something listens: a running room
        browser = socket.create_connection(("127.0.0.1", port))
        connection, _ = server.accept()
    connection.close()  # the server closes first: its side of the connection waits out TIME_WAIT on the port
    assert browser.recv(1) == b""
    browser.close()
    room.check_ports("127.0.0.1", [port])  # a room restarted within a minute of its last stop


def test_an_ip_that_is_no_address_is_named(capsys):
    with pytest.raises(room.RoomError, match="--ip nosuchhost.invalid is not an address"):
        room.check_ports("nosuchhost.invalid", [8801])
    with pytest.raises(room.RoomError, match="--ip 192.0.2.1 is not an address of this machine"):
        room.check_ports("192.0.2.1", [8801])  # TEST-NET-1: no machine's own


def test_the_rooms_files_are_readable_by_this_account_only(edition, tmp_path):
    into = tmp_path / "room"
    assert room.open_room(edition, into, 2, first_port=free_port(), launch=sleeper([]), stop_after=0.1) == 0
    assert (into.stat().st_mode & 0o777) == 0o700  # made by the room
    assert ((into / "room.md").stat().st_mode & 0o777) == 0o600
    assert ((into / "tokens.json").stat().st_mode & 0o777) == 0o600
    # a room folder the teacher made is left as it is; files of an earlier start that others could read are mended
    teachers = tmp_path / "teachers"
    teachers.mkdir(mode=0o755)
    teachers.chmod(0o755)
    for name in ("room.md", "tokens.json"):
        (teachers / name).write_text("{}" if name == "tokens.json" else room.SHEET_HEADER + "\nan earlier start's\n")
        (teachers / name).chmod(0o644)
    assert room.open_room(edition, teachers, 1, first_port=free_port(), launch=sleeper([]), stop_after=0.1) == 0
    assert (teachers.stat().st_mode & 0o777) == 0o755
    assert ((teachers / "room.md").stat().st_mode & 0o777) == 0o600
    assert ((teachers / "tokens.json").stat().st_mode & 0o777) == 0o600


def test_a_seats_log_is_readable_by_this_account_only(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir(mode=0o755)
    logs.chmod(0o755)
    (logs / "seat-1.log").write_text("an earlier start\n")
    (logs / "seat-1.log").chmod(0o644)
    seat = room.Seat(1, tmp_path, 8801, "t")
    server = room.start_server(seat, [sys.executable, "-c", "print('the token')"], dict(os.environ), logs)
    assert server.wait(30) == 0
    assert (logs / "seat-1.log").read_text() == "an earlier start\nthe token\n"
    assert ((logs / "seat-1.log").stat().st_mode & 0o777) == 0o600
    assert (logs.stat().st_mode & 0o777) == 0o700
    seat2 = room.Seat(2, tmp_path, 8802, "t")
    assert room.start_server(seat2, [sys.executable, "-c", "pass"], dict(os.environ), logs).wait(30) == 0
    assert ((logs / "seat-2.log").stat().st_mode & 0o777) == 0o600


def test_a_copy_cut_short_is_never_taken_for_a_seat(edition, tmp_path, monkeypatch):
    into = tmp_path / "room"
    real_copy = room.shutil.copytree

    def cut_short(source, destination, **options):
        Path(destination).mkdir()
        (Path(destination) / "README.md").write_text("half")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(room.shutil, "copytree", cut_short)
    with pytest.raises(OSError, match="No space left"):
        room.open_room(edition, into, 1, first_port=free_port(), launch=sleeper([]), stop_after=0.1)
    assert not (into / "seat-1").exists()
    monkeypatch.setattr(room.shutil, "copytree", real_copy)
    said: list[str] = []
    assert (
        room.open_room(edition, into, 1, first_port=free_port(), launch=sleeper([]), stop_after=0.1, log=said.append)
        == 0
    )
    assert sorted(path.name for path in (into / "seat-1").iterdir()) == sorted(path.name for path in edition.iterdir())
    assert not any(path.name.endswith(".partial") for path in into.iterdir())
    assert not any("used as it is" in line for line in said)


def test_a_later_seat_that_fails_to_start_stops_those_started(edition, tmp_path):
    started: list = []
    stand_in = sleeper(started)

    def launch(seat, command, environment, logs):
        if seat.number == 3:
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", "jupyter")
        return stand_in(seat, command, environment, logs)

    said: list[str] = []
    with pytest.raises(FileNotFoundError):
        room.open_room(edition, tmp_path / "room", 4, first_port=free_port(), launch=launch, log=said.append)
    assert len(started) == 2
    assert all(process.poll() is not None and gone(process.pid) for *_, process in started)
    assert any("stopping 2 server(s)" in line for line in said)
    assert not (tmp_path / "room" / "room.md").exists()


def test_what_goes_wrong_is_one_line_with_status_2(edition, tmp_path, capsys, monkeypatch):
    def run(into: Path, *more: str) -> str:
        argv = ["--edition", str(edition), "--seats", "1", "--into", str(into), "--first-port", str(free_port())]
        assert room.main(argv + list(more)) == 2
        error = capsys.readouterr().err
        assert "Traceback" not in error and error.count("\n") == 1, error
        return error

    corrupt = tmp_path / "corrupt"
    corrupt.mkdir()
    (corrupt / "tokens.json").write_text('{"seat-1": "abc",')
    error = run(corrupt, "--dry-run")
    assert "tokens.json is not the room's tokens" in error and "move it away" in error
    (corrupt / "tokens.json").write_text(json.dumps(["a list"]))
    assert "is not the room's tokens" in run(corrupt, "--dry-run")

    a_file = tmp_path / "a-file"
    a_file.write_text("")
    assert "is a file, not a folder" in run(a_file)

    def full_disk(source, destination, **options):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(room, "find_spec", lambda name: object())  # as if jupyterlab were installed
    monkeypatch.setattr(room.shutil, "copytree", full_disk)
    error = run(tmp_path / "room")
    assert "No space left on device" in error and "free some disk space" in error


def test_prctl_is_looked_up_in_the_room_not_in_the_server(tmp_path, monkeypatch):
    lookups: list[int] = []

    class Library:
        def __init__(self, *arguments, **options):
            lookups.append(os.getpid())

        @staticmethod
        def prctl(*arguments):
            return 0

    monkeypatch.setattr(sys, "platform", "linux")
    monkeypatch.setattr(room.ctypes, "CDLL", Library)
    room._prctl.cache_clear()
    try:
        seat = room.Seat(1, tmp_path, 8801, "t")
        assert (
            room.start_server(seat, [sys.executable, "-c", "pass"], dict(os.environ), tmp_path / "logs").wait(30) == 0
        )
        assert lookups == [os.getpid()]  # in this process: the server's child only calls it
    finally:
        room._prctl.cache_clear()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_a_server_stops_when_the_room_dies(tmp_path):
    code = (
        "import os, sys; from pathlib import Path; from booktools import room; "
        f"seat = room.Seat(1, Path({str(tmp_path)!r}), 8801, 't'); "
        "server = room.start_server(seat, [sys.executable, '-c', 'import time; time.sleep(60)'], dict(os.environ), "
        f"Path({str(tmp_path / 'logs')!r})); print(server.pid, flush=True); os._exit(0)"
    )
    here = Path(room.__file__).resolve().parents[1]
    dead_room = subprocess.run([sys.executable, "-c", code], cwd=here, capture_output=True, text=True, timeout=60)
    server = int(dead_room.stdout.split()[0])
    deadline = time.monotonic() + 10
    while not gone(server) and time.monotonic() < deadline:
        time.sleep(0.05)
    if not gone(server):
        os.kill(server, signal.SIGKILL)
        pytest.fail("the server outlived the room")


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
    before = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGTERM)).start()
    begun = time.monotonic()
    assert room.open_room(edition, tmp_path / "room", 2, first_port=free_port(), launch=sleeper(started)) == 0
    assert time.monotonic() - begun < 30
    assert len(started) == 2 and "stopping 2 server(s)" in capsys.readouterr().out
    assert all(process.poll() is not None for *_, process in started)  # the stand-ins are dead
    assert all(gone(process.pid) for *_, process in started)
    assert (signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)) == before  # the handlers restored


def test_stopping_takes_one_deadline_for_all_and_ignores_a_second_ctrl_c(tmp_path):
    seats = [room.Seat(n, tmp_path, 8800 + n, "t") for n in range(1, 5)]
    servers = stubborn_servers(len(seats))
    said: list[str] = []
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    # while the room stops its servers (it starts at 0.2 s): a second Ctrl-C, and a SIGTERM
    timers = [
        threading.Timer(0.6, os.kill, (os.getpid(), signal.SIGINT)),
        threading.Timer(0.8, os.kill, (os.getpid(), signal.SIGTERM)),
    ]
    begun = time.monotonic()
    try:
        for timer in timers:
            timer.start()
        assert (
            room.serve(list(zip(seats, servers, strict=True)), poll=0.05, stop_after=0.2, grace=1.5, log=said.append)
            == 0
        )
        took = time.monotonic() - begun
        after = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
        codes = [process.poll() for process in servers]  # before the clean-up below
        dead = [gone(process.pid) for process in servers]
    except KeyboardInterrupt:
        pytest.fail("a second Ctrl-C cut the stop short")
    finally:
        for timer in timers:
            timer.cancel()
        signal.signal(signal.SIGINT, before[0])
        signal.signal(signal.SIGTERM, before[1])
        for process in servers:
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
    assert codes == [-signal.SIGKILL] * len(servers)  # all stopped: by SIGKILL, as they refused SIGTERM
    assert all(dead)
    assert 1.5 <= took < 3.5, took  # one deadline for the four, not four in a row (6 s and more)
    assert any("stopping 4 server(s)" in line for line in said)
    assert any("killed 4 server(s)" in line for line in said)
    assert after == before


def test_servers_that_stop_at_sigterm_are_not_waited_for(tmp_path):
    servers = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)]
    begun = time.monotonic()
    assert processes.stop_all(servers, grace=20) == []
    assert time.monotonic() - begun < 5 and servers[0].returncode == -signal.SIGTERM


def test_a_dead_server_is_named_and_the_others_keep_running(tmp_path):
    seats = [room.Seat(n, tmp_path, 8800 + n, "t") for n in (1, 2)]
    dies = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"], start_new_session=True)
    lives = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    said: list[str] = []
    assert room.serve([(seats[0], dies), (seats[1], lives)], poll=0.1, stop_after=1.5, log=said.append) == 0
    assert any("seat-1 stopped (exit status 3)" in line for line in said)
    assert not any("seat-2 stopped" in line for line in said)
    assert lives.returncode is not None and gone(lives.pid)  # stopped with the room


@pytest.mark.skipif(
    importlib.util.find_spec("jupyter_server") is None,
    reason="jupyter_server is not installed here (the test extra brings it)",
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


def test_the_room_refuses_root_before_it_makes_anything_unless_allowed(edition, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(room, "_euid", lambda: 0)
    into = tmp_path / "room"
    with pytest.raises(room.RoomError, match="--allow-root"):
        room.open_room(edition, into, 2, first_port=free_port(), launch=sleeper([]), stop_after=0.1)
    assert not into.exists()  # no folder, no token written
    assert room.main(["--edition", str(edition), "--seats", "1", "--into", str(into)]) == 2
    assert "this account is root" in capsys.readouterr().err and not into.exists()
    started = []
    assert (
        room.open_room(
            edition, into, 1, first_port=free_port(), launch=sleeper(started), stop_after=0.1, allow_root=True
        )
        == 0
    )
    assert "--ServerApp.allow_root=True" in started[0][1]
    said = []
    assert room.open_room(edition, tmp_path / "dry", 1, first_port=free_port(), dry_run=True, log=said.append) == 0
    assert any("would need --allow-root" in line for line in said) and not (tmp_path / "dry").exists()
    seat = room.plan_seats(edition, into, 1, 8801, {})[0]
    assert "--ServerApp.allow_root=True" not in room.server_command(seat, ip="127.0.0.1", cull_after=60)


def test_a_room_whose_shares_do_not_fit_the_card_is_refused_before_it_makes_anything(edition, tmp_path, monkeypatch):
    monkeypatch.setenv(room.LIMIT_VARIABLE, "16G")
    monkeypatch.setattr(mps, "card_total", lambda index: 80 * 2**30)  # 6 seats of 16G need 96 GiB
    into = tmp_path / "room"
    with pytest.raises(room.RoomError, match=r"6 seats of 16G need 96.0 GiB .*booktools.mps --limit 13G\), or use 5"):
        room.open_room(edition, into, 6, first_port=free_port(), launch=sleeper([]), stop_after=0.1)
    assert not into.exists()
    monkeypatch.setattr(mps, "card_total", lambda index: int(79.18 * 2**30))  # the H100 as NVML reports it
    with pytest.raises(room.RoomError, match="give each seat at most 15G"):
        room.open_room(edition, into, 5, first_port=free_port(), launch=sleeper([]), stop_after=0.1)
    assert room.open_room(edition, into, 5 - 1, first_port=free_port(), launch=sleeper([]), stop_after=0.1) == 0
    said = []
    assert room.open_room(edition, tmp_path / "dry", 6, first_port=free_port(), dry_run=True, log=said.append) == 0
    assert any(line.startswith("room: a start would be refused: 6 seats of 16G") for line in said)
    with pytest.raises(room.RoomError, match="a share of 16G is more than this GPU's 8.0 GiB"):
        room.check_fit(1, "16G", total_bytes=8 * 2**30)
    monkeypatch.setattr(mps, "card_total", lambda index: None)  # no NVML: nothing to check against
    assert (
        room.open_room(edition, tmp_path / "other", 5, first_port=free_port(), launch=sleeper([]), stop_after=0.1) == 0
    )


class FakeNvml:
    """``support.env.card_memory`` on a machine of three GPUs of different sizes, numbered as NVML numbers them
    (whatever CUDA_VISIBLE_DEVICES says); it keeps the indexes it was asked for."""

    def __init__(self, *totals_gib: float):
        self.totals = [int(total * 2**30) for total in totals_gib]
        self.asked: list[int] = []

    def __call__(self, device: int = 0):
        from support import env  # noqa: PLC0415

        self.asked.append(device)
        if device >= len(self.totals):
            return None  # NVML has no such GPU
        return env.CardMemory(used=0, free=self.totals[device], total=self.totals[device])


def test_the_fit_is_checked_on_the_gpus_mps_limits_not_on_gpu_0(monkeypatch):
    from support import env  # noqa: PLC0415

    nvml = FakeNvml(80, 40, 24)
    monkeypatch.setattr(env, "card_memory", nvml)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    said = []
    room.check_fit(4, "16G", environ={}, log=said.append)  # booktools.mps's default: GPU 0, 80 GiB
    assert nvml.asked == [0] and said == []
    with pytest.raises(room.RoomError, match=r"4 seats of 16G need 64.0 GiB .* 40.0 GiB.*\(on GPU 1\)$"):
        room.check_fit(4, "16G", environ={mps.DEVICES_VARIABLE: "1"}, log=said.append)
    assert nvml.asked[-1] == 1
    with pytest.raises(room.RoomError, match=r"\(on GPU 1\)$"):  # two GPUs limited: each must hold every share
        room.check_fit(4, "16G", environ={mps.DEVICES_VARIABLE: "0,1"}, log=said.append)
    # CUDA_VISIBLE_DEVICES=2 and --device 0: MPS limits the machine's GPU 2 (24 GiB), which NVML numbers 2
    visible = {mps.DEVICES_VARIABLE: "0", "CUDA_VISIBLE_DEVICES": "2,0"}
    with pytest.raises(room.RoomError, match=r"24.0 GiB.*\(on GPU 0 \(NVML's GPU 2\)\)$"):
        room.check_fit(2, "16G", environ=visible, log=said.append)
    room.check_fit(2, "16G", environ={**visible, mps.DEVICES_VARIABLE: "1"}, log=said.append)  # GPU 1 is NVML's 0
    assert nvml.asked[-1] == 0 and said == []
    # a GPU named by UUID: NVML finds it; a UUID or a GPU NVML does not know: said, and not checked (nothing refused)
    monkeypatch.setattr(mps, "index_of_uuid", {"GPU-2a": 2}.get)
    with pytest.raises(room.RoomError, match=r"24.0 GiB.*\(on GPU 0 \(NVML's GPU 2\)\)$"):
        room.check_fit(2, "16G", environ={mps.DEVICES_VARIABLE: "0", "CUDA_VISIBLE_DEVICES": "GPU-2a"})
    room.check_fit(9, "16G", environ={"CUDA_VISIBLE_DEVICES": "GPU-8f1c"}, log=said.append)
    room.check_fit(9, "16G", environ={mps.DEVICES_VARIABLE: "5"}, log=said.append)
    assert said[0].startswith("room: GPU 0's memory cannot be read (CUDA_VISIBLE_DEVICES=GPU-8f1c names it by no")
    assert said[1] == "room: GPU 5's memory cannot be read (NVML cannot say): the seats' shares are not checked on it"
    with pytest.raises(room.RoomError, match="does not name GPUs as booktools.mps does"):
        room.check_fit(1, "16G", environ={mps.DEVICES_VARIABLE: "all"})


def test_the_room_reads_the_gpus_booktools_mps_limited(edition, tmp_path, monkeypatch):
    monkeypatch.setenv(room.LIMIT_VARIABLE, "16G")
    monkeypatch.setenv(mps.DEVICES_VARIABLE, "1")  # as booktools.mps --device 1 sets it
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    asked = []
    monkeypatch.setattr(mps, "card_total", lambda index: asked.append(index) or (80 if index == 0 else 40) * 2**30)
    with pytest.raises(room.RoomError, match=r"\(on GPU 1\)"):
        room.open_room(edition, tmp_path / "room", 3, first_port=free_port(), launch=sleeper([]), stop_after=0.1)
    assert asked == [1] and not (tmp_path / "room").exists()


def test_a_room_md_the_room_did_not_write_is_never_overwritten(edition, tmp_path, monkeypatch):
    into = tmp_path / "home"
    into.mkdir()
    (into / "room.md").write_text("# my notes on the room I teach in\n")
    with pytest.raises(room.RoomError, match="not a room's list of seats"):
        room.open_room(edition, into, 1, first_port=free_port(), launch=sleeper([]), stop_after=0.1)
    assert (into / "room.md").read_text() == "# my notes on the room I teach in\n" and not (into / "seat-1").exists()
    (into / "room.md").unlink()
    assert room.open_room(edition, into, 1, first_port=free_port(), launch=sleeper([]), stop_after=0.1) == 0
    assert room.open_room(edition, into, 1, first_port=free_port(), launch=sleeper([]), stop_after=0.1) == 0  # its own
    monkeypatch.setenv(room.LIMIT_VARIABLE, "16GB")  # set by hand, not by booktools.mps
    monkeypatch.setattr(mps, "card_total", lambda index: 80 * 2**30)
    with pytest.raises(room.RoomError, match="16GB"):
        room.open_room(edition, into, 1, first_port=free_port(), launch=sleeper([]), stop_after=0.1)


def test_the_room_knows_an_edition_by_what_the_workshop_writes_into_it(tmp_path):
    assert room.EDITION_SIGNATURE in workshop.SETUP_SCRIPT  # the mark is the set-up file by its definition
    written = tmp_path / "edition"
    workshop.write_edition([workshop.ROOT / "chapters" / "00_getting_started.ipynb"], written)
    room.check_edition(written)  # what the workshop wrote is an edition to the room
    (written / workshop.SETUP_FILE).write_text("print('a script of the same name')\n")
    with pytest.raises(room.RoomError, match="not a participant edition"):
        room.check_edition(written)


def test_a_private_file_is_written_whole_for_this_account_only_and_never_through_a_link(tmp_path, monkeypatch):
    tokens = tmp_path / "tokens.json"
    old_umask = os.umask(0o022)  # a umask that would leave a plain file readable by others
    try:
        room.write_private(tokens, '{"seat-1": "a"}')
    finally:
        os.umask(old_umask)
    assert (tokens.stat().st_mode & 0o777) == 0o600 and json.loads(tokens.read_text()) == {"seat-1": "a"}

    def cut_short(descriptor):
        raise KeyboardInterrupt  # Ctrl-C after the new text is written, before it is swapped in

    with monkeypatch.context() as patched:
        patched.setattr(os, "fsync", cut_short)
        with pytest.raises(KeyboardInterrupt):
            room.write_private(tokens, '{"seat-1": "b"}')
    assert json.loads(tokens.read_text()) == {"seat-1": "a"}, "the tokens handed out stay valid"
    assert [p.name for p in tmp_path.iterdir()] == ["tokens.json"], "no scratch file is left"
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("someone's file")
    link = tmp_path / "room.md"
    link.symlink_to(elsewhere)
    room.write_private(link, "the sheet")
    assert elsewhere.read_text() == "someone's file" and not link.is_symlink() and link.read_text() == "the sheet"


@pytest.mark.parametrize(
    ("signalled", "status"), [(KeyboardInterrupt, mps.INTERRUPTED), (processes.Terminated, mps.TERMINATED)]
)
def test_a_room_stopped_while_it_starts_exits_as_the_signal_says(signalled, status, edition, tmp_path, monkeypatch):
    def stopped(*args, **kwargs):
        raise signalled

    monkeypatch.setattr(room, "open_room", stopped)
    assert room.main(["--edition", str(edition), "--seats", "1", "--into", str(tmp_path / "room")]) == status
