"""The host under the cluster: its page cache and file systems, for reads that come from the disk.

- :func:`drop_from_page_cache` makes the next read of a file come from the disk, and :func:`time_cold` times a
  run with every file dropped first;
- :func:`resident_bytes` counts each file's bytes in the page cache (util-linux's ``fincore``, or the system call
  it makes where it is missing: :func:`mincore_bytes`), and
  :func:`measure_page_drop` checks the drop with it, beside its control (the files flushed, not dropped);
- :func:`filesystem_of` (is there a disk at all?) reads the kernel's mounts through psutil.
"""

from __future__ import annotations

import ctypes
import json
import mmap
import os
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from support.bench import Timing


def drop_from_page_cache(path, *, advise: bool = True) -> int:
    """Ask the kernel to forget the cached pages of the file at ``path``, so that the next read comes from the disk;
    returns the file's size in bytes. ``advise=False`` only flushes the file (``fsync``), the control: its pages
    should stay cached.

    ``POSIX_FADV_DONTNEED`` is advice: the kernel drops only clean pages, and may keep some. The file is
    ``fsync``-ed first, so that pages still waiting to be written (dirty pages, as right after
    :func:`write_recording`) are written out and can be dropped. It acts on this machine's page cache: on a
    cluster of several servers, call it on the server that holds the file (``client.run``)."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
        if advise:
            os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
        return os.fstat(descriptor).st_size
    finally:
        os.close(descriptor)


def resident_bytes(paths, *, run=None) -> dict[str, int]:
    """How many bytes of each file of ``paths`` lie in this machine's page cache now, by path (as text), as
    util-linux's ``fincore`` counts them: the pages of that file alone, whatever else the host caches. Where
    ``fincore`` is not installed (Debian and Ubuntu ship it in ``util-linux-extra``, which minimal images lack),
    the same count comes from ``mincore`` (:func:`mincore_bytes`), the system call older ``fincore`` makes and
    newer ``fincore`` (which asks ``cachestat`` first) falls back to.

    ``run`` runs fincore's command line (:func:`subprocess.run` by default; a test passes a stand-in that answers
    as fincore would). Raises ``RuntimeError`` with fincore's own message where it fails (a file that is not
    there; without fincore, ``FileNotFoundError``).

    >>> def fincore(command, **_):  # what fincore --json prints for two files
    ...     rows = [{"res": 4096 * k, "file": name} for k, name in enumerate(command[-2:], 1)]
    ...     return subprocess.CompletedProcess(command, 0, json.dumps({"fincore": rows}), "")
    >>> resident_bytes(["a.csv", "b.csv"], run=fincore)
    {'a.csv': 4096, 'b.csv': 8192}
    """
    paths = [str(path) for path in paths]
    if not paths:
        return {}
    if run is None:
        if shutil.which("fincore") is None:
            return {path: mincore_bytes(path) for path in paths}
        run = subprocess.run
    command = ["fincore", "--json", "--bytes", "--output", "RES,FILE", *paths]
    done = run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"fincore failed (exit status {done.returncode}): {done.stderr.strip()}")
    resident = {str(row["file"]): int(row["res"]) for row in json.loads(done.stdout)["fincore"]}
    missing = [path for path in paths if path not in resident]
    if missing:
        raise RuntimeError(f"fincore reported no residency for {missing}: it printed {done.stdout.strip()!r}")
    return {path: resident[path] for path in paths}


def mincore_bytes(path) -> int:
    """The bytes of the file at ``path`` in the page cache, counted as ``fincore`` counts them: the file mapped
    read-only (which reads nothing in), then Linux's ``mincore`` asked which of its pages are resident, times the
    page size. For :func:`resident_bytes` where ``fincore`` is missing; Linux only."""
    size = os.path.getsize(path)
    if size == 0:
        return 0
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    descriptor = os.open(path, os.O_RDONLY)
    try:
        address = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, descriptor, 0)
        if address in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), f"mmap of {path} failed")
        try:
            pages = ctypes.create_string_buffer((size + mmap.PAGESIZE - 1) // mmap.PAGESIZE)
            if libc.mincore(address, size, pages):
                raise OSError(ctypes.get_errno(), f"mincore of {path} failed")
            return sum(byte & 1 for byte in pages.raw) * mmap.PAGESIZE
        finally:
            libc.munmap(address, size)
    finally:
        os.close(descriptor)


@dataclass(frozen=True)
class PageDrop:
    """The bytes of some files in the page cache (:func:`resident_bytes`, summed over the files) after each step of
    :func:`measure_page_drop`, beside the files' size."""

    size: int  # the files' bytes on disk, all together
    read_in: int  # resident after every file was read through
    flushed: int  # after each was flushed (fsync) without the advice: the control
    dropped: int  # after each was dropped (fsync, then POSIX_FADV_DONTNEED)

    @property
    def fell_when_flushed(self) -> int:
        """How far the resident bytes fell when the files were only flushed (0 if they rose)."""
        return max(self.read_in - self.flushed, 0)

    @property
    def fell_when_dropped(self) -> int:
        """How far the resident bytes fell when the files were dropped after the flush (0 if they rose)."""
        return max(self.flushed - self.dropped, 0)


def measure_page_drop(paths, *, run=None) -> PageDrop:
    """Check :func:`drop_from_page_cache` on the files of ``paths`` by each file's own pages: read every file
    through (into the page cache), flush each without the advice (``advise=False``, the control: its pages stay
    cached), then drop each (``advise=True``), counting the files' resident bytes (:func:`resident_bytes`, with
    ``run``) after each step. A drop that worked leaves the files' resident bytes far below their size, and the
    flush alone does not move them; on ``tmpfs`` neither does (a file there lives in memory)."""
    paths = [Path(path) for path in paths]
    if not paths:
        raise ValueError("name at least one file whose pages to drop")
    size = sum(path.stat().st_size for path in paths)
    for path in paths:  # read through in blocks: every page of the file in the cache, none of it kept here
        with open(path, "rb") as file:
            while file.read(1 << 20):
                pass

    def resident() -> int:
        return sum(resident_bytes(paths, run=run).values())

    read_in = resident()
    for path in paths:
        drop_from_page_cache(path, advise=False)
    flushed = resident()
    for path in paths:
        drop_from_page_cache(path)
    return PageDrop(size, read_in, flushed, resident())


def filesystem_of(path, partitions=None) -> str:
    """The type of the file system that holds ``path`` (``ext4``, ``xfs``, ``overlay``, ``tmpfs``…): that of the
    longest mount point above it. On ``tmpfs`` a file lives in memory, and no read of it comes from a disk.
    ``partitions`` are ``psutil.disk_partitions(all=True)`` (every mount, pseudo file systems included), or rows
    with the same ``mountpoint`` and ``fstype`` (for tests)."""
    if partitions is None:
        import psutil

        partitions = psutil.disk_partitions(all=True)
    path = Path(path).resolve()
    best, kind = "", "unknown"
    for partition in partitions:
        point = partition.mountpoint
        if (path == Path(point) or Path(point) in path.parents) and len(point) > len(best):
            best, kind = point, partition.fstype
    return kind


def time_cold(run, paths, *, label: str, warmup: int = 1, repeat: int = 5):
    """Time ``run()`` with the wall clock as :func:`support.bench.time_wall` does, with every file of ``paths``
    dropped from the page cache (:func:`drop_from_page_cache`) before each call, outside the timing."""
    samples = []
    for k in range(warmup + repeat):
        for path in paths:
            drop_from_page_cache(path)
        start = time.perf_counter()
        run()
        if k >= warmup:
            samples.append(time.perf_counter() - start)
    return Timing(label, tuple(samples), "wall")
