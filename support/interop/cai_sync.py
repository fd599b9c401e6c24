"""What the CUDA Array Interface's synchronization costs a Numba kernel launch.

At every launch Numba reads ``__cuda_array_interface__`` of each array argument that is not its own device
array. When the interface names a stream (CuPy's does, ``"stream": 1``), Numba first synchronizes with that
stream, so that the producer's pending writes are done before the kernel reads. The environment variable
``NUMBA_CUDA_ARRAY_INTERFACE_SYNC=0`` turns that off; Numba reads it once, at import, so each setting is
measured in a fresh process (:mod:`support.fresh_process`).

Turning it off is safe when the producer's work and the kernel are on the same stream, or when the program
waits for the producer itself (``stream.synchronize()``) before launching.
"""

from __future__ import annotations

#: The array arguments measured, in the order of the table.
ARGUMENT_KINDS = ("Numba device array", "CuPy array", "PyTorch tensor")
SYNC_VARIABLE = "NUMBA_CUDA_ARRAY_INTERFACE_SYNC"


def _check_counts(launches: int, repeat: int) -> None:
    if launches < 1 or repeat < 1:
        raise ValueError(f"need at least one launch and one repeat, not {launches} launches × {repeat} repeats")


def launch_overhead(*, sync: bool, launches: int = 200, repeat: int = 7) -> dict[str, float]:
    """Seconds per launch of a tiny Numba kernel for each of :data:`ARGUMENT_KINDS`, in a fresh process."""
    from support import fresh_process

    _check_counts(launches, repeat)
    return fresh_process.call(
        "support.interop.cai_sync:measure_here",
        launches=launches,
        repeat=repeat,
        what=f"the launch-overhead measurement ({SYNC_VARIABLE}={int(sync)})",
        env={SYNC_VARIABLE: "1" if sync else "0"},
    )


def measure_here(launches: int = 200, repeat: int = 7) -> dict[str, float]:
    """Seconds per launch, in this process: ``launches`` launches of a one-line kernel per repeat, wall clock,
    median of ``repeat`` after a warm-up, on a 1024-element float32 array of each kind."""
    import cupy
    import numba.cuda
    import numpy as np
    import torch

    from support.bench import time_wall

    _check_counts(launches, repeat)

    @numba.cuda.jit
    def add_one(values):
        i = numba.cuda.grid(1)
        if i < values.size:
            values[i] += 1

    arrays = {
        "Numba device array": numba.cuda.to_device(np.zeros(1024, dtype=np.float32)),
        "CuPy array": cupy.zeros(1024, dtype=cupy.float32),
        "PyTorch tensor": torch.zeros(1024, dtype=torch.float32, device="cuda"),
    }

    def launch_all(values) -> None:
        for _ in range(launches):
            add_one[8, 128](values)

    seconds = {}
    for kind, values in arrays.items():
        timing = time_wall(lambda v=values: launch_all(v), warmup=1, repeat=repeat)
        numba.cuda.synchronize()
        seconds[kind] = timing.median / launches
    return seconds
