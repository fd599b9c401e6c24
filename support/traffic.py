"""Counting the bytes that cross between host and GPU memory, per named stage, whichever library copies them.

CUDA's profiling interface (CUPTI) records every memory copy the driver performs in the process, made by
cuDF, CuPy, Numba or PyTorch alike. :class:`TrafficMeter` switches that recording on around a stage through
``torch.profiler`` and adds up the copies by direction. It sees copies, not memory that a kernel reads
directly over the host link (mapped pinned memory, managed memory), which no step of this book uses.

>>> copies = copies_in_trace([
...     {"cat": "gpu_memcpy", "name": "Memcpy HtoD (Pageable -> Device)", "args": {"bytes": 4096}},
...     {"cat": "kernel", "name": "sum", "args": {}},
... ])
>>> copies.host_to_device, copies.count
(4096, 1)
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import warnings
from dataclasses import dataclass

import numpy as np

from support.units import describe_bytes

DIRECTIONS = {"HtoD": "host_to_device", "DtoH": "device_to_host", "DtoD": "device_to_device", "PtoP": "peer"}


@dataclass
class Copies:
    """Bytes copied in each direction, and how many copies."""

    host_to_device: int = 0
    device_to_host: int = 0
    device_to_device: int = 0
    peer: int = 0
    count: int = 0

    @property
    def across_host_link(self) -> int:
        """Bytes that crossed between host and GPU, either way."""
        return self.host_to_device + self.device_to_host

    def __add__(self, other: Copies) -> Copies:
        return Copies(*(getattr(self, f) + getattr(other, f) for f in self.__dataclass_fields__))


def copies_in_trace(events: list[dict]) -> Copies:
    """Add up the memory copies among the events of a Chrome trace written by ``torch.profiler``."""
    copies = Copies()
    for event in events:
        if event.get("cat") != "gpu_memcpy":
            continue
        name = event.get("name", "")
        direction = next((d for key, d in DIRECTIONS.items() if key in name), None)
        if direction is None:
            raise ValueError(f"a memory copy of unknown direction in the trace: {name!r}")
        setattr(copies, direction, getattr(copies, direction) + int(event.get("args", {}).get("bytes", 0)))
        copies.count += 1
    return copies


class TrafficMeter:
    """Records memory copies stage by stage: ``with meter.stage("convolution"): ...``."""

    def __init__(self):
        self.stages: dict[str, Copies] = {}

    @contextlib.contextmanager
    def stage(self, name: str):
        import torch
        from torch.profiler import ProfilerActivity, profile

        with warnings.catch_warnings():
            # One profile per stage is the design: the warning that a profile keeps only its own cycle's
            # events is about schedules with several cycles, which the meter does not use.
            warnings.filterwarnings("ignore", message=".*Profiler clears events", category=UserWarning)
            with profile(activities=[ProfilerActivity.CUDA]) as recording:
                yield
                torch.cuda.synchronize()  # copies still in flight would escape the record
        self.stages[name] = self.stages.get(name, Copies()) + _copies_of(recording)

    def between(self, first: str, last: str) -> Copies:
        """All copies from stage ``first`` to stage ``last``, both included, in the order they ran."""
        names = list(self.stages)
        for name in (first, last):
            if name not in self.stages:
                raise KeyError(f"no stage {name!r} was recorded; have {names}")
        chosen = names[names.index(first) : names.index(last) + 1]
        total = Copies()
        for name in chosen:
            total = total + self.stages[name]
        return total

    def rows(self) -> list[dict[str, object]]:
        """One row per stage: bytes across the host link each way, bytes copied within the GPU, copies.

        The host link is what zero-copy handoffs save; a copy within the GPU is a different cost (a gather,
        a contiguous copy of a view), shown so that "no round trip" is not read as "no copy".
        """
        return [
            {
                "stage": name,
                "host → GPU": describe_bytes(c.host_to_device),
                "GPU → host": describe_bytes(c.device_to_host),
                "GPU → GPU": describe_bytes(c.device_to_device),
                "copies (any direction)": c.count,
            }
            for name, c in self.stages.items()
        ]


def trace_events(recording) -> list[dict]:
    """The events of a finished ``torch.profiler`` recording, as its Chrome trace lists them."""
    handle, path = tempfile.mkstemp(suffix=".json")
    os.close(handle)
    try:
        recording.export_chrome_trace(path)
        with open(path) as trace:
            return json.load(trace).get("traceEvents", [])
    finally:
        os.unlink(path)


def _copies_of(recording) -> Copies:
    return copies_in_trace(trace_events(recording))


def self_check(nbytes: int = 2**20) -> dict[str, Copies]:
    """Make one known copy of ``nbytes`` with each library and return what the meter saw of each: proof that
    it sees copies made outside PyTorch too. GPU only."""
    import cudf
    import cupy
    import torch
    from numba import cuda

    meter = TrafficMeter()
    values = cupy.arange(nbytes // 4, dtype=cupy.float32)
    with meter.stage("CuPy: cupy.asnumpy (GPU → host)"):
        cupy.asnumpy(values)
    with meter.stage("PyTorch: tensor.cuda() (host → GPU)"):
        torch.ones(nbytes // 4).cuda()
    with meter.stage("Numba: cuda.to_device (host → GPU)"):
        cuda.to_device(np.ones(nbytes // 4, np.float32))
    with meter.stage("cuDF: Series.to_pandas (GPU → host)"):
        cudf.Series(values).to_pandas()
    with meter.stage("nothing: a sum that stays on the GPU"):
        float(values.sum())
    return meter.stages
