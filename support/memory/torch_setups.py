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
a cuDF column reaches PyTorch without a copy.

:func:`capture_with_mem_pool` asks where a CUDA graph's own memory comes from: it warms up and captures the step
of a MemPool tensor *inside* ``use_mem_pool`` (or, the control, after it), and reads RMM's statistics and
PyTorch's reserved bytes after the warm-ups and after the capture, in a process of its own.
"""

from __future__ import annotations

import contextlib

from support import fresh_process
from support.bench import time_cuda
from support.memory.pools import make_resource
from support.units import GIB, MIB, describe_bytes

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

    from support.ecg import step_speed  # noqa: PLC0415  # imports torch at its top

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
        found["CUDA graph"] = f"fails: {str(error).splitlines()[0]}"
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
    for _ in range(warmup):
        step()

    def many() -> None:
        for _ in range(steps):
            step()

    timing = time_cuda(many, warmup=0, repeat=repeat, label="steps")
    return timing.median * 1e3 / steps, timing.min * 1e3 / steps, timing.max * 1e3 / steps


def measure_in_fresh_process(setup: str, **options) -> dict:
    """:func:`measure_here` in a new Python process."""
    if setup not in SETUPS:  # before a process is started
        raise ValueError(f"unknown setup {setup!r}; choose one of: {', '.join(SETUPS)}")
    return fresh_process.call(
        "support.memory.torch_setups:measure_here", setup=setup, what=f"the setup {setup!r}", **options
    )


#: The two ways :func:`capture_with_mem_pool` captures: the claim's, and its control.
CAPTURES = ("inside use_mem_pool", "after use_mem_pool")


def capture_with_mem_pool(
    where: str = "inside use_mem_pool", batch_size: int = 512, beats: int = 20_000, width: int = 176
) -> dict:
    """The graphed step of a MemPool tensor (RMM's memory), warmed up and captured ``where``, in this process.

    ``"inside use_mem_pool"``: the warm-ups and the capture run inside ``with torch.cuda.use_mem_pool(pool)``;
    ``"after use_mem_pool"`` (the control): the same step, captured once the block is closed, so the capture
    takes a private pool of the graph's own from PyTorch's allocator. RMM's statistics (the bytes it has handed
    out, and how many allocations) and ``torch.cuda.memory_reserved()`` (every segment PyTorch holds, its MemPools
    included) are read after the warm-ups and again after the capture: memory the capture took from RMM shows in
    both, memory it took from PyTorch's own ``cudaMalloc`` only in the second.
    """
    if where not in CAPTURES:
        raise ValueError(f"unknown capture {where!r}; choose one of: {', '.join(CAPTURES)}")
    import rmm
    import torch
    from rmm.allocators.torch import rmm_torch_allocator

    from support.ecg import step_speed  # noqa: PLC0415  # imports torch at its top

    statistics = rmm.mr.StatisticsResourceAdaptor(make_resource("pool", pool_size=GIB))
    rmm.mr.set_current_device_resource(statistics)
    pool = torch.cuda.MemPool(allocator=rmm_torch_allocator.allocator())
    with torch.cuda.use_mem_pool(pool):
        exchanged = torch.empty(EXCHANGED_BYTES, dtype=torch.uint8, device="cuda")
    data = exchanged[: beats * width * 4].view(torch.float32).view(beats, width)
    data.normal_(generator=torch.Generator("cuda").manual_seed(0))
    readings: dict[str, tuple[int, int, int]] = {}

    def read(when: str) -> None:
        counts = statistics.allocation_counts
        readings[when] = (_counted(counts, "current_bytes"), _served(statistics), int(torch.cuda.memory_reserved()))

    found: dict[str, object] = {"capture": where}
    routing = torch.cuda.use_mem_pool(pool) if where.startswith("inside") else contextlib.nullcontext()
    try:
        with routing:
            graphed = step_speed.graphed_step(data, batch_size, before_capture=lambda: read("before"))
            read("after")
        found["CUDA graph"] = "captured"
        found["CUDA graph step ms"] = _step_ms(graphed)[0]
    except Exception as error:  # noqa: BLE001 - the outcome is the measurement
        reason = str(error).strip().splitlines()[0][:70] if str(error).strip() else ""
        found["CUDA graph"] = f"fails: {type(error).__name__}: {reason}"
    if "before" in readings:
        found["RMM bytes before the capture"] = readings["before"][0]
        found["PyTorch reserved before the capture"] = readings["before"][2]
    if "after" in readings:
        found["RMM bytes after the capture"] = readings["after"][0]
        found["RMM allocations during the capture"] = readings["after"][1] - readings["before"][1]
        found["PyTorch reserved after the capture"] = readings["after"][2]
    del exchanged
    return found


def capture_with_mem_pool_in_fresh_process(where: str = "inside use_mem_pool", **options) -> dict:
    """:func:`capture_with_mem_pool` in a new process; a process that dies is reported, not raised."""
    if where not in CAPTURES:  # before a process is started
        raise ValueError(f"unknown capture {where!r}; choose one of: {', '.join(CAPTURES)}")
    try:
        return fresh_process.call(
            "support.memory.torch_setups:capture_with_mem_pool", where=where, what=f"a capture {where}", **options
        )
    except fresh_process.FreshProcessError as error:
        return {"capture": where, "CUDA graph": f"the process failed: {str(error).splitlines()[-1][:70]}"}


def capture_rows(captures: list[dict]) -> list[dict[str, str]]:
    """One line per capture of :func:`capture_with_mem_pool`: what RMM and PyTorch held before and after it.

    >>> found = {"capture": "inside use_mem_pool", "CUDA graph": "captured", "RMM bytes before the capture": 2**26,
    ...          "RMM bytes after the capture": 2**26 + 2**21, "RMM allocations during the capture": 1,
    ...          "PyTorch reserved before the capture": 2**27, "PyTorch reserved after the capture": 2**27 + 2**21}
    >>> capture_rows([found])[0]["RMM during the capture"]
    '+2.00 MiB, 1 allocation'
    >>> capture_rows([{"capture": "after use_mem_pool", "CUDA graph": "fails: RuntimeError"}])[0]["RMM, bytes"]
    '—'
    """

    def change(found: dict, what: str) -> str:
        before, after = found.get(f"{what} before the capture"), found.get(f"{what} after the capture")
        if before is None or after is None:
            return "—"
        return f"{describe_bytes(before)} -> {describe_bytes(after)}"

    rows = []
    for found in captures:
        before, after = found.get("RMM bytes before the capture"), found.get("RMM bytes after the capture")
        during = "—"
        if before is not None and after is not None:
            sign = "+" if after >= before else "-"
            count = found["RMM allocations during the capture"]
            during = f"{sign}{describe_bytes(abs(after - before))}, {count} allocation{'' if count == 1 else 's'}"
        rows.append(
            {
                "capture": found["capture"],
                "CUDA graph": str(found["CUDA graph"]),
                "RMM, bytes": change(found, "RMM bytes"),
                "RMM during the capture": during,
                "PyTorch reserved": change(found, "PyTorch reserved"),
            }
        )
    return rows


def _counted(counts, field: str) -> int:
    """One field of RMM's ``allocation_counts`` (an object, or a dict in some versions of RMM)."""
    return int(counts[field] if isinstance(counts, dict) else getattr(counts, field))


def _served(statistics) -> int:
    """How many allocations an RMM ``StatisticsResourceAdaptor`` has served so far."""
    return _counted(statistics.allocation_counts, "total_count")
