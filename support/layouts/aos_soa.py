"""Array of structures (AoS) and structure of arrays (SoA), measured: records of four float32 fields.

A record is 16 bytes, ``x y z w``. In **AoS** the records lie one after the other, ``x0 y0 z0 w0 x1 y1 …``: a
NumPy structured array on the host, a ``(n, 4)`` float32 array on the GPU (CuPy has no structured dtypes). In
**SoA** each field is its own contiguous run, ``x0 x1 x2 …``: a ``(4, n)`` array here, one row per field.

Summing one field reads 4 useful bytes of every 16 in AoS, and only useful bytes in SoA. :func:`sum_field` is a
hand-written Numba kernel that reads only the field it sums; :func:`to_fields` transposes AoS into SoA on the
GPU; :func:`bandwidth_rows` turns timings into useful-bytes bandwidth and compares it with the device's copy
bandwidth (:func:`copy_bandwidth`) measured in the same run.

Arrays on the GPU (CuPy, or anything with ``__cuda_array_interface__``) run on the GPU; NumPy arrays run in
Numba's CUDA simulator when ``NUMBA_ENABLE_CUDASIM=1`` (the CPU tests).

>>> records = structured_records(3, seed=1)
>>> records.dtype.itemsize, records.dtype.names
(16, ('x', 'y', 'z', 'w'))
>>> as_matrix(records).shape
(3, 4)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from support import bench
from support.bench import format_seconds
from support.figures import labelled_bars, new_figure

__all__ = [
    "FIELDS",
    "RECORD",
    "RECORD_BYTES",
    "LayoutError",
    "field_index",
    "structured_records",
    "as_matrix",
    "random_records",
    "sum_field_async",
    "sum_values_async",
    "sum_field",
    "to_fields",
    "copy_bandwidth",
    "Variant",
    "one_field_ways",
    "bandwidth_rows",
    "bandwidth_figure",
    "transposition_break_even",
]

FIELDS = ("x", "y", "z", "w")
RECORD = np.dtype([(name, np.float32) for name in FIELDS])
RECORD_BYTES = RECORD.itemsize


class LayoutError(ValueError):
    """An array is not laid out as this module needs; the message says what is wrong and how to fix it."""


def field_index(field: str) -> int:
    """The position of ``field`` in a record."""
    if field not in FIELDS:
        raise LayoutError(f"a record has the fields {', '.join(FIELDS)}; there is no field {field!r}")
    return FIELDS.index(field)


def structured_records(count: int, seed: int = 0) -> np.ndarray:
    """``count`` random records as a NumPy structured array (AoS on the host), values uniform in [0, 1)."""
    if count < 1:
        raise LayoutError(f"ask for at least one record, not {count}")
    values = np.random.default_rng(seed).random((count, len(FIELDS)), dtype=np.float32)
    return values.view(RECORD).reshape(count)


def as_matrix(records: np.ndarray) -> np.ndarray:
    """The ``(n, 4)`` float32 view of a structured array of records: the same bytes, no copy."""
    if records.dtype != RECORD:
        raise LayoutError(f"expected records of dtype {RECORD}, got {records.dtype}")
    if not records.flags.c_contiguous:
        raise LayoutError("the records are not contiguous (a slice with a step?); pass np.ascontiguousarray(records)")
    return records.view(np.float32).reshape(len(records), len(FIELDS))


def random_records(count: int, seed: int = 0, xp=np):
    """``count`` random records as an ``(n, 4)`` float32 AoS array made by ``xp`` (NumPy or CuPy), in [0, 1)."""
    if count < 1:
        raise LayoutError(f"ask for at least one record, not {count}")
    if xp is np:
        return as_matrix(structured_records(count, seed))
    return xp.random.default_rng(seed).random((count, len(FIELDS)), dtype=np.float32)


def _check_records(records) -> None:
    shape = tuple(records.shape)
    if len(shape) != 2 or shape[1] != len(FIELDS):
        raise LayoutError(f"records must be an (n, {len(FIELDS)}) array, one row per record; got shape {shape}")
    if np.dtype(records.dtype) != np.float32:
        raise LayoutError(f"records must be float32, got {records.dtype}; convert with .astype('float32')")
    if not records.flags.c_contiguous:
        raise LayoutError(
            "records must be C-contiguous, one 16-byte record after the other; this array is a view with other "
            "strides (a slice with a step, or a transpose): pass a contiguous copy"
        )


def _launch(count: int, on_gpu: bool) -> tuple[int, int]:
    from support.layouts.kernels import THREADS  # noqa: PLC0415  # the kernels module imports numba.cuda

    blocks = max(1, math.ceil(count / THREADS))
    if on_gpu:
        from numba import cuda

        blocks = min(blocks, cuda.get_current_device().MULTIPROCESSOR_COUNT * 8)
    else:  # the simulator runs every thread in Python: keep the grid small
        blocks = min(blocks, 2)
    return blocks, THREADS


def _on_gpu(array) -> bool:
    return hasattr(array, "__cuda_array_interface__")


def _new_array(shape, dtype, on_gpu: bool, *, zeroed: bool = False):
    """An array of ``shape`` where the kernel will run: CuPy on the GPU, NumPy in the simulator."""
    if on_gpu:
        import cupy as xp
    else:
        xp = np
    return (xp.zeros if zeroed else xp.empty)(shape, dtype=dtype)


def _start_sum(matrix, column: int):
    """Launch the summing kernel over ``matrix[:, column]``; returns its one-element float64 output."""
    from support.layouts import kernels as layout_kernels  # noqa: PLC0415  # it imports numba.cuda

    on_gpu = _on_gpu(matrix)
    out = _new_array(1, np.float64, on_gpu, zeroed=True)
    blocks, threads = _launch(matrix.shape[0], on_gpu)
    layout_kernels.sum_column[blocks, threads](matrix, column, out)
    return out


def sum_field_async(records, field: str):
    """Start the Numba kernel that sums one field; returns a one-element float64 array (on the GPU for GPU input).

    The kernel reads only that field of each record (4 bytes of every 16). Nothing waits for the GPU, so the
    call can be timed with CUDA events.
    """
    _check_records(records)
    return _start_sum(records, field_index(field))


def sum_values_async(values):
    """The kernel of :func:`sum_field_async` on one contiguous float32 field (SoA): a one-element float64 array."""
    if len(values.shape) != 1 or np.dtype(values.dtype) != np.float32 or not values.flags.c_contiguous:
        raise LayoutError(
            f"expected one contiguous float32 field (1-D), got shape {tuple(values.shape)} of {values.dtype}"
            + ("" if values.flags.c_contiguous else ", not contiguous")
        )
    return _start_sum(values.reshape(-1, 1), 0)


def sum_field(records, field: str) -> float:
    """The sum of one field of ``(n, 4)`` float32 records, by the Numba kernel (accumulated in float64)."""
    return float(sum_field_async(records, field)[0])


def to_fields(records):
    """Transpose AoS ``(n, 4)`` records into SoA: a new ``(4, n)`` array, one contiguous row per field."""
    from support.layouts import kernels as layout_kernels  # noqa: PLC0415  # it imports numba.cuda

    _check_records(records)
    on_gpu = _on_gpu(records)
    fields = _new_array((len(FIELDS), records.shape[0]), np.float32, on_gpu)
    blocks, threads = _launch(records.shape[0], on_gpu)
    layout_kernels.records_to_fields[blocks, threads](records, fields)
    return fields


def copy_bandwidth(nbytes: int, *, repeat: int = 20):
    """Time a device-to-device copy of ``nbytes`` (``cudaMemcpy``) with CUDA events; returns (timing, bytes/s).

    A copy reads and writes every byte, so its bandwidth counts ``2 * nbytes``: the traffic a kernel that reads
    as much as it writes can reach on this GPU.
    """
    import cupy

    source = cupy.ones(nbytes // 4, dtype=np.float32)
    target = cupy.empty_like(source)
    copy = lambda: target.data.copy_from_device_async(source.data, source.nbytes)  # noqa: E731
    timing = bench.time_cuda(copy, label="device copy", warmup=3, repeat=repeat)
    return timing, 2 * source.nbytes / timing.median


@dataclass(frozen=True)
class Variant:
    """One way to sum a field: what it reads from memory and what of that is useful."""

    name: str
    layout: str
    bytes_read: int
    useful_bytes: int


def one_field_ways(records, fields, field: str = "x") -> dict[str, tuple[object, Variant]]:
    """The ways of summing one field that the chapter compares, each with what it reads: name → (work, variant).

    ``records`` is the AoS ``(n, 4)`` array, ``fields`` the same data as SoA ``(4, n)``. The library calls are the
    arrays' own ``sum`` (CuPy on the GPU), with a float64 and with a float32 accumulator; the kernels are
    :func:`sum_field_async` and :func:`sum_values_async`.
    """
    column = field_index(field)
    count = records.shape[0]
    aos_bytes, field_bytes = count * RECORD_BYTES, count * 4
    strided, contiguous = records[:, column], fields[column]

    def way(name, layout, work):
        return name, (work, Variant(name, layout, aos_bytes if layout == "AoS" else field_bytes, field_bytes))

    return dict(
        [
            way("library, strided AoS view, float64 sum", "AoS", lambda: strided.sum(dtype="float64")),
            way("library, strided AoS view, float32 sum", "AoS", lambda: strided.sum()),
            way("Numba kernel, AoS", "AoS", lambda: sum_field_async(records, field)),
            way("library, SoA, float64 sum", "SoA", lambda: contiguous.sum(dtype="float64")),
            way("library, SoA, float32 sum", "SoA", lambda: contiguous.sum()),
            way("Numba kernel, SoA", "SoA", lambda: sum_values_async(contiguous)),
        ]
    )


def bandwidth_rows(timings: dict[str, object], variants: dict[str, Variant], copy_bytes_per_second: float):
    """A table: median time, useful bytes per second, and that as a share of the copy bandwidth, per variant.

    ``timings`` maps a variant's name to its :class:`support.bench.Timing`. The last column compares with the
    best a variant of that layout can do: all of its bytes at copy bandwidth, of which only the useful share
    counts (for AoS, 4 of every 16 bytes).
    """
    rows = []
    for name, timing in timings.items():
        variant = variants[name]
        useful = variant.useful_bytes / timing.median
        ideal = copy_bytes_per_second * variant.useful_bytes / variant.bytes_read
        rows.append(
            {
                "variant": name,
                "layout": variant.layout,
                "median": format_seconds(timing.median),
                "useful GB/s": round(useful / 1e9, 1),
                "of copy bandwidth": f"{useful / copy_bytes_per_second:.0%}",
                "of its layout's ideal": f"{useful / ideal:.0%}",
            }
        )
    return rows


def bandwidth_figure(useful: dict[str, float], variants: dict[str, Variant], copy_bytes_per_second: float):
    """Bars of useful bytes per second per variant, with the device copy and the AoS ideal (¼ of it) as lines."""
    fig, axes = new_figure(size=(8, 3.6))
    colours = ["tab:orange" if variants[name].layout == "AoS" else "tab:blue" for name in useful]
    gbps = {name: value / 1e9 for name, value in useful.items()}
    labelled_bars(axes, gbps, label=lambda value: f"{value:,.0f}", color=colours)
    axes.axvline(copy_bytes_per_second / 1e9, color="black", linestyle="--", label="device copy (read + write)")
    axes.axvline(copy_bytes_per_second / 4e9, color="tab:orange", linestyle=":", label="AoS ideal: ¼ of the copy")
    axes.set_xscale("log")
    axes.set(
        xlabel="useful GB/s (bytes of the summed field per second, log scale)", title="summing one field of each record"
    )
    axes.set_xlim(right=2.5 * copy_bytes_per_second / 1e9)  # room for the last label
    axes.legend(loc="upper center", bbox_to_anchor=(0.5, -0.3), ncols=2, frameon=False)
    return fig


def transposition_break_even(transpose_seconds: float, aos_seconds: float, soa_seconds: float) -> float:
    """How many one-field passes pay for transposing once: the transposition time over what each pass saves.

    Returns ``inf`` when SoA saves nothing per pass.

    >>> transposition_break_even(3.0, 2.0, 0.5)
    2.0
    """
    saved = aos_seconds - soa_seconds
    return math.inf if saved <= 0 else transpose_seconds / saved
