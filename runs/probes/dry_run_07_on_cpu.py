"""CPU dry run of chapters/07_many_gpus.ipynb (a copy; the tracked notebook is not touched): run it before spending
a two-GPU booking on the chapter, after changing its cells or support/many_gpus. It catches what raises; it says
nothing of the GPU side (cupy, cuDF, Dask-CUDA, NVML, the CUDA profiler and NCCL are stand-ins or skipped), and
many.second_gpu_scoring fails on a CPU, as it must.

    TMPDIR=/path/on/a/disk .venv/bin/python runs/probes/dry_run_07_on_cpu.py [RUN_DIR]

(about 8 minutes on two cores; TMPDIR on a disk, not tmpfs, so that the page-drop check runs).

Edits each code cell's source on the way (string replacements, or a name swapped for a stand-in defined in an
added setup cell), then executes the copy with nbclient (allow_errors=True, 600 s per cell) with its working
directory under /tmp/ch7dry/run, and writes the executed copy and a summary of every cell with an error.
"""
import json
import os
import sys
import time

import nbformat
from nbclient import NotebookClient

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "chapters", "07_many_gpus.ipynb")
RUN_DIR = sys.argv[1] if len(sys.argv) > 1 else "/tmp/ch7dry/run"
OUT = os.path.join(RUN_DIR, "07_many_gpus.dry.ipynb")

SETUP = r'''
# DRY RUN ONLY: stand-ins for what a CPU machine lacks (added cell, not in the chapter)
import sys as _sys
print("kernel:", _sys.executable)
import dask as _dask
import pandas as _pd
from support import claims as _claims
from support.traffic import Copies as _Copies

# claims printed, not raised
_real_settle = _claims._settle
def _settle_printing(claim):
    try:
        return _real_settle(claim)
    except _claims.ClaimError as error:
        print("DRY-RUN CLAIM FAILED (printed, not raised):", error)
        return claim
_claims._settle = _settle_printing

# a CPU worker with a tiny memory_limit (the spilling case) must spill, not pause or be killed
_dask.config.set({"distributed.worker.memory.pause": False, "distributed.worker.memory.terminate": False})

# Dask-CUDA's CUDA_VISIBLE_DEVICES, emulated on CPU workers: worker n (and its copies "n-k") sees GPU n first,
# out of GPUS, as LocalCUDACluster sets it, so describe_start and the GPU-count assert see a placement
_real_make_cluster = make_cluster
def make_cluster(kind="cpu", **options):
    started = _real_make_cluster(kind, **options)
    from distributed import Client as _Client
    def _visible(dask_worker):
        import os as _os
        gpu = int(str(dask_worker.name).split("-")[0])
        _os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(str(g) for g in [gpu] + [g for g in range(GPUS) if g != gpu])
        return _os.environ["CUDA_VISIBLE_DEVICES"]
    with _Client(started) as _c:
        _c.run(_visible)
    return started

# the traffic meter needs the CUDA profiler: a stand-in with the read's bytes host-to-device
def _dry_beat_table_traffic(path, model, *, on="cpu"):
    import os as _os
    size = _os.path.getsize(path)
    return {"read": _Copies(host_to_device=size, count=1), "score": _Copies(host_to_device=4096, device_to_host=4096, count=2)}

# the early-context scripts need cupy and dask_cuda: a stand-in frame shaped as worker_gpus returns it
_PREFIX = "2026-11-26 10:00:00,123 - dask_cuda.initialize - WARNING - "
_UUID = "GPU-3f7b1c2a-9d4e-5b6f-8a7c-1e2d3f4a5b6c"
def _dry_worker_gpus(top_level, *, workers=2, timeout=240):
    cupy_first = "CuPy" in top_level
    rows = [
        {"pid": 4000 + k, "CUDA_VISIBLE_DEVICES": ",".join(str((k + j) % 2) for j in range(2)),
         "RAPIDS_NO_INITIALIZE": "(not set)", "its GPU": k, "arrays on GPU": 0 if cupy_first else k}
        for k in range(workers)
    ]
    frame = _pd.DataFrame(rows).set_index("pid")
    warned = []
    if cupy_first:
        warned = [
            _PREFIX + f"A CUDA context for device 0 ({_UUID}) already exists on process ID 4001. This is often ...",
            _PREFIX + f"Worker with process ID 4001 should have a CUDA context assigned to device 1 ({_UUID}), "
            f"but instead the CUDA context is on device 0 ({_UUID}). This is often the result of ...",
        ]
    frame.attrs["context warnings"] = warned
    return frame
'''


def edit(cell, cid):
    s = cell.source
    s = s.replace('"gpu"', '"cpu"')  # every GPU word: on=, make_cluster's kind, torchrun's --on
    if cid == "7f903d57":
        s = s.replace("GPUS = min(2, len(env.probe_gpus().gpus))", "GPUS = 2  # DRY RUN: the two-GPU path")
        s = s.replace("needs.check_gpu(", "# DRY RUN skipped: needs.check_gpu(")
        s = s.replace("env.banner(", "# DRY RUN skipped: env.banner(")
    elif cid == "c3cb43a8":
        s = s.replace("HOURS, COUNT, FS = 5, 16, 250.0", "HOURS, COUNT, FS = 0.1, 8, 250.0")
        s = s.replace("CHANNELS = 256", "CHANNELS = 32").replace("BATCH = 4096", "BATCH = 512")
    elif cid == "23c4b608":
        s = s.replace('assert devices["memory resource"]', '# DRY RUN skipped: assert devices["memory resource"]')
    elif cid == "71a1d4fc":
        s = s.replace("beat_table_traffic,", "_dry_beat_table_traffic,")
    elif cid == "d4b71bde":
        s = s.replace("worker_gpus(code)", "_dry_worker_gpus(code)")
    elif cid == "16e05bf6":
        s = s.replace("SPILL_BLOCKS, SPILL_BYTES = 16, 2**28", "SPILL_BLOCKS, SPILL_BYTES = 6, 2**20")
        s = s.replace("device_memory_limit=limit", "memory_limit=limit")
    cell.source = s


def main():
    nb = nbformat.read(SOURCE, as_version=4)
    cells = []
    for cell in nb.cells:
        cells.append(cell)
        if cell.cell_type != "code":
            continue
        before = cell.source
        edit(cell, cell.get("id"))
        if cell.source != before:
            cell.metadata["dry_run_edited"] = True
        if cell.get("id") == "d330526f":
            setup = nbformat.v4.new_code_cell(SETUP)
            setup["id"] = "dryrun-setup"
            cells.append(setup)
    nb.cells = cells
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    os.environ.pop("GPU_INTEROP_CLAIMS_LOG", None)
    client = NotebookClient(
        nb, timeout=600, kernel_name="python3", allow_errors=True,
        resources={"metadata": {"path": RUN_DIR}}, record_timing=True,
    )
    start = time.perf_counter()
    try:
        client.execute()
    finally:
        took = time.perf_counter() - start
        nbformat.write(nb, OUT)
        summary = []
        for k, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            timing = cell.metadata.get("execution", {})
            errors = [o for o in cell.outputs if o.get("output_type") == "error"]
            ran = cell.execution_count is not None
            row = {"index": k, "id": cell.get("id"), "ran": ran, "edited": bool(cell.metadata.get("dry_run_edited")),
                   "start": timing.get("iopub.execute_input"), "end": timing.get("shell.execute_reply")}
            if errors:
                e = errors[0]
                row["error"] = f"{e['ename']}: {e['evalue']}"
                row["traceback_tail"] = [line for line in e["traceback"][-6:]]
            texts = "".join(o.get("text", "") for o in cell.outputs if o.get("output_type") == "stream")
            if "DRY-RUN CLAIM FAILED" in texts:
                row["claim_failed"] = [l for l in texts.splitlines() if "DRY-RUN CLAIM FAILED" in l]
            summary.append(row)
        with open(os.path.join(RUN_DIR, "summary.json"), "w") as f:
            json.dump({"seconds": took, "cells": summary}, f, indent=1)
        print(f"executed in {took:.0f} s; wrote {OUT}")


if __name__ == "__main__":
    main()
