"""Managed (unified) memory: one pointer valid on the CPU and the GPU, behind a guard against oversubscription.

:func:`managed_array` allocates with RMM's ``ManagedMemoryResource`` (``cudaMallocManaged``) and returns a CuPy
array; :func:`host_view` is a NumPy array over the same bytes, for the CPU. Pages live where they were last
touched and migrate on demand, one fault at a time, unless :func:`prefetch` moves them ahead of use
(``cudaMemPrefetchAsync`` with its CUDA 13 signature, a ``cudaMemLocation``) or :func:`advise` gives the driver
a hint (``cudaMemAdvise``).

**The guard.** Asking for more managed memory than the GPU has free *oversubscribes* it: the driver then evicts
pages to host memory and faults them back, and on a shared GPU that storm of migrations can stall every process
on the machine. :func:`check_managed_request` refuses such a request unless the environment variable
``GPU_INTEROP_ALLOW_OVERSUBSCRIPTION=1`` says the user wants it (do that only on a GPU of your own).

The guard counts what the process already holds. On a whole GPU, managed memory that no kernel has touched yet
does not lower the free memory the driver reports, so checking each request alone would let ten requests of 60 %
of the free memory through, one after another. Under an MPS client's memory limit the driver charges a managed
allocation when it is made, and the free memory it reports already holds it: :func:`managed_array` learns which
of the two it is from its first large allocation (:func:`driver_counts_managed`), so the guard never counts the
same bytes twice before they are touched. Every managed route the book offers therefore allocates through one
process-wide **ledger** (:func:`ledger`): a ``LimitingResourceAdaptor`` at the free device memory (when the
ledger is made) over the managed resource, under a ``StatisticsResourceAdaptor`` that counts what is held.
:func:`managed_array` checks the new request *plus the managed bytes still held* against the free memory
first, for a message that says what to do; the pools and the budget runs of :mod:`support.memory.budget` grow
from the ledger, so the limit refuses what they would add beyond it (pages already moved to the GPU are counted
twice: the guard errs on the safe side). The base is ``cudaMallocManaged`` (RMM's ``ManagedMemoryResource``) or,
with ``kind="async"``, CUDA 13's pool of managed memory (``rmm.mr.experimental.CudaAsyncManagedMemoryResource``);
a process has one ledger, of one kind.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Mapping

import numpy as np

from support.bench import time_cuda
from support.memory.pools import MemorySetupError
from support.units import describe_bytes

OPT_IN = "GPU_INTEROP_ALLOW_OVERSUBSCRIPTION"


class OversubscriptionRefused(MemorySetupError):
    """A managed allocation larger than the GPU's free memory, without the opt-in."""


def opted_in(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``GPU_INTEROP_ALLOW_OVERSUBSCRIPTION`` is set to 1, true or yes."""
    value = (os.environ if environ is None else environ).get(OPT_IN, "")
    return value.strip().lower() in ("1", "true", "yes")


def check_managed_request(
    nbytes: int, free: int, total: int, environ: Mapping[str, str] | None = None, *, held: int = 0
) -> None:
    """Refuse a managed allocation of ``nbytes`` that, with the ``held`` managed bytes the process already has,
    is more than the ``free`` device memory, unless opted in.

    >>> check_managed_request(6, free=10, total=16, environ={}, held=0)
    >>> check_managed_request(6, free=10, total=16, environ={}, held=6)
    Traceback (most recent call last):
    ...
    support.memory.managed.OversubscriptionRefused: a managed allocation of 6 B, with the 6 B of managed memory ...
    """
    if nbytes <= 0:
        raise ValueError(f"a managed allocation needs a positive size, not {nbytes} bytes")
    if nbytes + held > free and not opted_in(environ):
        already = f", with the {describe_bytes(held)} of managed memory this process holds," if held else ""
        raise OversubscriptionRefused(
            f"a managed allocation of {describe_bytes(nbytes)}{already} is more than the {describe_bytes(free)} "
            f"free on this GPU (of {describe_bytes(total)}): it would oversubscribe the GPU, and the page "
            "migrations that follow can stall every user of a shared machine. Ask for less, or process the data "
            f"in chunks; on a GPU of your own, set {OPT_IN}=1 to allow it"
        )


_LEDGER: dict[str, object] = {}  # the process's one ledger, made on first use: kind -> resource

#: The managed resources a ledger can be made over.
LEDGER_KINDS = ("cudaMallocManaged", "async")


def ledger(kind: str = "cudaMallocManaged", environ: Mapping[str, str] | None = None):
    """The process's one counted, guarded managed resource (see the module's docstring).

    Made on first use, over ``kind``; asking for the other kind later raises :class:`MemorySetupError`. With
    ``GPU_INTEROP_ALLOW_OVERSUBSCRIPTION=1`` it counts but does not limit.
    """
    if kind not in LEDGER_KINDS:
        raise ValueError(f"unknown managed resource {kind!r}; choose one of {', '.join(LEDGER_KINDS)}")
    if _LEDGER and kind not in _LEDGER:
        raise MemorySetupError(
            f"this process's managed memory is counted over {next(iter(_LEDGER))!r} already; one process keeps "
            f"one ledger: use a fresh process for {kind!r}"
        )
    if not _LEDGER:
        import rmm

        if kind == "async":
            base = rmm.mr.experimental.CudaAsyncManagedMemoryResource()
        else:
            base = rmm.mr.ManagedMemoryResource()
        if not opted_in(environ):
            free, _ = rmm.mr.available_device_memory()
            base = rmm.mr.LimitingResourceAdaptor(base, allocation_limit=free)
        _LEDGER[kind] = rmm.mr.StatisticsResourceAdaptor(base)
    return _LEDGER[kind]


def managed_bytes_held() -> int:
    """Managed bytes allocated through the ledger and not yet freed, in this process (any route)."""
    return int(next(iter(_LEDGER.values())).allocation_counts.current_bytes) if _LEDGER else 0


#: Whether the driver's free memory drops when managed memory is allocated (under an MPS client's limit it does;
#: on a whole GPU it waits for the pages to be touched): learnt from the first allocation of at least
#: :data:`LEARNING_BYTES`; until then the guard counts what is held (the safe side).
_DRIVER_COUNTS_MANAGED: list[bool] = []
LEARNING_BYTES = 64 * 2**20


def driver_counts_managed(free_before: int, free_after: int, nbytes: int) -> bool:
    """Whether an allocation of ``nbytes`` lowered the driver's free memory by at least half of it.

    >>> driver_counts_managed(16 * 2**30, 16 * 2**30, 2**30)  # a whole GPU: untouched pages are not charged
    False
    >>> driver_counts_managed(16 * 2**30, 15 * 2**30, 2**30)  # an MPS limit charges the allocation
    True
    """
    return free_before - free_after >= nbytes // 2


def held_beyond_free() -> int:
    """The managed bytes this process holds that the driver's free memory does not already reflect."""
    return 0 if _DRIVER_COUNTS_MANAGED and _DRIVER_COUNTS_MANAGED[0] else managed_bytes_held()


def managed_array(shape, dtype=np.float32):
    """A CuPy array in managed memory (RMM ``ManagedMemoryResource``), after :func:`check_managed_request`."""
    import cupy
    import rmm

    nbytes = int(np.prod(shape)) * np.dtype(dtype).itemsize
    free, total = rmm.mr.available_device_memory()
    check_managed_request(nbytes, free, total, held=held_beyond_free())
    buffer = rmm.DeviceBuffer(size=nbytes, mr=ledger(next(iter(_LEDGER), "cudaMallocManaged")))
    if not _DRIVER_COUNTS_MANAGED and nbytes >= LEARNING_BYTES:
        _DRIVER_COUNTS_MANAGED.append(driver_counts_managed(free, rmm.mr.available_device_memory()[0], nbytes))
    memory = cupy.cuda.UnownedMemory(buffer.ptr, nbytes, buffer)
    return cupy.ndarray(shape, dtype=dtype, memptr=cupy.cuda.MemoryPointer(memory, 0))


def host_view(array) -> np.ndarray:
    """A NumPy array over the same managed bytes as the CuPy ``array``: the CPU reads and writes them in place.

    The view keeps ``array`` (and so its managed buffer) alive for as long as the view exists.
    """

    if not array.flags.c_contiguous:
        raise ValueError("host_view needs a contiguous managed array")
    raw = (ctypes.c_byte * array.nbytes).from_address(array.data.ptr)
    raw.owner = array  # without it, deleting the CuPy array would free the memory under the view
    return np.frombuffer(raw, dtype=array.dtype).reshape(array.shape)


def _runtime():
    from cuda.bindings import runtime

    return runtime


def _check(result, what: str) -> None:
    runtime = _runtime()
    error = result[0] if isinstance(result, tuple) else result
    if error != runtime.cudaError_t.cudaSuccess:
        raise RuntimeError(f"{what} failed: {error}")


def _location(device: int | None):
    """A ``cudaMemLocation``: the GPU ``device``, or host memory for None."""
    runtime = _runtime()
    location = runtime.cudaMemLocation()
    if device is None:
        location.type = runtime.cudaMemLocationType.cudaMemLocationTypeHost
        location.id = 0
    else:
        location.type = runtime.cudaMemLocationType.cudaMemLocationTypeDevice
        location.id = device
    return location


def prefetch(array, device: int | None = 0, stream: int = 0) -> None:
    """Migrate the pages of a managed ``array`` to GPU ``device`` (None: to host memory), ordered on ``stream``."""
    runtime = _runtime()
    _check(
        runtime.cudaMemPrefetchAsync(array.data.ptr, array.nbytes, _location(device), 0, stream),
        "cudaMemPrefetchAsync",
    )


ADVICE = {
    "read mostly": "cudaMemAdviseSetReadMostly",
    "preferred location": "cudaMemAdviseSetPreferredLocation",
    "accessed by": "cudaMemAdviseSetAccessedBy",
}


def advise(array, advice: str, device: int | None = 0) -> None:
    """Give the driver a hint about a managed ``array`` (one of :data:`ADVICE`) for ``device`` (None: the host)."""
    if advice not in ADVICE:
        raise ValueError(f"unknown advice {advice!r}; choose one of {', '.join(ADVICE)}")
    runtime = _runtime()
    value = getattr(runtime.cudaMemoryAdvise, ADVICE[advice])
    _check(runtime.cudaMemAdvise(array.data.ptr, array.nbytes, value, _location(device)), "cudaMemAdvise")


def time_after_host_touch(array, work, *, repeat: int = 5, label: str = "work"):
    """CUDA-event times of ``work()`` right after the CPU wrote every byte of the managed ``array``.

    The write puts the array's pages in host memory, as data that was loaded or prepared on the CPU would be;
    ``work`` then runs against that state: a GPU pass that faults the pages in, a prefetch, a copy. The write is
    :func:`support.bench.time_cuda`'s untimed ``setup``; one warm-up, then ``repeat`` timed runs.
    """

    host = host_view(array)
    writes = iter(range(1, 1 << 30))

    def write_on_host() -> None:
        host[...] = next(writes)

    return time_cuda(work, label=label, warmup=1, repeat=repeat, setup=write_on_host)


def first_pass_ways(nbytes: int) -> dict[str, object]:
    """The ways the chapter gets data first touched on the CPU through one GPU pass (a sum), by name.

    Each way has its own managed array of ``nbytes`` (advice sticks to an allocation, so advised arrays are
    separate); the explicit copy reads a pinned host buffer into an ordinary device array. Returns name →
    (managed array to touch on the host, work).
    """
    import cupy
    import cupyx

    count = nbytes // 4
    faults, prefetched, read_mostly, remote = (managed_array((count,)) for _ in range(4))
    advise(read_mostly, "read mostly")
    advise(remote, "preferred location", None)
    advise(remote, "accessed by", 0)
    pinned = cupyx.empty_pinned((count,), dtype=np.float32)
    pinned[...] = 1.0
    device = cupy.empty((count,), dtype=np.float32)

    def prefetch_then_pass():
        prefetch(prefetched)
        return float(prefetched.sum())

    def copy_then_pass():
        device.set(pinned)
        return float(device.sum())

    return {
        "page faults on first GPU touch": (faults, lambda: float(faults.sum())),
        "prefetch, then the pass": (prefetched, prefetch_then_pass),
        "prefetch alone": (prefetched, lambda: prefetch(prefetched)),
        "explicit copy from pinned memory, then the pass": (faults, copy_then_pass),
        "advice: read mostly, page faults": (read_mostly, lambda: float(read_mostly.sum())),
        "advice: stays on the host, GPU reads it there": (remote, lambda: float(remote.sum())),
    }


#: The ways a managed array can be given to the GPU for more than one pass: advice (set once, sticking to the
#: allocation) and whether the first pass is preceded by a prefetch.
REUSE_WAYS = {
    "page faults": ((), False),
    "prefetch": ((), True),
    "advice: read mostly": ((("read mostly", 0),), False),
    "advice: read mostly, and prefetch": ((("read mostly", 0),), True),
    "advice: stays on the host, GPU reads it there": ((("preferred location", None), ("accessed by", 0)), False),
    "advice: prefers the GPU, and prefetch": ((("preferred location", 0),), True),
}


def time_two_passes(nbytes: int, way: str, *, repeat: int = 5) -> tuple[object, object]:
    """CUDA-event times of a first and a second GPU pass (a sum) over ``nbytes`` of managed memory that the CPU has
    just written, given to the GPU ``way`` (one of :data:`REUSE_WAYS`). The second pass is timed after an untimed
    first one, so it sees where the first left the pages. One array at a time: it is freed before returning."""
    if way not in REUSE_WAYS:
        raise ValueError(f"unknown way {way!r}; choose one of {', '.join(REUSE_WAYS)}")

    advice, prefetched = REUSE_WAYS[way]
    array = managed_array((nbytes // 4,))
    for name, device in advice:
        advise(array, name, device)
    host = host_view(array)
    writes = iter(range(1, 1 << 30))

    def write_on_host() -> None:
        host[...] = next(writes)

    def first_pass() -> float:
        if prefetched:
            prefetch(array)
        return float(array.sum())

    def write_then_first_pass() -> None:
        write_on_host()
        first_pass()

    first = time_cuda(first_pass, label=f"{way}, first pass", warmup=1, repeat=repeat, setup=write_on_host)
    second = time_cuda(
        lambda: float(array.sum()), label=f"{way}, second pass", warmup=1, repeat=repeat, setup=write_then_first_pass
    )
    return first, second  # the array is freed with this function's closures
