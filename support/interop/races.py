"""Stream races, measured route by route: does a consumer read an array before its producer has written it?

A producer (CuPy) writes an array on a side stream, behind queued GPU work, and hands it over while that work is
still pending; the consumer computes a sum on its own stream and the host reads it. A route that orders the
consumer after the producer's work gets the full sum; one that does not reads the array half-written (or not
written at all) and returns a wrong sum without an error. :data:`ROUTES` are the handoffs the chapter's rules of
thumb recommend, each with where it is made: **inside** ``with stream:`` (CuPy's current stream is the one with
the pending writes, as in the producer's own code) or **after** it (the current stream is back to the default).

The producer's side stream is made twice, one column each (:data:`SIDE_STREAMS`): ``non_blocking=True``, a stream
the legacy default stream does not synchronize with, and CuPy's default, ``cp.cuda.Stream()``, a *blocking*
stream (``non_blocking=False`` in CuPy 14.2, ``cupy/cuda/stream.pyx``): work on the legacy default stream waits
for a blocking stream's earlier work, so a consumer that computes on the legacy stream is ordered by CUDA itself
whatever the protocol did. :func:`changed_by_the_stream` names the routes whose verdict differs between the two.

>>> sorted(ROUTES)[:2]
['CuPy itself, on the default stream', 'JAX jnp.asarray(x), CAI, inside']
>>> list(SIDE_STREAMS.values())
[True, False]
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from support.bench import gpu_sleeper

#: Elements of the array the producer writes: 16 MiB of float32.
SIZE = 1 << 22

#: The columns of the race table: the producer's side stream, and its ``non_blocking`` flag.
SIDE_STREAMS = {
    "side stream non_blocking=True": True,
    "side stream blocking (CuPy's default)": False,
}


@dataclass(frozen=True)
class Route:
    """One way to hand the producer's array over and sum it on the consumer's side."""

    protocol: str  # DLPack, CUDA Array Interface, or none
    inside: bool  # made inside ``with stream:`` (the producer's stream current)
    consume: Callable  # (x) -> a number, the consumer's sum, read on the host


def _torch():
    import torch

    return torch


def _jnp():
    import jax.numpy as jnp

    return jnp


def _numba_total(view) -> float:
    return launch_total(view, view.shape[0])


def launch_total(argument, size: int) -> float:
    """The sum of the ``size`` float32 values of ``argument``, by a Numba kernel launched on it (on Numba's default
    stream), read on the host."""
    import numba.cuda as nc

    kernel = _total_kernel()
    out = nc.device_array(1, dtype="float32")
    out[0] = 0
    kernel[(size + 255) // 256, 256](argument, out)
    return float(out.copy_to_host()[0])


_KERNEL = []


def _total_kernel():
    if not _KERNEL:
        import numba.cuda as nc

        @nc.jit
        def total(x, out):
            i = nc.grid(1)
            if i < x.shape[0]:
                nc.atomic.add(out, 0, x[i])

        _KERNEL.append(total)
    return _KERNEL[0]


def _as_cuda_array(x, sync=True):
    import numba.cuda as nc

    return nc.as_cuda_array(x, sync=sync)


def _torch_dlpack(x) -> float:
    return float(_torch().from_dlpack(x).sum())


def _torch_interface(x) -> float:
    return float(_torch().as_tensor(x, device="cuda").sum())


def _jax_dlpack(x) -> float:
    return float(_jnp().from_dlpack(x).sum())


def _jax_interface(x) -> float:
    return float(_jnp().asarray(x).sum())


def _numba_interface(x) -> float:
    return _numba_total(_as_cuda_array(x))


def _numba_interface_unsynced(x) -> float:
    return _numba_total(_as_cuda_array(x, sync=False))


def _cupy_itself(x) -> float:
    return float(x.sum())


def _after_synchronize(x) -> float:
    return _synchronized(lambda: _torch_interface(x))


CAI = "CUDA Array Interface"
ROUTES: dict[str, Route] = {
    "PyTorch torch.from_dlpack(x), DLPack, inside": Route("DLPack", True, _torch_dlpack),
    "PyTorch torch.from_dlpack(x), DLPack, after": Route("DLPack", False, _torch_dlpack),
    "PyTorch torch.as_tensor(x), CAI, inside": Route(CAI, True, _torch_interface),
    "JAX jnp.from_dlpack(x), DLPack, inside": Route("DLPack", True, _jax_dlpack),
    "JAX jnp.asarray(x), CAI, inside": Route(CAI, True, _jax_interface),
    "Numba as_cuda_array(x), CAI, inside": Route(CAI, True, _numba_interface),
    "Numba as_cuda_array(x, sync=False), CAI, inside": Route(CAI, True, _numba_interface_unsynced),
    "Numba kernel launched on x, DLPack, inside": Route("DLPack", True, _numba_total),
    "CuPy itself, on the default stream": Route("none", False, _cupy_itself),
    "control: a device-wide synchronize, then torch.as_tensor(x), CAI, after": Route(CAI, False, _after_synchronize),
}


def _synchronized(then):
    import cupy as cp

    cp.cuda.Device().synchronize()
    return then()


def produce(sleep, stream, seconds: float = 0.02):
    """A zeroed array, then, queued on ``stream`` behind ``seconds`` of GPU work, a write of ones into it."""
    import cupy as cp

    x = cp.zeros(SIZE, dtype=cp.float32)
    cp.cuda.Device().synchronize()
    with stream:
        sleep(seconds)
        x.fill(1.0)
    return x


def run_route(route: Route, sleep, tries: int = 10, *, non_blocking: bool = True) -> str:
    """How many of ``tries`` sums were wrong (``"3/10 wrong"``), or the error the route raised; the producer's
    side stream is made with ``cp.cuda.Stream(non_blocking=non_blocking)``."""
    import cupy as cp

    if tries < 1:
        raise ValueError(f"try at least once, not {tries} times")
    wrong = 0
    for _ in range(tries):
        stream = cp.cuda.Stream(non_blocking=non_blocking)
        x = produce(sleep, stream)
        try:
            if route.inside:
                with stream:
                    got = route.consume(x)
            else:
                got = route.consume(x)
        except Exception as error:  # noqa: BLE001 - a refusal is a verdict of the table
            stream.synchronize()
            return f"fails: {type(error).__name__}: {str(error).splitlines()[0][:70]}"
        stream.synchronize()
        wrong += got != float(SIZE)
    return f"{wrong}/{tries} wrong"


def race_table(tries: int = 10, routes: dict[str, Route] | None = None) -> list[dict[str, str]]:
    """Every route of :data:`ROUTES`, ``tries`` times each on each side stream of :data:`SIDE_STREAMS`: protocol,
    where the handoff was made, and one verdict column per side stream."""
    sleep = gpu_sleeper()
    rows = []
    for name, route in (routes or ROUTES).items():
        row = {
            "route": name.rsplit(", ", 2)[0].removeprefix("control: ") if route.protocol != "none" else name,
            "protocol": route.protocol,
            "handed over": "inside `with s`" if route.inside else "after it",
        }
        for column, non_blocking in SIDE_STREAMS.items():
            row[column] = run_route(route, sleep, tries, non_blocking=non_blocking)
        rows.append(row)
    return rows


def changed_by_the_stream(rows: list[dict[str, str]]) -> dict[str, list[str]]:
    """The routes (``"route / handed over"``) whose verdict differs between the two side streams, sorted by the
    way it changed: ``"wrong only when non-blocking"`` (the legacy stream ordered them when the side stream was
    blocking), ``"wrong only when blocking"``, and ``"otherwise changed"`` (a refusal in one column only).

    >>> rows = [{"route": "a", "handed over": "after it", "side stream non_blocking=True": "10/10 wrong",
    ...          "side stream blocking (CuPy's default)": "0/10 wrong"},
    ...         {"route": "b", "handed over": "after it", "side stream non_blocking=True": "0/10 wrong",
    ...          "side stream blocking (CuPy's default)": "0/10 wrong"}]
    >>> changed_by_the_stream(rows)["wrong only when non-blocking"]
    ['a / after it']
    """
    non_blocking, blocking = SIDE_STREAMS
    changed: dict[str, list[str]] = {
        "wrong only when non-blocking": [],
        "wrong only when blocking": [],
        "otherwise changed": [],
    }
    for row in rows:
        if row[non_blocking] == row[blocking]:
            continue
        name = f"{row['route']} / {row['handed over']}"
        wrong_free, wrong_blocking = wrong_count(row[non_blocking]), wrong_count(row[blocking])
        if wrong_free is None or wrong_blocking is None:
            changed["otherwise changed"].append(name)
        elif wrong_free > 0 and wrong_blocking == 0:
            changed["wrong only when non-blocking"].append(name)
        elif wrong_blocking > 0 and wrong_free == 0:
            changed["wrong only when blocking"].append(name)
        else:
            changed["otherwise changed"].append(name)
    return changed


def wrong_count(verdict: str) -> int | None:
    """The number of wrong sums in a verdict of :func:`run_route`, None when the route failed.

    >>> wrong_count("3/10 wrong"), wrong_count("fails: BufferError: no")
    (3, None)
    """
    if verdict.startswith("fails"):
        return None
    return int(verdict.split("/")[0])
