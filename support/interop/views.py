"""One consumer for every producer: cuda.core's ``StridedMemoryView``.

``cuda.core.utils.StridedMemoryView.from_any_interface(obj, stream_ptr)`` takes anything that speaks DLPack or
the CUDA Array Interface (CuPy, PyTorch, JAX, Numba, a cuDF column) and describes its memory: pointer, shape,
strides, dtype, read-only flag. Its stream handling is the protocols' own: through DLPack the producer is asked to
order its pending work before ``stream_ptr``; through the interface cuda.core makes ``stream_ptr`` wait for the
stream the interface names, with an event, on the GPU. ``stream_ptr=-1`` asks for no ordering. It is what
numba-cuda turns every kernel argument into since 0.25, and what a library writer can accept instead of writing
one route per framework.

:func:`cupy_over` wraps such a view as a CuPy array over the same memory, for code that wants array operations.
"""

from __future__ import annotations

import numpy as np


def view_of(obj, stream_ptr: int):
    """``obj``'s memory as a cuda.core ``StridedMemoryView``, ordered before the stream ``stream_ptr``."""
    from cuda.core.utils import StridedMemoryView

    return StridedMemoryView.from_any_interface(obj, stream_ptr=stream_ptr)


def cupy_over(view, owner=None):
    """A CuPy array over the memory ``view`` describes: no copy. ``owner`` (the producer, by default the view,
    which holds it) is kept alive with the array. cuda.core gives strides in elements, or None for a C-contiguous
    array."""
    import cupy

    dtype = np.dtype(view.dtype)
    shape = tuple(view.shape)
    if view.strides is None:
        strides, extent = None, int(np.prod(shape, dtype=np.int64))
    else:
        if any(stride < 0 for stride in view.strides):
            raise ValueError("a view with negative strides: make it contiguous first (a copy)")
        strides = tuple(stride * dtype.itemsize for stride in view.strides)
        extent = 1 + sum((n - 1) * stride for n, stride in zip(shape, view.strides, strict=True))
    nbytes = max(extent, 1) * dtype.itemsize
    memory = cupy.cuda.UnownedMemory(view.ptr, nbytes, view if owner is None else owner)
    return cupy.ndarray(shape, dtype=dtype, memptr=cupy.cuda.MemoryPointer(memory, 0), strides=strides)
