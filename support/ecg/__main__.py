"""Run the ECG pipeline from the command line: ``python -m support.ecg --help``.

With no ``--input``, it synthesizes ``--hours`` of ECG with ground truth, writes it as CSV into ``--out``, and
runs the pipeline on that file. It writes ``metrics.json`` and the figures into ``--out``. ``--device cpu`` runs
everything on the CPU (no GPU needed; slower). It never replaces a file it did not create in this run: when
``--out`` already holds one of the files it would write, it refuses and names them (``--overwrite`` replaces them).

A mistake on the command line, a file that cannot be read, a machine without a GPU or a recording too large for
the memory ends with one sentence on stderr and exit status 2, never a traceback. The arguments are checked
before the GPU libraries are imported (among them that ``--out`` can be written: :mod:`support.ecg.output_folder`),
and ``--out`` is created only once there is something to write into it.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time
from pathlib import Path

from support import env
from support.ecg import detection, output_folder
from support.memory import use_one_pool
from support.units import describe_bytes

STARTED = time.perf_counter()  # the process's own start-up (Python itself) comes before this line

#: Exit status of every refusal (argparse's own, for a bad command line).
USAGE_ERROR = 2
#: The most samples one recording may have: the pipeline reads the CSV into one column, and a cuDF column holds
#: at most 2**31 - 1 rows.
MAX_SAMPLES = 2**31 - 1
#: Sampling rates above this are not an ECG's (clinical ECGs are sampled at 125 Hz to 1 kHz, research ones up to
#: a few kHz).
MAX_FS = 20_000.0
#: More epochs than this is a typo, not a training plan (the pipeline's default is a dozen).
MAX_EPOCHS = 10_000
#: More warm repeats than this is a typo (each is a whole read → plot).
MAX_WARM = 100
#: Memory a synthetic run needs per sample, at most: synthesizing peaks near 215 bytes a sample (NumPy's
#: allocations, measured with tracemalloc; tests/test_ecg_cli.py holds it), the pipeline on the CPU near 240 (the
#: same measure at half an hour), on the GPU near 100 (the stages' peaks in ``chapters/ecg_cli_metrics.json``).
#: A run that would not fit is refused before it starts: on the host the kernel would otherwise kill the process
#: without a word.
BYTES_PER_SAMPLE = 300
CPU_HINT = "run it on the CPU with --device cpu (slower, no GPU needed)"


class UserError(Exception):
    """Something the person running the command can fix; its message is the whole report."""


def _column(text: str) -> str | int:
    """``--column``: a header name, or a 0-based index when it is a whole number."""
    return int(text) if re.fullmatch(r"\d+", text.strip()) else text.strip()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m support.ecg", description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=20.0, help="hours of synthetic ECG (default 20)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic ECG and of training")
    parser.add_argument("--input", type=Path, help="a CSV of millivolts instead of synthetic data")
    parser.add_argument(
        "--column", type=_column, help="the CSV's column to read when it has several: a header name or a 0-based index"
    )
    parser.add_argument("--truth", type=Path, help="ground truth (.npz from a synthetic run) for --input")
    parser.add_argument("--fs", type=float, default=250.0, help="sampling rate of the CSV in Hz (default 250)")
    parser.add_argument(
        "--epochs", type=int, default=None, help="training epochs of the autoencoder (default: the pipeline's)"
    )
    parser.add_argument("--device", choices=("gpu", "cpu"), default="gpu", help="where to run (default gpu)")
    parser.add_argument("--traffic", action="store_true", help="count host<->GPU copies per stage (slower)")
    parser.add_argument("--out", type=Path, default=Path("ecg-run"), help="folder for CSV, metrics and figures")
    parser.add_argument(
        "--overwrite", action="store_true", help="replace the files of an earlier run in --out (refused otherwise)"
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.add_argument(
        "--pytorch-allocator",
        choices=("own", "rmm"),
        default="own",
        help="PyTorch's own caching allocator beside RMM's pool for the rest (default: the training step can be "
        "a CUDA graph), or RMM's pool for PyTorch too (one pool for every library: no graph)",
    )
    parser.add_argument("--eager", action="store_true", help="train step by step, never as a CUDA graph")
    parser.add_argument(
        "--warm",
        type=int,
        default=0,
        metavar="N",
        help="after the run, read the CSV and draw its plot N more times in this process (warm) and report each",
    )
    return parser


def check_arguments(args: argparse.Namespace) -> None:
    """Refuse what cannot work, with the reason; imports nothing heavier than NumPy."""
    if not (math.isfinite(args.fs) and 0 < args.fs <= MAX_FS):
        raise UserError(f"--fs must be a sampling rate in Hz above 0 and at most {MAX_FS:g}, not {args.fs:g}")
    try:
        detection.ricker(args.fs)  # the pipeline's own rule: the QRS wavelet needs enough samples
    except ValueError as error:
        raise UserError(f"--fs {args.fs:g}: {error}") from None
    if args.epochs is not None and not 1 <= args.epochs <= MAX_EPOCHS:
        raise UserError(f"--epochs must lie between 1 and {MAX_EPOCHS}, not {args.epochs}")
    if not 0 <= args.warm <= MAX_WARM:
        raise UserError(f"--warm must lie between 0 and {MAX_WARM}, not {args.warm}")
    if args.device == "cpu" and (args.pytorch_allocator != "own" or args.eager):
        raise UserError("--pytorch-allocator and --eager choose how the GPU trains; leave them out with --device cpu")
    if args.truth and not args.input:
        raise UserError("--truth goes with --input (a synthetic run makes its own ground truth)")
    if args.column is not None and not args.input:
        raise UserError("--column goes with --input (a synthetic run writes one column)")
    if args.input is None:
        if not (math.isfinite(args.hours) and args.hours > 0):
            raise UserError(f"--hours must be a positive number of hours, not {args.hours:g}")
        samples = args.hours * 3600 * args.fs
        if samples > MAX_SAMPLES:
            most = MAX_SAMPLES / (3600 * args.fs)
            raise UserError(
                f"--hours {args.hours:g} at {args.fs:g} Hz is {samples:,.0f} samples; one recording holds at most "
                f"{MAX_SAMPLES:,} (a cuDF column's rows): ask for at most {math.floor(most):,} hours"
            )
    else:
        _check_file(args.input, "--input", ".csv")
        if args.truth:
            _check_file(args.truth, "--truth", ".npz")
    inputs = {flag: path for flag, path in (("--input", args.input), ("--truth", args.truth)) if path is not None}
    try:
        output_folder.check(args.out, planned_files(args), overwrite=args.overwrite, inputs=inputs)
    except output_folder.OutputRefused as error:
        raise UserError(str(error)) from None


def planned_files(args: argparse.Namespace) -> list[Path]:
    """Every file this run writes into ``--out``."""
    return output_folder.planned_files(args.out, synthetic=args.input is None)


def _check_file(path: Path, flag: str, suffix: str) -> None:
    if path.is_dir():
        inside = sorted(p.name for p in path.iterdir() if p.suffix.lower() == suffix)
        hint = f" (it holds {', '.join(inside[:3])}{', …' if len(inside) > 3 else ''})" if inside else ""
        raise UserError(f"{flag} {path} is a directory; give the {suffix} file itself{hint}")
    if not path.is_file():
        raise UserError(f"{flag} {path}: no such file")


def parse(argv=None) -> argparse.Namespace:
    """The arguments, checked: a mistake exits with status 2 and argparse's usage line."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        check_arguments(args)
    except UserError as error:
        parser.error(str(error))
    return args


def check_gpu() -> object:
    """GPU 0, or :class:`UserError` naming the CPU route; asks the driver before any GPU library is imported."""
    probe = env.probe_gpus()
    if not probe.available:
        raise UserError(f"no usable CUDA GPU here ({probe.problem}); {CPU_HINT}")
    try:
        return env.require_gpu()
    except env.GpuUnavailableError as error:
        raise UserError(f"{error} Or {CPU_HINT}.") from None


def available_memory(device: str) -> int | None:
    """Bytes this process can allocate now: free GPU memory as CUDA reports it, or the host's available RAM."""
    try:
        if device == "gpu":
            return env.memory_this_process_sees()[0]
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except Exception:  # noqa: BLE001 - without a figure the message says so
        return None
    return None


_UNITS = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40, "PiB": 2**50, "EiB": 2**60}


def asked_bytes(error: BaseException) -> int | None:
    """The size of the allocation that failed, as the library's message gives it (NumPy, CuPy, PyTorch, RMM)."""
    total = getattr(error, "_total_size", None)  # NumPy's _ArrayMemoryError
    if isinstance(total, int):
        return total
    text = str(error)
    match = re.search(r"allocat\w*\s+([\d,]+)\s*bytes", text, re.I)  # CuPy, RMM
    if match:
        return int(match.group(1).replace(",", ""))
    match = re.search(r"allocate\s+([\d.]+)\s*(B|[KMGTPE]iB)", text, re.I)  # PyTorch, NumPy
    if match:
        unit = next(u for u in _UNITS if u.lower() == match.group(2).lower())
        return int(float(match.group(1)) * _UNITS[unit])
    return None


def is_out_of_memory(error: BaseException) -> bool:
    return isinstance(error, MemoryError) or type(error).__name__ == "OutOfMemoryError"


def out_of_memory_message(error: BaseException, args: argparse.Namespace, available: int | None) -> str:
    where = "GPU" if args.device == "gpu" else "host"
    asked = asked_bytes(error)
    asked_text = f"an allocation of {describe_bytes(asked)}" if asked is not None else "an allocation"
    available_text = (
        f"{describe_bytes(available)} available when the run started"
        if available is not None
        else "an unknown amount available"
    )
    recording = f"--hours {args.hours:g}" if args.input is None else f"--input {args.input}"
    return (
        f"out of {where} memory: {asked_text} was asked for with {available_text}, running {recording}; "
        + ("ask for fewer --hours" if args.input is None else "use a shorter recording")
        + " or a machine with more memory"
    )


def check_memory(args: argparse.Namespace, available: int | None) -> None:
    """Refuse a synthetic run that needs more memory than is available, with both figures."""
    samples = round(args.hours * 3600 * args.fs)
    needed = samples * BYTES_PER_SAMPLE
    if available is None or needed <= available:
        return
    where = "GPU" if args.device == "gpu" else "host"
    most = available / BYTES_PER_SAMPLE / (3600 * args.fs)
    raise UserError(
        f"--hours {args.hours:g} at {args.fs:g} Hz is {samples:,} samples and needs about {describe_bytes(needed)} "
        f"of {where} memory ({BYTES_PER_SAMPLE} bytes a sample); {describe_bytes(available)} is available: "
        f"ask for at most {most:.1f} hours"
    )


def main(argv=None) -> int:
    args = parse(argv)
    try:
        return run(args)
    except (UserError, output_folder.OutputRefused) as error:
        return _refuse(str(error))
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception as error:
        from support.ecg import reading  # noqa: PLC0415 - a bug's traceback must not wait for this import

        if is_out_of_memory(error):
            available = getattr(args, "available_bytes", None)
            return _refuse(out_of_memory_message(error, args, available))
        if isinstance(error, reading.SignalError | FileNotFoundError | IsADirectoryError | PermissionError):
            message = str(error).replace("pass column= to choose one", "choose one with --column")
            return _refuse(message)
        raise  # a bug: the traceback is for whoever fixes it


def _refuse(message: str) -> int:
    print(f"python -m support.ecg: error: {message}", file=sys.stderr)
    return USAGE_ERROR


def run(args: argparse.Namespace) -> int:
    """The run itself, for arguments :func:`parse` accepted."""
    report: dict = {"device": args.device, "seed": args.seed}
    if args.device == "gpu":
        gpu = check_gpu()
        args.available_bytes = available_memory("gpu")  # before the pool takes its share
        report["gpu"] = gpu.name
        report["pool"] = str(use_one_pool(pytorch=args.pytorch_allocator == "rmm"))
        import cupy as xp
    else:
        args.available_bytes = available_memory("cpu")
        import numpy as xp  # noqa: PLC0415 - the array module of this run, like cupy above
    from support.ecg import pipeline, plots, reading, synthetic  # noqa: PLC0415 - PyTorch: after the arguments are checked

    report["versions"] = env.stack_versions()
    report["setup_seconds"] = time.perf_counter() - STARTED  # imports, the GPU check, the pool
    settings = {"fs": args.fs, "seed": args.seed, "progress": not args.no_progress, "graph": not args.eager}
    if args.epochs is not None:
        settings["epochs"] = args.epochs
    try:
        config = pipeline.PipelineConfig(**settings)
    except ValueError as error:
        raise UserError(str(error)) from None
    report["epochs"] = config.epochs
    truth = None
    if args.input is None and args.hours * 3600 < pipeline.MIN_SECONDS:
        raise UserError(
            f"--hours {args.hours:g} is {args.hours * 3600:.1f} s; the pipeline needs at least "
            f"{pipeline.MIN_SECONDS:g} s ({pipeline.MIN_SECONDS / 3600:.4f} hours)"
        )
    if args.input is None:
        check_memory(args, args.available_bytes)
        started = time.perf_counter()
        try:
            ecg = synthetic.synthesize(hours=args.hours, fs=args.fs, seed=args.seed, xp=xp)
        except ValueError as error:
            raise UserError(f"--hours {args.hours:g}: {error}") from None
        output_folder.make_folder(args.out)
        with output_folder.create(args.out / "ecg.csv", overwrite=args.overwrite) as path:
            reading.write_csv(ecg.signal, path)
        with output_folder.create(args.out / "truth.npz", overwrite=args.overwrite) as truth_path:
            synthetic.save_truth(ecg, truth_path)
        truth = (ecg.r_peaks, ecg.labels)
        report["synthetic"] = {"hours": args.hours, "beats": ecg.counts(), "csv_bytes": path.stat().st_size}
        report["synthesize_and_write_seconds"] = time.perf_counter() - started
        del ecg
    else:
        path = args.input
        if args.truth:
            try:
                r_peaks, labels, _ = synthetic.load_truth(args.truth)
            except (OSError, ValueError, KeyError) as error:
                raise UserError(f"--truth {args.truth} is not ground truth from a synthetic run: {error}") from None
            truth = (r_peaks, labels)
    meter = None
    if args.traffic:
        from support.traffic import TrafficMeter  # noqa: PLC0415 - only with --traffic (CUPTI)

        meter = TrafficMeter()
    log = pipeline.StageLog(meter=meter)
    started = time.perf_counter()
    with log.stage("read"):
        recording = reading.read_signal(path, on=args.device, column=args.column)
        pipeline.check_length(recording.signal, config.fs)
    result = pipeline.run_from_signal(recording, config, log=log)
    report["pipeline_seconds"] = time.perf_counter() - started
    report["stages"] = [
        {"stage": r.name, "seconds": r.seconds, "peak_bytes": r.memory.peak_bytes, "held_after": r.memory.held_after}
        for r in log.reports
    ]
    report["beats"] = len(result.beats)
    report["training_steps"] = result.training.steps_ran
    report["training_note"] = result.training.step_note
    if meter is not None:
        report["traffic"] = {name: vars(copies) for name, copies in meter.stages.items()}
        report["bytes_across_host_link_after_read"] = meter.between("convolve", "score").across_host_link
    if truth is not None:
        started = time.perf_counter()
        report["quality"] = pipeline.evaluate(result, *truth)
        report["quality_seconds"] = time.perf_counter() - started  # the VAE and the baselines scored
    started = time.perf_counter()
    output_folder.make_folder(args.out)
    with output_folder.create(args.out / "stream.png", overwrite=args.overwrite) as figure:
        plots.stream_figure(result.recording.signal, args.fs, result.beats.peaks, pyplot=False).savefig(figure)
    with output_folder.create(args.out / "lengths.png", overwrite=args.overwrite) as figure:
        plots.lengths_figure(result.lengths, args.fs, pyplot=False).savefig(figure)
    report["figures_seconds"] = time.perf_counter() - started
    report["total_seconds"] = time.perf_counter() - STARTED
    # whether PyTorch's compiler stack was imported by then (torch.optim's Optimizer class imports it at its first
    # use; the pipeline's training does not use that class: support.ecg.adam)
    report["torch_dynamo_imported"] = "torch._dynamo" in sys.modules
    if args.warm:
        report["warm"] = [warm_read_to_plot(path, config, args) for _ in range(args.warm)]
    with output_folder.create(args.out / "metrics.json", overwrite=args.overwrite) as metrics:
        metrics.write_text(json.dumps(report, indent=2, default=str) + "\n")
    print(
        json.dumps(
            {k: report[k] for k in ("setup_seconds", "pipeline_seconds", "total_seconds", "beats") if k in report}
            | report.get("quality", {})
        )
    )
    return 0


def warm_read_to_plot(path: Path, config, args: argparse.Namespace) -> dict:
    """Once more, in this warm process: read the CSV, run every stage, draw the stream plot (not saved). Returns
    the wall time of it all and each stage's time."""
    from support.ecg import pipeline, plots, reading  # noqa: PLC0415 - PyTorch: after the arguments are checked

    log = pipeline.StageLog()
    started = time.perf_counter()
    with log.stage("read"):
        recording = reading.read_signal(path, on=args.device, column=args.column)
    result = pipeline.run_from_signal(recording, config, log=log)
    figure = plots.stream_figure(result.recording.signal, args.fs, result.beats.peaks, pyplot=False)
    figure.canvas.draw()
    seconds = time.perf_counter() - started
    return {"read_to_plot_seconds": seconds, "stages": {r.name: r.seconds for r in log.reports}}


if __name__ == "__main__":
    status = main()
    # Every file is written and closed: leave without Python's teardown of the GPU libraries, as the children of
    # support.fresh_process leave (on the H100 the process outlived the run's own clock by seconds, Python's start
    # and exit together: runs/probes/probe_ecg_cold_start.py). Standard output first: os._exit does not flush it.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
