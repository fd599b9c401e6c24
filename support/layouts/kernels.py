"""The CUDA kernels of :mod:`support.layouts`. They live in their own module, with ``cuda`` a module global, so
that Numba's CUDA simulator can stand in for the GPU in tests. Call them through :mod:`support.layouts`, which
checks the arguments and picks the launch size.
"""

from numba import cuda, float64  # noqa: TID253  # the kernels are the module; callers import it lazily

THREADS = 256


@cuda.jit
def sum_column(matrix, column, out):
    """Add ``matrix[:, column]`` into ``out[0]``: each thread sums a strided share, each block adds its total."""
    partial = cuda.shared.array(THREADS, float64)
    thread = cuda.threadIdx.x
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    total = float64(0.0)  # accumulate in float64 (also in the simulator, where 0.0 + float32 stays float32)
    while i < matrix.shape[0]:
        total += matrix[i, column]
        i += stride
    partial[thread] = total
    cuda.syncthreads()
    step = THREADS // 2
    while step > 0:
        if thread < step:
            partial[thread] += partial[thread + step]
        cuda.syncthreads()
        step //= 2
    if thread == 0:
        cuda.atomic.add(out, 0, partial[0])


@cuda.jit
def records_to_fields(records, fields):
    """``fields[f, i] = records[i, f]``: each thread reads whole records (16 contiguous bytes), and a warp writes
    32 consecutive values of each field."""
    i = cuda.grid(1)
    stride = cuda.gridsize(1)
    while i < records.shape[0]:
        for f in range(records.shape[1]):
            fields[f, i] = records[i, f]
        i += stride
