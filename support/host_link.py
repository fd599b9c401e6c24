"""The link between host and GPU: its bandwidth, pinned vs pageable memory, and what a round trip per stage costs.

Host memory is **pageable** by default: the operating system may move it, so the driver first copies it into a
pinned staging buffer and only then to the GPU. **Pinned** (page-locked) memory can be read by the GPU's copy
engines directly. Chapter 1 times copies both ways with both kinds of host memory; :func:`bandwidth_rows`
turns the timings into a table.

:func:`pipeline_runs` runs the same few stages three ways: on the CPU, on the GPU with the data staying there,
and on the GPU with a round trip through host memory after every stage, the way a pipeline that hands data
between libraries by way of NumPy does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np


def bandwidth_rows(timings: dict[str, object], nbytes: int) -> list[dict[str, object]]:
    """GB/s per direction and kind of host memory."""
    from support.bench import format_seconds

    return [
        {"copy": name, "median": format_seconds(t.median), "GB/s": round(nbytes / t.median / 1e9, 1)}
        for name, t in timings.items()
    ]


def run_stages(x, steps: Sequence[Callable], *, round_trip: bool = False):
    """Apply ``steps`` to ``x`` in turn; with ``round_trip``, copy the data to host memory and back after each."""
    xp = type(x).__module__.split(".")[0]  # "numpy" or "cupy": where the data goes back to
    for step in steps:
        x = step(x)
        if round_trip and xp == "cupy":
            x = _cupy().asarray(x.get())  # to host memory and back
        elif round_trip:
            x = np.array(x)
    return x


def _cupy():
    import cupy

    return cupy


@dataclass(frozen=True)
class PipelineRuns:
    """The stages timed three ways, and what the round trips would cost at the measured bandwidth."""

    cpu: object
    gpu_resident: object
    gpu_round_trips: object
    nbytes: int
    predicted_round_trip_seconds: float

    def rows(self) -> list[dict[str, object]]:
        from support.bench import format_ratio, format_seconds

        base = self.cpu.median
        return [
            {"run": t.label, "median": format_seconds(t.median), "speed-up over the CPU": format_ratio(base / t.median)}
            for t in (self.cpu, self.gpu_resident, self.gpu_round_trips)
        ]


def pipeline_runs(
    count: int, stages: Callable[[object], Sequence[Callable]], up: float, down: float, *, seed: int = 0
) -> PipelineRuns:
    """Time ``stages(xp)`` on ``count`` float64 values: CPU (NumPy), GPU resident (CuPy), GPU with a round trip
    per stage.

    ``stages`` takes the array module and returns the steps, so the same code runs on both sides. ``up`` and
    ``down`` are measured bandwidths (bytes/s) of the copies a round trip makes (chapter 1 measures them); with
    them the round trips' cost is predicted before it is measured.
    """
    import cupy

    from support.bench import time_cuda, time_wall

    host = np.random.default_rng(seed).normal(size=count)
    device = cupy.asarray(host)
    on_cpu, on_gpu = stages(np), stages(cupy)
    if len(on_cpu) != len(on_gpu) or not on_cpu:
        raise ValueError("stages(xp) must give the same number of steps, at least one, for NumPy and CuPy")
    cpu = time_wall(lambda: run_stages(host, on_cpu), label="CPU (NumPy)", warmup=1, repeat=3)
    resident = time_cuda(lambda: run_stages(device, on_gpu), label="GPU, data stays", warmup=2, repeat=10)
    trips = time_cuda(
        lambda: run_stages(device, on_gpu, round_trip=True), label="GPU, round trip per stage", warmup=1, repeat=5
    )
    crossings = len(on_cpu) * (host.nbytes / down + host.nbytes / up)
    return PipelineRuns(cpu, resident, trips, host.nbytes, crossings)
