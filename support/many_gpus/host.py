"""The host under the cluster: its page cache and file systems, for reads that come from the disk.

- :func:`drop_from_page_cache` makes the next read of a file come from the disk, and :func:`time_cold` times a
  run with every file dropped first;
- :func:`page_cache_bytes` (the control of the drop) and :func:`filesystem_of` (is there a disk at all?) read the
  kernel's counters through psutil.
"""

from __future__ import annotations

import os
import time
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


def page_cache_bytes() -> int:
    """The bytes the kernel holds in its page cache now (psutil's ``cached``: on Linux ``Cached`` plus the
    reclaimable slab, ``SReclaimable``, of ``/proc/meminfo``; machine-wide, also inside a container): the
    control of :func:`drop_from_page_cache`, which should make it fall."""
    import psutil

    memory = psutil.virtual_memory()
    if not hasattr(memory, "cached"):
        raise ValueError("this system reports no page cache (psutil has no 'cached' here): is this Linux?")
    return int(memory.cached)


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
