"""The command line ``python -m support.ecg`` on the CPU: every mistake a reader can make ends with one sentence and
exit status 2 (no traceback, no empty ``--out`` folder, before the GPU libraries are imported), and the CPU route
works, including ``--column``."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import tracemalloc

import numpy as np
import pytest

from booktools.paths import ROOT
from support import env
from support.ecg import __main__ as cli
from support.ecg import pipeline, synthetic


def refusal(capsys, argv) -> str:
    """stderr of a run that must be refused with status 2."""
    try:
        status = cli.main(argv)
    except SystemExit as stop:  # argparse's refusal of the command line
        status = stop.code
    assert status == 2, status
    err = capsys.readouterr().err
    assert "Traceback" not in err and "error: " in err, err
    return err


@pytest.fixture
def two_column_csv(tmp_path):
    """Three minutes of synthetic ECG as a CSV with a time column and a millivolt column."""
    ecg = synthetic.synthesize(seconds=180, fs=250.0, seed=1)
    path = tmp_path / "two_columns.csv"
    times = np.arange(len(ecg.signal)) / ecg.fs
    lines = ["t,mv", *(f"{t:.3f},{v:.4f}" for t, v in zip(times, ecg.signal, strict=True))]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--fs", "0"], "--fs must be a sampling rate in Hz above 0"),
        (["--fs", "-250"], "--fs must be a sampling rate"),
        (["--fs", "nan"], "--fs must be a sampling rate"),
        (["--fs", "1e9"], "at most 20000"),
        (["--fs", "30"], "the recording needs at least 94 Hz"),
        (["--epochs", "0"], "--epochs must lie between 1 and"),
        (["--epochs", "1000000"], "--epochs must lie between 1 and"),
        (["--hours", "0"], "--hours must be a positive number"),
        (["--hours", "-2"], "--hours must be a positive number"),
        (["--hours", "inf"], "--hours must be a positive number"),
        (["--hours", "1e6"], "one recording holds at most 2,147,483,647"),
        (["--truth", "truth.npz"], "--truth goes with --input"),
        (["--column", "mv"], "--column goes with --input"),
        (["--input", "no-such.csv"], "--input no-such.csv: no such file"),
        (["--epochs", "two"], "invalid int value"),
    ],
)
def test_a_bad_argument_is_refused_in_the_parser_with_a_sentence(capsys, tmp_path, monkeypatch, argv, said):
    monkeypatch.chdir(tmp_path)
    err = refusal(capsys, [*argv, "--out", "run"])
    assert said in err, err
    assert not (tmp_path / "run").exists(), "a refused run left an --out folder"


def test_the_largest_hours_fit_the_column():
    most = math.floor(cli.MAX_SAMPLES / (3600 * 250.0))
    assert cli.parse(["--hours", str(most), "--device", "cpu"]).hours == most


def test_a_directory_as_input_gets_its_own_message(capsys, tmp_path, two_column_csv):
    err = refusal(capsys, ["--input", str(tmp_path), "--out", str(tmp_path / "run")])
    assert f"--input {tmp_path} is a directory; give the .csv file itself (it holds two_columns.csv)" in err
    assert "no ECG file" not in err


def test_an_out_that_is_a_file_is_refused(capsys, tmp_path):
    (tmp_path / "taken").write_text("")
    assert "is a file; give a folder" in refusal(capsys, ["--out", str(tmp_path / "taken")])


def test_no_gpu_says_so_and_names_the_cpu_route(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(env, "probe_gpus", lambda *a, **k: env.GpuProbe(problem="no NVIDIA driver"))
    err = refusal(capsys, ["--hours", "0.1", "--out", str(tmp_path / "run")])
    assert "no usable CUDA GPU here (no NVIDIA driver)" in err and "--device cpu" in err
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_a_refusal_is_fast_imports_no_gpu_library_and_prints_no_traceback(tmp_path):
    code = (
        "import sys\n"
        "from support.ecg import __main__ as cli\n"
        "try:\n"
        "    cli.main(['--epochs', '0', '--out', sys.argv[1]])\n"
        "except SystemExit as stop:\n"
        "    print(stop.code, sorted(m for m in ('torch', 'cupy', 'cudf', 'jax', 'numba') if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "run")], capture_output=True, text=True, cwd=ROOT, timeout=120
    )
    assert done.stdout.strip() == "2 []", done.stdout + done.stderr
    assert "Traceback" not in done.stderr and "--epochs must lie between 1 and" in done.stderr
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_a_run_too_large_for_the_memory_is_refused_with_both_sizes(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(cli, "available_memory", lambda device: 2 * 2**30)
    err = refusal(capsys, ["--device", "cpu", "--hours", "40", "--out", str(tmp_path / "run")])
    assert "--hours 40 at 250 Hz is 36,000,000 samples and needs about 10.06 GiB of host memory" in err
    assert "2.00 GiB is available: ask for at most 8.0 hours" in err
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_synthesis_needs_no_more_memory_per_sample_than_the_command_line_plans_for():
    synthetic.synthesize(seconds=60, fs=250.0)  # imports and first-call costs out of the way
    tracemalloc.start()
    try:
        samples = len(synthetic.synthesize(hours=0.25, fs=250.0).signal)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak / samples <= cli.BYTES_PER_SAMPLE, f"synthesis peaks at {peak / samples:.0f} bytes a sample"


def _numpy_out_of_memory(*args, **kwargs):
    np.empty(2**50, dtype=np.uint8)  # a pebibyte: more than any machine's memory


class OutOfMemoryError(RuntimeError):
    """Named as PyTorch's is (torch.OutOfMemoryError), with its message."""


def _torch_out_of_memory(*args, **kwargs):
    raise OutOfMemoryError(
        "CUDA out of memory. Tried to allocate 2.50 GiB. GPU 0 has a total capacity of 15.50 GiB of which "
        "1.20 GiB is free."
    )


@pytest.mark.slow
@pytest.mark.parametrize(
    ("fail", "asked"), [(_numpy_out_of_memory, "1048576.00 GiB"), (_torch_out_of_memory, "2.50 GiB")]
)
def test_out_of_memory_during_the_run_is_a_sentence_with_the_size_asked_and_the_size_available(
    capsys, tmp_path, monkeypatch, fail, asked
):
    monkeypatch.setattr(cli, "available_memory", lambda device: 3 * 2**30)
    monkeypatch.setattr(synthetic, "synthesize", fail)
    err = refusal(capsys, ["--device", "cpu", "--hours", "0.1", "--out", str(tmp_path / "run")])
    assert f"out of host memory: an allocation of {asked} was asked for with 3.00 GiB available" in err, err
    assert "ask for fewer --hours" in err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("Out of memory allocating 1,073,741,824 bytes (allocated so far: 0 bytes).", 2**30),  # CuPy
        ("std::bad_alloc: out_of_memory: CUDA error: out of memory", None),  # RMM says no size
        ("CUDA out of memory. Tried to allocate 20.00 MiB.", 20 * 2**20),  # PyTorch
    ],
)
def test_the_size_asked_is_read_from_each_library_s_message(message, expected):
    assert cli.asked_bytes(MemoryError(message)) == expected


@pytest.mark.slow
def test_a_file_that_is_not_an_ecg_leaves_no_out_folder(capsys, tmp_path):
    bad = tmp_path / "words.csv"
    bad.write_text("mv\n" + "hello\n" * 5000)
    err = refusal(capsys, ["--device", "cpu", "--input", str(bad), "--out", str(tmp_path / "run"), "--no-progress"])
    assert "rows are not numbers" in err
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_two_column_csv_asks_for_column_and_column_reads_it(capsys, tmp_path, two_column_csv):
    out = tmp_path / "run"
    common = ["--device", "cpu", "--input", str(two_column_csv), "--out", str(out), "--no-progress"]
    err = refusal(capsys, common)
    assert "choose one with --column" in err and "column=" not in err
    assert not out.exists()
    assert cli.main([*common, "--column", "mv"]) == 0
    report = json.loads((out / "metrics.json").read_text())
    assert report["epochs"] == pipeline.PipelineConfig().epochs, "--epochs does not default to the pipeline's"
    assert report["beats"] > 100 and (out / "stream.png").stat().st_size > 0
    assert "ecg.csv" not in {p.name for p in out.iterdir()}, "a run on --input wrote a CSV"
    assert cli.main([*common, "--column", "1", "--epochs", "1"]) == 0  # the same column by its index


def test_the_readme_names_the_cpu_route_of_the_command_line():
    readme = (ROOT / "README.md").read_text()
    assert "python -m support.ecg" in readme and "--device cpu" in readme
