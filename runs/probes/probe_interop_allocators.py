"""Probes of what the book's libraries really do, run on the GPU host before chapters 3-5 were rewritten.

Each section checks one mechanism the chapters explain (the upstream sources are cited in the chapters); the
results are printed and written as JSON to the folder given as the first argument. Sections that change
process-wide settings run in a fresh process. Nothing here allocates managed memory beyond a few MiB.

    python runs/probes/probe_interop_allocators.py OUT_DIR
"""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys
import time
import traceback
import warnings

RESULTS: dict = {}


def section(name):
    def wrap(fn):
        def run():
            started = time.perf_counter()
            try:
                RESULTS[name] = fn()
            except Exception as error:  # noqa: BLE001
                RESULTS[name] = {"error": f"{type(error).__name__}: {error}", "trace": traceback.format_exc()[-1500:]}
            print(f"== {name} ({time.perf_counter() - started:.1f} s)")
            print(json.dumps(RESULTS[name], indent=1, default=str)[:4000], flush=True)

        run.__name__ = name
        SECTIONS.append(run)
        return run

    return wrap


SECTIONS = []


def fresh(code: str, env: dict | None = None, timeout: float = 120) -> dict:
    """Run code in a fresh Python; it prints one JSON line last."""
    environment = {**os.environ, **(env or {})}
    for key, value in list(environment.items()):
        if value is None:
            environment.pop(key)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=environment, timeout=timeout)
    lines = done.stdout.strip().splitlines()
    try:
        found = json.loads(lines[-1])
    except Exception:  # noqa: BLE001
        found = {"stdout": done.stdout[-1500:]}
    found["returncode"] = done.returncode
    if done.returncode or "Warning" in done.stderr:
        found["stderr"] = done.stderr[-1500:]
    return found


@section("versions")
def versions():
    import importlib.metadata as md

    names = ["cuda-core", "cuda-bindings", "numba-cuda", "numba", "cupy-cuda13x", "torch", "jax", "jaxlib",
             "cudf-cu13", "pylibcudf-cu13", "rmm-cu13", "polars", "cudf-polars-cu13", "pyarrow", "nvidia-ml-py"]
    found = {}
    for name in names:
        try:
            found[name] = md.version(name)
        except md.PackageNotFoundError:
            found[name] = None
    try:
        found["cudf-polars requires polars"] = [r for r in md.requires("cudf-polars-cu13") if r.startswith("polars")]
    except Exception as error:  # noqa: BLE001
        found["cudf-polars requires polars"] = str(error)
    return found


@section("numba_launch_dlpack_streams")
def numba_launch_dlpack_streams():
    import cupy as cp
    import numba.cuda as nc

    class Spy:
        def __init__(self, a):
            self.a, self.seen = a, []

        def __dlpack__(self, **kw):
            self.seen.append({k: (v if not isinstance(v, tuple) else list(v)) for k, v in kw.items()})
            return self.a.__dlpack__(**kw)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    @nc.jit
    def bump(x):
        x[0] += 1

    a = cp.zeros(4, dtype=cp.float32)
    spy = Spy(a)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        bump[1, 1](spy)
        nc.synchronize()
    default_seen = list(spy.seen)
    spy.seen.clear()
    stream = nc.stream()
    bump[1, 1, stream](spy)
    stream.synchronize()
    return {
        "default stream: __dlpack__ called with": default_seen,
        "numba stream: __dlpack__ called with": spy.seen,
        "numba stream handle": int(stream.handle.value) if hasattr(stream.handle, "value") else str(stream.handle),
        "warnings": [str(w.message)[:100] for w in caught],
        "value after two launches": float(a[0]),
    }


CAI_SYNC_CODE = r"""
import json, time
import cupy as cp
import numba.cuda as nc
from numba.cuda.cudadrv import driver
calls = []
original = driver.Stream.synchronize
def counting(self):
    calls.append(1)
    return original(self)
driver.Stream.synchronize = counting
class CaiOnly:
    def __init__(self, a, stream): self.a, self.stream = a, stream
    @property
    def __cuda_array_interface__(self):
        d = dict(self.a.__cuda_array_interface__); d["stream"] = self.stream.ptr; return d
@nc.jit
def bump(x):
    x[0] += 1
s = cp.cuda.Stream(non_blocking=True)
a = cp.zeros(4, dtype=cp.float32)
wrapped = CaiOnly(a, s)
bump[1, 1](wrapped); nc.synchronize()
calls.clear()
for _ in range(10):
    bump[1, 1](wrapped)
nc.synchronize()
launch_syncs = len(calls)
calls.clear()
v = nc.as_cuda_array(wrapped); as_syncs = len(calls); calls.clear()
v2 = nc.as_cuda_array(wrapped, sync=False); as_nosync = len(calls)
print(json.dumps({"synchronize calls in 10 launches with a CAI-only argument": launch_syncs,
                  "as_cuda_array(sync=True) synchronize calls": as_syncs,
                  "as_cuda_array(sync=False) synchronize calls": as_nosync}))
"""


@section("numba_cai_sync_variable")
def numba_cai_sync_variable():
    return {
        "NUMBA_CUDA_ARRAY_INTERFACE_SYNC=1": fresh(CAI_SYNC_CODE, {"NUMBA_CUDA_ARRAY_INTERFACE_SYNC": "1"}),
        "NUMBA_CUDA_ARRAY_INTERFACE_SYNC=0": fresh(CAI_SYNC_CODE, {"NUMBA_CUDA_ARRAY_INTERFACE_SYNC": "0"}),
    }


RACE_CODE = r"""
import json, os, sys
import cupy as cp, torch, numba.cuda as nc
import jax, jax.numpy as jnp
from support.bench import gpu_sleeper
sleep = gpu_sleeper()
N = 1 << 22
TRIES = int(os.environ.get("TRIES", "10"))
@nc.jit
def total_kernel(x, out):
    i = nc.grid(1)
    if i < x.size:
        nc.atomic.add(out, 0, x[i])
def produce():
    x = cp.zeros(N, dtype=cp.float32); cp.cuda.Device().synchronize()
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        sleep(0.02)
        x.fill(1.0)
    return x, s
routes = {}
def route(name):
    def wrap(fn):
        routes[name] = fn; return fn
    return wrap
@route("torch.from_dlpack(x) inside `with s`")
def _(x, s):
    with s:
        t = torch.from_dlpack(x)
    return float(t.sum())
@route("torch.from_dlpack(x) after leaving `with s`")
def _(x, s):
    t = torch.from_dlpack(x)
    return float(t.sum())
@route("torch.as_tensor(x) inside `with s` (CAI)")
def _(x, s):
    with s:
        t = torch.as_tensor(x, device="cuda")
    return float(t.sum())
@route("jnp.from_dlpack(x) inside `with s`")
def _(x, s):
    with s:
        j = jnp.from_dlpack(x)
    return float(j.sum())
@route("jnp.asarray(x) inside `with s` (CAI)")
def _(x, s):
    with s:
        j = jnp.asarray(x)
    return float(j.sum())
@route("nc.as_cuda_array(x) inside `with s`, then a kernel")
def _(x, s):
    with s:
        v = nc.as_cuda_array(x)
    out = nc.device_array(1, dtype="float32"); out[0] = 0
    total_kernel[(N + 255) // 256, 256](v, out); return float(out.copy_to_host()[0])
@route("nc.as_cuda_array(x, sync=False) inside `with s`, then a kernel")
def _(x, s):
    with s:
        v = nc.as_cuda_array(x, sync=False)
    out = nc.device_array(1, dtype="float32"); out[0] = 0
    total_kernel[(N + 255) // 256, 256](v, out); return float(out.copy_to_host()[0])
@route("a Numba kernel launched on x inside `with s` (DLPack)")
def _(x, s):
    out = nc.device_array(1, dtype="float32"); out[0] = 0
    with s:
        total_kernel[(N + 255) // 256, 256](x, out)
    return float(out.copy_to_host()[0])
@route("cupy (the producer) itself, on the default stream")
def _(x, s):
    return float(x.sum())
@route("control: s.synchronize() first, then torch.as_tensor(x)")
def _(x, s):
    s.synchronize()
    return float(torch.as_tensor(x, device="cuda").sum())
results = {}
for name, fn in routes.items():
    wrong = 0
    for _ in range(TRIES):
        x, s = produce()
        got = fn(x, s)
        if got != float(N):
            wrong += 1
        s.synchronize(); cp.cuda.Device().synchronize()
    results[name] = wrong
print(json.dumps({"tries per route": TRIES, "wrong answers per route": results}))
"""


@section("stream_races")
def stream_races():
    return fresh(RACE_CODE, {"XLA_PYTHON_CLIENT_PREALLOCATE": "false", "TRIES": "10"}, timeout=240)


@section("cuda_stream_protocol")
def cuda_stream_protocol():
    import cupy as cp
    import torch

    ts = torch.cuda.Stream()
    found = {"torch.cuda.Stream has __cuda_stream__": hasattr(ts, "__cuda_stream__")}
    if found["torch.cuda.Stream has __cuda_stream__"]:
        found["torch __cuda_stream__()"] = list(ts.__cuda_stream__())
    wrapped = cp.cuda.Stream.from_external(ts)
    found["cupy.cuda.Stream.from_external(torch stream).ptr == torch stream"] = wrapped.ptr == ts.cuda_stream
    found["cupy stream has __cuda_stream__"] = hasattr(cp.cuda.Stream(), "__cuda_stream__")
    return found


@section("cuda_core_views")
def cuda_core_views():
    import cuda.core
    import cudf
    import cupy as cp
    import jax.numpy as jnp
    import numba.cuda as nc
    import torch
    from cuda.core.utils import StridedMemoryView, args_viewable_as_strided_memory

    found = {"cuda.core": cuda.core.__version__}
    device = cuda.core.Device()
    device.set_current()
    stream = device.create_stream()
    handle = int(stream.handle)
    producers = {
        "CuPy": cp.arange(1024, dtype=cp.float32),
        "PyTorch": torch.arange(1024, dtype=torch.float32, device="cuda"),
        "JAX": jnp.arange(1024, dtype=jnp.float32),
        "Numba": nc.to_device(__import__("numpy").arange(1024, dtype="float32")),
        "cuDF column": cudf.Series(range(1024), dtype="float32"),
    }
    from support.interop import device_pointer

    views = {}
    for name, obj in producers.items():
        try:
            view = StridedMemoryView.from_any_interface(obj, stream_ptr=handle)
            views[name] = {"same pointer": view.ptr == device_pointer(obj), "shape": list(view.shape),
                           "dtype": str(view.dtype), "readonly": bool(view.readonly)}
        except Exception as error:  # noqa: BLE001
            views[name] = f"{type(error).__name__}: {str(error)[:150]}"
    found["from_any_interface"] = views

    @args_viewable_as_strided_memory((0,))
    def pointer_of(x):
        return x.view(handle).ptr

    found["args_viewable_as_strided_memory on CuPy"] = pointer_of(producers["CuPy"]) == producers["CuPy"].data.ptr
    # cost per call, wall clock
    timings = {}
    for name, obj in producers.items():
        if not isinstance(views[name], dict):
            continue
        start = time.perf_counter()
        for _ in range(2000):
            StridedMemoryView.from_any_interface(obj, stream_ptr=handle)
        timings[name] = (time.perf_counter() - start) / 2000 * 1e6
    found["µs per view"] = timings
    routes = {
        "torch.from_dlpack(cupy)": lambda: torch.from_dlpack(producers["CuPy"]),
        "cupy.from_dlpack(torch)": lambda: cp.from_dlpack(producers["PyTorch"]),
        "torch.as_tensor(cudf column)": lambda: torch.as_tensor(producers["cuDF column"], device="cuda"),
        "cupy.asarray(cudf column)": lambda: cp.asarray(producers["cuDF column"]),
        "jnp.from_dlpack(cupy)": lambda: jnp.from_dlpack(producers["CuPy"]),
    }
    per_route = {}
    for name, fn in routes.items():
        fn()
        start = time.perf_counter()
        for _ in range(2000):
            fn()
        per_route[name] = (time.perf_counter() - start) / 2000 * 1e6
    found["µs per library route"] = per_route
    return found


class DLVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersionedHead(ctypes.Structure):
    _fields_ = [("version", DLVersion), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p),
                ("flags", ctypes.c_uint64)]


def capsule_facts(capsule):
    pyapi = ctypes.pythonapi
    pyapi.PyCapsule_GetName.restype = ctypes.c_char_p
    pyapi.PyCapsule_GetName.argtypes = [ctypes.py_object]
    name = pyapi.PyCapsule_GetName(capsule).decode()
    facts = {"capsule": name}
    if name == "dltensor_versioned":
        pyapi.PyCapsule_GetPointer.restype = ctypes.c_void_p
        pyapi.PyCapsule_GetPointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
        pointer = pyapi.PyCapsule_GetPointer(capsule, b"dltensor_versioned")
        head = DLManagedTensorVersionedHead.from_address(pointer)
        facts.update(version=f"{head.version.major}.{head.version.minor}", read_only=bool(head.flags & 1),
                     is_copied=bool(head.flags & 2))
    return facts


@section("dlpack_1x")
def dlpack_1x():
    import cupy as cp
    import jax.numpy as jnp
    import torch

    found = {}
    for name, array in {"CuPy": cp.ones(4), "PyTorch": torch.ones(4, device="cuda"), "JAX": jnp.ones(4)}.items():
        entry = {}
        for label, kwargs in {"max_version=(1, 0)": {"max_version": (1, 0)}, "no max_version": {}}.items():
            try:
                entry[label] = capsule_facts(array.__dlpack__(**kwargs))
            except Exception as error:  # noqa: BLE001
                entry[label] = f"{type(error).__name__}: {str(error)[:120]}"
        try:
            entry["to host, copy=True"] = capsule_facts(array.__dlpack__(max_version=(1, 0), dl_device=(1, 0), copy=True))
        except Exception as error:  # noqa: BLE001
            entry["to host, copy=True"] = f"{type(error).__name__}: {str(error)[:120]}"
        entry["__dlpack_device__"] = list(array.__dlpack_device__())
        found[name] = entry
    managed = cp.cuda.malloc_managed(4 << 20)
    found["CuPy managed array __dlpack_device__ (13 = kDLCUDAManaged)"] = list(
        cp.ndarray(1 << 20, dtype=cp.float32, memptr=managed).__dlpack_device__())
    found["torch.Tensor has __dlpack_c_exchange_api__"] = hasattr(torch.Tensor, "__dlpack_c_exchange_api__")

    class OldProducer:  # a producer from before DLPack 1.0: no max_version, copy or dl_device keywords
        def __init__(self, a):
            self.a = a

        def __dlpack__(self, stream=None):
            return self.a.__dlpack__(stream=stream)

        def __dlpack_device__(self):
            return self.a.__dlpack_device__()

    old = OldProducer(cp.arange(4.0))
    for consumer, take in {"torch": torch.from_dlpack, "cupy": cp.from_dlpack, "jax": jnp.from_dlpack}.items():
        try:
            taken = take(old)
            found[f"{consumer} from an old producer"] = "works"
            del taken
        except Exception as error:  # noqa: BLE001
            found[f"{consumer} from an old producer"] = f"{type(error).__name__}: {str(error)[:120]}"
    return found


@section("copy_keyword")
def copy_keyword():
    import cupy as cp
    import jax.numpy as jnp
    import torch

    cases = {
        "cupy.from_dlpack(cupy, copy=True)": lambda: cp.from_dlpack(cp.ones(3), copy=True),
        "torch.from_dlpack(cupy, copy=True)": lambda: torch.from_dlpack(cp.ones(3), copy=True),
        "torch.from_dlpack(torch, copy=True)": lambda: torch.from_dlpack(torch.ones(3, device="cuda"), copy=True),
        "jnp.from_dlpack(cupy, copy=True)": lambda: jnp.from_dlpack(cp.ones(3), copy=True),
        "jnp.from_dlpack(jax, copy=True)": lambda: jnp.from_dlpack(jnp.ones(3), copy=True),
        "cupy.from_dlpack(torch, copy=False)": lambda: cp.from_dlpack(torch.ones(3, device="cuda"), copy=False),
        "torch.from_dlpack(cupy, copy=False)": lambda: torch.from_dlpack(cp.ones(3), copy=False),
        "cupy.from_dlpack(jax, copy=False)": lambda: cp.from_dlpack(jnp.ones(3), copy=False),
    }
    found = {}
    for name, fn in cases.items():
        try:
            fn()
            found[name] = "works"
        except Exception as error:  # noqa: BLE001
            found[name] = f"{type(error).__name__}: {str(error)[:200]}"
    return found


@section("arrow_c_device")
def arrow_c_device():
    import cudf
    import pyarrow as pa
    import pylibcudf as plc

    series = cudf.Series([1.0, 2.0, 3.0])
    found = {"cudf.Series has __arrow_c_device_array__": hasattr(series, "__arrow_c_device_array__"),
             "cudf.Series has __dlpack__": hasattr(series, "__dlpack__"),
             "cudf CAI keys": sorted(series.__cuda_array_interface__)}
    column = series._column.to_pylibcudf()
    found["pylibcudf.Column has __arrow_c_device_array__"] = hasattr(column, "__arrow_c_device_array__")
    try:
        back = plc.Column.from_arrow(column)
        found["pylibcudf.Column.from_arrow(column): same data pointer"] = back.data().ptr == column.data().ptr
    except Exception as error:  # noqa: BLE001
        found["pylibcudf.Column.from_arrow(column)"] = f"{type(error).__name__}: {str(error)[:200]}"
    try:
        pa.array(column)
        found["pyarrow.array(pylibcudf column)"] = "works"
    except Exception as error:  # noqa: BLE001
        found["pyarrow.array(pylibcudf column)"] = f"{type(error).__name__}: {str(error)[:200]}"
    return found


CUDF_PANDAS_CODE = r"""
import json
import cudf.pandas
cudf.pandas.install()
import pandas as pd, rmm, cupy as cp, torch
found = {"resource": repr(rmm.mr.get_current_device_resource())[:200]}
s = pd.Series([1.0, 2.0, 3.0] * 1000)
found["proxy type"] = type(s).__module__ + "." + type(s).__name__
g = s.as_gpu_object()
found["as_gpu_object type"] = type(g).__module__ + "." + type(g).__name__
a = cp.asarray(s)
found["cupy.asarray(proxy) same pointer"] = a.data.ptr == g.__cuda_array_interface__["data"][0]
a[0] = 9.0
found["write seen by the proxy"] = float(s.iloc[0])
t = torch.as_tensor(s, device="cuda")
found["torch.as_tensor(proxy) same pointer"] = t.data_ptr() == a.data.ptr
try:
    torch.from_dlpack(s); found["torch.from_dlpack(proxy)"] = "works"
except Exception as e:
    found["torch.from_dlpack(proxy)"] = f"{type(e).__name__}: {str(e)[:120]}"
print(json.dumps(found))
"""


@section("cudf_pandas")
def cudf_pandas():
    return {"defaults": fresh(CUDF_PANDAS_CODE), "under the one pool first": fresh(
        "from support.memory import use_one_pool; use_one_pool()\n" + CUDF_PANDAS_CODE)}


POLARS_CODE = r"""
import json, time
import numpy as np, polars as pl, rmm, torch
stats = rmm.mr.StatisticsResourceAdaptor(rmm.mr.PoolMemoryResource(rmm.mr.CudaMemoryResource(), initial_pool_size=2**30))
rmm.mr.set_current_device_resource(stats)
n = 10_000_000
rng = np.random.default_rng(0)
frame = pl.DataFrame({"x": rng.random(n), "y": rng.integers(0, 1000, n)}).lazy()
query = frame.group_by("y").agg(pl.col("x").mean()).sort("y")
engine = pl.GPUEngine(memory_resource=stats, raise_on_fail=True)
found = {}
gpu = query.collect(engine=engine)
cpu = query.collect()
found["same answer"] = bool(np.allclose(gpu["x"].to_numpy(), cpu["x"].to_numpy()))
found["the pool saw allocations"] = stats.allocation_counts.total_count > 0
found["current resource restored"] = rmm.mr.get_current_device_resource() is stats
def median(fn, k=5):
    ts = []
    for _ in range(k):
        s = time.perf_counter(); fn(); ts.append(time.perf_counter() - s)
    return sorted(ts)[k // 2]
found["gpu collect s"] = median(lambda: query.collect(engine=engine))
found["cpu collect s"] = median(lambda: query.collect())
found["result type"] = type(gpu).__name__
found["to torch (host frame -> GPU tensor) s"] = median(lambda: torch.from_numpy(gpu.to_numpy()).cuda())
print(json.dumps(found))
"""


@section("polars_gpu")
def polars_gpu():
    return fresh(POLARS_CODE, timeout=200)


@section("renamed_settings")
def renamed_settings():
    code_torch = ("import json, warnings\nwarnings.simplefilter('error')\nimport torch\n"
                  "x = torch.ones(1, device='cuda')\n"
                  "print(json.dumps({'settings': torch._C._accelerator_getAllocatorSettings() "
                  "if hasattr(torch._C, '_accelerator_getAllocatorSettings') else 'n/a', "
                  "'backend': torch.cuda.memory.get_allocator_backend()}))")
    code_jax = "import json, jax\njax.devices()\nprint(json.dumps({'devices': str(jax.devices())}))"
    return {
        "torch, PYTORCH_ALLOC_CONF=backend:cudaMallocAsync": fresh(code_torch, {"PYTORCH_ALLOC_CONF": "backend:cudaMallocAsync", "PYTORCH_CUDA_ALLOC_CONF": None}),
        "torch, PYTORCH_CUDA_ALLOC_CONF=backend:cudaMallocAsync": fresh(code_torch, {"PYTORCH_CUDA_ALLOC_CONF": "backend:cudaMallocAsync", "PYTORCH_ALLOC_CONF": None}),
        "jax, both fractions": fresh(code_jax, {"XLA_CLIENT_MEM_FRACTION": ".05", "XLA_PYTHON_CLIENT_MEM_FRACTION": ".05", "XLA_PYTHON_CLIENT_PREALLOCATE": "true"}),
        "jax, XLA_CLIENT_MEM_FRACTION only": fresh(code_jax + "\nimport jax.numpy as jnp\nprint(json.dumps({'limit': jax.devices()[0].memory_stats()['bytes_limit']}))", {"XLA_CLIENT_MEM_FRACTION": ".05", "XLA_PYTHON_CLIENT_MEM_FRACTION": None, "XLA_PYTHON_CLIENT_PREALLOCATE": "true"}),
    }


WARNINGS_CODE = r"""
import json, warnings
warnings.simplefilter("error", DeprecationWarning)
warnings.simplefilter("error", FutureWarning)
found = {}
for name in ["cupy", "cudf", "rmm", "numba", "numba.cuda", "torch", "jax", "jax.numpy", "polars", "pyarrow"]:
    try:
        __import__(name); found[name] = "imports clean"
    except Exception as e:
        found[name] = f"{type(e).__name__}: {str(e)[:200]}"
print(json.dumps(found))
"""


@section("warnings_as_errors_at_import")
def warnings_as_errors_at_import():
    return fresh(WARNINGS_CODE)


RETURNED_CODE = r"""
import json, rmm, rmm.mr as mr, cupy as cp
def free():
    return cp.cuda.runtime.memGetInfo()[0]
kinds = {
    "cudaMalloc": lambda: mr.CudaMemoryResource(),
    "pool": lambda: mr.PoolMemoryResource(mr.CudaMemoryResource(), initial_pool_size=0),
    "async, default threshold": lambda: mr.CudaAsyncMemoryResource(),
    "async, release_threshold=0": lambda: mr.CudaAsyncMemoryResource(release_threshold=0),
}
found = {"async docstring": (mr.CudaAsyncMemoryResource.__doc__ or "")[:1500]}
for name, make in kinds.items():
    resource = make()
    mr.set_current_device_resource(resource)
    before = free()
    buffers = [rmm.DeviceBuffer(size=1 << 30) for _ in range(4)]
    at_peak = free()
    del buffers
    cp.cuda.runtime.deviceSynchronize()
    after = free()
    found[name] = {"held at the peak GiB": (before - at_peak) / 2**30, "still held after free and sync GiB": (before - after) / 2**30}
    mr.set_current_device_resource(mr.CudaMemoryResource())
    del resource
try:
    managed = mr.experimental.CudaAsyncManagedMemoryResource()
    mr.set_current_device_resource(managed)
    b = rmm.DeviceBuffer(size=1 << 24); b.prefetch()
    found["experimental.CudaAsyncManagedMemoryResource"] = "works"
except Exception as e:
    found["experimental.CudaAsyncManagedMemoryResource"] = f"{type(e).__name__}: {str(e)[:200]}"
lim = mr.LimitingResourceAdaptor(mr.CudaMemoryResource(), allocation_limit=1000)
mr.set_current_device_resource(lim)
a = rmm.DeviceBuffer(size=100)
found["limiting adaptor counts a 100 B request as"] = lim.get_allocated_bytes()
print(json.dumps(found))
"""


@section("memory_returned")
def memory_returned():
    return fresh(RETURNED_CODE)


MEMPOOL_CODE = r"""
import json, os, torch, rmm, rmm.mr as mr
from rmm.allocators.torch import rmm_torch_allocator
setup = os.environ["SETUP"]
found = {"setup": setup}
if setup.startswith("all-RMM"):
    base = mr.CudaAsyncMemoryResource() if "async" in setup else mr.PoolMemoryResource(mr.CudaMemoryResource(), initial_pool_size=2**30)
    stats = mr.StatisticsResourceAdaptor(base); mr.set_current_device_resource(stats)
    torch.cuda.memory.change_current_allocator(rmm_torch_allocator)
else:
    base = mr.CudaAsyncMemoryResource() if "async" in setup else mr.PoolMemoryResource(mr.CudaMemoryResource(), initial_pool_size=2**30)
    stats = mr.StatisticsResourceAdaptor(base); mr.set_current_device_resource(stats)
pool = None
if setup.startswith("MemPool"):
    pool = torch.cuda.MemPool(allocator=rmm_torch_allocator.allocator())
    before = stats.allocation_counts.current_bytes
    with torch.cuda.use_mem_pool(pool):
        exchanged = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
    found["RMM saw the MemPool tensor (bytes)"] = stats.allocation_counts.current_bytes - before
outside_before = stats.allocation_counts.current_bytes
plain = torch.empty(64 << 20, dtype=torch.uint8, device="cuda")
found["RMM saw a tensor outside the pool (bytes)"] = stats.allocation_counts.current_bytes - outside_before
try:
    found["torch.cuda.max_memory_allocated"] = torch.cuda.max_memory_allocated()
except Exception as e:
    found["torch.cuda.max_memory_allocated"] = f"{type(e).__name__}: {str(e)[:100]}"
x = torch.randn(1 << 20, device="cuda")
s = torch.cuda.Stream(); s.wait_stream(torch.cuda.current_stream())
with torch.cuda.stream(s):
    y = (x * 2).sin()
torch.cuda.current_stream().wait_stream(s)
g = torch.cuda.CUDAGraph()
try:
    with torch.cuda.graph(g):
        y = (x * 2).sin()
    g.replay(); torch.cuda.synchronize()
    found["CUDA graph capture"] = "works" if torch.allclose(y, (x * 2).sin()) else "wrong result"
except Exception as e:
    found["CUDA graph capture"] = f"{type(e).__name__}: {str(e)[:150]}"
import cudf
col = cudf.Series(range(1 << 20), dtype="float32")
t = torch.as_tensor(col, device="cuda")
found["cuDF column -> torch same pointer"] = t.data_ptr() == col.__cuda_array_interface__["data"][0]
print(json.dumps(found), flush=True)
os._exit(0)
"""


@section("pytorch_setups")
def pytorch_setups():
    return {setup: fresh(MEMPOOL_CODE, {"SETUP": setup}) for setup in
            ("torch's own", "all-RMM pool", "all-RMM async", "MemPool(RMM pool)", "MemPool(RMM async)")}


@section("managed_memory_cuda13")
def managed_memory_cuda13():
    import cupy as cp
    from cupy.cuda import runtime as rt

    found = {}
    memory = cp.cuda.malloc_managed(1 << 20)
    stream = cp.cuda.Stream()
    for device in (0, rt.cudaCpuDeviceId):
        try:
            rt.memPrefetchAsync(memory.ptr, 1 << 20, device, stream.ptr)
            stream.synchronize()
            found[f"cupy memPrefetchAsync to {device}"] = "works"
        except Exception as error:  # noqa: BLE001
            found[f"cupy memPrefetchAsync to {device}"] = f"{type(error).__name__}: {str(error)[:150]}"
    for advice_name in ("cudaMemAdviseSetReadMostly", "cudaMemAdviseSetPreferredLocation", "cudaMemAdviseSetAccessedBy"):
        for device in (0, rt.cudaCpuDeviceId):
            try:
                rt.memAdvise(memory.ptr, 1 << 20, getattr(rt, advice_name), device)
                found[f"cupy memAdvise {advice_name} {device}"] = "works"
            except Exception as error:  # noqa: BLE001
                found[f"cupy memAdvise {advice_name} {device}"] = f"{type(error).__name__}: {str(error)[:120]}"
    try:
        import cuda.core as cc
        import cuda.core.utils as cu

        found["cuda.core has ManagedBuffer"] = hasattr(cc, "ManagedBuffer")
        found["cuda.core.utils has prefetch_batch"] = hasattr(cu, "prefetch_batch")
        device = cc.Device()
        device.set_current()
        st = device.create_stream()
        buffer = cc.ManagedMemoryResource().allocate(1 << 20, stream=st)
        buffer.prefetch(cc.Host(), stream=st)
        buffer.prefetch(device, stream=st)
        st.sync()
        found["cuda.core ManagedBuffer.prefetch host and device"] = "works"
        buffers = [cc.ManagedMemoryResource().allocate(1 << 20, stream=st) for _ in range(4)]
        cu.prefetch_batch(st, buffers, [device] * 4)
        st.sync()
        found["cuda.core prefetch_batch"] = "works"
    except Exception as error:  # noqa: BLE001
        found["cuda.core managed"] = f"{type(error).__name__}: {str(error)[:200]}"
    attrs = {}
    for name in ("cudaDevAttrPageableMemoryAccess", "cudaDevAttrConcurrentManagedAccess",
                 "cudaDevAttrPageableMemoryAccessUsesHostPageTables"):
        try:
            attrs[name] = rt.deviceGetAttribute(getattr(rt, name), 0)
        except Exception as error:  # noqa: BLE001
            attrs[name] = str(error)
    found["attributes"] = attrs
    try:
        import rmm.mr as mr

        mr.SystemMemoryResource()
        found["rmm SystemMemoryResource"] = "constructed"
    except Exception as error:  # noqa: BLE001
        found["rmm SystemMemoryResource"] = f"{type(error).__name__}: {str(error)[:150]}"
    smi = subprocess.run(["nvidia-smi", "-q"], capture_output=True, text=True).stdout
    found["nvidia-smi -q addressing"] = [line.strip() for line in smi.splitlines() if "Addressing" in line]
    return found


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    only = set(sys.argv[2:])
    for run in SECTIONS:
        if only and run.__name__ not in only:
            continue
        run()
        with open(os.path.join(out, "probe_interop_allocators.json"), "w") as handle:
            json.dump(RESULTS, handle, indent=1, default=str)
