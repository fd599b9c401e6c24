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

Each reports: the eager step's time, a CUDA graph of the step (its time, or the error of the capture), whether
``torch.cuda.max_memory_allocated()`` still answers, how many bytes of a 64 MiB exchanged tensor RMM's
statistics saw, and whether a cuDF column reaches PyTorch without a copy.
"""

from __future__ import annotations

SETUPS = (
    "PyTorch's own",
    "all through RMM's pool",
    "all through the driver's pool",
    "own, with a MemPool on RMM",
)


def measure_here(setup: str, batch_size: int = 512, beats: int = 20_000, width: int = 176) -> dict:
    """The measurements of one setup, in this process (which must not have touched CUDA yet)."""
    if setup not in SETUPS:
        raise ValueError(f"unknown setup {setup!r}; choose one of: {', '.join(SETUPS)}")
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
    before = statistics.allocation_counts.current_bytes
    if setup.endswith("MemPool on RMM"):
        pool = torch.cuda.MemPool(allocator=rmm_torch_allocator.allocator())
        with torch.cuda.use_mem_pool(pool):
            exchanged = torch.empty(64 * MIB, dtype=torch.uint8, device="cuda")
    else:
        exchanged = torch.empty(64 * MIB, dtype=torch.uint8, device="cuda")
    found["RMM saw of a 64 MiB exchanged tensor"] = int(statistics.allocation_counts.current_bytes - before)
    data = torch.randn(beats, width, device="cuda", generator=torch.Generator("cuda").manual_seed(0))
    found["eager step ms"] = step_speed.time_steps(step_speed.eager_step(data, batch_size))
    try:
        found["CUDA graph step ms"] = step_speed.time_steps(step_speed.graphed_step(data, batch_size))
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


def measure_in_fresh_process(setup: str, **options) -> dict:
    """:func:`measure_here` in a new Python process."""
    from support import fresh_process

    if setup not in SETUPS:  # before a process is started
        raise ValueError(f"unknown setup {setup!r}; choose one of: {', '.join(SETUPS)}")
    return fresh_process.call(
        "support.memory.torch_setups:measure_here", setup=setup, what=f"the setup {setup!r}", **options
    )
