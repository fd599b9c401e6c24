"""One RMM memory pool for cuDF, CuPy, Numba and PyTorch, and the tools to size and compare pools.

Each framework keeps its own cache of GPU memory unless told otherwise; four caches on one GPU hold memory the
others cannot use. :func:`use_one_pool` points CuPy, Numba and PyTorch at RMM's current resource (cuDF uses it
already), makes that resource a pool, and counts its allocations. PyTorch's allocator can only be changed before
PyTorch first touches CUDA, and Numba's before Numba creates its CUDA context, so call it first.

Resources are named the way the chapter names them (:data:`RESOURCE_KINDS`): ``cudaMalloc`` (no pool),
``pool`` (RMM's pool over cudaMalloc) and ``cudaMallocAsync`` (the driver's stream-ordered pool, RMM's
``CudaAsyncMemoryResource``); ``cudaMallocAsync, releasing`` is the latter with ``release_threshold=0``, which
gives freed memory back to the driver at each synchronization (RMM 26.10's default threshold keeps the pool's
peak). :func:`memory_returned` measures what each gives back after a peak.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from support import bench, fresh_process
from support.units import GIB, MIB, describe_bytes, round_up

RESOURCE_KINDS = ("cudaMalloc", "pool", "cudaMallocAsync")
#: The kinds whose memory after a peak :func:`memory_returned` compares.
RELEASE_KINDS = (*RESOURCE_KINDS, "cudaMallocAsync, releasing")


class MemorySetupError(RuntimeError):
    """The pool cannot be set up as asked; the message says why and what to do."""


def check_pool_size(requested: int, free: int, total: int) -> None:
    """Refuse a pool larger than the GPU's free memory, saying how much there is."""
    if requested <= 0:
        raise MemorySetupError(f"a pool needs a positive size, not {requested} bytes")
    if requested > free:
        raise MemorySetupError(
            f"a pool of {describe_bytes(requested)} does not fit: the GPU has {describe_bytes(free)} free of "
            f"{describe_bytes(total)}; ask for less, or free memory held by other processes"
        )


def suggest_pool_size(peak_bytes: int, free: int, *, headroom: float = 0.25, granularity: int = 256 * MIB) -> int:
    """A pool size for work whose measured peak is ``peak_bytes``: the peak plus ``headroom``, rounded up.

    The headroom covers fragmentation (free memory split into pieces too small for the next request) and runs
    larger than the measured one. Raises :class:`MemorySetupError` when that does not fit in ``free`` bytes.

    >>> describe_bytes(suggest_pool_size(900 * MIB, free=8 * GIB))
    '1.25 GiB'
    """
    if peak_bytes <= 0:
        raise ValueError(f"measure the work's peak first (statistics); got a peak of {peak_bytes} bytes")
    if headroom < 0:
        raise ValueError(f"headroom is a fraction of the peak and cannot be negative, not {headroom}")
    size = round_up(int(peak_bytes * (1 + headroom)), granularity)
    if size > free:
        raise MemorySetupError(
            f"the work peaks at {describe_bytes(peak_bytes)}; with {headroom:.0%} headroom its pool needs "
            f"{describe_bytes(size)}, but the GPU has {describe_bytes(free)} free: process the data in chunks, "
            "or let cuDF spill to host memory (its spilling option)"
        )
    return size


def torch_already_on_cuda() -> bool:
    """Whether PyTorch has initialized CUDA in this process (then its allocator can no longer change)."""
    torch = sys.modules.get("torch")
    return torch is not None and torch.cuda.is_initialized()


@dataclass
class PoolReport:
    """What :func:`use_one_pool` did."""

    initial_size: int
    frameworks: list[str] = field(default_factory=list)
    kind: str = "pool"

    def __str__(self) -> str:
        which = "RMM pool" if self.kind == "pool" else "pool of the driver's (cudaMallocAsync)"
        return f"one {which} ({describe_bytes(self.initial_size)} to start, growing on demand) for " + ", ".join(
            self.frameworks
        )


_active: PoolReport | None = None  # what use_one_pool set up in this process


def use_one_pool(
    initial_size: int = 4 * GIB, *, statistics: bool = True, kind: str = "pool", pytorch: bool = True
) -> PoolReport:
    """Make RMM's current resource a pool and route cuDF, CuPy, Numba and PyTorch allocations to it.

    ``kind`` is RMM's ``pool`` (the default) or the driver's ``cudaMallocAsync`` (:data:`RESOURCE_KINDS`).
    ``pytorch=False`` leaves PyTorch on its own caching allocator (chapter 4's "middle way": CUDA graphs can be
    captured, and PyTorch's own statistics count its tensors; a tensor handed over from cuDF or CuPy still lives
    in the pool).

    Calling it again in the same process (a notebook cell run twice) returns what the first call set up.
    Raises :class:`MemorySetupError` when PyTorch already initialized CUDA (its caching allocator is in use),
    when Numba already created its CUDA context with its own memory manager, or when the pool would not fit in
    the GPU's free memory.
    """
    global _active
    if _active is not None:
        return _active
    if torch_already_on_cuda():
        raise MemorySetupError(
            "PyTorch has already initialized CUDA, so its allocator can no longer be changed; call use_one_pool() "
            "before the first CUDA tensor (restart the kernel and run it first)"
        )
    import rmm

    if kind not in ("pool", "cudaMallocAsync"):
        raise MemorySetupError(f"one pool is RMM's 'pool' or the driver's 'cudaMallocAsync', not {kind!r}")
    free, total = rmm.mr.available_device_memory()
    check_pool_size(initial_size, free, total)
    pool = make_resource(kind, pool_size=initial_size)
    rmm.mr.set_current_device_resource(rmm.mr.StatisticsResourceAdaptor(pool) if statistics else pool)
    report = PoolReport(initial_size, ["cuDF"], kind)
    with contextlib.suppress(ImportError):
        import cupy
        from rmm.allocators.cupy import rmm_cupy_allocator

        cupy.cuda.set_allocator(rmm_cupy_allocator)
        report.frameworks.append("CuPy")
    with contextlib.suppress(ImportError):
        from numba import cuda
        from rmm.allocators.numba import RMMNumbaManager

        cuda.set_memory_manager(RMMNumbaManager)
        manager = cuda.current_context().memory_manager
        if not isinstance(manager, RMMNumbaManager):
            raise MemorySetupError(
                f"Numba created its CUDA context before use_one_pool() and keeps its own memory manager "
                f"({type(manager).__name__}); call use_one_pool() before the first Numba kernel or device array"
            )
        report.frameworks.append("Numba")
    if pytorch:
        with contextlib.suppress(ImportError):
            import torch
            from rmm.allocators.torch import rmm_torch_allocator

            torch.cuda.memory.change_current_allocator(rmm_torch_allocator)
            report.frameworks.append("PyTorch")
    _active = report
    return report


def pytorch_on_rmm() -> bool:
    """Whether :func:`use_one_pool` routed PyTorch's allocations to RMM in this process."""
    return _active is not None and "PyTorch" in _active.frameworks


def current_bytes() -> int:
    """Bytes allocated now through the statistics of :func:`use_one_pool` (0 before any allocation)."""
    import rmm.statistics

    statistics = rmm.statistics.get_statistics()
    if statistics is None:
        raise MemorySetupError(
            "RMM's current resource does not count allocations: call use_one_pool() (statistics=True) first, and "
            "read the count outside blocks that wrap the resource (allocation_limit, allocation_log)"
        )
    return int(statistics.current_bytes)


def _framework_allocations(nbytes: int) -> dict[str, Callable[[], object]]:
    """One allocation of ``nbytes`` through each framework's ordinary API."""

    def cudf_series():
        import cudf

        return cudf.Series(np.zeros(nbytes // 8))

    def cupy_array():
        import cupy

        return cupy.empty(nbytes, dtype="uint8")

    def numba_array():
        from numba import cuda

        return cuda.device_array(nbytes, dtype="uint8")

    def torch_tensor():
        import torch

        return torch.empty(nbytes, dtype=torch.uint8, device="cuda")

    return {"cuDF": cudf_series, "CuPy": cupy_array, "Numba": numba_array, "PyTorch": torch_tensor}


def check_frameworks_share_pool(nbytes: int = 8 * MIB) -> list[dict[str, object]]:
    """Allocate ``nbytes`` through each framework and see whether the shared pool's statistics count it.

    Returns one row per framework: what was asked, what the pool saw arrive, and whether it landed there.
    """
    rows = []
    for name, allocate in _framework_allocations(nbytes).items():
        before = current_bytes()
        held = allocate()
        arrived = current_bytes() - before
        del held
        rows.append(
            {
                "framework": name,
                "asked": describe_bytes(nbytes),
                "pool saw": describe_bytes(max(arrived, 0)),
                "from the pool": arrived >= nbytes,
            }
        )
    return rows


def make_resource(kind: str, *, pool_size: int = GIB, maximum_size: int | None = None):
    """A fresh RMM resource of one of :data:`RELEASE_KINDS`; ``pool_size`` sizes the pools (0: start empty)."""
    if kind not in RELEASE_KINDS:
        raise ValueError(f"unknown resource kind {kind!r}; choose one of {', '.join(RELEASE_KINDS)}")
    import rmm

    if kind == "cudaMalloc":
        return rmm.mr.CudaMemoryResource()
    if kind == "pool":
        return rmm.mr.PoolMemoryResource(
            rmm.mr.CudaMemoryResource(), initial_pool_size=pool_size, maximum_pool_size=maximum_size
        )
    if kind == "cudaMallocAsync, releasing":
        return rmm.mr.CudaAsyncMemoryResource(initial_pool_size=pool_size or None, release_threshold=0)
    return rmm.mr.CudaAsyncMemoryResource(initial_pool_size=pool_size or None)


@contextlib.contextmanager
def using_resource(resource) -> Iterator[object]:
    """Make ``resource`` RMM's current resource inside the block, and put the previous one back after it.

    Memory allocated inside stays tied to ``resource`` (RMM buffers keep their resource alive), so it may
    outlive the block safely.
    """
    import rmm

    previous = rmm.mr.get_current_device_resource()
    rmm.mr.set_current_device_resource(resource)
    try:
        yield resource
    finally:
        rmm.mr.set_current_device_resource(previous)


def time_under_resources(work: Callable[[], object], kinds=RESOURCE_KINDS, *, pool_size: int = GIB, repeat: int = 5):
    """Time ``work`` with each kind of resource current, in turn, and compare them (:mod:`support.bench`).

    Each resource gets one untimed warm-up; the timed runs then go round the resources ``repeat`` times, so a
    slow drift of the machine affects all of them alike. Times are CUDA events around each call.
    """

    unknown = [kind for kind in kinds if kind not in RESOURCE_KINDS]
    if unknown:  # before any resource is made: a typo should not cost a pool of GPU memory first
        raise ValueError(f"unknown resource kind {unknown[0]!r}; choose from {', '.join(RESOURCE_KINDS)}")
    resources = {kind: make_resource(kind, pool_size=pool_size) for kind in kinds}
    for resource in resources.values():
        with using_resource(resource):
            work()
    samples: dict[str, list[float]] = {kind: [] for kind in kinds}
    for _ in range(repeat):
        for kind, resource in resources.items():
            with using_resource(resource):
                one = bench.time_cuda(work, warmup=0, repeat=1)
                samples[kind].append(one.samples[0])
    return bench.compare(*(bench.Timing(kind, tuple(times), one.clock) for kind, times in samples.items()))


def summarize_error(message: str) -> str:
    """The part of a library's error message a reader needs: its first line, and of a long one (RMM's start with
    the source file and line) only the last ``: ``-separated clause.

    >>> summarize_error("std::bad_alloc: out_of_memory: RMM failure at:/rmm/cpp/src/mr/limiting.cpp:61: "
    ...                 "Exceeded memory limit 268435456; Allocated bytes 240000000; Requested bytes 40000000")
    'Exceeded memory limit 268435456; Allocated bytes 240000000; Requested bytes 40000000'
    >>> summarize_error("cudaErrorMemoryAllocation out of memory")
    'cudaErrorMemoryAllocation out of memory'
    """
    text = message.strip().splitlines()[0] if message.strip() else "no detail"
    return text.rsplit(": ", 1)[-1] if len(text) > 120 else text


def returned_here(kind: str, peak_bytes: int) -> dict[str, float]:
    """In this process: make a ``kind`` resource current, allocate ``peak_bytes`` in 256 MiB buffers, free them,
    synchronize, and report the device memory the process held at the peak and still holds after (bytes, from
    the driver's free memory)."""
    import cupy
    import rmm

    def free_memory() -> int:
        return cupy.cuda.runtime.memGetInfo()[0]

    resource = make_resource(kind, pool_size=0)
    before = free_memory()
    with using_resource(resource):
        buffers = [rmm.DeviceBuffer(size=256 * MIB) for _ in range(max(peak_bytes // (256 * MIB), 1))]
        at_peak = free_memory()
        del buffers
        cupy.cuda.runtime.deviceSynchronize()
        after = free_memory()
    return {"held at the peak": before - at_peak, "held after freeing": before - after}


def memory_returned(kinds=RELEASE_KINDS, peak_bytes: int = 4 * GIB) -> dict[str, dict[str, float]]:
    """What each kind of resource holds at a peak of ``peak_bytes`` and gives back after it, each in a fresh
    process (a pool that keeps its peak would otherwise count for every kind after it)."""

    unknown = [kind for kind in kinds if kind not in RELEASE_KINDS]
    if unknown:
        raise ValueError(f"unknown resource kind {unknown[0]!r}; choose from {', '.join(RELEASE_KINDS)}")
    return {
        kind: fresh_process.call(
            "support.memory.pools:returned_here", kind=kind, peak_bytes=peak_bytes, what=f"the peak under {kind}"
        )
        for kind in kinds
    }
