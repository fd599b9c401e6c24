"""support.ecg.step_speed on the CPU: the trace summary, the eager step, and the refusals. The timings and the
CUDA graph run in chapter 6 on the GPU."""

from __future__ import annotations

import contextlib

import pytest
import torch  # noqa: TID253 - these tests need it: without it they cannot run

from support import bench
from support.ecg import step_speed, vae


def test_the_trace_summary_counts_kernels_per_step_and_their_share_of_the_step():
    events = [{"cat": "kernel", "dur": 250.0}] * 6 + [{"cat": "cuda_runtime", "dur": 900.0}]
    profile = step_speed.kernel_summary(events, steps=3, wall_seconds=0.006)
    assert (profile.kernels, profile.kernel_ms, profile.step_ms) == (2.0, 0.5, 2.0)
    assert profile.busy_share == pytest.approx(0.25)
    with pytest.raises(ValueError, match="no kernels"):
        step_speed.kernel_summary([{"cat": "cpu_op", "dur": 1.0}], steps=1, wall_seconds=1.0)
    with pytest.raises(ValueError, match="at least one step"):
        step_speed.kernel_summary(events, steps=0, wall_seconds=1.0)


@pytest.mark.slow
def test_an_eager_step_trains_on_consecutive_batches():
    shape = torch.sin(torch.linspace(0, 6.28, 64))
    beats = shape + 0.05 * torch.randn(64, 64, generator=torch.Generator().manual_seed(0))
    step = step_speed.eager_step(beats, 16)
    step.model.eval()
    before = vae.batch_loss(step.model, beats).item()
    step.model.train()
    for _ in range(40):  # wraps around after four batches
        step()
    step.model.eval()
    assert vae.batch_loss(step.model, beats).item() < 0.5 * before  # the steps trained the model
    with pytest.raises(ValueError, match="at least 128 beats"):
        step_speed.eager_step(beats, 128)


def test_a_cuda_graph_needs_gpu_beats_and_the_comparison_names_its_allocators():
    with pytest.raises(ValueError, match="move the beats to the GPU"):
        step_speed.graphed_step(torch.zeros(32, 64), 16)
    with pytest.raises(ValueError, match="allocator must be 'torch' or 'rmm'"):
        step_speed.compare_in_process("cupy")


def test_time_steps_warms_up_then_reports_milliseconds_per_step(monkeypatch):
    calls = []

    def fake_time_cuda(work, *, warmup, repeat, label):
        assert (warmup, repeat) == (0, 3)  # the warm-up steps ran already, outside the timing
        work()
        return bench.Timing(label, (0.2, 0.1, 0.3), "cuda-events")  # seconds for the whole batch of steps

    monkeypatch.setattr(step_speed, "time_cuda", fake_time_cuda)
    ms = step_speed.time_steps(lambda: calls.append(1), steps=40, warmup=5)
    assert len(calls) == 5 + 40  # five warm-ups, then one timed run of forty steps (the fake runs it once)
    assert ms == pytest.approx(0.2 * 1e3 / 40)
    with pytest.raises(ValueError, match="at least one step"):
        step_speed.time_steps(lambda: None, steps=0)


def test_batch_sizes_are_timed_in_alternating_order_and_keep_every_round(monkeypatch):
    seen = []
    figures = {512: iter([5.0, 7.0, 6.0, 9.0]), 4096: iter([4.0, 4.5, 8.0, 5.0])}
    monkeypatch.setattr(step_speed, "eager_step", lambda beats, size: size)
    monkeypatch.setattr(step_speed, "time_steps", lambda step, steps, warmup: seen.append(step) or next(figures[step]))
    result = step_speed.compare_batch_sizes(torch.zeros(8, 16), sizes=(512, 4096), rounds=4)
    assert seen == [512, 4096, 4096, 512, 512, 4096, 4096, 512]
    # seconds per step, one sample per round (time_steps gives milliseconds)
    assert result[512].samples == pytest.approx((5e-3, 7e-3, 6e-3, 9e-3))
    assert result[512].median == pytest.approx(6.5e-3)
    assert (result[4096].min, result[4096].max) == pytest.approx((4e-3, 8e-3))
    assert result[4096].clock == "cuda-events" and result[4096].label == "batch 4096, per step"
    with pytest.raises(ValueError, match="two rounds"):
        step_speed.compare_batch_sizes(torch.zeros(8, 16), rounds=1)


def test_steps_are_timed_in_turns_in_alternating_order_and_each_gets_its_median(monkeypatch):
    ran, figures = [], {"a": iter([1.0, 5.0, 2.0, 9.0]), "b": iter([4.0, 3.0, 8.0, 6.0])}

    def fake_time_steps(step, *, steps, warmup):
        ran.append(step.__name__)
        return next(figures[step.__name__])

    def a():
        pass

    def b():
        pass

    monkeypatch.setattr(step_speed, "time_steps", fake_time_steps)
    assert step_speed.time_in_turns({"a": a, "b": b}, rounds=4) == pytest.approx({"a": 3.5, "b": 5.0})
    assert ran == ["a", "b", "b", "a", "a", "b", "b", "a"]  # no step always runs first
    with pytest.raises(ValueError, match="at least two rounds"):
        step_speed.time_in_turns({"a": a}, rounds=1)


class FakeCuda:
    """What try_graphed_step asks of torch.cuda, recorded in order (the CPU has no CUDA)."""

    def __init__(self, monkeypatch):
        self.calls = []
        monkeypatch.setattr(torch.cuda, "current_stream", lambda: "the caller's stream")
        monkeypatch.setattr(torch.cuda, "synchronize", lambda: self.calls.append("synchronize"))
        monkeypatch.setattr(torch.cuda, "stream", self.stream)

    @contextlib.contextmanager
    def stream(self, stream):
        self.calls.append(f"enter {stream}")
        try:
            yield
        finally:
            self.calls.append(f"back to {stream}")


@pytest.mark.parametrize(("warms_up", "where"), [(True, "the capture"), (False, "before the capture")])
def test_a_failed_graph_says_whether_the_capture_or_what_came_before_it_failed(monkeypatch, warms_up, where):
    cuda = FakeCuda(monkeypatch)

    def fake_graphed_step(beats, batch_size, *, before_capture):
        if warms_up:
            before_capture()  # graphed_step calls it between the warm-ups and torch.cuda.graph
            cuda.calls.append("capture")
        raise RuntimeError("CUDA graph capture failed: operation failed due to a previous error during capture")

    monkeypatch.setattr(step_speed, "graphed_step", fake_graphed_step)
    step, failure = step_speed.try_graphed_step(torch.zeros(4, 4), 2)
    assert step is None
    assert failure == {
        "CUDA graph error": "CUDA graph capture failed: operation failed due to a previous error during capture",
        "CUDA graph failed in": where,
    }
    # the warm-ups are waited for before the capture, and the caller's stream is current again after the failure
    inside = ["synchronize", "capture"] if warms_up else []
    assert cuda.calls == ["enter the caller's stream", *inside, "back to the caller's stream"]


def test_a_graph_that_captures_is_returned_with_no_failure(monkeypatch):
    FakeCuda(monkeypatch)
    monkeypatch.setattr(step_speed, "graphed_step", lambda beats, batch_size, *, before_capture: "the step")
    assert step_speed.try_graphed_step(torch.zeros(4, 4), 2) == ("the step", {})


@pytest.mark.parametrize("captured", [True, False])
def test_the_comparison_names_the_columns_the_chapter_reads(monkeypatch, captured):
    """Chapter 6 turns these into its table and claims: the key names and their order are what it reads. The eager
    steps are timed first, the same way whether the capture then works or not (a failed one breaks the process's
    random draws on the GPU), and the graph in turns with its control, the eager step with the same fused Adam."""
    timed = []
    failure = {"CUDA graph error": "CUDA graph capture failed: …", "CUDA graph failed in": "the capture"}
    monkeypatch.setattr(step_speed, "eager_step", lambda beats, size, fused=False: f"eager {fused}")

    def fake_try_graphed_step(beats, size):
        timed.append("capture tried")
        return ("graph", {}) if captured else (None, failure)

    monkeypatch.setattr(step_speed, "try_graphed_step", fake_try_graphed_step)

    def fake_time_in_turns(contenders):
        timed.append(list(contenders.values()))
        return {name: float(i + 10 * len(timed)) for i, name in enumerate(contenders)}

    monkeypatch.setattr(step_speed, "time_in_turns", fake_time_in_turns)

    def fake_time_rounds(contenders):  # the graph and its control: each round's seconds per step
        timed.append(list(contenders.values()))
        return {
            name: bench.Timing(name, (0.001 * (i + 30), 0.001 * (i + 29), 0.001 * (i + 31)), "cuda-events")
            for i, name in enumerate(contenders)
        }

    monkeypatch.setattr(step_speed, "time_rounds", fake_time_rounds)
    result = step_speed.compare_steps(torch.zeros(4, 4), 2)
    eager = {"eager ms": 10.0, "eager, fused Adam ms": 11.0}  # the first round's, either way
    if captured:
        assert timed == [["eager False", "eager True"], "capture tried", ["graph", "eager True"]]
        rounds = result.pop("rounds ms")
        assert rounds["CUDA graph"] == pytest.approx([30.0, 29.0, 31.0])
        assert rounds["fused Adam beside the graph"] == pytest.approx([31.0, 30.0, 32.0])
        assert result == pytest.approx(eager | {"CUDA graph ms": 30.0, "fused Adam beside the graph ms": 31.0})
    else:
        assert timed == [["eager False", "eager True"], "capture tried"]
        assert result == eager | failure
