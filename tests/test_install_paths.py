"""The two install paths of a GPU server, pip's `gpu` extra and conda's environment.yml, name the same packages with
the same version ranges; the project refers to no file outside itself. `make resolve-gpu` runs uv's resolver for
the extra against the package index; that needs the network, so here a stand-in uv answers (the command it is
given, what is printed on success, uv's whole explanation on failure). `make test` installs the CPU build of
torch and never puts the cpu extra into an environment that holds the GPU stack (the Makefile run with a
stand-in pip)."""

from __future__ import annotations

import builtins
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from booktools import resolve
from booktools.paths import ROOT
from support import env

#: conda package name -> pip distribution name, where they differ.
CONDA_TO_PIP = {
    "cudf": "cudf-cu13",
    "rmm": "rmm-cu13",
    "cupy": "cupy-cuda13x",
    "pytorch-gpu": "torch",
    "dask-cudf": "dask-cudf-cu13",
    "cudf-polars": "cudf-polars-cu13",
}
#: conda entries with no pip counterpart in the extras: the interpreter, CUDA itself, pip, and jaxlib, which pip
#: gets through jax's `cuda13` extra.
CONDA_ONLY = {"python", "cuda-version", "pip", "jaxlib"}


def conda_specifier(spec: str) -> SpecifierSet:
    """A conda version spec as a pip specifier set: ``=26.10`` means ``==26.10.*``."""
    spec = spec.strip()
    if not spec:
        return SpecifierSet()
    if re.fullmatch(r"=[\d.]+", spec):
        return SpecifierSet(f"=={spec[1:]}.*")
    return SpecifierSet(spec)


def conda_packages(path: Path = ROOT / "environment.yml") -> dict[str, SpecifierSet]:
    packages = {}
    entries = []
    for entry in yaml.safe_load(path.read_text())["dependencies"]:
        if isinstance(entry, str):
            entries.append(entry)
        else:  # the pip: section: packages conda lacks, then the project itself
            entries += [pip for pip in entry["pip"] if not pip.startswith("-e")]
    for entry in entries:
        if "==" in entry:  # a pip pin in the pip: section
            requirement = Requirement(entry)
            packages[requirement.name] = requirement.specifier
            continue
        match = re.fullmatch(r"([A-Za-z0-9_.-]+)\s*(.*)", entry)
        name, spec = match.group(1), match.group(2)
        if name not in CONDA_ONLY:
            packages[CONDA_TO_PIP.get(name, name)] = conda_specifier(spec)
    return packages


def pip_packages(*extras: str) -> dict[str, SpecifierSet]:
    packages = {}
    for extra in extras:
        for line in resolve.extra_requirements(extra):
            requirement = Requirement(line)
            packages.setdefault(requirement.name, requirement.specifier)
    return packages


def test_conda_versions_read_as_pip_specifiers():
    assert conda_specifier("=26.10") == SpecifierSet("==26.10.*")
    assert conda_specifier(">=14,<15") == SpecifierSet(">=14,<15")
    assert conda_specifier("") == SpecifierSet()


def test_the_gpu_extra_and_environment_yml_name_the_same_stack_with_the_same_ranges():
    conda = conda_packages()
    pip = pip_packages("gpu", "test")
    missing_from_pip = sorted(set(conda) - set(pip))
    assert missing_from_pip == [], f"environment.yml has packages the gpu/test extras lack: {missing_from_pip}"
    gpu_only = sorted(set(pip_packages("gpu")) - set(conda))
    assert gpu_only == [], f"the gpu extra has packages environment.yml lacks: {gpu_only}"
    differing = {name: (str(conda[name]), str(pip[name])) for name in conda if conda[name] != pip[name]}
    for name in list(differing):
        if name in pip_packages("test") and not conda[name]:
            del differing[name]  # a tool of the test extra that conda leaves unpinned
    assert differing == {}, f"version ranges differ (environment.yml, pyproject.toml): {differing}"


def test_the_gpu_extra_pins_the_major_versions_the_chapters_ran_with():
    gpu = pip_packages("gpu")
    for name in env.GPU_LIBRARIES.values():
        if name != "numpy" and name != "numba":  # both follow what cuDF and numba-cuda ask for
            assert gpu[name], f"{name} needs a version range in the gpu extra"
    assert "cuda13" in Requirement(next(r for r in resolve.extra_requirements("gpu") if r.startswith("jax"))).extras


def test_an_unknown_extra_is_named():
    with pytest.raises(ValueError, match="no extra 'cuda'"):
        resolve.extra_requirements("cuda")


@pytest.mark.parametrize("name", ["README.md", "Makefile", "pyproject.toml", "environment.yml", ".ci/run"])
def test_the_project_refers_to_no_file_outside_itself(name):
    text = (ROOT / name).read_text()
    assert not re.search(r"(?<![\w.])\.\./", text), f"{name} points outside the repository"


def fake_uv(tmp_path: Path, status: int, stdout: str, stderr: str = "") -> Path:
    """An executable that answers like uv and records the arguments it was given."""
    script = tmp_path / "uv"
    script.write_text(
        f"#!{sys.executable}\n"
        "import sys, pathlib\n"
        f"pathlib.Path({str(tmp_path / 'args')!r}).write_text(chr(10).join(sys.argv[1:]))\n"
        f"sys.stdout.write({stdout!r}); sys.stderr.write({stderr!r}); sys.exit({status})\n"
    )
    script.chmod(0o755)
    return script


def test_resolve_gpu_asks_uv_for_a_linux_gpu_server_and_prints_the_gpu_stack_first(tmp_path, monkeypatch, capsys):
    compiled = "aiohttp==3.14.5\ncudf-cu13==26.10.2\ngatspy==0.3\ntorch==2.15.0\n"
    monkeypatch.setattr(resolve, "uv_binary", lambda: str(fake_uv(tmp_path, 0, compiled, "Resolved 4 packages\n")))
    assert resolve.main([]) == 0
    args = (tmp_path / "args").read_text().splitlines()
    assert args[:3] == ["pip", "compile", str(ROOT / "pyproject.toml")] and args[3:5] == ["--extra", "gpu"]
    assert args[args.index("--python-platform") + 1] == "x86_64-manylinux_2_28"
    assert args[args.index("--python-version") + 1] == "3.12"
    # wheels only, except for the packages PyPI has no wheel of, which a server's pip builds from source too
    assert args[args.index("--only-binary") + 1] == ":all:" and args[args.index("--no-binary") + 1] == "gatspy"
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "4 distributions would be installed for the 'gpu' extra (CPython 3.12, x86_64-manylinux_2_28):"
    assert [line.split()[0] for line in lines[1:-1]] == ["cudf-cu13", "torch", "aiohttp", "gatspy"]
    assert lines[-1] == "built from source, as PyPI has no wheel of them: gatspy==0.3"


def test_a_failed_resolution_keeps_uv_s_whole_explanation(tmp_path, monkeypatch, capsys):
    reason = textwrap.dedent("""\
        warning: The requested Python version 3.12 is not available; 3.11.7 will be used to build dependencies instead.
        error: No solution found when resolving dependencies
          cause: Because cudf-cu13>=26.10.0 depends on numpy>=2.0,<3.0 and you require numpy<2, we can conclude
                 that your requirements are unsatisfiable.
        """)
    monkeypatch.setattr(resolve, "uv_binary", lambda: str(fake_uv(tmp_path, 1, "", reason)))
    assert resolve.main([]) == 1
    err = capsys.readouterr().err
    assert "the 'gpu' extra does not resolve for CPython 3.12 on x86_64-manylinux_2_28 (uv exit status 1)" in err
    assert "depends on numpy>=2.0,<3.0" in err and "that your requirements are unsatisfiable" in err


def test_without_uv_resolve_gpu_says_how_to_get_it(monkeypatch, capsys):
    real_import = builtins.__import__

    def no_uv(name, *args, **kwargs):
        if name == "uv":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_uv)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert resolve.main([]) == 1
    assert "uv is not installed here" in capsys.readouterr().err


def test_uv_comes_with_the_test_extra_and_make_resolve_gpu_uses_the_project_s_environment():
    assert any(Requirement(line).name == "uv" for line in resolve.extra_requirements("test"))
    planned = make_plan("resolve-gpu")
    assert planned[-1] == ".venv/bin/python -m booktools.resolve", planned


def make_plan(*args: str) -> list[str]:
    """The commands `make` would run (``make -n``), without running them."""
    done = subprocess.run(
        ["make", "--no-print-directory", "-n", *args], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return done.stdout.splitlines()


@pytest.fixture
def bare_venv(tmp_path):
    """A virtual environment without pip, made in a moment; make's recipes run in it with a stand-in pip."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True)
    return tmp_path / "venv"


def installs(venv: Path) -> list[str]:
    """What `make test` would install into ``venv``: the pip commands, run by a stand-in that only prints them."""
    done = subprocess.run(
        ["make", "--no-print-directory", "-s", f"{venv}/.installed-test", f"VENV={venv}", "PIP=echo pip install"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "MAKEFLAGS": ""},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return [line for line in done.stdout.splitlines() if line.startswith("pip install")]


def test_make_test_takes_torch_from_pytorch_s_cpu_index_then_the_test_and_cpu_extras(bare_venv):
    torch_pin = next(r for r in resolve.extra_requirements("cpu") if Requirement(r).name == "torch")
    first, second = installs(bare_venv)
    assert "--index-url https://download.pytorch.org/whl/cpu" in first and first.endswith(torch_pin)
    assert "--no-deps" in first  # torch's dependencies come from the package index with the rest
    assert second.endswith("-e .[test,cpu]")


def test_make_test_puts_no_cpu_build_into_an_environment_that_holds_the_gpu_stack(bare_venv):
    site = next((bare_venv / "lib").glob("python3*/site-packages"))
    info = site / "cudf_cu13-26.10.2.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: cudf-cu13\nVersion: 26.10.2\n")
    assert installs(bare_venv) == ["pip install -e .[test]"]
