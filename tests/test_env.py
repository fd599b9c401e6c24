"""support.env: GPU detection through a stand-in driver, the banner, clear errors without a GPU."""

import re
import sys

import pytest

from support import env
from support.env import BANNER_GPU_LINE, Gpu, GpuProbe, GpuUnavailableError

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


def test_probe_of_this_machine_is_consistent():
    probe = env.probe_gpus()
    assert probe.available == (probe.problem is None and len(probe.gpus) > 0)


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


def test_banner_prints(capsys, monkeypatch):
    monkeypatch.setattr(env, "_probe_once", lambda: GpuProbe(problem="no NVIDIA driver"))
    env.banner()
    assert "No usable CUDA GPU" in capsys.readouterr().out
    env.banner(("pytest", "no_such_library_here"))
    assert f"pytest {pytest.__version__} · no-such-library-here —" in capsys.readouterr().out


def test_require_gpu_explains_what_is_missing(monkeypatch):
    monkeypatch.setattr(env, "_probe_once", lambda: GpuProbe(problem="no NVIDIA driver: libcuda.so.1 missing"))
    with pytest.raises(GpuUnavailableError, match="needs a CUDA GPU.*libcuda.so.1 missing.*environment.yml"):
        env.require_gpu()


def test_require_gpu_checks_memory(monkeypatch):
    monkeypatch.setattr(env, "_probe_once", lambda: GpuProbe(gpus=(H100,), cuda_version="13.0"))
    assert env.require_gpu(min_memory_gib=40) == H100
    with pytest.raises(GpuUnavailableError, match="at least 500 GiB.*has 79.2 GiB"):
        env.require_gpu(min_memory_gib=500)
    with pytest.raises(GpuUnavailableError, match="Chapter 07_x needs 2 GPUs and this machine has 1 \\(NVIDIA H100"):
        env.require_gpu(chapter="07_x", gpus=2)


def test_stack_versions_reads_metadata_and_reports_missing_as_none():
    import pytest as installed

    versions = env.stack_versions(["pytest", "no_such_library_here"])
    assert versions == {"pytest": installed.__version__, "no_such_library_here": None}


def test_stack_versions_scans_every_distribution_only_for_a_name_it_cannot_place(monkeypatch):
    import importlib.metadata

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
    import configparser
    from pathlib import Path

    rules = configparser.RawConfigParser()  # nbval reads the file as raw text: % is literal
    rules.read(Path(__file__).with_name("nbval_sanitize.cfg"), encoding="utf-8")
    probe = GpuProbe(gpus=(H100,), cuda_version="13.0", driver_version="580.159.04")
    for runtime in ("13.0", ""):
        text = env.banner_text(probe, {"cupy": "14.2.0"}, runtime=runtime)
        for section in rules.sections():
            text = re.sub(rules[section]["regex"], rules[section]["replace"], text)
        assert text.splitlines() == ["GPU-LINE", "DRIVER-LINE", "VERSIONS-LINE"], text


def test_cuda_runtime_version_is_none_without_cupy_and_read_from_cupy_otherwise(monkeypatch):
    import sys
    from types import SimpleNamespace

    monkeypatch.setitem(sys.modules, "cupy", None)  # importing it raises ImportError
    assert env.cuda_runtime_version() is None
    fake_runtime = SimpleNamespace(runtimeGetVersion=lambda: 13000)
    monkeypatch.setitem(sys.modules, "cupy", SimpleNamespace(cuda=SimpleNamespace(runtime=fake_runtime)))
    assert env.cuda_runtime_version() == "13.0"


def test_require_gpu_reads_a_chapters_need_from_its_measured_runs(monkeypatch):
    from support import runs

    small = Gpu(0, "NVIDIA A2", 12 * 2**30, (8, 6), 10)
    monkeypatch.setattr(env, "_probe_once", lambda: GpuProbe(gpus=(small,), cuda_version="13.0"))
    chapter = "chapters/04_x.ipynb"
    measured = [
        runs.RunGroup("H100", "execute", False, 10.0, 0, [runs.ChapterRun(chapter, 5.0, 60 * 2**30, True)]),
        runs.RunGroup("24 GB", "nbval", False, 10.0, 0, [runs.ChapterRun(chapter, 5.0, 14 * 2**30, True)], 24 * 2**30),
        runs.RunGroup("8 GB", "nbval", False, 10.0, 0, [runs.ChapterRun(chapter, 5.0, 7 * 2**30, False)], 8 * 2**30),
        runs.RunGroup("4 at once", "nbval", True, 9, 0, [runs.ChapterRun("chapters/05_y.ipynb", 5, None, True)]),
    ]
    monkeypatch.setattr(runs, "load", lambda: measured)
    # the passing run under a limit: 14 GiB (the whole-GPU run and the failed 8 GB run prove nothing)
    assert env.memory_needed_gib("04_x") == 14.0
    assert env.memory_needed_gib("05_y") is None  # only measured in a parallel group: no peak of its own
    with pytest.raises(GpuUnavailableError, match="Chapter 04_x needs .* at least 14 GiB .*NVIDIA A2.*12.0 GiB"):
        env.require_gpu(chapter="04_x")
    assert env.require_gpu(chapter="05_y") == small  # never measured: nothing to check


def test_gpu_memory_is_read_from_nvidia_smi_in_mib(monkeypatch):
    import subprocess

    asked = []

    def fake_run(command, **kwargs):
        asked.append(command)
        return subprocess.CompletedProcess(command, 0, stdout="80000, 81559\n", stderr="")

    monkeypatch.setattr(subprocess, "run", fake_run)
    assert env.gpu_memory_mib("free", "total") == (80000, 81559)
    assert "--query-gpu=memory.free,memory.total" in asked[0]
    assert env.gpu_memory_mib("used") is None  # two numbers for one field: not trusted

    def missing(command, **kwargs):
        raise FileNotFoundError("nvidia-smi")

    monkeypatch.setattr(subprocess, "run", missing)
    assert env.gpu_memory_mib("used") is None
