"""support.layouts, support.why_gpus.speedups and support.why_gpus.host_link on the CPU. The Numba kernels run in
Numba's CUDA simulator here (conftest switches it on when there is no GPU) and are checked against NumPy."""

from __future__ import annotations

import math
import sys
import types

import numpy as np
import pandas
import pytest

from support import bench, layouts
from support.bench import Timing
from support.why_gpus import crossover, host_link, speedups


def test_structured_records_and_their_matrix_view_share_bytes():
    records = layouts.structured_records(10, seed=3)
    matrix = layouts.as_matrix(records)
    assert matrix.shape == (10, 4) and np.shares_memory(matrix, records)
    assert np.array_equal(matrix[:, 2], records["z"]) and records.dtype.itemsize == layouts.RECORD_BYTES == 16
    assert np.array_equal(layouts.random_records(10, seed=3), matrix)
    with pytest.raises(layouts.LayoutError, match="not contiguous"):
        layouts.as_matrix(records[::2])
    with pytest.raises(layouts.LayoutError, match="expected records of dtype"):
        layouts.as_matrix(np.zeros(3))
    with pytest.raises(layouts.LayoutError, match="at least one record"):
        layouts.structured_records(0)


@pytest.mark.slow
@pytest.mark.parametrize("field", layouts.FIELDS)
def test_sum_field_kernel_matches_numpy(field):
    records = layouts.random_records(3000, seed=5)
    expected = records[:, layouts.field_index(field)].astype(np.float64).sum()
    assert layouts.sum_field(records, field) == pytest.approx(expected, rel=1e-12)


@pytest.mark.slow
def test_the_same_kernel_sums_one_contiguous_field():
    fields = layouts.to_fields(layouts.random_records(700, seed=6))
    total = float(layouts.sum_values_async(fields[1])[0])
    assert total == pytest.approx(fields[1].astype(np.float64).sum(), rel=1e-12)
    with pytest.raises(layouts.LayoutError, match=r"an \(n, 4\) array"):
        layouts.sum_field(fields[1].reshape(-1, 1), "x")
    with pytest.raises(layouts.LayoutError, match="not contiguous"):
        layouts.sum_values_async(fields[1][::2])
    with pytest.raises(layouts.LayoutError, match=r"one contiguous float32 field \(1-D\), got shape \(4, 700\)"):
        layouts.sum_values_async(fields)


def test_transposition_kernel_gives_one_contiguous_row_per_field():
    records = layouts.random_records(1500, seed=7)
    fields = layouts.to_fields(records)
    assert fields.shape == (4, 1500) and fields.flags.c_contiguous and np.array_equal(fields, records.T)


def test_kernels_refuse_layouts_they_cannot_read():
    records = layouts.random_records(8)
    for bad, problem in [
        (records[::2], "C-contiguous"),
        (records.T.copy(), r"an \(n, 4\) array"),
        (records.astype(np.float64), "must be float32"),
    ]:
        with pytest.raises(layouts.LayoutError, match=problem):
            layouts.sum_field(bad, "x")
        with pytest.raises(layouts.LayoutError, match=problem):
            layouts.to_fields(bad)
    with pytest.raises(layouts.LayoutError, match="there is no field 'v'"):
        layouts.sum_field(records, "v")


@pytest.mark.slow
def test_every_way_of_summing_one_field_agrees_and_knows_what_it_reads():
    records = layouts.random_records(900, seed=8)
    fields = layouts.to_fields(records)
    ways = layouts.one_field_ways(records, fields, "z")
    expected = records[:, 2].astype(np.float64).sum()
    for name, (work, variant) in ways.items():
        assert float(np.asarray(work()).ravel()[0]) == pytest.approx(expected, rel=1e-5), name
        assert variant.useful_bytes == 900 * 4
        assert variant.bytes_read == (900 * 16 if variant.layout == "AoS" else 900 * 4), name
    assert {v.layout for _, v in ways.values()} == {"AoS", "SoA"} and len(ways) == 6


def _timing(label, seconds):
    return Timing(label, (seconds,), "cuda-events")


def test_bandwidth_rows_compare_with_copy_and_with_the_layouts_ideal():
    variants = {
        "soa": layouts.Variant("soa", "SoA", 100, 100),
        "aos": layouts.Variant("aos", "AoS", 400, 100),
    }
    rows = layouts.bandwidth_rows({"soa": _timing("soa", 1e-9), "aos": _timing("aos", 4e-9)}, variants, 100e9)
    by_name = {row["variant"]: row for row in rows}
    assert by_name["soa"]["useful GB/s"] == 100.0 and by_name["soa"]["of copy bandwidth"] == "100%"
    assert by_name["aos"]["useful GB/s"] == 25.0 and by_name["aos"]["of its layout's ideal"] == "100%"
    assert layouts.transposition_break_even(2.0, 1.5, 0.5) == 2.0
    assert layouts.transposition_break_even(2.0, 0.5, 0.5) == math.inf


def test_speedup_workloads_on_the_cpu():
    x = speedups.random_matrix(50, np, seed=1)
    assert x.shape == (50, 50) and 0 <= x.min() and x.max() < 2 * np.pi
    frames = speedups.make_frames(5000, groups=20, seed=2, frames=pandas)
    assert len(frames.frame) == 5000 and len(frames.lookup) == 20
    assert frames.frame["y"].nunique() == 20 and len(frames.frame.merge(frames.lookup, on="y")) == 5000
    with pytest.raises(ValueError, match="at least one row"):
        speedups.make_frames(0, frames=pandas)


@pytest.mark.slow
def test_the_cpu_contenders_compute_what_the_familiar_code_computes():
    import polars

    x = speedups.random_matrix(64, np, seed=3)
    numpy_failures = int((np.sin(x) ** 2 + np.cos(x) ** 2 != 1).sum())
    # Numba's sin and cos may round differently from NumPy's in the last bit: the counts agree closely
    assert abs(speedups.identity_failures_parallel(x) - numpy_failures) <= 0.01 * x.size
    assert speedups.identity_failures_parallel(np.zeros((4, 4))) == 0
    frames = speedups.make_frames(2000, groups=10, seed=4, frames=pandas)
    arrow = speedups.with_arrow_dtypes(frames)
    assert str(arrow.frame["x"].dtype) == "double[pyarrow]" and str(arrow.lookup["y"].dtype) == "int64[pyarrow]"
    assert np.isclose(arrow.frame["x"].mean(), frames.frame["x"].mean())
    on_polars = speedups.make_frames(2000, groups=10, seed=4, frames=polars)
    by_key = on_polars.frame.group_by("y").agg(polars.col("x").mean()).sort("y")["x"].to_numpy()
    assert np.allclose(by_key, frames.frame.groupby("y")["x"].mean().sort_index().to_numpy())
    assert on_polars.frame.join(on_polars.lookup, on="y").height == 2000


@pytest.mark.slow
def test_speedup_table_and_figure(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    results = [
        speedups.SideBySide("slow", {"NumPy": _timing("a", 2.0), "Numba": _timing("n", 1.0)}, _timing("b", 0.5)),
        speedups.SideBySide("fast", {"NumPy": _timing("c", 3.0), "Numba": _timing("m", 6.0)}, _timing("d", 0.001)),
    ]
    assert [r.best_cpu for r in results] == ["Numba", "NumPy"]  # the fastest contender of each row, whichever
    rows = speedups.speedup_rows(results)
    assert [row["GPU vs familiar"] for row in rows] == ["4.0×", "3,000×"]
    assert [row["GPU vs fastest CPU"] for row in rows] == ["2.0×", "3,000×"]
    assert rows[0]["NumPy"] == "2.00 s" and rows[0]["fastest CPU"] == "1.00 s (Numba)"
    mixed = speedups.speedup_rows(
        [*results, speedups.SideBySide("frame", {"pandas": _timing("p", 1.0)}, _timing("g", 1.0))]
    )
    assert "familiar CPU" in mixed[2]  # rows whose familiar tools differ share one column name
    speedups.speedup_figure(results).savefig(tmp_path / "speedups.png")
    with pytest.raises(ValueError, match="at least one CPU contender"):
        speedups.SideBySide("nothing", {}, _timing("g", 1.0))
    values = {"a": 2e9, "b": 1e9}
    variants = {"a": layouts.Variant("a", "SoA", 1, 1), "b": layouts.Variant("b", "AoS", 4, 1)}
    layouts.bandwidth_figure(values, variants, 3e9).savefig(tmp_path / "bandwidth.png")


def test_pipeline_stages_are_the_same_with_and_without_round_trips():
    x = np.random.default_rng(0).normal(size=1000)
    steps = [lambda v: (v - v.mean()) / v.std(), np.cumsum]
    plain = host_link.run_stages(x, steps)
    assert np.allclose(plain, np.cumsum((x - x.mean()) / x.std()))
    assert np.allclose(plain, host_link.run_stages(x, steps, round_trip=True))
    runs = host_link.PipelineRuns(_timing("cpu", 1.0), _timing("gpu", 0.01), _timing("trips", 0.5), 8000, 0.4)
    assert [row["speed-up over the CPU"] for row in runs.rows()] == ["1.0×", "100×", "2.0×"]
    rows = host_link.bandwidth_rows({"host→GPU, pinned": _timing("p", 0.02)}, 2**30)
    assert rows[0]["GB/s"] == round(2**30 / 0.02 / 1e9, 1)


def test_side_by_side_times_every_cpu_contender_and_the_gpu_once_each(monkeypatch):
    timed = []

    def fake(clock):
        def time(fn, *, label, warmup, repeat):
            fn()
            timed.append((clock, label, warmup, repeat))
            return _timing(label, {"wall": 2.0, "cuda-events": 0.5}[clock])

        return time

    monkeypatch.setattr(bench, "time_wall", fake("wall"))
    monkeypatch.setattr(bench, "time_cuda", fake("cuda-events"))
    ran = []
    result = speedups.side_by_side(
        "work", {"NumPy": lambda: ran.append("np"), "Numba": lambda: ran.append("nb")}, lambda: ran.append("gpu")
    )
    assert ran == ["np", "nb", "gpu"] and list(result.cpu) == ["NumPy", "Numba"]
    assert [t[:2] for t in timed] == [("wall", "work (NumPy)"), ("wall", "work (Numba)"), ("cuda-events", "work (GPU)")]
    assert result.speedup == pytest.approx(4.0)
    with pytest.raises(ValueError, match="at least one CPU contender"):
        speedups.side_by_side("work", {}, lambda: None)


def test_the_host_link_diagram_writes_the_measured_bandwidths_and_refuses_unmeasured_ones(tmp_path):
    figure = host_link.draw_host_link({"host→GPU, pinned": 55.2, "GPU→host, pageable": 14.8}, device_gbps=1503.0)
    texts = [text.get_text() for text in figure.axes[0].texts]
    assert "host→GPU, pinned: 55.2 GB/s" in texts and "GPU→host, pageable: 14.8 GB/s" in texts
    assert any("1,503 GB/s" in t for t in texts)
    arrows = [t.arrow_patch.get_linewidth() for t in figure.axes[0].texts if getattr(t, "arrow_patch", None)]
    assert len(arrows) == 3  # one per copy, one inside GPU memory
    assert arrows[0] > arrows[1] and arrows[2] > arrows[0]  # the faster the copy, the wider its arrow
    figure.savefig(tmp_path / "link.png")
    with pytest.raises(ValueError, match="measured and positive"):
        host_link.draw_host_link({}, device_gbps=1.0)


def test_crossover_is_where_the_gpu_stays_ahead_and_sizes_respect_the_limits():
    assert crossover.crossover([1, 2, 3], [5, 5, 5], [6, 4, 4]) == 2
    assert crossover.crossover([1, 2, 3], [5, 5, 5], [4, 6, 4]) == 3  # ahead, behind, ahead again: from 3
    assert crossover.crossover([1, 2], [1, 1], [1, 1]) is None  # a tie does not pay
    assert crossover.sweep_sizes(2**40)[-1] <= (2**31 - 1) * 8  # int32 elements at most
    with pytest.raises(ValueError, match="under the smallest"):
        crossover.sweep_sizes(100)
    with pytest.raises(ValueError):
        crossover.crossover([1, 2], [1], [1, 2])


def _numpy_as_cupy(monkeypatch):
    """NumPy standing in for CuPy: ``asarray``, and a ``ReductionKernel`` that sums with NumPy."""

    def reduction_kernel(in_params, out_params, map_expr, reduce_expr, post_map_expr, identity, name):
        assert (map_expr, reduce_expr, identity) == ("x", "a + b", "0")  # a plain sum
        return lambda x: np.asarray(x).sum()

    monkeypatch.setitem(
        sys.modules, "cupy", types.SimpleNamespace(asarray=np.asarray, ReductionKernel=reduction_kernel)
    )
    crossover._compiled_sum_kernel.cache_clear()  # the test clears it again after the sweep


def test_the_sweep_times_every_line_and_finds_its_crossovers(monkeypatch):
    """The sweep on a stand-in for CuPy (NumPy itself), so its loop and bookkeeping run on the CPU."""
    _numpy_as_cupy(monkeypatch)
    try:
        result = crossover.sweep([2**10, 2**12], cold_extra=1.0, compiled_cold_extra=2.0)
    finally:
        crossover._compiled_sum_kernel.cache_clear()
    assert set(result.medians) == {*crossover.CPU_LINES, *crossover.GPU_LINES}
    assert crossover.COMPILED_LINE in crossover.GPU_LINES
    assert all(len(times) == 2 and min(times) > 0 for times in result.medians.values())
    assert result.seconds(crossover.COLD_LINE)[0] > 1.0
    compiled_warm = result.seconds(crossover.COMPILED_LINE)
    assert result.seconds(crossover.COLD_COMPILED_LINE) == [t + 2.0 for t in compiled_warm]
    assert result.lines()[-2:] == [crossover.COLD_LINE, crossover.COLD_COMPILED_LINE]
    assert result.crossovers()[crossover.COLD_LINE] is None  # a second of start-up never pays back here
    assert result.crossovers()[crossover.COLD_COMPILED_LINE] is None
    assert [row["size"] for row in result.rows()] == ["1.00 KiB", "4.00 KiB"]
    assert set(result.widest_spreads()) == set(result.medians)
    crossover.crossover_figure(result)
    assert crossover.cold_extra({"import cupy": 1, "CUDA context": 1, "first sum": 2, "second sum": 1}) == 3


def test_a_sweep_without_a_cold_start_has_no_cold_line_and_says_so_when_asked():
    medians = {line: [1.0] for line in (*crossover.CPU_LINES, *crossover.GPU_LINES)}
    result = crossover.Sweep([8], medians, {line: [(1.0, 1.0)] for line in medians}, None)
    assert crossover.COLD_LINE not in result.lines() and crossover.COLD_COMPILED_LINE not in result.lines()
    with pytest.raises(ValueError, match="was not measured"):
        result.seconds(crossover.COLD_COMPILED_LINE)


def test_a_cold_start_names_the_operations_it_knows():
    with pytest.raises(ValueError, match="operation must be one of sum, compiled"):
        crossover.cold_start("product")


def test_the_compiled_cold_starts_share_one_new_cache_empty_then_filled(monkeypatch):
    calls = []

    def fake_call(function, *, what, env, operation):
        calls.append((function, env, operation))
        return {"first sum": float(len(calls))}

    monkeypatch.setattr(crossover.fresh_process, "call", fake_call)
    found = crossover.compiled_cold_starts()
    assert found == {"empty cache": {"first sum": 1.0}, "filled cache": {"first sum": 2.0}}
    (first, env, operation), (second, env_again, _) = calls
    assert first == second == "support.why_gpus.crossover:cold_start" and operation == "compiled"
    assert env == env_again and env["CUPY_CACHE_DIR"] and env["CUPY_CACHE_IN_MEMORY"] is None
    crossover.cold_start_in_fresh_process()  # the CUB sum: a cache of its own
    assert calls[-1][2] == "sum" and calls[-1][1]["CUPY_CACHE_DIR"] != env["CUPY_CACHE_DIR"]


def test_copies_timed_to_completion_wait_for_the_gpu_inside_every_timed_call():
    events = []
    timings = host_link.time_to_completion(
        {"a": lambda: events.append("a"), "b": lambda: events.append("b")},
        warmup=1,
        repeat=2,
        synchronize=lambda: events.append("sync"),
    )
    assert list(timings) == ["a", "b"] and all(t.clock == "wall" and len(t.samples) == 2 for t in timings.values())
    assert events == ["sync"] + ["a", "sync"] * 3 + ["b", "sync"] * 3  # nothing queued at the start; each call waits
