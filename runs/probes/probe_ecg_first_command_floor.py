"""How far a fresh ``python -m support.ecg --hours 20`` can go below its current time on the GPU host (issue 40,
item 5: under 6 s end to end), measured against its floor. Run from the repository root on the host:
``python runs/probes/probe_ecg_first_command_floor.py LOG_DIR [RUNS]``.

Three kinds of fresh process, each started the way chapter 6 starts the command line (``cli_runs.CACHE_ENV``: a
bytecode cache, as a user's second run has), one unreported warm-up of each, then ``RUNS`` rounds in turns:

- ``command``: the command line as shipped (``cli_runs.run_command_line``), its parts and its wall time;
- ``start-up only``: the command line's own start-up and nothing else (its imports, the GPU check, the free
  memory read, the pool, the pipeline's modules, the versions it records), then ``os._exit``: what no run of
  this command can go below;
- ``libraries only``: ``import torch, cudf, cupy`` and a CUDA context, then ``os._exit``: what any program
  with these libraries pays before it does anything.

Wall time of each whole process (the host's clock, one clock for every row), medians and ranges. The
command's floor is ``start-up only``; ``6 s - floor`` is what the work (synthesis, pipeline, report, figures)
would have to fit in.
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from support.ecg import cli_runs, run_report
from support.fresh_process import environment

COMMAND = ["--hours", "20", "--seed", "0"]
START_UP_ONLY = """
import os, sys
from support.ecg import __main__ as cli
from support.memory import use_one_pool
from support import env
cli.check_gpu()
cli.available_memory("gpu")
use_one_pool(pytorch=False)
import cupy
from support.ecg import pipeline, plots, reading, synthetic
env.stack_versions()
sys.stdout.flush()
os._exit(0)
"""
LIBRARIES_ONLY = """
import os, sys
import torch, cudf, cupy
cupy.zeros(1).sum().item()
sys.stdout.flush()
os._exit(0)
"""
GOAL_SECONDS = 6.0


def python_code_seconds(code: str) -> float:
    """Wall time of ``python -c CODE`` in a fresh process with the command line's environment."""
    changes = dict(cli_runs.CACHE_ENV)
    existing = environment().get("PYTHONPATH")
    changes["PYTHONPATH"] = str(Path.cwd()) + (f":{existing}" if existing else "")
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=environment(changes)
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"python -c failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return seconds


def main(log_dir: Path, runs: int) -> None:
    log_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="first-command-floor-"))
    kinds = {
        "command": lambda n: cli_runs.run_command_line(COMMAND, out=work / f"command-{n}"),
        "start-up only": lambda _: python_code_seconds(START_UP_ONLY),
        "libraries only": lambda _: python_code_seconds(LIBRARIES_ONLY),
    }
    for name, one in kinds.items():  # warm-up: bytecode, Numba's cache, matplotlib's font list
        one("warm-up")
        print(f"warm-up {name}: done", flush=True)
    seconds: dict[str, list[float]] = {name: [] for name in kinds}
    reports = []
    for n in range(runs):
        for name, one in kinds.items() if n % 2 == 0 else reversed(list(kinds.items())):
            result = one(n)
            if name == "command":
                reports.append(result)
                result = result["process_seconds"]
            seconds[name].append(result)
            print(f"round {n + 1} {name}: {result:.3f} s", flush=True)
    summary = {
        name: {"median": statistics.median(v), "min": min(v), "max": max(v), "runs": v} for name, v in seconds.items()
    }
    for name, row in summary.items():
        print(f"{name}: median {row['median']:.2f} s (range {row['min']:.2f}-{row['max']:.2f} s, {runs} runs)")
    floor = summary["start-up only"]["median"]
    left = GOAL_SECONDS - floor
    print(f"left for the work under {GOAL_SECONDS:g} s: {left:.2f} s (the command's floor {floor:.2f} s)")
    for report in reports:  # each run's parts, as chapter 6's table names them
        print(json.dumps(run_report.time_parts(report)))
    (log_dir / "probe_ecg_first_command_floor.json").write_text(
        json.dumps({"seconds": summary, "reports": reports}, indent=1, default=str)
    )
    shutil.rmtree(work)  # the runs' CSVs and figures


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]) if len(sys.argv) > 2 else 5)
