"""Start a workshop room's Jupyter servers: one per participant seat, each in its own copy of the edition.

    python -m booktools.mps --limit 16G -- python -m booktools.room --edition _build/workshop --seats 5 --into ROOM

gives each seat a folder (``ROOM/seat-1`` ... ``seat-N``), a copy of the participant edition that ``make workshop``
wrote; a folder already there (a second start of the day) is used as it is, since the participant's work is in it,
and nothing in it is overwritten. Each seat gets one ``jupyter lab`` of its own: its own port (from
``--first-port``), its own random token (kept in ``ROOM/tokens.json``, so that a restart of the room keeps the
addresses handed out), its folder as the server's root, terminals off, idle kernels culled after ``--cull-after``
seconds, and **one kernel per seat** (:mod:`booktools.room_kernels`): under MPS each kernel is a client with a
memory share of its own, so a participant with three chapters open would hold three shares; the server refuses a
second kernel and says to shut down the other chapter's first (:func:`kernel_refusal`). The servers run with
``XLA_PYTHON_CLIENT_PREALLOCATE=false`` (JAX takes 75 % of what it sees otherwise), the token in ``JUPYTER_TOKEN``
(not on a command line that ``ps`` shows every user), and their output in ``ROOM/logs/seat-N.log``.

``ROOM/room.md`` lists each seat's folder and address with its token, for the teacher: hand each participant their
own line. The room then waits; Ctrl-C or SIGTERM stops every server (SIGTERM, then SIGKILL after a grace period),
and a server that dies is named while the others keep running. Each server is also asked (Linux's parent-death
signal) to stop when the room's process dies, so that no server outlives the MPS it was started under.
``--dry-run`` prints the folders and command lines and starts nothing.

What the room does not protect against: every server runs under one account (legacy MPS serves one user at a time),
so a participant's notebook can read every seat's folder and process, tokens included; and a fatal GPU fault in one
client reaches every client under the same MPS.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from importlib.util import find_spec
from pathlib import Path

from booktools import workshop
from booktools.mps import LIMIT_VARIABLE
from booktools.rehearse import stop

#: The kernel manager each server runs with: one kernel per seat.
KERNEL_MANAGER = "booktools.room_kernels.OneKernelPerSeat"
#: A kernel in this execution state holds no GPU share any more: it does not count against the seat.
GONE = frozenset({"dead"})
#: What a participant reads when their seat already runs a kernel.
ONE_KERNEL = (
    "This seat already runs a kernel, and a seat gets one: each kernel holds a share of the workshop's GPU. "
    "Shut down the kernel of the chapter you finished first (in its notebook: Kernel > Shut Down Kernel, or "
    "the Running Terminals and Kernels panel in the left sidebar), then open this notebook's kernel again."
)
#: What ``booktools.workshop`` writes into every edition, and only there: the participant's set-up check.
EDITION_MARK = "check_setup.py"
EDITION_SIGNATURE = "from booktools.workshop import check_seat"
TOKENS = "tokens.json"
SHEET = "room.md"


class RoomError(ValueError):
    """The room cannot start as asked: the message says why and what to change."""


@dataclass(frozen=True)
class Seat:
    number: int
    folder: Path
    port: int
    token: str
    reused: bool = False  # the folder was there already (a second start): used as it is

    @property
    def name(self) -> str:
        return f"seat-{self.number}"

    def url(self, host: str) -> str:
        """The seat's address with its token, as a participant opens it."""
        return f"http://{host}:{self.port}/lab?token={self.token}"


def kernel_refusal(running: Mapping[str, str], asked: str | None = None) -> str | None:
    """Why a seat may not start a kernel now, or None when it may. ``running`` maps each kernel the seat's server
    holds to its execution state; ``asked`` is the kernel id the request names, if any.

    A request for a kernel the seat holds already is the server reusing it (it starts nothing); a restart keeps
    its kernel id and never asks; a kernel that died or was shut down holds no share.

    >>> kernel_refusal({}) is None, kernel_refusal({"k1": "idle"}, asked="k1") is None
    (True, True)
    >>> kernel_refusal({"k1": "dead"}) is None
    True
    >>> print(kernel_refusal({"k1": "busy"})[:38])
    This seat already runs a kernel, and a
    """
    if asked is not None and asked in running:
        return None
    holding = [kernel for kernel, state in running.items() if state not in GONE]
    return ONE_KERNEL if holding else None


def check_edition(edition: Path) -> None:
    """Refuse a folder that is not a participant edition written by :mod:`booktools.workshop`."""
    hint = "write one with make workshop AGENDA=two-hours (it goes to _build/workshop)"
    if not edition.is_dir():
        raise RoomError(f"no edition folder at {edition}: {hint}")
    mark = edition / EDITION_MARK
    if not mark.is_file() or EDITION_SIGNATURE not in mark.read_text(errors="replace"):
        raise RoomError(f"{edition} is not a participant edition (it has no {EDITION_MARK} of the book's): {hint}")
    if not any(edition.glob("*.ipynb")):
        raise RoomError(f"{edition} holds no chapter notebook: {hint}")


def check_ports(ip: str, ports: Sequence[int]) -> None:
    """Refuse ports outside 1-65535 or already taken on ``ip`` (something listens there, or a room runs)."""
    for port in ports:
        if not 0 < port < 65536:
            raise RoomError(f"port {port} is outside 1-65535: choose a lower --first-port")
        with socket.socket(socket.AF_INET6 if ":" in ip else socket.AF_INET) as probe:
            try:
                probe.bind((ip, port))
            except OSError as error:
                raise RoomError(
                    f"port {port} on {ip} is taken ({error.strerror}): another server or room uses it; stop it, or "
                    f"choose another --first-port"
                ) from error


def plan_seats(edition: Path, into: Path, seats: int, first_port: int, tokens: Mapping[str, str]) -> list[Seat]:
    """The room's seats: folder, port and token of each; a seat whose folder exists is marked reused."""
    if seats < 1:
        raise RoomError(f"a room needs at least one seat, not {seats} (--seats 5 for five participants)")
    check_edition(edition)
    if into.resolve().is_relative_to(edition.resolve()):
        raise RoomError(f"the room's folder {into} is inside the edition {edition}: choose a folder outside it")
    planned = []
    for number in range(1, seats + 1):
        folder = into / f"seat-{number}"
        if folder.exists() and not folder.is_dir():
            raise RoomError(f"{folder} is a file, not a seat's folder: move it away")
        token = tokens.get(f"seat-{number}") or secrets.token_urlsafe(24)
        planned.append(Seat(number, folder, first_port + number - 1, token, folder.exists()))
    return planned


def read_tokens(into: Path) -> dict[str, str]:
    """The tokens of an earlier start of this room, so that the addresses handed out stay valid; {} before it."""
    path = into / TOKENS
    return json.loads(path.read_text()) if path.exists() else {}


def write_tokens(into: Path, seats: Sequence[Seat]) -> None:
    """Keep the seats' tokens beside the seats, readable by this account only."""
    path = into / TOKENS
    known = {**read_tokens(into), **{seat.name: seat.token for seat in seats}}
    path.touch(mode=0o600, exist_ok=True)
    path.write_text(json.dumps(known, indent=1) + "\n")


def make_folders(edition: Path, seats: Sequence[Seat], log: Callable[[str], None] = print) -> None:
    """Copy ``edition`` into each new seat's folder; a seat's folder already there is used as it is."""
    for seat in seats:
        if seat.reused:
            log(f"room: {seat.folder} is there already: used as it is (the participant's work is in it)")
            continue
        seat.folder.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(edition, seat.folder)


def server_command(seat: Seat, *, ip: str, cull_after: int, python: str = sys.executable) -> list[str]:
    """The command line of one seat's ``jupyter lab``; its token goes in its environment (:func:`server_environment`),
    not on a command line that ``ps`` shows every user of the machine."""
    return [
        python,
        "-m",
        "jupyterlab",
        "--no-browser",
        f"--ServerApp.ip={ip}",
        f"--ServerApp.port={seat.port}",
        "--ServerApp.port_retries=0",  # the port room.md names, or none
        f"--ServerApp.root_dir={seat.folder.resolve()}",
        "--ServerApp.terminals_enabled=False",
        f"--ServerApp.kernel_manager_class={KERNEL_MANAGER}",
        f"--MappingKernelManager.cull_idle_timeout={cull_after}",
        "--MappingKernelManager.cull_interval=60",
        "--MappingKernelManager.cull_connected=True",
    ]


def server_environment(seat: Seat, environment: Mapping[str, str]) -> dict[str, str]:
    """A seat's server's environment: the token, and JAX without preallocation (the teachers' page, step 4)."""
    return {**environment, "JUPYTER_TOKEN": seat.token, "XLA_PYTHON_CLIENT_PREALLOCATE": "false"}


def url_host(ip: str) -> str:
    """The host name a participant's address uses: the machine's name where the servers listen on every interface.

    >>> url_host("127.0.0.1"), url_host("::1")
    ('127.0.0.1', '[::1]')
    """
    if ip in ("", "0.0.0.0", "::"):
        return socket.getfqdn()
    return f"[{ip}]" if ":" in ip else ip


def room_sheet(seats: Sequence[Seat], host: str, limit: str | None) -> str:
    """``room.md``: each seat's folder and address with its token, for the teacher."""
    under = f"under MPS, {limit} per kernel" if limit else "not under MPS (no per-kernel limit)"
    lines = [
        "# The room's servers, for the teacher",
        "",
        f"Started {time.strftime('%Y-%m-%d %H:%M')}, {under}, one kernel per seat. Each address holds its seat's",
        "token: hand each participant their own line only, and keep this file to yourself.",
        "",
        "| seat | folder | address |",
        "| --- | --- | --- |",
    ]
    lines += [f"| {seat.name} | {seat.folder.resolve()} | {seat.url(host)} |" for seat in seats]
    return "\n".join(lines) + "\n"


def _stop_with_the_room() -> None:
    """(In a server's process, before it starts) ask Linux to send it SIGTERM when the room's process dies."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1: PR_SET_PDEATHSIG


def start_server(seat: Seat, command: list[str], environment: dict[str, str], logs: Path) -> subprocess.Popen:
    """Start one seat's server in a session of its own (so that Ctrl-C reaches the room, which stops it), its
    output appended to ``logs/seat-N.log``."""
    logs.mkdir(parents=True, exist_ok=True)
    with open(logs / f"{seat.name}.log", "a") as log:
        return subprocess.Popen(
            command,
            cwd=seat.folder,
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_stop_with_the_room,  # one prctl call: no lock taken
        )


def serve(
    servers: Sequence[tuple[Seat, subprocess.Popen]],
    *,
    poll: float = 1.0,
    stop_after: float | None = None,
    grace: float = 10,
    log: Callable[[str], None] = print,
) -> int:
    """Wait while the servers run; name a server that stops, keeping the others; stop them all at Ctrl-C, SIGTERM
    or after ``stop_after`` seconds. Returns 0, or 1 when every server had stopped by itself."""

    def stop_on_signal(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    previous = signal.signal(signal.SIGTERM, stop_on_signal)
    deadline = None if stop_after is None else time.monotonic() + stop_after
    stopped: set[int] = set()
    try:
        while deadline is None or time.monotonic() < deadline:
            for seat, process in servers:
                if seat.number not in stopped and process.poll() is not None:
                    stopped.add(seat.number)
                    log(
                        f"room: the server of {seat.name} stopped (exit status {process.returncode}); the other "
                        f"seats keep running. Its log: logs/{seat.name}.log"
                    )
            if len(stopped) == len(servers):
                log("room: every server has stopped")
                return 1
            time.sleep(poll)
    except KeyboardInterrupt:
        pass
    finally:
        running = [process for _, process in servers if process.poll() is None]
        if running:
            log(f"room: stopping {len(running)} server(s)")
        for _, process in servers:
            stop(process, grace)
        signal.signal(signal.SIGTERM, previous)
    return 0


def open_room(
    edition: Path,
    into: Path,
    seats: int,
    *,
    first_port: int = 8801,
    ip: str = "127.0.0.1",
    cull_after: int = 900,
    dry_run: bool = False,
    launch: Callable[[Seat, list[str], dict[str, str], Path], subprocess.Popen] | None = None,
    stop_after: float | None = None,
    log: Callable[[str], None] = print,
) -> int:
    """Make the seats' folders, start their servers, write ``room.md`` and wait (:func:`serve`); with ``dry_run``,
    print what would be done and start nothing. ``launch`` starts one server (tests pass a stand-in)."""
    if cull_after < 1:
        raise RoomError(f"--cull-after is in seconds, at least 1, not {cull_after}")
    planned = plan_seats(edition, into, seats, first_port, read_tokens(into))
    check_ports(ip, [seat.port for seat in planned])
    host = url_host(ip)
    limit = os.environ.get(LIMIT_VARIABLE)
    if dry_run:
        for seat in planned:
            done = "used as it is" if seat.reused else f"a copy of {edition}"
            log(f"{seat.name}: {seat.folder} ({done}), http://{host}:{seat.port}/lab")
            command = " ".join(server_command(seat, ip=ip, cull_after=cull_after))
            log(f"  JUPYTER_TOKEN=... XLA_PYTHON_CLIENT_PREALLOCATE=false {command}")
        log("room: dry run, nothing started")
        return 0
    if launch is None:
        if find_spec("jupyterlab") is None:
            raise RoomError(
                f"jupyterlab is not installed in {sys.executable}: the gpu extra has it (pip install -e '.[gpu]'); "
                "start the room with the Python the participants' kernels use"
            )
        launch = start_server
    if not limit:
        log("room: not under MPS (python -m booktools.mps --limit 16G -- ...): each kernel can take the whole GPU")
    make_folders(edition, planned, log)
    write_tokens(into, planned)
    servers = []
    for seat in planned:
        command = server_command(seat, ip=ip, cull_after=cull_after)
        servers.append((seat, launch(seat, command, server_environment(seat, os.environ), into / "logs")))
    sheet = room_sheet(planned, host, limit)
    (into / SHEET).write_text(sheet)
    log(sheet.rstrip())
    log(f"room: {len(planned)} server(s) running; this list is in {into / SHEET}; Ctrl-C stops them all")
    return serve(servers, stop_after=stop_after, log=log)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m booktools.room", description=__doc__.split("\n")[0])
    parser.add_argument(
        "--edition", type=Path, default=workshop.OUT, help=f"the participant edition (default {workshop.OUT})"
    )
    parser.add_argument("--seats", type=int, required=True, help="how many participants: one server and folder each")
    parser.add_argument("--into", type=Path, required=True, help="the room's folder: seat-1 ... seat-N, room.md, logs/")
    parser.add_argument("--first-port", type=int, default=8801, help="seat-1's port; seat N gets the N-th from it")
    parser.add_argument(
        "--ip",
        default="127.0.0.1",
        help=(
            "where the servers listen. 127.0.0.1 (the default) serves this machine only: participants reach it "
            "through an SSH tunnel or your HTTPS proxy. 0.0.0.0 serves every network interface, tokens in plain "
            "HTTP: only on a network you trust"
        ),
    )
    parser.add_argument("--cull-after", type=int, default=900, help="shut down a kernel idle this many seconds")
    parser.add_argument("--dry-run", action="store_true", help="print the folders and command lines, start nothing")
    args = parser.parse_args(argv)
    try:
        return open_room(
            args.edition,
            args.into,
            args.seats,
            first_port=args.first_port,
            ip=args.ip,
            cull_after=args.cull_after,
            dry_run=args.dry_run,
        )
    except RoomError as error:
        print(f"room: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
