"""One process per GPU, the PyTorch way: ``torchrun`` starts copies of this module (its *ranks*), each of which
scores its share of the recordings on its own GPU, with its own RMM pool there.

Dask hands tasks to worker processes that a scheduler feeds; ``torchrun`` starts the same program once per GPU,
tells each copy its rank (``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE`` in its environment) and lets the copies talk
through collectives (NCCL between GPUs, Gloo on the CPU). Nothing hands out work: each rank takes every
``WORLD_SIZE``-th recording from its ``RANK``. Run it from a shell (or from a notebook cell with ``subprocess``)::

    python -m torch.distributed.run --standalone --nproc-per-node 2 -m support.many_gpus.ranks \\
        --model model.pt --out ranks.json --epochs 1 --on gpu recording-000.csv recording-001.csv ...

Every rank first calls :func:`use_pool_on_own_gpu` (the GPU of its ``LOCAL_RANK``: RMM pool there, CuPy and
PyTorch allocating from it, PyTorch's current device set), then :func:`score_share` on its recordings; rank 0
writes one row per rank to ``--out`` (a JSON list; :func:`read_rows` reads it back). The entry point is guarded
by ``if __name__ == "__main__":``, as every program that starts processes must be.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import time
from pathlib import Path

import pandas as pd

from support.many_gpus.cluster import without_multicast
from support.many_gpus.recordings import read_recording
from support.many_gpus.scoring import score_recording


def use_pool_on_own_gpu(local_rank: int, pool_size: int) -> str:
    """Make this process's GPU the one of ``local_rank`` and give it an RMM pool of ``pool_size`` bytes that
    cuDF, CuPy and PyTorch allocate from (chapter 4's one pool, on that device). Call it before any CUDA work:
    PyTorch's allocator can only be swapped before its first CUDA tensor. Returns the resource's name."""
    import cupy
    import rmm
    import torch
    from rmm.allocators.cupy import rmm_cupy_allocator
    from rmm.allocators.torch import rmm_torch_allocator

    torch.cuda.memory.change_current_allocator(rmm_torch_allocator)  # before torch touches the GPU
    cupy.cuda.Device(local_rank).use()  # the CUDA runtime's current device, for cuDF, CuPy and RMM
    pool = rmm.mr.PoolMemoryResource(rmm.mr.CudaMemoryResource(), initial_pool_size=pool_size)
    rmm.mr.set_per_device_resource(local_rank, pool)
    cupy.cuda.set_allocator(rmm_cupy_allocator)
    torch.cuda.set_device(local_rank)
    return type(rmm.mr.get_current_device_resource()).__name__


def score_share(paths, model, *, rank: int, world: int, on: str, epochs: int) -> dict[str, object]:
    """Read and score (with ``epochs`` of fine-tuning) every ``world``-th recording of ``paths`` from ``rank``, one
    after another, on this process's device: how many recordings and beats, and the wall-clock span (its start and
    end as Unix times, so that the ranks' spans can be set side by side)."""
    mine = list(paths)[rank::world]
    started = time.time()
    beats = 0
    for path in mine:
        recording = read_recording(path, fs=model.fs, on=on)
        beats += len(score_recording(recording, model, on=on, fine_tune_epochs=epochs))
    return {"recordings": len(mine), "beats": beats, "start": started, "end": time.time()}


def read_rows(path):
    """The rows rank 0 wrote (one per rank) as a pandas DataFrame indexed by rank, with each rank's
    ``seconds``."""
    rows = pd.DataFrame(json.loads(Path(path).read_text())).set_index("rank").sort_index()
    rows["seconds"] = rows["end"] - rows["start"]
    return rows


def run_ranks(command, out, *, timeout: float = 300):
    """Run ``command`` (a ``torchrun`` command line, as a list) with this package importable, and return the rows
    its rank 0 wrote to ``out`` (:func:`read_rows`); a failure raises with the end of its standard error."""
    root = str(Path(__file__).resolve().parents[2])
    env = os.environ | {"PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    env = without_multicast(env)  # NVLink multicast off, unless the caller's environment says otherwise
    done = subprocess.run([str(part) for part in command], env=env, capture_output=True, text=True, timeout=timeout)
    if done.returncode or not Path(out).exists():
        tail = "\n".join(done.stderr.strip().splitlines()[-12:])
        raise RuntimeError(f"torchrun failed (exit {done.returncode}):\n{tail}")
    return read_rows(out)


def span(rows) -> float:
    """Seconds from the first rank's start to the last rank's end (:func:`read_rows`)."""
    return float(rows["end"].max() - rows["start"].min())


def main(argv=None) -> None:
    import torch
    import torch.distributed as dist

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", help="the recordings (CSV files); each rank scores every N-th")
    parser.add_argument("--model", required=True, help="the global model, saved with torch.save")
    parser.add_argument("--out", required=True, help="where rank 0 writes one JSON row per rank")
    parser.add_argument("--epochs", type=int, default=1, help="fine-tuning epochs per recording")
    parser.add_argument("--on", choices=("gpu", "cpu"), default="gpu")
    parser.add_argument("--pool", type=int, default=4 * 2**30, help="RMM pool per rank, bytes (GPU only)")
    args = parser.parse_args(argv)
    if "LOCAL_RANK" not in os.environ:
        parser.error("no LOCAL_RANK in the environment: start this module with torchrun (torch.distributed.run)")
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local_rank = int(os.environ["LOCAL_RANK"])
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "(not set)")
    row: dict[str, object] = {"rank": rank, "pid": os.getpid(), "CUDA_VISIBLE_DEVICES": visible}
    if args.on == "gpu":
        row["memory resource"] = use_pool_on_own_gpu(local_rank, args.pool)
        row["device"] = f"cuda:{torch.cuda.current_device()} {torch.cuda.get_device_name()}"
        dist.init_process_group("nccl", device_id=torch.device("cuda", local_rank))
    else:
        row["memory resource"], row["device"] = "(host)", "cpu"
        dist.init_process_group("gloo")
    try:
        model = torch.load(args.model, weights_only=False)  # a GlobalModel, saved by the notebook
        mine = args.paths[rank::world]
        if mine:  # a warm-up: kernels compiled, cuDNN and the pool ready before the timed span
            score_share(mine[:1], model, rank=0, world=1, on=args.on, epochs=args.epochs)
        dist.barrier()  # every rank ready: the spans start together
        row |= score_share(args.paths, model, rank=rank, world=world, on=args.on, epochs=args.epochs)
        rows = [None] * world
        dist.all_gather_object(rows, row)
        if rank == 0:
            Path(args.out).write_text(json.dumps(rows))
    finally:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
