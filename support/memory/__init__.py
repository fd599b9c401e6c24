"""GPU memory for the book: one RMM pool for every framework, the tools to measure, cap and watch it, and managed
memory behind a guard.

One idea per module:

- :mod:`~support.memory.pools`: one pool for cuDF, CuPy, Numba and PyTorch (:func:`use_one_pool`), resources by
  name, timing work under each, pool sizing;
- :mod:`~support.memory.churn`: what one allocation costs, seen from Python;
- :mod:`~support.memory.fragmentation`: the largest request that fits once a churn has left holes, per allocator;
- :mod:`~support.memory.oom`: PyTorch's out-of-memory error, provoked under a cap in a fresh process;
- :mod:`~support.memory.torch_setups`: PyTorch inside the shared pool or beside it, one process per setup, and
  where a CUDA graph captured inside ``use_mem_pool`` takes its memory;
- :mod:`~support.memory.observe`: peak per stage, an allocation log, a leak check;
- :mod:`~support.memory.limits`: caps on memory, with errors that name the cap;
- :mod:`~support.memory.workload`: a data-frame workload with many temporaries;
- :mod:`~support.memory.jax_probe`: JAX's memory settings, each in a fresh process;
- :mod:`~support.memory.managed`: managed memory behind an oversubscription guard, prefetch and advice;
- :mod:`~support.memory.budget`: work larger than a device budget: pool, spilling, chunks, managed memory;
- :mod:`~support.memory.guards`: what the book's memory guards decide for the share this process sees
  (``python -m support.memory.guards``);
- :mod:`~support.memory.oversubscription`: managed memory beyond what the GPU has left, faults against prefetching;
- :mod:`~support.memory.plots`: the chapters' figures of memory.

Byte units come from :mod:`support.units` and are importable from here too (``memory.MIB``,
``memory.describe_bytes``), as chapter 4's cells use them. GPU libraries are imported only when a function needs
them, so ``import support.memory`` works without a GPU.
"""

from support.memory.limits import MemoryLimitError, allocation_limit, pool_with_maximum
from support.memory.observe import MemoryLeakError, MemoryUse, allocation_log, memory_scope, no_leak
from support.memory.pools import (
    RELEASE_KINDS,
    RESOURCE_KINDS,
    MemorySetupError,
    PoolReport,
    check_frameworks_share_pool,
    check_pool_size,
    current_bytes,
    make_resource,
    memory_returned,
    suggest_pool_size,
    torch_already_on_cuda,
    use_one_pool,
    using_resource,
)
from support.units import GIB, KIB, MIB, describe_bytes

__all__ = [
    "GIB",
    "KIB",
    "MIB",
    "RELEASE_KINDS",
    "RESOURCE_KINDS",
    "MemoryLeakError",
    "MemoryLimitError",
    "MemorySetupError",
    "MemoryUse",
    "PoolReport",
    "allocation_limit",
    "allocation_log",
    "check_frameworks_share_pool",
    "check_pool_size",
    "current_bytes",
    "describe_bytes",
    "make_resource",
    "memory_returned",
    "memory_scope",
    "no_leak",
    "pool_with_maximum",
    "suggest_pool_size",
    "torch_already_on_cuda",
    "use_one_pool",
    "using_resource",
]
