"""One RMM memory pool for cuDF, CuPy, Numba and PyTorch, with allocation statistics.

Each framework keeps its own cache of GPU memory unless told otherwise; four caches on one GPU hold memory the
others cannot use. :func:`use_one_pool` points CuPy, Numba and PyTorch at RMM's current resource (cuDF uses it
already), makes that resource a pool, and counts allocations so :func:`memory_scope` can report the peak of
a piece of work. PyTorch's allocator can only be changed before PyTorch first touches CUDA, so call it first.

>>> describe_bytes(3 * 2**30)
'3.00 GiB'
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass, field

GIB = 2**30


class MemorySetupError(RuntimeError):
    """The pool cannot be set up as asked; the message says why and what to do."""


def describe_bytes(count: int) -> str:
    """Bytes in the largest binary unit that keeps the number at least 1: ``512 B``, ``1.50 MiB``."""
    if count < 0:
        raise ValueError(f"a byte count cannot be negative: {count}")
    for unit, scale in (("GiB", GIB), ("MiB", 2**20), ("KiB", 2**10)):
        if count >= scale:
            return f"{count / scale:.2f} {unit}"
    return f"{count} B"


def check_pool_size(requested: int, free: int, total: int) -> None:
    """Refuse a pool larger than the GPU's free memory, saying how much there is."""
    if requested <= 0:
        raise MemorySetupError(f"a pool needs a positive size, not {requested} bytes")
    if requested > free:
        raise MemorySetupError(
            f"a pool of {describe_bytes(requested)} does not fit: the GPU has {describe_bytes(free)} free of "
            f"{describe_bytes(total)}; ask for less, or free memory held by other processes"
        )


def torch_already_on_cuda() -> bool:
    """Whether PyTorch has initialized CUDA in this process (then its allocator can no longer change)."""
    torch = sys.modules.get("torch")
    return torch is not None and torch.cuda.is_initialized()


@dataclass
class PoolReport:
    """What :func:`use_one_pool` did."""

    initial_size: int
    frameworks: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return f"one RMM pool ({describe_bytes(self.initial_size)} to start, growing on demand) for " + ", ".join(
            self.frameworks
        )


def use_one_pool(initial_size: int = 4 * GIB, *, statistics: bool = True) -> PoolReport:
    """Make RMM's current resource a pool and route cuDF, CuPy, Numba and PyTorch allocations to it.

    Raises :class:`MemorySetupError` when PyTorch already initialized CUDA (its caching allocator is in use)
    or when the pool would not fit in the GPU's free memory.
    """
    if torch_already_on_cuda():
        raise MemorySetupError(
            "PyTorch has already initialized CUDA, so its allocator can no longer be changed; call use_one_pool() "
            "before the first CUDA tensor (restart the kernel and run it first)"
        )
    import rmm

    free, total = rmm.mr.available_device_memory()
    check_pool_size(initial_size, free, total)
    pool = rmm.mr.PoolMemoryResource(rmm.mr.CudaMemoryResource(), initial_pool_size=initial_size)
    rmm.mr.set_current_device_resource(rmm.mr.StatisticsResourceAdaptor(pool) if statistics else pool)
    report = PoolReport(initial_size, ["cuDF"])
    with contextlib.suppress(ImportError):
        import cupy
        from rmm.allocators.cupy import rmm_cupy_allocator

        cupy.cuda.set_allocator(rmm_cupy_allocator)
        report.frameworks.append("CuPy")
    with contextlib.suppress(ImportError):
        from numba import cuda
        from rmm.allocators.numba import RMMNumbaManager

        cuda.set_memory_manager(RMMNumbaManager)
        report.frameworks.append("Numba")
    with contextlib.suppress(ImportError):
        import torch
        from rmm.allocators.torch import rmm_torch_allocator

        torch.cuda.memory.change_current_allocator(rmm_torch_allocator)
        report.frameworks.append("PyTorch")
    return report


@dataclass
class MemoryUse:
    """Allocations of one scope: the peak above what was held when it began, and what was held at its end."""

    peak_bytes: int = 0
    held_after: int = 0


@contextlib.contextmanager
def memory_scope():
    """Count the RMM allocations of a block; yields a :class:`MemoryUse` filled in when the block ends.

    Without RMM statistics (no :func:`use_one_pool`), the numbers stay 0.
    """
    use = MemoryUse()
    statistics = sys.modules.get("rmm.statistics")
    if statistics is None and "rmm" in sys.modules:
        import rmm.statistics as statistics
    pushed = statistics is not None and statistics.push_statistics() is not None
    try:
        yield use
    finally:
        if pushed:
            scope = statistics.pop_statistics()
            use.peak_bytes = max(0, int(scope.peak_bytes))
            use.held_after = int(statistics.get_statistics().current_bytes)
