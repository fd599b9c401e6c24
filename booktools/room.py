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
own line. The room then waits; Ctrl-C or SIGTERM stops every server (SIGTERM to all at once, then SIGKILL to what
is left after :data:`STOP_GRACE` seconds, well within the minute that ``booktools.mps`` gives the room; a second
Ctrl-C meanwhile is ignored), and a server that dies is named while the others keep running. Each server is also
asked (Linux's parent-death signal) to stop when the room's process dies, so that no server outlives the MPS it was
started under. ``--dry-run`` prints the folders and command lines and starts nothing.

A new seat's folder is copied under a temporary name (``ROOM/.seat-N.partial``) and renamed into place when the copy
is complete, so that a copy cut short is never taken for a seat. ``room.md``, ``tokens.json`` and the logs hold the
tokens: the room writes them readable by this account only (0600), and makes the room's folder 0700 when it makes it.

What the room does not protect against: every server runs under one account (legacy MPS serves one user at a time),
so a participant's notebook can read every seat's folder and process, tokens included; and a fatal GPU fault in one
client reaches every client under the same MPS.
"""

from __future__ import annotations

import argparse
import ctypes
import errno
import functools
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

from booktools import mps, processes, records, workshop
from booktools.mps import LIMIT_VARIABLE, MpsError, limited_cards, limited_devices
from booktools.processes import signals_ignored, sigterm_as_interrupt, stop_all

#: The kernel manager each server runs with: one kernel per seat.
KERNEL_MANAGER = "booktools.room_kernels.OneKernelPerSeat"
#: A kernel in this execution state holds no GPU share any more: it does not count against the seat.
GONE = frozenset({"dead"})
#: What a participant reads when their seat already runs a kernel.
#: JupyterLab shows it on one line, cut at the dialog's width after "HTTP 403: Forbidden (" (seen in Chromium,
#: JupyterLab 4.6): what to do comes first.
ONE_KERNEL = (
    "One kernel per seat: pick No Kernel in the next dialog, shut down this seat's other kernel (Kernel > Shut "
    "Down Kernel in its tab, or the Running Terminals and Kernels panel in the left sidebar), then click No Kernel "
    "at this notebook's top right and pick Python 3 (ipykernel). Each kernel holds a share of the workshop's GPU."
)
#: What ``booktools.workshop`` writes into every edition, and only there: the participant's set-up check.
EDITION_MARK = workshop.SETUP_FILE
EDITION_SIGNATURE = workshop.SETUP_SIGNATURE
TOKENS = "tokens.json"
SHEET = "room.md"
LOGS = "logs"
#: How long the servers get to stop after SIGTERM, all of them together, before SIGKILL: well within the
#: ``booktools.processes.CHILD_GRACE`` (60 s) the room gets itself.
STOP_GRACE = 20.0


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
    >>> print(kernel_refusal({"k1": "busy"})[:39])
    One kernel per seat: pick No Kernel in
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


def check_fit(
    seats: int,
    limit: str,
    total_bytes: int | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    log: Callable[[str], None] = print,
) -> None:
    """Refuse a room whose seats cannot all hold their MPS share on the card at once (each seat's one kernel holds
    ``limit``), with the share or the seat count that would fit: what :func:`booktools.rehearse.check_plan` asks of a
    rehearsal.

    The cards are those ``booktools.mps`` limited (:func:`booktools.mps.limited_devices`), each read by NVML's
    index of it (:func:`booktools.mps.limited_cards`: NVML ignores ``CUDA_VISIBLE_DEVICES``), and each must hold
    every seat's share, since a kernel may use every GPU limited (chapter 7 uses both of a two-GPU host).
    ``total_bytes`` stands for one card's memory instead. A card whose memory cannot be read is named in ``log``
    and not checked."""
    from booktools.rehearse import RehearsalError, check_plan  # noqa: PLC0415  # its notebooks' stack, only here

    environ = os.environ if environ is None else environ
    if total_bytes is not None:
        cards = [("this GPU", total_bytes)]
    else:
        try:
            limited = limited_cards(limited_devices(environ), environ)
        except MpsError as error:  # GPU_INTEROP_MPS_DEVICES set by hand, not as booktools.mps sets it
            raise RoomError(str(error)) from None
        cards = []
        for card in limited:
            if card.total is None:
                said = f"room: GPU {card.device}'s memory cannot be read ({card.unread})"
                log(f"{said}: the seats' shares are not checked on it")
                continue
            cards.append((card.shown, card.total))
    for shown, total in cards:
        try:
            check_plan(seats, limit, total, option="booktools.mps --limit")
        except (RehearsalError, MpsError) as error:  # MpsError: a limit that is no MPS limit (set by hand)
            raise RoomError(f"{error} (on {shown})") from None


def check_ports(ip: str, ports: Sequence[int]) -> None:
    """Refuse ports outside 1-65535 or already taken on ``ip`` (something listens there, or a room runs), and an
    ``ip`` that is not an address of this machine.

    The probe binds with ``SO_REUSEADDR``, as the servers (Tornado) do: a port whose last connections still wait
    out TIME_WAIT (a room restarted within a minute) is free for them, and one where something listens is not."""
    family = socket.AF_INET6 if ":" in ip else socket.AF_INET
    for port in ports:
        if not 0 < port < 65536:
            raise RoomError(f"port {port} is outside 1-65535: choose a lower --first-port")
        try:
            address = socket.getaddrinfo(ip or None, port, family, socket.SOCK_STREAM, 0, socket.AI_PASSIVE)[0][4]
        except socket.gaierror as error:
            raise RoomError(
                f"--ip {ip} is not an address ({error.strerror}): give one of this machine's addresses, e.g. "
                "127.0.0.1 (the default) or 0.0.0.0"
            ) from error
        with socket.socket(family) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(address)
            except OSError as error:
                if error.errno == errno.EADDRNOTAVAIL:
                    raise RoomError(
                        f"--ip {ip} is not an address of this machine ({error.strerror}): give one of its "
                        "addresses, e.g. 127.0.0.1 (the default) or 0.0.0.0"
                    ) from error
                raise RoomError(
                    f"port {port} on {ip} is taken ({error.strerror}): another server or room uses it; stop it, or "
                    f"choose another --first-port"
                ) from error


def plan_seats(edition: Path, into: Path, seats: int, first_port: int, tokens: Mapping[str, str]) -> list[Seat]:
    """The room's seats: folder, port and token of each; a seat whose folder exists is marked reused."""
    if seats < 1:
        raise RoomError(f"a room needs at least one seat, not {seats} (--seats 5 for five participants)")
    if into.exists() and not into.is_dir():
        raise RoomError(f"--into {into} is a file, not a folder: name a folder (a new one is made)")
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
    if not path.is_file():
        return {}
    fix = "mend it, or move it away to give every seat a new token (the addresses handed out change)"
    try:
        known = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise RoomError(f"{path} is not the room's tokens ({error}): {fix}") from error
    if not isinstance(known, dict) or not all(isinstance(token, str) for token in known.values()):
        raise RoomError(f"{path} is not the room's tokens (a JSON object of seat names and tokens): {fix}")
    return known


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path``, readable and writable by this account only (0600), whole or not at all
    (:func:`booktools.records.write_atomic`): a Ctrl-C in the middle leaves the earlier file, so the tokens handed
    out stay valid; a symbolic link there is replaced by the file, not followed."""
    records.write_atomic(path, text, mode=0o600)


#: The first line of ``room.md`` (:func:`room_sheet`): a ``room.md`` without it is someone else's file.
SHEET_HEADER = "# The room's servers, for the teacher"


def check_sheet(into: Path) -> None:
    """Refuse a room folder whose ``room.md`` the room did not write: the room rewrites its own sheet at each
    start, and must not overwrite a teacher's file of that name (``--into`` a folder that holds other work)."""
    sheet = into / SHEET
    if sheet.is_symlink() or (sheet.exists() and not sheet.read_text(errors="replace").startswith(SHEET_HEADER)):
        raise RoomError(
            f"{sheet} is not a room's list of seats, and the room would overwrite it: choose another --into"
        )


def write_tokens(into: Path, seats: Sequence[Seat]) -> None:
    """Keep the seats' tokens beside the seats, readable by this account only."""
    known = {**read_tokens(into), **{seat.name: seat.token for seat in seats}}
    write_private(into / TOKENS, json.dumps(known, indent=1) + "\n")


def make_room(into: Path) -> None:
    """Make the room's folder, 0700, where it is not there; a folder the teacher made is left as it is."""
    if not into.is_dir():
        into.mkdir(parents=True, mode=0o700)
        into.chmod(0o700)  # whatever the umask


def partial_folder(seat: Seat) -> Path:
    """Where a seat's copy of the edition is made, before it is renamed into place: the room's own, never a seat."""
    return seat.folder.with_name(f".{seat.folder.name}.partial")


def make_folders(edition: Path, seats: Sequence[Seat], log: Callable[[str], None] = print) -> None:
    """Copy ``edition`` into each new seat's folder; a seat's folder already there is used as it is.

    The copy is made under a temporary name (:func:`partial_folder`) and renamed into place when it is complete, so
    that a copy cut short (a full disk, Ctrl-C) is never taken for a seat: the next start removes it and copies
    again."""
    for seat in seats:
        partial = partial_folder(seat)
        if partial.exists():
            log(f"room: removing {partial}, a copy of the edition cut short at an earlier start")
            shutil.rmtree(partial)
        if seat.reused:
            log(f"room: {seat.folder} is there already: used as it is (the participant's work is in it)")
            if not (seat.folder / EDITION_MARK).exists():
                log(f"room: {seat.folder} has no {EDITION_MARK}: is it a seat? (move it away for a fresh copy)")
            continue
        seat.folder.parent.mkdir(parents=True, exist_ok=True)
        shutil.copytree(edition, partial)
        os.rename(partial, seat.folder)  # refuses a folder that is there and not empty: never a seat's work


def server_command(
    seat: Seat, *, ip: str, cull_after: int, allow_root: bool = False, python: str = sys.executable
) -> list[str]:
    """The command line of one seat's ``jupyter lab``; its token goes in its environment (:func:`server_environment`),
    not on a command line that ``ps`` shows every user of the machine. ``allow_root``: Jupyter refuses to start as
    root without ``--ServerApp.allow_root`` (:func:`check_account` decides whether the room may)."""
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
        *(["--ServerApp.allow_root=True"] if allow_root else []),
    ]


def _euid() -> int:
    """This process's effective user id (a function of its own, for tests to stand in for)."""
    return os.geteuid()


def check_account(allow_root: bool, euid: int | None = None) -> None:
    """Refuse to start the room as root unless asked: every participant's kernel would run as root. A Jupyter
    server started as root without ``--ServerApp.allow_root`` exits at once, so without this check each seat's
    server would stop, one log line each, after the room had said it was running.

    >>> check_account(False, euid=1000), check_account(True, euid=0)
    (None, None)
    >>> check_account(False, euid=0)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    booktools.room.RoomError: this account is root, and every participant's kernel would run as root: ...allow-root...
    """
    if (_euid() if euid is None else euid) == 0 and not allow_root:
        raise RoomError(
            "this account is root, and every participant's kernel would run as root: start the room as an ordinary "
            "account (one made for the workshop), or pass --allow-root on a machine that serves the workshop alone "
            "(a container)"
        )


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
        SHEET_HEADER,
        "",
        f"Started {time.strftime('%Y-%m-%d %H:%M')}, {under}, one kernel per seat. Each address holds its seat's",
        "token: hand each participant their own line only, and keep this file to yourself.",
        "",
        "| seat | folder | address |",
        "| --- | --- | --- |",
    ]
    lines += [f"| {seat.name} | {seat.folder.resolve()} | {seat.url(host)} |" for seat in seats]
    return "\n".join(lines) + "\n"


PR_SET_PDEATHSIG = 1


@functools.cache
def _prctl() -> Callable[..., int] | None:
    """Linux's ``prctl``, looked up in the room's process (None elsewhere): finding it (``dlopen``, ``dlsym``) takes
    the dynamic loader's lock, which another thread may hold at a fork, so a server's child process only calls it."""
    if not sys.platform.startswith("linux"):
        return None
    return ctypes.CDLL(None, use_errno=True).prctl


def _stop_with_the_room() -> Callable[[], None] | None:
    """What a server's process runs before it starts (``preexec_fn``): ask Linux to send it SIGTERM when the room's
    thread that started it ends, and exit where the room is gone already (it died between the fork and this call).
    ``prctl`` is looked up here, in the room; the child only calls it."""
    prctl = _prctl()
    if prctl is None:
        return None
    room = os.getpid()

    def in_the_child() -> None:
        prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != room:
            os._exit(1)

    return in_the_child


def private_logs(logs: Path) -> None:
    """Make the logs' folder (the room's own), readable by this account only: the servers log their tokens."""
    logs.mkdir(parents=True, exist_ok=True, mode=0o700)
    logs.chmod(0o700)


def start_server(seat: Seat, command: list[str], environment: dict[str, str], logs: Path) -> subprocess.Popen:
    """Start one seat's server in a session of its own (so that Ctrl-C reaches the room, which stops it), its
    output appended to ``logs/seat-N.log`` (0600: the server logs its token)."""
    private_logs(logs)
    descriptor = os.open(logs / f"{seat.name}.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with open(descriptor, "a") as log:
        os.fchmod(descriptor, 0o600)  # a log of an earlier start keeps its mode otherwise
        return subprocess.Popen(
            command,
            cwd=seat.folder,
            env=environment,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_stop_with_the_room(),
        )


def serve(
    servers: Sequence[tuple[Seat, subprocess.Popen]],
    *,
    poll: float = 1.0,
    stop_after: float | None = None,
    grace: float = STOP_GRACE,
    log: Callable[[str], None] = print,
) -> int:
    """Wait while the servers run; name a server that stops, keeping the others; stop them all (:func:`stop_all`)
    at Ctrl-C, SIGTERM or after ``stop_after`` seconds. Returns 0, or 1 when every server had stopped by itself."""
    deadline = None if stop_after is None else time.monotonic() + stop_after
    stopped: set[int] = set()
    try:
        with sigterm_as_interrupt():
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
        stop_servers([process for _, process in servers], grace, log)
    return 0


def stop_servers(processes: Sequence[subprocess.Popen], grace: float, log: Callable[[str], None]) -> None:
    """:func:`booktools.processes.stop_all`, saying how many servers it stops and which it had to kill."""
    with signals_ignored(signal.SIGINT, signal.SIGTERM):  # from the first line on
        running = [process for process in processes if process.poll() is None]
        if running:
            log(f"room: stopping {len(running)} server(s) (SIGKILL to those still running after {grace:g} s)")
        killed = stop_all(processes, grace)
        if killed:
            log(f"room: killed {len(killed)} server(s) that did not stop within {grace:g} s")


def open_room(
    edition: Path,
    into: Path,
    seats: int,
    *,
    first_port: int = 8801,
    ip: str = "127.0.0.1",
    cull_after: int = 900,
    allow_root: bool = False,
    dry_run: bool = False,
    launch: Callable[[Seat, list[str], dict[str, str], Path], subprocess.Popen] | None = None,
    stop_after: float | None = None,
    grace: float = STOP_GRACE,
    log: Callable[[str], None] = print,
) -> int:
    """Make the seats' folders, start their servers, write ``room.md`` and wait (:func:`serve`); with ``dry_run``,
    print what would be done and start nothing. ``launch`` starts one server (tests pass a stand-in); ``grace`` is
    how long the servers get to stop, all together, before they are killed."""
    if cull_after < 1:
        raise RoomError(f"--cull-after is in seconds, at least 1, not {cull_after}")
    if not dry_run:  # a dry run starts nothing: it says what a start as this account would need
        check_account(allow_root)
    elif _euid() == 0 and not allow_root:
        log("room: this account is root: a start would need --allow-root (every kernel would run as root)")
    check_sheet(into)
    planned = plan_seats(edition, into, seats, first_port, read_tokens(into))
    check_ports(ip, [seat.port for seat in planned])
    host = url_host(ip)
    limit = os.environ.get(LIMIT_VARIABLE)
    if limit:
        try:
            check_fit(len(planned), limit, log=log)
        except RoomError as error:
            if not dry_run:
                raise
            log(f"room: a start would be refused: {error}")
    if dry_run:
        for seat in planned:
            done = "used as it is" if seat.reused else f"a copy of {edition}"
            log(f"{seat.name}: {seat.folder} ({done}), http://{host}:{seat.port}/lab")
            command = " ".join(server_command(seat, ip=ip, cull_after=cull_after, allow_root=allow_root))
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
    make_room(into)
    make_folders(edition, planned, log)
    write_tokens(into, planned)
    servers: list[tuple[Seat, subprocess.Popen]] = []
    with sigterm_as_interrupt():
        try:
            for seat in planned:
                command = server_command(seat, ip=ip, cull_after=cull_after, allow_root=allow_root)
                servers.append((seat, launch(seat, command, server_environment(seat, os.environ), into / LOGS)))
            sheet = room_sheet(planned, host, limit)
            write_private(into / SHEET, sheet)
        except BaseException:  # a later seat's server did not start, or Ctrl-C: stop those started, then say why
            stop_servers([process for _, process in servers], grace, log)
            raise
        log(sheet.rstrip())
        log(f"room: {len(planned)} server(s) running; this list is in {into / SHEET}; Ctrl-C stops them all")
        return serve(servers, stop_after=stop_after, grace=grace, log=log)


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
    parser.add_argument(
        "--allow-root",
        action="store_true",
        help="start the servers although this account is root (their kernels run as root): a container only",
    )
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
            allow_root=args.allow_root,
            dry_run=args.dry_run,
        )
    except RoomError as error:
        print(f"room: {error}", file=sys.stderr)
        return 2
    except OSError as error:  # a copy, a log or a server that could not be made: no traceback, a way out
        print(f"room: {error}: {_remedy(error)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as interruption:  # Ctrl-C, or SIGTERM as processes.Terminated
        print("room: interrupted before the servers were running; those started are stopped", file=sys.stderr)
        return mps.TERMINATED if isinstance(interruption, processes.Terminated) else mps.INTERRUPTED


def _remedy(error: OSError) -> str:
    """What the teacher can do about an OSError the room met.

    >>> _remedy(PermissionError(13, "Permission denied"))[:31]
    'give this account access to it,'
    """
    if isinstance(error, PermissionError):
        return "give this account access to it, or choose another --into"
    if error.errno in (errno.ENOSPC, errno.EDQUOT):
        return "free some disk space (or choose an --into on another disk), then start the room again"
    if isinstance(error, FileNotFoundError):
        return "check that it is there (the --edition, the --into, the Python that runs the servers)"
    return "mend what it names, then start the room again (seats already copied are kept)"


if __name__ == "__main__":
    sys.exit(main())
