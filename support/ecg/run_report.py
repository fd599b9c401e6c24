"""The report a command-line run writes (``metrics.json`` of ``python -m support.ecg``), read back: where its
time went.

A run records its whole time from the interpreter's start (``total_seconds``), the start-up before any data
(``setup_seconds``: imports, the GPU check, the pool), the synthesis and the CSV when it made its own data
(``synthesize_and_write_seconds``), the pipeline (``pipeline_seconds``) and each stage of it (``stages``).
:func:`time_parts` puts those side by side for one run, and :func:`time_table` for several, as chapter 6 prints
its two recorded runs.

>>> run = {
...     "total_seconds": 9.0, "setup_seconds": 3.0, "pipeline_seconds": 4.0,
...     "stages": [{"stage": "read", "seconds": 0.2}, {"stage": "train", "seconds": 2.5}],
... }
>>> time_parts(run)
{'in all': '9.00 s', 'start-up': '3.00 s', 'synthesis and CSV': 'none', 'pipeline': '4.00 s',
 'of which training': '2.50 s'}
"""

from __future__ import annotations

from support.bench import format_seconds


def training_seconds(run: dict) -> float:
    """The seconds of the run's ``train`` stage."""
    for stage in run.get("stages", ()):
        if stage["stage"] == "train":
            return stage["seconds"]
    raise ValueError("the run's report has no train stage: is it a metrics.json of python -m support.ecg?")


def time_parts(run: dict) -> dict[str, str]:
    """The run's time in all, its start-up, its synthesis and CSV (``"none"`` when it read a CSV it was given),
    its pipeline and the training within it, each as :func:`support.bench.format_seconds` writes it."""
    parts = {
        "in all": run["total_seconds"],
        "start-up": run["setup_seconds"],
        "synthesis and CSV": run.get("synthesize_and_write_seconds"),
        "pipeline": run["pipeline_seconds"],
        "of which training": training_seconds(run),
    }
    return {part: "none" if seconds is None else format_seconds(seconds) for part, seconds in parts.items()}


def time_table(runs: dict[str, dict]) -> list[dict[str, str]]:
    """One row of :func:`time_parts` per run (``runs``: a name → the run's report), the name first."""
    return [{"run": name} | time_parts(run) for name, run in runs.items()]
