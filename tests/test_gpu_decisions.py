"""The decision logic of support functions that need a GPU to run for real, checked here with fakes.

Each function below allocates, times or copies on the GPU in the chapters; what it *decides* (which resource
is current when, what counts as "landed in the pool", which copies the meter reports, when Numba's memory
manager is refused) does not need a GPU, and is what these tests pin down.
"""

from __future__ import annotations

import contextlib
import json
import sys
import tempfile
import types

import pytest

from support import bench, traffic
from support.memory import pools
from support.units import GIB, MIB


def test_time_under_resources_warms_each_resource_then_goes_round_them(monkeypatch):
    current = []  # the resource current at each call of the work
    made = []

    def fake_make(kind, *, pool_size):
        made.append((kind, pool_size))
        return f"resource:{kind}"

    class FakeUsing:
        def __init__(self, resource):
            self.resource = resource

        def __enter__(self):
            current.append(self.resource)

        def __exit__(self, *exc):
            current.append(None)

    seconds = {"resource:pool": 1.0, "resource:cudaMalloc": 3.0}

    def fake_time_cuda(work, *, warmup, repeat):
        assert (warmup, repeat) == (0, 1)  # one timed call per turn: the rounds interleave the resources
        work()
        return bench.Timing("one", (seconds[current[-1]],), "cuda-events")

    calls = []
    monkeypatch.setattr(pools, "make_resource", fake_make)
    monkeypatch.setattr(pools, "using_resource", FakeUsing)
    monkeypatch.setattr(bench, "time_cuda", fake_time_cuda)
    comparison = pools.time_under_resources(
        lambda: calls.append(current[-1]), ("cudaMalloc", "pool"), pool_size=GIB, repeat=3
    )
    assert made == [("cudaMalloc", GIB), ("pool", GIB)]
    # a warm-up under each resource first, then three rounds that alternate them
    assert calls == ["resource:cudaMalloc", "resource:pool"] + ["resource:cudaMalloc", "resource:pool"] * 3
    assert current[1::2] == [None] * (len(current) // 2)  # every block put the previous resource back
    assert comparison.ratio("pool") == pytest.approx(3.0)  # cudaMalloc is the baseline, the first kind


def test_time_under_resources_refuses_an_unknown_kind_before_timing_anything():
    with pytest.raises(ValueError, match="unknown resource kind 'arena'"):
        pools.time_under_resources(lambda: None, ("pool", "arena"))


def test_a_framework_lands_in_the_pool_only_if_the_pool_saw_its_bytes_arrive(monkeypatch):
    in_use = [0]

    def through_pool(nbytes):
        def allocate():
            in_use[0] += nbytes
            return nbytes

        return allocate

    allocations = {"cuDF": through_pool(8 * MIB), "CuPy": through_pool(8 * MIB), "PyTorch": lambda: object()}
    monkeypatch.setattr(pools, "_framework_allocations", lambda nbytes: allocations)
    monkeypatch.setattr(pools, "current_bytes", lambda: in_use[0])
    rows = pools.check_frameworks_share_pool(8 * MIB)
    landed = {row["framework"]: row["from the pool"] for row in rows}
    assert landed == {"cuDF": True, "CuPy": True, "PyTorch": False}  # PyTorch kept its own cache here
    assert rows[2]["pool saw"] == "0 B" and rows[0]["asked"] == "8.00 MiB"
    allocations["CuPy"] = through_pool(MIB)  # a partial arrival (e.g. a smaller buffer) does not count
    assert not pools.check_frameworks_share_pool(8 * MIB)[1]["from the pool"]


def fake_gpu_modules(monkeypatch, *, numba_manager_is_rmm: bool, free: int = 10 * GIB):
    """Stand-ins for rmm and numba.cuda, as much of them as use_one_pool touches; CuPy and PyTorch absent."""
    set_resources = []
    rmm = types.ModuleType("rmm")
    rmm.mr = types.SimpleNamespace(
        available_device_memory=lambda: (free, 16 * GIB),
        CudaMemoryResource=lambda: "cuda",
        PoolMemoryResource=lambda upstream, initial_pool_size, maximum_pool_size=None: (
            "pool",
            upstream,
            initial_pool_size,
        ),
        StatisticsResourceAdaptor=lambda resource: ("statistics", resource),
        set_current_device_resource=set_resources.append,
    )
    numba_allocators = types.ModuleType("rmm.allocators.numba")

    class RMMNumbaManager:
        pass

    class NumbaOwnManager:
        pass

    numba_allocators.RMMNumbaManager = RMMNumbaManager
    chosen = []
    manager = RMMNumbaManager() if numba_manager_is_rmm else NumbaOwnManager()
    cuda = types.SimpleNamespace(
        set_memory_manager=chosen.append,
        current_context=lambda: types.SimpleNamespace(memory_manager=manager),
    )
    numba = types.ModuleType("numba")
    numba.cuda = cuda
    for name, module in {
        "rmm": rmm,
        "rmm.allocators": types.ModuleType("rmm.allocators"),
        "rmm.allocators.numba": numba_allocators,
        "numba": numba,
        "numba.cuda": cuda,
        "cupy": None,  # None in sys.modules makes the import raise ImportError
        "torch": None,
    }.items():
        monkeypatch.setitem(sys.modules, name, module)
    monkeypatch.setattr(pools, "_active", None)
    return set_resources, chosen


def test_use_one_pool_routes_numba_to_rmm_and_counts_allocations(monkeypatch):
    set_resources, chosen = fake_gpu_modules(monkeypatch, numba_manager_is_rmm=True)
    report = pools.use_one_pool(2 * GIB)
    assert report.frameworks == ["cuDF", "Numba"]  # CuPy and PyTorch are not installed in this fake
    assert set_resources == [("statistics", ("pool", "cuda", 2 * GIB))]
    assert chosen == [sys.modules["rmm.allocators.numba"].RMMNumbaManager]
    assert pools.use_one_pool() is report  # the second call returns what the first set up


def test_use_one_pool_refuses_a_numba_context_made_before_it(monkeypatch):
    fake_gpu_modules(monkeypatch, numba_manager_is_rmm=False)
    with pytest.raises(pools.MemorySetupError, match=r"Numba created its CUDA context.*NumbaOwnManager"):
        pools.use_one_pool(GIB)
    assert pools._active is None  # nothing claims to be set up after a refusal


def test_use_one_pool_refuses_a_pool_larger_than_the_free_memory(monkeypatch):
    set_resources, _ = fake_gpu_modules(monkeypatch, numba_manager_is_rmm=True, free=GIB)
    with pytest.raises(pools.MemorySetupError, match="4.00 GiB does not fit: the GPU has 1.00 GiB free"):
        pools.use_one_pool(4 * GIB)
    assert set_resources == []  # refused before any resource changed


def test_traffic_self_check_reports_one_stage_per_library_and_one_without_copies(monkeypatch):
    """self_check's stages, with a meter that records which stages ran instead of profiling them."""
    seen = []

    class RecordingMeter(traffic.TrafficMeter):
        def stage(self, name):
            seen.append(name)
            self.stages[name] = traffic.Copies()
            return _nothing()

    @contextlib.contextmanager
    def _nothing():
        yield

    class Anything(types.ModuleType):
        """A module whose every attribute and call returns another Anything: stands in for the GPU libraries."""

        def __getattr__(self, name):
            return Anything(name)

        def __call__(self, *args, **kwargs):
            return Anything("result")

        def __float__(self):
            return 0.0

    for name in ("cudf", "cupy", "torch"):
        monkeypatch.setitem(sys.modules, name, Anything(name))
    numba = types.ModuleType("numba")
    numba.cuda = Anything("cuda")
    monkeypatch.setitem(sys.modules, "numba", numba)
    monkeypatch.setattr(traffic, "TrafficMeter", RecordingMeter)
    stages = traffic.self_check(4096)
    assert seen == list(stages)
    assert [name.split(":")[0] for name in seen] == ["CuPy", "PyTorch", "Numba", "cuDF", "nothing"]
    directions = [name.rsplit("(", 1)[1] for name in seen[:4]]
    assert directions == ["GPU → host)", "host → GPU)", "host → GPU)", "GPU → host)"]  # both ways are covered


def test_the_meter_counts_each_direction_and_refuses_an_unknown_one():
    events = [
        {"cat": "gpu_memcpy", "name": "Memcpy DtoH (Device -> Pinned)", "args": {"bytes": 10}},
        {"cat": "gpu_memcpy", "name": "Memcpy DtoD (Device -> Device)", "args": {"bytes": 5}},
        {"cat": "gpu_memset", "name": "Memset (Device)", "args": {"bytes": 99}},  # a memset moves nothing
    ]
    copies = traffic.copies_in_trace(events)
    assert (copies.device_to_host, copies.device_to_device, copies.across_host_link, copies.count) == (10, 5, 10, 2)
    with pytest.raises(ValueError, match="unknown direction"):
        traffic.copies_in_trace([{"cat": "gpu_memcpy", "name": "Memcpy ??", "args": {}}])


def test_trace_events_reads_what_the_recording_exports_and_leaves_no_file(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    class Recording:
        def export_chrome_trace(self, path):
            with open(path, "w") as trace:
                json.dump({"traceEvents": [{"cat": "kernel", "dur": 3.0}]}, trace)

    assert traffic.trace_events(Recording()) == [{"cat": "kernel", "dur": 3.0}]
    assert list(tmp_path.iterdir()) == []  # the temporary trace is gone
