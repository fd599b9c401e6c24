"""Caps on GPU memory, and errors that say which cap a piece of work ran into.

A workshop GPU is shared: a cap keeps one participant's job from taking the memory of the others, and turns
"out of memory somewhere inside libcudf" into a message that names the cap and what was allocated when it hit.
:func:`allocation_limit` caps everything allocated through RMM inside a block (RMM's
``LimitingResourceAdaptor``); :func:`pool_with_maximum` runs a block in a pool that may not grow past a size.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from support.memory.pools import make_resource, summarize_error, using_resource
from support.units import describe_bytes


class MemoryLimitError(MemoryError):
    """Work asked for more GPU memory than a cap allows; the message names the cap and what was in use."""


def limit_message(what: str, cap: int, library_message: str) -> str:
    """The message of :class:`MemoryLimitError` (kept apart so the CPU tests can check it).

    The library's own detail is kept: at the moment of failure it knows what was allocated and what was asked
    for, which can no longer be read once the error has unwound the work.

    >>> limit_message("a limit", 2**20, "out_of_memory")  # doctest: +ELLIPSIS
    'the work needed more than a limit of 1.00 MiB: a request failed (out_of_memory); raise the cap, or ...'
    """

    return (
        f"the work needed more than {what} of {describe_bytes(cap)}: a request failed "
        f"({summarize_error(library_message)}); raise the cap, or make the work smaller (fewer rows at a time)"
    )


def _check_cap(cap: int) -> None:
    if cap <= 0:
        raise ValueError(f"a memory cap must be a positive number of bytes, not {cap}")


@contextlib.contextmanager
def _named_failures(what: str, cap: int) -> Iterator[None]:
    """Turn a library's out-of-memory error inside the block into a :class:`MemoryLimitError` naming the cap."""
    try:
        yield
    except MemoryLimitError:
        raise
    except MemoryError as exc:
        raise MemoryLimitError(limit_message(what, cap, str(exc))) from exc


@contextlib.contextmanager
def allocation_limit(cap: int) -> Iterator[object]:
    """Cap what the block allocates through RMM at ``cap`` bytes (on top of the current resource).

    Yields the ``LimitingResourceAdaptor``; an allocation beyond the cap raises :class:`MemoryLimitError`.
    """
    _check_cap(cap)
    import rmm

    limited = rmm.mr.LimitingResourceAdaptor(rmm.mr.get_current_device_resource(), allocation_limit=cap)
    with using_resource(limited), _named_failures("a limit", cap):
        yield limited


@contextlib.contextmanager
def pool_with_maximum(initial: int, maximum: int) -> Iterator[object]:
    """Run the block in a fresh RMM pool that starts at ``initial`` bytes and may not grow past ``maximum``.

    Yields the pool; when the work needs more, raises :class:`MemoryLimitError` with the pool's size.
    """
    _check_cap(initial)
    _check_cap(maximum)
    if initial > maximum:
        raise ValueError(
            f"a pool cannot start larger than its maximum: {describe_bytes(initial)} > {describe_bytes(maximum)}"
        )

    pool = make_resource("pool", pool_size=initial, maximum_size=maximum)
    with using_resource(pool), _named_failures("a pool with a maximum", maximum):
        yield pool
