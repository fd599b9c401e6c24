"""What Numba's synchronisation on the CUDA Array Interface costs, and which arguments it applies to.

Since numba-cuda 0.25 (NVIDIA/numba-cuda PR 703) a kernel argument is turned into a cuda.core
``StridedMemoryView``: an argument that has ``__dlpack__`` (a CuPy array, a PyTorch tensor) through
``StridedMemoryView.from_dlpack`` with the launch stream, so the producer orders its own pending work before the
kernel (on the GPU); only an argument that speaks the CUDA Array Interface alone goes through
``from_cuda_array_interface``, and for it Numba also synchronises the stream the interface names, on the host,
unless ``NUMBA_CUDA_ARRAY_INTERFACE_SYNC=0`` (``numba_cuda/numba/cuda/cudadrv/devicearray.py``,
``_to_strided_memory_view``, in 0.30.4). ``cuda.as_cuda_array(x)`` reads the interface whatever else ``x`` speaks,
and synchronises likewise unless ``sync=False`` or the variable says no.

For an interface-only argument the variable adds a host wait, but it is not what orders the kernel: the line
before it, ``StridedMemoryView.from_cuda_array_interface(obj, stream_ptr=<launch stream>)``, makes the launch
stream wait for the stream the interface names with an event (``cuEventRecord`` on the producer's stream,
``cuStreamWaitEvent`` on the consumer's, cuda.core's ``_memoryview.pyx``), on the GPU, whatever the variable says.
``as_cuda_array`` has no such event: there the host wait is the only ordering.

Numba reads the variable once, at import, so each setting is measured in a fresh process
(:mod:`support.fresh_process`): :func:`launch_overhead` times a tiny kernel launched on each kind of argument,
:func:`launch_behind_busy_gpu` times one launch while the GPU is busy with queued work, where a host wait shows,
and :func:`race_launch` races each of :data:`LAUNCH_RACES` against a producer's pending write
(:mod:`support.interop.races`), where a missing order shows as wrong sums.
"""

from __future__ import annotations

import numpy as np

from support import fresh_process
from support.bench import gpu_sleeper, time_behind_busy_gpu, time_wall
from support.interop import races

#: The array arguments measured, in the order of the table.
ARGUMENT_KINDS = ("Numba device array", "CuPy array", "PyTorch tensor", "CAI-only object")
SYNC_VARIABLE = "NUMBA_CUDA_ARRAY_INTERFACE_SYNC"

#: The consumers :func:`race_launch` races, each on an interface-only array whose write is pending on a
#: non-blocking side stream: a kernel launch on it, the same launch when the interface names no stream (the
#: control: nothing to order by), and ``as_cuda_array`` followed by the same kernel.
LAUNCH_RACES = (
    "kernel launched on x, the interface names its stream",
    "kernel launched on x, the interface names no stream",
    "numba.cuda.as_cuda_array(x), then the kernel",
)


class InterfaceOnly:
    """An array that speaks the CUDA Array Interface and nothing else, as a producer without DLPack (an older
    library) does: naming CuPy's current stream, or with ``names_stream=False`` no stream at all, as a cuDF column
    and an RMM ``DeviceBuffer`` write theirs (version 0 of the interface, no ``stream`` entry)."""

    def __init__(self, array, *, names_stream: bool = True):
        self.array = array
        self.names_stream = names_stream  # False: no ``stream`` entry, as cuDF writes its interface

    @property
    def __cuda_array_interface__(self):
        described = dict(self.array.__cuda_array_interface__)
        described.pop("stream", None)
        if self.names_stream:
            import cupy

            described["stream"] = cupy.cuda.get_current_stream().ptr or 1  # 1: the legacy default stream
        return described


def _check_counts(launches: int, repeat: int) -> None:
    if launches < 1 or repeat < 1:
        raise ValueError(f"need at least one launch and one repeat, not {launches} launches × {repeat} repeats")


def launch_overhead(*, sync: bool, launches: int = 200, repeat: int = 7) -> dict[str, float]:
    """Seconds per launch of a tiny Numba kernel for each of :data:`ARGUMENT_KINDS`, in a fresh process."""
    _check_counts(launches, repeat)
    return fresh_process.call(
        "support.interop.cai_sync:measure_here",
        launches=launches,
        repeat=repeat,
        what=f"the launch-overhead measurement ({SYNC_VARIABLE}={int(sync)})",
        env={SYNC_VARIABLE: "1" if sync else "0"},
    )


def launch_behind_busy_gpu(*, sync: bool, busy_seconds: float = 0.03) -> dict[str, float]:
    """Seconds one launch takes on the host while ``busy_seconds`` of work is queued, per argument kind, in a
    fresh process with the variable on (``sync``) or off."""
    return fresh_process.call(
        "support.interop.cai_sync:busy_here",
        busy_seconds=busy_seconds,
        what=f"the launch behind a busy GPU ({SYNC_VARIABLE}={int(sync)})",
        env={SYNC_VARIABLE: "1" if sync else "0"},
    )


def race_launch(*, sync: bool, tries: int = 10) -> dict[str, str]:
    """The verdict of :func:`support.interop.races.run_route` (``"0/10 wrong"``) for each of :data:`LAUNCH_RACES`,
    in a fresh process with the variable on (``sync``) or off."""
    if tries < 1:
        raise ValueError(f"try at least once, not {tries} times")
    return fresh_process.call(
        "support.interop.cai_sync:race_here",
        tries=tries,
        what=f"the race of a launch on an interface-only array ({SYNC_VARIABLE}={int(sync)})",
        env={SYNC_VARIABLE: "1" if sync else "0"},
    )


def race_here(tries: int = 10) -> dict[str, str]:
    """:func:`race_launch`'s measurement, in this process: CuPy writes ones into an array on a non-blocking side
    stream behind 20 ms of GPU work; inside ``with stream:`` each consumer sums it through an
    :class:`InterfaceOnly` view (or ``as_cuda_array``), with a Numba kernel on Numba's default stream."""
    import numba.cuda

    named, unnamed, as_array = LAUNCH_RACES
    consumers = {
        named: lambda x: races.launch_total(InterfaceOnly(x), x.size),
        unnamed: lambda x: races.launch_total(InterfaceOnly(x, names_stream=False), x.size),
        as_array: lambda x: races.launch_total(numba.cuda.as_cuda_array(InterfaceOnly(x)), x.size),
    }
    sleep = gpu_sleeper()
    return {
        name: races.run_route(races.Route(races.CAI, True, consume), sleep, tries, non_blocking=True)
        for name, consume in consumers.items()
    }


def _arguments():
    import cupy
    import numba.cuda
    import torch

    return {
        "Numba device array": numba.cuda.to_device(np.zeros(1024, dtype=np.float32)),
        "CuPy array": cupy.zeros(1024, dtype=cupy.float32),
        "PyTorch tensor": torch.zeros(1024, dtype=torch.float32, device="cuda"),
        "CAI-only object": InterfaceOnly(cupy.zeros(1024, dtype=cupy.float32)),
    }


def _kernel():
    import numba.cuda

    @numba.cuda.jit
    def add_one(values):
        i = numba.cuda.grid(1)
        if i < values.size:
            values[i] += 1

    return add_one


def measure_here(launches: int = 200, repeat: int = 7) -> dict[str, float]:
    """Seconds per launch, in this process: ``launches`` launches of a one-line kernel per repeat, wall clock,
    median of ``repeat`` after a warm-up, on a 1024-element float32 array of each kind."""
    import numba.cuda

    _check_counts(launches, repeat)
    add_one = _kernel()

    def launch_all(values) -> None:
        for _ in range(launches):
            add_one[8, 128](values)

    seconds = {}
    for kind, values in _arguments().items():
        timing = time_wall(lambda v=values: launch_all(v), warmup=1, repeat=repeat)
        numba.cuda.synchronize()
        seconds[kind] = timing.median / launches
    return seconds


def busy_here(busy_seconds: float = 0.03, repeat: int = 5) -> dict[str, float]:
    """Seconds one launch keeps the host while ``busy_seconds`` of GPU work is queued on CuPy's current stream
    (:func:`support.bench.time_behind_busy_gpu`), per argument kind, in this process."""
    add_one = _kernel()
    found = {}
    for kind, values in _arguments().items():
        add_one[8, 128](values)  # compiled for this kind before the clock runs
        timing = time_behind_busy_gpu(lambda v=values: add_one[8, 128](v), busy_seconds=busy_seconds, repeat=repeat)
        found[kind] = timing.median
    return found
