"""Finding heartbeats: a Ricker wavelet matched to the QRS complex, FFT convolution, a threshold, and the
non-maximum-suppression gate of :mod:`support.ecg.kernels`.

Every function works on NumPy or CuPy arrays and keeps its result where its input lives.

>>> import numpy as np
>>> x = np.zeros(200, np.float32); x[100] = 1.0
>>> response = fft_convolve_same(x, ricker(250.0))
>>> int(np.argmax(response))
100
"""

from __future__ import annotations

import math

import numpy as np

from support.arrays import array_module

#: Standard deviation of the Ricker wavelet, in seconds: its central lobe (±σ) spans a QRS complex.
QRS_SIGMA_S = 0.016
#: The wavelet needs this many samples per σ to have a shape at all.
MIN_SAMPLES_PER_SIGMA = 1.5


def next_fast_len(n: int) -> int:
    """The smallest 5-smooth number (2**a * 3**b * 5**c) at least ``n``: ``scipy.fft.next_fast_len(n, real=True)``
    without importing SciPy's FFT package, whose import was 0.55 s of the command line's cold start under cProfile
    on the H100 host (a run of 11.9 s under the profiler, which inflates it:
    runs/probes/probe_ecg_cold_start_h100_2026-11-26.log); ``-X importtime`` put it at 0.389 s
    (runs/probes/probe_ecg_cold_start_imports_de45a4a_2937288_h100_2026-11-27.log).
    tests/test_ecg_cli.py checks it against SciPy.

    >>> [next_fast_len(n) for n in (1, 7, 11, 17, 97, 18_000_081)]
    [1, 8, 12, 18, 100, 18225000]
    """
    if n < 1:
        raise ValueError(f"need a length of at least 1, not {n}")
    best = 1 << (n - 1).bit_length()  # the next power of two
    five = 1
    while five < best:
        odd = five
        while odd < best:
            candidate = odd << (-(-n // odd) - 1).bit_length()  # odd times the least power of two reaching n
            best = min(best, candidate)
            odd *= 3
        five *= 5
    return best


def ricker(fs: float, sigma_s: float = QRS_SIGMA_S, xp=np):
    """The Ricker ("Mexican hat") wavelet sampled at ``fs`` Hz, zero mean and unit energy, made by ``xp``."""
    if not (isinstance(fs, int | float) and math.isfinite(fs) and fs > 0):
        raise ValueError(f"the sampling rate must be a positive number of Hz, not {fs!r}")
    sigma = sigma_s * fs
    if sigma < MIN_SAMPLES_PER_SIGMA:
        needed = math.ceil(MIN_SAMPLES_PER_SIGMA / sigma_s)
        raise ValueError(
            f"at {fs:g} Hz the QRS wavelet (σ = {sigma_s * 1e3:g} ms) covers {sigma:.2f} samples, too few to have "
            f"a shape; the recording needs at least {needed} Hz"
        )
    half = math.ceil(5 * sigma)
    t = xp.arange(-half, half + 1, dtype=xp.float64) / sigma
    wavelet = (1 - t**2) * xp.exp(-(t**2) / 2)
    wavelet -= wavelet.mean()
    return (wavelet / xp.sqrt((wavelet**2).sum())).astype(xp.float32)


def fft_convolve_same(x, kernel):
    """``x`` convolved with ``kernel`` through the FFT, the output the length of ``x`` and centred on it."""
    xp = array_module(x)
    if x.ndim != 1 or kernel.ndim != 1:
        raise ValueError(f"need 1-D signal and kernel, got shapes {x.shape} and {kernel.shape}")
    if len(kernel) > len(x):
        raise ValueError(f"the signal ({len(x)} samples) is shorter than the wavelet ({len(kernel)} samples)")
    size = next_fast_len(len(x) + len(kernel) - 1)
    spectrum = xp.fft.rfft(x, size) * xp.fft.rfft(kernel, size)
    full = xp.fft.irfft(spectrum, size)
    start = (len(kernel) - 1) // 2
    return full[start : start + len(x)].astype(x.dtype, copy=False)


BASELINE_CUTOFF_HZ = 0.5  # the wander of breathing and movement lies below it; the slowest heart rate above


def remove_baseline(x, fs: float, cutoff_hz: float = BASELINE_CUTOFF_HZ):
    """``x`` with the slow baseline wander (below ``cutoff_hz``) removed by a smooth high-pass in the FFT."""
    xp = array_module(x)
    size = next_fast_len(len(x))
    spectrum = xp.fft.rfft(x, size)
    freqs = xp.fft.rfftfreq(size, d=1.0 / fs)
    spectrum *= 1 - xp.exp(-((freqs / cutoff_hz) ** 2))
    return xp.fft.irfft(spectrum, size)[: len(x)].astype(x.dtype, copy=False)


def peak_threshold(response, factor: float = 0.3, quantile: float = 0.998) -> float:
    """The height a wavelet peak must reach: ``factor`` times the ``quantile`` of the response.

    With about one beat per second, the top 0.2 % of samples are R-peak tops; a third of that height still
    catches the wide, flatter response of ectopic beats and ignores T waves.
    """
    xp = array_module(response)
    return factor * float(xp.quantile(response, quantile))
