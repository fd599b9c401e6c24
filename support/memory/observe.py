"""Watching GPU memory: the peak of a piece of work, a log of every allocation, and a leak check.

All three read what RMM sees, so they need :func:`support.memory.use_one_pool` (which routes every framework's
allocations through RMM and counts them) before the work runs.

- :func:`memory_scope` reports the peak and what stays allocated, from RMM's statistics.
- :func:`allocation_log` writes every allocation and free to a CSV file (RMM's ``LoggingResourceAdaptor``);
  :func:`read_allocation_log` turns it into memory in use over time.
- :func:`no_leak` checks that a block gives back all it allocated.
"""

from __future__ import annotations

import contextlib
import gc
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from support.memory.pools import current_bytes, using_resource
from support.units import describe_bytes


@dataclass
class MemoryUse:
    """Allocations of one scope: the peak above what was held when it began, and what was held at its end."""

    peak_bytes: int = 0
    held_after: int = 0


@contextlib.contextmanager
def memory_scope() -> Iterator[MemoryUse]:
    """Count the RMM allocations of a block; yields a :class:`MemoryUse` filled in when the block ends.

    Without RMM statistics (no :func:`use_one_pool`), the numbers stay 0.
    """
    use = MemoryUse()
    statistics = sys.modules.get("rmm.statistics")
    if statistics is None and "rmm" in sys.modules:
        import rmm.statistics as statistics
    pushed = statistics is not None and statistics.push_statistics() is not None
    try:
        yield use
    finally:
        if pushed:
            scope = statistics.pop_statistics()
            use.peak_bytes = max(0, int(scope.peak_bytes))
            use.held_after = int(statistics.get_statistics().current_bytes)


class StagePeaks:
    """Peak memory per named stage: pass it as ``stage`` to work that marks its stages with ``with stage(name):``."""

    def __init__(self):
        self.uses: dict[str, MemoryUse] = {}

    @contextlib.contextmanager
    def __call__(self, name: str) -> Iterator[MemoryUse]:
        with memory_scope() as use:
            yield use
        self.uses[name] = use

    def rows(self) -> list[dict[str, object]]:
        return [
            {
                "stage": name,
                "peak allocated": describe_bytes(use.peak_bytes),
                "held after": describe_bytes(use.held_after),
            }
            for name, use in self.uses.items()
        ]


class MemoryLeakError(AssertionError):
    """A block left GPU memory allocated that it should have given back."""


def leak_message(before: int, after: int, tolerance: int = 0) -> str | None:
    """Why ``after`` bytes allocated is a leak against ``before``, or None when it is within ``tolerance``.

    >>> leak_message(100, 100) is None
    True
    >>> leak_message(0, 3 * 2**20)  # doctest: +ELLIPSIS
    '3.00 MiB still allocated after the block ...'
    """
    if after - before <= tolerance:
        return None
    return (
        f"{describe_bytes(after - before)} still allocated after the block (it began at {describe_bytes(before)}, "
        f"ended at {describe_bytes(after)}): something still refers to GPU data made inside it; `del` it or "
        "let it go out of scope"
    )


@contextlib.contextmanager
def no_leak(tolerance: int = 0) -> Iterator[None]:
    """Raise :class:`MemoryLeakError` when the block ends with more RMM memory allocated than it began with.

    Garbage is collected first, so only memory something still refers to counts.
    """

    gc.collect()
    before = current_bytes()
    yield
    gc.collect()
    problem = leak_message(before, current_bytes(), tolerance)
    if problem:
        raise MemoryLeakError(problem)


@contextlib.contextmanager
def allocation_log(path: str | Path) -> Iterator[Path]:
    """Log every RMM allocation and free of the block to a CSV file; yields the file's actual path.

    RMM adds the device to the name (``run.csv`` becomes ``run.dev0.csv``); the yielded path is the real one.
    Buffers allocated inside are logged when freed too, even after the block ends.
    """
    import rmm

    logged = rmm.mr.LoggingResourceAdaptor(rmm.mr.get_current_device_resource(), log_file_name=str(path))
    try:
        with using_resource(logged):
            yield Path(logged.get_file_name())
    finally:
        logged.flush()


def _seconds(stamp: str) -> float:
    """A log time stamp in seconds: seconds (``1634567890.123456``), ``HH:MM:SS.micro`` or ``HH:MM:SS:micro``."""
    parts = stamp.strip().split(":")
    if len(parts) == 1:
        return float(parts[0])
    if len(parts) == 3:
        return int(parts[0]) * 3600 + int(parts[1]) * 60 + float(parts[2])
    if len(parts) == 4:
        hours, minutes, seconds, micro = (int(p) for p in parts)
        return hours * 3600 + minutes * 60 + seconds + micro / 1e6
    raise ValueError(f"cannot read the time stamp {stamp!r} of an RMM allocation log")


def read_allocation_log(path: str | Path):
    """Memory in use over time from an RMM allocation log, as a pandas DataFrame.

    Columns: ``seconds`` (from the first event), ``action``, ``size``, ``bytes_in_use`` (allocated minus freed,
    counted from the start of the log). Failed allocations are kept with a change of 0.
    """
    import pandas as pd  # noqa: PLC0415  # pandas is not a base dependency (pyproject), numpy is

    log = pd.read_csv(path, dtype={"Time": str})
    missing = {"Time", "Action", "Size"} - set(log.columns)
    if missing:
        raise ValueError(f"{path} is not an RMM allocation log: it lacks the columns {sorted(missing)}")
    if log.empty:
        return pd.DataFrame({"seconds": [], "action": [], "size": [], "bytes_in_use": []})
    action = log["Action"].str.strip()
    known = action.isin(["allocate", "free", "deallocate"]) | action.str.contains("failure")
    if not known.all():
        raise ValueError(f"{path}: unknown actions {sorted(set(action[~known]))}")
    sign = action.map(lambda a: 1 if a == "allocate" else (-1 if a in ("free", "deallocate") else 0))
    seconds = log["Time"].map(_seconds)
    seconds = seconds + 86400 * (seconds.diff() < -43200).cumsum()  # a log that runs past midnight
    return pd.DataFrame(
        {
            "seconds": seconds - seconds.iloc[0],
            "action": action,
            "size": log["Size"].astype("int64"),
            "bytes_in_use": (sign * log["Size"].astype("int64")).cumsum(),
        }
    )
