"""The command line (``python -m support.ecg``) run from a notebook, each run in its own fresh process, and its
times set side by side: how long a user waits, cold and warm, with one setting or another.

:func:`run_command_line` starts one run and returns its ``metrics.json``; :func:`compare_settings` runs several
settings on the same CSV, each twice (the first run fills Python's bytecode cache, as any second use of an
installed package finds it; the second is the one reported); :func:`speed_rows` tabulates their stages, cold
(the run's own pass) and warm (the median of its ``--warm`` passes), and the wait from start to finish.

>>> run = {"setup_seconds": 2.0, "pipeline_seconds": 3.0, "total_seconds": 6.0, "training_steps": "eager",
...        "stages": [{"stage": "read", "seconds": 0.5}, {"stage": "train", "seconds": 2.0}],
...        "warm": [{"read_to_plot_seconds": 1.0, "stages": {"read": 0.1, "train": 0.5}},
...                 {"read_to_plot_seconds": 3.0, "stages": {"read": 0.3, "train": 0.7}}]}
>>> rows = speed_rows({"before": run})
>>> [(r["what"], r["before"]) for r in rows][:3]
[('read (cold)', '500 ms'), ('train (cold)', '2.00 s'), ('read (warm)', '200 ms')]
>>> warm_read_to_plot(run)
2.0
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from support.bench import format_seconds
from support.fresh_process import environment

#: The environment of a run: Python may cache bytecode (as it does for a user), in a folder of its own.
CACHE_ENV = {"PYTHONDONTWRITEBYTECODE": None, "PYTHONPYCACHEPREFIX": str(Path(tempfile.gettempdir()) / "book-pycache")}


class CommandLineError(RuntimeError):
    """A run of the command line ended with an error; the message quotes what it printed."""


def run_command_line(arguments: Sequence[str], *, out: Path, timeout: float = 600) -> dict:
    """Run ``python -m support.ecg ARGUMENTS --out OUT --no-progress`` in a new process; return its metrics.

    ``out`` must not hold an earlier run's files (the command line refuses to replace them).
    """
    command = [sys.executable, "-m", "support.ecg", *map(str, arguments), "--out", str(out), "--no-progress"]
    support_root = str(Path(__file__).resolve().parents[2])
    changes = dict(CACHE_ENV)
    existing = environment().get("PYTHONPATH")
    changes["PYTHONPATH"] = support_root + (f":{existing}" if existing else "")
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=environment(changes))
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-5:])
        raise CommandLineError(f"{' '.join(command[1:])} ended with exit {done.returncode}:\n{tail}")
    return json.loads((out / "metrics.json").read_text())


def compare_settings(
    csv: Path, truth: Path | None, settings: Mapping[str, Sequence[str]], *, warm: int = 3, folder: Path
) -> dict[str, dict]:
    """Each of ``settings`` (a name and its extra arguments) run twice in fresh processes on ``csv`` with
    ``--warm WARM``; returns the second run's metrics per name. Runs go into new folders under ``folder``."""
    if warm < 1:
        raise ValueError(f"ask for at least one warm pass, not {warm}")
    base = ["--input", csv, "--warm", warm] + (["--truth", truth] if truth is not None else [])
    runs = {}
    for number, (name, extra) in enumerate(settings.items()):
        for attempt in range(2):
            out = folder / f"run-{number}-{attempt}"
            runs[name] = run_command_line([*base, *extra], out=out)
    return runs


def warm_read_to_plot(run: Mapping) -> float:
    """The median wall time of a run's warm passes, read to drawn plot."""
    return statistics.median(w["read_to_plot_seconds"] for w in run["warm"])


def _spread(values: Sequence[float]) -> str:
    return f"{format_seconds(statistics.median(values))} ({format_seconds(min(values))}–{format_seconds(max(values))})"


def speed_rows(runs: Mapping[str, Mapping]) -> list[dict[str, str]]:
    """One row per stage (cold, then warm: the median of the warm passes), then the totals; one column per run."""
    names = list(runs)
    stages = [s["stage"] for s in next(iter(runs.values()))["stages"]]
    rows = []
    for stage in stages:
        row = {"what": f"{stage} (cold)"}
        for name in names:
            row[name] = format_seconds(next(s["seconds"] for s in runs[name]["stages"] if s["stage"] == stage))
        rows.append(row)
    for stage in stages:
        row = {"what": f"{stage} (warm)"}
        for name in names:
            row[name] = format_seconds(statistics.median(w["stages"][stage] for w in runs[name]["warm"]))
        rows.append(row)
    totals = {
        "read → drawn plot (warm, median and range)": lambda r: _spread([w["read_to_plot_seconds"] for w in r["warm"]]),
        "start-up: imports, GPU check, pool": lambda r: format_seconds(r["setup_seconds"]),
        "fresh process, start to finish (saved figures)": lambda r: format_seconds(r["total_seconds"]),
        "training steps ran": lambda r: r.get("training_steps", "?"),
    }
    for what, cell in totals.items():
        rows.append({"what": what} | {name: cell(runs[name]) for name in names})
    return rows
