"""Dask's task stream (``distributed.get_task_stream``'s records) read as who computed what, and when.

- :func:`computations`: (worker, function, start, stop) of every computation;
- :func:`worker_load`: each worker's tasks, their median duration, its busy span and its occupancy (:func:`covered`);
- :func:`task_seconds`: how long each task of one function took, whichever worker ran it;
- :func:`busy_span`: from the first start to the last end, over all workers, and :func:`busy_window`, when;
- :func:`task_name`: the function part of a Dask key.
"""

from __future__ import annotations

import re

import pandas as pd


def computations(records) -> list[tuple[str, str, float, float]]:
    """(worker, function, start, stop) of every computation in a task stream's records (transfers left out)."""
    if not records:
        raise ValueError("the task stream is empty: record it with `with get_task_stream(client) as ts:`")
    found = [
        (record["worker"], task_name(record["key"]), span["start"], span["stop"])
        for record in records
        for span in record.get("startstops", ())
        if span.get("action") == "compute"
    ]
    if not found:
        raise ValueError("the task stream holds no computation")
    return found


def _of_function(records, function: str | None):
    found = pd.DataFrame(computations(records), columns=["worker", "function", "start", "stop"])
    if function is not None:
        if function not in set(found["function"]):
            raise ValueError(f"the task stream ran no {function!r}: it ran {sorted(set(found['function']))}")
        found = found[found["function"] == function]
    return found.assign(seconds=found["stop"] - found["start"])


def covered(intervals) -> float:
    """How long at least one of ``intervals`` (``(start, stop)`` pairs) was running: overlapping ones, such as two
    tasks on the two threads of one worker, count once.

    >>> covered([(0.0, 2.0), (1.0, 3.0), (5.0, 6.0)]), covered([])
    (4.0, 0.0)
    """
    total, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop > end:
            total += stop - max(start, end)
            end = stop
    return total


def worker_load(records, *, function: str | None = None):
    """Each worker's share of a task stream: how many tasks it computed, their median duration, the time from its
    first start to its last end (``busy``), and its ``occupancy``: the share of that span in which at least one of
    its tasks ran (:func:`covered`; 1 when one task followed another without a gap; what is missing is the time
    the worker waited between tasks, for the scheduler to hand it the next one or for the data it needed). A
    pandas DataFrame, workers in address order as "worker 0", "worker 1"…. ``function`` (a task's function name,
    such as ``"score_recording"``) keeps only that function's tasks."""
    found = _of_function(records, function)
    rows = []
    for k, (_, mine) in enumerate(found.groupby("worker", sort=True)):
        span = mine["stop"].max() - mine["start"].min()
        rows.append(
            {
                "worker": f"worker {k}",
                "tasks": len(mine),
                "median task": mine["seconds"].median(),
                "busy": span,
                "occupancy": covered(zip(mine["start"], mine["stop"], strict=True)) / span
                if span > 0
                else float("nan"),
            }
        )
    return pd.DataFrame(rows).set_index("worker")


def task_seconds(records, *, function: str) -> tuple[float, ...]:
    """How long each computation of ``function`` took in a task stream's records (seconds, in the order of the
    records), whichever worker ran it: the durations a median over several runs pools."""
    return tuple(float(x) for x in _of_function(records, function)["seconds"])


def busy_window(records) -> tuple[float, float]:
    """When the first computation in a task stream's records started and the last ended (:func:`time.time`
    seconds, the workers' clock: on one machine, the notebook's too)."""
    found = computations(records)
    return min(start for _, _, start, _ in found), max(stop for *_, stop in found)


def busy_span(records) -> float:
    """Seconds from the start of the first computation to the end of the last in a task stream's records."""
    start, stop = busy_window(records)
    return stop - start


_KEY_TOKEN = re.compile(r"-(?:[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}|[0-9a-f]+)(?:-\d+)?$")


def task_name(key) -> str:
    """The function part of a Dask key, without its token and index: ``"beat_table-3f2a…-0"`` → ``beat_table``."""
    text = key[0] if isinstance(key, tuple) else str(key)
    return _KEY_TOKEN.sub("", text) or text
