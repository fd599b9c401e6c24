"""``make doctor``: can this machine run the book? One line per check, one fix per problem.

What it checks, in order:

- the NVIDIA driver and the CUDA version it supports (the book needs 13.x), and each GPU's compute capability
  (7.0 or newer);
- the GPU stack: each library installed, then used on the GPU once (a cuDF sum, a CuPy sum, a Numba kernel, a
  PyTorch sum, a JAX sum) and one zero-copy handoff (CuPy to PyTorch through DLPack, same pointer);
- a CPU-only build of PyTorch (the ``cpu`` extra's, which ``make test`` installs into ``.venv``), which cannot use
  the GPU;
- known-bad combinations: NumPy 2.5 with numba-cuda 0.30 (``np.row_stack`` is gone), JAX's default 75 %
  preallocation on a GPU that others use or under an MPS limit;
- free memory against what the most demanding chapter needs (its measured peak, from the recorded runs), and
  whether an MPS memory limit is active (CUDA then reports less free memory than the driver's
  management library does for the whole card).

Each finding is ``ok``, ``warn`` or ``FAIL``; a ``FAIL`` is a blocker and makes the exit status 1. The checks are
plain functions of what was probed (:func:`diagnose`), so the CPU tests feed them made-up machines.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np
from packaging.version import InvalidVersion, Version

from support import env, needs
from support.units import GIB

NEEDED_CUDA_MAJOR = 13
NEEDED_COMPUTE_CAPABILITY = (7, 0)
#: The README's GPU install, in its words (tests/test_doctor.py holds them equal).
INSTALL_FIX = 'make gpu-env (pip install -e ".[gpu,test]" into .venv-gpu) or conda env create -f environment.yml'


@dataclass(frozen=True)
class Finding:
    """One line of the report: ``level`` is ``ok``, ``warn`` or ``FAIL``; ``fix`` says what to do; ``note``, for
    whoever installs the book, is printed after ``what`` in brackets (a participant's report leaves it out:
    :func:`booktools.workshop.for_participant`); ``kind`` names a finding other code acts on (:data:`NO_GPU`).

    >>> Finding("FAIL", "torch 2 is a CPU-only build", "reinstall", note="the cpu extra's").line()
    "FAIL  torch 2 is a CPU-only build (the cpu extra's)  ->  reinstall"
    """

    level: str
    what: str
    fix: str = ""
    note: str = ""
    kind: str = ""

    def line(self) -> str:
        said = f"{self.what} ({self.note})" if self.note else self.what
        return f"{self.level:>4}  {said}" + (f"  ->  {self.fix}" if self.fix else "")


#: The :attr:`Finding.kind` of a machine without a usable GPU.
NO_GPU = "no GPU"


@dataclass(frozen=True)
class Memory:
    """Free memory as CUDA sees it in this process, and free and total as the driver's NVML sees the card."""

    cuda_free: int
    nvml_free: int
    total: int


@dataclass
class Machine:
    """What :func:`probe_machine` found; tests build these by hand."""

    gpus: env.GpuProbe
    versions: dict[str, str | None]
    environ: Mapping[str, str]
    memory: Memory | None = None
    smoke_tests: dict[str, str] = field(default_factory=dict)  # library -> "" if it worked, else the error
    needed: int | None = None  # bytes the most demanding chapter needs (measured runs), None if never measured
    torch_cuda: str | None = None  # the CUDA version torch was built for, "" for a CPU-only build, None if unknown


def _release(text: str | None) -> tuple[int, ...]:
    """The release numbers of a version string (``"2.11.0+cu130"`` -> ``(2, 11, 0)``); () when there is none."""
    try:
        return Version(text or "").release
    except InvalidVersion:
        return ()


def check_driver(gpus: env.GpuProbe) -> list[Finding]:
    if not gpus.available:
        return [
            Finding(
                "FAIL",
                f"no usable GPU: {gpus.problem}",
                "run on a machine with an NVIDIA GPU and driver 580+",
                kind=NO_GPU,
            )
        ]
    major = _release(gpus.cuda_version)[:1]
    found = [
        Finding("ok", f"driver {gpus.driver_version or 'unknown'}, supports CUDA up to {gpus.cuda_version}")
        if major and major[0] >= NEEDED_CUDA_MAJOR
        else Finding(
            "FAIL",
            f"the driver supports CUDA up to {gpus.cuda_version}; the book's libraries are built for CUDA 13",
            "install NVIDIA driver release 580 or newer",
        )
    ]
    for gpu in gpus.gpus:
        capability = ".".join(map(str, gpu.compute_capability))
        if gpu.compute_capability >= NEEDED_COMPUTE_CAPABILITY:
            found.append(Finding("ok", f"GPU {gpu.index}: {gpu.name}, compute capability {capability}"))
        else:
            found.append(
                Finding(
                    "FAIL",
                    f"GPU {gpu.index}: {gpu.name} has compute capability {capability}; "
                    "RAPIDS needs 7.0 (Volta) or newer",
                    "use a newer GPU (T4, V100, A10, L4, A100, H100 ...)",
                )
            )
    return found


def check_versions(versions: Mapping[str, str | None], torch_cuda: str | None = None) -> list[Finding]:
    found = []
    missing = [name for name, version in versions.items() if version is None]
    if missing:
        names = ", ".join(name.replace("_", "-") for name in missing)
        found.append(Finding("FAIL", f"not installed: {names}", INSTALL_FIX))
    torch = versions.get("torch")
    if torch is not None and ("+cpu" in torch or torch_cuda == ""):
        found.append(
            Finding(
                "FAIL",
                f"torch {torch} is a CPU-only build: it cannot use the GPU",
                "use an environment made with " + INSTALL_FIX,
                note="the cpu extra's, for make test without a GPU",
            )
        )
    numpy, numba_cuda = _release(versions.get("numpy")), _release(versions.get("numba_cuda"))
    if numpy[:2] >= (2, 5) and numba_cuda[:2] == (0, 30):
        found.append(
            Finding(
                "FAIL",
                f"numpy {versions['numpy']} with numba-cuda {versions['numba_cuda']}: "
                "numba-cuda 0.30 calls np.row_stack, which numpy 2.5 removed",
                "pip install 'numpy<2.5'",
            )
        )
    return found


def check_memory(memory: Memory | None, environ: Mapping[str, str], needed: int | None = None) -> list[Finding]:
    if memory is None:
        return []
    found = []
    limited = memory.cuda_free < memory.nvml_free - GIB
    if limited:
        found.append(
            Finding(
                "ok",
                f"an MPS memory limit is active: this process may use {memory.cuda_free / GIB:.1f} GiB "
                f"of the card's {memory.nvml_free / GIB:.1f} GiB free",
            )
        )
    free = memory.cuda_free
    if needed is not None and free < needed:
        found.append(
            Finding(
                "warn",
                f"{free / GIB:.1f} GiB of GPU memory free; the most demanding chapter needs {needed / GIB:.1f} GiB "
                "(measured under a memory limit)",
                "close other GPU processes, or ask for a larger MPS limit",
            )
        )
    else:
        found.append(Finding("ok", f"{free / GIB:.1f} GiB of GPU memory free of {memory.total / GIB:.1f} GiB"))
    shared = memory.nvml_free < 0.9 * memory.total
    preallocates = environ.get("XLA_PYTHON_CLIENT_PREALLOCATE", "true").strip().lower() not in ("false", "0")
    if preallocates and (shared or limited):
        why = "under an MPS limit" if limited else "on a GPU that other processes use"
        found.append(
            Finding(
                "warn",
                f"JAX would preallocate 75 % of the GPU {why}",
                "export XLA_PYTHON_CLIENT_PREALLOCATE=false before starting Python",
            )
        )
    return found


def check_smoke_tests(smoke_tests: Mapping[str, str]) -> list[Finding]:
    return [
        Finding("ok", f"{name} ran on the GPU")
        if not error
        else Finding("FAIL", f"{name} failed on the GPU: {error}", INSTALL_FIX + ", then make doctor again")
        for name, error in smoke_tests.items()
    ]


def diagnose(machine: Machine) -> list[Finding]:
    """Every finding about ``machine``, in the order of the module docstring."""
    found = check_driver(machine.gpus)
    found += check_versions(machine.versions, machine.torch_cuda)
    if machine.gpus.available:
        found += check_smoke_tests(machine.smoke_tests)
        found += check_memory(machine.memory, machine.environ, machine.needed)
    return found


def _nvml_memory() -> tuple[int, int] | None:
    """Free and total bytes of GPU 0 on the whole card (NVML), or None without it."""
    found = env.card_memory()
    return None if found is None else (found.free, found.total)


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0] if text else ''}"[:160]


def _smoke_test(name: str, work: Callable[[], None]) -> str:
    try:
        work()
    except Exception as error:  # noqa: BLE001 - any failure is the finding
        return _first_line(error)
    return ""


def _tiny_work() -> dict[str, Callable[[], None]]:
    def cudf_sum():
        import cudf

        assert int(cudf.Series([1, 2, 3]).sum()) == 6

    def cupy_sum():
        import cupy

        assert int(cupy.arange(4).sum()) == 6

    def numba_kernel():
        from numba import cuda

        @cuda.jit
        def add_one(values):
            i = cuda.grid(1)
            if i < values.size:
                values[i] += 1

        values = cuda.to_device(np.zeros(8, dtype=np.int32))
        add_one[1, 8](values)
        assert values.copy_to_host().sum() == 8

    def torch_sum():
        import torch

        assert int(torch.arange(4, device="cuda").sum()) == 6

    def jax_sum():
        import jax.numpy as jnp

        assert int(jnp.arange(4).sum()) == 6 and "cuda" in str(jnp.arange(1).devices()).lower()

    def handoff():
        import cupy
        import torch

        source = cupy.arange(16, dtype=cupy.float32)
        tensor = torch.from_dlpack(source)
        assert tensor.data_ptr() == source.data.ptr, "DLPack copied instead of sharing"

    return {
        "cuDF": cudf_sum,
        "CuPy": cupy_sum,
        "Numba": numba_kernel,
        "PyTorch": torch_sum,
        "JAX": jax_sum,
        "zero-copy CuPy -> PyTorch (DLPack)": handoff,
    }


def _torch_cuda() -> str | None:
    """The CUDA version the installed torch was built for, "" for a CPU-only build, None if it does not import."""
    try:
        import torch
    except Exception:  # noqa: BLE001 - a torch that does not import is the smoke test's finding
        return None
    return torch.version.cuda or ""


def most_needed() -> int | None:
    """Bytes the most demanding chapter needs: the largest of the chapters' measured needs
    (:mod:`support.needs`), None when none was measured under a limit."""
    measured = [need.peak_bytes for need in needs.load().values()]
    return max(measured) if measured else None


def probe_machine(environ: Mapping[str, str] | None = None) -> Machine:
    """Probe this machine: the driver, the library versions, one tiny use of each library, the memory."""
    environ = dict(os.environ if environ is None else environ)
    gpus = env.probe_gpus()
    versions = env.stack_versions()
    machine = Machine(gpus=gpus, versions=versions, environ=environ, needed=most_needed())
    if not gpus.available:
        return machine
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # the doctor itself takes no 75 %
    machine.torch_cuda = _torch_cuda() if versions.get("torch") else None
    machine.smoke_tests = {name: _smoke_test(name, work) for name, work in _tiny_work().items()}
    nvml = _nvml_memory()
    try:
        import cupy

        cuda_free, total = cupy.cuda.runtime.memGetInfo()
    except Exception:  # noqa: BLE001 - CuPy's failure is already a finding
        return machine
    nvml_free, _ = nvml if nvml else (cuda_free, total)
    machine.memory = Memory(cuda_free=int(cuda_free), nvml_free=int(nvml_free), total=int(total))
    return machine


def main() -> int:
    findings = diagnose(probe_machine())
    for finding in findings:
        print(finding.line())
    blockers = sum(finding.level == "FAIL" for finding in findings)
    print(f"{blockers} blocker(s)" if blockers else "this machine can run the book")
    return 1 if blockers else 0


if __name__ == "__main__":
    sys.exit(main())
