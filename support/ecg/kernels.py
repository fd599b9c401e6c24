"""The pipeline's hand-written Numba kernels, each compiled twice from one Python function: for the GPU with
``numba.cuda`` and for the CPU with ``numba.njit``.

- :func:`peak_gate`: 1-D non-maximum suppression. Sample ``i`` is a beat candidate when it reaches the
  threshold and no sample within ``half_window`` on either side is larger (ties go to the earliest sample).
- :func:`plausible_beats`: a candidate is kept when the intervals to both neighbours are plausible RR
  intervals; the first and last candidates, which have only one neighbour, are dropped.
- :func:`embed_beats`: each kept beat is copied into one row of a fixed-width matrix, its R peak at column
  ``anchor``: the same window of the signal around every R peak, whatever the neighbouring beats do (zeros
  only beyond either end of the recording). An earlier version zeroed each row beyond the midpoints to the
  neighbouring R peaks; that cut the T wave of every beat before a premature one, and the model learned to
  flag the neighbours of ectopic beats instead of the ectopic beats.

Each kernel runs where its input lives: a CuPy array (or any object with ``__cuda_array_interface__``) runs
on the GPU, a NumPy array on the CPU. ``target="gpu"`` forces the CUDA version, which is how the tests run it
on NumPy arrays in Numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``). GPU results stay on the GPU.

>>> import numpy as np
>>> peak_gate(np.array([0, 3, 1, 0, 5, 4, 0], np.float32), half_window=1, threshold=2.0).tolist()
[0, 1, 0, 0, 1, 0, 0]
"""

from __future__ import annotations

import functools
import math

import numpy as np

from support.arrays import is_gpu_array
from support.ecg.rules import embedded_value, is_peak, is_plausible

THREADS = 256


@functools.cache
def _cpu():
    import numba

    peak = numba.njit(is_peak)
    plausible_beat = numba.njit(is_plausible)
    value_at = numba.njit(embedded_value)

    @numba.njit(parallel=True)
    def gate(y, half_window, threshold, out):
        for i in numba.prange(y.shape[0]):
            out[i] = 1 if peak(y, i, half_window, threshold) else 0

    @numba.njit(parallel=True)
    def plausible(peaks, min_gap, max_gap, out):
        for k in numba.prange(peaks.shape[0]):
            out[k] = 1 if plausible_beat(peaks, k, min_gap, max_gap) else 0

    @numba.njit(parallel=True)
    def embed(signal, peaks, keep, rows, anchor, out):
        for k in numba.prange(peaks.shape[0]):
            if keep[k]:
                for column in range(out.shape[1]):
                    out[rows[k], column] = value_at(signal, peaks, k, column, anchor)

    return gate, plausible, embed


@functools.cache
def _gpu():
    """The CUDA versions (module :mod:`support.ecg.cuda_kernels`, imported only when a GPU kernel is asked for)."""
    try:
        from support.ecg import cuda_kernels  # noqa: PLC0415  # it imports numba.cuda, a GPU library
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ModuleNotFoundError(
            "the GPU kernels need numba-cuda (environment.yml installs it); on the CPU pass NumPy arrays"
        ) from error
    return cuda_kernels.cuda, cuda_kernels.gate, cuda_kernels.plausible, cuda_kernels.embed


def _on_gpu(x, target: str | None) -> bool:
    if target not in (None, "cpu", "gpu"):
        raise ValueError(f"target must be 'cpu', 'gpu' or None (where the input lives), not {target!r}")
    if target is not None:
        return target == "gpu"
    return is_gpu_array(x) or hasattr(x, "__cuda_array_interface__")


def _empty(like, shape, dtype, gpu: bool):
    if not gpu:
        return np.empty(shape, dtype)
    if is_gpu_array(like):
        import cupy

        return cupy.empty(shape, dtype)
    return _gpu()[0].device_array(shape, dtype)  # Numba's own (the simulator's, in tests)


def _blocks(count: int) -> int:
    return max(1, math.ceil(count / THREADS))


def _check_vector(x, name: str):
    if len(x.shape) != 1:
        raise ValueError(f"{name} must be one-dimensional, got shape {tuple(x.shape)}")


def peak_gate(y, *, half_window: int, threshold: float, target: str | None = None):
    """A uint8 gate the length of ``y``: 1 where a beat candidate peaks (see the module docstring)."""
    _check_vector(y, "the wavelet response")
    if half_window < 1:
        raise ValueError(f"the suppression window must reach at least 1 sample each side, not {half_window}")
    if y.shape[0] < 2 * half_window + 1:
        raise ValueError(
            f"the signal has {y.shape[0]} samples, fewer than one suppression window ({2 * half_window + 1})"
        )
    gpu = _on_gpu(y, target)
    out = _empty(y, y.shape, np.uint8, gpu)
    if gpu:
        _gpu()[1][_blocks(y.shape[0]), THREADS](y, int(half_window), float(threshold), out)
    else:
        _cpu()[0](np.ascontiguousarray(y), int(half_window), float(threshold), out)
    return out


def plausible_beats(peaks, *, min_gap: int, max_gap: int, target: str | None = None):
    """A uint8 flag per candidate: 1 when both its RR intervals lie in ``[min_gap, max_gap]`` samples."""
    _check_vector(peaks, "the peak positions")
    if not 0 < min_gap <= max_gap:
        raise ValueError(f"need 0 < min_gap <= max_gap, got {min_gap} and {max_gap}")
    gpu = _on_gpu(peaks, target)
    out = _empty(peaks, peaks.shape, np.uint8, gpu)
    if peaks.shape[0] == 0:
        return out
    if gpu:
        _gpu()[2][_blocks(peaks.shape[0]), THREADS](peaks, int(min_gap), int(max_gap), out)
    else:
        _cpu()[1](peaks, int(min_gap), int(max_gap), out)
    return out


def embed_beats(signal, peaks, keep, rows, *, count: int, width: int, anchor: int, target: str | None = None):
    """A ``count × width`` float32 matrix: row ``rows[k]`` holds candidate ``k`` when ``keep[k]`` is set.

    ``rows`` is the exclusive running count of ``keep`` (``cumsum(keep) - keep``); ``count`` its total.
    """
    _check_vector(signal, "the signal")
    if not 0 <= anchor < width:
        raise ValueError(f"the R-peak column {anchor} must lie inside the row width {width}")
    gpu = _on_gpu(signal, target)
    out = _empty(signal, (count, width), np.float32, gpu)
    if count == 0:
        return out
    if gpu:
        grid = (math.ceil(peaks.shape[0] / 16), math.ceil(width / 16))
        _gpu()[3][grid, (16, 16)](signal, peaks, keep, rows, int(anchor), out)
    else:
        _cpu()[2](signal, peaks, keep, rows, int(anchor), out)
    return out
