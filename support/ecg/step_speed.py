"""Where a training step of the beat autoencoder spends its time, and what makes it faster.

Once the beats stay on the GPU, training a model this small is *launch-bound*: each step launches a short kernel
per layer, per direction and per optimizer update, and the GPU waits between them while Python and PyTorch
prepare the next one.
This module measures that and the usual fixes:

- :func:`profile_steps` runs a few steps under ``torch.profiler`` and returns, per step, how many kernels ran,
  how long they ran on the GPU, and how long the step took (:func:`kernel_summary` reads the trace);
- :func:`eager_step` is an ordinary training step (optionally with the fused Adam), :func:`graphed_step` the
  same step captured once as a CUDA graph and replayed, one launch for all its kernels;
- :func:`time_steps` times a step with CUDA events after warm-ups;
- :func:`time_rounds` times several steps in turn, in alternating order, several rounds, so that no step
  always runs first (warming the GPU's clocks and caches for the others), and keeps every round
  (:func:`time_in_turns` keeps the medians): :func:`compare_batch_sizes` for batch sizes,
  :func:`compare_in_process` for the eager, fused and graphed step under one allocator.

Under RMM's PyTorch allocator (the book's one pool) the capture fails, with PyTorch 2.11 and RMM 26.10: PyTorch's
recipe allocates during capture from a private pool of its own caching allocator, and a pluggable allocator such
as RMM's is asked nothing about graphs unless it registers a callback for them, which RMM's does not. Why that
breaks this capture, the book does not measure. :func:`support.memory.torch_setups.measure_in_fresh_process`
measures the step under each allocator setup, one fresh process per setup (:mod:`support.fresh_process`).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch  # noqa: TID253 - this module times PyTorch training steps: it has no use without PyTorch

from support.bench import Timing, time_cuda
from support.ecg import vae
from support.ecg.turns import in_turns
from support.traffic import trace_events


@dataclass(frozen=True)
class StepProfile:
    """Per training step: kernels launched, their summed GPU time, and the step's wall time (milliseconds)."""

    kernels: float
    kernel_ms: float
    step_ms: float

    @property
    def busy_share(self) -> float:
        """The share of a step during which a kernel ran: low means the GPU mostly waited for the next launch."""
        return min(1.0, self.kernel_ms / self.step_ms)


def kernel_summary(events: list[dict], steps: int, wall_seconds: float) -> StepProfile:
    """Read a Chrome trace's events (``torch.profiler``'s export) into a :class:`StepProfile` per step.

    >>> trace = [{"cat": "kernel", "dur": 300.0}, {"cat": "kernel", "dur": 100.0}, {"cat": "cpu_op", "dur": 5e3}]
    >>> kernel_summary(trace, steps=2, wall_seconds=0.004)
    StepProfile(kernels=1.0, kernel_ms=0.2, step_ms=2.0)
    """
    if steps < 1 or wall_seconds <= 0:
        raise ValueError(f"need at least one step and a positive wall time, not {steps} and {wall_seconds}")
    kernels = [e for e in events if e.get("cat") == "kernel"]
    if not kernels:
        raise ValueError("the trace holds no kernels: was the profiler recording CUDA activity on a GPU?")
    busy_us = sum(float(e.get("dur", 0.0)) for e in kernels)
    return StepProfile(len(kernels) / steps, busy_us / steps / 1e3, wall_seconds / steps * 1e3)


def _check_beats(beats: torch.Tensor, batch_size: int) -> None:
    if beats.ndim != 2 or len(beats) < batch_size:
        raise ValueError(f"need a beats × width matrix of at least {batch_size} beats, got {tuple(beats.shape)}")


def eager_step(beats: torch.Tensor, batch_size: int, *, fused: bool = False, seed: int = 0) -> Callable[[], None]:
    """One ordinary training step per call, on consecutive batches of a shuffled ``beats`` (its own model)."""
    _check_beats(beats, batch_size)
    torch.manual_seed(seed)
    model = vae.BeatVAE(beats.shape[1], latent=8).to(beats.device)
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3, fused=fused or None)
    order = torch.randperm(len(beats), device=beats.device)
    steps, done = len(beats) // batch_size, [0]

    def step() -> None:
        start = (done[0] % steps) * batch_size
        done[0] += 1
        vae.train_step(model, optimizer, beats[order[start : start + batch_size]])

    step.model = model  # for a look at what the steps trained
    return step


def graphed_step(
    beats: torch.Tensor, batch_size: int, *, seed: int = 0, before_capture: Callable[[], None] | None = None
) -> Callable[[], None]:
    """The same step captured as a CUDA graph: each call gathers the next batch into the graph's input buffer
    and replays forward, backward and the fused Adam update as one launch.

    The capture is :func:`support.ecg.vae.capture_step` (PyTorch's recipe), the one :func:`support.ecg.vae.train`
    uses. Raises :class:`RuntimeError` with the reason when capture fails (under RMM's PyTorch allocator it
    does). ``before_capture``, if given, is called between the warm-ups and the capture (chapter 4 reads
    RMM's statistics there).
    """
    _check_beats(beats, batch_size)
    if not beats.is_cuda:
        raise ValueError("CUDA graphs capture GPU work: move the beats to the GPU first")
    torch.manual_seed(seed)
    model = vae.BeatVAE(beats.shape[1], latent=8).to(beats.device)
    optimizer = torch.optim.Adam(model.parameters(), lr=2e-3, fused=True, capturable=True)
    order = torch.randperm(len(beats), device=beats.device)
    steps, done = len(beats) // batch_size, [0]
    static_batch = beats[order[:batch_size]].clone()
    graph, _ = vae.capture_step(model, optimizer, static_batch, before_capture=before_capture)

    def step() -> None:
        start = (done[0] % steps) * batch_size
        done[0] += 1
        torch.index_select(beats, 0, order[start : start + batch_size], out=static_batch)
        graph.replay()

    return step


def time_steps(step: Callable[[], None], *, steps: int = 50, warmup: int = 10) -> float:
    """Milliseconds per call of ``step``: CUDA events around ``steps`` calls, after ``warmup`` calls."""
    if steps < 1:
        raise ValueError(f"time at least one step, not {steps}")

    def many() -> None:
        for _ in range(steps):
            step()

    for _ in range(warmup):
        step()
    return time_cuda(many, warmup=0, repeat=3, label="steps").median * 1e3 / steps


def time_rounds(steps_by_name: dict, *, rounds: int = 4, steps: int = 30, warmup: int = 3) -> dict[str, Timing]:
    """Seconds per step for each step of ``steps_by_name``, one sample per round: the steps timed in turn
    (:func:`time_steps`), in the given order in even rounds and backwards in odd ones, so that no step always runs
    first. Each :class:`~support.bench.Timing` has the median to quote and the rounds' range."""
    if rounds < 2:
        raise ValueError(f"need at least two rounds to alternate the order, not {rounds}")
    seconds = {name: [] for name in steps_by_name}
    for _, name in in_turns(list(steps_by_name), rounds):
        seconds[name].append(time_steps(steps_by_name[name], steps=steps, warmup=warmup) / 1e3)
    return {name: Timing(f"{name}, per step", tuple(values), "cuda-events") for name, values in seconds.items()}


def time_in_turns(steps_by_name: dict, *, rounds: int = 4, steps: int = 30, warmup: int = 3) -> dict:
    """Milliseconds per step for each step of ``steps_by_name``: the median of its rounds in :func:`time_rounds`."""
    timed = time_rounds(steps_by_name, rounds=rounds, steps=steps, warmup=warmup)
    return {name: timing.median * 1e3 for name, timing in timed.items()}


def compare_batch_sizes(
    beats: torch.Tensor, sizes=(512, 4096), *, rounds: int = 4, steps: int = 30
) -> dict[int, Timing]:
    """Seconds per step for each of ``sizes``, one sample per round: the sizes timed in turn, forwards in even
    rounds and backwards in odd ones (:func:`time_rounds`); each timing's median is the figure to quote, its
    minimum and maximum the rounds' range."""
    timed = time_rounds({f"batch {size}": eager_step(beats, size) for size in sizes}, rounds=rounds, steps=steps)
    return {size: timed[f"batch {size}"] for size in sizes}


def profile_steps(step: Callable[[], None], *, steps: int = 20) -> StepProfile:
    """Run ``step`` ``steps`` times under the profiler (after warm-ups) and summarize each step's kernels."""
    from torch.profiler import ProfilerActivity, profile

    for _ in range(5):
        step()
    torch.cuda.synchronize()
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*Profiler clears events", category=UserWarning)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as recording:
            started = time.perf_counter()
            for _ in range(steps):
                step()
            torch.cuda.synchronize()
            wall = time.perf_counter() - started
    events = trace_events(recording)
    return kernel_summary(events, steps, wall)


def compare_in_process(allocator: str, batch_size: int = 512, beats: int = 20_000, width: int = 176) -> dict:
    """Eager, fused and graphed steps on random beats, with ``allocator`` ("torch" or "rmm", the one pool)."""
    if allocator not in ("torch", "rmm"):
        raise ValueError(f"allocator must be 'torch' or 'rmm', not {allocator!r}")
    if allocator == "rmm":
        from support.memory import use_one_pool  # noqa: PLC0415 - support.memory's torch_setups imports this module

        use_one_pool()
    data = torch.randn(beats, width, device="cuda", generator=torch.Generator("cuda").manual_seed(0))
    return {"allocator": allocator, "batch_size": batch_size} | compare_steps(data, batch_size)


def compare_steps(beats: torch.Tensor, batch_size: int) -> dict:
    """Milliseconds per step of the eager step and of the eager step with the fused Adam, timed in turns
    (:func:`time_in_turns`): ``"eager ms"``, ``"eager, fused Adam ms"``. Then the step as a CUDA graph: where it
    captures, ``"CUDA graph ms"`` and its control ``"fused Adam beside the graph ms"``, the eager step with the same
    fused Adam timed in turns with it (:func:`time_rounds`: medians), and ``"rounds ms"``, each of the two's
    milliseconds per step in every round, for their range; where it cannot, its error and where it failed
    (:func:`try_graphed_step`).

    The two eager steps are timed before the capture is tried, the same way whether it then works or not, so that
    two processes' eager figures compare: after a failed capture, the process's next random draw on the GPU (the
    VAE samples its latent code) raised ``Offset increment outside graph capture encountered unexpectedly``
    (NVIDIA H100, PyTorch 2.11), so nothing that draws may run after one."""
    fused = eager_step(beats, batch_size, fused=True)
    eager = time_in_turns({"eager": eager_step(beats, batch_size), "eager, fused Adam": fused})
    found = {f"{name} ms": ms for name, ms in eager.items()}
    graphed, failure = try_graphed_step(beats, batch_size)
    if graphed is None:
        return found | failure
    beside = time_rounds({"CUDA graph": graphed, "fused Adam beside the graph": fused})
    medians = {f"{name} ms": timing.median * 1e3 for name, timing in beside.items()}
    return found | medians | {"rounds ms": {name: [s * 1e3 for s in t.samples] for name, t in beside.items()}}


def try_graphed_step(beats: torch.Tensor, batch_size: int) -> tuple[Callable[[], None] | None, dict]:
    """:func:`graphed_step`, or ``None`` and what failed: ``{"CUDA graph error": the reason, "CUDA graph failed
    in": "the capture"}`` when the warm-ups before it had run to the end and the capture failed, ``"before the
    capture"`` when the failure came earlier.

    The warm-ups are waited for before the capture starts, so that an error of theirs, which the GPU reports
    later, is not taken for the capture's. And the caller's stream stays current after a failure:
    ``torch.cuda.graph`` puts its own back only once the capture has ended without an error.
    """
    warmed_up = []

    def after_warm_ups() -> None:
        torch.cuda.synchronize()
        warmed_up.append(True)

    with torch.cuda.stream(torch.cuda.current_stream()):
        try:
            return graphed_step(beats, batch_size, before_capture=after_warm_ups), {}
        except RuntimeError as error:
            where = "the capture" if warmed_up else "before the capture"
            return None, {"CUDA graph error": str(error), "CUDA graph failed in": where}
