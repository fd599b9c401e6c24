"""Timing for the book: CUDA events, warm-ups, repeats, median; comparisons as ratios measured in one run.

Every figure in the book comes from here, so every chapter measures the same way:

- :func:`time_cuda` times GPU work with CUDA events recorded on the current stream, after warm-up calls that
  pay for compilation, caching and lazy initialization. It reports every repeat; the median is the figure.
- :func:`time_wall` times CPU work with :func:`time.perf_counter`, the same way; with ``sync=`` it times a call
  until the GPU has finished what the call queued (``fn``, then ``sync``, inside the timed region).
- :func:`compare` puts several timings from one run side by side, with ratios to a baseline.

Examples
--------
>>> from support.bench import time_wall, compare
>>> slow = time_wall(lambda: sum(range(20_000)), label="sum of 20k", repeat=5)
>>> fast = time_wall(lambda: sum(range(2_000)), label="sum of 2k", repeat=5)
>>> table = compare(slow, fast, baseline="sum of 20k")
>>> table.ratio("sum of 2k") > 1
True
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from support.env import require_gpu

__all__ = [
    "Comparison",
    "Timing",
    "compare",
    "format_ratio",
    "format_seconds",
    "gpu_sleeper",
    "time_behind_busy_gpu",
    "time_cuda",
    "time_wall",
]


def format_seconds(seconds: float) -> str:
    """A duration with a unit a reader can compare at a glance: ``12.3 µs``, ``4.56 ms``, ``1.20 s``."""
    if seconds < 0:
        raise ValueError(f"a duration cannot be negative: {seconds}")
    units = (("s", 1.0), ("ms", 1e-3), ("µs", 1e-6), ("ns", 1e-9))
    unit, scale = next(((u, f) for u, f in units if seconds >= f), units[-1])
    value = seconds / scale
    digits = 0 if value >= 100 else 1 if value >= 10 else 2
    return f"{value:.{digits}f} {unit}"


def format_ratio(ratio: float) -> str:
    """A ratio with the digits a median of a few repeats can back: ``0.52×``, ``3.7×``, ``27×``, ``727×``,
    ``32,000×``: two significant figures (three from 100 to 999), as run-to-run noise is a few per cent.
    """
    if not ratio > 0:
        raise ValueError(f"a ratio of durations must be positive, not {ratio}")
    if ratio >= 1000:
        digits = len(str(int(ratio))) - 2
        return f"{round(ratio, -digits):,.0f}×"
    if ratio >= 10:
        return f"{ratio:.0f}×"
    return f"{ratio:.1f}×" if ratio >= 1 else f"{ratio:.2f}×"


@dataclass(frozen=True)
class Timing:
    """Repeated measurements of one piece of work; ``median`` is the figure to quote."""

    label: str
    samples: tuple[float, ...]  # seconds, one per repeat
    clock: str  # "cuda-events" or "wall"

    def __post_init__(self):
        if not self.samples:
            raise ValueError(f"timing {self.label!r} has no samples")

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def min(self) -> float:
        return min(self.samples)

    @property
    def max(self) -> float:
        return max(self.samples)

    def throughput(self, nbytes: int) -> float:
        """Bytes per second for ``nbytes`` moved in the median time."""
        return nbytes / self.median

    def __str__(self) -> str:
        return (
            f"{self.label}: median {format_seconds(self.median)} (min {format_seconds(self.min)}, "
            f"max {format_seconds(self.max)}, {len(self.samples)} repeats, {self.clock})"
        )


class _Clock(Protocol):
    name: str

    def mark(self) -> object: ...

    def synchronize(self) -> None: ...

    def seconds_between(self, start: object, end: object) -> float: ...


class _WallClock:
    name = "wall"

    def mark(self) -> float:
        return time.perf_counter()

    def synchronize(self) -> None:
        pass

    def seconds_between(self, start: float, end: float) -> float:
        return end - start


class _CupyEventClock:
    """CUDA events recorded on CuPy's current stream (or ``stream``)."""

    name = "cuda-events"

    def __init__(self, stream=None):
        import cupy

        self._cupy = cupy
        self._stream = stream

    def mark(self):
        event = self._cupy.cuda.Event()
        event.record(self._stream)
        return event

    def synchronize(self) -> None:
        self._cupy.cuda.Device().synchronize()

    def seconds_between(self, start, end) -> float:
        return self._cupy.cuda.get_elapsed_time(start, end) / 1e3


def _cuda_clock(stream=None) -> _Clock:
    require_gpu()
    try:
        return _CupyEventClock(stream)
    except ImportError:
        raise ModuleNotFoundError(
            "CUDA-event timing uses CuPy, which is not installed; create the book's environment (environment.yml)"
        ) from None


def _measure(
    fn: Callable[[], object],
    label: str | None,
    warmup: int,
    repeat: int,
    clock: _Clock,
    setup: Callable[[], object] | None = None,
) -> Timing:
    if warmup < 0:
        raise ValueError(f"warmup must be 0 or more, not {warmup}")
    if repeat < 1:
        raise ValueError(f"repeat must be at least 1, not {repeat}")
    if not callable(fn):
        raise TypeError(f"expected a function to time, got {type(fn).__name__}")
    if setup is not None and not callable(setup):
        raise TypeError(f"setup must be a function, got {type(setup).__name__}")

    def prepare() -> None:
        if setup is not None:  # untimed, with the device idle: it may touch what the last call used
            clock.synchronize()
            setup()

    for _ in range(warmup):
        prepare()
        fn()
    clock.synchronize()
    marks = []
    for _ in range(repeat):
        prepare()
        start = clock.mark()
        fn()
        marks.append((start, clock.mark()))
    clock.synchronize()
    samples = tuple(clock.seconds_between(start, end) for start, end in marks)
    return Timing(label or getattr(fn, "__name__", "work"), samples, clock.name)


def time_cuda(
    fn: Callable[[], object],
    *,
    label: str | None = None,
    warmup: int = 3,
    repeat: int = 20,
    stream=None,
    clock: _Clock | None = None,
    setup: Callable[[], object] | None = None,
) -> Timing:
    """Time GPU work with CUDA events: ``warmup`` untimed calls, then ``repeat`` timed ones.

    Each repeat is bracketed by two events on CuPy's current stream (pass ``stream`` for another). The repeats
    are queued back to back, with no wait in between, so the median is a throughput figure for GPU work; a
    call that is mostly host work (a handoff that wraps a pointer) is better timed with :func:`time_wall`. Work on
    other streams is covered when it is ordered with that stream (the legacy default stream is) or when
    ``fn`` waits for it (``jax.Array.block_until_ready``).

    Parameters
    ----------
    fn
        The work, called with no arguments.
    label
        Name in reports; defaults to the function's name.
    warmup, repeat
        Untimed and timed calls.
    stream
        The ``cupy.cuda.Stream`` to record the events on.
    clock
        Where the time comes from; tests pass a stand-in.
    setup
        Untimed work before every call, warm-ups included, run once the GPU is idle: for example the CPU
        rewriting managed memory so that each call starts from the same state.

    Raises
    ------
    support.env.GpuUnavailableError
        When there is no usable GPU; time CPU work with :func:`time_wall`.
    """
    return _measure(fn, label, warmup, repeat, clock or _cuda_clock(stream), setup)


def time_wall(
    fn: Callable[[], object],
    *,
    label: str | None = None,
    warmup: int = 1,
    repeat: int = 5,
    sync: Callable[[], object] | None = None,
) -> Timing:
    """Time CPU work with the wall clock: ``warmup`` untimed calls, then ``repeat`` timed ones.

    With ``sync`` (``cupy.cuda.runtime.deviceSynchronize``, a stream's ``synchronize``), each call is ``fn()``
    then ``sync()``, both inside the timed region, warm-ups included: the time a program waits for work that
    ``fn`` queued on the GPU, measured on the same clock as host work, so that a ratio of the two is one
    clock's. Without it, a call that only queues GPU work is timed until it returns.

    >>> waits = []
    >>> timing = time_wall(lambda: None, warmup=1, repeat=3, sync=lambda: waits.append("synced"))
    >>> len(timing.samples), len(waits)
    (3, 4)
    """
    if sync is not None:
        if not callable(fn):
            raise TypeError(f"expected a function to time, got {type(fn).__name__}")
        if not callable(sync):
            raise TypeError(f"sync must be a function that waits for the GPU, got {type(sync).__name__}")
        work = fn

        def fn() -> None:  # the work, then the wait for what it queued: both timed
            work()
            sync()

        if label is None:
            label = getattr(work, "__name__", "work")
    return _measure(fn, label, warmup, repeat, _WallClock())


_SPIN_SOURCE = r"""
extern "C" __global__ void spin(long long nanoseconds) {
    long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now)); } while (now - start < nanoseconds);
}
"""


def gpu_sleeper() -> Callable[[float], None]:
    """A function that queues ``seconds`` of work on CuPy's current stream and returns at once.

    The work is one GPU thread spinning on the GPU's own clock: the GPU is busy, the host is free, as in a
    pipeline that has queued kernels and moved on. The kernel is compiled and loaded here, before any timing.
    """
    import cupy

    spin = cupy.RawKernel(_SPIN_SOURCE, "spin")
    spin((1,), (1,), (cupy.int64(1000),))
    cupy.cuda.runtime.deviceSynchronize()

    def queue(seconds: float) -> None:
        if not 0 < seconds <= 10:
            raise ValueError(f"queue a positive time of at most 10 s of GPU work, not {seconds} s")
        spin((1,), (1,), (cupy.int64(int(seconds * 1e9)),))

    return queue


def time_behind_busy_gpu(
    fn: Callable[[], object],
    *,
    busy_seconds: float = 0.03,
    label: str | None = None,
    warmup: int = 2,
    repeat: int = 5,
    queue_work: Callable[[float], None] | None = None,
    wait_for_gpu: Callable[[], None] | None = None,
) -> Timing:
    """Wall-clock time of the host call ``fn`` while ``busy_seconds`` of earlier work is queued on the GPU.

    Before every call the GPU is drained, then :func:`gpu_sleeper` queues the work; the clock runs around
    ``fn`` alone. A call that returns in microseconds did not wait for the GPU; one that takes about
    ``busy_seconds`` synchronized with it. ``queue_work`` and ``wait_for_gpu`` stand in for the GPU in tests.
    """
    if not 0 < busy_seconds <= 1:
        raise ValueError(f"keep the GPU busy for a positive time of at most 1 s, not {busy_seconds} s")
    if wait_for_gpu is None:
        import cupy

        wait_for_gpu = cupy.cuda.runtime.deviceSynchronize
    if queue_work is None:
        queue_work = gpu_sleeper()

    def busy() -> None:
        wait_for_gpu()
        queue_work(busy_seconds)

    try:
        return _measure(fn, label, warmup, repeat, _WallClock(), setup=busy)
    finally:
        wait_for_gpu()


@dataclass(frozen=True)
class Comparison:
    """Timings from one run side by side, each with its ratio to the baseline."""

    timings: tuple[Timing, ...]
    baseline: Timing

    def ratio(self, label: str) -> float:
        """How many times faster ``label`` is than the baseline (baseline median / its median)."""
        return self.baseline.median / self._find(label).median

    def _find(self, label: str) -> Timing:
        for timing in self.timings:
            if timing.label == label:
                return timing
        raise KeyError(f"no timing labelled {label!r}; have {[t.label for t in self.timings]}")

    def rows(self) -> list[dict[str, object]]:
        return [
            {
                "work": t.label,
                "median": format_seconds(t.median),
                "min": format_seconds(t.min),
                "max": format_seconds(t.max),
                "repeats": len(t.samples),
                "clock": t.clock,
                f"speed-up vs {self.baseline.label}": format_ratio(self.baseline.median / t.median),
            }
            for t in self.timings
        ]

    def frame(self):
        """The rows as a pandas DataFrame."""
        import pandas as pd  # noqa: PLC0415  # optional: the package declares NumPy alone

        return pd.DataFrame(self.rows())

    def __str__(self) -> str:
        return self.frame().to_string(index=False)

    __repr__ = __str__

    def _repr_html_(self) -> str:
        return self.frame().to_html(index=False)


def compare(*timings: Timing, baseline: str | None = None) -> Comparison:
    """Put timings from one run side by side; ratios are relative to ``baseline`` (default: the first)."""
    if not timings:
        raise ValueError("compare needs at least one timing")
    labels = [t.label for t in timings]
    if len(set(labels)) != len(labels):
        raise ValueError(f"timings need distinct labels to be compared, got {labels}")
    comparison = Comparison(tuple(timings), timings[0])
    if baseline is not None:
        comparison = Comparison(comparison.timings, comparison._find(baseline))
    return comparison
