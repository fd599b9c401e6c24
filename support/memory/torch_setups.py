"""PyTorch inside the shared pool, or beside it: four setups, each measured in a fresh process.

PyTorch's allocator is chosen once per process, so :func:`measure_in_fresh_process` starts one process per setup
(:data:`SETUPS`) and measures there, with chapter 6's training step of the beat autoencoder
(:mod:`support.ecg.step_speed`) on random beats:

- ``PyTorch's own``: PyTorch's caching allocator; RMM serves cuDF, CuPy and Numba only;
- ``all through RMM's pool`` and ``all through the driver's pool``: ``change_current_allocator`` hands every
  PyTorch allocation to RMM (``rmm.allocators.torch``, a ``CUDAPluggableAllocator``) over an RMM pool or
  ``CudaAsyncMemoryResource``;
- ``own, with a MemPool on RMM``: PyTorch's caching allocator for training, and a ``torch.cuda.MemPool`` whose
  segments come from RMM (``MemPool(allocator=rmm_torch_allocator.allocator())``) for the tensors chosen with
  ``torch.cuda.use_mem_pool(pool)``, those exchanged with cuDF and CuPy.

The training steps read their beats from the 64 MiB exchanged tensor, so in the MemPool setup they read memory
that RMM served. Each setup reports: how many bytes of that tensor RMM's statistics saw and how many PyTorch's
own statistics counted, the eager step's time (median and the extremes of its repeats), a CUDA graph of the step
(its time, or the error of the capture), whether ``torch.cuda.max_memory_allocated()`` still answers, and whether
a cuDF column reaches PyTorch without a copy. :func:`capture_inside_mem_pool` captures the graph *inside*
``use_mem_pool``, in a process of its own.
"""

from __future__ import annotations

SETUPS = (
    "PyTorch's own",
    "all through RMM's pool",
    "all through the driver's pool",
    "own, with a MemPool on RMM",
)

#: The bytes of the tensor each setup allocates for exchange with cuDF and CuPy (the beats are a view of it).
EXCHANGED_BYTES = 64 * 2**20


def measure_here(setup: str, batch_size: int = 512, beats: int = 20_000, width: int = 176) -> dict:
    """The measurements of one setup, in this process (which must not have touched CUDA yet).

    The training steps read their beats from the 64 MiB exchanged tensor (a float32 view of its first bytes), so
    in the MemPool setup the eager and graphed steps read memory that RMM served.
    """
    if setup not in SETUPS:
        raise ValueError(f"unknown setup {setup!r}; choose one of: {', '.join(SETUPS)}")
    if beats * width * 4 > EXCHANGED_BYTES:
        raise ValueError(f"{beats} beats of {width} float32 values do not fit the {EXCHANGED_BYTES} exchanged bytes")
    import rmm
    import torch
    from rmm.allocators.torch import rmm_torch_allocator

    from support.ecg import step_speed
    from support.memory.pools import make_resource
    from support.units import GIB, MIB

    base = make_resource("cudaMallocAsync" if "driver" in setup else "pool", pool_size=GIB)
    statistics = rmm.mr.StatisticsResourceAdaptor(base)
    rmm.mr.set_current_device_resource(statistics)
    if setup.startswith("all through"):
        torch.cuda.memory.change_current_allocator(rmm_torch_allocator)
    found: dict[str, object] = {"setup": setup}
    counted_before = _pytorch_allocated(torch)
    before = statistics.allocation_counts.current_bytes
    if setup.endswith("MemPool on RMM"):
        pool = torch.cuda.MemPool(allocator=rmm_torch_allocator.allocator())
        with torch.cuda.use_mem_pool(pool):
            exchanged = torch.empty(EXCHANGED_BYTES, dtype=torch.uint8, device="cuda")
    else:
        exchanged = torch.empty(EXCHANGED_BYTES, dtype=torch.uint8, device="cuda")
    found["RMM saw of a 64 MiB exchanged tensor"] = int(statistics.allocation_counts.current_bytes - before)
    counted_after = _pytorch_allocated(torch)
    found["PyTorch counted of it"] = (
        counted_after - counted_before if None not in (counted_before, counted_after) else "fails: RuntimeError"
    )
    data = exchanged[: beats * width * 4].view(torch.float32).view(beats, width)
    data.normal_(generator=torch.Generator("cuda").manual_seed(0))
    found["steps read the exchanged tensor"] = data.data_ptr() == exchanged.data_ptr()
    eager = _step_ms(step_speed.eager_step(data, batch_size))
    found["eager step ms"], found["eager min ms"], found["eager max ms"] = eager
    try:
        found["CUDA graph step ms"] = _step_ms(step_speed.graphed_step(data, batch_size))[0]
        found["CUDA graph"] = "captured"
    except RuntimeError as error:
        found["CUDA graph"] = f"fails: {str(error).splitlines()[0][:70]}"
    try:
        found["max_memory_allocated"] = f"{torch.cuda.max_memory_allocated() / MIB:.0f} MiB"
    except RuntimeError as error:
        found["max_memory_allocated"] = f"fails: {type(error).__name__}"
    import cudf

    column = cudf.Series(range(1 << 20), dtype="float32")
    tensor = torch.as_tensor(column, device="cuda")
    found["cuDF column shared"] = tensor.data_ptr() == column.__cuda_array_interface__["data"][0]
    del exchanged
    return found


def _pytorch_allocated(torch) -> int | None:
    """``torch.cuda.memory_allocated()`` after a synchronize, or None where the allocator cannot say (RMM's)."""
    torch.cuda.synchronize()
    try:
        return int(torch.cuda.memory_allocated())
    except RuntimeError:
        return None


def _step_ms(step, *, steps: int = 50, warmup: int = 10, repeat: int = 5) -> tuple[float, float, float]:
    """Milliseconds per call of ``step``: the median, min and max of ``repeat`` CUDA-event timings of ``steps``
    calls, after ``warmup`` calls (the spread is what tells two setups apart, or not)."""
    from support.bench import time_cuda

    for _ in range(warmup):
        step()

    def many() -> None:
        for _ in range(steps):
            step()

    timing = time_cuda(many, warmup=0, repeat=repeat, label="steps")
    return timing.median * 1e3 / steps, timing.min * 1e3 / steps, timing.max * 1e3 / steps


def measure_in_fresh_process(setup: str, **options) -> dict:
    """:func:`measure_here` in a new Python process."""
    from support import fresh_process

    if setup not in SETUPS:  # before a process is started
        raise ValueError(f"unknown setup {setup!r}; choose one of: {', '.join(SETUPS)}")
    return fresh_process.call(
        "support.memory.torch_setups:measure_here", setup=setup, what=f"the setup {setup!r}", **options
    )


def capture_inside_mem_pool(batch_size: int = 512, beats: int = 20_000, width: int = 176) -> dict:
    """The graphed step captured *inside* ``use_mem_pool`` (a MemPool on RMM), in this process: whether the capture
    succeeds, and how many allocations RMM served while the warm-ups and the capture ran (the warm-ups' forward
    passes route to the pool; whether the capture's own allocations do is what this measures)."""
    import rmm
    import torch
    from rmm.allocators.torch import rmm_torch_allocator

    from support.ecg import step_speed
    from support.memory.pools import make_resource
    from support.units import GIB

    statistics = rmm.mr.StatisticsResourceAdaptor(make_resource("pool", pool_size=GIB))
    rmm.mr.set_current_device_resource(statistics)
    pool = torch.cuda.MemPool(allocator=rmm_torch_allocator.allocator())
    with torch.cuda.use_mem_pool(pool):
        exchanged = torch.empty(EXCHANGED_BYTES, dtype=torch.uint8, device="cuda")
    data = exchanged[: beats * width * 4].view(torch.float32).view(beats, width)
    data.normal_(generator=torch.Generator("cuda").manual_seed(0))
    served_before = _served(statistics)
    found: dict[str, object] = {}
    try:
        with torch.cuda.use_mem_pool(pool):
            graphed = step_speed.graphed_step(data, batch_size)
        found["CUDA graph"] = "captured"
        found["CUDA graph step ms"] = _step_ms(graphed)[0]
    except Exception as error:  # noqa: BLE001 - the outcome is the measurement
        reason = str(error).strip().splitlines()[0][:70] if str(error).strip() else ""
        found["CUDA graph"] = f"fails: {type(error).__name__}: {reason}"
    found["RMM allocations during warm-ups and capture"] = _served(statistics) - served_before
    return found


def capture_inside_mem_pool_in_fresh_process(**options) -> dict:
    """:func:`capture_inside_mem_pool` in a new process; a process that dies is reported, not raised."""
    from support import fresh_process

    try:
        return fresh_process.call(
            "support.memory.torch_setups:capture_inside_mem_pool", what="a capture inside use_mem_pool", **options
        )
    except fresh_process.FreshProcessError as error:
        return {"CUDA graph": f"the process failed: {str(error).splitlines()[-1][:70]}"}


def _served(statistics) -> int:
    """How many allocations an RMM ``StatisticsResourceAdaptor`` has served so far."""
    counts = statistics.allocation_counts
    return int(counts["total_count"] if isinstance(counts, dict) else counts.total_count)
