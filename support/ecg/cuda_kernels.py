"""The CUDA versions of :mod:`support.ecg.kernels`, compiled from the same Python functions (:mod:`support.ecg.rules`).

They live in their own module, with ``cuda`` a module global, so that Numba's CUDA simulator can stand in
for the GPU in tests. Call them through :mod:`support.ecg.kernels`, which checks the arguments.

``cache=True`` keeps each compiled kernel in ``__pycache__``: a second process (the command line run again)
loads it instead of compiling it again.
"""

from numba import cuda  # noqa: TID253  # the kernels are compiled at import; kernels._gpu imports this lazily

from support.ecg import rules

is_peak = cuda.jit(device=True)(rules.is_peak)
is_plausible = cuda.jit(device=True)(rules.is_plausible)
embedded_value = cuda.jit(device=True)(rules.embedded_value)


@cuda.jit(cache=True)
def gate(y, half_window, threshold, out):
    i = cuda.grid(1)
    if i < y.shape[0]:
        out[i] = 1 if is_peak(y, i, half_window, threshold) else 0


@cuda.jit(cache=True)
def plausible(peaks, min_gap, max_gap, out):
    k = cuda.grid(1)
    if k < peaks.shape[0]:
        out[k] = 1 if is_plausible(peaks, k, min_gap, max_gap) else 0


@cuda.jit(cache=True)
def embed(signal, peaks, keep, rows, anchor, out):
    k, column = cuda.grid(2)
    if k < peaks.shape[0] and column < out.shape[1] and keep[k]:
        out[rows[k], column] = embedded_value(signal, peaks, k, column, anchor)
