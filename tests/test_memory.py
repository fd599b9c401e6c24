"""support.memory on the CPU: sizes, pool sizing, the churn benchmark's plan and loop, logs, caps, leaks,
the workload on pandas, JAX settings, figures. What needs RMM or a GPU runs in chapter 4."""

from __future__ import annotations

import functools
import os
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas
import pytest

from support import fresh_process, memory
from support.memory import (
    budget,
    churn,
    jax_probe,
    limits,
    managed,
    observe,
    oom,
    oversubscription,
    plots,
    pools,
    torch_setups,
    workload,
)
from support.units import GIB, KIB, MIB, describe_bytes, round_up


def test_sizes_read_like_people_write_them():
    assert describe_bytes(0) == "0 B" and describe_bytes(1536) == "1.50 KiB" and describe_bytes(GIB) == "1.00 GiB"
    assert round_up(1, 256) == 256 and round_up(512, 256) == 512 and round_up(0, 7) == 0
    with pytest.raises(ValueError, match="negative"):
        describe_bytes(-1)
    with pytest.raises(ValueError, match="granularity"):
        round_up(5, 0)


def test_pool_setup_refuses_what_would_not_work(monkeypatch):
    assert memory.describe_bytes(512) == "512 B" and memory.describe_bytes(3 * 2**20) == "3.00 MiB"
    with pytest.raises(memory.MemorySetupError, match="has 1.00 GiB free of 80.00 GiB"):
        memory.check_pool_size(2 * memory.GIB, memory.GIB, 80 * memory.GIB)
    with pytest.raises(memory.MemorySetupError, match="positive size"):
        memory.check_pool_size(0, memory.GIB, memory.GIB)
    monkeypatch.setattr(memory.pools, "torch_already_on_cuda", lambda: True)
    with pytest.raises(memory.MemorySetupError, match="before the first CUDA tensor"):
        memory.use_one_pool()
    earlier = memory.PoolReport(memory.GIB, ["cuDF"])
    monkeypatch.setattr(memory.pools, "_active", earlier)  # a second call returns what the first set up
    assert memory.use_one_pool() is earlier
    with memory.memory_scope() as use:  # without RMM statistics the numbers stay 0
        pass
    assert (use.peak_bytes, use.held_after) == (0, 0)


def test_pool_size_is_the_peak_plus_headroom_rounded_up():
    assert memory.suggest_pool_size(GIB, free=80 * GIB) == GIB + 256 * MIB
    assert memory.suggest_pool_size(GIB, free=80 * GIB, headroom=0) == GIB
    assert memory.suggest_pool_size(GIB + 1, free=80 * GIB, headroom=0) == GIB + 256 * MIB
    with pytest.raises(memory.MemorySetupError, match=r"needs 5.00 GiB, but the GPU has 4.00 GiB free"):
        memory.suggest_pool_size(4 * GIB, free=4 * GIB)
    with pytest.raises(ValueError, match="measure the work's peak first"):
        memory.suggest_pool_size(0, free=GIB)
    with pytest.raises(ValueError, match="cannot be negative"):
        memory.suggest_pool_size(GIB, free=GIB, headroom=-0.1)


def test_resources_and_caps_refuse_bad_arguments_before_touching_a_gpu():
    with pytest.raises(ValueError, match="unknown resource kind 'malloc'; choose one of cudaMalloc, pool"):
        memory.make_resource("malloc")
    with pytest.raises(ValueError, match="positive number of bytes"), memory.allocation_limit(0):
        pass
    with pytest.raises(ValueError, match="cannot start larger than its maximum"):
        with memory.pool_with_maximum(2 * GIB, GIB):
            pass


def test_limit_message_names_the_cap_what_was_in_use_and_the_fix():
    text = limits.limit_message("a limit", 256 * MIB, "std::bad_alloc: out_of_memory: Exceeded\nmore")
    assert text.startswith("the work needed more than a limit of 256.00 MiB: a request failed")
    assert "(std::bad_alloc: out_of_memory: Exceeded)" in text and "raise the cap" in text
    long = "std::bad_alloc: out_of_memory: RMM failure at:/rmm/cpp/src/mr/limiting.cpp:61: Exceeded memory limit 9; "
    long += "Allocated bytes 8; Requested bytes 4" + " " * 40
    assert "(Exceeded memory limit 9; Allocated bytes 8; Requested bytes 4)" in limits.limit_message("a cap", 9, long)
    assert issubclass(memory.MemoryLimitError, MemoryError)


def test_churn_plan_is_seeded_bounded_and_checked():
    plan = churn.ChurnPlan(steps=2000, live=16, seed=3)
    sizes, victims = plan.sizes(), plan.victims()
    assert len(sizes) == 2016 and len(victims) == 2000
    assert sizes == churn.ChurnPlan(steps=2000, live=16, seed=3).sizes() != churn.ChurnPlan(steps=2000, live=16).sizes()
    assert min(sizes) >= KIB and max(sizes) <= 4 * MIB and set(victims) <= set(range(16))
    small = churn.ChurnPlan(steps=2000, live=16, spread="log-uniform").sizes()
    assert min(small) >= KIB and max(small) <= 4 * MIB
    median = sorted(small)[len(small) // 2]
    assert 32 * KIB < median < 128 * KIB < sorted(sizes)[len(sizes) // 2]  # log-uniform: median near 64 KiB
    for bad in ({"steps": 0}, {"live": 0}, {"smallest": 0}, {"smallest": 8, "largest": 4}, {"spread": "normal"}):
        with pytest.raises(ValueError):
            churn.ChurnPlan(**bad)


def test_churn_frees_exactly_the_planned_buffer_and_allocates_the_planned_size():
    plan = churn.ChurnPlan(steps=500, live=8, seed=1)
    allocated, released = [], []

    def allocate(size):
        allocated.append(size)
        return len(allocated) - 1  # a handle: the allocation's number

    allocator = churn.Allocator(allocate=allocate, release=released.append)
    run = churn.Churn(allocator, plan)
    run.run()
    assert allocated == plan.sizes()
    live = list(range(plan.live))
    for step, victim in enumerate(plan.victims()):
        assert released[step] == live[victim]
        live[victim] = plan.live + step
    run.close()
    assert released[plan.steps :] == live and run.live == []


def test_a_busy_churn_queues_gpu_work_before_every_free_and_waits_at_the_end():
    plan = churn.ChurnPlan(steps=5, live=2, busy_us=100)
    events = []
    allocator = churn.Allocator(
        allocate=lambda size: events.append("allocate"), release=lambda h: events.append("free")
    )
    gpu_work = (lambda: events.append("queue"), lambda: events.append("wait"))
    churn.Churn(allocator, plan, gpu_work=gpu_work).run()
    steps = events[2:]  # after the two allocations of the working set
    assert steps == ["queue", "free", "allocate"] * 5 + ["wait"]
    with pytest.raises(ValueError, match="cannot be negative"):
        churn.ChurnPlan(busy_us=-1)


@pytest.mark.slow
def test_churn_measures_the_python_loop_here_and_in_a_fresh_process(tmp_path):
    plan = churn.ChurnPlan(steps=1000, live=8)
    here = churn.measure("python loop only", plan, repeat=3)
    assert here.steps == 1000 and len(here.samples) == 3 and 0 < here.seconds_per_step < 1e-4
    fresh = churn.measure_in_fresh_process("python loop only", plan, repeat=2)
    assert fresh.allocator == "python loop only" and len(fresh.samples) == 2
    with pytest.raises(ValueError, match="unknown allocator 'malloc'"):
        churn.measure("malloc", plan)


@pytest.mark.slow
def test_a_failing_churn_process_says_which_allocator_and_why():
    plan = churn.ChurnPlan(steps=10, live=2)
    with pytest.raises(
        RuntimeError, match=r"'python loop only' failed in its process \(exit 1\):(.|\n)*repeat must be"
    ):
        churn.measure_in_fresh_process("python loop only", plan, repeat=0)


def test_churn_rows_compare_to_cudamalloc_and_subtract_the_loop():
    results = [
        churn.ChurnResult("python loop only", 1e-7, (1e-7,), 10),
        churn.ChurnResult("cudaMalloc (RMM)", 20e-6, (20e-6,), 10),
        churn.ChurnResult("pool (RMM)", 4e-6, (4e-6,), 10),
    ]
    rows = {row["allocator"]: row for row in churn.churn_rows(results)}
    assert rows["pool (RMM)"]["vs cudaMalloc (RMM)"] == "5.0×"
    assert rows["cudaMalloc (RMM)"]["vs cudaMalloc (RMM)"] == "1.0×"
    assert rows["pool (RMM)"]["less the Python loop"] == "3.90 µs"
    assert rows["python loop only"]["less the Python loop"] == "0.00 ns"
    assert rows["python loop only"]["vs cudaMalloc (RMM)"] == "not an allocator"
    assert "repeats, fastest to slowest" not in rows["pool (RMM)"]  # the spread only when asked for


def test_churn_rows_show_the_spread_of_the_repeats_beside_the_median():
    results = [
        churn.ChurnResult("python loop only", 100e-6, (99e-6, 100e-6, 104e-6), 10),
        churn.ChurnResult("cudaMalloc (RMM)", 200e-6, (190e-6, 200e-6, 230e-6), 10),
        churn.ChurnResult("pool (RMM)", 101e-6, (100e-6, 101e-6, 103e-6), 10),
    ]
    rows = {row["allocator"]: row for row in churn.churn_rows(results, spread=True)}
    assert rows["cudaMalloc (RMM)"]["repeats, fastest to slowest"] == "190 µs to 230 µs"
    assert rows["pool (RMM)"]["per free + allocation"] == "101 µs"
    assert list(rows["pool (RMM)"])[:3] == ["allocator", "per free + allocation", "repeats, fastest to slowest"]


def _write_log(path, stamps, actions=("allocate", "allocate", "free", "deallocate")):
    lines = ["Thread,Time,Action,Pointer,Size,Stream"]
    sizes = [100, 50, 100, 50]
    for stamp, action, size in zip(stamps, actions, sizes, strict=True):
        lines.append(f"7,{stamp},{action},0x1,{size},0x0")
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(
    "stamps",
    [
        ("18:44:57.000000", "18:44:57.001000", "18:44:57.002500", "18:44:57.004000"),
        ("18:44:57:000000", "18:44:57:001000", "18:44:57:002500", "18:44:57:004000"),
        ("1634567890.000000", "1634567890.001000", "1634567890.002500", "1634567890.004000"),
    ],
)
def test_allocation_log_becomes_memory_over_time(tmp_path, stamps):
    log = observe.read_allocation_log(_write_log(tmp_path / "log.csv", stamps))
    assert log["bytes_in_use"].tolist() == [100, 150, 50, 0]
    assert log["seconds"].round(6).tolist() == [0.0, 0.001, 0.0025, 0.004]


def test_allocation_log_past_midnight_and_bad_logs(tmp_path):
    log = observe.read_allocation_log(
        _write_log(tmp_path / "night.csv", ("23:59:59.999000", "00:00:00.001000", "00:00:00.002000", "00:00:01"))
    )
    assert log["seconds"].round(6).tolist() == [0.0, 0.002, 0.003, 1.001]
    with pytest.raises(ValueError, match="unknown actions \\['borrow'\\]"):
        observe.read_allocation_log(
            _write_log(tmp_path / "odd.csv", ("1.0", "2.0", "3.0", "4.0"), ("allocate", "borrow", "free", "free"))
        )
    (tmp_path / "other.csv").write_text("a,b\n1,2\n")
    with pytest.raises(
        ValueError, match="not an RMM allocation log: it lacks the columns \\['Action', 'Size', 'Time'\\]"
    ):
        observe.read_allocation_log(tmp_path / "other.csv")
    with pytest.raises(ValueError, match="cannot read the time stamp"):
        observe.read_allocation_log(_write_log(tmp_path / "t.csv", ("1:2", "2.0", "3.0", "4.0")))


def test_leak_message_only_when_memory_stayed():
    assert observe.leak_message(10 * MIB, 10 * MIB) is None
    assert observe.leak_message(10 * MIB, 5 * MIB) is None
    assert observe.leak_message(0, 3 * KIB, tolerance=4 * KIB) is None
    text = observe.leak_message(MIB, 9 * MIB)
    assert text.startswith("8.00 MiB still allocated after the block (it began at 1.00 MiB, ended at 9.00 MiB)")
    assert issubclass(memory.MemoryLeakError, AssertionError)


def test_workload_on_pandas_ranks_regions_and_marks_its_stages():
    tables = workload.make_tables(20_000, seed=4, frames=pandas)
    assert tables.rows == 20_000 and len(tables.customers) == 2_000
    seen = []
    peaks = observe.StagePeaks()

    def stage(name):
        seen.append(name)
        return peaks(name)

    ranked = workload.revenue_by_region(tables, stage=stage)
    assert seen == ["join", "price", "top customers", "by region"]
    assert [row["stage"] for row in peaks.rows()] == seen  # without RMM statistics the peaks read 0 B
    assert 0 < len(ranked) <= 50 and ranked["revenue"].is_monotonic_decreasing
    joined = tables.orders.merge(tables.customers, on="customer")
    expected = (joined["amount"] * joined["quantity"] * (1 - joined["discount"])).sum()
    assert ranked["revenue"].sum() == pytest.approx(expected)
    assert 0 < ranked["top_customer_share"].iloc[0] < 1
    with pytest.raises(ValueError, match="at least one row"):
        workload.make_tables(0, frames=pandas)


def test_jax_settings_replace_the_callers_jax_variables():
    base = {
        "PATH": "/bin",
        "XLA_PYTHON_CLIENT_PREALLOCATE": "false",
        "XLA_PYTHON_CLIENT_MEM_FRACTION": ".5",  # the old name
        "XLA_CLIENT_MEM_FRACTION": ".5",
    }
    default = jax_probe.jax_environment("preallocate 75 % (JAX's default)", base)
    assert default == {"PATH": "/bin", "XLA_PYTHON_CLIENT_PREALLOCATE": "true"}
    platform = jax_probe.jax_environment("platform allocator", base)
    assert platform["XLA_PYTHON_CLIENT_ALLOCATOR"] == "platform"
    assert "XLA_PYTHON_CLIENT_MEM_FRACTION" not in platform and "XLA_CLIENT_MEM_FRACTION" not in platform
    with pytest.raises(ValueError, match="unknown JAX memory setting 'huge'"):
        jax_probe.jax_environment("huge", base)
    probe = jax_probe.JaxProbe("grow on demand", GIB, 2 * GIB, 3e-4, 24 * GIB, False, "MemoryError: out of memory")
    row = probe.row(80 * GIB)
    assert row["share of the GPU"] == "2%" and row["cuDF job of 24.00 GiB"] == "out of memory"
    assert row["JAX step (median)"] == "300 µs"
    assert jax_probe.JaxProbe("grow on demand", 0, 0, 1e-4, GIB, True, "", 5 * GIB).row(80 * GIB)["free for cuDF"] == (
        "5.00 GiB"
    )
    spread = jax_probe.JaxProbe("grow on demand", 0, 0, 3e-4, GIB, True, "", 0, step_quartiles=(2e-4, 5e-4))
    assert spread.row(80 * GIB)["middle half of the steps"] == "200 µs to 500 µs"


def test_the_jax_step_reports_its_quartiles_around_the_median():
    """On the CPU's JAX: the step times' lower quartile, median and upper quartile, in order."""
    pytest.importorskip("jax")
    lower, median, upper = jax_probe._jax_steps(16)
    assert 0 < lower <= median <= upper


def test_jax_probe_refuses_to_crowd_out_other_users_of_the_gpu():
    assert jax_probe.preallocated_fraction("preallocate 75 % (JAX's default)") == 0.75
    assert jax_probe.preallocated_fraction("preallocate 25 %") == 0.25
    assert (
        jax_probe.preallocated_fraction("grow on demand") == jax_probe.preallocated_fraction("platform allocator") == 0
    )
    jax_probe.check_room_for_jax("preallocate 75 % (JAX's default)", free=78 * GIB, total=80 * GIB, environ={})
    jax_probe.check_room_for_jax("grow on demand", free=1 * GIB, total=80 * GIB)
    # 61 GiB free of 80: room for 60 GiB and the margin, but others hold 19 GiB: refused unless opted in
    with pytest.raises(memory.MemorySetupError, match="looks shared.*GPU_INTEROP_ALLOW_JAX_PREALLOCATION=1"):
        jax_probe.check_room_for_jax("preallocate 75 % (JAX's default)", free=63 * GIB, total=80 * GIB, environ={})
    opted = {jax_probe.OPT_IN: "1"}
    jax_probe.check_room_for_jax("preallocate 75 % (JAX's default)", free=63 * GIB, total=80 * GIB, environ=opted)
    jax_probe.check_room_for_jax("preallocate 25 %", free=40 * GIB, total=80 * GIB, environ={})  # a small share
    with pytest.raises(memory.MemorySetupError, match=r"would take 60.00 GiB of this GPU's 80.00 GiB, but only 40.00"):
        jax_probe.check_room_for_jax("preallocate 75 % (JAX's default)", free=40 * GIB, total=80 * GIB)
    with pytest.raises(memory.MemorySetupError, match="run this on a GPU of your own"):
        jax_probe.check_room_for_jax("preallocate 25 %", free=20 * GIB, total=80 * GIB)


@pytest.mark.slow
def test_figures_draw_without_a_gpu(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    results = [churn.ChurnResult("python loop only", 1e-7, (1e-7,), 10), churn.ChurnResult("pool", 4e-6, (4e-6,), 10)]
    plots.churn_figure(results).savefig(tmp_path / "churn.png")
    log = observe.read_allocation_log(_write_log(tmp_path / "log.csv", ("1.0", "1.5", "2.0", "3.0")))
    plots.memory_over_time_figure(log).savefig(tmp_path / "memory.png")
    assert (tmp_path / "churn.png").stat().st_size > 0 and (tmp_path / "memory.png").stat().st_size > 0


def test_the_managed_memory_guard_refuses_oversubscription_unless_opted_in():
    managed.check_managed_request(GIB, free=2 * GIB, total=80 * GIB, environ={})
    managed.check_managed_request(2 * GIB, free=2 * GIB, total=80 * GIB, environ={})  # exactly what is free: allowed
    with pytest.raises(managed.OversubscriptionRefused) as refused:
        managed.check_managed_request(3 * GIB, free=2 * GIB, total=80 * GIB, environ={})
    text = str(refused.value)
    assert "3.00 GiB is more than the 2.00 GiB free on this GPU (of 80.00 GiB)" in text
    assert "stall every user of a shared machine" in text and "GPU_INTEROP_ALLOW_OVERSUBSCRIPTION=1" in text
    assert isinstance(refused.value, memory.MemorySetupError)
    for value in ("1", "true", "YES"):
        managed.check_managed_request(3 * GIB, free=2 * GIB, total=80 * GIB, environ={managed.OPT_IN: value})
    for value in ("0", "", "no", "maybe"):
        assert not managed.opted_in({managed.OPT_IN: value})
    with pytest.raises(ValueError, match="positive size"):
        managed.check_managed_request(0, free=GIB, total=GIB, environ={})
    # cumulative: what the process already holds counts, since untouched managed memory leaves "free" as it was
    managed.check_managed_request(GIB, free=2 * GIB, total=80 * GIB, environ={}, held=GIB)
    with pytest.raises(managed.OversubscriptionRefused, match="with the 1.50 GiB of managed memory this process"):
        managed.check_managed_request(GIB, free=2 * GIB, total=80 * GIB, environ={}, held=3 * GIB // 2)
    with pytest.raises(ValueError, match="unknown advice 'pin'"):
        managed.advise(None, "pin")


def test_chunked_workload_equals_the_whole_one():
    tables = workload.make_tables(30_000, seed=5, frames=pandas)
    whole = workload.revenue_by_region(tables).sort_index()
    for chunks in (1, 3, 8):
        chunked = workload.revenue_by_region_chunked(tables, chunks).sort_index()[whole.columns]
        pandas.testing.assert_frame_equal(whole, chunked, check_dtype=False)
    with pytest.raises(ValueError, match="at least 1"):
        workload.revenue_by_region_chunked(tables, 0)


def test_budget_runs_are_reported_and_checked():
    failed = budget.BudgetRun("pool", 512 * MIB, False, 0.0, 300 * MIB, "MemoryError: Exceeded memory limit")
    row = failed.row()
    assert row["outcome"] == "out of memory" and row["budget"] == "512.00 MiB" and row["time"] == ""
    done = budget.BudgetRun("managed", 0, True, 0.25, GIB, "")
    assert done.row()["budget"] == "none (managed)" and done.row()["time"] == "250 ms"
    assert budget.BudgetRun("managed pool + prefetch", 0, True, 0.25, GIB, "").row()["budget"] == "none (managed)"
    assert budget.BudgetRun("pool", 0, True, 0.25, GIB, "").row()["budget"] == "none"
    assert budget.spill_summary({}) == {}
    with pytest.raises(ValueError, match="unknown mode 'swap'"):
        budget.run("swap", GIB)


@pytest.mark.slow
def test_a_churn_runs_in_a_fresh_process_and_a_bad_one_names_what_failed():
    found = churn.measure_in_fresh_process("python loop only", churn.ChurnPlan(steps=10, live=2), repeat=1)
    assert found.allocator == "python loop only" and found.steps == 10 and len(found.samples) == 1
    with pytest.raises(fresh_process.FreshProcessError, match=r"(?s)the churn of 'malloc' failed.*unknown allocator"):
        churn.measure_in_fresh_process("malloc")


def test_out_of_memory_inside_a_cap_becomes_an_error_that_names_it():
    with pytest.raises(memory.MemoryLimitError, match=r"more than a limit of 1.00 MiB: a request failed \(boom\)"):
        with limits._named_failures("a limit", MIB):
            raise MemoryError("boom")
    already = memory.MemoryLimitError("named already")
    with pytest.raises(memory.MemoryLimitError) as kept:
        with limits._named_failures("a limit", MIB):
            raise already
    assert kept.value is already
    with pytest.raises(KeyError), limits._named_failures("a limit", MIB):
        raise KeyError("not about memory")


def fake_rmm(counted_bytes=0):
    def statistics(base):
        return SimpleNamespace(base=base, allocation_counts=SimpleNamespace(current_bytes=counted_bytes))

    mr = SimpleNamespace(
        ManagedMemoryResource=lambda: "cudaMallocManaged",
        experimental=SimpleNamespace(CudaAsyncManagedMemoryResource=lambda: "CUDA 13 managed pool"),
        LimitingResourceAdaptor=lambda base, allocation_limit: ("limited", base, allocation_limit),
        StatisticsResourceAdaptor=statistics,
        available_device_memory=lambda: (10 * GIB, 16 * GIB),
    )
    return SimpleNamespace(mr=mr)


def test_every_managed_route_of_a_process_shares_one_guarded_ledger(monkeypatch):

    monkeypatch.setitem(sys.modules, "rmm", fake_rmm(counted_bytes=3 * GIB))
    monkeypatch.setattr(managed, "_LEDGER", {})
    assert managed.managed_bytes_held() == 0  # nothing allocated yet: no ledger made
    first = managed.ledger(environ={})
    assert first.base == ("limited", "cudaMallocManaged", 10 * GIB)  # limited at the free memory
    assert managed.ledger(environ={}) is first and managed.managed_bytes_held() == 3 * GIB
    with pytest.raises(managed.MemorySetupError, match="one process keeps one ledger"):
        managed.ledger("async", environ={})
    monkeypatch.setattr(managed, "_LEDGER", {})
    opted = managed.ledger("async", environ={managed.OPT_IN: "1"})
    assert opted.base == "CUDA 13 managed pool"  # counted, not limited
    with pytest.raises(ValueError, match="unknown managed resource 'huge'"):
        managed.ledger("huge")


def test_the_guard_counts_held_bytes_only_where_the_driver_does_not(monkeypatch):

    monkeypatch.setitem(sys.modules, "rmm", fake_rmm(counted_bytes=3 * GIB))
    monkeypatch.setattr(managed, "_LEDGER", {})
    managed.ledger(environ={})
    monkeypatch.setattr(managed, "_DRIVER_COUNTS_MANAGED", [])
    assert managed.held_beyond_free() == 3 * GIB  # not learnt yet: the safe side
    monkeypatch.setattr(managed, "_DRIVER_COUNTS_MANAGED", [False])  # a whole GPU
    assert managed.held_beyond_free() == 3 * GIB
    monkeypatch.setattr(managed, "_DRIVER_COUNTS_MANAGED", [True])  # an MPS limit: free memory already holds them
    assert managed.held_beyond_free() == 0


def test_host_view_is_the_same_bytes_seen_from_numpy():

    backing = np.arange(6, dtype=np.float32)
    fake = SimpleNamespace(  # what host_view reads of a CuPy array, pointing at host memory here
        flags=backing.flags,
        nbytes=backing.nbytes,
        dtype=backing.dtype,
        shape=(2, 3),
        data=SimpleNamespace(ptr=backing.ctypes.data),
    )
    view = managed.host_view(fake)
    assert view.shape == (2, 3) and view.ctypes.data == backing.ctypes.data
    assert view.base.base.owner is fake  # the view (a reshape of the buffer) keeps the array alive
    view[0, 0] = 42
    assert backing[0] == 42
    strided = SimpleNamespace(flags=backing[::2].flags)
    with pytest.raises(ValueError, match="contiguous"):
        managed.host_view(strided)


def test_the_budgeted_workload_exposes_no_column_to_another_library():
    """Chapter 5 says spilling failed at low budgets for the size of one operation, not because a column was
    exposed (handed to CuPy or DLPack, which cuDF can never spill again): the workload must stay in cuDF."""
    source = Path(workload.__file__).read_text(encoding="utf-8")
    for handoff in (".values", "to_cupy", "__cuda_array_interface__", "dlpack", "as_tensor", "asarray"):
        assert handoff not in source, f"support/memory/workload.py hands a column out with {handoff}"


def test_oversubscription_is_sized_from_the_free_memory_and_runs_only_when_opted_in():
    experiment = oversubscription.plan(20 * GIB, room=2 * GIB, over=2.0)
    assert (experiment.ballast, experiment.room, experiment.managed) == (18 * GIB, 2 * GIB, 4 * GIB)
    assert experiment.managed > experiment.free - experiment.ballast  # more than the GPU has left
    assert "2.0× what is left" in experiment.describe()
    for bad, match in ((dict(over=1.0), "above 1"), (dict(room=1), "at least 256 MiB"), (dict(room=30 * GIB), "free")):
        with pytest.raises(ValueError, match=match):
            oversubscription.plan(20 * GIB, **bad)
    skipped = oversubscription.run_if_opted_in(environ={}, free=20 * GIB)
    assert skipped["outcome"].startswith("skipped") and "GPU_INTEROP_ALLOW_OVERSUBSCRIPTION=1" in skipped["outcome"]
    assert skipped["ballast"] == 16 * GIB  # the default room of 4 GiB
    assert oversubscription.skipped_reason({"GPU_INTEROP_ALLOW_OVERSUBSCRIPTION": "1"}) is None


def test_torch_setups_refuse_before_touching_a_gpu():
    with pytest.raises(ValueError, match="unknown setup"):
        torch_setups.measure_here("PyTorch's everything")
    too_many = torch_setups.EXCHANGED_BYTES // (176 * 4) + 1  # beats that overflow the exchanged tensor
    with pytest.raises(ValueError, match="do not fit"):
        torch_setups.measure_here("PyTorch's own", beats=too_many)


def test_captures_with_a_mem_pool_refuse_an_unknown_place_before_a_process_starts(monkeypatch):
    monkeypatch.setattr(fresh_process, "call", lambda *a, **k: pytest.fail("a process was started"))
    for measure in (torch_setups.capture_with_mem_pool, torch_setups.capture_with_mem_pool_in_fresh_process):
        with pytest.raises(ValueError, match="unknown capture 'beside'"):
            measure("beside")


def test_capture_rows_show_where_the_capture_took_its_memory():
    from_rmm = {
        "capture": "inside use_mem_pool",
        "CUDA graph": "captured",
        "RMM bytes before the capture": 80 * MIB,
        "RMM bytes after the capture": 104 * MIB,
        "RMM allocations during the capture": 3,
        "PyTorch reserved before the capture": 80 * MIB,
        "PyTorch reserved after the capture": 104 * MIB,
    }
    failed = {"capture": "after use_mem_pool", "CUDA graph": "fails: RuntimeError: capture failed"}
    rows = torch_setups.capture_rows([from_rmm, failed])
    assert rows[0]["RMM during the capture"] == "+24.00 MiB, 3 allocations"
    assert rows[0]["RMM, bytes"] == "80.00 MiB -> 104.00 MiB"
    assert rows[0]["PyTorch reserved"] == "80.00 MiB -> 104.00 MiB"
    assert rows[1]["CUDA graph"].startswith("fails") and rows[1]["RMM during the capture"] == "—"
    assert torch_setups.CAPTURES == ("inside use_mem_pool", "after use_mem_pool")


def test_rmm_statistics_are_read_as_dict_or_attributes():
    assert torch_setups._served(SimpleNamespace(allocation_counts={"total_count": 3})) == 3
    assert torch_setups._served(SimpleNamespace(allocation_counts=SimpleNamespace(total_count=4))) == 4


def test_oom_plan_fails_with_holes_and_fits_without():
    plan = oom.sizes(4 * GIB)
    assert all(size % (2 * MIB) == 0 for size in plan.values())
    assert 2 * plan["piece"] + plan["ask"] <= 4 * GIB < plan["block"] + plan["ask"]
    with pytest.raises(ValueError, match="too small"):
        oom.sizes(64 * MIB)


def test_oom_rows_say_what_happened_even_when_a_process_failed():
    table = oom.rows(
        {
            "defaults": {
                "error": "OutOfMemoryError",
                "allocated": 380 * MIB,
                "reserved": 600 * MIB,
                "without holes": "fits",
            },
            "broken": {"error": "the process failed: boom", "message": ""},
            "fits": {"error": None, "allocated": MIB, "reserved": MIB, "without holes": "fits"},
        }
    )
    assert [row["the request"] for row in table] == ["OutOfMemoryError", "the process failed: boom", "fits"]
    assert table[0]["reserved before it"] == "600.00 MiB" and table[1]["allocated before it"] == "—"


def test_use_one_pool_says_whether_it_routed_pytorch(monkeypatch):
    monkeypatch.setattr(pools, "_active", None)
    assert not pools.pytorch_on_rmm()
    monkeypatch.setattr(pools, "_active", pools.PoolReport(GIB, ["cuDF", "CuPy"], "pool"))
    assert not pools.pytorch_on_rmm()  # use_one_pool(pytorch=False): the middle way
    monkeypatch.setattr(pools, "_active", pools.PoolReport(GIB, ["cuDF", "CuPy", "PyTorch"], "pool"))
    assert pools.pytorch_on_rmm()


def test_the_free_behind_a_busy_gpu_frees_each_buffer_once_behind_its_own_work(monkeypatch):
    """On the CPU: a stand-in resource and GPU; every buffer allocated beforehand is freed once, each free after its
    own queued work, and the timing holds the repeats only (the warm-ups are untimed)."""
    events = []

    class Resource:
        def allocate(self, size):
            events.append(("allocate", size))
            return len([e for e in events if e[0] == "allocate"])

        def deallocate(self, pointer, size):
            events.append(("free", pointer))

    fake_cupy = SimpleNamespace(cuda=SimpleNamespace(runtime=SimpleNamespace(deviceSynchronize=lambda: None)))
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy)
    monkeypatch.setattr(churn, "make_resource", lambda kind, pool_size: Resource())
    monkeypatch.setattr(
        churn,
        "time_behind_busy_gpu",
        functools.partial(
            churn.time_behind_busy_gpu, queue_work=lambda s: events.append(("work", s)), wait_for_gpu=lambda: None
        ),
    )
    timing = churn.time_free_behind_busy_gpu("pool", 0.02, warmup=2, repeat=5)
    frees = [e[1] for e in events if e[0] == "free"]
    assert sorted(frees) == list(range(1, 8))  # each of the seven buffers, once
    after_allocations = events[7:]
    assert after_allocations == [item for pointer in frees for item in (("work", 0.02), ("free", pointer))]
    assert len(timing.samples) == 5 and timing.label == "pool"
    with pytest.raises(ValueError, match="at most 1 s"):
        churn.time_free_behind_busy_gpu("pool", 2.0)


def stderr_file() -> tuple[int, int]:
    """The file descriptor 2 points to, as (device, inode)."""
    found = os.fstat(2)
    return found.st_dev, found.st_ino


def test_jax_starts_in_a_fresh_process_and_what_it_wrote_to_stderr_comes_back():
    pytest.importorskip("jax")
    quiet = fresh_process.call(
        "support.memory.jax_probe:platform_and_stderr", what="JAX on the CPU", env={"JAX_PLATFORMS": "cpu"}
    )
    assert quiet["platform"] == "cpu" and isinstance(quiet["stderr"], str)
    # a platform JAX cannot start: its error goes up, and the stderr of the process is the caller's again
    with pytest.raises(fresh_process.FreshProcessError, match="Unknown backend|nosuchplatform"):
        fresh_process.call(
            "support.memory.jax_probe:platform_and_stderr",
            what="JAX, no such platform",
            env={"JAX_PLATFORMS": "nosuchplatform"},
        )


def test_the_capture_takes_what_c_code_and_python_write_to_stderr(monkeypatch):
    pytest.importorskip("jax")
    import jax

    def devices_that_write():
        os.write(2, b"from C\n")
        print("from Python", file=sys.stderr)
        return [SimpleNamespace(platform="gpu")]

    monkeypatch.setattr(jax, "devices", devices_that_write)
    # as in a process of its own (pytest's capture replaces sys.stderr here): Python's stderr writes to descriptor 2
    open_before, stderr_before = len(os.listdir("/proc/self/fd")), stderr_file()
    with open(2, "w", closefd=False) as descriptor_2:
        monkeypatch.setattr(sys, "stderr", descriptor_2)
        started = jax_probe.platform_and_stderr()
    assert len(os.listdir("/proc/self/fd")) == open_before  # the saved descriptor closed, the capture too
    assert stderr_file() == stderr_before  # descriptor 2 given back
    assert started["platform"] == "gpu"
    assert "from C" in started["stderr"] and "from Python" in started["stderr"]


def test_a_redirect_that_fails_leaves_stderr_and_no_descriptor_open(monkeypatch):
    real_dup2 = os.dup2

    def dup2_that_fails_to_redirect(source, target):
        if target == 2 and source != saved_descriptors[-1]:
            raise OSError("redirect refused")
        return real_dup2(source, target)

    saved_descriptors = []
    real_dup = os.dup

    def dup_that_remembers(descriptor):
        saved_descriptors.append(real_dup(descriptor))
        return saved_descriptors[-1]

    open_before, stderr_before = len(os.listdir("/proc/self/fd")), stderr_file()
    with monkeypatch.context() as patched:  # undone before pytest's own capture restores descriptor 2
        patched.setattr(os, "dup", dup_that_remembers)
        patched.setattr(os, "dup2", dup2_that_fails_to_redirect)
        with pytest.raises(OSError, match="redirect refused"):
            jax_probe.platform_and_stderr()
    assert len(os.listdir("/proc/self/fd")) == open_before  # the saved descriptor closed
    assert stderr_file() == stderr_before  # descriptor 2 is the file it was
