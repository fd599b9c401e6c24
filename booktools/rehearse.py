"""Rehearse a workshop on one GPU: several seats at once, each running an agenda's chapters as a participant would.

    python -m booktools.rehearse --agenda two-hours --seats 8 --limit 9G
    make rehearse AGENDA=two-hours SEATS=8 LIMIT=9G

writes the participant edition (:mod:`booktools.workshop`) into a scratch folder, gives each seat its own copy,
starts CUDA MPS with ``LIMIT`` per client (:func:`booktools.mps.limited`, stopped on every path), and starts
every seat at once. A seat executes the agenda's notebooks in order, top to bottom, and goes on after a chapter
fails, as a participant would; the first seat is the teacher's and runs the book's own notebooks, solutions
included, as the reference. For each seat and chapter the record keeps whether it passed, its wall time, the
first error, and the peak of GPU memory the seat's processes held (NVML); for the whole rehearsal, the GPU, its
total memory, its peak in use and the wall time. The GPU is the one MPS limits (GPU 0, or where
``CUDA_VISIBLE_DEVICES`` is set, the first it names), read by NVML's index of it
(:func:`booktools.mps.limited_cards`), as :mod:`booktools.room` reads it. Records are appended to
``runs/rehearsals.json``; the teachers' page states seats per GPU only from them.

A plan that cannot fit is refused before anything starts: SEATS times LIMIT must fit that card's memory, and
LIMIT must hold the largest peak the agenda's chapters were seen at (each chapter's first cell would refuse a
smaller share); ``--skip-memory-check`` rehearses a smaller share anyway, to find out whether it runs. Seats run
as participants do: from a folder outside the repository, importing the installed book (no ``PYTHONPATH``),
with ``XLA_PYTHON_CLIENT_PREALLOCATE=false``. A seat past ``--timeout`` is stopped with its kernels; a
rehearsal cut short is recorded as such, with what every seat finished; failed notebooks are kept under
``runs/rehearsals/``. ``--chapters`` rehearses part of an agenda, to split a long one across several runs.
``--two-kernels`` makes the last seat (a participant's, unless it is the only seat) one with two notebooks running at
once: it executes its chapters two at a time, each in its own kernel, and each kernel is an MPS client with a share
of its own, so that seat may hold two shares where the plan gave it one. Its time is then its wall time, not the
sum of its chapters'.

Under MPS a fatal GPU fault (an illegal address) in one client is reported to every client on that GPU, and the
server accepts no new client until they have all exited: one seat's fault can stop the room. A rehearsal shows
it as the same error at every seat at once.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from booktools import freshness, mps, records, teaching, workshop
from booktools.notebooks import NotebookFailed, execute_notebook
from booktools.paths import CHAPTERS, ROOT, RUNS
from booktools.processes import stop_all
from booktools.runs import MemorySampler, gpu_memory_used, limit_bytes
from support import env
from support.units import GIB

RECORDS = records.REHEARSALS.path


class RehearsalError(ValueError):
    """The rehearsal cannot run as asked: the message says why and what to change."""


#: How a seat's first error names a claim that did not hold, as :class:`support.claims.ClaimError` words it
#: (``"cell 99: ClaimError: ecg.x does not hold: 0.529, needs at most 0.5; ..."``): the claim's name, then what it
#: measured up to the bar (for a comparison, "value against control" up to the control's name in brackets).
CLAIM_FAILED = re.compile(r"ClaimError: (?P<name>\S+) does not hold(?:: (?P<figure>.*?)(?:, needs| \(|$))?")
#: The errors :func:`read_seat` gives the chapters a seat never finished: the rehearsal's reason, not the chapter's.
NOT_FINISHED = ("interrupted", "not finished within")


@dataclass
class ChapterAtSeat:
    chapter: str
    passed: bool
    seconds: float
    error: str | None = None

    @property
    def failed_claim(self) -> str | None:
        """The claim the chapter stopped at, or None (it passed, or stopped at another error).

        >>> ChapterAtSeat("06", False, 1.0, "cell 9: ClaimError: ecg.fast does not hold: 0.6").failed_claim
        'ecg.fast'
        >>> ChapterAtSeat("06", False, 1.0, "cell 9: CUDARuntimeError: illegal address").failed_claim is None
        True
        """
        found = CLAIM_FAILED.search(self.error or "")
        return found["name"] if found else None

    @property
    def claim_figure(self) -> str | None:
        """What the claim the chapter stopped at measured, as its error printed it, without the bar: the value, or
        for a comparison "value against control"; None where the chapter did not stop at a claim or the error was
        cut before the figure.

        >>> ChapterAtSeat("03", False, 1.0, "cell 9: ClaimError: a.b does not hold: 115 ms against 87.7 ms (the "
        ...               "GPU engine): 0.77× better, needs 1.2×").claim_figure
        '115 ms against 87.7 ms'
        """
        found = CLAIM_FAILED.search(self.error or "")
        return found["figure"] or None if found else None

    @property
    def never_finished(self) -> bool:
        """Whether the seat never finished the chapter: the rehearsal was interrupted or the seat ran out of time."""
        return not self.passed and (self.error or "").startswith(NOT_FINISHED)

    @property
    def failure(self) -> str | None:
        """How the chapter failed, in the three kinds a teacher reads differently: ``"claim"`` (a claim did not
        hold), ``"unfinished"`` (:attr:`never_finished`), ``"other"`` (a crash, a refusal, an assert); None when
        it passed.

        >>> [ChapterAtSeat("06", ok, 1.0, error).failure for ok, error in ((True, None), (False, "interrupted"))]
        [None, 'unfinished']
        """
        if self.passed:
            return None
        if self.failed_claim is not None:
            return "claim"
        return "unfinished" if self.never_finished else "other"


@dataclass
class Seat:
    seat: int
    edition: str  # "participant", or "teacher" for the book's notebooks with their solutions
    chapters: list[ChapterAtSeat] = field(default_factory=list)
    peak_bytes: int | None = None  # GPU memory held by the seat's processes at their peak (NVML); None if unread
    kernels: int = 1  # how many of its chapters ran at once, each in its own kernel (--two-kernels: 2)
    wall_seconds: float | None = None  # from its first chapter's start to its last one's end; None in old records

    @property
    def passed(self) -> bool:
        return bool(self.chapters) and all(c.passed for c in self.chapters)

    @property
    def seconds(self) -> float:
        """The seat's time: its wall time where recorded (chapters that ran at once overlap), else the sum of its
        chapters' times (one after another, as every seat of the records before two-kernel seats ran)."""
        return self.wall_seconds if self.wall_seconds is not None else sum(c.seconds for c in self.chapters)


@dataclass
class Rehearsal:
    agenda: str
    limit: str
    gpu: str
    driver: str
    gpu_total_bytes: int
    date: str
    wall_seconds: float
    gpu_peak_bytes: int | None
    seats: list[Seat]
    chapters: list[str] = field(default_factory=list)  # what the seats ran: the agenda, or a part of it
    memory_check: bool = True  # False: the chapters' first cells did not check the share (--skip-memory-check)
    interrupted: bool = False  # cut short (Ctrl-C, SIGTERM): the seats' results are what they had finished
    #: each chapter's code as the seats ran it (:func:`booktools.freshness.cells_hash` of the book's notebook); {} in
    #: records made before it was kept
    cells: dict[str, str] = field(default_factory=dict)
    #: each chapter's support code as the seats ran it (:func:`support_of`: the ``support/`` files the book's notebook's
    #: fingerprint lists); {} in records made before it was kept
    support: dict[str, str] = field(default_factory=dict)
    #: its place in ``runs/rehearsals.json``, from 1 (:func:`load` sets it; not written to the record); None for a
    #: rehearsal not read from the records
    number: int | None = field(default=None, compare=False)

    @property
    def participants(self) -> list[Seat]:
        return [seat for seat in self.seats if seat.edition == "participant"]

    @property
    def passed_seats(self) -> int:
        """Participant seats that passed every chapter (the teacher's seat is the reference, counted apart)."""
        return sum(seat.passed for seat in self.participants)

    def summary(self) -> str:
        """One line: its :attr:`name`, participant seats passed, the teacher's seat, the slowest seat's time, the GPU's
        peak, what failed and which chapters ran an earlier version (:meth:`versions`)."""
        slowest = max((seat.seconds for seat in self.seats), default=0.0)
        peak = "unread" if self.gpu_peak_bytes is None else f"{self.gpu_peak_bytes / GIB:.1f} GiB"
        teacher = [seat for seat in self.seats if seat.edition == "teacher"]
        said = f"; the teacher's seat {'passed' if teacher[0].passed else 'FAILED'}" if teacher else ""
        count = f"{len(self.chapters)} chapter{'' if len(self.chapters) == 1 else 's'}"
        part = "" if not self.chapters else f" ({count}: {', '.join(self.chapters)})"
        doubled = [seat for seat in self.seats if seat.kernels > 1]
        held = "".join(
            f"; seat {seat.seat} ran {seat.kernels} kernels at once and {'passed' if seat.passed else 'FAILED'}"
            for seat in doubled
        )
        return (
            ("" if self.number is None else f"{self.name}, ")
            + f"{self.agenda}{part}, {len(self.seats)} seats of {self.limit} on {self.gpu}: {self.passed_seats} of "
            f"{len(self.participants)} participant seats passed every chapter{said}; the slowest seat took "
            f"{slowest / 60:.1f} min; GPU peak {peak} of {self.gpu_total_bytes / GIB:.1f} GiB"
            + held
            + self.what_failed()
            + ("" if self.memory_check else "; memory check skipped")
            + ("; INTERRUPTED" if self.interrupted else "")
            + self.versions()
        )

    @property
    def name(self) -> str:
        """How a teacher finds the record: ``"rehearsal 10"``, the tenth in ``runs/rehearsals.json`` (records of the
        same agenda, seats, share and date are otherwise alike); ``"this rehearsal"`` before it is recorded."""
        return "this rehearsal" if self.number is None else f"rehearsal {self.number}"

    def ran_current(self, chapter: str, folder: Path = CHAPTERS, root: Path | None = None) -> bool | None:
        """Whether the seats ran ``chapter``'s code as it is now: its code cells (:func:`code_of`) and, where the
        record keeps them, its support files (:func:`support_of`), against the notebooks in ``folder`` and the
        files under ``root`` (``folder``'s parent by default). False when either recorded one changed; None when
        neither changed and the cells' code was not recorded (a record from before it was kept)."""
        return None if (changed := self._changed(chapter, folder, root)) is None else not changed

    def _changed(self, chapter: str, folder: Path, root: Path | None) -> list[str] | None:
        """What of ``chapter``'s recorded code differs from now (``"code cells"``, ``"support files"``); None where
        nothing recorded differs and either its cells were not recorded (None in ``cells``: no notebook was there)
        or the record keeps support files but not this chapter's (the backfill left it out: which ran is unknown)."""
        what = []
        if self.cells.get(chapter) and self.cells[chapter] != code_of(chapter, folder):
            what.append("code cells")
        if self.support.get(chapter) and self.support[chapter] != support_of(chapter, folder, root):
            what.append("support files")
        if what:
            return what
        support_unknown = bool(self.support) and not self.support.get(chapter)
        return None if not self.cells.get(chapter) or support_unknown else what

    def versions(self, folder: Path = CHAPTERS, root: Path | None = None) -> str:
        """For :meth:`summary`: the chapters whose code has changed since the seats ran them (their code cells as
        :func:`booktools.freshness.cells_hash` counts them, against the notebooks in ``folder`` now, or the
        ``support/`` files their notebooks' fingerprints list, :func:`support_of`, under ``root``), and those whose
        code was not recorded; empty when every chapter ran as it is now."""
        ran = self.chapters or sorted({c.chapter for seat in self.seats for c in seat.chapters})
        earlier, unknown = [], []
        for chapter in ran:
            changed = self._changed(chapter, folder, root)
            if changed is None:
                unknown.append(chapter)
            elif changed:
                earlier.append(f"{chapter} (its {' and '.join(changed)} changed since)")
        said = ""
        if earlier:
            said += f"; ran an earlier version of {', '.join(earlier)}"
        if unknown:
            said += f"; which version of {', '.join(unknown)} ran is not recorded"
        return said

    def what_failed(self) -> str:
        """What stopped the chapters that failed, for :meth:`summary`, in three kinds a teacher reads differently:
        each claim that did not hold, with the number of seats it stopped (a claim measures the room's contention
        too); the chapters never finished (the rehearsal was interrupted or a seat ran out of time); and the
        chapters that stopped at any other error (a crash, a fault: one to fix). A kind with nothing in it is left
        out; empty when every chapter passed."""
        claims: dict[str, int] = {}
        unfinished = other = 0
        for seat in self.seats:
            for chapter in seat.chapters:
                if chapter.failure == "claim":
                    claims[chapter.failed_claim] = claims.get(chapter.failed_claim, 0) + 1
                elif chapter.failure == "unfinished":
                    unfinished += 1
                elif chapter.failure == "other":
                    other += 1
        said = []
        if claims:
            stopped = ", ".join(f"{name} at {n} seat{'s' if n > 1 else ''}" for name, n in claims.items())
            said.append(f"claims that did not hold: {stopped}")
        if unfinished:
            said.append(f"{unfinished} chapter{'' if unfinished == 1 else 's'} not finished")
        if other:
            said.append(f"{other} chapter{'' if other == 1 else 's'} stopped at another error")
        return "".join(f"; {part}" for part in said)

    @classmethod
    def from_dict(cls, data: dict) -> Rehearsal:
        seats = [
            Seat(
                s["seat"],
                s["edition"],
                [ChapterAtSeat(**c) for c in s["chapters"]],
                s["peak_bytes"],
                s.get("kernels", 1),
                s.get("wall_seconds"),
            )
            for s in data["seats"]
        ]
        return cls(**{**data, "seats": seats})


def code_of(chapter: str, folder: Path = CHAPTERS) -> str | None:
    """The hash of ``chapter``'s code cells in ``folder`` (:func:`booktools.freshness.cells_hash`), or None where
    the notebook is not there."""
    path = folder / f"{chapter}.ipynb"
    return freshness.cells_hash(json.loads(path.read_text())) if path.is_file() else None


def support_of(chapter: str, folder: Path = CHAPTERS, root: Path | None = None) -> str | None:
    """A hash of the ``support/`` files ``chapter``'s notebook in ``folder`` lists in its committed fingerprint
    (``metadata.book.fingerprint.support``, :func:`booktools.freshness.fingerprint`), each as
    :func:`booktools.freshness.file_hash` counts it under ``root`` (``folder``'s parent by default), a file that is
    gone counted as such: the chapter's code beyond its cells. None where the notebook is not there or has no
    fingerprint."""
    path = folder / f"{chapter}.ipynb"
    if not path.is_file():
        return None
    return support_hash(json.loads(path.read_text()), folder.parent if root is None else root)


def support_hash(notebook: Mapping, root: Path, read: Callable[[str], bytes | None] | None = None) -> str | None:
    """The hash :func:`support_of` gives, of the files ``notebook``'s fingerprint lists and those it says its fresh
    processes run (:data:`booktools.freshness.CHILD_KEY`: chapter 6's command line), read under ``root`` (or by
    ``read``, a file's bytes by its name, None where it is gone: the backfill reads them from git)."""
    book = notebook.get("metadata", {}).get(freshness.BOOK_KEY, {})
    listed = book.get(freshness.FINGERPRINT_KEY, {})
    if not listed or "support" not in listed:
        return None
    if read is None:

        def read(name: str) -> bytes | None:
            return (root / name).read_bytes() if (root / name).is_file() else None

    lines = []
    for name in freshness.support_names(notebook, listed["support"]):
        data = read(name)
        lines.append(f"{name} {'gone' if data is None else freshness.code_hash(data, Path(name).suffix)}")
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]


def check_plan(
    seats: int, limit: str, total_bytes: int, need: tuple[str, int] | None = None, *, option: str = "--limit"
) -> None:
    """Refuse a plan whose seats cannot all hold their limit on a card of ``total_bytes``, or whose limit is below
    ``need`` (the chapter and the peak it was seen at), which that chapter's first cell would refuse. ``option`` is
    how the advice names the share (``booktools.room`` runs under ``booktools.mps --limit``).

    >>> check_plan(8, "9G", 80 * GIB)
    >>> try:
    ...     check_plan(8, "16G", 80 * GIB)
    ... except RehearsalError as error:
    ...     for part in str(error).split(": "):
    ...         print(part)
    8 seats of 16G need 128.0 GiB and this GPU has 80.0 GiB
    give each seat at most 10G (--limit 10G), or use 5 seats
    """
    if seats < 1:
        raise RehearsalError(f"a rehearsal needs at least one seat, not {seats}")
    mps.check_limit(limit)
    per_seat = limit_bytes(limit)
    if per_seat > total_bytes:
        raise RehearsalError(
            f"a share of {limit} is more than this GPU's {total_bytes / GIB:.1f} GiB: give each seat less"
        )
    if seats * per_seat > total_bytes:
        raise RehearsalError(
            f"{seats} seats of {limit} need {seats * per_seat / GIB:.1f} GiB and this GPU has "
            f"{total_bytes / GIB:.1f} GiB: give each seat at most {int(total_bytes / seats // GIB)}G "
            f"({option} {int(total_bytes / seats // GIB)}G), or use {int(total_bytes // per_seat)} seats"
        )
    if need is not None and per_seat < need[1]:
        chapter, peak = need
        raise RehearsalError(
            f"{limit} is below the {peak / GIB:.1f} GiB that {chapter} was seen to peak at, and its first cell would "
            f"refuse every seat: give each seat at least {-(-peak // GIB)}G, or add --skip-memory-check to find out "
            "whether the agenda runs in the smaller share"
        )


def prepare_seats(chapters: Sequence[str], seats: int, root: Path, *, teacher: bool = True) -> list[tuple[Path, str]]:
    """One folder per seat under ``root``: the participant edition of ``chapters``, or (the first seat, when
    ``teacher``) the book's own notebooks with their solutions and the same files. Returns (folder, edition)."""
    book = ROOT / "chapters"
    paths = [book / f"{name}.ipynb" for name in chapters]
    edition = root / "edition"
    workshop.write_edition(paths, edition)
    folders = []
    for seat in range(1, seats + 1):
        folder = root / f"seat-{seat:02d}"
        shutil.copytree(edition, folder)
        kind = "participant"
        if teacher and seat == 1:
            kind = "teacher"
            for path in paths:
                shutil.copy2(path, folder / path.name)
        folders.append((folder, kind))
    return folders


def seat_gpu_bytes(nvml=None, descendants=None, indexes: Sequence[int] | None = None) -> int | None:
    """GPU memory held now by this process's descendants (the seat's kernels) on the GPUs NVML numbers ``indexes``,
    by default those MPS limits (:func:`limited_indexes`), from NVML: the compute processes and, under MPS, the MPS
    clients NVML lists apart. None when NVML cannot answer, or names none of the seat's processes (a container
    hides the host's process ids from NVML): the record then says "unread"."""
    try:
        if indexes is None:
            indexes = limited_indexes()
        if nvml is None:
            import pynvml as nvml

            nvml.nvmlInit()
        if descendants is None:
            import psutil

            descendants = {child.pid for child in psutil.Process().children(recursive=True)}
        ours = []
        for index in indexes:
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            listed = list(nvml.nvmlDeviceGetComputeRunningProcesses(handle))
            mps_clients = getattr(nvml, "nvmlDeviceGetMPSComputeRunningProcesses", None)
            if mps_clients is not None:
                listed += list(mps_clients(handle))
            ours += {p.pid: p.usedGpuMemory or 0 for p in listed if p.pid in descendants}.values()
    except Exception:  # noqa: BLE001 - no NVML, no driver: nothing to read
        return None
    return sum(ours) if ours else None


def limited_indexes(environ: Mapping[str, str] | None = None) -> list[int]:
    """NVML's indexes of the GPUs MPS limits, as a seat reads them from its environment (the rehearsal's, with
    :data:`booktools.mps.DEVICES_VARIABLE`): GPU 0 outside MPS; a GPU NVML's index of which is unknown is left out.

    >>> limited_indexes({}), limited_indexes({mps.DEVICES_VARIABLE: "0", "CUDA_VISIBLE_DEVICES": "2,0"})
    ([0], [2])
    """
    environ = os.environ if environ is None else environ
    found = (mps.nvml_index(device, environ) for device in mps.limited_devices(environ))
    return [index for index in found if index is not None]


def run_seat(
    folder: Path,
    chapters: Sequence[str],
    *,
    out: Path | None = None,
    execute: Callable[[Path], None] | None = None,
    read: Callable[[], int | None] = seat_gpu_bytes,
    kernels: int = 1,
) -> tuple[list[ChapterAtSeat], int | None]:
    """Execute ``chapters`` in ``folder`` in order, going on after a failure (a failed cell, a dead kernel, a
    timeout); return each chapter's result (in the order of ``chapters``) and the peak of GPU memory the seat's
    processes held. With ``kernels=2`` two chapters run at once, each in its own kernel, the next starting when one
    ends: a participant with two notebooks running. With ``out``, what the seat has finished is written there
    after every chapter, so a seat stopped later keeps it."""
    if kernels < 1:
        raise RehearsalError(f"a seat runs its chapters in at least one kernel, not {kernels}")
    execute = execute or execute_notebook
    finished: dict[str, ChapterAtSeat] = {}
    lock = threading.Lock()
    started = time.perf_counter()

    def one(name: str) -> None:
        begun = time.perf_counter()
        try:
            execute(folder / f"{name}.ipynb")
            result = ChapterAtSeat(name, True, time.perf_counter() - begun)
        except NotebookFailed as failure:
            first = str(failure).splitlines()[1] if "\n" in str(failure) else str(failure)
            result = ChapterAtSeat(name, False, time.perf_counter() - begun, first[:300])
        except Exception as error:  # noqa: BLE001 - a kernel that died or timed out fails this chapter only
            said = f"{type(error).__name__}: {error}"
            result = ChapterAtSeat(name, False, time.perf_counter() - begun, said[:300])
        with lock:
            finished[name] = result
            if out is not None:
                done = [finished[c] for c in chapters if c in finished]
                write_seat(out, done, sampler.peak or None, time.perf_counter() - started)

    with MemorySampler(read, interval=0.5) as sampler:
        if kernels == 1:
            for name in chapters:
                one(name)
        else:
            with ThreadPoolExecutor(max_workers=kernels) as pool:  # each execution starts a kernel of its own
                list(pool.map(one, chapters))
    return [finished[name] for name in chapters], (sampler.peak or None)


def write_seat(out: Path, chapters: Sequence[ChapterAtSeat], peak: int | None, wall: float | None = None) -> None:
    """What a seat has finished and its wall time so far, as the rehearsal reads it back (written atomically: a
    seat stopped mid-write leaves what it had finished before, not half a file)."""
    records.write_atomic(out, json.dumps({"chapters": [asdict(c) for c in chapters], "peak": peak, "wall": wall}))


def read_seat(out: Path, index: int, kind: str, chapters: Sequence[str], why: str, kernels: int = 1) -> Seat:
    """Seat ``index`` as it wrote itself to ``out``; chapters it never finished are failed with ``why``."""
    done: list[ChapterAtSeat] = []
    peak = wall = None
    if out.exists():
        data = json.loads(out.read_text())
        done, peak, wall = [ChapterAtSeat(**c) for c in data["chapters"]], data["peak"], data.get("wall")
    finished = {c.chapter for c in done}
    done += [ChapterAtSeat(name, False, 0.0, why) for name in chapters if name not in finished]
    done.sort(key=lambda c: list(chapters).index(c.chapter))
    return Seat(index, kind, done, peak, kernels, wall)


def seat_environment(environment: dict[str, str], *, memory_check: bool = True) -> dict[str, str]:
    """A participant's environment under MPS: the installed book (no ``PYTHONPATH`` into the repository), JAX
    without preallocation (as the teachers' page sets the server), and the memory check on or off."""
    seat = {key: value for key, value in environment.items() if key != "PYTHONPATH"}
    seat["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    if not memory_check:
        seat["GPU_INTEROP_SKIP_MEMORY_CHECK"] = "1"
    return seat


def check_installed(environment: dict[str, str], folder: Path) -> None:
    """Refuse to start when a seat could not import the book from ``folder`` (a participant's folder, outside the
    repository): the chapters import ``support``, and the seats ``booktools``."""
    found = subprocess.run(
        [sys.executable, "-c", "import booktools, support"], cwd=folder, env=environment, capture_output=True
    )
    if found.returncode != 0:
        raise RehearsalError(
            f"{sys.executable} cannot import the book outside its repository, as a participant's kernel must: "
            "install it first (make gpu-env, or pip install -e '.[gpu,test]'), then run make rehearse "
            "PYTHON=.venv-gpu/bin/python"
        )


def seat_command(folder: Path, chapters: Sequence[str], out: Path, kernels: int = 1) -> list[str]:
    """The command that runs one seat in its own process (``python -m booktools.rehearse seat ...``)."""
    command = [sys.executable, "-m", "booktools.rehearse", "seat", "--folder", str(folder), "--out", str(out)]
    return command + (["--kernels", str(kernels)] if kernels > 1 else []) + list(chapters)


def rehearse(
    agenda: str,
    seats: int,
    limit: str,
    *,
    chapters: Sequence[str] | None = None,
    teacher: bool = True,
    memory_check: bool = True,
    two_kernels: bool = False,
    timeout_s: float = 3600,
    device: int = 0,
    keep: Path | None = None,
    machine: Callable[[], tuple[str, str, int]] | None = None,
    command: Callable[..., list[str]] = seat_command,
    read_gpu: Callable[[], int | None] | None = None,
    log: Callable[[str], None] = print,
) -> Rehearsal:
    """Run ``seats`` seats of ``agenda`` (or of ``chapters``, a part of it) at once under MPS with ``limit`` each
    on ``device`` (as MPS numbers it: its position in ``CUDA_VISIBLE_DEVICES`` where that is set); return what
    happened. The plan's fit, the GPU's total and its peak are those of that card (:func:`this_gpu`); ``machine``
    and ``read_gpu`` stand in for them in tests. With ``two_kernels`` the last seat runs its chapters two at a
    time (:func:`run_seat`). A seat still running after ``timeout_s`` is stopped; failed notebooks are copied to
    ``keep`` (a folder per seat) when given."""
    planned = teaching.agenda(agenda)
    chapters = list(chapters or planned)
    unknown = [name for name in chapters if name not in planned]
    if unknown:
        raise RehearsalError(f"not in the agenda {agenda}: {', '.join(unknown)} (it holds {', '.join(planned)})")
    gpu, driver, total = machine() if machine is not None else this_gpu(device)
    card_index = mps.nvml_index(device)  # the card MPS limits, as NVML numbers it: its memory is what the seats share
    check_plan(seats, limit, total, teaching.largest_need(chapters) if memory_check else None)
    two_kernels = two_kernels and len(chapters) > 1  # one chapter runs in one kernel whatever is asked
    kernels = [1] * (seats - 1) + [2 if two_kernels else 1]  # the last seat may run two chapters at once
    interrupted = False
    code = {chapter: code_of(chapter) for chapter in chapters}  # as the seats get it, before the run's minutes
    support = {chapter: support_of(chapter) for chapter in chapters}
    with tempfile.TemporaryDirectory(prefix="rehearsal-") as scratch:
        folders = prepare_seats(chapters, seats, Path(scratch), teacher=teacher)
        results = [Path(scratch) / f"seat-{index:02d}.json" for index in range(1, seats + 1)]
        begun = time.perf_counter()
        if read_gpu is None:
            read_gpu = (lambda: None) if card_index is None else functools.partial(gpu_memory_used, card_index)
        with mps.limited(limit, device=device) as environment, MemorySampler(read_gpu) as gpu_use:
            environment = seat_environment(environment, memory_check=memory_check)
            check_installed(environment, folders[0][0])
            log(f"rehearse: {seats} seats of {agenda} ({', '.join(chapters)}) under MPS, {limit} each")
            if two_kernels:
                shares = (seats + 1) * limit_bytes(limit)
                over = " (more than the card holds)" if shares > total else ""
                log(
                    f"rehearse: seat {seats} runs two chapters at once, one share each: {seats + 1} shares of {limit}, "
                    f"{shares / GIB:.1f} GiB of the card's {total / GIB:.1f} GiB{over}"
                )
            processes = [
                subprocess.Popen(
                    command(folder, chapters, out, **({"kernels": n} if n > 1 else {})),
                    cwd=folder,
                    env=environment,
                    start_new_session=True,
                )
                for (folder, _), out, n in zip(folders, results, kernels, strict=True)
            ]
            deadline = time.monotonic() + timeout_s
            try:
                while any(p.poll() is None for p in processes) and time.monotonic() < deadline:
                    time.sleep(0.5)
            except KeyboardInterrupt:
                interrupted = True
            finally:  # a seat past its time, or an interruption: no kernel stays on the GPU
                stop_all(processes, grace=10)
        wall = time.perf_counter() - begun
        why = "interrupted" if interrupted else f"not finished within {timeout_s:g} s"
        seat_records = [
            read_seat(out, index, kind, chapters, why, n)
            for index, ((_, kind), out, n) in enumerate(zip(folders, results, kernels, strict=True), start=1)
        ]
        if keep is not None:
            keep_failed(folders, keep)
    return Rehearsal(
        agenda,
        limit,
        gpu,
        driver,
        total,
        time.strftime("%Y-%m-%d"),
        wall,
        gpu_use.peak or None,
        seat_records,
        chapters,
        memory_check,
        interrupted,
        code,
        support,
    )


def keep_failed(folders: Sequence[tuple[Path, str]], keep: Path) -> None:
    """Copy each seat's failed notebooks (``NAME.failed.ipynb``, with the outputs of the failing run) to
    ``keep/seat-NN/``: what a teacher reads to learn what a room will meet."""
    for folder, _ in folders:
        for failed in sorted(folder.glob("*.failed.ipynb")):
            target = keep / folder.name
            target.mkdir(parents=True, exist_ok=True)
            shutil.copy2(failed, target / failed.name)


def this_gpu(device: int = 0, environ: Mapping[str, str] | None = None) -> tuple[str, str, int]:
    """The name of the GPU that MPS numbers ``device``, the driver's version and that card's total memory, read by
    NVML's index of it (:func:`booktools.mps.limited_cards`, as :mod:`booktools.room` reads the cards it checks),
    or :class:`RehearsalError` without it. The name is CUDA's, which numbers the GPUs as MPS does."""
    probe = env.probe_gpus()
    if not probe.available:
        raise RehearsalError(f"a rehearsal needs the GPU the workshop will use, and none is usable: {probe.problem}")
    if device >= len(probe.gpus):
        raise RehearsalError(f"there is no GPU {device} to rehearse on: CUDA sees {len(probe.gpus)} GPU(s)")
    (card,) = mps.limited_cards((device,), environ)
    if card.total is None:
        remedy = (
            "name each GPU in CUDA_VISIBLE_DEVICES by index or by its full UUID (nvidia-smi -L lists them; NVIDIA's "
            "MPS documentation recommends UUIDs), with nvidia-ml-py installed"
            if card.index is None
            else "check that nvidia-ml-py is installed and nvidia-smi lists it"
        )
        raise RehearsalError(
            f"the memory of {card.shown}, the GPU the rehearsal limits, cannot be read ({card.unread}), and the plan "
            f"is checked against it: {remedy}"
        )
    return probe.gpus[device].name, probe.driver_version or "unknown", card.total


def load(path: Path = RECORDS) -> list[Rehearsal]:
    """The recorded rehearsals (:data:`booktools.records.REHEARSALS`), oldest first; [] before the first."""
    found = [Rehearsal.from_dict(item) for item in records.load(records.REHEARSALS, path)]
    for number, rehearsal in enumerate(found, start=1):
        rehearsal.number = number
    return found


def record(rehearsal: Rehearsal, path: Path = RECORDS) -> None:
    """Append ``rehearsal`` to the records (every rehearsal is kept); its place there is its number, which
    ``rehearsal`` takes, so that what is printed after names the record (:attr:`Rehearsal.name`)."""
    data = asdict(rehearsal)
    del data["number"]  # the place in the file, not a fact of the run
    records.append(records.REHEARSALS, data, path)
    rehearsal.number = len(records.load(records.REHEARSALS, path))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m booktools.rehearse", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="action")
    seat = sub.add_parser("seat", help="(used by the rehearsal) run one seat's chapters in a folder")
    seat.add_argument("--folder", type=Path, required=True)
    seat.add_argument("--out", type=Path, required=True)
    seat.add_argument("--kernels", type=int, default=1, help="run this many chapters at once")
    seat.add_argument("chapters", nargs="+")
    parser.add_argument("--agenda", default="two-hours", help=f"one of {', '.join(teaching.AGENDAS)}")
    parser.add_argument("--seats", type=int, default=4)
    parser.add_argument("--limit", default="16G", help="GPU memory per seat under MPS, e.g. 9G")
    parser.add_argument("--no-teacher", action="store_true", help="every seat runs the participant edition")
    parser.add_argument("--chapters", nargs="+", help="rehearse these chapters of the agenda only")
    parser.add_argument("--timeout", type=float, default=3600, help="stop a seat still running after this many s")
    parser.add_argument(
        "--skip-memory-check", action="store_true", help="rehearse a share smaller than the chapters' recorded peaks"
    )
    parser.add_argument(
        "--two-kernels", action="store_true", help="the last seat runs two chapters at once, a share for each"
    )
    args = parser.parse_args(argv)
    if args.action == "seat":
        chapters, _ = run_seat(args.folder, args.chapters, out=args.out, kernels=args.kernels)
        return 0 if all(c.passed for c in chapters) else 1
    keep = RUNS / "rehearsals" / f"{time.strftime('%Y%m%d-%H%M%S')}-{args.agenda}-{args.seats}x{args.limit}"
    try:
        done = rehearse(
            args.agenda,
            args.seats,
            args.limit,
            chapters=args.chapters,
            teacher=not args.no_teacher,
            memory_check=not args.skip_memory_check,
            two_kernels=args.two_kernels,
            timeout_s=args.timeout,
            keep=keep,
        )
    except (RehearsalError, ValueError, mps.MpsError, workshop.WorkshopError) as error:
        print(f"rehearse: {error}", file=sys.stderr)
        return 2
    record(done)
    if keep.exists():
        print(f"failed notebooks, with their outputs: {keep}")
    for seat in done.seats:
        failed = [c for c in seat.chapters if not c.passed]
        said = "; ".join(f"{c.chapter}: {c.error}" for c in failed) or "every chapter passed"
        print(f"seat {seat.seat} ({seat.edition}): {seat.seconds / 60:.1f} min, {said}")
    print(done.summary())
    return 0 if done.passed_seats == len(done.participants) and not done.interrupted else 1


if __name__ == "__main__":
    sys.exit(main())
