"""Which GPU and which GPU stack this machine has, and the banner every chapter starts with.

The GPU is found through the CUDA driver API (``libcuda``) with :mod:`ctypes`, so this module needs no GPU
library and works, reporting "no GPU", on a laptop or a CPU-only CI machine. Library versions are read from
package metadata without importing the libraries: importing cuDF or PyTorch has side effects (CUDA contexts,
allocators) that a chapter may want to control itself.

Examples
--------
>>> from support import env
>>> print(env.banner_text(env.GpuProbe(problem="no NVIDIA driver"), {"cupy": None}).splitlines()[0])
No usable CUDA GPU: no NVIDIA driver
>>> env.banner()  # doctest: +SKIP
GPU 0: NVIDIA H100 80GB HBM3 · 79.2 GiB · compute capability 9.0 · 132 SMs
driver 580.159.04 (supports CUDA up to 13.0) · CUDA runtime 13.0
Python 3.12.3 · cudf 26.10.2 · rmm 26.10.0 · cupy 14.2.0 · numba 0.68.0 · numba-cuda 0.30.4 · torch 2.11.0 · ...
"""

from __future__ import annotations

import ctypes
import functools
import importlib.metadata
import importlib.util
import os
import platform
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from support.units import GIB

__all__ = [
    "GPU_LIBRARIES",
    "GPU_STACK",
    "BANNER_GPU_LINE",
    "Gpu",
    "GpuProbe",
    "GpuUnavailableError",
    "CardMemory",
    "banner",
    "card_memory",
    "banner_text",
    "cpu_description",
    "missing_modules",
    "probe_gpus",
    "memory_this_process_sees",
    "require_gpu",
    "stack_versions",
]

#: The libraries the book is about, in the order the banner lists them: import name -> the pip distribution that
#: installs it (pip's CUDA builds carry a suffix; conda's packages are named as they are imported).
GPU_LIBRARIES: dict[str, str] = {
    "cudf": "cudf-cu13",
    "rmm": "rmm-cu13",
    "cupy": "cupy-cuda13x",
    "numba": "numba",
    "numba_cuda": "numba-cuda",
    "torch": "torch",
    "jax": "jax",
    "numpy": "numpy",
}
#: Their import names.
GPU_STACK: tuple[str, ...] = tuple(GPU_LIBRARIES)

#: How the banner's GPU line starts; notebook checks look for it to know outputs came from a GPU run.
BANNER_GPU_LINE = r"^GPU \d+: NVIDIA "


# CUDA driver API constants (cuda.h).
_CUDA_SUCCESS = 0
_ATTR_MULTIPROCESSOR_COUNT = 16
_ATTR_COMPUTE_CAPABILITY_MAJOR = 75
_ATTR_COMPUTE_CAPABILITY_MINOR = 76


class GpuUnavailableError(RuntimeError):
    """No usable CUDA GPU: the message says why and what to do."""


@dataclass(frozen=True)
class Gpu:
    """One CUDA device as the driver reports it."""

    index: int
    name: str
    memory_bytes: int
    compute_capability: tuple[int, int]
    multiprocessors: int

    @property
    def memory_gib(self) -> float:
        return self.memory_bytes / GIB


@dataclass(frozen=True)
class GpuProbe:
    """What :func:`probe_gpus` found: the devices, the driver, or the reason there is no usable GPU."""

    gpus: tuple[Gpu, ...] = ()
    cuda_version: str | None = None  # the newest CUDA version the driver supports, e.g. "13.0"
    driver_version: str | None = None  # the NVIDIA driver release, e.g. "580.159.04"
    problem: str | None = None  # why no GPU is usable, in words; None when one is

    @property
    def available(self) -> bool:
        return self.problem is None and bool(self.gpus)


class _CudaDriver:
    """The few calls of the CUDA driver API that :func:`probe_gpus` needs, over ctypes."""

    def __init__(self, library: str = "libcuda.so.1"):
        self._lib = ctypes.CDLL(library)

    def _check(self, result: int, call: str) -> None:
        if result != _CUDA_SUCCESS:
            name = ctypes.c_char_p()
            self._lib.cuGetErrorName(result, ctypes.byref(name))
            label = name.value.decode() if name.value else f"error {result}"
            raise OSError(f"{call} failed with {label}")

    def init(self) -> None:
        self._check(self._lib.cuInit(0), "cuInit")

    def version(self) -> int:
        value = ctypes.c_int()
        self._check(self._lib.cuDriverGetVersion(ctypes.byref(value)), "cuDriverGetVersion")
        return value.value

    def device_count(self) -> int:
        value = ctypes.c_int()
        self._check(self._lib.cuDeviceGetCount(ctypes.byref(value)), "cuDeviceGetCount")
        return value.value

    def memory_info(self, index: int) -> tuple[int, int]:
        """Free and total bytes of device ``index`` as this process sees them, in its primary context."""
        device, context = ctypes.c_int(), ctypes.c_void_p()
        self._check(self._lib.cuDeviceGet(ctypes.byref(device), index), "cuDeviceGet")
        self._check(self._lib.cuDevicePrimaryCtxRetain(ctypes.byref(context), device), "cuDevicePrimaryCtxRetain")
        self._check(self._lib.cuCtxPushCurrent_v2(context), "cuCtxPushCurrent")
        try:
            free, total = ctypes.c_size_t(), ctypes.c_size_t()
            self._check(self._lib.cuMemGetInfo_v2(ctypes.byref(free), ctypes.byref(total)), "cuMemGetInfo")
        finally:
            self._lib.cuCtxPopCurrent_v2(ctypes.byref(context))
        return free.value, total.value

    def device(self, index: int) -> Gpu:
        handle = ctypes.c_int()
        self._check(self._lib.cuDeviceGet(ctypes.byref(handle), index), "cuDeviceGet")
        name = ctypes.create_string_buffer(256)
        self._check(self._lib.cuDeviceGetName(name, len(name), handle), "cuDeviceGetName")
        memory = ctypes.c_size_t()
        self._check(self._lib.cuDeviceTotalMem_v2(ctypes.byref(memory), handle), "cuDeviceTotalMem")

        def attribute(code: int) -> int:
            value = ctypes.c_int()
            self._check(self._lib.cuDeviceGetAttribute(ctypes.byref(value), code, handle), "cuDeviceGetAttribute")
            return value.value

        return Gpu(
            index=index,
            name=name.value.decode(),
            memory_bytes=memory.value,
            compute_capability=(attribute(_ATTR_COMPUTE_CAPABILITY_MAJOR), attribute(_ATTR_COMPUTE_CAPABILITY_MINOR)),
            multiprocessors=attribute(_ATTR_MULTIPROCESSOR_COUNT),
        )


def _nvml():
    """NVIDIA's management library through ``nvidia-ml-py`` (``pynvml``), initialised; None when it or the driver
    is missing. NVML reports the whole card: unlike CUDA's own figures, it does not shrink under an MPS limit."""
    try:
        import pynvml

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - not installed, no driver, no GPU: there is nothing NVML can tell
        return None
    return pynvml


def _nvidia_driver_release() -> str | None:
    """The driver release string ("580.159.04") from NVML, or None when NVML is not there."""
    nvml = _nvml()
    if nvml is None:
        return None
    try:
        version = nvml.nvmlSystemGetDriverVersion()
    except Exception:  # noqa: BLE001
        return None
    return version.decode() if isinstance(version, bytes) else version


@dataclass(frozen=True)
class CardMemory:
    """One GPU's memory as NVML reports it for the whole card, in bytes."""

    used: int
    free: int
    total: int


def card_memory(device: int = 0) -> CardMemory | None:
    """GPU ``device``'s memory on the whole card (used by every process, free, total), or None without NVML."""
    nvml = _nvml()
    if nvml is None:
        return None
    try:
        info = nvml.nvmlDeviceGetMemoryInfo(nvml.nvmlDeviceGetHandleByIndex(device))
    except Exception:  # noqa: BLE001 - no such device, or the driver stopped answering
        return None
    return CardMemory(int(info.used), int(info.free), int(info.total))


def _format_cuda_version(code: int) -> str:
    """CUDA encodes 13.0 as 13000 and 12.4 as 12040."""
    return f"{code // 1000}.{code % 1000 // 10}"


def probe_gpus(driver_factory=_CudaDriver, driver_release=_nvidia_driver_release) -> GpuProbe:
    """Ask the CUDA driver which GPUs this machine has; never raises.

    Parameters
    ----------
    driver_factory, driver_release
        Where the answers come from; the defaults ask the real driver. Tests pass stand-ins.

    Returns
    -------
    GpuProbe
        ``probe.available`` is True when at least one GPU answered; otherwise ``probe.problem`` says why.
    """
    if sys.platform != "linux":
        return GpuProbe(problem=f"this book's GPU detection supports Linux only, not {sys.platform}")
    try:
        driver = driver_factory()
    except OSError:
        return GpuProbe(problem="no NVIDIA driver: libcuda.so.1 cannot be loaded on this machine")
    try:
        driver.init()
        cuda_version = _format_cuda_version(driver.version())
        count = driver.device_count()
        gpus = tuple(driver.device(i) for i in range(count))
    except OSError as error:  # e.g. CUDA_ERROR_NO_DEVICE when the driver is installed but no GPU is visible
        return GpuProbe(problem=f"the NVIDIA driver is installed but reports no usable GPU ({error})")
    if not gpus:
        return GpuProbe(cuda_version=cuda_version, problem="the NVIDIA driver sees no GPU")
    return GpuProbe(gpus=gpus, cuda_version=cuda_version, driver_version=driver_release())


@functools.cache
def _probe_once() -> GpuProbe:
    return probe_gpus()


def require_gpu(
    min_free_bytes: int | None = None, *, gpus: int = 1, what: str = "This", why: str = "", free=None
) -> Gpu:
    """Return GPU 0, or raise :class:`GpuUnavailableError` saying why there is none and what to do.

    Decides from the numbers it is given; :func:`support.needs.check_gpu` gives it a chapter's measured need.

    Parameters
    ----------
    min_free_bytes
        If given, this process must be able to allocate at least this much on GPU 0: the free memory CUDA
        reports to it (:func:`memory_this_process_sees`), which under an MPS client limit is its share, not the
        card's. Set ``GPU_INTEROP_SKIP_MEMORY_CHECK=1`` to run anyway.
    gpus
        How many GPUs the machine must have (chapter 7 compares one worker with two).
    what, why
        Who needs it (``"Chapter 06_ecg_pipeline"``) and where the figure comes from, for the message.
    free
        ``(free, total)`` bytes as the process sees them; read from the driver when not given (tests pass it).
    """
    probe = _probe_once()
    if not probe.available:
        raise GpuUnavailableError(
            f"This needs a CUDA GPU, and none is usable: {probe.problem}. Run it on a machine with an NVIDIA GPU "
            "and the book's environment (the gpu extra, or environment.yml); the published outputs are in the "
            "built book."
        )
    if len(probe.gpus) < gpus:
        raise GpuUnavailableError(
            f"{what} needs {gpus} GPUs and this machine has {len(probe.gpus)} "
            f"({', '.join(g.name for g in probe.gpus)}). Read the published outputs in the built book instead."
        )
    gpu = probe.gpus[0]
    if min_free_bytes is None or os.environ.get("GPU_INTEROP_SKIP_MEMORY_CHECK") == "1":
        return gpu
    free_bytes, total_bytes = memory_this_process_sees() if free is None else free
    if free_bytes < min_free_bytes:
        share = "its share under an MPS limit" if total_bytes < gpu.memory_bytes * 0.95 else "free on the card now"
        raise GpuUnavailableError(
            f"{what} needs about {min_free_bytes / GIB:.1f} GiB of GPU memory{f' ({why})' if why else ''}; "
            f"this process can use {free_bytes / GIB:.1f} GiB of GPU 0 ({gpu.name}, {share}). Free memory "
            "on the GPU or give this seat a larger share; to try anyway, set GPU_INTEROP_SKIP_MEMORY_CHECK=1. "
            "The published outputs are in the built book."
        )
    return gpu


def memory_this_process_sees(device: int = 0, driver_factory=None) -> tuple[int, int]:
    """``(free, total)`` bytes of GPU ``device`` as CUDA reports them to this process (``cuMemGetInfo``).

    Under an MPS client limit the total is the process's share and the free memory is what is left of it;
    otherwise they are the card's. Asking needs a CUDA context: the device's primary context, the one CuPy,
    PyTorch, cuDF and Numba use, is retained and kept, so no library pays to create it twice.
    """
    driver = (driver_factory or _CudaDriver)()
    driver.init()
    return driver.memory_info(device)


def missing_modules(names: Iterable[str]) -> list[str]:
    """The import names among ``names`` that cannot be imported here (checked without importing them)."""
    missing = []
    for name in names:
        try:
            if importlib.util.find_spec(name) is None:
                missing.append(name)
        except (ImportError, ValueError):
            missing.append(name)
    return missing


#: The distributions that install an import name, tried before scanning every installed distribution (pip's
#: CUDA builds carry a suffix: ``cudf`` comes as ``cudf-cu13`` from pip and as ``cudf`` from conda).
DISTRIBUTIONS: dict[str, tuple[str, ...]] = {
    **{name: (pip, name) for name, pip in GPU_LIBRARIES.items() if pip != name.replace("_", "-")},
    "dask_cudf": ("dask-cudf-cu13", "dask-cudf"),
}


def _distribution_version(import_name: str, distributions) -> str | None:
    """The version of the library imported as ``import_name``: its ``__version__`` if it is imported already,
    else the metadata of the distributions likely to hold it, else of those ``distributions()`` (a callable
    returning :func:`importlib.metadata.packages_distributions`, slow: it reads every installed package) names."""
    module = sys.modules.get(import_name)
    if module is not None and isinstance(getattr(module, "__version__", None), str):
        return module.__version__
    likely = (*DISTRIBUTIONS.get(import_name, ()), import_name.replace("_", "-"))
    for candidates in (lambda: likely, lambda: distributions().get(import_name, [])):  # the scan only if needed
        for dist in candidates():
            try:
                return importlib.metadata.version(dist)
            except importlib.metadata.PackageNotFoundError:
                continue
    return None


def stack_versions(names: Sequence[str] = GPU_STACK) -> dict[str, str | None]:
    """Version of each library in ``names`` (import names), or None where it is not installed.

    Reads package metadata, so ``cudf`` is found whether it came as ``cudf`` (conda) or ``cudf-cu13`` (pip).
    """
    scanned: dict[str, list[str]] = {}

    def distributions() -> dict[str, list[str]]:  # scanned once, and only for a name not found directly
        if not scanned:
            scanned.update(importlib.metadata.packages_distributions())
        return scanned

    return {name: _distribution_version(name, distributions) for name in names}


def cuda_runtime_version() -> str | None:
    """The CUDA runtime version the book's arrays run on (CuPy's, e.g. "13.0"), or None without CuPy.

    The driver's own figure (:attr:`GpuProbe.cuda_version`) is the newest CUDA it *supports*, not the one in use.
    """
    try:
        import cupy
    except ImportError:
        return None
    try:
        return _format_cuda_version(cupy.cuda.runtime.runtimeGetVersion())
    except Exception:  # noqa: BLE001 - a broken CUDA install: the banner shows no runtime instead of failing
        return None


def cpu_description() -> str:
    """The CPU the CPU-side figures ran on: its model and the cores this process may use, e.g.
    ``"AMD EPYC 9454 48-Core Processor: 16 cores for this process (of 96)"``."""
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            model = next((line.split(":", 1)[1].strip() for line in info if line.startswith("model name")), model)
    except OSError:
        pass
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{model}: {usable} cores for this process (of {os.cpu_count()})"


def banner_text(
    probe: GpuProbe | None = None, versions: dict[str, str | None] | None = None, runtime: str | None = None
) -> str:
    """The environment banner as text: one line per GPU, the driver and CUDA, then Python and library versions."""
    probe = _probe_once() if probe is None else probe
    versions = stack_versions() if versions is None else versions
    lines = []
    if probe.available:
        for gpu in probe.gpus:
            major, minor = gpu.compute_capability
            lines.append(
                f"GPU {gpu.index}: {gpu.name} · {gpu.memory_gib:.1f} GiB · compute capability {major}.{minor}"
                f" · {gpu.multiprocessors} SMs"
            )
        runtime = cuda_runtime_version() if runtime is None else runtime
        in_use = f" · CUDA runtime {runtime}" if runtime else ""
        lines.append(f"driver {probe.driver_version or 'unknown'} (supports CUDA up to {probe.cuda_version}){in_use}")
    else:
        lines.append(f"No usable CUDA GPU: {probe.problem}")
    libraries = " · ".join(f"{name.replace('_', '-')} {version or '—'}" for name, version in versions.items())
    lines.append(f"Python {platform.python_version()} · {libraries}")
    return "\n".join(lines)


def banner(libraries: Sequence[str] = GPU_STACK) -> None:
    """Print the environment banner: every GPU, the driver, CUDA, and the versions of ``libraries`` (import
    names; the book's GPU stack unless a chapter names more)."""
    print(banner_text(versions=stack_versions(libraries)))
