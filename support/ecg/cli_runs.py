"""The command line (``python -m support.ecg``) run from a notebook, each run in its own fresh process, and its
times set side by side: how long a user waits, cold and warm, with one setting or another.

:func:`run_command_line` starts one run and returns its ``metrics.json``; :func:`compare_settings` runs several
settings on the same CSV, after an unreported run of each that fills Python's bytecode cache (as any second use of
an installed package finds it); :func:`stage_rows` tabulates their stages, cold (the run's own pass) or warm (the
median of its ``--warm`` passes), one column per setting, and :func:`total_rows` the waits: the parts of a run's own
pass (:mod:`support.ecg.run_report`), then warm read to drawn plot with its range. :func:`alternate_runs` starts the
same command two ways (:data:`SHIPPED_LIKE_THE_CONTROL` and a control such as :data:`WITH_OPTIMIZER_CLASS`) in
turns, :func:`median_part_rows` sets their parts side by side, the median of each way's runs, and
:func:`median_savings` says what the change saved.

>>> run = {"setup_seconds": 2.0, "pipeline_seconds": 3.0, "total_seconds": 6.0, "training_steps": "eager",
...        "stages": [{"stage": "read", "seconds": 0.5}, {"stage": "train", "seconds": 2.0}],
...        "warm": [{"read_to_plot_seconds": 1.0, "stages": {"read": 0.1, "train": 0.5}},
...                 {"read_to_plot_seconds": 3.0, "stages": {"read": 0.3, "train": 0.7}}]}
>>> [(r["stage"], r["before"]) for r in stage_rows({"before": run}, "warm")]
[('read', '200 ms'), ('train', '600 ms')]
>>> warm_read_to_plot(run)
2.0
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from support.bench import Timing, format_seconds
from support.ecg import run_report
from support.ecg.turns import in_turns
from support.fresh_process import environment

#: The environment of a run: Python may cache bytecode (as it does for a user), in a folder of its own.
CACHE_ENV = {"PYTHONDONTWRITEBYTECODE": None, "PYTHONPYCACHEPREFIX": str(Path(tempfile.gettempdir()) / "book-pycache")}

#: How a run starts Python: the command line as a user types it.
AS_SHIPPED = ("-m", "support.ecg")

_LAUNCH = """
import runpy, sys, types
{swap}
runpy.run_module("support.ecg", run_name="__main__", alter_sys=True)
"""
_ADAM_CLASS = """
def adam_class(params, *, lr=1e-3, fused=None, capturable=False):
    import torch
    params = list(params)
    fused = params[0].is_cuda if fused is None else fused
    # fused on CUDA as FunctionalAdam is; unfused, the per-tensor loop FunctionalAdam runs, not foreach
    return torch.optim.Adam(params, lr=lr, fused=fused or None, foreach=None if fused else False, capturable=capturable)

stand_in = types.ModuleType("support.ecg.adam")
stand_in.FunctionalAdam = adam_class
sys.modules["support.ecg.adam"] = stand_in
"""
#: The command line with the shipped training, started the way :data:`WITH_OPTIMIZER_CLASS` is (``python -c`` and
#: ``runpy.run_module``, importing ``runpy``, ``sys`` and ``types`` first), so that a comparison of the two differs
#: in the optimizer only; a user types ``python -m support.ecg`` (:data:`AS_SHIPPED`).
SHIPPED_LIKE_THE_CONTROL = ("-c", _LAUNCH.format(swap=""))
#: The control of :class:`support.ecg.adam.FunctionalAdam`: the same command line, started as
#: :data:`SHIPPED_LIKE_THE_CONTROL` is, its training given ``torch.optim.Adam`` (the Optimizer class) in its place by
#: a stand-in module that imports nothing more before the command line starts.
WITH_OPTIMIZER_CLASS = ("-c", _LAUNCH.format(swap=_ADAM_CLASS))


class CommandLineError(RuntimeError):
    """A run of the command line ended with an error; the message quotes what it printed."""


def run_command_line(
    arguments: Sequence[str], *, out: Path, timeout: float = 600, launcher: Sequence[str] = AS_SHIPPED
) -> dict:
    """Run ``python -m support.ecg ARGUMENTS --out OUT --no-progress`` in a new process; return its metrics, with
    ``"process_seconds"`` added: the wall time of the whole process as this side saw it, from its start to its
    exit (Python's start and exit included, and the ``--warm`` passes when asked for).

    ``out`` must not hold an earlier run's files (the command line refuses to replace them). ``launcher``: what
    follows ``python`` in place of ``-m support.ecg`` (:data:`WITH_OPTIMIZER_CLASS`, the control of a comparison).
    """
    command = [sys.executable, *launcher, *map(str, arguments), "--out", str(out), "--no-progress"]
    # support/ first on the child's path, as support.fresh_process does for its children (this module runs a
    # command line, not a function, so it starts the process itself)
    changes = dict(CACHE_ENV)
    existing = environment().get("PYTHONPATH")
    changes["PYTHONPATH"] = str(Path(__file__).resolve().parents[2]) + (f":{existing}" if existing else "")
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, env=environment(changes))
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-5:])
        how = "-m support.ecg" if tuple(launcher) == AS_SHIPPED else "(a control's launcher)"
        shown = " ".join([how, *command[len(launcher) + 1 :]])
        raise CommandLineError(f"{shown} ended with exit {done.returncode}:\n{tail}")
    process_seconds = time.perf_counter() - started
    return json.loads((out / "metrics.json").read_text()) | {"process_seconds": process_seconds}


def compare_settings(
    csv: Path,
    truth: Path | None,
    settings: Mapping[str, Sequence[str]],
    *,
    warm: int = 3,
    rounds: int = 2,
    folder: Path,
) -> dict[str, dict]:
    """Each of ``settings`` (a name and its extra arguments) run in a fresh process on ``csv`` with ``--warm WARM``,
    once per round, in rounds whose order turns round each time (the settings' order, then backwards, ...), so that
    a drift over the runs (the GPU's clocks, files the operating system keeps in memory) does not fall on the last
    settings alone. Before the rounds, one unreported run of each setting, without warm passes: each fills the
    bytecode cache with what its setting imports (a setting may import a module no other does), so that every
    reported run finds it as a user's second run does.

    Returns one run's metrics per setting, :func:`pooled`: its first round's run, with the warm passes of all its
    rounds. Runs go into new folders under ``folder``."""
    if warm < 1:
        raise ValueError(f"ask for at least one warm pass, not {warm}")
    if rounds < 1:
        raise ValueError(f"ask for at least one round, not {rounds}")
    if not settings:
        raise ValueError("name at least one setting")
    given = ["--input", csv] + (["--truth", truth] if truth is not None else [])
    base = [*given[:2], "--warm", warm, *given[2:]]
    names = list(settings)
    for number, extra in enumerate(settings.values()):
        run_command_line([*given, *extra], out=folder / f"cache-filling-run-{number}")
    runs: dict[str, list[dict]] = {name: [] for name in names}
    for round_number, name in in_turns(names, rounds):
        out = folder / f"round-{round_number}-{names.index(name)}"
        runs[name].append(run_command_line([*base, *settings[name]], out=out))
    return {name: pooled(each) for name, each in runs.items()}


def pooled(runs: Sequence[Mapping]) -> dict:
    """The first of ``runs`` (runs of one setting), with the warm passes of all of them (``"warm"``) and how many
    runs they come from (``"warm_runs"``): its cold figures are that one run's, its warm figures
    (:func:`warm_passes`, :func:`stage_rows`) those of every run's passes together.

    >>> pooled([{"total_seconds": 5, "warm": [1]}, {"total_seconds": 6, "warm": [2, 3]}])
    {'total_seconds': 5, 'warm': [1, 2, 3], 'warm_runs': 2}
    """
    if not runs:
        raise ValueError("pool at least one run")
    return dict(runs[0]) | {"warm": [w for run in runs for w in run["warm"]], "warm_runs": len(runs)}


def alternate_runs(
    arguments: Sequence, launchers: Mapping[str, Sequence[str]], *, repeat: int, folder: Path, warmup: int = 1
) -> dict[str, list[dict]]:
    """The command line with ``arguments``, started each way of ``launchers`` (a name and its launcher, such as
    :data:`SHIPPED_LIKE_THE_CONTROL` and :data:`WITH_OPTIMIZER_CLASS`, as chapter 6 runs them) ``repeat`` times,
    each run in a fresh process, in rounds whose order turns round each time (A B, then B A, then A B, ...): a drift
    over the rounds (files the operating system keeps in memory, a GPU warming up) falls on every way alike. Before
    the rounds, ``warmup`` unreported runs of each way: each way's first run writes the bytecode of the modules it
    imports into the runs' cache (:data:`CACHE_ENV`), and a module only one way imports (``torch._dynamo``, say)
    would otherwise be compiled in that way's first reported run. Returns each way's metrics, one per round; runs go
    into new folders under ``folder``."""
    if repeat < 1:
        raise ValueError(f"ask for at least one round, not {repeat}")
    if warmup < 0:
        raise ValueError(f"warm-up runs cannot be fewer than none, not {warmup}")
    if len(launchers) < 2:
        raise ValueError("name at least two ways to start the command line, to alternate them")
    names = list(launchers)
    for number in range(warmup):
        for name in names:
            run_command_line(arguments, out=folder / f"warmup-{number}-{names.index(name)}", launcher=launchers[name])
    runs: dict[str, list[dict]] = {name: [] for name in names}
    for round_number, name in in_turns(names, repeat):
        out = folder / f"round-{round_number}-{names.index(name)}"
        runs[name].append(run_command_line(arguments, out=out, launcher=launchers[name]))
    return runs


def process_timing(runs: Sequence[Mapping], label: str = "the process, end to end") -> Timing:
    """The ``process_seconds`` of several runs as a :class:`~support.bench.Timing` (wall clock)."""
    return Timing(label, tuple(run["process_seconds"] for run in runs), "wall")


def outside_timing(runs: Sequence[Mapping]) -> Timing:
    """What each run's process took outside the run's own clock (``process_seconds`` less ``total_seconds``):
    Python's start, the imports before the command's first line, the report written after the clock stops
    (``metrics.json``, the printed line) and the exit, as a :class:`~support.bench.Timing` (wall clock, each run's
    own). Runs with warm passes (``--warm``) are refused: their passes come after the clock too."""
    if any(run.get("warm") for run in runs):
        raise ValueError("these runs made warm passes (--warm) after their own clock: outside it is not start and exit")
    return Timing(
        "Python's start and exit", tuple(run["process_seconds"] - run["total_seconds"] for run in runs), "wall"
    )


def part_timing(runs: Sequence[Mapping], part: str) -> Timing:
    """One part of several runs (a key of :data:`support.ecg.run_report.PARTS`, ``"of which training"`` say) as
    a :class:`~support.bench.Timing` (wall clock, each run's own)."""
    if part not in run_report.PARTS:
        raise ValueError(f"no part {part!r}: the parts are {', '.join(run_report.PARTS)}")
    values = [run_report.part_seconds(run)[part] for run in runs]
    if None in values:
        raise ValueError(f"a run has no part {part!r}")
    return Timing(part, tuple(values), "wall")


def median_savings(runs: Mapping[str, Sequence[Mapping]], *, control: str, changed: str) -> dict[str, float]:
    """How much shorter, in seconds, the median of ``changed``'s runs was than ``control``'s (two ways of
    :func:`alternate_runs`), in training (``"of which training"``), in the whole process, and in the rest of it
    (the whole's saving less the training's: the parts a change of optimizer does not touch, so what the runs
    differ by on their own); negative where it was longer."""
    training = (
        part_timing(runs[control], "of which training").median - part_timing(runs[changed], "of which training").median
    )
    whole = process_timing(runs[control]).median - process_timing(runs[changed]).median
    return {"in training": training, "in the whole process": whole, "in the rest of the process": whole - training}


def format_saving(seconds: float) -> str:
    """A saving of :func:`median_savings` in words a reader cannot misread: ``"1.03 s shorter"`` or, where the
    changed way took longer, ``"79.5 ms longer"`` (medians of a few runs each can come out either way).

    >>> format_saving(1.03), format_saving(-0.0795)
    ('1.03 s shorter', '79.5 ms longer')
    """
    return f"{format_seconds(abs(seconds))} {'shorter' if seconds >= 0 else 'longer'}"


def median_part_rows(runs: Mapping[str, Sequence[Mapping]]) -> list[dict[str, str]]:
    """One row per part of a run (:data:`support.ecg.run_report.PARTS`), one for what the process took outside the
    run's own clock (:func:`outside_timing`) and one for the whole process, one column per way: the median over
    the way's runs (:func:`part_timing`; ``"none"`` where a run lacks the part), and the process's range under it.
    Each is its own median, so the medians of the parts need not add up to the median of the whole."""

    def median(each: Sequence[Mapping], part: str) -> str:
        try:
            return format_seconds(part_timing(each, part).median)
        except ValueError:  # a run without this part (no synthesis when it read a CSV)
            return "none"

    rows = [{"part": part} | {name: median(each, part) for name, each in runs.items()} for part in run_report.PARTS]
    outside = {name: outside_timing(each) for name, each in runs.items()}
    rows.append({"part": "Python's start and exit"} | {name: format_seconds(t.median) for name, t in outside.items()})
    process = {name: process_timing(each) for name, each in runs.items()}
    rows.append({"part": "the process, end to end"} | {name: format_seconds(t.median) for name, t in process.items()})
    rows.append(
        {"part": "  its range"}
        | {name: f"{format_seconds(t.min)}–{format_seconds(t.max)}" for name, t in process.items()}
    )
    return rows


def warm_passes(run: Mapping) -> Timing:
    """A run's warm passes, read to drawn plot, as a :class:`~support.bench.Timing` (wall clock)."""
    return Timing("read → drawn plot, warm", tuple(w["read_to_plot_seconds"] for w in run["warm"]), "wall")


def warm_read_to_plot(run: Mapping) -> float:
    """The median wall time of a run's warm passes, read to drawn plot."""
    return warm_passes(run).median


def stage_rows(runs: Mapping[str, Mapping], which: str) -> list[dict[str, str]]:
    """One row per stage, one column per run: the stage's time in the run's own pass (``which="cold"``) or the
    median of its warm passes (``"warm"``)."""
    if which not in ("cold", "warm"):
        raise ValueError(f"which must be 'cold' or 'warm', not {which!r}")
    stages = [s["stage"] for s in next(iter(runs.values()))["stages"]]

    def seconds(run: Mapping, stage: str) -> float:
        if which == "cold":
            return next(s["seconds"] for s in run["stages"] if s["stage"] == stage)
        return Timing(stage, tuple(w["stages"][stage] for w in run["warm"]), "wall").median

    return [
        {"stage": stage} | {name: format_seconds(seconds(run, stage)) for name, run in runs.items()} for stage in stages
    ]


def total_rows(runs: Mapping[str, Mapping]) -> list[dict[str, str]]:
    """The waits, one column per run: the parts of the run's own pass (cold: :func:`support.ecg.run_report.time_parts`),
    then read to drawn plot warm (the median and the range of its warm passes), and how its steps ran."""

    def warm_range(run: Mapping) -> str:
        timing = warm_passes(run)
        return f"{format_seconds(timing.min)}–{format_seconds(timing.max)}"

    cold = run_report.time_table(runs)
    warm = {
        "warm read → plot": lambda r: format_seconds(warm_read_to_plot(r)),
        "  its range": warm_range,
        "training steps": lambda r: r.get("training_steps", "?"),
    }
    return cold + [{"part": what} | {name: cell(run) for name, run in runs.items()} for what, cell in warm.items()]
