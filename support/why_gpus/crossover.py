"""When the GPU does not pay: one operation (a float64 sum) over sizes from kilobytes to gigabytes, on the CPU and
the GPU, warm and cold, and the size from which the GPU is faster.

:func:`sweep` times, at each size, with the wall clock for every line (one clock for the whole comparison; each
GPU call ends by bringing the scalar answer back, which waits for the GPU):

- ``NumPy, 1 core``: ``x.sum()``;
- ``Numba, all cores``: the same loop compiled with ``parallel=True`` (compiled before the sweep);
- ``CuPy, data on the GPU``: ``d.sum()`` on an array already in GPU memory;
- ``CuPy, data copied from the host``: ``cupy.asarray(x).sum()``, the copy across the link included;
- ``ReductionKernel, data on the GPU``: ``compiled_sum(d)``, the same sum by a kernel CuPy compiles (below).

:func:`cold_start` measures, in a fresh process with an empty kernel cache (``CUPY_CACHE_DIR``), what a program
pays before its first GPU sum answers: importing CuPy, creating the CUDA context, and the first call. CuPy 14.2
sends a contiguous float64 ``sum()`` to the CUB reduction compiled into CuPy itself (``cupy/cuda/cub.pyx``), so
that first call compiles nothing and the empty cache does not come into it; what it pays is the first launch's
loading. Added to the warm line it gives the cold one (:meth:`Sweep.seconds`).

The same sum written as a kernel CuPy compiles, :func:`compiled_sum` (a ``cupy.ReductionKernel``, compiled from
its source by NVRTC at its first call and kept in CuPy's kernel cache, in memory and in ``CUPY_CACHE_DIR``), is
swept too: warm, and cold with an empty cache, where the first call compiles. :func:`compiled_cold_starts` is its
control: the same fresh start with the cache holding what the first start compiled, which only loads it.

:func:`crossover` is the smallest size from which a GPU line is faster than the best CPU line at that size and
every larger one, or None when it never is in the range.
"""

from __future__ import annotations

import functools
import tempfile
import time
from dataclasses import dataclass

import numpy as np

from support import bench, fresh_process
from support.bench import format_seconds
from support.figures import new_figure
from support.units import describe_bytes

CPU_LINES = ("NumPy, 1 core", "Numba, all cores")
COMPILED_LINE = "ReductionKernel, data on the GPU"
GPU_LINES = ("CuPy, data on the GPU", "CuPy, data copied from the host", COMPILED_LINE)
COLD_LINE = "CuPy, cold (fresh process)"
COLD_COMPILED_LINE = "ReductionKernel, cold (empty cache)"
OPERATIONS = ("sum", "compiled")  # what a cold start calls: cupy's sum, or compiled_sum


def sweep_sizes(largest: int, *, smallest: int = 2**10, factor: int = 4) -> list[int]:
    """Sizes in bytes from ``smallest`` up to ``largest``, each ``factor`` times the last (float64 elements, at
    most ``2**31 - 1`` of them, the int32 limit some kernels index by).

    >>> [size // 2**10 for size in sweep_sizes(2**20)]
    [1, 4, 16, 64, 256, 1024]
    """
    if smallest < 8 or factor < 2:
        raise ValueError("start at 8 bytes or more and grow by a factor of 2 or more")
    largest = min(largest, (2**31 - 1) * 8)
    if largest < smallest:
        raise ValueError(f"the largest size ({largest} bytes) is under the smallest ({smallest} bytes)")
    sizes = [smallest]
    while sizes[-1] * factor <= largest:
        sizes.append(sizes[-1] * factor)
    return sizes


def crossover(sizes, cpu_seconds, gpu_seconds) -> int | None:
    """The smallest size from which the GPU's time is under the CPU's at that size and every larger one.

    >>> crossover([1, 2, 3, 4], [1, 2, 3, 4], [5, 1, 4, 2])
    4
    >>> crossover([1, 2], [1, 1], [2, 2]) is None
    True
    """
    if not len(sizes) == len(cpu_seconds) == len(gpu_seconds):
        raise ValueError("give one CPU and one GPU time per size")
    found = None
    for size, cpu, gpu in zip(reversed(sizes), reversed(cpu_seconds), reversed(gpu_seconds), strict=True):
        if gpu >= cpu:
            break
        found = size
    return found


@dataclass(frozen=True)
class Sweep:
    """Median seconds per line and size, and the cold start's extra seconds."""

    sizes: list[int]
    medians: dict[str, list[float]]
    spreads: dict[str, list[tuple[float, float]]]  # (min, max) of the repeats
    cold_extra: float | None  # seconds a fresh process pays before its first sum, over a warm sum
    compiled_cold_extra: float | None = None  # the same for compiled_sum, its kernel cache empty

    def best_cpu(self) -> list[float]:
        """The faster CPU line's median at each size."""
        return [min(times) for times in zip(*(self.medians[line] for line in CPU_LINES), strict=True)]

    def _cold(self) -> dict[str, tuple[str, float | None]]:
        """Each cold line: the warm line it starts from, and what the cold start adds."""
        return {
            COLD_LINE: (GPU_LINES[0], self.cold_extra),
            COLD_COMPILED_LINE: (COMPILED_LINE, self.compiled_cold_extra),
        }

    def seconds(self, line: str) -> list[float]:
        """The medians of ``line``; a cold line is its warm line plus its cold start."""
        if line in self._cold():
            warm, extra = self._cold()[line]
            if extra is None:
                raise ValueError(f"the cold start of {line!r} was not measured")
            return [t + extra for t in self.medians[warm]]
        return self.medians[line]

    def lines(self) -> list[str]:
        measured = [line for line in (*CPU_LINES, *GPU_LINES) if line in self.medians]
        return measured + [line for line, (_, extra) in self._cold().items() if extra is not None]

    def crossovers(self) -> dict[str, int | None]:
        """Each GPU line's crossover against the best CPU line."""
        best = self.best_cpu()
        return {line: crossover(self.sizes, best, self.seconds(line)) for line in self.lines()[len(CPU_LINES) :]}

    def widest_spreads(self) -> dict[str, tuple[float, int]]:
        """Per measured line, the largest ratio of the slowest repeat to the fastest, and the size where it was."""
        found = {}
        for line, spreads in self.spreads.items():
            ratios = [high / low if low > 0 else float("inf") for low, high in spreads]
            at = max(range(len(ratios)), key=ratios.__getitem__)
            found[line] = (ratios[at], self.sizes[at])
        return found

    def rows(self) -> list[dict[str, str]]:
        """One row per size: each line's median."""
        return [
            {"size": describe_bytes(size), **{line: format_seconds(self.seconds(line)[i]) for line in self.lines()}}
            for i, size in enumerate(self.sizes)
        ]


@functools.cache
def _parallel_sum():
    from numba import njit, prange

    @njit(parallel=True, cache=False)
    def total(x):
        s = 0.0
        for i in prange(x.size):
            s += x[i]
        return s

    return total


def parallel_sum(x) -> float:
    """The sum of a float64 array on every CPU core (Numba, ``parallel=True``); the first call compiles.

    >>> parallel_sum(np.ones(1000))
    1000.0
    """
    return float(_parallel_sum()(np.ascontiguousarray(x, dtype=np.float64).ravel()))


@functools.cache
def _compiled_sum_kernel():
    import cupy

    return cupy.ReductionKernel("T x", "T total", "x", "a + b", "total = a", "0", "compiled_sum")


def compiled_sum(d):
    """The sum of the CuPy array ``d`` by a ``cupy.ReductionKernel``: CuPy compiles it (NVRTC) at its first call
    for a dtype, unless its kernel cache (``CUPY_CACHE_DIR``) holds it already; later calls reuse it.

    With CuPy's ``cub`` accelerator (``CUPY_ACCELERATORS``), a ``ReductionKernel`` may be compiled around CUB's
    block-level reduction: ``_can_use_cub_block_reduction`` in ``cupy/_core/_cub_reduction.pyx`` allows it for one
    input and one output reduced over contiguous axes, with CUB's headers and nvcc found (read on CuPy's main
    branch, not at the 14.2 tag, so the conditions of the version the banner names may differ). ``d.sum()``, with the
    same accelerator, calls CUB's device-wide reduction, which CuPy ships compiled (``cupy.cuda.cub``).
    """
    return _compiled_sum_kernel()(d)


def sweep(
    sizes: list[int], *, cold_extra: float | None = None, compiled_cold_extra: float | None = None, seed: int = 0
) -> Sweep:
    """Time every line at every size (prefixes of one array per side; wall clock, medians of the repeats)."""
    import cupy

    count = max(sizes) // 8
    host = np.resize(np.random.default_rng(seed).random(2**17), count)  # random values, tiled: quick to make
    device = cupy.asarray(host)
    parallel_sum(host[:1000])  # compile before any timing
    if not np.isclose(float(compiled_sum(device[:1000])), host[:1000].sum()):  # compiles, and checks the kernel
        raise RuntimeError("compiled_sum disagrees with NumPy's sum: the kernel is wrong")
    medians: dict[str, list[float]] = {line: [] for line in (*CPU_LINES, *GPU_LINES)}
    spreads: dict[str, list[tuple[float, float]]] = {line: [] for line in medians}
    for size in sizes:
        x, d = host[: size // 8], device[: size // 8]
        work = {
            "NumPy, 1 core": lambda x=x: float(x.sum()),
            "Numba, all cores": lambda x=x: parallel_sum(x),
            "CuPy, data on the GPU": lambda d=d: float(d.sum()),
            "CuPy, data copied from the host": lambda x=x: float(cupy.asarray(x).sum()),
            COMPILED_LINE: lambda d=d: float(compiled_sum(d)),
        }
        repeat = 3 if size >= 2**28 else 7
        for line, fn in work.items():
            timing = bench.time_wall(fn, label=line, warmup=1, repeat=repeat)
            medians[line].append(timing.median)
            spreads[line].append((timing.min, timing.max))
    return Sweep(list(sizes), medians, spreads, cold_extra, compiled_cold_extra)


def cold_start(operation: str = "sum") -> dict[str, float]:
    """In this process, which must not have imported CuPy: seconds to import CuPy, to create the CUDA context (and
    copy a first array in, no kernel), for the first sum and for a second one.

    ``operation`` "sum" is ``x.sum()`` (CUB's reduction, compiled into CuPy: nothing to compile for a contiguous
    float64 array); "compiled" is :func:`compiled_sum`, which CuPy compiles at the first call unless its kernel
    cache holds it.
    """
    if operation not in OPERATIONS:
        raise ValueError(f"operation must be one of {', '.join(OPERATIONS)}, not {operation!r}")
    started = time.perf_counter()
    import cupy

    imported = time.perf_counter()
    x = cupy.empty(1024)  # the context, and a first allocation: no kernel yet
    x.set(np.ones(1024))
    cupy.cuda.runtime.deviceSynchronize()
    context = time.perf_counter()
    total = compiled_sum if operation == "compiled" else (lambda a: a.sum())
    float(total(x))
    first = time.perf_counter()
    float(total(x))
    second = time.perf_counter()
    return {
        "import cupy": imported - started,
        "CUDA context": context - imported,
        "first sum": first - context,
        "second sum": second - first,
    }


def cold_start_in_fresh_process(operation: str = "sum", *, cache_dir: str | None = None) -> dict[str, float]:
    """:func:`cold_start` in a new process whose kernel cache is ``cache_dir``, by default an empty one of its own."""
    if cache_dir is None:
        with tempfile.TemporaryDirectory() as cache:
            return cold_start_in_fresh_process(operation, cache_dir=cache)
    return fresh_process.call(
        "support.why_gpus.crossover:cold_start",
        what=f"a cold start of CuPy ({operation})",
        env={"CUPY_CACHE_DIR": cache_dir, "CUPY_CACHE_IN_MEMORY": None},  # the cache on disk, where we put it
        operation=operation,
    )


def compiled_cold_starts() -> dict[str, dict[str, float]]:
    """:func:`compiled_sum`'s cold start in two fresh processes sharing one new kernel cache: with the cache empty
    (the first call compiles), then holding what that compiled (the control: the same start, loading the kernel)."""
    with tempfile.TemporaryDirectory() as cache:
        empty = cold_start_in_fresh_process("compiled", cache_dir=cache)
        filled = cold_start_in_fresh_process("compiled", cache_dir=cache)
    return {"empty cache": empty, "filled cache": filled}


def cold_extra(found: dict[str, float]) -> float:
    """What the cold start adds to a warm sum: import, context, and the first sum over the second.

    >>> cold_extra({"import cupy": 0.5, "CUDA context": 0.2, "first sum": 0.3, "second sum": 0.1})
    0.9
    """
    return round(found["import cupy"] + found["CUDA context"] + found["first sum"] - found["second sum"], 12)


def crossover_figure(result: Sweep):
    """Seconds per sum against size, log-log, one line per way, the crossovers marked."""
    fig, axes = new_figure(size=(8, 4.2))
    styles = {
        "NumPy, 1 core": ("tab:gray", "-"),
        "Numba, all cores": ("tab:blue", "-"),
        "CuPy, data on the GPU": ("tab:green", "-"),
        "CuPy, data copied from the host": ("tab:orange", "--"),
        COLD_LINE: ("tab:red", ":"),
        COMPILED_LINE: ("tab:purple", "-"),
        COLD_COMPILED_LINE: ("tab:purple", ":"),
    }
    for line in result.lines():
        color, style = styles[line]
        axes.plot(result.sizes, result.seconds(line), style, marker="o", markersize=3, color=color, label=line)
    for line, size in result.crossovers().items():
        if size is not None:
            axes.axvline(size, color=styles[line][0], linewidth=0.8, alpha=0.6)
    axes.set_xscale("log", base=2)
    axes.set_yscale("log")
    axes.set(xlabel="array size (bytes, log scale)", ylabel="seconds per sum (median, log scale)")
    axes.set_title("One float64 sum, CPU against GPU: where the lines cross (vertical lines)", fontsize=10)
    axes.legend(fontsize=8, loc="upper left")
    return fig
