"""What one GPU allocation costs, seen from Python: an allocation churn benchmark.

A data-frame library allocates a new buffer for almost every result and frees it soon after. The benchmark
imitates that: it keeps a working set of live buffers and, at each step, frees one of them (chosen at random)
and allocates a new one of a random size, log-uniform between 1 KiB and 4 MiB. The same seeded sequence of sizes
and frees is replayed through every allocator, so they do exactly the same work.

The allocators (:data:`ALLOCATORS`), each through its thinnest Python entry point:

- ``python loop only``: no GPU at all, the loop and two Python calls per step: the floor of any Python churn;
- ``cudaMalloc (CUDA runtime)``: ``cudaMalloc``/``cudaFree`` through CuPy's thin runtime binding;
- ``cudaMalloc (RMM)``, ``pool (RMM)``, ``cudaMallocAsync (RMM)``: ``allocate``/``deallocate`` of RMM resources;
- ``RMM call, no work (0 bytes)``: the same calls into RMM's pool for 0 bytes, which it answers without work:
  what crossing from Python into RMM costs by itself;
- ``CuPy pool``: ``cupy.cuda.MemoryPool.malloc``;
- ``PyTorch caching allocator``: ``torch.cuda.caching_allocator_alloc``/``caching_allocator_delete``.

With ``busy_us`` in the plan, each step first queues that many microseconds of GPU work (a one-thread kernel
that spins), as a pipeline that computes between allocations would: ``cudaFree`` then waits for the queued work
at every step, while a pool's free is bookkeeping and the host runs ahead. The ``python loop only`` row then
measures the GPU's own work and the launches, so what each allocator adds on top of it is what it costs.

Run each in a fresh process (:func:`measure_in_fresh_process`, which calls :func:`measure` through
:mod:`support.fresh_process`) so that no allocator's cache warms another's, and so PyTorch's own allocator can
be measured in a notebook that later hands PyTorch to RMM.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

import numpy as np

from support import fresh_process
from support.bench import Timing, format_seconds, gpu_sleeper, time_behind_busy_gpu, time_wall
from support.memory.pools import make_resource
from support.units import GIB, KIB, MIB

SPREADS = ("uniform", "log-uniform")


@dataclass(frozen=True)
class ChurnPlan:
    """The replayed sequence: ``steps`` frees and allocations over ``live`` buffers, sizes seeded."""

    steps: int = 20_000
    live: int = 64
    smallest: int = KIB
    largest: int = 4 * MIB
    seed: int = 0
    spread: str = "uniform"
    busy_us: int = 0  # GPU work queued before each step, in microseconds (0: an idle GPU)

    def __post_init__(self):
        if self.busy_us < 0:
            raise ValueError(f"the GPU work queued per step cannot be negative, not {self.busy_us} µs")
        if self.steps < 1 or self.live < 1:
            raise ValueError(f"a churn needs at least one step and one live buffer, not {self.steps}, {self.live}")
        if not 0 < self.smallest <= self.largest:
            raise ValueError(f"sizes must satisfy 0 < smallest <= largest, not {self.smallest}, {self.largest}")
        if self.spread not in SPREADS:
            raise ValueError(f"unknown spread of sizes {self.spread!r}; choose one of {', '.join(SPREADS)}")

    def sizes(self) -> list[int]:
        """The ``live`` first sizes fill the working set; the rest are the steps'."""

        rng = np.random.default_rng(self.seed)
        count = self.live + self.steps
        if self.spread == "uniform":
            return rng.integers(self.smallest, self.largest, size=count, endpoint=True).tolist()
        logs = rng.uniform(np.log(self.smallest), np.log(self.largest), size=count)
        return np.clip(np.exp(logs).round(), self.smallest, self.largest).astype(int).tolist()

    def victims(self) -> list[int]:
        """Which live buffer each step frees."""

        return np.random.default_rng(self.seed + 1).integers(0, self.live, size=self.steps).tolist()


@dataclass(frozen=True)
class Allocator:
    """An allocator as the benchmark drives it: ``allocate(size) -> handle``, ``release(handle)``, ``synchronize()``."""

    allocate: Callable[[int], object]
    release: Callable[[object], None]
    synchronize: Callable[[], None] = lambda: None
    keep: object = None  # what must stay alive while the allocator is used (a pool, a resource)


def _python_loop_only() -> Allocator:
    return Allocator(allocate=lambda size: size, release=lambda handle: None)


def _device_synchronize() -> Callable[[], None]:
    import cupy

    return cupy.cuda.runtime.deviceSynchronize


def _cuda_runtime() -> Allocator:
    import cupy

    runtime = cupy.cuda.runtime
    return Allocator(allocate=runtime.malloc, release=runtime.free, synchronize=runtime.deviceSynchronize)


def _rmm(kind: str) -> Callable[[], Allocator]:
    def make() -> Allocator:
        resource = make_resource(kind, pool_size=GIB)
        allocate, deallocate = resource.allocate, resource.deallocate

        def allocate_sized(size: int):
            return allocate(size), size

        def release(handle) -> None:
            deallocate(handle[0], handle[1])

        return Allocator(allocate_sized, release, _device_synchronize(), keep=resource)

    return make


def _rmm_binding_only() -> Allocator:
    """RMM's pool asked for 0 bytes each time: the call goes through the binding, the pool does no work."""

    resource = make_resource("pool", pool_size=64 * MIB)
    allocate, deallocate = resource.allocate, resource.deallocate
    return Allocator(
        allocate=lambda size: allocate(0),
        release=lambda pointer: deallocate(pointer, 0),
        synchronize=_device_synchronize(),
        keep=resource,
    )


def _cupy_pool() -> Allocator:
    import cupy

    pool = cupy.cuda.MemoryPool()
    return Allocator(allocate=pool.malloc, release=lambda memory: None, synchronize=_device_synchronize(), keep=pool)


def _torch_caching() -> Allocator:
    import torch

    torch.cuda.init()
    return Allocator(
        allocate=torch.cuda.caching_allocator_alloc,
        release=torch.cuda.caching_allocator_delete,
        synchronize=torch.cuda.synchronize,
    )


def time_free_behind_busy_gpu(kind: str, busy_seconds: float = 0.02, *, warmup: int = 2, repeat: int = 5) -> Timing:
    """Wall-clock time the host spends freeing 1 MiB while the GPU is busy for ``busy_seconds`` with earlier
    work, ``warmup`` frees untimed and then ``repeat`` timed (:func:`support.bench.time_behind_busy_gpu`).

    Before each free a one-thread kernel keeps the GPU busy; then one of the buffers allocated beforehand is freed
    through an RMM resource of ``kind`` (:data:`support.memory.pools.RESOURCE_KINDS`), the clock around the free
    alone. ``cudaFree`` waits for the GPU to finish; a pool does not.
    """
    import cupy

    if not 0 < busy_seconds <= 1:
        raise ValueError(f"keep the GPU busy for a positive time of at most 1 s, not {busy_seconds}")
    resource = make_resource(kind, pool_size=64 * MIB)
    pointers = [resource.allocate(MIB) for _ in range(warmup + repeat)]  # one to free per call
    cupy.cuda.runtime.deviceSynchronize()
    return time_behind_busy_gpu(
        lambda: resource.deallocate(pointers.pop(), MIB),
        busy_seconds=busy_seconds,
        label=kind,
        warmup=warmup,
        repeat=repeat,
    )


ALLOCATORS: dict[str, Callable[[], Allocator]] = {
    "python loop only": _python_loop_only,
    "cudaMalloc (CUDA runtime)": _cuda_runtime,
    "cudaMalloc (RMM)": _rmm("cudaMalloc"),
    "pool (RMM)": _rmm("pool"),
    "RMM call, no work (0 bytes)": _rmm_binding_only,
    "cudaMallocAsync (RMM)": _rmm("cudaMallocAsync"),
    "CuPy pool": _cupy_pool,
    "PyTorch caching allocator": _torch_caching,
}


def _gpu_work(busy_us: int) -> tuple[Callable[[], None], Callable[[], None]]:
    """A launcher that queues ``busy_us`` microseconds of GPU work, and a wait for the GPU."""
    import cupy

    queue_work = gpu_sleeper()  # compiled and loaded before any timing
    return (lambda: queue_work(busy_us / 1e6)), cupy.cuda.runtime.deviceSynchronize


class Churn:
    """A working set of live buffers that :meth:`run` churns through the plan's steps (the same ones each run).

    ``gpu_work`` is ``(queue, wait)``: called before each step and after the last; by default, the spinning
    kernel of :func:`_gpu_work` when the plan has ``busy_us``, and nothing otherwise.
    """

    def __init__(self, allocator: Allocator, plan: ChurnPlan, gpu_work=None):
        self.allocator, self.plan = allocator, plan
        if gpu_work is None and plan.busy_us:
            gpu_work = _gpu_work(plan.busy_us)
        self.gpu_work = gpu_work
        sizes = plan.sizes()
        self._steps = list(zip(sizes[plan.live :], plan.victims(), strict=True))
        self.live = [allocator.allocate(size) for size in sizes[: plan.live]]

    def run(self) -> None:
        """Free one buffer and allocate another, ``plan.steps`` times, then wait for the GPU."""
        allocate, release, live = self.allocator.allocate, self.allocator.release, self.live
        queue = self.gpu_work[0] if self.gpu_work else None
        for size, victim in self._steps:
            if queue is not None:
                queue()
            release(live[victim])
            live[victim] = None  # the last reference goes before the next allocation, for every allocator
            live[victim] = allocate(size)
        self.allocator.synchronize()
        if self.gpu_work:
            self.gpu_work[1]()

    def close(self) -> None:
        for handle in self.live:
            self.allocator.release(handle)
        self.live = []


@dataclass(frozen=True)
class ChurnResult:
    """Seconds per step (one free and one allocation) of one allocator: the median of the repeats."""

    allocator: str
    seconds_per_step: float
    samples: tuple[float, ...]
    steps: int


def repeats_apart(one: ChurnResult, other: ChurnResult) -> bool:
    """Whether every repeat of ``one`` is faster than every repeat of ``other``, or the other way round: the
    two ranges of repeats do not overlap, so their medians' order is not a matter of which repeats were drawn.

    >>> fast = ChurnResult("driver", 3e-6, (2.9e-6, 3e-6, 3.2e-6), 100)
    >>> slow = ChurnResult("rmm", 5e-6, (4.8e-6, 5e-6, 5.1e-6), 100)
    >>> repeats_apart(fast, slow), repeats_apart(slow, fast)
    (True, True)
    >>> repeats_apart(fast, ChurnResult("rmm", 3.1e-6, (3.1e-6, 3.3e-6), 100))
    False
    """
    return max(one.samples) < min(other.samples) or max(other.samples) < min(one.samples)


def churn_rows(
    results: list[ChurnResult],
    *,
    baseline: str = "cudaMalloc (RMM)",
    floor: str = "python loop only",
    spread: bool = False,
):
    """A table: per free + allocation as measured (the median of the repeats), less the Python loop's own time,
    and how many times faster than ``baseline`` each allocator is; with ``spread``, the fastest and the slowest
    repeat beside the median.

    >>> rows = churn_rows([ChurnResult("python loop only", 1e-6, (0.9e-6, 1e-6, 1.2e-6), 10),
    ...                    ChurnResult("cudaMalloc (RMM)", 5e-6, (4e-6, 5e-6, 7e-6), 10)], spread=True)
    >>> rows[1]["repeats, fastest to slowest"], rows[1]["less the Python loop"]
    ('4.00 µs to 7.00 µs', '4.00 µs')
    """
    by_name = {r.allocator: r for r in results}
    base, loop = by_name[baseline].seconds_per_step, by_name[floor].seconds_per_step
    rows = []
    for r in results:
        row = {"allocator": r.allocator, "per free + allocation": format_seconds(r.seconds_per_step)}
        if spread:
            fastest, slowest = format_seconds(min(r.samples)), format_seconds(max(r.samples))
            row["repeats, fastest to slowest"] = f"{fastest} to {slowest}"
        row["less the Python loop"] = format_seconds(max(r.seconds_per_step - loop, 0.0))
        row[f"vs {baseline}"] = "not an allocator" if r.allocator == floor else f"{base / r.seconds_per_step:.1f}×"
        rows.append(row)
    return rows


def measure(name: str, plan: ChurnPlan | None = None, *, repeat: int = 5) -> ChurnResult:
    """Churn through ``plan`` with the allocator called ``name``, in this process: one warm-up, then repeats."""

    if name not in ALLOCATORS:
        raise ValueError(f"unknown allocator {name!r}; choose one of: {', '.join(ALLOCATORS)}")
    plan = ChurnPlan(**plan) if isinstance(plan, dict) else plan or ChurnPlan()
    churn = Churn(ALLOCATORS[name](), plan)
    try:
        timing = time_wall(churn.run, label=name, warmup=1, repeat=repeat)
    finally:
        churn.close()
    samples = tuple(s / plan.steps for s in timing.samples)
    return ChurnResult(name, timing.median / plan.steps, samples, plan.steps)


def measure_in_fresh_process(name: str, plan: ChurnPlan | None = None, *, repeat: int = 5, timeout: float = 300):
    """:func:`measure` in a new Python process, so no allocator's cache or state leaks into another's."""

    plan = plan or ChurnPlan()
    found = fresh_process.call(
        "support.memory.churn:measure",
        name=name,
        plan=asdict(plan),
        repeat=repeat,
        what=f"the churn of {name!r}",
        timeout=timeout,
    )
    return ChurnResult(found["allocator"], found["seconds_per_step"], tuple(found["samples"]), found["steps"])
