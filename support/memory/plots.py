"""Figures of the memory chapter: what an allocation costs, and memory in use over time."""

from __future__ import annotations

from support.figures import labelled_bars, new_figure
from support.units import MIB


def _figure(size=(8, 3)):
    return new_figure(size=size)


def churn_figure(results):
    """Horizontal bars of microseconds per free + allocation, one per allocator, on a log scale."""
    fig, axes = _figure((8, 0.45 * len(results) + 1.2))
    micro = {r.allocator: r.seconds_per_step * 1e6 for r in results}
    labelled_bars(axes, micro, label=lambda value: f"{value:.2g} µs")
    axes.set_xscale("log")
    axes.set(xlabel="µs per free + allocation (median, log scale)", title="allocation churn seen from Python")
    axes.margins(x=0.25)
    return fig


def memory_over_time_figure(log):
    """Bytes in use (MiB) against milliseconds, from :func:`support.memory.observe.read_allocation_log`."""
    fig, axes = _figure()
    axes.step(log["seconds"] * 1e3, log["bytes_in_use"] / MIB, where="post", color="tab:blue")
    axes.set(
        xlabel="time since the first allocation (ms)", ylabel="allocated (MiB)", title="memory in use, from RMM's log"
    )
    axes.set_ylim(bottom=0)
    return fig


def throughput_figure(gbps: dict[str, float], reference: tuple[str, float] | None = None):
    """Horizontal bars of GB/s per way, with an optional reference line (label, GB/s)."""
    fig, axes = _figure((8, 0.45 * len(gbps) + 1.4))
    labelled_bars(axes, gbps, label=lambda value: f"{value:.1f}", color="tab:purple")
    axes.set(xlabel="GB/s (bytes of the array per second, median)", title="data first touched on the CPU, then the GPU")
    if reference:
        axes.axvline(reference[1], color="black", linestyle="--", label=reference[0])
        axes.legend(loc="lower right")
    axes.margins(x=0.15)
    return fig
