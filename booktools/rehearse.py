"""Rehearse a workshop on one GPU: several seats at once, each running an agenda's chapters as a participant would.

    python -m booktools.rehearse --agenda two-hours --seats 8 --limit 9G
    make rehearse AGENDA=two-hours SEATS=8 LIMIT=9G

writes the participant edition (:mod:`booktools.workshop`) into a scratch folder, gives each seat its own copy,
starts CUDA MPS with ``LIMIT`` per client (:func:`booktools.mps.limited`, stopped on every path), and starts
every seat at once. A seat executes the agenda's notebooks in order, top to bottom, and goes on after a chapter
fails, as a participant would; the first seat is the teacher's and runs the book's own notebooks, solutions
included, as the reference. For each seat and chapter the record keeps whether it passed, its wall time, the
first error, and the peak of GPU memory the seat's processes held (NVML); for the whole rehearsal, the GPU, its
total memory, its peak in use and the wall time. Records are appended to ``runs/rehearsals.json``; the teachers'
page states seats per GPU only from them.

A plan that cannot fit is refused before anything starts: SEATS times LIMIT must fit the card's memory.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from booktools import mps, teaching, workshop
from booktools.paths import ROOT, RUNS
from support.units import GIB

RECORDS = RUNS / "rehearsals.json"


class RehearsalError(ValueError):
    """The rehearsal cannot run as asked: the message says why and what to change."""


@dataclass
class ChapterAtSeat:
    chapter: str
    passed: bool
    seconds: float
    error: str | None = None


@dataclass
class Seat:
    seat: int
    edition: str  # "participant", or "teacher" for the book's notebooks with their solutions
    chapters: list[ChapterAtSeat] = field(default_factory=list)
    peak_bytes: int | None = None  # GPU memory held by the seat's processes at their peak (NVML); None if unread

    @property
    def passed(self) -> bool:
        return bool(self.chapters) and all(c.passed for c in self.chapters)

    @property
    def seconds(self) -> float:
        return sum(c.seconds for c in self.chapters)


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

    @property
    def passed_seats(self) -> int:
        return sum(seat.passed for seat in self.seats)

    def summary(self) -> str:
        """One line: seats passed, the slowest seat's time, the GPU's peak."""
        slowest = max((seat.seconds for seat in self.seats), default=0.0)
        peak = "unread" if self.gpu_peak_bytes is None else f"{self.gpu_peak_bytes / GIB:.1f} GiB"
        return (
            f"{self.agenda}, {len(self.seats)} seats of {self.limit} on {self.gpu}: {self.passed_seats} passed every "
            f"chapter; the slowest seat took {slowest / 60:.1f} min; GPU peak {peak} of "
            f"{self.gpu_total_bytes / GIB:.1f} GiB"
        )

    @classmethod
    def from_dict(cls, data: dict) -> Rehearsal:
        seats = [
            Seat(s["seat"], s["edition"], [ChapterAtSeat(**c) for c in s["chapters"]], s["peak_bytes"])
            for s in data["seats"]
        ]
        return cls(**{**data, "seats": seats})


def check_plan(seats: int, limit: str, total_bytes: int) -> None:
    """Refuse a plan whose seats cannot all hold their limit on a card of ``total_bytes``.

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
    per_seat = mps_limit_bytes(limit)
    if seats * per_seat > total_bytes:
        raise RehearsalError(
            f"{seats} seats of {limit} need {seats * per_seat / GIB:.1f} GiB and this GPU has "
            f"{total_bytes / GIB:.1f} GiB: give each seat at most {int(total_bytes / seats // GIB)}G "
            f"(--limit {int(total_bytes / seats // GIB)}G), or use {int(total_bytes // per_seat)} seats"
        )


def mps_limit_bytes(limit: str) -> int:
    """``16G`` or ``8192M`` in bytes."""
    from booktools.runs import limit_bytes

    return limit_bytes(limit)


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


def seat_gpu_bytes() -> int | None:
    """GPU memory held now by this process's descendants (the seat's kernels), from NVML; None if unreadable."""
    try:
        import psutil
        import pynvml

        pynvml.nvmlInit()
        handle = pynvml.nvmlDeviceGetHandleByIndex(0)
        ours = {child.pid for child in psutil.Process().children(recursive=True)}
        found = pynvml.nvmlDeviceGetComputeRunningProcesses(handle)
        return sum(p.usedGpuMemory or 0 for p in found if p.pid in ours)
    except Exception:  # no NVML, no driver, or MPS hiding the clients: the record says "unread"
        return None


def run_seat(
    folder: Path,
    chapters: Sequence[str],
    *,
    execute: Callable[[Path], None] | None = None,
    read: Callable[[], int | None] = seat_gpu_bytes,
) -> tuple[list[ChapterAtSeat], int | None]:
    """Execute ``chapters`` in ``folder`` in order, going on after a failure; return each chapter's result and the
    peak of GPU memory the seat's processes held."""
    from booktools.notebooks import NotebookFailed, execute_notebook
    from booktools.runs import MemorySampler

    execute = execute or execute_notebook
    results = []
    with MemorySampler(read, interval=0.5) as sampler:
        for name in chapters:
            begun = time.perf_counter()
            try:
                execute(folder / f"{name}.ipynb")
                results.append(ChapterAtSeat(name, True, time.perf_counter() - begun))
            except NotebookFailed as failure:
                first = str(failure).splitlines()[1] if "\n" in str(failure) else str(failure)
                results.append(ChapterAtSeat(name, False, time.perf_counter() - begun, first[:300]))
    return results, (sampler.peak or None)


def seat_command(folder: Path, chapters: Sequence[str], out: Path) -> list[str]:
    """The command that runs one seat in its own process (``python -m booktools.rehearse seat ...``)."""
    return [sys.executable, "-m", "booktools.rehearse", "seat", "--folder", str(folder), "--out", str(out), *chapters]


def rehearse(
    agenda: str,
    seats: int,
    limit: str,
    *,
    teacher: bool = True,
    device: int = 0,
    machine: Callable[[], tuple[str, str, int]] | None = None,
    command: Callable[[Path, Sequence[str], Path], list[str]] = seat_command,
    read_gpu: Callable[[], int | None] | None = None,
    log: Callable[[str], None] = print,
) -> Rehearsal:
    """Run ``seats`` seats of ``agenda`` at once under MPS with ``limit`` each; return what happened."""
    from booktools.runs import MemorySampler, gpu_memory_used

    chapters = teaching.agenda(agenda)
    gpu, driver, total = (machine or this_gpu)()
    check_plan(seats, limit, total)
    with tempfile.TemporaryDirectory(prefix="rehearsal-") as scratch:
        folders = prepare_seats(chapters, seats, Path(scratch), teacher=teacher)
        results = [Path(scratch) / f"seat-{index:02d}.json" for index in range(1, seats + 1)]
        begun = time.perf_counter()
        with mps.limited(limit, device=device) as environment, MemorySampler(read_gpu or gpu_memory_used) as gpu_use:
            log(f"rehearse: {seats} seats of {agenda} ({', '.join(chapters)}) under MPS, {limit} each")
            processes = [
                subprocess.Popen(command(folder, chapters, out), cwd=folder, env=environment)
                for (folder, _), out in zip(folders, results, strict=True)
            ]
            try:
                for process in processes:
                    process.wait()
            finally:
                for process in processes:  # an interruption leaves no seat running on the GPU
                    if process.poll() is None:
                        process.kill()
        wall = time.perf_counter() - begun
        seat_records = []
        for index, ((_, kind), out) in enumerate(zip(folders, results, strict=True), start=1):
            if out.exists():
                data = json.loads(out.read_text())
                seat_records.append(Seat(index, kind, [ChapterAtSeat(**c) for c in data["chapters"]], data["peak"]))
            else:
                seat_records.append(Seat(index, kind, [ChapterAtSeat(chapters[0], False, 0.0, "the seat died")]))
    return Rehearsal(
        agenda, limit, gpu, driver, total, time.strftime("%Y-%m-%d"), wall, gpu_use.peak or None, seat_records
    )


def this_gpu() -> tuple[str, str, int]:
    """GPU 0's name, the driver's version and the card's total memory, or :class:`RehearsalError` without one."""
    from support import env

    probe = env.probe_gpus()
    found = env.card_memory()
    if not probe.available or found is None:
        raise RehearsalError(f"a rehearsal needs the GPU the workshop will use, and none is usable: {probe.problem}")
    return probe.gpus[0].name, probe.driver_version or "unknown", found.total


def load(path: Path = RECORDS) -> list[Rehearsal]:
    if not path.exists():
        return []
    return [Rehearsal.from_dict(item) for item in json.loads(path.read_text())["rehearsals"]]


def record(rehearsal: Rehearsal, path: Path = RECORDS) -> None:
    """Append ``rehearsal`` to the records."""
    kept = [asdict(item) for item in load(path)] + [asdict(rehearsal)]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"rehearsals": kept}, indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m booktools.rehearse", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="action")
    seat = sub.add_parser("seat", help="(used by the rehearsal) run one seat's chapters in a folder")
    seat.add_argument("--folder", type=Path, required=True)
    seat.add_argument("--out", type=Path, required=True)
    seat.add_argument("chapters", nargs="+")
    parser.add_argument("--agenda", default="two-hours", help=f"one of {', '.join(teaching.AGENDAS)}")
    parser.add_argument("--seats", type=int, default=4)
    parser.add_argument("--limit", default="16G", help="GPU memory per seat under MPS, e.g. 9G")
    parser.add_argument("--no-teacher", action="store_true", help="every seat runs the participant edition")
    args = parser.parse_args(argv)
    if args.action == "seat":
        chapters, peak = run_seat(args.folder, args.chapters)
        args.out.write_text(json.dumps({"chapters": [asdict(c) for c in chapters], "peak": peak}))
        return 0 if all(c.passed for c in chapters) else 1
    try:
        done = rehearse(args.agenda, args.seats, args.limit, teacher=not args.no_teacher)
    except (RehearsalError, ValueError, mps.MpsError, workshop.WorkshopError) as error:
        print(f"rehearse: {error}", file=sys.stderr)
        return 2
    record(done)
    for seat in done.seats:
        failed = [c for c in seat.chapters if not c.passed]
        said = "; ".join(f"{c.chapter}: {c.error}" for c in failed) or "every chapter passed"
        print(f"seat {seat.seat} ({seat.edition}): {seat.seconds / 60:.1f} min, {said}")
    print(done.summary())
    return 0 if done.passed_seats == len(done.seats) else 1


if __name__ == "__main__":
    sys.exit(main())
