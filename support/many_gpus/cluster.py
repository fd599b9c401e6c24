"""The chapter's clusters: where each worker process runs, and on which GPU.

- :class:`Placement` is a cluster's shape (workers, and how many share each GPU); :data:`PLACEMENTS` are the
  chapter's three (one worker on one GPU, two on one, two on two);
- :func:`make_cluster` starts ``dask_cuda.LocalCUDACluster`` on a GPU machine (one worker per GPU, each with its
  own RMM pool that cuDF, CuPy and PyTorch share) or ``distributed.LocalCluster`` on the CPU, and with
  ``workers_per_gpu`` puts several workers on one GPU (:func:`share_each_worker_s_device`, their memory limits
  divided by :func:`shared_limits`);
- :func:`worker_devices` shows which GPU and which CPU cores each worker has (:func:`describe_cores`, read back by
  :func:`parse_cores`), and :func:`describe_start` checks a cluster just started against its placement and says
  it in one line;
- :func:`available_transports` says whether UCX can be tried here;
- :data:`MULTICAST_OFF` keeps NVLink multicast off in the processes the chapter starts with their own environment.
"""

from __future__ import annotations

import copy
import functools
import importlib.util
import logging
import os
from dataclasses import dataclass

import pandas as pd


@dataclass(frozen=True)
class Placement:
    """How many worker processes a cluster has, and how many of them share each GPU."""

    workers: int
    workers_per_gpu: int = 1

    def __post_init__(self):
        if self.workers < 1 or self.workers_per_gpu < 1 or self.workers % self.workers_per_gpu:
            raise ValueError(
                f"{self.workers} workers cannot be shared {self.workers_per_gpu} to a GPU: give a multiple of it"
            )

    @property
    def gpus(self) -> int:
        """The GPUs the workers run on."""
        return self.workers // self.workers_per_gpu

    @property
    def label(self) -> str:
        return f"{self.workers} worker{'s' * (self.workers > 1)}, {self.gpus} GPU{'s' * (self.gpus > 1)}"


#: The environment that keeps NVLink multicast off (NCCL's NVLS, PyTorch's symmetric memory, NVSHMEM) in a process
#: started with an environment of its own (``torchrun``'s ranks, the early-context scripts): a gather of a few rows
#: needs none of it, and on a host whose GPUs others share a program that uses it can take them out of service.
#: :func:`without_multicast` adds it to an environment, leaving any value the caller set.
MULTICAST_OFF = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def without_multicast(env: dict[str, str]) -> dict[str, str]:
    """``env`` with :data:`MULTICAST_OFF` added where it does not set those variables itself.

    >>> without_multicast({"NCCL_NVLS_ENABLE": "1"})["NCCL_NVLS_ENABLE"], without_multicast({})["NVSHMEM_DISABLE_NVLS"]
    ('1', '1')
    """
    return MULTICAST_OFF | dict(env)


#: The chapter's three clusters: one worker on one GPU; two on ONE GPU (the control: a second process, not a
#: second GPU); two on two GPUs. The speed-up of the second GPU is the second's time over the third's.
PLACEMENTS = (Placement(1), Placement(2, workers_per_gpu=2), Placement(2))


def shared_limits(workers: int, workers_per_gpu: int, kind: str = "gpu") -> dict[str, object]:
    """The memory limits of each of ``workers`` worker processes when ``workers_per_gpu`` share a GPU: the host
    memory divided among all workers (``memory_limit``, a share of the machine's), and on a GPU the spilling
    threshold (``device_memory_limit``, Dask-CUDA's default 0.8 of the GPU) and the RMM pool's ceiling
    (``rmm_maximum_pool_size``, 0.9 of the GPU) divided among the workers that share it: without them each copy
    would believe it may fill what one worker alone was given. Options for :func:`make_cluster`."""
    Placement(workers, workers_per_gpu)  # refuses what cannot be shared
    limits: dict[str, object] = {"memory_limit": 1 / workers}
    if kind == "gpu":
        limits |= {"device_memory_limit": 0.8 / workers_per_gpu, "rmm_maximum_pool_size": 0.9 / workers_per_gpu}
    return limits


def make_cluster(
    kind: str = "cpu",
    *,
    workers: int | None = None,
    workers_per_gpu: int = 1,
    rmm_pool_size: str | None = "4GB",
    work_stealing: bool = False,
    **options,
):
    """A local Dask cluster: ``"gpu"`` is ``dask_cuda.LocalCUDACluster`` (one worker per visible GPU, or on the
    first ``workers`` of them, each with an RMM pool of ``rmm_pool_size`` that cuDF, CuPy and PyTorch allocate from),
    ``"cpu"`` a ``distributed.LocalCluster`` of ``workers`` single-threaded processes. ``options`` go to the
    cluster as they are. Returns the cluster; ``distributed.Client(cluster)`` connects to it.

    ``workers_per_gpu`` above 1 puts that many worker processes on each GPU (:func:`share_each_worker_s_device`):
    ``workers=2, workers_per_gpu=2`` is two workers on one GPU, the control that tells a second process from a
    second GPU; their memory limits are divided among them (:func:`shared_limits`, unless ``options`` give
    them). On the CPU the same copies are made (it tests the mechanism; no device is shared).

    Work stealing (the scheduler moving a queued task, and the data it needs, to an idle worker) is off unless
    ``work_stealing``: here every task is placed where its recording lives, and moving a recording between GPUs
    costs more than scoring it."""
    import dask

    if workers_per_gpu > 1 and kind == "gpu" and workers is None:
        raise ValueError("give workers= with workers_per_gpu=: how many workers in all")
    placement = Placement(workers or 2, workers_per_gpu) if kind == "cpu" or workers else None
    if workers_per_gpu > 1 and kind in ("gpu", "cpu"):
        options = shared_limits(placement.workers, workers_per_gpu, kind) | options
    # Worker and scheduler log lines (a heartbeat missed while a cluster closes, a shuffle's progress) would land
    # in the notebook's output; a task's failure still reaches the client as its exception.
    options = {"silence_logs": logging.CRITICAL} | options
    if kind == "gpu":
        from dask_cuda import LocalCUDACluster

        if rmm_pool_size:
            options |= {"rmm_pool_size": rmm_pool_size, "rmm_allocator_external_lib_list": ["cupy", "torch"]}
        # fewer workers than GPUs: the first ``workers`` GPUs get one each, and every worker still sees all GPUs
        # (its own first), so a process on a smaller cluster runs in the same conditions as on a larger one
        start = functools.partial(LocalCUDACluster, n_workers=placement.gpus if placement else None, **options)
    elif kind == "cpu":
        from distributed import LocalCluster

        options = {"threads_per_worker": 1, "processes": True, "dashboard_address": None} | options
        start = functools.partial(LocalCluster, n_workers=placement.gpus, **options)
    else:
        raise ValueError(f"kind must be 'gpu' or 'cpu', not {kind!r}")
    settings = {
        "distributed.scheduler.work-stealing": work_stealing,
        # a task pinned to a worker that died (its nanny restarts it under a new address) fails after this
        # instead of waiting for ever
        "distributed.scheduler.no-workers-timeout": "120s",
    }
    with dask.config.set(settings):  # read when the scheduler starts
        cluster = start()
    if workers_per_gpu > 1:
        share_each_worker_s_device(cluster, workers_per_gpu)
    return cluster


def share_each_worker_s_device(cluster, workers_per_device: int) -> None:
    """Start ``workers_per_device - 1`` more workers beside each worker of ``cluster`` (a ``SpecCluster``: a
    ``LocalCUDACluster`` or a ``LocalCluster``), each a copy of its specification: the same environment, hence the
    same ``CUDA_VISIBLE_DEVICES`` and GPU, the same RMM pool size and plugins. Returns when all have arrived.

    Why not ``LocalCUDACluster(CUDA_VISIBLE_DEVICES="0,0")``: dask-cuda names each worker after its device
    (``new_worker_spec`` takes ``min(set(CUDA_VISIBLE_DEVICES) - set(worker_spec))``, 26.10), so with a repeated
    device the constructor raises "Can not scale beyond visible devices" before any worker starts. A
    ``SpecCluster`` starts every entry of its ``worker_spec`` that is not running when it is scaled to their number.

    Each copy keeps the first worker's limits and its CPU affinity (the cores Dask-CUDA pinned it to, near its
    GPU): :func:`make_cluster` divides the memory limits before the first worker starts (:func:`shared_limits`),
    and :func:`worker_devices` shows each worker's cores."""
    if workers_per_device < 1:
        raise ValueError(f"need at least one worker per device, not {workers_per_device}")
    for name, spec in list(cluster.worker_spec.items()):
        for k in range(1, workers_per_device):
            cluster.worker_spec[f"{name}-{k}"] = copy.deepcopy(spec)
    cluster.scale(len(cluster.worker_spec))
    cluster.wait_for_workers(len(cluster.worker_spec), timeout=120)


def available_transports(find_spec=None) -> list[str]:
    """The protocols this environment can give a cluster's workers: ``"tcp"`` always, ``"ucx"`` where the UCXX
    wheels (``ucxx`` and ``distributed_ucxx``) are installed. ``find_spec`` is ``importlib.util.find_spec``
    (replaceable in tests)."""
    find_spec = find_spec or importlib.util.find_spec
    return ["tcp"] + (["ucx"] if all(find_spec(name) is not None for name in ("ucxx", "distributed_ucxx")) else [])


def _device_of_this_worker() -> dict[str, object]:
    row: dict[str, object] = {
        "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES", "(not set)"),
        "CPU cores": describe_cores(os.sched_getaffinity(0)),
    }
    try:
        import rmm
        import torch
    except ImportError:
        return row | {"GPU": None, "memory resource": None}
    if not torch.cuda.is_available():
        return row | {"GPU": None, "memory resource": None}
    return row | {
        "GPU": torch.cuda.get_device_name(0),
        "memory resource": type(rmm.mr.get_current_device_resource()).__name__,
    }


def describe_cores(cores) -> str:
    """A set of CPU core numbers as ranges: ``{0, 1, 2, 3, 8}`` → ``"0-3,8"``."""
    spans: list[list[int]] = []
    for core in sorted(cores):
        if spans and core == spans[-1][1] + 1:
            spans[-1][1] = core
        else:
            spans.append([core, core])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in spans) or "(none)"


def parse_cores(text: str) -> set[int]:
    """The CPU core numbers that :func:`describe_cores` wrote as ranges: ``"0-3,8"`` → ``{0, 1, 2, 3, 8}``.

    >>> sorted(parse_cores("0-3,8,10-11")), parse_cores("(none)")
    ([0, 1, 2, 3, 8, 10, 11], set())
    """
    cores: set[int] = set()
    for part in text.split(","):
        if part in ("(none)", ""):
            continue
        first, _, last = part.partition("-")
        cores.update(range(int(first), int(last or first) + 1))
    return cores


def worker_devices(client):
    """One row per worker, by name: the GPUs it may see (``CUDA_VISIBLE_DEVICES``; the first is its own), the CPU
    cores it may run on (``os.sched_getaffinity``: Dask-CUDA sets each worker's affinity to the cores the machine
    reports near its GPU, all of them where it reports every core near every GPU, and a copy from
    :func:`share_each_worker_s_device` keeps its original's), the name of its GPU and its RMM memory resource (a
    pandas DataFrame)."""
    seen = client.run(_device_of_this_worker)
    names = {address: info["name"] for address, info in client.scheduler_info()["workers"].items()}
    rows = sorted(({"worker": names[address]} | row for address, row in seen.items()), key=lambda r: str(r["worker"]))
    return pd.DataFrame(rows).set_index("worker")


def describe_start(placement: Placement, devices) -> str:
    """One line on a cluster just started for ``placement``: the GPU of each worker (the first of its
    ``CUDA_VISIBLE_DEVICES``) and how many CPU cores it may run on, then how many cores are open to every worker;
    ``devices`` is :func:`worker_devices`'s table. Raises ``ValueError`` where the workers are not
    ``placement.workers`` on ``placement.gpus`` GPUs: a cluster that did not start as asked measures something else.

    >>> seen = pd.DataFrame({"CUDA_VISIBLE_DEVICES": ["0,1", "1,0"], "CPU cores": ["0-7", "4-11"]})
    >>> print(describe_start(Placement(2), seen))
    2 workers, 2 GPUs: a worker on GPU 0 may use 8 cores, a worker on GPU 1 may use 8 cores;
    4 cores open to every worker
    """
    first = devices["CUDA_VISIBLE_DEVICES"].str.split(",").str[0]
    if len(devices) != placement.workers or first.nunique() != placement.gpus:
        raise ValueError(
            f"{placement.label} was asked for, but the workers' first GPUs are {list(first)}: "
            "the cluster did not start as placed"
        )
    allowed = [parse_cores(cores) for cores in devices["CPU cores"]]
    each = ", ".join(
        f"a worker on GPU {gpu} may use {len(cores)} cores" for gpu, cores in zip(first, allowed, strict=True)
    )
    return f"{placement.label}: {each}; {len(set.intersection(*allowed))} cores open to every worker"
