"""The Makefile's GPU targets (make compare, execute, test-gpu, test-gpu-16gb) on a machine that cannot run them:
one line before anything starts, "needs a CUDA GPU" and what to do, or the libraries the Python lacks, named;
never a traceback from inside a notebook. They run in the environment the README sets up (.venv-gpu once
``make gpu-env`` made it)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from booktools import evidence, gpu_ready
from booktools.paths import CHAPTERS, ROOT
from support import env

GPU_TARGETS = ["compare", "execute", "test-gpu", "test-gpu-16gb"]
NO_GPU = env.GpuProbe(problem="no NVIDIA driver")
A_GPU = env.GpuProbe(gpus=(env.Gpu(0, "NVIDIA H100 80GB HBM3", 80 * 2**30, (9, 0), 132),))


def nothing_missing(names):
    return []


@pytest.mark.parametrize("target", GPU_TARGETS)
def test_without_a_gpu_each_target_says_it_needs_one_and_what_to_do(target):
    said = gpu_ready.problem(target, probe=NO_GPU, missing=nothing_missing)
    assert said.startswith(f"make {target} needs a CUDA GPU, and none is usable here (no NVIDIA driver): ")
    assert "make gpu-env" in said and gpu_ready.INSTEAD[target] in said and "\n" not in said


def test_a_python_without_the_book_s_libraries_is_named_with_what_it_lacks():
    lacking = ["pandas", "cudf"]
    said = gpu_ready.problem("compare", probe=A_GPU, missing=lambda names: [n for n in names if n in lacking])
    assert said.startswith(f"make compare runs in {sys.executable}, which lacks pandas, cudf: use ")
    assert gpu_ready.problem("compare", probe=A_GPU, missing=nothing_missing) is None


def test_executing_the_teachers_page_needs_no_gpu_and_no_gpu_library():
    asked = []

    def missing(names):
        asked.extend(names)
        return []

    teachers = CHAPTERS / "90_for_teachers.ipynb"
    assert gpu_ready.problem("execute", [teachers], probe=NO_GPU, missing=missing) is None
    assert not set(asked) & set(env.GPU_STACK)
    assert gpu_ready.problem("execute", [teachers, CHAPTERS / "02_memory_layouts.ipynb"], probe=NO_GPU)


def make(*args: str, **environ: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["make", "--no-print-directory", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "MAKEFLAGS": "", **environ},
    )


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory):
    """The Python of a fresh virtual environment, without pip or any of the book's libraries."""
    venv = tmp_path_factory.mktemp("bare") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    return venv / "bin" / "python"


@pytest.mark.parametrize("target", GPU_TARGETS)
def test_each_gpu_target_refuses_in_one_line_before_it_starts(target, bare_python):
    done = make(target, f"PYTHON={bare_python}")
    assert done.returncode != 0
    said = done.stderr.splitlines()[0]
    assert said.startswith(f"make {target} needs a CUDA GPU") or said.startswith(
        f"make {target} runs in {bare_python}, which lacks "
    ), done.stderr
    assert "Traceback" not in done.stdout + done.stderr and "executing" not in done.stdout


@pytest.mark.skipif(env.probe_gpus().available, reason="this machine has a GPU")
def test_make_compare_in_the_project_s_environment_on_a_cpu_machine_says_it_needs_a_gpu():
    done = make("compare", f"PYTHON={sys.executable}")
    assert done.returncode != 0 and "make compare needs a CUDA GPU" in done.stderr.splitlines()[0], done.stderr
    assert "NameError" not in done.stdout + done.stderr


def test_the_gpu_targets_use_the_gpu_environment_once_make_gpu_env_made_it(tmp_path):
    plan = make("-n", "compare", f"GPU_VENV={tmp_path / 'none'}").stdout.splitlines()
    assert plan[-1].startswith("python3 -m booktools.evidence compare"), plan
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "python").write_text("")
    plan = make("-n", "compare", f"GPU_VENV={tmp_path}").stdout.splitlines()
    assert plan[0].strip() == f"{tmp_path}/bin/python -m booktools.gpu_ready compare", plan
    assert plan[-1].startswith(f"{tmp_path}/bin/python -m booktools.evidence compare"), plan
    plan = make("-n", "compare", f"GPU_VENV={tmp_path}", "PYTHON=mine/python").stdout.splitlines()
    assert plan[-1].startswith("mine/python -m booktools.evidence compare"), plan


@pytest.mark.skipif(env.probe_gpus().available, reason="this machine has a GPU")
def test_compare_called_directly_refuses_as_make_compare_does(capsys):
    assert evidence.main(["compare"]) == 2
    assert capsys.readouterr().err.startswith("make compare needs a CUDA GPU")


def test_make_workshop_writes_the_teacher_s_plan_only_for_an_agenda():
    plan = make("-n", "workshop", "AGENDA=half-day").stdout.splitlines()
    assert plan[-1].endswith("-m booktools.plan half-day _build/workshop-teacher/plan.md")
    assert not any("booktools.plan" in line for line in make("-n", "workshop").stdout.splitlines())
