"""Measured runs of the chapters: how long each takes and how much GPU memory it needs, on each GPU setup.

``python -m booktools.runs measure --label "H100 80GB" --mode execute chapters/*.ipynb`` runs each notebook in
its own process (``execute``: ``python -m booktools.notebooks execute``, which rewrites it with fresh outputs;
``nbval``: ``pytest --nbval`` against the committed outputs) while a thread samples the GPU's memory in use
(NVML, 5 times a second). Each run is recorded in :data:`RUNS_FILE`: wall time, the peak of memory in
use above what was in use when it started (the notebook's kernel and every process it starts), and whether it
passed. ``--parallel`` starts all the notebooks at once (several readers on one GPU) and records the wall time of
the whole group; the peak then belongs to the group, not to one chapter.

``python -m booktools.runs readme`` writes the table of :func:`runs_table` into README.md between its markers;
a test checks that the committed table is the one the committed JSON gives.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from booktools import evidence, notebooks, records
from booktools.mps import check_limit, nvml_index
from booktools.paths import README, ROOT
from support import env
from support.claims import LOG_VARIABLE
from support.needs import NEEDS_FILE, Need
from support.units import GIB, MIB

RUNS_FILE = records.CHAPTER_RUNS.path
TABLE_START, TABLE_END = "<!-- chapter-runs: start -->", "<!-- chapter-runs: end -->"


@dataclass(frozen=True)
class ChapterRun:
    """One notebook's run: seconds of wall time, peak GPU memory above the start (None in a parallel group)."""

    notebook: str
    seconds: float
    peak_bytes: int | None
    passed: bool
    summary: str = ""


@dataclass(frozen=True)
class RunGroup:
    """The chapters run under one setup (``label``), one after another or all at once."""

    label: str
    mode: str
    parallel: bool
    wall_seconds: float
    peak_bytes: int
    chapters: list[ChapterRun] = field(default_factory=list)
    limit_bytes: int | None = None  # the memory each process could use (an MPS limit); None: the whole GPU

    @classmethod
    def from_dict(cls, data: dict) -> RunGroup:
        chapters = [ChapterRun(**chapter) for chapter in data.get("chapters", [])]
        return cls(**{**data, "chapters": chapters})


class MemorySampler:
    """Samples ``read()`` (memory in use on a GPU) in a background thread; :attr:`peak` is the largest sample."""

    def __init__(self, read: Callable[[], int | None], interval: float = 0.2):
        self.read, self.interval = read, interval
        self.start_value = read() or 0
        self.peak = self.start_value
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            value = self.read()
            if value is not None:
                self.peak = max(self.peak, value)
            self._stop.wait(self.interval)

    def __enter__(self) -> MemorySampler:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def peak_above_start(self) -> int:
        return max(self.peak - self.start_value, 0)


def visible_gpu(environ: Mapping[str, str] | None = None) -> int:
    """NVML's index of the GPU a run's processes see first: NVML numbers every GPU of the machine and ignores
    ``CUDA_VISIBLE_DEVICES``, so a batch started with ``CUDA_VISIBLE_DEVICES=1`` is measured on GPU 1, not 0.
    NVML numbers GPUs by PCI bus; CUDA does so too with ``CUDA_DEVICE_ORDER=PCI_BUS_ID``, and by default puts the
    fastest first, which is the same order on a machine of identical GPUs (the book's hosts) but may not be on a
    mixed one. (Reading the bus from a CUDA context, as ``support.many_gpus.contexts`` does inside a worker, would
    make one in the process that samples; this function reads the environment only.)

    >>> visible_gpu({}), visible_gpu({"CUDA_VISIBLE_DEVICES": "1"}), visible_gpu({"CUDA_VISIBLE_DEVICES": "3,2"})
    (0, 1, 3)
    >>> visible_gpu({"CUDA_VISIBLE_DEVICES": "GPU-8f1c"})  # a UUID NVML does not find here: GPU 0 is the best guess
    0

    The list is read as :func:`booktools.mps.nvml_index` reads it (a UUID is looked up through NVML), so a run and
    a rehearsal under the same ``CUDA_VISIBLE_DEVICES`` are measured on the same card.
    """
    found = nvml_index(0, os.environ if environ is None else environ)
    return 0 if found is None else found


def gpu_memory_used(index: int | None = None) -> int | None:
    """Bytes in use by every process on the GPU that NVML numbers ``index``, by default the run's GPU
    (:func:`visible_gpu`), as NVML reports them (None when it cannot answer)."""
    found = env.card_memory(visible_gpu() if index is None else index)
    return None if found is None else found.used


def command_for(mode: str, notebook: str, python: str = sys.executable) -> list[str]:
    """The command that runs ``notebook`` in ``mode`` (``execute`` or ``nbval``).

    >>> command_for("nbval", "chapters/01_why_gpus.ipynb", "python")[:4]
    ['python', '-m', 'pytest', '--require-gpu']
    >>> command_for("execute", "chapters/01_why_gpus.ipynb", "python")
    ['python', '-m', 'booktools.notebooks', 'execute', 'chapters/01_why_gpus.ipynb']
    """
    if mode == "execute":
        return [python, "-m", "booktools.notebooks", "execute", notebook]
    if mode == "nbval":
        return [python, "-m", "pytest", "--require-gpu", "-q", "-p", "no:cacheprovider", notebook]
    raise ValueError(f"unknown mode {mode!r}; choose execute or nbval")


def _summary(output: str) -> str:
    """The last line that says something: Jupyter's warning about its kernel's transport is left out."""
    lines = [
        line.strip()
        for line in output.strip().splitlines()
        if line.strip() and "Kernel is running over TCP" not in line and "IPKernelApp" not in line
    ]
    return lines[-1][-200:] if lines else ""


def _run_together(notebooks: Sequence[str], commands: Sequence[list[str]], log) -> list[ChapterRun]:
    """Start every command at once; each chapter's time is from the common start to its own end."""
    begun = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="runs-") as scratch:
        logs = [Path(scratch) / f"{index}.log" for index in range(len(commands))]
        processes = []
        for command, path in zip(commands, logs, strict=True):
            with path.open("w") as out:
                processes.append(subprocess.Popen(command, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT, text=True))
        ended: dict[int, float] = {}
        while len(ended) < len(processes):
            for index, process in enumerate(processes):
                if index not in ended and process.poll() is not None:
                    ended[index] = time.perf_counter() - begun
            time.sleep(0.2)
        chapters = []
        for index, (notebook, process) in enumerate(zip(notebooks, processes, strict=True)):
            run = ChapterRun(notebook, ended[index], None, process.returncode == 0, _summary(logs[index].read_text()))
            chapters.append(run)
            log(f"{notebook}: {run.seconds:.0f} s, {'passed' if run.passed else 'FAILED'} · {run.summary}")
    return chapters


def measure(
    notebooks: Sequence[str],
    label: str,
    mode: str,
    *,
    parallel: bool = False,
    limit_bytes: int | None = None,
    read: Callable[[], int | None] | None = None,
    log=print,
    claims: dict[str, list[dict]] | None = None,
    log_dir: Path | None = None,
    on_chapter: Callable[[ChapterRun, list[dict]], None] | None = None,
) -> RunGroup:
    """Run ``notebooks`` under the current GPU setup and return what was measured (see the module docstring).

    One at a time, each notebook runs with :data:`support.claims.LOG_VARIABLE` set; the claims it checked are put
    in ``claims`` (by notebook name) when a dict is given, and its whole output (pytest's report, for nbval) is
    written to ``log_dir/<mode>_<chapter>.log`` when a folder is given. ``on_chapter(run, claims)`` is called as
    each chapter ends, so that what was measured is kept even if a later chapter never ends (a host taken back).
    ``read`` is what the memory sampler calls; by default the memory in use on the run's GPU, found once
    (:func:`visible_gpu`) rather than at every sample.
    """
    if read is None:
        read = functools.partial(gpu_memory_used, visible_gpu())
    commands = [command_for(mode, notebook) for notebook in notebooks]
    chapters: list[ChapterRun] = []
    started = time.perf_counter()
    with MemorySampler(read) as group_memory, tempfile.TemporaryDirectory(prefix="claims-") as scratch:
        if parallel:
            chapters = _run_together(notebooks, commands, log)
        else:
            for notebook, command in zip(notebooks, commands, strict=True):
                begun = time.perf_counter()
                claims_log = Path(scratch) / f"{chapter_name(notebook)}.jsonl"
                environment = {**os.environ, LOG_VARIABLE: str(claims_log)}
                with MemorySampler(read) as memory:
                    done = subprocess.run(
                        command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=environment
                    )
                logged = evidence.read_log(claims_log)
                if claims is not None:
                    claims[chapter_name(notebook)] = logged
                if log_dir is not None:
                    Path(log_dir).mkdir(parents=True, exist_ok=True)
                    (Path(log_dir) / f"{mode}_{chapter_name(notebook)}.log").write_text(done.stdout)
                run = ChapterRun(
                    notebook,
                    time.perf_counter() - begun,
                    memory.peak_above_start,
                    done.returncode == 0,
                    _summary(done.stdout),
                )
                chapters.append(run)
                if on_chapter is not None:
                    on_chapter(run, logged)
                log(
                    f"{notebook}: {run.seconds:.0f} s, peak {run.peak_bytes / GIB:.2f} GiB, "
                    f"{'passed' if run.passed else 'FAILED'} · {run.summary}"
                )
    wall = time.perf_counter() - started
    return RunGroup(label, mode, parallel, wall, group_memory.peak_above_start, chapters, limit_bytes)


def limit_bytes(limit: str) -> int:
    """Bytes of an MPS limit as ``booktools.mps`` takes it (``16G``, ``8192M``).

    >>> limit_bytes("16G") == 16 * GIB, limit_bytes("512M") == 512 * MIB
    (True, True)
    """
    number = float(check_limit(limit)[:-1])
    return int(number * (GIB if limit.endswith("G") else MIB))


def load(path: Path = RUNS_FILE) -> list[RunGroup]:
    """The recorded run groups (:data:`booktools.records.CHAPTER_RUNS`); [] before the first run."""
    return [RunGroup.from_dict(group) for group in records.load(records.CHAPTER_RUNS, path)]


def save(groups: Sequence[RunGroup], path: Path = RUNS_FILE) -> None:
    """Write ``groups`` as the whole runs file (atomically, :func:`booktools.records.save`)."""
    records.save(records.CHAPTER_RUNS, [asdict(group) for group in groups], path)


def _setup(group: RunGroup) -> tuple[str, str, bool]:
    return group.label, group.mode, group.parallel


def _merged(earlier: RunGroup, group: RunGroup) -> RunGroup:
    """A one-at-a-time ``group`` merged into the ``earlier`` one of its setup; a parallel group replaces it."""
    if group.parallel:
        return group
    names = {chapter_name(c.notebook) for c in group.chapters}
    chapters = [c for c in earlier.chapters if chapter_name(c.notebook) not in names] + list(group.chapters)
    chapters.sort(key=lambda c: chapter_name(c.notebook))
    return RunGroup(
        group.label,
        group.mode,
        False,
        sum(c.seconds for c in chapters),
        max(c.peak_bytes or 0 for c in chapters),
        chapters,
        group.limit_bytes,
    )


def record(group: RunGroup, path: Path = RUNS_FILE) -> None:
    """Add ``group`` to the runs file. A one-at-a-time group of the same label and mode as an earlier one is merged
    into it (its chapters replace the same chapters there), so a long series can be measured in several calls; a
    parallel group replaces the earlier one."""
    save(records.upsert(load(path), group, key=_setup, merge=_merged), path)
    if path == RUNS_FILE:
        write_needs(load(path))


def chapter_name(notebook: str) -> str:
    return Path(notebook).stem


def chapter_needs(groups: Sequence[RunGroup] | None = None) -> dict[str, Need]:
    """What each chapter was seen to need: for every chapter that passed a one-at-a-time run under a memory
    limit, the run with the smallest peak (memory in use on the whole GPU, so the CUDA contexts and MPS's own share
    are in it), as a :class:`support.needs.Need` with its limit.

    Runs on a whole GPU say nothing of a need: there a chapter may take more than it needs (JAX's default
    preallocation, pools sized from free memory). A smaller share may still run a chapter; nothing measured says so.
    Nor does a chapter that needs several GPUs (``book.gpus`` in its metadata, :func:`gpus_needed`): it runs several
    processes on a GPU, each under the per-process limit, so the memory in use there is not one process's need.
    """
    groups = load() if groups is None else groups
    found: dict[str, Need] = {}
    for group in groups:
        if group.parallel or not group.limit_bytes:
            continue
        for chapter in group.chapters:
            if not (chapter.passed and chapter.peak_bytes) or gpus_needed(chapter.notebook) > 1:
                continue
            need = Need(
                chapter_name(chapter.notebook),
                min(chapter.peak_bytes, group.limit_bytes),
                group.limit_bytes,
                group.label,
            )
            earlier = found.get(need.chapter)
            if earlier is None or need.peak_bytes < earlier.peak_bytes:
                found[need.chapter] = need
    return dict(sorted(found.items()))


def gpus_needed(notebook: str) -> int:
    """How many GPUs the notebook at ``notebook`` (relative to the repository, or absolute) says it needs; 1 where
    the file is not there (a record of a chapter since renamed)."""
    path = ROOT / notebook
    return notebooks.gpus_needed(notebooks.read_notebook(path)) if path.is_file() else 1


def write_needs(groups: Sequence[RunGroup] | None = None, path: Path = NEEDS_FILE) -> None:
    """Write :func:`chapter_needs` where :mod:`support.needs` reads it."""
    needs = {name: asdict(need) for name, need in chapter_needs(groups).items()}
    records.write_atomic(path, json.dumps(needs, indent=1) + "\n")


def runs_table(groups: Sequence[RunGroup]) -> str:
    """A Markdown table: one row per chapter, run time and peak GPU memory under each one-at-a-time setup, then
    one line per parallel group."""
    sequential = [g for g in groups if not g.parallel]
    names = []
    for group in sequential:
        for chapter in group.chapters:
            if chapter_name(chapter.notebook) not in names:
                names.append(chapter_name(chapter.notebook))
    header = ["chapter"] + [
        f"{what} ({group.label}, {group.mode})" for group in sequential for what in ("time", "peak")
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for name in sorted(names):
        cells = [name]
        for group in sequential:
            found = next((c for c in group.chapters if chapter_name(c.notebook) == name), None)
            if found is None:
                cells += ["", ""]
                continue
            mark = "" if found.passed else " (failed)"
            cells += [f"{found.seconds:.0f} s{mark}", f"{(found.peak_bytes or 0) / GIB:.1f} GiB"]
        lines.append("| " + " | ".join(cells) + " |")
    for group in groups:
        if group.parallel:
            passed = sum(c.passed for c in group.chapters)
            line = (
                f"\n{len(group.chapters)} chapters at once ({group.label}, {group.mode}): {passed} passed, "
                f"{group.wall_seconds:.0f} s in all, peak {group.peak_bytes / GIB:.1f} GiB on the GPU together"
            )
            alone = one_after_another(group, sequential)
            if alone is not None:
                line += f"; the same chapters one after another under the same limit: {alone:.0f} s"
            lines.append(line)
    return "\n".join(lines)


def one_after_another(together: RunGroup, sequential: Sequence[RunGroup]) -> float | None:
    """Seconds the chapters of a parallel group took one at a time in a one-at-a-time group of the same mode and
    memory limit (the sum of their runs there), or None when that group lacks one of them."""
    for group in sequential:
        if group.parallel or (group.mode, group.limit_bytes) != (together.mode, together.limit_bytes):
            continue
        times = {chapter_name(c.notebook): c.seconds for c in group.chapters}
        wanted = [chapter_name(c.notebook) for c in together.chapters]
        if all(name in times for name in wanted):
            return sum(times[name] for name in wanted)
    return None


def readme_with_table(readme: str, table: str) -> str:
    """``readme`` with the text between its two markers replaced by ``table``."""
    if TABLE_START not in readme or TABLE_END not in readme:
        raise ValueError(f"README.md has no {TABLE_START} … {TABLE_END} markers")
    before, rest = readme.split(TABLE_START, 1)
    _, after = rest.split(TABLE_END, 1)
    return f"{before}{TABLE_START}\n{table}\n{TABLE_END}{after}"


def record_chapter(
    chapter: ChapterRun,
    claims: list[dict],
    label: str,
    mode: str,
    limit: int | None,
    *,
    runs_file: Path | None = None,
    claims_file: Path | None = None,
) -> None:
    """Record one chapter as soon as it ends: its time and memory in the one-at-a-time group of ``label`` and
    ``mode`` (merged with the chapters recorded before), and the claims it checked on this machine."""
    record(RunGroup(label, mode, False, chapter.seconds, chapter.peak_bytes, [chapter], limit), runs_file or RUNS_FILE)
    if claims:
        run = evidence.this_machine(label, mode, limit)
        run.chapters = {chapter_name(chapter.notebook): claims}
        evidence.record(run, claims_file or evidence.CLAIMS_FILE)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m booktools.runs", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="action", required=True)
    run = sub.add_parser("measure", help="run notebooks and record time and peak GPU memory")
    run.add_argument("--label", help='the GPU setup, e.g. "H100 80GB" or "16 GB MPS limit" (default: the GPU\'s name)')
    run.add_argument("--mode", choices=("execute", "nbval"), default="nbval")
    run.add_argument("--parallel", action="store_true", help="start all notebooks at once")
    run.add_argument("--memory-limit", help="the per-process limit the runs are under (e.g. 16G for an MPS limit)")
    run.add_argument("--log-dir", type=Path, help="write each chapter's whole output there (MODE_CHAPTER.log)")
    run.add_argument("notebooks", nargs="+")
    sub.add_parser("readme", help="write the table of recorded runs into README.md")
    sub.add_parser("needs", help="write each chapter's need (support/chapter_needs.json) from the recorded runs")
    args = parser.parse_args(argv)
    if args.action == "readme":
        README.write_text(readme_with_table(README.read_text(), runs_table(load())))
        return 0
    if args.action == "needs":
        write_needs()
        return 0
    limit = limit_bytes(args.memory_limit) if args.memory_limit else None
    label = args.label or evidence.this_machine("", args.mode).gpu.removeprefix("NVIDIA ")

    def keep(chapter: ChapterRun, logged: list[dict]) -> None:
        record_chapter(chapter, logged, label, args.mode, limit)

    group = measure(
        args.notebooks,
        label,
        args.mode,
        parallel=args.parallel,
        limit_bytes=limit,
        log_dir=args.log_dir,
        on_chapter=None if args.parallel else keep,
    )
    if args.parallel:
        record(group)
    print(
        f"{label}: {sum(c.passed for c in group.chapters)}/{len(group.chapters)} passed in {group.wall_seconds:.0f} s"
    )
    return 0 if all(c.passed for c in group.chapters) else 1


if __name__ == "__main__":
    sys.exit(main())
