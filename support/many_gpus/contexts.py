"""Why a cluster lands on the wrong GPU when the program that starts it made a CUDA context too early.

Dask-CUDA's ``LocalCUDACluster`` gives each worker process its GPU through ``CUDA_VISIBLE_DEVICES``. Dask starts
workers with ``multiprocessing``'s *spawn*: a fresh Python that, for a script, first runs the script's top level
again (as ``__mp_main__``: everything outside ``if __name__ == "__main__":``), and only then sets the worker's
environment (distributed's ``Nanny`` applies ``env``, with ``CUDA_VISIBLE_DEVICES``, inside the new process). The
CUDA driver reads ``CUDA_VISIBLE_DEVICES`` once, when it initializes. So a CUDA call at a script's top level (an
array made with CuPy, some imports that touch the GPU) initializes the driver in every worker while all GPUs
are visible: its device 0 is the machine's GPU 0, and every worker computes there, whatever its
``CUDA_VISIBLE_DEVICES`` says afterwards. Dask-CUDA warns in each worker's log (``dask_cuda.initialize``, for
every protocol since dask-cuda PR #1548, with ``logger.warning``: "A CUDA context for device N ... already exists",
here N = 0, and "should have a CUDA context assigned to device ..."), but the log is the worker's stderr, which a
notebook does not show: :func:`worker_gpus` returns those lines beside what each worker computes on.

A notebook is not re-run by spawned workers (its ``__main__`` has no file), so a context the notebook makes
costs only its own memory on its GPU 0 (that of the first worker).

:func:`worker_gpus` runs a small script (:data:`SCRIPT`) in a fresh process, with nothing, ``import cudf`` or a
CuPy array at its top level (:data:`TOP_LEVEL`; the script's guarded entry point always makes its own CUDA context
before it starts the cluster), and returns, for each worker, the GPU its ``CUDA_VISIBLE_DEVICES`` gives it and the
GPU its arrays are on (:func:`where_my_arrays_live`, by PCI bus). ``LocalCUDACluster`` sets
``RAPIDS_NO_INITIALIZE`` in the starting process (26.10), which its workers inherit, so that RAPIDS libraries
imported at a script's top level do not initialize CUDA there; the run shows whether that holds for cuDF.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

from support.many_gpus.cluster import without_multicast

#: A script that starts a ``LocalCUDACluster`` and asks every worker where its arrays land. ``{top_level}`` is
#: code at the script's top level (run again in every spawned worker); inside the guard, the script makes its own
#: CUDA context before it starts the cluster, as a client that already used the GPU does.
SCRIPT = """\
import json

{top_level}

if __name__ == "__main__":
    import cupy

    cupy.zeros(1)  # the client's own CUDA context, made before the cluster starts
    from dask_cuda import LocalCUDACluster
    from distributed import Client

    from support.many_gpus.contexts import where_my_arrays_live

    with LocalCUDACluster(n_workers={workers}, silence_logs=50) as cluster:
        with Client(cluster) as client:
            rows = client.run(where_my_arrays_live)
    print("ROWS", json.dumps(sorted(rows.values(), key=lambda r: str(r["its GPU"]))))
"""

#: What a script may do at its top level before it starts a cluster: nothing, import cuDF, or make a CuPy array
#: (which makes a CUDA context on the current device).
TOP_LEVEL = {
    "nothing": "# nothing at the top level",
    "import cudf": "import cudf  # noqa: F401",
    "a CuPy array": "import cupy\n\ncupy.zeros(1)  # a CUDA context",
}


def script(top_level: str, *, workers: int = 2) -> str:
    """:data:`SCRIPT` with the code :data:`TOP_LEVEL` names ``top_level`` at its top level."""
    if top_level not in TOP_LEVEL:
        raise ValueError(f"top_level must be one of {sorted(TOP_LEVEL)}, not {top_level!r}")
    return SCRIPT.format(top_level=TOP_LEVEL[top_level], workers=workers)


def _nvml_index_of_bus(bus_id: str) -> int | None:
    import pynvml

    pynvml.nvmlInit()
    wanted = bus_id.lower()[-7:]  # "1b:00.0": NVML pads the PCI domain to 8 digits, CUDA to 4
    for index in range(pynvml.nvmlDeviceGetCount()):
        found = pynvml.nvmlDeviceGetPciInfo(pynvml.nvmlDeviceGetHandleByIndex(index)).busId
        found = found.decode() if isinstance(found, bytes) else found
        if found.lower()[-7:] == wanted:
            return index
    return None


def where_my_arrays_live() -> dict[str, object]:
    """In a worker: the GPU its ``CUDA_VISIBLE_DEVICES`` names first (its GPU, by the machine's numbering) and the
    GPU an array made here lands on (CuPy's current device, found by its PCI bus among NVML's GPUs)."""
    import cupy

    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "")
    cupy.zeros(1)
    bus = cupy.cuda.Device().pci_bus_id
    return {
        "pid": os.getpid(),
        "CUDA_VISIBLE_DEVICES": visible,
        "RAPIDS_NO_INITIALIZE": os.environ.get("RAPIDS_NO_INITIALIZE", "(not set)"),
        "its GPU": int(visible.split(",")[0]) if visible.split(",")[0].isdigit() else visible,
        "arrays on GPU": _nvml_index_of_bus(bus),
    }


#: Where Dask-CUDA's two warnings begin, after whatever the worker's log puts before them (time, logger, level).
WARNING_STARTS = ("Worker with process ID", "A CUDA context for device")


def context_warning(line: str, width: int = 240) -> str:
    """One of :func:`worker_gpus`'s log lines as the chapter prints it: from the start of Dask-CUDA's message (the
    log's own prefix cut off; the whole line where neither of :data:`WARNING_STARTS` is in it), to ``width``
    characters, which hold the devices it names even with two GPU UUIDs; the advice at its end is left out.

    >>> uuid = "GPU-2e865a6f-74b8-dec1-d911-d7a8a48d84f3"
    >>> line = (f"2026-11-26 18:00:00,123 - distributed.worker - WARNING - Worker with process ID 4242 should have"
    ...         f" a CUDA context assigned to device 1 ({uuid}), but instead the CUDA context is on device 0 ({uuid})."
    ...         " This is often the result of a CUDA-enabled library calling a CUDA runtime function before ...")
    >>> printed = context_warning(line)
    >>> printed.startswith("Worker with process ID 4242"), f"on device 0 ({uuid})" in printed
    (True, True)
    """
    starts = [line.find(start) for start in WARNING_STARTS if start in line]
    return line[min(starts) if starts else 0 :][:width]


def worker_gpus(top_level: str, *, workers: int = 2, timeout: float = 240):
    """Run :func:`script` with ``top_level`` in a fresh Python (this package importable) and return one row per
    worker (a pandas DataFrame indexed by process id): its ``CUDA_VISIBLE_DEVICES``, the GPU that names, and the
    GPU its arrays landed on. The lines of the workers' logs that mention a CUDA context (Dask-CUDA's warnings,
    which go to the script's stderr) are in the frame's ``attrs["context warnings"]``."""
    root = str(Path(__file__).resolve().parents[2])
    env = os.environ | {"PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    env = without_multicast(env)  # NVLink multicast off, unless the caller's environment says otherwise
    env.pop("CUDA_VISIBLE_DEVICES", None)  # every GPU visible to the script, as on a fresh shell
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"  # CUDA numbers the GPUs as NVML does, so that the two columns compare
    with tempfile.TemporaryDirectory(prefix="early-context-") as folder:
        path = Path(folder) / "start_cluster.py"
        path.write_text(script(top_level, workers=workers))
        done = subprocess.run(
            [sys.executable, str(path)], cwd=folder, env=env, capture_output=True, text=True, timeout=timeout
        )
    lines = [line for line in done.stdout.splitlines() if line.startswith("ROWS ")]
    if done.returncode or not lines:
        tail = "\n".join(done.stderr.strip().splitlines()[-8:])
        raise RuntimeError(f"the cluster script failed (exit {done.returncode}):\n{tail}")
    frame = pd.DataFrame(json.loads(lines[-1][5:])).set_index("pid")
    frame.attrs["context warnings"] = [line.strip() for line in done.stderr.splitlines() if "CUDA context" in line]
    return frame
