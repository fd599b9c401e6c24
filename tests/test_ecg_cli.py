"""The command line ``python -m support.ecg`` on the CPU: every mistake a reader can make ends with one sentence and
exit status 2 (no traceback, no empty ``--out`` folder, before the GPU libraries are imported), and the CPU route
works, including ``--column``."""

from __future__ import annotations

import errno
import hashlib
import io
import json
import math
import os
import subprocess
import sys
import tracemalloc

import numpy as np
import pytest
from scipy.fft import next_fast_len as scipy_next_fast_len

from booktools.paths import ROOT
from support import env
from support.ecg import __main__ as cli
from support.ecg import cli_runs, detection, output_folder, pipeline, plots, reading, synthetic


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
    assert "already holds stream.png" in refusal(capsys, [*common, "--column", "1"])  # the first run's files
    assert cli.main([*common, "--column", "1", "--epochs", "1", "--overwrite"]) == 0  # the same column by index


def test_the_readme_names_the_cpu_route_of_the_command_line():
    readme = (ROOT / "README.md").read_text()
    assert "python -m support.ecg" in readme and "--device cpu" in readme


# --out: nothing the reader had is lost, and a folder that cannot be written is refused before any work.


def snapshot(folder) -> dict[str, str]:
    """Every file under ``folder`` with the SHA-256 of its bytes."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def readers_folder(tmp_path):
    """A folder that holds a reader's own recording and metrics, named as the command names its files."""
    folder = tmp_path / "mydata"
    folder.mkdir()
    (folder / "ecg.csv").write_text("0.1\n0.2\n0.3\n")
    (folder / "metrics.json").write_text('{"mine": true}\n')
    (folder / "notes.txt").write_text("not the command's\n")
    return folder


@pytest.fixture
def no_work(monkeypatch):
    """Fail the test if the run gets as far as synthesizing or reading a recording."""

    def started(*args, **kwargs):
        raise AssertionError("the run started before --out was checked")

    monkeypatch.setattr(synthetic, "synthesize", started)
    monkeypatch.setattr(reading, "read_signal", started)


def test_a_synthetic_run_into_a_folder_of_the_reader_s_files_is_refused_and_names_them(capsys, readers_folder, no_work):
    before = snapshot(readers_folder)
    err = refusal(capsys, ["--device", "cpu", "--hours", "0.05", "--out", str(readers_folder)])
    assert (
        f"--out {readers_folder} already holds ecg.csv and metrics.json, which this run would overwrite; "
        "give another --out, or pass --overwrite to replace them"
    ) in err, err
    assert snapshot(readers_folder) == before


def test_every_file_the_command_writes_is_planned_and_checked(capsys, tmp_path, no_work):
    out = tmp_path / "run"
    planned = cli.planned_files(cli.parse(["--device", "cpu", "--out", str(out)]))
    assert [p.name for p in planned] == ["ecg.csv", "truth.npz", "stream.png", "lengths.png", "metrics.json"]
    out.mkdir()
    for path in planned:
        path.write_text("the reader's\n")
        before = snapshot(out)
        err = refusal(capsys, ["--device", "cpu", "--hours", "0.05", "--out", str(out)])
        assert f"already holds {path.name}," in err, err
        assert snapshot(out) == before
        path.unlink()


def test_an_input_inside_out_is_read_and_kept(tmp_path):
    (tmp_path / "ecg.csv").write_text("0.1\n")
    args = cli.parse(["--device", "cpu", "--input", str(tmp_path / "ecg.csv"), "--out", str(tmp_path)])
    assert "ecg.csv" not in {p.name for p in cli.planned_files(args)}  # a run on --input writes no CSV


def test_an_input_the_run_would_write_over_is_refused_even_with_overwrite(capsys, tmp_path, no_work):
    recording = tmp_path / "metrics.json"  # a recording saved under the name of the run's report
    recording.write_text("mv\n0.1\n")
    before = snapshot(tmp_path)
    err = refusal(capsys, ["--device", "cpu", "--input", str(recording), "--out", str(tmp_path), "--overwrite"])
    assert f"--input {recording} is the metrics.json this run writes into --out {tmp_path}" in err, err
    assert snapshot(tmp_path) == before


def test_a_folder_where_a_file_goes_is_refused(capsys, tmp_path, no_work):
    (tmp_path / "stream.png").mkdir()
    err = refusal(capsys, ["--device", "cpu", "--out", str(tmp_path), "--overwrite"])
    assert "holds a folder named stream.png where this run writes a file" in err, err


def test_an_out_below_a_file_is_refused(capsys, tmp_path, no_work):
    (tmp_path / "taken").write_text("")
    err = refusal(capsys, ["--device", "cpu", "--out", str(tmp_path / "taken" / "run")])
    assert f"--out {tmp_path / 'taken' / 'run'} cannot be created: {tmp_path / 'taken'} is a file" in err, err


@pytest.fixture
def read_only(monkeypatch):
    """Make a folder read-only. A privileged process (root) writes anyway, so for one the check is asked what
    the kernel answers an unprivileged user, with the folder's mode the same."""

    def make(folder):
        folder.chmod(0o555)
        if os.access(folder, os.W_OK):  # root
            real = output_folder._writable
            unprivileged = lambda path: bool(path.stat().st_mode & 0o200) and real(path)  # noqa: E731
            monkeypatch.setattr(output_folder, "_writable", unprivileged)
        return folder

    yield make


def test_a_read_only_out_is_refused_before_any_work(capsys, tmp_path, readers_folder, no_work, read_only):
    (tmp_path / "rec.csv").write_text("mv\n0.1\n")
    empty = tmp_path / "empty"
    empty.mkdir()
    read_only(empty)
    try:
        for argv in (["--hours", "0.05"], ["--input", str(tmp_path / "rec.csv")]):
            err = refusal(capsys, ["--device", "cpu", *argv, "--out", str(empty)])
            assert f"--out {empty} is not writable here (read-only, or not yours)" in err, err
        err = refusal(capsys, ["--device", "cpu", "--out", str(empty / "run")])
        assert f"--out {empty / 'run'} cannot be created: {empty} is not writable here" in err, err
        assert list(empty.iterdir()) == []
    finally:
        empty.chmod(0o755)


def test_overwrite_replaces_a_link_not_the_file_it_points_to(tmp_path):
    target = tmp_path / "elsewhere.json"
    target.write_text("the reader's\n")
    link = tmp_path / "metrics.json"
    link.symlink_to(target)
    with output_folder.create(link, overwrite=True) as path:
        path.write_text("the run's\n")
    assert target.read_text() == "the reader's\n" and not link.is_symlink() and link.read_text() == "the run's\n"


def test_a_file_that_appears_during_the_run_is_left_alone(tmp_path):
    late = tmp_path / "metrics.json"
    late.write_text("written by someone else meanwhile\n")
    with pytest.raises(output_folder.OutputRefused, match="appeared while the run went on and was left as it is"):
        with output_folder.create(late):
            raise AssertionError("the block ran over an existing file")
    assert late.read_text() == "written by someone else meanwhile\n"


def test_a_write_that_fails_midway_is_one_sentence(capsys, tmp_path, monkeypatch):
    def full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(reading, "write_csv", full_disk)
    err = refusal(capsys, ["--device", "cpu", "--hours", "0.05", "--out", str(tmp_path / "run"), "--no-progress"])
    assert f"writing {tmp_path / 'run' / 'ecg.csv'} failed: No space left on device" in err, err


def test_a_command_line_run_from_a_notebook_reports_its_error_in_one_exception(tmp_path):
    with pytest.raises(cli_runs.CommandLineError, match="--warm must lie between"):
        cli_runs.run_command_line(["--device", "cpu", "--warm", "-1"], out=tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_the_speed_tables_set_each_run_beside_the_others_cold_and_warm():
    def run(scale):
        return {
            "setup_seconds": 1.0 * scale,
            "pipeline_seconds": 2.0 * scale,
            "figures_seconds": 0.5,
            "total_seconds": 5.0 * scale,
            "training_steps": "CUDA graph" if scale < 1 else "eager",
            "stages": [{"stage": "read", "seconds": 0.2 * scale}, {"stage": "train", "seconds": 1.0 * scale}],
            "warm": [{"read_to_plot_seconds": t * scale, "stages": {"read": 0.1, "train": 0.4}} for t in (1, 2, 9)],
        }

    runs = {"before": run(1.0), "after": run(0.5)}
    cold = cli_runs.stage_rows(runs, "cold")
    assert cold == [
        {"stage": "read", "before": "200 ms", "after": "100 ms"},
        {"stage": "train", "before": "1.00 s", "after": "500 ms"},
    ]
    assert cli_runs.stage_rows(runs, "warm")[1] == {"stage": "train", "before": "400 ms", "after": "400 ms"}
    with pytest.raises(ValueError, match="'cold' or 'warm'"):
        cli_runs.stage_rows(runs, "hot")
    table = {row["part"]: row for row in cli_runs.total_rows(runs)}
    assert table["start-up"] == {"part": "start-up", "before": "1.00 s", "after": "500 ms"}
    assert table["synthesis and CSV"]["before"] == "none" and table["figures saved"]["after"] == "500 ms"
    assert table["warm read → plot"]["before"] == "2.00 s" and table["  its range"]["before"] == "1.00 s–9.00 s"
    assert table["training steps"] == {"part": "training steps", "before": "eager", "after": "CUDA graph"}
    assert cli_runs.warm_read_to_plot(run(0.5)) == 1.0


def test_settings_are_compared_in_turns_after_an_unreported_run_of_each_that_fills_the_cache(tmp_path, monkeypatch):
    started = []

    def fake_run(arguments, *, out):
        started.append((list(map(str, arguments)), out.name))
        return {"arguments": list(map(str, arguments)), "warm": [out.name]}

    monkeypatch.setattr(cli_runs, "run_command_line", fake_run)
    settings = {"x": ["--eager"], "y": []}
    runs = cli_runs.compare_settings(tmp_path / "a.csv", None, settings, warm=2, rounds=3, folder=tmp_path)
    assert [out for _, out in started] == [
        "cache-filling-run-0",
        "cache-filling-run-1",
        "round-0-0",
        "round-0-1",
        "round-1-1",  # the second round backwards: no setting always runs first
        "round-1-0",
        "round-2-0",
        "round-2-1",
    ]
    # each setting's filler has its own arguments, without warm passes; the reported runs add them
    assert started[0][0][-1] == "--eager" and "--warm" not in started[0][0] + started[1][0]
    assert runs["x"]["arguments"][-1] == "--eager" and runs["x"]["arguments"][2:4] == ["--warm", "2"]
    assert "--truth" not in runs["y"]["arguments"] and runs["y"]["arguments"][-2:] == ["--warm", "2"]
    # one run per setting: the first round's, with every round's warm passes
    assert runs["x"]["warm"] == ["round-0-0", "round-1-0", "round-2-0"] and runs["x"]["warm_runs"] == 3
    with pytest.raises(ValueError, match="at least one setting"):
        cli_runs.compare_settings(tmp_path / "a.csv", None, {}, folder=tmp_path)
    with pytest.raises(ValueError, match="at least one round"):
        cli_runs.compare_settings(tmp_path / "a.csv", None, settings, rounds=0, folder=tmp_path)


def test_warm_passes_are_refused_outside_their_range_and_gpu_settings_on_the_cpu(tmp_path, capsys):
    for arguments, message in (
        (["--warm", "101"], "--warm must lie between 0 and 100"),
        (["--device", "cpu", "--eager"], "leave them out with --device cpu"),
        (["--device", "cpu", "--pytorch-allocator", "rmm"], "leave them out with --device cpu"),
    ):
        with pytest.raises(SystemExit) as stopped:
            cli.main([*arguments, "--out", str(tmp_path / "run")])
        assert stopped.value.code == 2
        assert message in capsys.readouterr().err
    assert not (tmp_path / "run").exists()


@pytest.mark.slow
def test_a_whole_run_in_its_own_process_leaves_its_files_and_its_line_and_exits_zero(tmp_path):
    # the command line leaves with os._exit: nothing it printed or wrote may be lost on the way out
    out = tmp_path / "run"
    metrics = cli_runs.run_command_line(["--device", "cpu", "--hours", "0.05", "--seed", "1"], out=out)
    assert metrics["process_seconds"] >= metrics["total_seconds"] > 0
    assert {"quality_seconds", "figures_seconds"} <= set(metrics)
    planned = output_folder.planned_files(out, synthetic=True)
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in planned)
    done = subprocess.run(
        [sys.executable, "-m", "support.ecg", "--device", "cpu", "--hours", "0.05", "--out", str(tmp_path / "b")],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.strip().splitlines()[-1])["beats"] > 0
    assert (tmp_path / "b" / "lengths.png").stat().st_size > 0


@pytest.mark.slow
def test_the_shipped_command_line_leaves_pytorch_s_compiler_unimported_and_the_control_imports_it(tmp_path):
    # the control of chapter 6's first-command comparison: the same run with torch.optim.Adam in training
    arguments = ["--device", "cpu", "--hours", "0.05", "--seed", "1"]
    shipped = cli_runs.run_command_line(arguments, out=tmp_path / "shipped")
    alike = cli_runs.run_command_line(arguments, out=tmp_path / "alike", launcher=cli_runs.SHIPPED_LIKE_THE_CONTROL)
    control = cli_runs.run_command_line(arguments, out=tmp_path / "control", launcher=cli_runs.WITH_OPTIMIZER_CLASS)
    imported = [run["torch_dynamo_imported"] for run in (shipped, alike, control)]
    assert imported == [False, False, True]  # the launcher alone imports nothing; the class does
    # the same training, the same beats and scores: only the optimizer's wrapper differs
    assert shipped["beats"] == control["beats"] and shipped["quality"] == control["quality"]


def test_runs_alternate_so_that_neither_way_always_goes_first(tmp_path, monkeypatch):
    started = []

    def fake_run(arguments, *, out, launcher):
        started.append((list(map(str, arguments)), launcher))
        return {"process_seconds": float(len(started)), "setup_seconds": 1.0, "stages": [], "out": out.name}

    monkeypatch.setattr(cli_runs, "run_command_line", fake_run)
    launchers = {"shipped": cli_runs.AS_SHIPPED, "control": cli_runs.WITH_OPTIMIZER_CLASS}
    runs = cli_runs.alternate_runs(["--hours", 1], launchers, repeat=3, folder=tmp_path)
    order = ["control" if launcher == cli_runs.WITH_OPTIMIZER_CLASS else "shipped" for _, launcher in started]
    # one unreported run of each way first (each fills the bytecode cache with what it imports), then the rounds
    assert order == ["shipped", "control", "shipped", "control", "control", "shipped", "shipped", "control"]
    assert all(arguments == ["--hours", "1"] for arguments, _ in started)
    assert len({run["out"] for each in runs.values() for run in each}) == 6  # a new folder for every run
    assert cli_runs.process_timing(runs["shipped"]).samples == (3.0, 6.0, 7.0)  # the warm-ups are not reported
    started.clear()
    cli_runs.alternate_runs(["--hours", 1], launchers, repeat=1, folder=tmp_path / "cold", warmup=0)
    assert len(started) == 2
    for repeat, given, message in ((0, launchers, "at least one round"), (1, {"a": ()}, "at least two ways")):
        with pytest.raises(ValueError, match=message):
            cli_runs.alternate_runs([], given, repeat=repeat, folder=tmp_path)
    with pytest.raises(ValueError, match="fewer than none"):
        cli_runs.alternate_runs([], launchers, repeat=1, folder=tmp_path, warmup=-1)


def test_the_median_table_has_every_part_and_the_process_with_its_range():
    def run(process, setup, train=0.5, outside=0.5):
        stages = [{"stage": "train", "seconds": train}]
        total = process - outside
        return {"process_seconds": process, "total_seconds": total, "setup_seconds": setup, "stages": stages}

    runs = {"shipped": [run(6.0, 2.0), run(9.0, 3.0, 0.7), run(7.0, 2.5)], "control": [run(8.0, 2.0), run(8.0, 2.0)]}
    table = {row["part"]: row for row in cli_runs.median_part_rows(runs)}
    assert table["start-up"] == {"part": "start-up", "shipped": "2.50 s", "control": "2.00 s"}
    assert table["synthesis and CSV"]["shipped"] == "none"
    assert table["the process, end to end"] == {
        "part": "the process, end to end",
        "shipped": "7.00 s",
        "control": "8.00 s",
    }
    assert table["  its range"] == {"part": "  its range", "shipped": "6.00 s–9.00 s", "control": "8.00 s–8.00 s"}
    # each run's rest is its start to finish less its start-up, the only part in sequence it has
    assert table["between the parts"] == {"part": "between the parts", "shipped": "4.00 s", "control": "5.50 s"}
    outside = table["Python's start and exit"]
    assert outside == {"part": "Python's start and exit", "shipped": "500 ms", "control": "500 ms"}
    assert cli_runs.outside_timing([run(6.0, 2.0, outside=0.75)]).samples == (0.75,)
    with pytest.raises(ValueError, match="warm passes"):
        cli_runs.outside_timing([run(6.0, 2.0) | {"warm": [{"read_to_plot_seconds": 0.4}]}])
    assert cli_runs.part_timing(runs["shipped"], "of which training").samples == (0.5, 0.7, 0.5)
    with pytest.raises(ValueError, match="a run has no part 'quality report'"):
        cli_runs.part_timing(runs["shipped"], "quality report")
    with pytest.raises(ValueError, match="no part 'training': the parts are start-up, "):
        cli_runs.part_timing(runs["shipped"], "training")
    saved = cli_runs.median_savings(runs, control="control", changed="shipped")
    assert saved["in the whole process"] == pytest.approx(8.0 - 7.0)
    assert saved["in training"] == pytest.approx(0.0)  # both medians 0.5 s: nothing saved, and not refused
    assert saved["in the rest of the process"] == pytest.approx(1.0)  # the whole's saving, none of it training
    assert cli_runs.median_savings(runs, control="shipped", changed="control")["in the whole process"] < 0


def test_a_control_that_fails_is_named_without_its_launcher_s_code(tmp_path):
    with pytest.raises(cli_runs.CommandLineError, match=r"^\(a control's launcher\) --no-such-option"):
        cli_runs.run_command_line(["--no-such-option"], out=tmp_path / "x", launcher=cli_runs.WITH_OPTIMIZER_CLASS)
    with pytest.raises(cli_runs.CommandLineError, match=r"^-m support\.ecg --no-such-option"):
        cli_runs.run_command_line(["--no-such-option"], out=tmp_path / "y")


#: What the command line's cold path must not import (issue 40, item 5: a fresh run's profile found them,
#: runs/probes/probe_ecg_cold_start_h100_2026-11-26.log): the saved figures are drawn outside pyplot, the FFT
#: length is computed here.
LAZY_MODULES = ("matplotlib.pyplot", "scipy.fft", "scipy.signal")


def _imported_after(code: str, *args: str) -> list[str]:
    probe = code + f"print(sorted(m for m in {LAZY_MODULES!r} if m in sys.modules))\n"
    done = subprocess.run(
        [sys.executable, "-c", "import sys\n" + probe, *args], capture_output=True, text=True, cwd=ROOT, timeout=600
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1].replace("'", '"'))


def test_importing_the_command_line_imports_neither_pyplot_nor_scipy_fft():
    assert _imported_after("import support.ecg.__main__\n") == []


@pytest.mark.slow
def test_a_whole_cpu_run_imports_neither_pyplot_nor_scipy_fft(tmp_path):
    code = (
        "from support.ecg import __main__ as cli\n"
        "argv = ['--device', 'cpu', '--hours', '0.05', '--seed', '1', '--no-progress', '--out', sys.argv[1]]\n"
        "assert cli.main(argv) == 0\n"
    )
    assert _imported_after(code, str(tmp_path / "run")) == []
    assert all((tmp_path / "run" / name).stat().st_size > 0 for name in ("stream.png", "lengths.png"))


def test_the_fft_length_is_scipy_s_for_real_transforms():
    ours = detection.next_fast_len
    rng = np.random.default_rng(0)
    sizes = [*range(1, 20_000), *rng.integers(1, 2**33, 2_000).tolist(), 18_000_081, 2**31 - 1]
    assert [ours(n) for n in sizes] == [scipy_next_fast_len(n, real=True) for n in sizes]
    with pytest.raises(ValueError, match="at least 1"):
        ours(0)


def test_the_saved_figures_drawn_outside_pyplot_are_the_notebook_s_pixels():
    signal = np.random.default_rng(1).standard_normal(250 * 7200).astype(np.float32)
    peaks = np.arange(100, len(signal), 200)

    def png(figure) -> bytes:
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png")
        return buffer.getvalue()

    alone = plots.stream_figure(signal, 250.0, peaks, pyplot=False)
    assert png(alone) == png(plots.stream_figure(signal, 250.0, peaks))
    lengths = np.random.default_rng(2).uniform(100, 300, 5000)
    assert png(plots.lengths_figure(lengths, 250.0, pyplot=False)) == png(plots.lengths_figure(lengths, 250.0))
    with pytest.raises(ValueError, match="takes fixed margins"):  # no layout search is copied outside pyplot
        plots._figure(pyplot=False)
