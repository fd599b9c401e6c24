"""Run the ECG pipeline from the command line: ``python -m support.ecg --help``.

With no ``--input``, it synthesizes ``--hours`` of ECG with ground truth (on the GPU), writes it as CSV into
``--out``, and runs the pipeline on that file. It writes ``metrics.json`` and the figures into ``--out``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

STARTED = time.perf_counter()  # the process's own start-up (Python itself) comes before this line


def parse(argv=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m support.ecg", description=__doc__.splitlines()[0])
    parser.add_argument("--hours", type=float, default=20.0, help="hours of synthetic ECG (default 20)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic ECG and of training")
    parser.add_argument("--input", type=Path, help="a one-column CSV of millivolts instead of synthetic data")
    parser.add_argument("--truth", type=Path, help="ground truth (.npz from a synthetic run) for --input")
    parser.add_argument("--fs", type=float, default=250.0, help="sampling rate of the CSV in Hz (default 250)")
    parser.add_argument("--epochs", type=int, default=12, help="training epochs of the autoencoder")
    parser.add_argument("--device", choices=("gpu", "cpu"), default="gpu", help="where to run (default gpu)")
    parser.add_argument("--traffic", action="store_true", help="count host<->GPU copies per stage (slower)")
    parser.add_argument("--out", type=Path, default=Path("ecg-run"), help="folder for CSV, metrics and figures")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    args = parser.parse_args(argv)
    if args.truth and not args.input:
        parser.error("--truth goes with --input")
    if args.hours <= 0:
        parser.error(f"--hours must be positive, not {args.hours}")
    return args


def main(argv=None) -> int:
    args = parse(argv)
    from support import env
    from support.ecg import pipeline, plots, reading, synthetic

    args.out.mkdir(parents=True, exist_ok=True)
    report: dict = {"device": args.device, "seed": args.seed}
    if args.device == "gpu":
        from support.memory import use_one_pool

        gpu = env.require_gpu()
        report["gpu"] = gpu.name
        report["pool"] = str(use_one_pool())
        import cupy as xp
    else:
        import numpy as xp
    report["versions"] = env.stack_versions()
    report["setup_seconds"] = time.perf_counter() - STARTED  # imports, the GPU check, the pool
    truth = None
    if args.input is None:
        started = time.perf_counter()
        ecg = synthetic.synthesize(hours=args.hours, fs=args.fs, seed=args.seed, xp=xp)
        path = reading.write_csv(ecg.signal, args.out / "ecg.csv")
        synthetic.save_truth(ecg, args.out / "truth.npz")
        truth = (ecg.r_peaks, ecg.labels)
        report["synthetic"] = {"hours": args.hours, "beats": ecg.counts(), "csv_bytes": path.stat().st_size}
        report["synthesize_and_write_seconds"] = time.perf_counter() - started
        del ecg
    else:
        path = args.input
        if args.truth:
            r_peaks, labels, _ = synthetic.load_truth(args.truth)
            truth = (r_peaks, labels)
    config = pipeline.PipelineConfig(fs=args.fs, epochs=args.epochs, seed=args.seed, progress=not args.no_progress)
    meter = None
    if args.traffic:
        from support.traffic import TrafficMeter

        meter = TrafficMeter()
    log = pipeline.StageLog(meter=meter)
    started = time.perf_counter()
    try:
        result = pipeline.run_pipeline(path, config, on=args.device, log=log)
    except (reading.SignalError, FileNotFoundError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    report["pipeline_seconds"] = time.perf_counter() - started
    report["stages"] = [
        {"stage": r.name, "seconds": r.seconds, "peak_bytes": r.memory.peak_bytes, "held_after": r.memory.held_after}
        for r in log.reports
    ]
    report["beats"] = len(result.beats)
    if meter is not None:
        report["traffic"] = {name: vars(copies) for name, copies in meter.stages.items()}
        report["bytes_across_host_link_after_read"] = meter.between("convolve", "score").across_host_link
    if truth is not None:
        report["quality"] = pipeline.evaluate(result, *truth)
    plots.stream_figure(result.recording.signal, args.fs, result.beats.peaks).savefig(args.out / "stream.png")
    plots.lengths_figure(result.lengths, args.fs).savefig(args.out / "lengths.png")
    report["total_seconds"] = time.perf_counter() - STARTED
    (args.out / "metrics.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    print(
        json.dumps(
            {k: report[k] for k in ("setup_seconds", "pipeline_seconds", "total_seconds", "beats") if k in report}
            | report.get("quality", {})
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
