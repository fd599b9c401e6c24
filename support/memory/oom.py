"""PyTorch's out-of-memory error in its own words, provoked in a fresh process so the caller is not harmed.

:func:`provoke` caps PyTorch's caching allocator with ``torch.cuda.set_per_process_memory_fraction`` (the
process may then reserve ``cap`` bytes, whatever the GPU has free), makes a hole the cache cannot use, and asks
for a tensor that fits under the cap counting only the tensors alive, but not counting what the cache holds:

1. one tensor of :data:`PLAN`'s ``block`` share of the cap, freed: the cache keeps its segment;
2. three ``piece`` tensors, carved from that cached segment (the allocator splits a large free block), and the
   middle one freed: a hole between two live tensors, plus the segment's tail;
3. a request for ``ask``: no free piece is large enough, and a new segment would take the reserved bytes past
   the cap, so PyTorch raises ``torch.OutOfMemoryError``, whose message says how much is *allocated* (held by
   live tensors) and how much is *reserved but unallocated* (cached, here the hole and the tail).

The control, in the same process: the same live bytes and the same request with no holes (the cache emptied,
the two pieces allocated afresh) fit. :func:`provoke_in_fresh_process` runs it under a given
``PYTORCH_ALLOC_CONF`` (``expandable_segments:False`` by default, so the result does not depend on the
caller's environment).
"""

from __future__ import annotations

from support import fresh_process
from support.units import describe_bytes

#: Shares of the cap: the block freed first, each of the three pieces, and the request that fails.
PLAN = {"block": 600 / 1024, "piece": 190 / 1024, "ask": 460 / 1024}

#: The cap, in bytes: small, so the experiment takes a fraction of any GPU.
CAP_BYTES = 2**30


def sizes(cap: int = CAP_BYTES) -> dict[str, int]:
    """The plan's sizes in bytes for ``cap``, rounded down to 2 MiB (the allocator's unit for large blocks).

    >>> {name: size // 2**20 for name, size in sizes(2**30).items()}
    {'block': 600, 'piece': 190, 'ask': 460}
    """
    unit = 2 * 2**20
    if cap < 64 * unit:
        raise ValueError(f"a cap of {cap} bytes is too small for the plan: give at least 128 MiB")
    found = {name: int(cap * share) // unit * unit for name, share in PLAN.items()}
    live = 2 * found["piece"]
    if not (live + found["ask"] <= cap < found["block"] + found["ask"]):
        raise ValueError("the plan must fit under the cap without holes and exceed it with them")
    return found


def provoke(cap: int = CAP_BYTES) -> dict:
    """The plan in this process, which must not have used CUDA through PyTorch yet: the error (type and message),
    the bytes allocated and reserved when it was raised, and whether the control's request fits."""
    import torch

    plan = sizes(cap)
    free, total = torch.cuda.mem_get_info()
    if 2 * cap > free:
        raise RuntimeError(f"the GPU has {free} bytes free; the experiment wants twice its cap of {cap} bytes")
    torch.cuda.set_per_process_memory_fraction(cap / total)

    def tensor(nbytes: int):
        return torch.empty(nbytes, dtype=torch.uint8, device="cuda")

    block = tensor(plan["block"])
    del block  # its segment stays in the cache
    pieces = [tensor(plan["piece"]) for _ in range(3)]
    del pieces[1]  # a hole between two live tensors
    found: dict[str, object] = {
        "cap": cap,
        "asked": plan["ask"],
        "allocated": int(torch.cuda.memory_allocated()),
        "reserved": int(torch.cuda.memory_reserved()),
    }
    try:
        tensor(plan["ask"])
        found["error"], found["message"] = None, ""
    except torch.OutOfMemoryError as error:
        found["error"], found["message"] = type(error).__name__, str(error)
    del pieces
    torch.cuda.empty_cache()
    live = [tensor(plan["piece"]) for _ in range(2)]  # the same live bytes, no holes
    try:
        tensor(plan["ask"])
        found["without holes"] = "fits"
    except torch.OutOfMemoryError:
        found["without holes"] = "fails"
    del live
    return found


def provoke_in_fresh_process(alloc_conf: str = "expandable_segments:False", cap: int = CAP_BYTES) -> dict:
    """:func:`provoke` in a new process with the allocator's settings ``alloc_conf`` in ``PYTORCH_ALLOC_CONF``
    and in the older ``PYTORCH_CUDA_ALLOC_CONF``, the same value in both: PyTorch 2.11 reads both names and, where
    both are set, the older one (``c10/cuda/CUDAAllocatorConfig.h`` of the 2.11.0 build), so neither can be left to
    whatever the caller's environment holds. A process that dies is reported in ``error``, not raised."""
    sizes(cap)  # refuse a bad cap before a process starts
    try:
        return fresh_process.call(
            "support.memory.oom:provoke",
            cap=cap,
            what=f"the out-of-memory experiment ({alloc_conf})",
            env={"PYTORCH_ALLOC_CONF": alloc_conf, "PYTORCH_CUDA_ALLOC_CONF": alloc_conf},
        )
    except fresh_process.FreshProcessError as error:
        return {"error": f"the process failed: {str(error).splitlines()[-1][:70]}", "message": ""}


def rows(results: dict[str, dict]) -> list[dict[str, str]]:
    """One row per setting: whether the request fitted, the bytes allocated and reserved before it, and whether
    the control (no holes) fitted.

    >>> rows({"default": {"error": "OutOfMemoryError", "allocated": 2**20, "reserved": 2**21,
    ...                   "without holes": "fits"}})[0]["the request"]
    'OutOfMemoryError'
    """

    def size(found: dict, key: str) -> str:
        return describe_bytes(found[key]) if isinstance(found.get(key), int) else "—"

    return [
        {
            "setting": setting,
            "the request": found.get("error") or "fits",
            "allocated before it": size(found, "allocated"),
            "reserved before it": size(found, "reserved"),
            "no holes (control)": found.get("without holes", "—"),
        }
        for setting, found in results.items()
    ]
