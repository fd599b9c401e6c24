"""The fastest CPU version of the pipeline's shared stages that a reader could write in an afternoon.

Chapter 6 compares the GPU with two CPU sides. The *familiar* one runs the pipeline's own functions on NumPy
arrays: pandas' default C parser and NumPy's FFT, one core each. The *fastest* one, here, uses the CPU tools a
reader who knows the ecosystem would pick:

=========  ===============================================================================================
stage      the fastest CPU version
=========  ===============================================================================================
read       Polars' CSV reader, which parses on every core (:func:`read_signal`)
convolve   the wavelet by overlap-add in chunks on every core (:func:`oa_convolve_threaded`: each thread runs
           ``scipy.signal.oaconvolve``, many short FFTs, on its own stretch of the output), the baseline
           by one float32 FFT (``scipy.fft``; ``workers`` only helps batches of transforms)
gate       the pipeline's Numba kernel, compiled for the CPU with ``parallel=True``: every core already
embed      the same, for the pruning and embedding kernels
=========  ===============================================================================================

Both compute what the pipeline computes (CPU tests compare them on the same signal). :func:`cpu_description`
names the CPU and the threads each tool used, so that a CPU figure can be read (and reproduced) for what it
is; :func:`time_training` times the autoencoder's training on the CPU, PyTorch on every core.
"""

from __future__ import annotations

import os
import platform
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import scipy.fft
import scipy.signal

from support.ecg import detection, reading, vae


def read_signal(path) -> reading.Recording:
    """One column of numbers from a clean CSV (one value per line, no header) into host memory, with Polars.

    The fast path for a file the pipeline's reader has already accepted once; it checks only that every row
    parsed, and refers anything else (headers, several columns, gaps, text) to :func:`support.ecg.reading.
    read_signal`, which names the problem.
    """
    import polars as pl

    path = Path(path)
    try:
        frame = pl.read_csv(path, has_header=False, new_columns=["value"], schema={"value": pl.Float32})
    except (pl.exceptions.PolarsError, OSError) as error:
        raise reading.SignalError(
            f"{path}: Polars could not read it as one column of numbers ({error}); "
            "read it with support.ecg.reading.read_signal to find the bad rows"
        ) from error
    values = frame["value"]
    if values.null_count():
        raise reading.SignalError(
            f"{path}: {values.null_count()} missing samples; read it with support.ecg.reading.read_signal, which "
            "repairs isolated gaps and refuses runs of them"
        )
    return reading.Recording(values.to_numpy(), str(path))


def convolve(signal: np.ndarray, fs: float) -> tuple[np.ndarray, np.ndarray]:
    """The wavelet response and the signal without baseline wander, as :func:`support.ecg.pipeline.convolve`."""
    if not isinstance(signal, np.ndarray) or signal.ndim != 1:
        raise ValueError(f"need a 1-D NumPy signal, not {type(signal).__name__}")
    wavelet = detection.ricker(fs)  # odd length: mode="same" centres it as the pipeline does
    if len(wavelet) > len(signal):
        raise ValueError(f"the signal ({len(signal)} samples) is shorter than the wavelet ({len(wavelet)} samples)")
    response = oa_convolve_threaded(signal, wavelet).astype(signal.dtype, copy=False)
    size = scipy.fft.next_fast_len(len(signal), real=True)
    spectrum = scipy.fft.rfft(signal, size, workers=-1)
    freqs = np.fft.rfftfreq(size, d=1.0 / fs).astype(np.float32)
    spectrum *= 1 - np.exp(-((freqs / np.float32(detection.BASELINE_CUTOFF_HZ)) ** 2))
    clean = scipy.fft.irfft(spectrum, size, workers=-1)[: len(signal)].astype(signal.dtype, copy=False)
    return response, clean


def oa_convolve_threaded(signal: np.ndarray, kernel: np.ndarray, *, workers: int | None = None, chunk: int = 1 << 20):
    """``signal`` convolved with ``kernel``, output the length of ``signal`` and centred on it (``mode="same"``),
    by overlap-add in chunks of ``chunk`` output samples, one thread per core (``workers``, default every one).

    Each chunk of the output needs the input under it plus ``len(kernel) - 1`` samples of margin, so the
    threads read overlapping input and write disjoint output: no locks. SciPy's FFTs release the GIL, so the
    threads run at once.

    >>> x = np.random.default_rng(0).normal(size=10_000)
    >>> k = np.hanning(31)
    >>> bool(np.allclose(oa_convolve_threaded(x, k, chunk=1000), np.convolve(x, k, mode="same")))
    True
    """
    if signal.ndim != 1 or kernel.ndim != 1 or len(kernel) > len(signal):
        raise ValueError(f"need a 1-D signal at least as long as the 1-D kernel, got {signal.shape} and {kernel.shape}")
    if chunk < len(kernel):
        raise ValueError(f"a chunk ({chunk}) must be at least the kernel's length ({len(kernel)})")
    before = (len(kernel) - 1) // 2
    padded = np.concatenate([np.zeros(before, signal.dtype), signal, np.zeros(len(kernel) - 1 - before, signal.dtype)])
    out = np.empty(len(signal), dtype=np.result_type(signal, kernel))

    def one(start: int) -> None:
        stop = min(len(signal), start + chunk)
        out[start:stop] = scipy.signal.oaconvolve(padded[start : stop + len(kernel) - 1], kernel, mode="valid")

    with ThreadPoolExecutor(max_workers=workers or os.cpu_count()) as pool:
        list(pool.map(one, range(0, len(signal), chunk)))
    return out


def cpu_description() -> dict[str, object]:
    """The CPU (model, physical cores, logical CPUs) and the threads each CPU tool of the chapter uses."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    logical = os.cpu_count() or 1
    physical = _physical_cores() or logical
    threads = {"pandas read_csv": 1, "NumPy FFT": 1}
    try:
        import polars as pl

        threads["Polars read_csv"] = int(pl.thread_pool_size())
    except ImportError:
        pass
    threads["overlap-add convolution"] = logical
    threads["SciPy FFT (baseline)"] = 1  # one transform: workers= parallelizes batches only
    threads["NumPy quantile (gate threshold)"] = 1
    try:
        import numba

        threads["Numba kernels"] = int(numba.get_num_threads())
    except ImportError:
        pass
    try:
        import torch

        threads["PyTorch training"] = int(torch.get_num_threads())
    except ImportError:
        pass
    return {"CPU": model, "physical cores": physical, "logical CPUs": logical, "threads": threads}


def _physical_cores() -> int | None:
    """Physical cores from /proc/cpuinfo (distinct core ids per package); None where it cannot tell."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    cores, package = set(), None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "physical id":
            package = value.strip()
        elif key == "core id":
            cores.add((package, value.strip()))
    return len(cores) or None


def describe_cpu(info: dict | None = None) -> str:
    """:func:`cpu_description` as lines of at most 88 characters."""
    info = info or cpu_description()
    lines = [f"{info['CPU']}: {info['physical cores']} physical cores, {info['logical CPUs']} logical CPUs"]
    lines += [f"  {tool}: {count} thread{'s' if count != 1 else ''}" for tool, count in info["threads"].items()]
    return "\n".join(lines)


def time_training(
    beats, *, latent: int, epochs: int, batch_size: int, seed: int = 0, threads: int | None = None
) -> float:
    """Seconds to train the autoencoder on a host copy of ``beats`` with PyTorch on ``threads`` CPU threads
    (default: every core), the same settings as on the GPU."""
    import torch

    host = (
        beats.detach().to("cpu", copy=True) if isinstance(beats, torch.Tensor) else torch.as_tensor(np.asarray(beats))
    )
    previous = torch.get_num_threads()
    torch.set_num_threads(threads or os.cpu_count() or 1)
    try:
        started = time.perf_counter()
        vae.train(host, latent=latent, epochs=epochs, batch_size=batch_size, seed=seed, progress=False)
        return time.perf_counter() - started
    finally:
        torch.set_num_threads(previous)
