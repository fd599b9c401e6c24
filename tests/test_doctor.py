"""booktools.doctor on the CPU: each check fed a made-up machine, and the exit status."""

from __future__ import annotations

import pytest

from booktools import doctor
from booktools.doctor import GIB, Machine, Memory
from booktools.paths import ROOT
from support.env import Gpu, GpuProbe

H100 = Gpu(0, "NVIDIA H100 80GB HBM3", 80 * GIB, (9, 0), 132)
GOOD_VERSIONS = {"cudf": "26.10.2", "cupy": "14.2.0", "numba_cuda": "0.30.4", "numpy": "2.4.6", "jax": "0.11.2"}
ALL_RAN = {name: "" for name in ("cuDF", "CuPy", "Numba", "PyTorch", "JAX", "zero-copy CuPy -> PyTorch (DLPack)")}


def machine(**changes) -> Machine:
    base = dict(
        gpus=GpuProbe(gpus=(H100,), cuda_version="13.0", driver_version="580.159.04"),
        versions=dict(GOOD_VERSIONS),
        environ={"XLA_PYTHON_CLIENT_PREALLOCATE": "false"},
        memory=Memory(cuda_free=78 * GIB, nvml_free=78 * GIB, total=80 * GIB),
        smoke_tests=dict(ALL_RAN),
    )
    return Machine(**{**base, **changes})


def levels(found) -> list[str]:
    return [f.level for f in found]


def run_main(monkeypatch, capsys, probed: Machine) -> tuple[int, str]:
    monkeypatch.setattr(doctor, "probe_machine", lambda: probed)
    status = doctor.main()
    return status, capsys.readouterr().out


def test_a_good_machine_has_no_blocker(monkeypatch, capsys):
    status, out = run_main(monkeypatch, capsys, machine())
    assert status == 0 and "FAIL" not in out and "this machine can run the book" in out
    assert "ok  zero-copy CuPy -> PyTorch (DLPack) ran on the GPU" in out


def test_an_old_driver_and_an_old_gpu_are_blockers_with_their_fix(monkeypatch, capsys):
    old = Gpu(0, "Tesla P100", 16 * GIB, (6, 0), 56)
    status, out = run_main(
        monkeypatch, capsys, machine(gpus=GpuProbe(gpus=(old,), cuda_version="12.4", driver_version="550.54"))
    )
    assert status == 1
    assert "supports CUDA up to 12.4" in out and "driver release 580 or newer" in out
    assert "compute capability 6.0; RAPIDS needs 7.0" in out and "2 blocker(s)" in out


def test_no_gpu_is_one_blocker_and_nothing_is_exercised(monkeypatch, capsys):
    status, out = run_main(monkeypatch, capsys, machine(gpus=GpuProbe(problem="no NVIDIA driver"), smoke_tests={}))
    assert status == 1 and "no usable GPU: no NVIDIA driver" in out and "ran on the GPU" not in out


def test_missing_libraries_and_the_known_bad_numpy(monkeypatch, capsys):
    versions = {**GOOD_VERSIONS, "cudf": None, "numpy": "2.5.2"}
    status, out = run_main(monkeypatch, capsys, machine(versions=versions))
    assert status == 1
    assert f"not installed: cudf  ->  {doctor.INSTALL_FIX}" in out
    assert "numpy 2.5.2 with numba-cuda 0.30.4" in out and "pip install 'numpy<2.5'" in out


def test_a_library_that_fails_on_the_gpu_is_named_with_its_error(monkeypatch, capsys):
    status, out = run_main(monkeypatch, capsys, machine(smoke_tests={**ALL_RAN, "JAX": "RuntimeError: no CUDA plugin"}))
    assert status == 1 and "FAIL  JAX failed on the GPU: RuntimeError: no CUDA plugin" in out


def test_an_mps_limit_is_seen_and_jax_preallocation_warned_about():
    limited = Memory(cuda_free=int(15.5 * GIB), nvml_free=78 * GIB, total=80 * GIB)
    found = doctor.check_memory(limited, environ={})
    lines = [f.line() for f in found]
    assert "an MPS memory limit is active: this process may use 15.5 GiB" in lines[0]
    assert any("JAX would preallocate 75 % of the GPU under an MPS limit" in line for line in lines)
    assert "warn" not in levels(doctor.check_memory(limited, environ={"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}))


def test_a_shared_gpu_with_little_free_memory_is_a_warning_not_a_blocker():
    shared = Memory(cuda_free=6 * GIB, nvml_free=6 * GIB, total=80 * GIB)
    found = doctor.check_memory(shared, environ={}, needed=10 * GIB)
    assert levels(found) == ["warn", "warn"] and "the most demanding chapter needs 10.0 GiB" in found[0].what
    assert levels(doctor.check_memory(shared, environ={"XLA_PYTHON_CLIENT_PREALLOCATE": "false"}, needed=None)) == [
        "ok"
    ]


@pytest.mark.parametrize(
    ("numpy", "flagged"), [("2.4.6", False), ("2.5.0", True), ("2.10.1", True), ("2.4.6+local", False), (None, False)]
)
def test_versions_are_compared_as_numbers_not_as_text(numpy, flagged):
    found = doctor.check_versions({"numpy": numpy, "numba_cuda": "0.30.4"})
    assert any("np.row_stack" in f.what for f in found if f.level == "FAIL") == flagged, found


@pytest.mark.parametrize(
    ("torch", "torch_cuda", "flagged"),
    [("2.13.0+cpu", None, True), ("2.13.0", "", True), ("2.13.0", "13.0", False), ("2.11.0+cu130", None, False)],
)
def test_a_cpu_only_torch_is_a_blocker(monkeypatch, capsys, torch, torch_cuda, flagged):
    status, out = run_main(
        monkeypatch, capsys, machine(versions={**GOOD_VERSIONS, "torch": torch}, torch_cuda=torch_cuda)
    )
    assert (status == 1) == flagged and ("CPU-only build" in out) == flagged, out
    if flagged:
        assert f"FAIL  torch {torch} is a CPU-only build" in out and doctor.INSTALL_FIX in out


def test_the_doctor_s_fix_is_the_readme_s_gpu_install():
    readme = (ROOT / "README.md").read_text()
    for words in ('pip install -e ".[gpu,test]"', "make gpu-env", "conda env create -f environment.yml"):
        assert words in doctor.INSTALL_FIX and words in readme, words
