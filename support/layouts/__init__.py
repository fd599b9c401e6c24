"""Chapter 2, memory layouts: array of structures against structure of arrays, measured.

- :mod:`~support.layouts.aos_soa`: the records, the two layouts, the transposition, bandwidth tables;
- :mod:`~support.layouts.kernels`: the Numba CUDA kernels they launch (a module of their own, so that Numba's
  simulator can stand in for the GPU in tests).

The names of :mod:`~support.layouts.aos_soa` are importable from here (``from support import layouts``).
"""

from support.layouts.aos_soa import *  # noqa: F403
from support.layouts.aos_soa import __all__  # noqa: F401
