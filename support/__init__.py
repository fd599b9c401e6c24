"""Support code for the GPU Interop Book.

One module per topic; every GPU library is imported lazily inside the function that needs it, so
``import support`` works on a laptop or a CPU-only CI machine:

- :mod:`support.env`: which GPU and which GPU stack this machine has; the banner every chapter starts with.
- :mod:`support.bench`: timing with CUDA events (warm-ups, repeats, median) and comparison tables.
- :mod:`support.interop`: zero-copy handoffs between cuDF, CuPy, Numba, PyTorch, JAX and NumPy.
- :mod:`support.book`: executing, cleaning and checking the book's notebooks.
"""

__all__ = ["bench", "book", "env", "interop"]
