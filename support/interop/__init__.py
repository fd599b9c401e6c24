"""Chapter 3, zero-copy handoffs: moving arrays between cuDF, CuPy, Numba, PyTorch, JAX and NumPy.

- :mod:`~support.interop.handoffs`: :func:`share` (the zero-copy route, or the obstacle and its fix),
  :func:`same_memory`, the conversion table, the protocols each object speaks, stream recording;
- :mod:`~support.interop.cai_sync`: what Numba's synchronisation on the CUDA Array Interface costs a launch,
  and whether a launch races without it, measured in fresh processes;
- :mod:`~support.interop.races`: stream races, route by route, on a non-blocking and a blocking side stream: does a
  consumer read an array before its producer has written it?
- :mod:`~support.interop.breakdown`: a timing beside its parts measured with the same clock (the Polars GPU
  engine's collect);
- :mod:`~support.interop.views`: one consumer for every producer, cuda.core's ``StridedMemoryView``;
- :mod:`~support.interop.capsules`: what a DLPack capsule says about itself (name, version, flags), read with
  :mod:`ctypes`.

The names of :mod:`~support.interop.handoffs` are importable from here (``from support.interop import share``).
"""

from support.interop.handoffs import *  # noqa: F403
from support.interop.handoffs import __all__  # noqa: F401
