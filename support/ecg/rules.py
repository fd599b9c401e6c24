"""The tests the pipeline's kernels apply to one sample or one beat, written once in plain Python.

:mod:`support.ecg.kernels` compiles them with ``numba.njit`` for the CPU and :mod:`support.ecg.cuda_kernels`
with ``numba.cuda.jit(device=True)`` for the GPU, so both sides (and the CUDA simulator in the tests) run the
same logic. They import nothing, so neither compiled module imports the other.

>>> import numpy as np
>>> is_peak(np.array([0.0, 3.0, 1.0]), 1, half_window=1, threshold=2.0)
True
"""


def is_peak(y, i, half_window, threshold):
    """Whether sample ``i`` reaches ``threshold`` and no sample within ``half_window`` beats it (ties: earliest)."""
    value = y[i]
    if not value >= threshold:  # also rejects NaN
        return False
    start = max(0, i - half_window)
    stop = min(y.shape[0] - 1, i + half_window)
    for j in range(start, i):
        if y[j] >= value:
            return False
    for j in range(i + 1, stop + 1):
        if y[j] > value:
            return False
    return True


def is_plausible(peaks, k, min_gap, max_gap):
    """Whether the intervals from candidate ``k`` to both neighbours lie in [``min_gap``, ``max_gap``]."""
    if k == 0 or k == peaks.shape[0] - 1:
        return False
    before = peaks[k] - peaks[k - 1]
    after = peaks[k + 1] - peaks[k]
    return min_gap <= before <= max_gap and min_gap <= after <= max_gap


def embedded_value(signal, peaks, k, column, anchor):
    """The sample of beat ``k``'s row at ``column`` (its R peak at ``anchor``); 0 beyond the recording."""
    sample = peaks[k] - anchor + column
    if 0 <= sample < signal.shape[0]:
        return signal[sample]
    return 0.0
