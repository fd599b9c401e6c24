"""Zero-copy exchange between cuDF, CuPy, Numba, PyTorch, JAX and NumPy.

Two protocols let one framework wrap another's memory without copying it:

- **DLPack** (``__dlpack__``, ``__dlpack_device__``, ``from_dlpack``): a capsule with pointer, shape, strides,
  dtype and device; the consumer passes its CUDA stream so the producer can order its pending work before it.
- **CUDA Array Interface** (``__cuda_array_interface__``): a dictionary with the same facts plus an optional
  ``stream``; Numba and cuDF speak only this one.

:func:`share` takes the zero-copy route from any supported object to a named framework, and raises
:class:`ZeroCopyError` naming the obstacle (dtype, strides, device, nulls, layout) when there is none, unless
the caller passes ``allow_copy=True``. :func:`same_memory` checks a claim by device pointer.
:func:`conversion_table` measures every pair.

Examples
--------
>>> import numpy as np
>>> from support.interop import obstacle, describe
>>> print(obstacle(describe(np.arange(4.0)), "cupy"))
the array lives in host memory and CuPy keeps arrays in GPU memory: moving it there is a copy over the host link
"""

from __future__ import annotations

import dataclasses
import importlib
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from support.bench import format_seconds

__all__ = [
    "aligned_host_array",
    "describe_stream",
    "handoff_outcome",
    "outcome",
    "outcome_in_words",
    "refusal",
    "PROTOCOL_ATTRIBUTES",
    "StreamRecorder",
    "measure_ways",
    "protocols_spoken",
    "TARGETS",
    "GPU_ONLY",
    "ArrayFacts",
    "ConversionRow",
    "ZeroCopyError",
    "conversion_table",
    "describe",
    "device_pointer",
    "framework_of",
    "obstacle",
    "route",
    "same_memory",
    "share",
]

#: Names ``share(..., to=...)`` accepts, with how the book writes them.
TARGETS = {
    "cudf": "cuDF Series",
    "cudf.DataFrame": "cuDF DataFrame",
    "cupy": "CuPy",
    "numba": "Numba",
    "torch": "PyTorch",
    "jax": "JAX",
    "numpy": "NumPy",
}
GPU_ONLY = {"cudf", "cudf.DataFrame", "cupy", "numba"}
CUDF_UNSUPPORTED_DTYPES = {"float16", "bfloat16", "complex64", "complex128"}
JAX_ALIGNMENT = 64  # bytes; JAX on the CPU shares a buffer only when it is aligned to this (measured: on the GPU, any)
JAX_32BIT_EQUIVALENT = {"float64": "float32", "int64": "int32", "uint64": "uint32", "complex128": "complex64"}


class ZeroCopyError(ValueError):
    """The requested handoff cannot share memory; the message says why and how to proceed."""


@dataclass(frozen=True)
class ArrayFacts:
    """What decides whether an array can be shared: where it lives and how its bytes are laid out."""

    framework: str  # "cudf", "cudf.DataFrame", "cupy", "numba", "torch", "jax" or "numpy"
    device: str  # "cuda" or "cpu"
    dtype: str  # NumPy's name: "float32", "bool", ...
    shape: tuple[int, ...]
    strides: tuple[int, ...] | None  # in bytes; None when the array is C-contiguous
    itemsize: int
    null_count: int = 0
    alignment: int = JAX_ALIGNMENT  # the largest power of two (up to 256) that divides the first element's address

    @property
    def negative_strides(self) -> bool:
        return any(s < 0 for s in self.strides or ())

    @property
    def compact(self) -> bool:
        """Whether the elements fill one block of memory in some axis order (C, Fortran or a transposition)."""
        if self.strides is None:
            return True
        dims = sorted((abs(s), n) for s, n in zip(self.strides, self.shape, strict=True) if n > 1)
        expected = self.itemsize
        for stride, extent in dims:
            if stride != expected:
                return False
            expected *= extent
        return True


def framework_of(obj) -> str:
    """Which framework an object belongs to, from its type (no framework is imported)."""
    module = type(obj).__module__.split(".")[0]
    name = type(obj).__name__
    if module == "cudf":
        if name == "DataFrame":
            return "cudf.DataFrame"
        if name in ("Series", "Index"):
            return "cudf"
    if module == "cupy" and name == "ndarray":
        return "cupy"
    if module in ("numba", "numba_cuda") and "DeviceNDArray" in name:
        return "numba"
    if module == "torch" and name in ("Tensor", "Parameter"):
        return "torch"
    if module in ("jax", "jaxlib") or name == "ArrayImpl":
        return "jax"
    if module == "numpy" and name == "ndarray":
        return "numpy"
    raise TypeError(
        f"share() works with cuDF Series and DataFrames, CuPy, Numba device arrays, PyTorch tensors, JAX arrays and "
        f"NumPy arrays; got {module}.{name}"
    )


def _facts_from_interface(framework, interface: dict, device: str, null_count: int = 0) -> ArrayFacts:
    dtype = np.dtype(interface["typestr"])
    shape = tuple(interface["shape"])
    strides = interface.get("strides")
    if strides is not None and tuple(strides) == _c_strides(shape, dtype.itemsize):
        strides = None
    return ArrayFacts(
        framework, device, dtype.name, shape, None if strides is None else tuple(strides), dtype.itemsize, null_count
    )


def _c_strides(shape: Sequence[int], itemsize: int) -> tuple[int, ...]:
    strides, step = [], itemsize
    for extent in reversed(shape):
        strides.append(step)
        step *= extent
    return tuple(reversed(strides))


def _alignment(address: int, cap: int = 256) -> int:
    return min(address & -address, cap) if address else cap


def describe(obj) -> ArrayFacts:
    """The :class:`ArrayFacts` of a supported object, read from its own metadata (nothing is copied)."""
    facts = _describe_layout(obj)
    if facts.framework == "cudf.DataFrame" or facts.itemsize == 0 or math.prod(facts.shape) == 0:
        return facts  # no single buffer of fixed-size values to locate
    return dataclasses.replace(facts, alignment=_alignment(device_pointer(obj)))


def _describe_layout(obj) -> ArrayFacts:
    framework = framework_of(obj)
    if framework == "cudf.DataFrame":
        dtypes = {str(t) for t in obj.dtypes}
        dtype = dtypes.pop() if len(dtypes) == 1 else "mixed"
        nulls = sum(int(obj[c].null_count) for c in obj.columns)
        return ArrayFacts(framework, "cuda", dtype, tuple(obj.shape), None, 0, nulls)
    if framework == "cudf":
        try:
            dtype = np.dtype(obj.dtype)
            fixed_size = dtype.kind in "biufcmM"
            name, itemsize = (dtype.name, dtype.itemsize) if fixed_size else (str(obj.dtype), 0)
        except TypeError:  # lists, structs, decimals, categories: cuDF-only types
            name, itemsize = str(obj.dtype), 0
        return ArrayFacts(framework, "cuda", name, (len(obj),), None, itemsize, int(obj.null_count))
    if framework == "torch":
        device = "cuda" if obj.is_cuda else "cpu"
        itemsize = obj.element_size()
        strides = tuple(s * itemsize for s in obj.stride())
        shape = tuple(obj.shape)
        dtype = str(obj.dtype).removeprefix("torch.")
        return ArrayFacts(
            framework, device, dtype, shape, None if strides == _c_strides(shape, itemsize) else strides, itemsize
        )
    if framework == "jax":
        device = "cpu" if obj.devices().pop().platform == "cpu" else "cuda"
        return ArrayFacts(framework, device, obj.dtype.name, tuple(obj.shape), None, obj.dtype.itemsize)
    if framework == "numpy":
        return _facts_from_interface(framework, obj.__array_interface__, "cpu")
    return _facts_from_interface(framework, obj.__cuda_array_interface__, "cuda")


def obstacle(facts: ArrayFacts, to: str, *, jax_x64: bool = False) -> str | None:
    """Why ``facts`` cannot be handed to ``to`` without a copy, in words; None when it can.

    This is the whole decision, kept free of any GPU library so it can be tested anywhere. ``jax_x64`` is
    JAX's ``jax_enable_x64`` setting.
    """
    if to not in TARGETS:
        raise ValueError(f"unknown framework {to!r}; choose one of {', '.join(TARGETS)}")
    name = TARGETS[to]
    if facts.framework == to:
        return None
    if facts.framework == "cudf.DataFrame":
        if to == "cudf":
            return None  # a Series is one of its columns, shared
        return (
            f"a cuDF DataFrame keeps every column in its own buffer (Arrow layout) and {name} needs one buffer: "
            "making a matrix of it copies every column (df.to_cupy())"
        )
    if to == "cudf.DataFrame" and facts.framework != "cudf" and len(facts.shape) != 1:
        return obstacle_for_dataframe()
    if facts.framework == "cudf" and facts.itemsize == 0:
        return (
            f"the cuDF column holds {facts.dtype} values, which are not one buffer of fixed-size values "
            f"(strings, for one, are offsets plus characters): {name} cannot wrap it; convert it first "
            "(e.g. .str.len(), or .astype('category').cat.codes)"
        )
    if facts.dtype.startswith(("datetime64", "timedelta64")) and to in ("torch", "jax"):
        return f"{name} has no {facts.dtype} dtype: view the values as integers first (x.astype('int64'))"
    if facts.device == "cpu" and to in GPU_ONLY:
        return (
            f"the array lives in host memory and {name} keeps arrays in GPU memory: "
            "moving it there is a copy over the host link"
        )
    if facts.device == "cuda" and to == "numpy":
        return (
            "the array lives in GPU memory and NumPy keeps arrays in host memory: "
            "moving it there is a copy over the host link"
        )
    if facts.null_count:
        return (
            f"the cuDF column has {facts.null_count} null(s) and {name} has no validity mask: it would read "
            "whatever bytes lie under the nulls; fill them first (series.fillna(...))"
        )
    column = "cudf" if to == "cudf.DataFrame" else to  # a one-column DataFrame obeys the Series rules
    if facts.negative_strides and column in ("torch", "jax", "cudf"):
        why = {
            "torch": "PyTorch cannot represent negative strides (importing them aborts the whole process)",
            "jax": "JAX imports only compact layouts",
            "cudf": "a cuDF column is one contiguous buffer",
        }[column]
        return f"the array has negative strides (a reversed view) and {why}: make it contiguous (a copy)"
    if not facts.compact and column in ("jax", "cudf"):
        why = "JAX imports only compact layouts" if column == "jax" else "a cuDF column is one contiguous buffer"
        return f"the array is a strided view with gaps between elements and {why}: make it contiguous (a copy)"
    if column == "cudf":
        if len(facts.shape) != 1:
            return f"a cuDF Series is one column and the array has {len(facts.shape)} dimensions"
        if facts.strides is not None:
            return "a cuDF column is one contiguous buffer and the array is strided"
        if facts.dtype in CUDF_UNSUPPORTED_DTYPES:
            return f"cuDF has no {facts.dtype} columns: cast first, e.g. x.astype('float32') (a copy)"
    if to == "jax" and facts.device == "cpu" and facts.alignment < JAX_ALIGNMENT:
        return (
            f"JAX on the CPU shares only buffers aligned to {JAX_ALIGNMENT} bytes and this one starts at an address "
            f"aligned to {facts.alignment}: JAX would copy it"
        )
    if to == "jax" and not jax_x64 and facts.dtype in JAX_32BIT_EQUIVALENT:
        return (
            f"JAX is in 32-bit mode: {facts.dtype} cannot be shared without a copy (JAX converts it to "
            f"{JAX_32BIT_EQUIVALENT[facts.dtype]}); set jax.config.update('jax_enable_x64', True) at start-up"
        )
    return None


def _module(name: str):
    try:
        return importlib.import_module(name)
    except ImportError:
        raise ModuleNotFoundError(f"No module named {name!r}: sharing with it needs it installed") from None


def route(source: str, to: str) -> tuple[str, Callable]:
    """The recommended zero-copy call from a ``source`` framework to ``to``, as text and as a function.

    DLPack where both sides speak it (it carries the stream handshake), the CUDA Array Interface where one side
    speaks only that (Numba, cuDF). Measured exceptions: cuDF cannot read JAX's interface (it has no ``strides``
    key), so JAX goes to cuDF through a CuPy view. cuDF is asked not to turn NaN into nulls (``nan_as_null=False``):
    by default it scans a float array for NaN, which waits for the GPU, and masks them, which is no longer a view.
    """
    speaks_dlpack = source in ("cupy", "torch", "jax", "numpy")
    if to == "cudf" and source == "cudf.DataFrame":
        return "x[x.columns[0]]  # one column", lambda x: x[x.columns[0]]
    if to == "cupy":
        if speaks_dlpack:
            return "cupy.from_dlpack(x)", lambda x: _module("cupy").from_dlpack(x)
        return "cupy.asarray(x)", lambda x: _module("cupy").asarray(x)
    if to == "torch":
        if speaks_dlpack:
            return "torch.from_dlpack(x)", lambda x: _module("torch").from_dlpack(x)
        return "torch.as_tensor(x, device='cuda')", lambda x: _module("torch").as_tensor(x, device="cuda")
    if to == "numba":
        return "numba.cuda.as_cuda_array(x)", lambda x: _module("numba.cuda").as_cuda_array(x)
    if to == "jax":
        if speaks_dlpack:
            return "jax.numpy.from_dlpack(x)", lambda x: _module("jax.numpy").from_dlpack(x)
        return "jax.numpy.asarray(x)", lambda x: _module("jax.numpy").asarray(x)
    if to == "cudf":
        if source == "jax":
            return (
                "cudf.Series(cupy.from_dlpack(x), nan_as_null=False)",
                lambda x: _module("cudf").Series(_module("cupy").from_dlpack(x), nan_as_null=False),
            )
        return "cudf.Series(x, nan_as_null=False)", lambda x: _module("cudf").Series(x, nan_as_null=False)
    if to == "numpy":
        return "numpy.from_dlpack(x)", lambda x: _module("numpy").from_dlpack(x)
    if to == "cudf.DataFrame" and source == "cudf":
        return "x.to_frame()", lambda x: x.to_frame()
    if to == "cudf.DataFrame":  # one column, shared (measured); matrices are refused by obstacle()
        return "cudf.DataFrame(cupy.asarray(x))", lambda x: _module("cudf").DataFrame(_to_cupy_view(x))
    raise ValueError(f"unknown framework {to!r}; choose one of {', '.join(TARGETS)}")


def obstacle_for_dataframe() -> str:
    return (
        "a cuDF DataFrame keeps every column in its own buffer and a matrix keeps all its columns in one: "
        "building a DataFrame from a matrix copies every column"
    )


def _copy_route(facts: ArrayFacts, to: str) -> tuple[str, Callable]:
    """The copy to make when sharing is impossible: one explicit contiguous copy (in CuPy, or NumPy for host
    data), then the zero-copy route from that copy to ``to``."""
    if to == "cudf.DataFrame":
        return "cudf.DataFrame(cupy.asarray(x))", lambda x: _module("cudf").DataFrame(_to_cupy_view(x))
    if to == "jax" and facts.dtype in JAX_32BIT_EQUIVALENT:
        return "jax.numpy.from_dlpack(x)  # JAX converts", route(facts.framework, "jax")[1]
    if to == "cudf" and facts.dtype in CUDF_UNSUPPORTED_DTYPES:
        raise ZeroCopyError(obstacle(facts, to))
    if facts.framework == "cudf.DataFrame":
        text, stage, staged = "x.to_cupy()", lambda x: x.to_cupy(), "cupy"
    elif facts.null_count:
        if not facts.dtype.startswith("float"):
            raise ZeroCopyError(obstacle(facts, to) + "; integers have no NaN to stand for a null, so no copy helps")
        text, stage, staged = "x.to_cupy(na_value=nan)", lambda x: x.to_cupy(na_value=math.nan), "cupy"
    elif facts.device == "cpu":
        numpy = _module("numpy")
        text, staged = "numpy.ascontiguousarray(x)", "numpy"

        def stage(x):
            return numpy.ascontiguousarray(numpy.from_dlpack(x))
    else:
        text, staged = "cupy.ascontiguousarray(x)", "cupy"

        def stage(x):
            return _module("cupy").ascontiguousarray(_to_cupy_view(x))

    if staged == to:
        return text, stage
    if staged == "cupy" and to == "numpy":
        return f"cupy.asnumpy({text})", lambda x: _module("cupy").asnumpy(stage(x))
    if staged == "numpy" and to in GPU_ONLY:
        onward_text, onward = route("cupy", to) if to != "cupy" else ("(x)", lambda y: y)
        text = f"cupy.asarray({text})"
        return onward_text.replace("(x", f"({text}", 1), lambda x: onward(_module("cupy").asarray(stage(x)))
    onward_text, onward = route(staged, to)
    return onward_text.replace("(x", f"({text}", 1), lambda x: onward(stage(x))


def _to_cupy_view(x):
    """A CuPy array over a GPU array's memory (any strides), or a copy of host data on the GPU."""
    cupy = _module("cupy")
    if describe(x).device == "cpu":
        return cupy.asarray(_module("numpy").from_dlpack(x))
    return cupy.asarray(x)


def device_pointer(obj) -> int:
    """Address of the first element (the first column's, for a DataFrame), in the memory the object lives in."""
    framework = framework_of(obj)
    if framework == "torch":
        return obj.data_ptr()
    if framework == "jax":
        return obj.unsafe_buffer_pointer()
    if framework == "numpy":
        return obj.__array_interface__["data"][0]
    if framework == "cudf.DataFrame":
        return device_pointer(obj[obj.columns[0]])
    return obj.__cuda_array_interface__["data"][0]


def same_memory(a, b) -> bool:
    """Whether ``a`` and ``b`` start at the same address on the same kind of device: one buffer, two views."""
    return describe(a).device == describe(b).device and device_pointer(a) == device_pointer(b)


def _jax_x64() -> bool:
    return bool(_module("jax").config.jax_enable_x64)


def share(obj, to: str, *, allow_copy: bool = False):
    """Hand ``obj`` to framework ``to`` without copying it; raise :class:`ZeroCopyError` when that is impossible.

    Parameters
    ----------
    obj
        A cuDF Series or DataFrame, CuPy array, Numba device array, PyTorch tensor, JAX array or NumPy array.
    to
        One of :data:`TARGETS`: ``"cudf"`` (a Series), ``"cudf.DataFrame"``, ``"cupy"``, ``"numba"``, ``"torch"``,
        ``"jax"``, ``"numpy"``.
    allow_copy
        Make one explicit copy when sharing is impossible, instead of raising.

    Returns
    -------
    An object of framework ``to`` that shares ``obj``'s memory (unless ``allow_copy`` was needed).

    Raises
    ------
    ZeroCopyError
        Naming the obstacle (dtype, strides, device, nulls, layout) and the fix; also when a library copied
        where no copy was expected, which the pointer check after every handoff would reveal.
    """
    facts = describe(obj)
    if facts.framework == to:
        return obj
    problem = obstacle(facts, to, jax_x64=_jax_x64() if to == "jax" else False)
    if problem is not None:
        if not allow_copy:
            raise ZeroCopyError(problem + ", or pass allow_copy=True")
        return _copy_route(facts, to)[1](obj)
    text, handoff = route(facts.framework, to)
    result = handoff(obj)
    if not same_memory(result, obj) and not allow_copy:
        raise ZeroCopyError(
            f"{text} copied the data although nothing in its layout required it; "
            "pass allow_copy=True to accept the copy"
        )
    return result


@dataclass(frozen=True)
class ConversionRow:
    """One measured handoff: from a framework to another, the call, whether memory is shared, what it costs."""

    source: str
    target: str
    call: str
    zero_copy: bool
    seconds: float  # median per call
    why_copy: str
    predicted_zero_copy: bool  # what share()'s rules (obstacle) expected, to be checked against zero_copy

    def as_dict(self) -> dict[str, object]:
        return {
            "from": TARGETS[self.source],
            "to": TARGETS[self.target],
            "zero-copy": "yes" if self.zero_copy else "no",
            "cost per call": format_seconds(self.seconds),
            "call": self.call,
            "why a copy": self.why_copy,
        }


def conversion_table(
    make_source: dict[str, Callable[[], object]],
    targets: Sequence[str],
    timer: Callable[[Callable[[], object]], float],
    *,
    jax_x64: bool = False,
) -> list[ConversionRow]:
    """Measure every ordered pair of frameworks: the call :func:`share` would make, its cost, shared or not.

    Parameters
    ----------
    make_source
        For each source framework, a function returning a fresh array of it.
    targets
        The frameworks to hand each source to.
    timer
        Seconds per call of a function (the notebook passes the median of ``support.bench.time_cuda``).
    jax_x64
        JAX's 64-bit setting, for the obstacle check.

    Whether memory is shared is measured by device pointer, never assumed; ``why_copy`` says why when it is not.
    """
    rows = []
    for source, make in make_source.items():
        for target in targets:
            if target == source:
                continue
            obj = make()
            facts = describe(obj)
            problem = obstacle(facts, target, jax_x64=jax_x64)
            text, call = _copy_route(facts, target) if problem else route(source, target)
            result = call(obj)
            shared = same_memory(result, obj)
            why = "" if shared else (problem or "the library copied (measured)")
            seconds = timer(lambda c=call, o=obj: c(o))
            rows.append(ConversionRow(source, target, text, shared, seconds, why, problem is None))
    return rows


#: The attributes that say which exchange protocols an object speaks.
PROTOCOL_ATTRIBUTES = {
    "DLPack": "__dlpack__",
    "CUDA Array Interface": "__cuda_array_interface__",
    "NumPy array interface": "__array_interface__",
    "Arrow C device data": "__arrow_c_device_array__",
}


def protocols_spoken(obj) -> dict[str, bool]:
    """Which exchange protocols ``obj`` implements, read off its attributes (see :data:`PROTOCOL_ATTRIBUTES`)."""
    return {protocol: hasattr(obj, attribute) for protocol, attribute in PROTOCOL_ATTRIBUTES.items()}


class StreamRecorder:
    """Wraps an array that speaks DLPack and records the ``stream`` each consumer passes to ``__dlpack__``.

    The stream is the consumer's half of the DLPack handshake: the producer makes that stream wait for its
    own pending work on the array before the consumer may use it. ``None`` means no stream (host memory),
    ``-1`` asks the producer not to synchronize.
    """

    def __init__(self, array):
        self.array = array
        self.streams: list[object] = []

    def __dlpack_device__(self):
        return self.array.__dlpack_device__()

    def __dlpack__(self, **kwargs):
        self.streams.append(kwargs.get("stream"))
        return self.array.__dlpack__(**kwargs)


def measure_ways(
    make: Callable[[int], object],
    ways: dict[str, Callable[[object], object]],
    sizes: Sequence[int],
    timer: Callable[[Callable[[], object]], float],
) -> list[dict[str, object]]:
    """Seconds per call of each way of moving an array, for arrays of each size in bytes (``make(size)``)."""
    rows = []
    for size in sizes:
        array = make(size)
        for way, move in ways.items():
            rows.append({"bytes": size, "way": way, "seconds": timer(lambda m=move, a=array: m(a))})
        del array  # free it before the next, larger size
    return rows


def refusal(obj, to: str) -> str:
    """The message of the :class:`ZeroCopyError` that ``share(obj, to)`` raises; AssertionError if it shares."""
    try:
        share(obj, to)
    except ZeroCopyError as error:
        return str(error)
    raise AssertionError(f"share() handed {framework_of(obj)} to {to} without a copy; expected a refusal")


def describe_stream(value) -> str:
    """In words, a ``stream`` value a consumer passed to ``__dlpack__`` (see the DLPack specification)."""
    if value is None:
        return "None: no stream named (CuPy and PyTorch take it as the legacy default stream)"
    if value == -1:
        return "-1: the producer must not synchronize"
    if value == 1:
        return "1: the legacy default stream"
    if value == 2:
        return "2: the per-thread default stream"
    return "a stream handle: the consumer's own stream"


def outcome(call: Callable[[], object], source, *, with_dtype: bool = False) -> str:
    """What ``call()`` made of ``source``: ``shared``, ``copy to DTYPE``, or ``fails: ERROR``.

    ERROR is the exception's class: the libraries raise many kinds, and the name is what a reader needs.
    ``with_dtype`` also says what dtype memory was shared as (``shared as bfloat16``, ``shared as |V2``).
    Sharing is judged by the first element's address alone, so dtypes that :func:`describe` does not know
    (bfloat16 seen through the CUDA Array Interface) can be judged too.
    """
    try:
        result = call()
    except Exception as error:  # the libraries raise many kinds; the name is what the reader needs
        return f"fails: {type(error).__name__}"
    dtype = str(result.dtype).removeprefix("torch.")
    if device_pointer(result) == device_pointer(source):
        return f"shared as {dtype}" if with_dtype else "shared"
    return f"copy to {dtype}"


def outcome_in_words(consume: Callable[[object], object], source) -> str:
    """What ``consume(source)`` gives, as a reader sees it: ``"float32, shares memory: True"``, or the error's class
    and the first line of its message (``"BufferError: Can't export tensors that require gradient, ..."``, at most
    70 characters of it), since the message names the fix. For the refusals of chapter 3's table (a tensor that
    requires grad, a bool tensor); :func:`outcome` gives the error's class alone.

    >>> import numpy as np
    >>> values = np.arange(4, dtype=np.float32)
    >>> outcome_in_words(np.asarray, values), outcome_in_words(lambda a: a.astype(np.int8), values)
    ('float32, shares memory: True', 'int8, shares memory: False')
    >>> outcome_in_words(lambda a: a.reshape(3), values)
    'ValueError: cannot reshape array of size 4 into shape (3,)'
    """
    try:
        got = consume(source)
    except Exception as error:  # the libraries raise many kinds; the message is what the reader sees
        lines = str(error).splitlines()
        return f"{type(error).__name__}: {lines[0][:70]}" if lines else type(error).__name__
    return f"{got.dtype}, shares memory: {same_memory(got, source)}"


def handoff_outcome(obj, to: str) -> str:
    """What the recommended call from :func:`route` actually does with ``obj`` (see :func:`outcome`). Measured,
    so it can be checked against :func:`obstacle`."""
    _, call = route(framework_of(obj), to)
    return outcome(lambda: call(obj), obj)


def aligned_host_array(count: int, dtype="float32", alignment: int = JAX_ALIGNMENT):
    """A NumPy array of ``count`` values 0, 1, 2, ... whose first element sits on an ``alignment``-byte boundary.

    NumPy guarantees only 16-byte alignment, so whether JAX on the CPU can share a fresh NumPy array is
    chance; this makes it a decision.
    """
    itemsize = np.dtype(dtype).itemsize
    raw = np.empty(count * itemsize + alignment, dtype=np.uint8)
    start = (-raw.ctypes.data) % alignment
    array = raw[start : start + count * itemsize].view(dtype)
    array[:] = np.arange(count)
    return array
