"""The link between host and GPU: its bandwidth, pinned vs pageable memory, and what a round trip per stage costs.

Host memory is **pageable** by default: the operating system may move it, so the driver first copies it into a
pinned staging buffer and only then to the GPU. **Pinned** (page-locked) memory can be read by the GPU's copy
engines directly. :func:`transfer_timings` measures both directions with both kinds of host memory.

:func:`pipeline_runs` runs the same few stages three ways: on the CPU, on the GPU with the data staying there,
and on the GPU with a round trip through host memory after every stage, the way a pipeline that hands data
between libraries by way of NumPy does.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


def transfer_timings(nbytes: int, *, repeat: int = 10) -> dict[str, object]:
    """CUDA-event timings of copying ``nbytes`` host→GPU and GPU→host, from pageable and from pinned memory.

    The first four copy between buffers that exist already; the last two make a new array at the far end, as
    ``cupy.asarray(numpy_array)`` and ``cupy_array.get()`` do.
    """
    import cupy
    import cupyx

    from support.bench import time_cuda

    count = nbytes // 8
    pageable = np.ones(count)
    pinned = cupyx.empty_pinned(count, dtype=np.float64)
    pinned[...] = 1.0
    device = cupy.empty(count, dtype=np.float64)
    work = {
        "host→GPU, pageable": lambda: device.set(pageable),
        "host→GPU, pinned": lambda: device.set(pinned),
        "GPU→host, pageable": lambda: device.get(out=pageable),
        "GPU→host, pinned": lambda: device.get(out=pinned),
        "host→GPU, pageable, into a new GPU array": lambda: cupy.asarray(pageable),
        "GPU→host, pageable, into a new host array": lambda: device.get(),
    }
    return {name: time_cuda(fn, label=name, warmup=2, repeat=repeat) for name, fn in work.items()}


def bandwidth_rows(timings: dict[str, object], nbytes: int) -> list[dict[str, object]]:
    """GB/s per direction and kind of host memory."""
    from support.bench import format_seconds

    return [
        {"copy": name, "median": format_seconds(t.median), "GB/s": round(nbytes / t.median / 1e9, 1)}
        for name, t in timings.items()
    ]


def stages(xp) -> list[tuple[str, Callable]]:
    """Four array stages written once for NumPy or CuPy: standardize, clip, a signed square root, a running sum."""
    return [
        ("standardize", lambda x: (x - x.mean()) / x.std()),
        ("clip", lambda x: xp.clip(x, -3.0, 3.0)),
        ("signed sqrt", lambda x: xp.sign(x) * xp.sqrt(xp.abs(x))),
        ("running sum", lambda x: xp.cumsum(x)),
    ]


def run_stages(x, xp, *, round_trip: bool = False):
    """Run :func:`stages` on ``x``; with ``round_trip``, copy the data to host memory and back after each stage."""
    for _, stage in stages(xp):
        x = stage(x)
        if round_trip:
            x = xp.asarray(x.get() if hasattr(x, "get") else np.array(x))  # to host memory and back
    return x


@dataclass(frozen=True)
class PipelineRuns:
    """The stages timed three ways, and what the round trips would cost at the measured bandwidth."""

    cpu: object
    gpu_resident: object
    gpu_round_trips: object
    nbytes: int
    predicted_round_trip_seconds: float

    def rows(self) -> list[dict[str, object]]:
        from support.bench import format_seconds

        base = self.cpu.median
        return [
            {"run": t.label, "median": format_seconds(t.median), "speed-up over the CPU": f"{base / t.median:.1f}×"}
            for t in (self.cpu, self.gpu_resident, self.gpu_round_trips)
        ]


def pipeline_runs(count: int, up: float, down: float, *, seed: int = 0) -> PipelineRuns:
    """Time :func:`run_stages` on ``count`` float64 values: CPU, GPU resident, GPU with a round trip per stage.

    ``up`` and ``down`` are measured bandwidths (bytes/s) of the copies a round trip makes, from
    :func:`transfer_timings`; with them the round trips' cost is predicted before it is measured.
    """
    import cupy

    from support.bench import time_cuda, time_wall

    host = np.random.default_rng(seed).normal(size=count)
    device = cupy.asarray(host)
    cpu = time_wall(lambda: run_stages(host, np), label="CPU (NumPy)", warmup=1, repeat=3)
    resident = time_cuda(lambda: run_stages(device, cupy), label="GPU, data stays", warmup=2, repeat=10)
    trips = time_cuda(
        lambda: run_stages(device, cupy, round_trip=True), label="GPU, round trip per stage", warmup=1, repeat=5
    )
    crossings = len(stages(np)) * (host.nbytes / down + host.nbytes / up)
    return PipelineRuns(cpu, resident, trips, host.nbytes, crossings)
