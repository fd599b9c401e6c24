"""The package the book's chapters import: what each chapter teaches, and the few tools they all use.

=====================  =========  =====================================================================
subpackage / module    chapter    purpose
=====================  =========  =====================================================================
``why_gpus``           1          CPU (familiar and fastest) against GPU side by side; the host↔GPU link
``layouts``            2          array of structures against structure of arrays; their Numba kernels
``interop``            3          zero-copy handoffs (``share``, ``same_memory``), protocols, streams
``memory``             4, 5       one RMM pool for every library; churn, fragmentation, peaks, caps,
                                  leaks, JAX's settings; managed memory behind a guard; work beyond a
                                  budget
``ecg``                6          the ECG pipeline from CSV to anomaly scores, its evaluation, its
                                  command line (``python -m support.ecg``)
``many_gpus``          7 (draft)  recordings scored where they live on a Dask-CUDA cluster
``env``                all        which GPU and stack this is; the banner; ``require_gpu``
``needs``              all        what each chapter was seen to need; the check of its first cell
``claims``             all        a headline claim beside its control, asserted and recorded
``bench``              all        timing: CUDA events, warm-ups, repeats, medians; comparisons
``traffic``            1, 6, 7    every host↔GPU copy of every library, per stage (CUPTI)
``fresh_process``      3, 4, 5, 6 the one way an experiment runs in a new Python process
``figures``            all        the book's figure style; boxes and arrows for diagrams
``units``              all        byte counts (``KIB``, ``MIB``, ``GIB``, ``describe_bytes``)
``arrays``             6, 7       NumPy or CuPy: the array module that works where the data lives
=====================  =========  =====================================================================

``import support`` and the shared modules (``env``, ``needs``, ``claims``, ``bench``, ``units``, ``figures``,
``fresh_process``) import no GPU library, so they work on a laptop or a CPU-only CI machine; NumPy is the one
dependency the package declares. A chapter's package imports its frameworks where they are needed: lazily
inside functions where it can, at the top of the few modules that are nothing without them (the Numba kernels,
the PyTorch model), the way RMM's ``allocators/`` modules do; such a module fails at import with the plain
``ModuleNotFoundError`` of the framework it lacks.

The book's own tooling (building, executing, measuring, the workshop edition, the machine checks) is in
:mod:`booktools`, which chapters never import.
"""
