"""Fragmentation: how large a request still fits once a churn has left holes, allocator by allocator.

Free memory is not always usable memory. The experiment fills a fixed amount of memory (the *cap*) with blocks of
seeded random sizes until the allocator refuses the next one, frees every other block, and then searches for the
largest request that still fits. Half the memory is free; an allocator that can only hand out contiguous ranges
of what it holds is left with holes no larger than the blocks, while one that can remap physical pages behind a
virtual address range can give almost all of it to one request.

The allocators (:data:`ALLOCATORS`), each capped at the same number of bytes by its own mechanism:

- ``PyTorch caching allocator`` and ``PyTorch, expandable segments``: ``caching_allocator_alloc``/``_delete``,
  capped with ``torch.cuda.set_per_process_memory_fraction``; the second with
  ``PYTORCH_ALLOC_CONF=expandable_segments:True`` (PyTorch 2.11 still reads the older name,
  ``PYTORCH_CUDA_ALLOC_CONF``, without a warning, and prefers it where both are set: :func:`process_environment` clears
  both before setting one), which maps physical pages
  into one growing virtual segment and can unmap the free ones;
- ``RMM pool``: a ``PoolMemoryResource`` whose initial and maximum size are the cap;
- ``cudaMallocAsync pool``: a pool of the driver's stream-ordered allocator created with ``maxSize`` set to the
  cap (``cudaMemPoolCreate``, CUDA 12.2 or later), allocated from with ``cudaMallocFromPoolAsync``.

Each runs in a fresh process (:func:`measure_in_fresh_process`, which calls :func:`measure` through
:mod:`support.fresh_process` with the allocator's environment): PyTorch reads its allocator settings once,
when it first touches CUDA.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np

from support import fresh_process
from support.memory.churn import Allocator  # here its allocate raises MemoryError when it cannot
from support.memory.pools import MemorySetupError
from support.units import GIB, MIB, describe_bytes

#: The allocators, and the environment each one's process needs (PyTorch's own setting is removed otherwise).
ALLOCATORS: dict[str, dict[str, str]] = {
    "PyTorch caching allocator": {},
    "PyTorch, expandable segments": {"PYTORCH_ALLOC_CONF": "expandable_segments:True"},
    "RMM pool": {},
    "cudaMallocAsync pool": {},
}

#: Room left on the GPU beyond the cap before the experiment runs.
MARGIN = GIB


@dataclass(frozen=True)
class FragmentPlan:
    """The cap, the range of block sizes (seeded, uniform), and the step of the search for the largest request."""

    cap_bytes: int = GIB
    smallest: int = MIB
    largest: int = 8 * MIB
    step: int = MIB
    seed: int = 0

    def __post_init__(self):
        if not 0 < self.smallest <= self.largest:
            raise ValueError(f"block sizes must satisfy 0 < smallest <= largest, not {self.smallest}, {self.largest}")
        if self.cap_bytes < 4 * self.largest:
            raise ValueError(
                f"a cap of {describe_bytes(self.cap_bytes)} holds fewer than four of the largest blocks "
                f"({describe_bytes(self.largest)}); raise the cap or make the blocks smaller"
            )
        if self.step <= 0:
            raise ValueError(f"the search step must be positive, not {self.step}")

    def sizes(self) -> list[int]:
        """Enough block sizes to fill the cap twice over, each a multiple of 4 KiB."""

        count = 2 * self.cap_bytes // self.smallest + 1
        rng = np.random.default_rng(self.seed)
        raw = rng.integers(self.smallest, self.largest, size=count, endpoint=True)
        return [max(self.smallest, int(size) // 4096 * 4096) for size in raw]


@dataclass(frozen=True)
class FragmentationResult:
    """What was left after freeing every other block, and the largest request that then fitted."""

    allocator: str
    cap_bytes: int
    blocks_filled: int
    kept_bytes: int
    largest_fit: int

    @property
    def free_bytes(self) -> int:
        return self.cap_bytes - self.kept_bytes

    @property
    def usable_share(self) -> float:
        """The largest request that fits, as a share of the free memory under the cap."""
        return self.largest_fit / self.free_bytes if self.free_bytes else 0.0

    def row(self) -> dict[str, object]:
        return {
            "allocator": self.allocator,
            "blocks before the frees": self.blocks_filled,
            "still allocated": describe_bytes(self.kept_bytes),
            "free under the cap": describe_bytes(self.free_bytes),
            "largest request that fits": describe_bytes(self.largest_fit),
            "usable in one piece": f"{self.usable_share:.0%}",
        }


def fits(allocator: Allocator, size: int) -> bool:
    """Whether one request of ``size`` bytes succeeds now (it is released at once)."""
    try:
        handle = allocator.allocate(size)
    except MemoryError:
        return False
    allocator.release(handle)
    allocator.synchronize()
    return True


def largest_request_that_fits(allocator: Allocator, ceiling: int, step: int) -> int:
    """The largest multiple of ``step`` up to ``ceiling`` that :func:`fits`, by bisection (0 if none does).

    Assumes that a request fits whenever a larger one does, which holds for every allocator here.
    """
    low, high = 0, ceiling // step  # low fits (0 bytes is never asked for), high + 1 is beyond the ceiling
    while low < high:
        middle = (low + high + 1) // 2
        if fits(allocator, middle * step):
            low = middle
        else:
            high = middle - 1
    return low * step


def fragment_and_probe(name: str, allocator: Allocator, plan: FragmentPlan) -> FragmentationResult:
    """Fill the cap until ``allocator`` refuses, free every other block, find the largest request that fits."""
    blocks = []
    for size in plan.sizes():
        try:
            blocks.append((allocator.allocate(size), size))
        except MemoryError:
            break
    else:
        raise RuntimeError(
            f"{name} took {describe_bytes(sum(size for _, size in blocks))} without refusing: "
            f"its cap of {describe_bytes(plan.cap_bytes)} is not in force"
        )
    for handle, _ in blocks[::2]:
        allocator.release(handle)
    allocator.synchronize()
    kept = blocks[1::2]
    kept_bytes = sum(size for _, size in kept)
    largest = largest_request_that_fits(allocator, plan.cap_bytes - kept_bytes, plan.step)
    for handle, _ in kept:
        allocator.release(handle)
    allocator.synchronize()
    return FragmentationResult(name, plan.cap_bytes, len(blocks), kept_bytes, largest)


def _torch(cap: int) -> Allocator:
    import torch

    _, total = torch.cuda.mem_get_info()
    torch.cuda.set_per_process_memory_fraction(cap / total)

    def allocate(size: int):
        try:
            return torch.cuda.caching_allocator_alloc(size)
        except torch.OutOfMemoryError as exc:
            raise MemoryError(str(exc).splitlines()[0]) from None

    return Allocator(allocate, torch.cuda.caching_allocator_delete, torch.cuda.synchronize)


def _rmm_pool(cap: int) -> Allocator:
    import cupy
    import rmm

    pool = rmm.mr.PoolMemoryResource(rmm.mr.CudaMemoryResource(), initial_pool_size=cap, maximum_pool_size=cap)
    return Allocator(
        allocate=lambda size: (pool.allocate(size), size),
        release=lambda handle: pool.deallocate(*handle),
        synchronize=cupy.cuda.runtime.deviceSynchronize,
        keep=pool,
    )


def _driver_pool(cap: int) -> Allocator:
    from cuda.bindings import runtime

    def check(error, what: str) -> None:
        if error != runtime.cudaError_t.cudaSuccess:
            raise RuntimeError(f"{what} failed: {error.name}")

    error, device = runtime.cudaGetDevice()
    check(error, "cudaGetDevice")
    props = runtime.cudaMemPoolProps()
    props.allocType = runtime.cudaMemAllocationType.cudaMemAllocationTypePinned
    props.location.type = runtime.cudaMemLocationType.cudaMemLocationTypeDevice
    props.location.id = device
    props.maxSize = cap
    error, pool = runtime.cudaMemPoolCreate(props)
    check(error, "cudaMemPoolCreate with maxSize")

    def allocate(size: int):
        error, pointer = runtime.cudaMallocFromPoolAsync(size, pool, 0)
        if error == runtime.cudaError_t.cudaErrorMemoryAllocation:
            runtime.cudaGetLastError()  # clear it, so that the next call does not see it
            raise MemoryError(f"the pool's maximum of {describe_bytes(cap)} is reached")
        check(error, "cudaMallocFromPoolAsync")
        return pointer

    def release(pointer) -> None:
        check(runtime.cudaFreeAsync(pointer, 0)[0], "cudaFreeAsync")

    def synchronize() -> None:
        check(runtime.cudaDeviceSynchronize()[0], "cudaDeviceSynchronize")

    return Allocator(allocate, release, synchronize, keep=pool)


_MAKERS: dict[str, Callable[[int], Allocator]] = {
    "PyTorch caching allocator": _torch,
    "PyTorch, expandable segments": _torch,
    "RMM pool": _rmm_pool,
    "cudaMallocAsync pool": _driver_pool,
}


def check_room(cap: int, free: int) -> None:
    """Refuse a cap that would not leave :data:`MARGIN` of the GPU's free memory to everyone else.

    >>> check_room(GIB, free=8 * GIB)
    >>> check_room(GIB, free=GIB + MIB)
    Traceback (most recent call last):
    ...
    support.memory.pools.MemorySetupError: the fragmentation experiment needs 1.00 GiB and leaves 1.00 GiB free; \
only 1.00 GiB is free (lower the cap)
    """

    if cap + MARGIN > free:
        raise MemorySetupError(
            f"the fragmentation experiment needs {describe_bytes(cap)} and leaves {describe_bytes(MARGIN)} free; "
            f"only {describe_bytes(free)} is free (lower the cap)"
        )


def measure(name: str, plan: FragmentPlan | dict | None = None) -> FragmentationResult:
    """Run the experiment for allocator ``name`` in this process (a fresh one: PyTorch's settings are per process)."""
    if name not in _MAKERS:
        raise ValueError(f"unknown allocator {name!r}; choose one of: {', '.join(_MAKERS)}")
    plan = FragmentPlan(**plan) if isinstance(plan, dict) else plan or FragmentPlan()  # from a fresh process: a dict
    import cupy

    check_room(plan.cap_bytes, cupy.cuda.runtime.memGetInfo()[0])
    allocator = _MAKERS[name](plan.cap_bytes)
    return fragment_and_probe(name, allocator, plan)


def process_environment(name: str) -> dict[str, str | None]:
    """What the process measuring ``name`` changes in its environment: only its own PyTorch setting stays."""
    return {"PYTORCH_CUDA_ALLOC_CONF": None, "PYTORCH_ALLOC_CONF": None, **ALLOCATORS[name]}


def measure_in_fresh_process(name: str, plan: FragmentPlan | None = None, *, timeout: float = 300):
    """:func:`measure` in a new Python process with the environment :data:`ALLOCATORS` gives ``name``."""

    if name not in ALLOCATORS:
        raise ValueError(f"unknown allocator {name!r}; choose one of: {', '.join(ALLOCATORS)}")
    plan = plan or FragmentPlan()
    found = fresh_process.call(
        "support.memory.fragmentation:measure",
        name=name,
        plan=asdict(plan),
        what=f"the fragmentation experiment for {name}",
        env=process_environment(name),
        timeout=timeout,
    )
    return FragmentationResult(**found)
