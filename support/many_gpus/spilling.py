"""What spilling costs: a worker that keeps more data than its device memory limit lets it hold on the GPU.

Dask-CUDA gives each worker a store (``DeviceHostFile``, 26.10) that keeps task results on the GPU up to
``device_memory_limit`` bytes (by Dask's ``sizeof``) and moves the least recently used ones to host memory beyond
it, and back when a task needs them. :func:`spill_case` fills one worker with ``blocks`` arrays of ``nbytes`` each
(:func:`make_block`), says where they lie (:func:`where_results_live`), and times a pass that reads every block
once (:func:`block_sum`): where the blocks do not fit, each pass brings every one back from the host and sends
another out, in least-recently-used order.
"""

from __future__ import annotations

from support.bench import time_wall
from support.many_gpus.recordings import array_module


def make_block(seed: int, *, nbytes: int, on: str = "cpu"):
    """``nbytes`` of random float64 numbers (a CuPy array with ``on="gpu"``), from ``seed``."""
    xp = array_module(on)
    return xp.random.default_rng(seed).random(max(1, nbytes // 8))


def block_sum(block) -> float:
    """A pass over one block: its sum, as a Python float (a few bytes back to the notebook)."""
    return float(block.sum())


def where_results_live(dask_worker) -> dict[str, int]:
    """The bytes of the task results a worker keeps, by where they lie (run it with ``client.run``): ``"GPU"``
    and ``"host"`` in Dask-CUDA's ``DeviceHostFile``; in a CPU worker's store, ``"host"`` and ``"disk"`` (keys
    spilled to disk, counted by their in-memory size as they left)."""
    from dask.sizeof import sizeof

    data = dask_worker.data
    if hasattr(data, "device") and hasattr(data, "host"):  # dask_cuda.DeviceHostFile
        return {
            "GPU": int(sum(sizeof(v) for v in data.device.values())),
            "host": int(sum(sizeof(v) for v in data.host.values())),
        }
    fast = getattr(data, "fast", data)  # distributed's SpillBuffer, or a plain dict without spilling
    spilled = getattr(data, "spilled_total", None)  # SpilledSize(memory, disk) in distributed's SpillBuffer
    return {"host": int(sum(sizeof(v) for v in fast.values())), "disk": int(spilled.memory) if spilled else 0}


def spill_case(client, *, blocks: int, nbytes: int, on: str = "cpu", warmup: int = 1, repeat: int = 3):
    """Fill ``client``'s (first) worker with ``blocks`` blocks of ``nbytes``, then time (wall clock, ``warmup`` and
    ``repeat`` runs) a pass that sums every block where it lies. Returns a dict: the timing
    (:class:`support.bench.Timing`), the bytes held, and where they lay after the blocks were made and after the
    last pass (:func:`where_results_live`). The blocks are released before it returns."""
    from distributed import wait

    if blocks < 1 or nbytes < 8:
        raise ValueError(f"need at least one block of at least 8 bytes, not {blocks} of {nbytes}")
    worker = sorted(client.scheduler_info()["workers"])[0]
    made = client.map(make_block, range(blocks), nbytes=nbytes, on=on, workers=[worker], pure=False)
    wait(made)
    try:
        placed = client.run(where_results_live, workers=[worker])[worker]

        def one_pass():
            return client.gather(client.map(block_sum, made, workers=[worker], pure=False))

        timing = time_wall(one_pass, label=f"{blocks} blocks", warmup=warmup, repeat=repeat)
        after = client.run(where_results_live, workers=[worker])[worker]
    finally:
        client.cancel(made)
    return {"timing": timing, "bytes": blocks * (nbytes // 8) * 8, "placed": placed, "after passes": after}
