"""The fastest CPU version of the pipeline's shared stages that a reader could write in an afternoon.

Chapter 6 compares the GPU with two CPU sides. The *familiar* one runs the pipeline's own functions on NumPy
arrays: pandas' default C parser and NumPy's FFT, one core each. The *fastest* one, here, uses the CPU tools a
reader who knows the ecosystem would pick:

=========  ===============================================================================================
stage      the fastest CPU version
=========  ===============================================================================================
read       Polars' CSV reader, which parses on every core (:func:`read_signal`)
convolve   the wavelet by overlap-add (``scipy.signal.oaconvolve``: many short FFTs instead of one long one),
           the baseline by one float32 FFT (``scipy.fft``; ``workers`` only helps batches of transforms)
gate       the pipeline's Numba kernel, compiled for the CPU with ``parallel=True``: every core already
embed      the same, for the pruning and embedding kernels
=========  ===============================================================================================

Both compute what the pipeline computes (CPU tests compare them on the same signal).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from support.ecg import detection, reading


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
    import scipy.fft
    import scipy.signal

    if not isinstance(signal, np.ndarray) or signal.ndim != 1:
        raise ValueError(f"need a 1-D NumPy signal, not {type(signal).__name__}")
    wavelet = detection.ricker(fs)  # odd length: mode="same" centres it as the pipeline does
    if len(wavelet) > len(signal):
        raise ValueError(f"the signal ({len(signal)} samples) is shorter than the wavelet ({len(wavelet)} samples)")
    response = scipy.signal.oaconvolve(signal, wavelet, mode="same").astype(signal.dtype, copy=False)
    size = scipy.fft.next_fast_len(len(signal), real=True)
    spectrum = scipy.fft.rfft(signal, size, workers=-1)
    freqs = np.fft.rfftfreq(size, d=1.0 / fs).astype(np.float32)
    spectrum *= 1 - np.exp(-((freqs / np.float32(detection.BASELINE_CUTOFF_HZ)) ** 2))
    clean = scipy.fft.irfft(spectrum, size, workers=-1)[: len(signal)].astype(signal.dtype, copy=False)
    return response, clean
