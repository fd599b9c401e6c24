"""Dask's task stream (``distributed.get_task_stream``'s records) read as who computed what, and when.

- :func:`computations`: (worker, function, start, stop) of every computation;
- :func:`worker_load`: each worker's tasks, their median duration and its busy span;
- :func:`busy_span`: from the first start to the last end, over all workers;
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


def worker_load(records, *, function: str | None = None):
    """Each worker's share of a task stream: how many tasks it computed, their median duration, and the time from
    its first start to its last end (a pandas DataFrame, workers in address order as "worker 0", "worker 1"…).
    ``function`` (a task's function name, such as ``"score_recording"``) keeps only that function's tasks."""
    found = pd.DataFrame(computations(records), columns=["worker", "function", "start", "stop"])
    if function is not None:
        if function not in set(found["function"]):
            raise ValueError(f"the task stream ran no {function!r}: it ran {sorted(set(found['function']))}")
        found = found[found["function"] == function]
    found["seconds"] = found["stop"] - found["start"]
    rows = []
    for k, (_, mine) in enumerate(found.groupby("worker", sort=True)):
        span = mine["stop"].max() - mine["start"].min()
        rows.append(
            {"worker": f"worker {k}", "tasks": len(mine), "median task": mine["seconds"].median(), "busy": span}
        )
    return pd.DataFrame(rows).set_index("worker")


def busy_span(records) -> float:
    """Seconds from the start of the first computation to the end of the last in a task stream's records."""
    found = computations(records)
    return max(stop for *_, stop in found) - min(start for _, _, start, _ in found)


_KEY_TOKEN = re.compile(r"-(?:[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}|[0-9a-f]+)(?:-\d+)?$")


def task_name(key) -> str:
    """The function part of a Dask key, without its token and index: ``"beat_table-3f2a…-0"`` → ``beat_table``."""
    text = key[0] if isinstance(key, tuple) else str(key)
    return _KEY_TOKEN.sub("", text) or text
