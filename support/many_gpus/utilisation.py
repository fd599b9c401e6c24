"""Each GPU's utilisation while the workers run, sampled with NVML from the notebook's process.

A time on the wall clock says how long a stage took, not what held it up. NVML's utilisation of a GPU is the
share of its last sample period (between 1/6 s and 1 s, by product) during which at least one kernel ran on it:
near 100 % the GPU was the resource, well below it the work waited on something else (Python, launches, the
CPU side of each step, the reads). Without MPS, the kernels of two processes on one GPU take turns (the GPU
switches between their contexts), so two workers on a GPU already near 100 % have only its idle gaps to fill.

- :class:`UtilisationSampler` polls every GPU NVML sees in a background thread (10 times a second by default)
  while a ``with`` block runs, and keeps every sample (:data:`Samples`: one tuple of percentages per GPU);
- :meth:`UtilisationSampler.within` keeps only the samples taken inside given spans of time (the workers' busy
  spans, from Dask's task stream, on the same clock: :func:`time.time`), so that the time the notebook spends
  handing out tasks and hearing back does not dilute the mean;
- :func:`summarize` reduces samples to each GPU's mean utilisation and its *busy share*: the share of samples at
  or above :data:`BUSY` percent.

NVML reads counters the driver keeps; it makes no CUDA context, so sampling from the notebook leaves every GPU's
memory to the workers. Where NVML cannot start (no NVIDIA driver, as on a laptop's CPU), the sampler records
nothing and says why in :attr:`UtilisationSampler.unavailable`.
"""

from __future__ import annotations

import threading
import time

#: A GPU's index (NVML's order, that of ``nvidia-smi``) and its utilisation samples in percent.
Samples = dict[int, tuple[float, ...]]

#: A sample at or above this utilisation (percent) counts as busy in :func:`summarize`.
BUSY = 90.0


class UtilisationSampler:
    """Sample every GPU's utilisation every ``interval`` seconds in a background thread while the ``with`` block
    runs; afterwards :attr:`samples` holds them (:data:`Samples`) and :attr:`times` when each was taken. ``read``
    is a function of no argument that returns one utilisation per GPU (NVML's by default; replaceable in tests),
    ``clock`` one that returns the time (:func:`time.time` by default, the clock of Dask's task stream).

    >>> ticks = iter(range(100))
    >>> with UtilisationSampler(interval=0.001, read=lambda: [float(next(ticks)), 0.0]) as sampler:
    ...     time.sleep(0.05)
    >>> sorted(sampler.samples) == [0, 1] and len(sampler.samples[0]) >= 2
    True
    """

    def __init__(self, interval: float = 0.1, *, read=None, clock=time.time):
        if interval <= 0:
            raise ValueError(f"the sampling interval must be positive, not {interval} s")
        self.interval = interval
        self._read = read
        self._clock = clock  # when each sample is taken: time.time, the clock of Dask's task stream
        self._rows: list[list[float]] = []
        self._times: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.unavailable: str | None = None
        self.seconds = 0.0

    def _nvml_reader(self):
        try:
            import pynvml

            pynvml.nvmlInit()
            handles = [pynvml.nvmlDeviceGetHandleByIndex(k) for k in range(pynvml.nvmlDeviceGetCount())]
        except Exception as error:  # no nvidia-ml-py, no driver, no GPU: nothing to sample
            self.unavailable = f"NVML cannot start here ({type(error).__name__}: {error})"
            return None
        return lambda: [float(pynvml.nvmlDeviceGetUtilizationRates(h).gpu) for h in handles]

    def _loop(self, read) -> None:
        while not self._stop.is_set():
            self._sample(read)
            self._stop.wait(self.interval)

    def _sample(self, read) -> None:
        row = list(read())
        self._times.append(self._clock())
        self._rows.append(row)

    def __enter__(self) -> UtilisationSampler:
        read = self._read or self._nvml_reader()
        self._started = time.perf_counter()
        if read is not None:
            self._sample(read)  # one sample at once: a short block still gets one
            self._thread = threading.Thread(target=self._loop, args=(read,), name="gpu-utilisation", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self.seconds = time.perf_counter() - self._started

    @property
    def samples(self) -> Samples:
        """Every sample taken, per GPU (empty where NVML was unavailable)."""
        return self._columns(self._rows)

    @property
    def times(self) -> tuple[float, ...]:
        """When each sample was taken (:func:`time.time`, seconds since the epoch), in order."""
        return tuple(self._times)

    def within(self, spans) -> Samples:
        """The samples taken inside any of ``spans`` (``(start, stop)`` pairs of :func:`time.time` seconds, such as
        a task stream's first start and last stop), per GPU: every GPU keeps the same samples, so that the GPU a
        cluster did not use is read over the same time as the one it did. NVML reports each sample over its own
        last period, so the first sample inside a span may still reflect a little of the time before it."""
        spans = [(float(start), float(stop)) for start, stop in spans]
        kept = [
            row
            for row, when in zip(self._rows, self._times, strict=True)
            if any(start <= when <= stop for start, stop in spans)
        ]
        return self._columns(kept, gpus=len(self._rows[0]) if self._rows else 0)

    @staticmethod
    def _columns(rows, gpus: int | None = None) -> Samples:
        if gpus is None:
            gpus = len(rows[0]) if rows else 0
        return {k: tuple(row[k] for row in rows) for k in range(gpus)}


def pooled(*runs: Samples) -> Samples:
    """The samples of several runs together, GPU by GPU.

    >>> pooled({0: (10.0,), 1: (0.0,)}, {0: (90.0, 80.0), 1: (5.0, 0.0)})
    {0: (10.0, 90.0, 80.0), 1: (0.0, 5.0, 0.0)}
    """
    together: dict[int, tuple[float, ...]] = {}
    for run in runs:
        for gpu, values in run.items():
            together[gpu] = together.get(gpu, ()) + tuple(values)
    return together


def summarize(samples: Samples, *, busy: float = BUSY) -> dict[int, dict[str, float]]:
    """Each GPU's ``mean`` utilisation (percent), its ``busy share`` (the share of samples at or above ``busy``
    percent) and how many ``samples`` there were.

    >>> summarize({0: (100.0, 100.0, 50.0, 90.0), 1: (0.0, 0.0, 0.0, 0.0)})[0]
    {'mean': 85.0, 'busy share': 0.75, 'samples': 4}
    """
    summary = {}
    for gpu, values in samples.items():
        if not values:
            continue
        summary[gpu] = {
            "mean": sum(values) / len(values),
            "busy share": sum(v >= busy for v in values) / len(values),
            "samples": len(values),
        }
    return summary
