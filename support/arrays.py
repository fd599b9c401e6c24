"""Where an array lives, and the array module (NumPy or CuPy) that works on it.

Every step of the ECG pipeline is written once against the NumPy API and runs on whichever side its input
lives: a CuPy array keeps the work on the GPU, a NumPy array keeps it on the CPU. Nothing here moves data.

>>> import numpy as np
>>> array_module(np.zeros(3)).__name__
'numpy'
"""

from __future__ import annotations

import sys

import numpy as np


def is_gpu_array(x) -> bool:
    """True for a CuPy array (checked without importing CuPy when it is not loaded)."""
    cupy = sys.modules.get("cupy")
    return cupy is not None and isinstance(x, cupy.ndarray)


def array_module(x):
    """``cupy`` for a CuPy array, ``numpy`` for anything else."""
    return sys.modules["cupy"] if is_gpu_array(x) else np


def to_host(x) -> np.ndarray:
    """A NumPy copy of ``x`` (a copy from the GPU when ``x`` is a CuPy array)."""
    return x.get() if is_gpu_array(x) else np.asarray(x)


def synchronize(x=None) -> None:
    """Wait for the GPU's work when ``x`` (or, with no argument, CuPy) is on the GPU; nothing on the CPU."""
    cupy = sys.modules.get("cupy")
    if cupy is not None and (x is None or is_gpu_array(x)):
        cupy.cuda.Device().synchronize()
