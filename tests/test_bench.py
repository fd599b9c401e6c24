"""support.bench: the timing protocol (warm-ups, repeats, median), formatting and comparisons, on the CPU."""

import time

import pytest

from support import env
from support.bench import Timing, compare, format_ratio, format_seconds, time_behind_busy_gpu, time_cuda, time_wall


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (2.0, "2.00 s"),
        (0.0123, "12.3 ms"),
        (0.000_150, "150 µs"),
        (1.5e-6, "1.50 µs"),
        (123e-9, "123 ns"),
        (0, "0.00 ns"),
    ],
)
def test_format_seconds_picks_a_readable_unit(seconds, text):
    assert format_seconds(seconds) == text


def test_format_seconds_rejects_negative_durations():
    with pytest.raises(ValueError, match="negative"):
        format_seconds(-1)


class ScriptedClock:
    """A clock whose time advances only when the timed function runs, by scripted amounts."""

    name = "scripted"

    def __init__(self):
        self.now = 0.0
        self.synchronized = 0

    def mark(self):
        return self.now

    def synchronize(self):
        self.synchronized += 1

    def seconds_between(self, start, end):
        return end - start


def test_time_cuda_times_only_the_repeats_after_warmup():
    clock = ScriptedClock()
    durations = iter([9.0, 9.0, 1.0, 3.0, 2.0])  # two warm-up calls are slow (compilation, caches)

    def work():
        clock.now += next(durations)

    timing = time_cuda(work, warmup=2, repeat=3, clock=clock)
    assert timing.samples == (1.0, 3.0, 2.0)
    assert (timing.median, timing.min, timing.max) == (2.0, 1.0, 3.0)
    assert timing.label == "work" and timing.clock == "scripted"
    assert clock.synchronized == 2  # before the first timed call and before reading the events


def test_time_cuda_setup_runs_untimed_before_every_call_with_the_device_idle():
    clock = ScriptedClock()
    calls = []

    def setup():
        calls.append(("setup", clock.synchronized))
        clock.now += 100.0  # slow, and must not be counted

    def work():
        calls.append(("work", clock.synchronized))
        clock.now += 2.0

    timing = time_cuda(work, warmup=1, repeat=2, clock=clock, setup=setup)
    assert timing.samples == (2.0, 2.0)
    assert [kind for kind, _ in calls] == ["setup", "work"] * 3
    synced_before_setup = [count for kind, count in calls if kind == "setup"]
    assert synced_before_setup == sorted(set(synced_before_setup)) and synced_before_setup[0] >= 1
    with pytest.raises(TypeError, match="setup must be a function"):
        time_cuda(work, clock=clock, setup=3)


def test_time_wall_measures_real_time():
    timing = time_wall(lambda: time.sleep(0.01), label="sleep 10 ms", warmup=0, repeat=3)
    assert len(timing.samples) == 3
    assert 0.009 <= timing.median < 0.5
    assert str(timing).startswith("sleep 10 ms: median ")


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [({"repeat": 0}, ValueError, "repeat"), ({"warmup": -1}, ValueError, "warmup")],
)
def test_time_wall_rejects_bad_counts(kwargs, error, match):
    with pytest.raises(error, match=match):
        time_wall(lambda: None, **kwargs)


def test_time_wall_rejects_something_that_is_not_a_function():
    with pytest.raises(TypeError, match="expected a function"):
        time_wall(42)


def test_time_cuda_without_gpu_says_so(fake_gpu):
    fake_gpu(problem="no NVIDIA driver")
    with pytest.raises(env.GpuUnavailableError, match="needs a CUDA GPU"):
        time_cuda(lambda: None)


def test_timing_needs_samples_and_computes_throughput():
    with pytest.raises(ValueError, match="no samples"):
        Timing("empty", (), "wall")
    assert Timing("copy", (0.5, 1.0, 2.0), "wall").throughput(1_000) == 1_000.0


def test_compare_reports_ratios_to_the_baseline():
    slow, fast = Timing("host round trip", (4.0, 4.0), "wall"), Timing("zero-copy", (0.5, 0.5), "wall")
    table = compare(slow, fast)
    assert table.ratio("zero-copy") == 8.0
    assert compare(slow, fast, baseline="zero-copy").ratio("host round trip") == 0.125
    text = str(table)
    assert text.splitlines()[0].split()[:2] == ["work", "median"]
    assert "8.0×" in text
    assert all(line == line.rstrip() for line in text.splitlines())


def test_compare_html_is_escaped():
    html = compare(Timing("a<b", (1.0,), "wall"))._repr_html_()
    assert "a&lt;b" in html and "<table" in html


@pytest.mark.parametrize(
    ("timings", "kwargs", "error"),
    [
        ((), {}, ValueError),
        ((Timing("x", (1.0,), "wall"), Timing("x", (2.0,), "wall")), {}, ValueError),
        ((Timing("x", (1.0,), "wall"),), {"baseline": "y"}, KeyError),
    ],
)
def test_compare_rejects_ambiguous_input(timings, kwargs, error):
    with pytest.raises(error):
        compare(*timings, **kwargs)


def test_time_behind_busy_gpu_queues_work_before_every_call_and_times_only_the_call():
    """A stand-in GPU: the 'work' is a host sleep that the call under test waits for or not."""
    events = []
    pending = []

    def queue_work(seconds):
        events.append(("queue", seconds))
        pending.append(time.perf_counter() + seconds)

    def wait_for_gpu():
        events.append(("wait",))
        while pending:
            time.sleep(max(0.0, pending.pop() - time.perf_counter()))

    waits = time_behind_busy_gpu(
        wait_for_gpu, busy_seconds=0.02, warmup=1, repeat=3, queue_work=queue_work, wait_for_gpu=wait_for_gpu
    )
    returns = time_behind_busy_gpu(
        lambda: None, busy_seconds=0.02, warmup=1, repeat=3, queue_work=queue_work, wait_for_gpu=wait_for_gpu
    )
    assert waits.median >= 0.015 and returns.median < 0.005
    assert sum(1 for e in events if e[0] == "queue") == 8  # before every warm-up and repeat
    assert events[-1] == ("wait",), "the GPU is drained before returning"


@pytest.mark.parametrize("busy", [0, -1, 2])
def test_time_behind_busy_gpu_rejects_an_unreasonable_busy_time(busy):
    with pytest.raises(ValueError, match="positive time of at most 1 s"):
        time_behind_busy_gpu(lambda: None, busy_seconds=busy, queue_work=lambda s: None, wait_for_gpu=lambda: None)


@pytest.mark.parametrize(
    ("ratio", "text"), [(0.523, "0.52×"), (3.71, "3.7×"), (27.4, "27×"), (727.1, "727×"), (32185.8, "32,000×")]
)
def test_format_ratio_keeps_only_the_digits_a_median_backs(ratio, text):
    assert format_ratio(ratio) == text


def test_format_ratio_rejects_what_is_not_a_ratio_of_durations():
    with pytest.raises(ValueError, match="must be positive"):
        format_ratio(0.0)


def test_time_wall_with_sync_times_the_call_and_the_wait_together():
    calls = []

    def work():
        calls.append("work")

    def wait_for_gpu():  # stands in for cupy.cuda.runtime.deviceSynchronize
        calls.append("sync")
        time.sleep(0.01)

    timing = time_wall(work, warmup=2, repeat=3, sync=wait_for_gpu)
    assert calls == ["work", "sync"] * 5  # every call, warm-ups too, is followed by its wait
    assert len(timing.samples) == 3 and timing.clock == "wall"
    assert timing.min >= 0.009, "the wait is inside the timed region"
    assert timing.label == "work"
    assert time_wall(work, repeat=3).median < 0.009, "without sync nothing waits"


@pytest.mark.parametrize(("fn", "sync", "match"), [(42, lambda: None, "function to time"), (lambda: None, 1, "sync")])
def test_time_wall_rejects_a_sync_or_work_that_is_not_a_function(fn, sync, match):
    with pytest.raises(TypeError, match=match):
        time_wall(fn, sync=sync)
