"""What the book's memory guards decide on this GPU, as this process sees it: the check for readers sharing a GPU.

Under an MPS memory limit (``python -m booktools.mps --limit 16G -- ...``) a process sees the limit, not the
card: free memory is what is left of its share. The guards read free memory the same way, so they must refuse
or adapt to the share. ``python -m support.memory.guards`` prints, for this process:

- the free and total memory it sees (RMM's ``available_device_memory``, the same call the guards use);
- each JAX setting of chapter 4: allowed, or refused with the guard's reason (:func:`jax_probe.check_room_for_jax`);
- a managed allocation half again as large as the free memory: refused (:func:`managed.check_managed_request`);
- a managed allocation well inside the free memory, prefetched to the GPU: the free memory this process sees drops
  by its size, so managed memory counts against the process's share like any other allocation.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

from support.memory import jax_probe, managed
from support.memory.pools import MemorySetupError
from support.units import GIB, describe_bytes


def decisions(free: int, total: int, environ: Mapping[str, str] | None = None) -> list[tuple[str, str]]:
    """The guards' answers for a process that sees ``free`` of ``total`` bytes: (question, answer) pairs.

    >>> dict(decisions(free=15 * GIB, total=16 * GIB, environ={}))["a managed allocation of 22.50 GiB"][:7]
    'refused'
    """
    environ = {} if environ is None else environ
    answers = []
    for setting in jax_probe.SETTINGS:
        try:
            jax_probe.check_room_for_jax(setting, free, total, environ=environ)
            answers.append((f"JAX with {setting!r}", "allowed"))
        except MemorySetupError as error:
            answers.append((f"JAX with {setting!r}", f"refused: {error}"))
    too_much = free + free // 2  # asked of the guard only: it refuses before anything is allocated
    try:
        managed.check_managed_request(too_much, free, total, environ)
        answers.append((f"a managed allocation of {describe_bytes(too_much)}", "allowed"))
    except managed.OversubscriptionRefused as error:
        answers.append((f"a managed allocation of {describe_bytes(too_much)}", f"refused: {error}"))
    return answers


def managed_within_share(nbytes: int) -> tuple[int, int]:
    """Allocate ``nbytes`` of managed memory (through the guard), prefetch it to the GPU, and return the free
    memory this process saw before and after. GPU only."""
    import cupy
    import rmm

    before = rmm.mr.available_device_memory()[0]
    array = managed.managed_array((nbytes // 4,), dtype="float32")
    managed.prefetch(array)
    array.fill(1.0)
    cupy.cuda.runtime.deviceSynchronize()
    after = rmm.mr.available_device_memory()[0]
    del array
    return before, after


def main(argv: list[str] | None = None) -> int:
    import rmm

    free, total = rmm.mr.available_device_memory()
    print(f"this process sees {describe_bytes(free)} free of {describe_bytes(total)}")
    for question, answer in decisions(free, total):
        print(f"- {question}: {answer}")
    size = min(4 * GIB, free // 4)  # well inside the share: never ask for more managed memory than is free
    before, after = managed_within_share(size)
    print(
        f"- a managed allocation of {describe_bytes(size)}, prefetched to the GPU: free memory seen by this process "
        f"went from {describe_bytes(before)} to {describe_bytes(after)} ({describe_bytes(before - after)} less)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
