"""support.env: GPU detection through a stand-in driver, the banner, clear errors without a GPU."""

import configparser
import importlib.metadata
import os
import re
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from support import env
from support.env import BANNER_GPU_LINE, Gpu, GpuProbe, GpuUnavailableError
from support.units import GIB

H100 = Gpu(
    index=0, name="NVIDIA H100 80GB HBM3", memory_bytes=85_031_911_424, compute_capability=(9, 0), multiprocessors=132
)


class FakeDriver:
    """Answers like libcuda would, for a machine with the given GPUs."""

    def __init__(self, gpus=(H100,), version=13000, init_error=None):
        self.gpus, self._version, self._init_error = gpus, version, init_error

    def init(self):
        if self._init_error:
            raise OSError(self._init_error)

    def version(self):
        return self._version

    def device_count(self):
        return len(self.gpus)

    def device(self, index):
        return self.gpus[index]


def no_driver():
    raise OSError("libcuda.so.1: cannot open shared object file")


def test_probe_without_a_driver_says_so():
    probe = env.probe_gpus(driver_factory=no_driver)
    assert not probe.available
    assert "libcuda.so.1" in probe.problem


def test_probe_reports_driver_errors_by_name():
    probe = env.probe_gpus(driver_factory=lambda: FakeDriver(init_error="cuInit failed with CUDA_ERROR_NO_DEVICE"))
    assert not probe.available
    assert "CUDA_ERROR_NO_DEVICE" in probe.problem


def test_probe_with_no_devices_is_not_available():
    probe = env.probe_gpus(driver_factory=lambda: FakeDriver(gpus=()))
    assert not probe.available
    assert "sees no GPU" in probe.problem


def test_probe_reads_devices_driver_and_cuda_version():
    probe = env.probe_gpus(driver_factory=lambda: FakeDriver(version=12040), driver_release=lambda: "580.159.04")
    assert probe.available
    assert probe.gpus == (H100,)
    assert probe.cuda_version == "12.4"
    assert probe.driver_version == "580.159.04"


def test_banner_names_the_gpu_and_versions():
    probe = GpuProbe(gpus=(H100,), cuda_version="13.0", driver_version="580.159.04")
    text = env.banner_text(probe, {"cupy": "14.2.0", "numba_cuda": "0.30.4", "jax": None}, runtime="13.0")
    assert re.search(BANNER_GPU_LINE, text, flags=re.MULTILINE)
    assert "NVIDIA H100 80GB HBM3 · 79.2 GiB · compute capability 9.0 · 132 SMs" in text
    # the driver's figure is what it supports; the runtime is what the arrays use
    assert "driver 580.159.04 (supports CUDA up to 13.0) · CUDA runtime 13.0" in text
    assert "CUDA runtime" not in env.banner_text(probe, {"cupy": None}, runtime="")
    assert "cupy 14.2.0 · numba-cuda 0.30.4 · jax —" in text


def test_banner_without_gpu_says_why_and_does_not_look_like_a_gpu_run():
    text = env.banner_text(GpuProbe(problem="no NVIDIA driver"), {"cupy": None})
    assert text.startswith("No usable CUDA GPU: no NVIDIA driver")
    assert not re.search(BANNER_GPU_LINE, text, flags=re.MULTILINE)


def test_banner_prints(capsys, fake_gpu):
    fake_gpu(problem="no NVIDIA driver")
    env.banner()
    assert "No usable CUDA GPU" in capsys.readouterr().out
    env.banner(("pytest", "no_such_library_here"))
    assert f"pytest {pytest.__version__} · no-such-library-here —" in capsys.readouterr().out


def test_require_gpu_explains_what_is_missing(fake_gpu):
    fake_gpu(problem="no NVIDIA driver: libcuda.so.1 missing")
    with pytest.raises(GpuUnavailableError, match="needs a CUDA GPU.*libcuda.so.1 missing.*environment.yml"):
        env.require_gpu()


def test_require_gpu_checks_the_memory_this_process_can_use(fake_gpu, monkeypatch):
    fake_gpu(gpus=(H100,))
    whole_card = (70 * GIB, H100.memory_bytes)
    assert env.require_gpu(40 * GIB, free=whole_card) == H100
    with pytest.raises(GpuUnavailableError, match="about 500.0 GiB.*can use 70.0 GiB of GPU 0.*free on the card now"):
        env.require_gpu(500 * GIB, free=whole_card)
    mps_share = (15 * GIB, 16 * GIB)  # under an MPS limit CUDA reports the share as the total
    with pytest.raises(GpuUnavailableError, match=r"Chapter x needs about 20.0 GiB .*\(it peaked.*share under an MPS"):
        env.require_gpu(20 * GIB, what="Chapter x", why="it peaked at 20 GiB", free=mps_share)
    monkeypatch.setenv("GPU_INTEROP_SKIP_MEMORY_CHECK", "1")
    assert env.require_gpu(500 * GIB, free=mps_share) == H100  # the reader chose to try anyway
    with pytest.raises(GpuUnavailableError, match="Chapter 07_x needs 2 GPUs and this machine has 1 \\(NVIDIA H100"):
        env.require_gpu(what="Chapter 07_x", gpus=2)


def test_the_memory_a_process_sees_is_asked_of_the_driver_in_the_devices_primary_context():
    class Driver:
        def init(self):
            pass

        def memory_info(self, index):
            return (index + 1) * GIB, 80 * GIB

    assert env.memory_this_process_sees(1, driver_factory=Driver) == (2 * GIB, 80 * GIB)


def test_stack_versions_reads_metadata_and_reports_missing_as_none():
    versions = env.stack_versions(["pytest", "no_such_library_here"])
    assert versions == {"pytest": pytest.__version__, "no_such_library_here": None}


def test_stack_versions_scans_every_distribution_only_for_a_name_it_cannot_place(monkeypatch):
    scans = []
    monkeypatch.setattr(importlib.metadata, "packages_distributions", lambda: scans.append(1) or {"yaml": ["PyYAML"]})
    monkeypatch.delitem(sys.modules, "nbformat", raising=False)  # imported: its __version__ would answer first
    assert env.stack_versions(["pytest", "nbformat"])["nbformat"] is not None and scans == []
    assert env.stack_versions(["yaml", "no_such_library_here"])["yaml"] == importlib.metadata.version("PyYAML")
    assert scans == [1]  # one scan for both names it could not place


def test_missing_modules_checks_without_importing():
    assert env.missing_modules(["json", "no_such_module_xyz", "no_such_package_xyz.sub"]) == [
        "no_such_module_xyz",
        "no_such_package_xyz.sub",
    ]


def test_nbval_sanitizer_masks_every_banner_line():
    rules = configparser.RawConfigParser()  # nbval reads the file as raw text: % is literal
    rules.read(Path(__file__).with_name("nbval_sanitize.cfg"), encoding="utf-8")
    probe = GpuProbe(gpus=(H100,), cuda_version="13.0", driver_version="580.159.04")
    for runtime in ("13.0", ""):
        text = env.banner_text(probe, {"cupy": "14.2.0"}, runtime=runtime)
        for section in rules.sections():
            text = re.sub(rules[section]["regex"], rules[section]["replace"], text)
        assert text.splitlines() == ["GPU-LINE", "DRIVER-LINE", "VERSIONS-LINE"], text


def test_cuda_runtime_version_is_none_without_cupy_and_read_from_cupy_otherwise(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # importing it raises ImportError
    assert env.cuda_runtime_version() is None
    fake_runtime = SimpleNamespace(runtimeGetVersion=lambda: 13000)
    monkeypatch.setitem(sys.modules, "cupy", SimpleNamespace(cuda=SimpleNamespace(runtime=fake_runtime)))
    assert env.cuda_runtime_version() == "13.0"


def test_card_memory_and_the_driver_release_come_from_nvml_or_are_none(monkeypatch):
    fake = SimpleNamespace(
        nvmlInit=lambda: None,
        nvmlSystemGetDriverVersion=lambda: "580.159.04",
        nvmlDeviceGetHandleByIndex=lambda index: index,
        nvmlDeviceGetMemoryInfo=lambda handle: SimpleNamespace(used=3 * GIB, free=77 * GIB, total=80 * GIB),
    )
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    assert env.card_memory() == env.CardMemory(3 * GIB, 77 * GIB, 80 * GIB)
    assert env._nvidia_driver_release() == "580.159.04"

    def no_driver():
        raise OSError("NVML Shared Library Not Found")

    monkeypatch.setitem(sys.modules, "pynvml", SimpleNamespace(nvmlInit=no_driver))
    assert env.card_memory() is None and env._nvidia_driver_release() is None
    monkeypatch.setitem(sys.modules, "pynvml", None)  # not installed
    assert env.card_memory() is None


def test_the_cpu_is_named_with_the_cores_this_process_may_use():
    described = env.cpu_description()
    assert f"(of {os.cpu_count()})" in described and "cores for this process" in described


def test_nbval_sanitizer_reads_a_timing_table_the_same_whatever_the_widths_of_its_figures():
    rules = configparser.RawConfigParser()
    rules.read(Path(__file__).with_name("nbval_sanitize.cfg"), encoding="utf-8")
    committed = (
        "                      work  median     min     max  repeats clock  speed-up\n"
        "  zero-copy handoff, 1 GiB 7.76 µs 7.43 µs 23.7 µs       50  wall   66,000×\n"
    )
    fresh = (
        "                      work   median      min     max  repeats clock speed-up\n"
        "  zero-copy handoff, 1 GiB  7.7 µs  7.43 µs 123 ms        50  wall  9,000×\n"
    )

    def sanitized(text):
        for section in rules.sections():
            text = re.sub(rules[section]["regex"], rules[section]["replace"], text)
        return text

    assert sanitized(committed) == sanitized(fresh)
