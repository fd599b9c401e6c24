"""The same work on the CPU and on the GPU, side by side in one run: NumPy vs CuPy, pandas vs cuDF.

Each workload is written once against a module argument (``xp`` for NumPy/CuPy, ``frames`` for pandas/cuDF), so
the two sides do exactly the same thing. The CPU side has more than one contender: the code a reader writes first
(NumPy, pandas' defaults, one core) and the fastest CPU tools for the job (Numba over every core, pandas with
pyarrow dtypes, Polars). :func:`side_by_side` times them all (the wall clock for the CPU, CUDA events for the
GPU; warm-ups, repeats, medians) and :func:`speedup_rows` puts both ratios in a table.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import numpy as np

from support import bench
from support.bench import format_ratio, format_seconds
from support.figures import new_figure


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


def with_arrow_dtypes(frames: Frames) -> Frames:
    """The same pandas frames with pyarrow-backed columns (``dtype_backend="pyarrow"``), pandas' Arrow engine."""
    return Frames(*(f.convert_dtypes(dtype_backend="pyarrow") for f in (frames.frame, frames.lookup)))


def identity_failures_parallel(x) -> int:
    """How many elements of the float64 array ``x`` break ``sin(x)² + cos(x)² == 1``, on every CPU core.

    The multithreaded CPU peer of the NumPy expression: Numba compiles the loop (``parallel=True``) and splits it
    over the cores with ``prange``; the first call pays the compilation.

    >>> identity_failures_parallel(np.zeros((3, 3)))
    0
    """
    return int(_parallel_kernel()(np.ascontiguousarray(x, dtype=np.float64).ravel()))


_compiled = None


def _parallel_kernel():
    global _compiled
    if _compiled is None:
        from numba import njit, prange

        @njit(parallel=True, cache=False)
        def failures(flat):
            count = 0
            for i in prange(flat.size):
                if math.sin(flat[i]) ** 2 + math.cos(flat[i]) ** 2 != 1.0:
                    count += 1
            return count

        _compiled = failures
    return _compiled


@dataclass(frozen=True)
class SideBySide:
    """One piece of work timed on the GPU and by one or more CPU contenders (the familiar one first)."""

    work: str
    cpu: dict[str, object]  # contender name -> support.bench.Timing, the familiar tool first
    gpu: object

    def __post_init__(self):
        if not self.cpu:
            raise ValueError(f"{self.work}: name at least one CPU contender")

    @property
    def label(self) -> str:
        """What the figure calls this row: the work."""
        return self.work

    @property
    def familiar(self) -> str:
        """The CPU code a reader writes first (NumPy, pandas' defaults): the first contender."""
        return next(iter(self.cpu))

    @property
    def best_cpu(self) -> str:
        """The fastest CPU contender of this run."""
        return min(self.cpu, key=lambda name: self.cpu[name].median)

    @property
    def speedup(self) -> float:
        """GPU against the familiar CPU code."""
        return self.cpu[self.familiar].median / self.gpu.median

    @property
    def honest_speedup(self) -> float:
        """GPU against the fastest CPU contender: the ratio to quote."""
        return self.cpu[self.best_cpu].median / self.gpu.median


def side_by_side(
    work: str,
    on_cpu: Mapping[str, Callable[[], object]],
    on_gpu: Callable[[], object],
    *,
    cpu_repeat: int = 3,
    gpu_repeat: int = 10,
) -> SideBySide:
    """Time each CPU contender of ``on_cpu`` with the wall clock and ``on_gpu`` with CUDA events, after warm-ups.

    ``on_cpu`` maps a contender's name to its work, the familiar tool first (``{"pandas": ..., "Polars": ...}``).
    """
    if not on_cpu:
        raise ValueError(f"{work}: name at least one CPU contender")
    cpu = {
        name: bench.time_wall(fn, label=f"{work} ({name})", warmup=1, repeat=cpu_repeat) for name, fn in on_cpu.items()
    }
    gpu = bench.time_cuda(on_gpu, label=f"{work} (GPU)", warmup=2, repeat=gpu_repeat)
    return SideBySide(work, cpu, gpu)


def speedup_rows(results: list[SideBySide]) -> list[dict[str, object]]:
    """The table: the familiar CPU code, the fastest CPU contender, the GPU, and the GPU's ratio to each."""
    return [
        {
            "work": r.work,
            r.familiar if len({x.familiar for x in results}) == 1 else "familiar CPU": format_seconds(
                r.cpu[r.familiar].median
            ),
            "fastest CPU": f"{format_seconds(r.cpu[r.best_cpu].median)} ({r.best_cpu})",
            "GPU": format_seconds(r.gpu.median),
            "GPU vs familiar": format_ratio(r.speedup),
            "GPU vs fastest CPU": format_ratio(r.honest_speedup),
        }
        for r in results
    ]


def speedup_figure(results, *, title: str = "the same work, CPU vs GPU"):
    """Two horizontal bars per row of ``results``, on a log scale: the GPU against the familiar CPU code, and
    against the fastest CPU contender. A row is anything with ``label``, ``speedup`` and ``honest_speedup``: a
    :class:`SideBySide` (chapter 1) or a :class:`support.ecg.pipeline.StageSpeedup` (chapter 6)."""
    fig, axes = new_figure(size=(8, 0.8 * len(results) + 1.4))
    height = 0.38
    series = [
        ("vs the familiar CPU code", "tab:gray", lambda r: r.speedup, -height / 2),
        ("vs the fastest CPU contender", "tab:green", lambda r: r.honest_speedup, height / 2),
    ]
    for label, color, ratio, offset in series:
        ys = [i + offset for i in range(len(results))]
        values = [ratio(r) for r in results]
        axes.barh(ys, values, height=height, color=color, label=label)
        for y, value in zip(ys, values, strict=True):
            text = f"{value:,.0f}×" if value >= 10 else f"{value:.1f}×"
            axes.annotate(text, (value, y), xytext=(4, 0), textcoords="offset points", va="center", fontsize=8)
    axes.set_yticks(range(len(results)), [r.label for r in results])
    axes.invert_yaxis()
    axes.set_xscale("log")
    axes.axvline(1, color="black", linewidth=0.8)
    axes.set(xlabel="GPU speed-up (median, log scale)", title=title)
    axes.legend(loc="lower right", fontsize=8)
    axes.margins(x=0.25)
    return fig
