"""The link between host and GPU: its bandwidth, pinned vs pageable memory, and what a round trip per stage costs.

Host memory is **pageable** by default: the operating system may move it, so the driver first copies it into a
pinned staging buffer and only then to the GPU. **Pinned** (page-locked) memory can be read by the GPU's copy
engines directly. Chapter 1 times copies both ways with both kinds of host memory; :func:`bandwidth_rows`
turns the timings into a table. Those copies are queued back to back (CUDA events, a throughput figure): a copy
that CuPy starts asynchronously (``cupy.asarray`` of a NumPy array) may still be running when the next repeat's
host work starts. :func:`time_to_completion` times copies one at a time instead, each call ending when the GPU
has finished it (wall clock), which is what comparing a copy's host-side staging with another needs.

:func:`pipeline_runs` runs the same few stages three ways: on the CPU, on the GPU with the data staying there,
and on the GPU with a round trip through host memory after every stage, the way a pipeline that hands data
between libraries by way of NumPy does.

:func:`draw_host_link` draws the link at the bandwidths the chapter measured.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from support import bench
from support.bench import Timing, format_ratio, format_seconds
from support.figures import box, canvas


def bandwidth_rows(timings: dict[str, object], nbytes: int) -> list[dict[str, object]]:
    """GB/s per direction and kind of host memory."""
    return [
        {"copy": name, "median": format_seconds(t.median), "GB/s": round(nbytes / t.median / 1e9, 1)}
        for name, t in timings.items()
    ]


def time_to_completion(
    copies: Mapping[str, Callable[[], object]],
    *,
    warmup: int = 2,
    repeat: int = 10,
    synchronize: Callable[[], None] | None = None,
) -> dict[str, Timing]:
    """Time each copy with the wall clock from its call until the GPU has finished it, one repeat after another.

    Every call is followed by ``synchronize`` (by default a synchronisation of the current CUDA device), inside
    the timed span, so a repeat can neither overlap the next nor leave work queued behind it: an asynchronous copy
    counts in full, with the host work that prepared it. ``synchronize`` is a parameter for tests.
    """
    if synchronize is None:
        synchronize = _cupy().cuda.Device().synchronize
    synchronize()  # start with nothing queued

    def to_completion(copy: Callable[[], object]) -> Callable[[], None]:
        def call() -> None:
            copy()
            synchronize()

        return call

    return {
        name: bench.time_wall(to_completion(copy), label=name, warmup=warmup, repeat=repeat)
        for name, copy in copies.items()
    }


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

    host = np.random.default_rng(seed).normal(size=count)
    device = cupy.asarray(host)
    on_cpu, on_gpu = stages(np), stages(cupy)
    if len(on_cpu) != len(on_gpu) or not on_cpu:
        raise ValueError("stages(xp) must give the same number of steps, at least one, for NumPy and CuPy")
    cpu = bench.time_wall(lambda: run_stages(host, on_cpu), label="CPU (NumPy)", warmup=1, repeat=3)
    resident = bench.time_cuda(lambda: run_stages(device, on_gpu), label="GPU, data stays", warmup=2, repeat=10)
    trips = bench.time_cuda(
        lambda: run_stages(device, on_gpu, round_trip=True), label="GPU, round trip per stage", warmup=1, repeat=5
    )
    crossings = len(on_cpu) * (host.nbytes / down + host.nbytes / up)
    return PipelineRuns(cpu, resident, trips, host.nbytes, crossings)


def draw_host_link(link_gbps: dict[str, float], device_gbps: float):
    """Host memory, the link, and the GPU's memory, with measured bandwidths in GB/s (chapter 1's run).

    ``link_gbps`` maps copy names to their bandwidth; ``device_gbps`` is a buffer's speed inside GPU memory.
    Arrow widths grow with the square root of the bandwidth (a linear scale would make the link's arrows
    invisible next to the GPU's own memory; a logarithmic one would hide how thin they are).
    """
    if not link_gbps or min([*link_gbps.values(), device_gbps]) <= 0:
        raise ValueError("bandwidths must be measured and positive: run chapter 1's copy table first")
    figure, axes = canvas(12, 5.2, size=(9.5, 4.1))
    box(axes, 0.2, 0.6, 3.0, 3.8, "host memory\n(CPU)", color="#eeeeee", size=10, weight="bold")
    box(axes, 8.8, 0.6, 3.0, 3.8, "", color="#e8f3e8")
    axes.text(10.3, 4.1, "GPU memory", ha="center", va="center", fontsize=10, weight="bold")
    top = max([*link_gbps.values(), device_gbps])

    def width(gbps: float) -> float:
        return 1 + 11 * (gbps / top) ** 0.5

    rows = list(link_gbps.items())
    for i, (name, gbps) in enumerate(rows):
        y = 3.7 - i * (2.9 / max(len(rows) - 1, 1))
        up = "host→GPU" in name or "host→" in name
        start, end = ((3.3, y), (8.7, y)) if up else ((8.7, y), (3.3, y))
        axes.annotate("", xy=end, xytext=start, arrowprops={"arrowstyle": "-|>", "lw": width(gbps), "color": "#4c72b0"})
        axes.text(6.0, y + 0.12, f"{name}: {gbps:,.1f} GB/s", ha="center", va="bottom", fontsize=7.5)
    axes.annotate(
        "",
        xy=(11.4, 1.3),
        xytext=(9.2, 1.3),
        arrowprops={"arrowstyle": "-|>", "lw": width(device_gbps), "color": "#55a868"},
    )
    axes.text(10.3, 1.75, f"inside GPU memory:\n{device_gbps:,.0f} GB/s", ha="center", fontsize=8)
    axes.text(6.0, 0.2, "the link (PCIe or NVLink-C2C)", ha="center", fontsize=8, style="italic")
    axes.set_title("Where the bytes go, at the speeds this run measured", fontsize=10)
    return figure
