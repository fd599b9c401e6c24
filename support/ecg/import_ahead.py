"""Import PyTorch's compiler stack in a background thread while the command line synthesizes or reads its data.

PyTorch does not import ``torch._dynamo`` at ``import torch``: a function it wraps in ``torch._disable_dynamo``
imports it at its first call, and ``Optimizer.add_param_group`` is one, called by every optimizer's constructor
(read in the source of PyTorch 2.13, the tests' CPU build; the cold-start probe in ``runs/probes/`` saw the
import on the GPU host's 2.11, about a second of a fresh process). A fresh ``python -m support.ecg`` would pay
for it at its first training step, after the data is on the GPU.

:func:`start` imports it in a thread instead, as soon as ``torch`` itself is imported. The import is mostly
Python and holds the interpreter's lock, so it overlaps only the work that lets the lock go: the GPU's kernels
and copies, the CSV written to disk, NumPy's large array operations. Python's import lock makes the optimizer
wait for a half-finished import rather than start a second one. ``--no-import-ahead`` is the control: the
import where PyTorch puts it.
"""

from __future__ import annotations

import importlib
import threading

#: What :func:`start` imports by default.
COMPILER_STACK = "torch._dynamo"


def start(module: str = COMPILER_STACK) -> threading.Thread:
    """Import ``module`` in a daemon thread and return the thread (already started).

    An import that fails there is not reported: the module is then imported again where the program first needs
    it, which raises the same error with a traceback that points at the user of the module.
    """

    def import_it() -> None:
        try:
            importlib.import_module(module)
        except Exception:  # noqa: BLE001, S110 - the program's own import raises it again, where it is needed
            pass

    thread = threading.Thread(target=import_it, name=f"import {module}", daemon=True)
    thread.start()
    return thread
