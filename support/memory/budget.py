"""Work larger than a device-memory budget: fail clearly, spill, use managed memory, or go in chunks.

A *budget* stands for a smaller GPU: RMM's ``LimitingResourceAdaptor`` caps every allocation of the process at
that many bytes. Each mode runs in a fresh Python process, because cuDF's spilling and PyTorch's allocator are
set once per process (``python -m support.memory.budget MODE --budget-bytes N``):

- ``pool``: a plain RMM pool under the budget, the cuDF workload of chapter 4 as it is;
- ``spill``: the same, with cuDF's spilling on (the ``spill`` option; cuDF then wraps the current resource in a
  ``FailureCallbackResourceAdaptor``, and when an allocation fails it moves spillable buffers to host memory and
  tries again); the run reports cuDF's spill statistics (``spill_stats=1``);
- ``chunked``: the same budget and pool, the workload a slice of the orders at a time;
- ``managed``, ``managed pool`` and ``managed pool + prefetch``: managed memory from the process's ledger
  (:func:`support.memory.managed.ledger`, which refuses more than the free memory) instead of the budget, bare,
  under an RMM pool, and under a pool that prefetches every allocation to the GPU (``PrefetchResourceAdaptor``,
  what cudf.pandas uses by default); ``managed async``: CUDA 13's pool of managed memory
  (``CudaAsyncManagedMemoryResource``, experimental in RMM 26.10), from a ledger of that kind;
- ``torch pool``, ``torch managed``, ``torch managed pool`` and ``torch managed pool + prefetch``: one PyTorch
  training step whose batch needs more than the budget, with PyTorch allocating through RMM: from a device pool
  under the budget, from bare managed memory, from a pool over managed memory, or from such a pool that also
  prefetches every allocation, so that the pool's share and the prefetch's share can be told apart.

A budget of 0 means no budget: the same resource without the cap (the reference each mode is compared with).
Managed memory is never bound by the budget: that is its point, a GPU whose memory is too small borrows host
memory page by page. On a GPU really that small the driver would evict pages to the host and fault them back;
this chapter runs on a shared GPU and never asks for more managed memory than is free, so nothing is evicted and
the time measured is managed memory's own cost, not the cost of eviction.

Times are medians of ``repeat`` runs after one warm-up (the wall clock, after waiting for the GPU).
"""

from __future__ import annotations

from dataclasses import dataclass

from support import fresh_process
from support.bench import format_seconds, time_wall
from support.memory import workload
from support.memory.managed import ledger
from support.memory.pools import summarize_error
from support.units import MIB, describe_bytes

MODES = (
    "pool",
    "spill",
    "chunked",
    "managed",
    "managed pool",
    "managed pool + prefetch",
    "managed async",
    "torch pool",
    "torch managed",
    "torch managed pool",
    "torch managed pool + prefetch",
)


@dataclass(frozen=True)
class BudgetRun:
    """How one mode fared: whether the work completed, in how long, its peak allocation, and its error."""

    mode: str
    budget_bytes: int
    completed: bool
    seconds: float
    peak_bytes: int
    error: str
    detail: str = ""
    spill: dict | None = None  # cuDF's spill statistics, for the spill mode

    @property
    def managed(self) -> bool:
        return "managed" in self.mode

    def row(self) -> dict[str, object]:
        if self.managed:
            shown = "none (managed)"
        else:
            shown = describe_bytes(self.budget_bytes) if self.budget_bytes else "none"
        return {
            "mode": self.mode,
            "budget": shown,
            "outcome": "completed" if self.completed else "out of memory",
            "time": format_seconds(self.seconds) if self.completed else "",
            "peak allocated": describe_bytes(self.peak_bytes),
            "detail": (self.error or self.detail)[:160],
        }


def _set_resource(mode: str, budget: int):
    """Make this process's RMM resource for ``mode``; returns the statistics adaptor on top."""
    import rmm

    if "managed" in mode:
        base = ledger("async" if mode.endswith("async") else "cudaMallocManaged")
        if mode not in ("torch managed", "managed", "managed async"):  # the bare resource, or a pool over it
            base = rmm.mr.PoolMemoryResource(base, initial_pool_size=256 * MIB)
        if mode.endswith("+ prefetch"):
            base = rmm.mr.PrefetchResourceAdaptor(base)
    else:
        base = rmm.mr.PoolMemoryResource(rmm.mr.CudaMemoryResource(), initial_pool_size=256 * MIB)
        if budget:
            base = rmm.mr.LimitingResourceAdaptor(base, allocation_limit=budget)
    counted = rmm.mr.StatisticsResourceAdaptor(base)
    rmm.mr.set_current_device_resource(counted)
    return counted


def _frames_work(mode: str, rows: int, chunks: int):
    import cudf

    if mode == "spill":
        cudf.set_option("spill", True)
        cudf.set_option("spill_stats", 1)
    tables = workload.make_tables(rows, seed=0)
    if mode == "chunked":
        return lambda: workload.revenue_by_region_chunked(tables, chunks)
    return lambda: workload.revenue_by_region(tables)


def _spill_statistics() -> dict:
    """cuDF's spill statistics as numbers: spills to host, bytes, and unspills back (a private API)."""
    try:
        from cudf.core.buffer.spill_manager import get_global_manager

        manager = get_global_manager()
    except Exception as exc:  # noqa: BLE001 - a private API: report what happened instead of failing the run
        return {"unavailable": f"{type(exc).__name__}: {exc}"}
    if manager is None:
        return {"unavailable": "spilling is off"}
    return spill_summary(manager.statistics.spill_totals)


def spill_summary(totals) -> dict:
    """``{"device → host": bytes, "spills": n, "host → device": bytes, "unspills": n}`` from cuDF's
    ``spill_totals`` (a mapping of (source, destination) to (bytes, seconds)); counts when cuDF has them.

    >>> spill_summary({("gpu", "cpu"): (300, 0.1), ("cpu", "gpu"): (100, 0.02)})
    {'device → host': 300, 'spill seconds': 0.1, 'host → device': 100, 'unspill seconds': 0.02}
    """
    out = {}
    for (source, destination), value in dict(totals).items():
        nbytes, seconds = value[0], value[1]
        if (source, destination) == ("gpu", "cpu"):
            out["device → host"], out["spill seconds"] = int(nbytes), float(seconds)
        elif (source, destination) == ("cpu", "gpu"):
            out["host → device"], out["unspill seconds"] = int(nbytes), float(seconds)
    return out


def _torch_work(batch: int, width: int):
    import torch
    from rmm.allocators.torch import rmm_torch_allocator

    torch.cuda.memory.change_current_allocator(rmm_torch_allocator)
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(width, width),
        torch.nn.ReLU(),
        torch.nn.Linear(width, width),
        torch.nn.ReLU(),
        torch.nn.Linear(width, 1),
    ).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    inputs = torch.randn(batch, width, device="cuda")
    targets = torch.randn(batch, 1, device="cuda")

    def step():
        optimizer.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(inputs), targets)
        loss.backward()
        optimizer.step()
        torch.cuda.synchronize()
        return float(loss)

    return step


def run(
    mode: str,
    budget: int,
    *,
    rows: int = 10_000_000,
    chunks: int = 16,
    batch: int = 32768,
    width: int = 4096,
    repeat: int = 3,
):
    """Run ``mode`` in this process (call it in a fresh one: it sets the process's allocators)."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; choose one of: {', '.join(MODES)}")
    import cupy

    counted = _set_resource(mode, budget)
    error, seconds = "", 0.0
    try:
        work = _torch_work(batch, width) if mode.startswith("torch") else _frames_work(mode, rows, chunks)

        # the warm-up pays for compiling and growing the pool
        device = cupy.cuda.Device()
        seconds = time_wall(work, label=mode, warmup=1, repeat=repeat, sync=device.synchronize).median
    except (MemoryError, RuntimeError) as exc:  # PyTorch reports a failed allocation as a RuntimeError
        error = f"{type(exc).__name__}: {summarize_error(str(exc))}"
    spill = _spill_statistics() if mode == "spill" else None
    peak = int(counted.allocation_counts.peak_bytes)
    shown_budget = 0 if "managed" in mode else budget
    return BudgetRun(mode, shown_budget, not error, seconds, peak, error, spill=spill)


def run_in_fresh_process(mode: str, budget: int, *, timeout: float = 600, **options) -> BudgetRun:
    """:func:`run` in a new Python process; ``options`` are ``rows``, ``chunks``, ``batch`` and ``width``."""

    found = fresh_process.call(
        "support.memory.budget:run",
        mode=mode,
        budget=budget,
        what=f"the budget run {mode!r}",
        timeout=timeout,
        **options,
    )
    return BudgetRun(**found)
