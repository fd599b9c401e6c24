"""Oversubscription on a GPU of your own: managed memory beyond what the GPU has left, page faults against
prefetching in chunks.

The book's runs never oversubscribe: its GPU host is shared, asking for more managed memory than is free can
stall every process on it, and an MPS client limit refuses such a request outright. This module is what a reader
runs on a GPU of their own, with ``GPU_INTEROP_ALLOW_OVERSUBSCRIPTION=1``:

1. :func:`plan` sizes the experiment from the free memory: a ``cudaMalloc`` **ballast** takes all but ``room``
   bytes, so the GPU looks as small as ``room``; then a managed array of ``over`` times ``room`` (more than is
   left), processed in chunks of a quarter of ``room``;
2. :func:`run` makes the ballast, writes the managed array on the CPU, and times two passes over it chunk by
   chunk: one that lets each chunk fault in, one that prefetches each chunk before summing it. Oversubscribed,
   pages of earlier chunks are evicted to make room for later ones.

:func:`run_if_opted_in` runs it only with the opt-in, and otherwise returns why it did not; the sizes and the
decision are tested on the CPU.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass

import numpy as np

from support.bench import time_wall
from support.memory import managed
from support.memory.managed import OPT_IN, opted_in
from support.units import GIB, MIB, describe_bytes


@dataclass(frozen=True)
class Plan:
    """The sizes of one oversubscription experiment, in bytes."""

    free: int  # free device memory before the ballast
    ballast: int  # taken with cudaMalloc, so that only `room` is left
    room: int  # what the GPU looks like it has
    managed: int  # the managed array: more than `room`
    chunk: int  # processed at a time

    def describe(self) -> str:
        return (
            f"ballast {describe_bytes(self.ballast)} of {describe_bytes(self.free)} free, leaving "
            f"{describe_bytes(self.room)}; managed array {describe_bytes(self.managed)} "
            f"({self.managed / self.room:.1f}× what is left), chunks of {describe_bytes(self.chunk)}"
        )


def plan(free: int, *, room: int = 4 * GIB, over: float = 1.5) -> Plan:
    """The experiment's sizes for a GPU with ``free`` bytes free: leave ``room``, ask for ``over`` × ``room``.

    >>> p = plan(70 * GIB)
    >>> p.ballast == 66 * GIB and p.managed == 6 * GIB and p.chunk == GIB
    True
    """
    if over <= 1:
        raise ValueError(f"oversubscription asks for more than is left: over must be above 1, not {over}")
    if room < 256 * MIB:
        raise ValueError(f"leave at least 256 MiB of room, not {describe_bytes(room)}")
    if free <= room:
        raise ValueError(
            f"the GPU has {describe_bytes(free)} free, no more than the {describe_bytes(room)} of room asked for: "
            "there is nothing for a ballast to take; ask for less room"
        )
    managed = int(room * over) // 4 * 4
    return Plan(free, free - room, room, managed, room // 4 // 4 * 4)


def skipped_reason(environ: Mapping[str, str] | None = None) -> str | None:
    """Why :func:`run` must not run here (None when it may): only with the opt-in, on a GPU of one's own."""

    if opted_in(environ):
        return None
    return (
        f"skipped: oversubscribing needs {OPT_IN}=1, set only on a GPU of your own (this run's GPU is shared, "
        "and an MPS client limit would refuse the request)"
    )


def run(experiment: Plan, *, repeat: int = 3) -> dict[str, float]:
    """Make the ballast, fill the managed array on the CPU, and time a pass of page faults and a pass of
    prefetched chunks over it (seconds, wall clock with a synchronize, median of ``repeat``)."""
    import cupy

    ballast = cupy.cuda.runtime.malloc(experiment.ballast)
    try:
        array = managed.managed_array((experiment.managed // 4,), dtype=np.float32)
        host = managed.host_view(array)
        step = experiment.chunk // 4

        def faulting() -> None:
            host[...] = 1.0
            for start in range(0, array.size, step):
                float(array[start : start + step].sum())

        def prefetching() -> None:
            host[...] = 1.0
            for start in range(0, array.size, step):
                part = array[start : start + step]
                managed.prefetch(part)
                float(part.sum())

        found = {
            "page faults, in chunks": time_wall(faulting, warmup=1, repeat=repeat).median,
            "prefetch each chunk, then sum it": time_wall(prefetching, warmup=1, repeat=repeat).median,
        }
        return found  # the managed array is freed with the closures, before the ballast
    finally:
        cupy.cuda.runtime.free(ballast)


def run_if_opted_in(environ: Mapping[str, str] | None = None, free: int | None = None) -> dict[str, object]:
    """The experiment's plan and times, or the plan and why it was skipped."""
    reason = skipped_reason(environ)
    if free is None:
        import rmm

        free, _ = rmm.mr.available_device_memory()
    experiment = plan(free)
    outcome: dict[str, object] = {"plan": experiment.describe(), **asdict(experiment)}
    if reason:
        return outcome | {"outcome": reason}
    return outcome | {"outcome": "ran"} | run(experiment)
