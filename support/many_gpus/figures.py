"""The chapter's figures: the cluster drawn, and the task stream drawn as bars per worker."""

from __future__ import annotations

from support.figures import arrow, box, canvas
from support.many_gpus.cluster import Placement
from support.many_gpus.task_stream import computations


def cluster_diagram(placement: Placement | None = None):
    """Chapter 7's cluster as ``placement`` builds it (by default two workers, one per GPU): the client hands tasks
    to the scheduler, which sends each to the worker that holds its recording (reads are pinned, work stealing is
    off); each worker is a process with its RMM pool on its GPU (shared where ``workers_per_gpu`` is above 1); the
    ranking's shuffle moves rows between workers."""
    placement = placement or Placement(2)
    workers = placement.workers
    figure, axes = canvas(26, 11, size=(11, 4.4))
    box(axes, 0.3, 8.4, 5.6, 2.0, "client\n(this notebook)", "#f3f3f3", size=9)
    box(axes, 8.6, 8.4, 6.0, 2.0, "scheduler\nwho does which task", "#f3f3f3", size=9)
    arrow(axes, (5.9, 9.4), (8.6, 9.4), "tasks", size=8)
    width = 10.8
    for k in range(workers):
        gpu = k // placement.workers_per_gpu
        shared = f", shared by {placement.workers_per_gpu} workers" if placement.workers_per_gpu > 1 else ""
        x = 0.3 + k * (width + 3.6)
        box(axes, x, 0.4, width, 5.8, "", "#e8eef7")
        axes.text(x + 0.3, 5.7, f"worker {k}: one process, CUDA_VISIBLE_DEVICES={gpu},…", fontsize=8.5, va="top")
        box(axes, x + 0.4, 2.9, 4.6, 2.0, "beat_table\nrecording after\nrecording", "white", size=8)
        label = f"GPU {gpu}{shared}\nits own RMM pool:\ncuDF, CuPy, PyTorch"
        box(axes, x + 5.8, 2.9, 4.6, 2.0, label, "#dfeedd", size=7 if shared else 8)
        arrow(axes, (x + 5.0, 3.9), (x + 5.8, 3.9), color="#55a868", offset=(0, 0.15))
        box(axes, x + 0.4, 0.8, 10.0, 1.4, "its beat tables stay here (futures)", "white", size=8)
        arrow(axes, (11.6, 8.4), (x + width / 2, 6.2), color="#4c72b0")
    if workers > 1:
        arrow(axes, (0.3 + width, 1.5), (0.3 + width + 3.6, 1.5), "shuffle", color="#c44e52", offset=(-0.4, 0.25))
    note = "each worker reads its share of the recordings;\na recording's tasks run where it was read"
    axes.text(16.2, 9.1, note, fontsize=8.5)
    return figure


def task_stream_figure(records, *, title: str = "What each worker did"):
    """Draw the task stream (``distributed.get_task_stream``'s records): one row per worker, one bar per task
    from its start to its end, coloured by the task's function; returns the matplotlib Figure."""
    import matplotlib.pyplot as plt

    bars = computations(records)
    origin = min(start for _, _, start, _ in bars)
    workers = sorted({worker for worker, *_ in bars})
    names = sorted({name for _, name, *_ in bars})
    colours = {name: plt.get_cmap("tab10")(k % 10) for k, name in enumerate(names)}
    figure, axes = plt.subplots(figsize=(8.8, 0.6 + 0.7 * len(workers)), layout="constrained")
    for worker, name, start, stop in bars:
        axes.barh(
            workers.index(worker),
            stop - start,
            left=start - origin,
            color=colours[name],
            height=0.6,
            edgecolor="white",
            linewidth=0.8,
        )
    axes.set_yticks(range(len(workers)), [f"worker {k}" for k in range(len(workers))])
    axes.invert_yaxis()
    axes.set_xlabel("seconds since the first task started")
    axes.set_title(title)
    handles = [plt.Rectangle((0, 0), 1, 1, color=colours[name]) for name in names]
    axes.legend(handles, names, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    return figure
