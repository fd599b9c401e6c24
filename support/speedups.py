"""The same work on the CPU and on the GPU, side by side in one run: NumPy vs CuPy, pandas vs cuDF.

Each workload is written once against a module argument (``xp`` for NumPy/CuPy, ``frames`` for pandas/cuDF), so
the two sides do exactly the same thing. :func:`side_by_side` times both sides (the wall clock for the CPU,
CUDA events for the GPU; warm-ups, repeats, medians) and :func:`speedup_rows` puts them in a table.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np


def random_matrix(side: int, xp=np, seed: int = 0):
    """A ``side × side`` float64 matrix, uniform in [0, 2π), made by ``xp`` with ``seed``."""
    if side < 1:
        raise ValueError(f"the matrix needs at least one row, not {side}")
    return xp.random.default_rng(seed).random((side, side)) * (2 * np.pi)


@dataclass
class Frames:
    """A frame of ``rows`` rows (``x`` a float, ``y`` one of ``groups`` keys) and a lookup table keyed by ``y``."""

    frame: object
    lookup: object


def make_frames(rows: int, groups: int = 1000, *, seed: int = 0, frames=None) -> Frames:
    """The frames of the data-frame comparison, as cuDF unless ``frames`` (a module) says otherwise."""
    if rows < 1 or groups < 1:
        raise ValueError(f"need at least one row and one group, not {rows} rows and {groups} groups")
    if frames is None:
        import cudf as frames
    rng = np.random.default_rng(seed)
    frame = frames.DataFrame({"x": rng.normal(size=rows), "y": rng.integers(0, groups, rows)})
    lookup = frames.DataFrame({"y": np.arange(groups), "weight": rng.random(groups)})
    return Frames(frame, lookup)


@dataclass(frozen=True)
class SideBySide:
    """One piece of work timed on both sides."""

    work: str
    cpu: object  # support.bench.Timing
    gpu: object

    @property
    def speedup(self) -> float:
        return self.cpu.median / self.gpu.median


def side_by_side(
    work: str, on_cpu: Callable[[], object], on_gpu: Callable[[], object], *, cpu_repeat: int = 3, gpu_repeat: int = 10
) -> SideBySide:
    """Time ``on_cpu`` with the wall clock and ``on_gpu`` with CUDA events, each after a warm-up."""
    from support.bench import time_cuda, time_wall

    cpu = time_wall(on_cpu, label=f"{work} (CPU)", warmup=1, repeat=cpu_repeat)
    gpu = time_cuda(on_gpu, label=f"{work} (GPU)", warmup=2, repeat=gpu_repeat)
    return SideBySide(work, cpu, gpu)


def speedup_rows(results: list[SideBySide]) -> list[dict[str, object]]:
    """The table of medians and speed-ups."""
    from support.bench import format_ratio, format_seconds

    return [
        {
            "work": r.work,
            "CPU median": format_seconds(r.cpu.median),
            "GPU median": format_seconds(r.gpu.median),
            "speed-up": format_ratio(r.speedup),
        }
        for r in results
    ]


def speedup_figure(results: list[SideBySide]):
    """Horizontal bars of the speed-ups, on a log scale."""
    from support.figures import labelled_bars, new_figure

    fig, axes = new_figure(size=(8, 0.5 * len(results) + 1.2))
    labelled_bars(
        axes,
        {r.work: r.speedup for r in results},
        label=lambda value: f"{value:,.0f}×" if value >= 10 else f"{value:.1f}×",
        color="tab:green",
    )
    axes.set_xscale("log")
    axes.axvline(1, color="black", linewidth=0.8)
    axes.set(xlabel="GPU speed-up over the CPU (median, log scale)", title="the same work, CPU vs GPU")
    axes.margins(x=0.2)
    return fig
