"""The report a command-line run writes (``metrics.json`` of ``python -m support.ecg``), read back: where its
time went.

A run records its time from the command line's first line to its figures saved (``total_seconds``; Python's own
start and the module's first imports come before it, the caller's clock sees them: :mod:`support.ecg.cli_runs`),
and the parts of it: the start-up before any data (``setup_seconds``: imports, the GPU check, the pool), the
synthesis and the CSV when it made its own data (``synthesize_and_write_seconds``), the pipeline
(``pipeline_seconds``) and each stage of it (``stages``), the quality report against the ground truth when it
had one (``quality_seconds``) and the figures saved (``figures_seconds``). What the named parts leave of the
whole is its own part, "between the parts" (the steps no part times), so the parts add up to the whole.
:func:`time_parts` names them for one run, and :func:`time_table` sets several runs side by side, a column each.

>>> run = {
...     "total_seconds": 9.0, "setup_seconds": 3.0, "pipeline_seconds": 4.0,
...     "stages": [{"stage": "read", "seconds": 0.2}, {"stage": "train", "seconds": 2.5}],
... }
>>> time_parts(run)
{'start-up': '3.00 s', 'synthesis and CSV': 'none', 'pipeline': '4.00 s', 'of which training': '2.50 s',
 'quality report': 'none', 'figures saved': 'none', 'between the parts': '2.00 s', 'start to finish': '9.00 s'}
"""

from __future__ import annotations

from support.bench import format_seconds

#: Each part of a run, and the key of ``metrics.json`` that holds its seconds; "of which training" is the
#: pipeline's ``train`` stage and "between the parts" what the parts in sequence leave of "start to finish"
#: (:func:`between_parts_seconds`).
PARTS = {
    "start-up": "setup_seconds",
    "synthesis and CSV": "synthesize_and_write_seconds",
    "pipeline": "pipeline_seconds",
    "of which training": None,
    "quality report": "quality_seconds",
    "figures saved": "figures_seconds",
    "between the parts": None,
    "start to finish": "total_seconds",
}

#: The parts that follow one another and make up "start to finish" with "between the parts" ("of which training"
#: is inside "pipeline").
IN_SEQUENCE = ("start-up", "synthesis and CSV", "pipeline", "quality report", "figures saved")


def training_seconds(run: dict) -> float:
    """The seconds of the run's ``train`` stage."""
    for stage in run.get("stages", ()):
        if stage["stage"] == "train":
            return stage["seconds"]
    raise ValueError("the run's report has no train stage: is it a metrics.json of python -m support.ecg?")


def between_parts_seconds(run: dict) -> float:
    """What the parts of :data:`IN_SEQUENCE` the run had leave of its ``total_seconds``: the time no part names.

    >>> between_parts_seconds({"total_seconds": 6.0, "setup_seconds": 2.5, "pipeline_seconds": 3.0})
    0.5
    """
    return run["total_seconds"] - sum(run.get(PARTS[part]) or 0.0 for part in IN_SEQUENCE)


def part_seconds(run: dict) -> dict[str, float | None]:
    """Each of :data:`PARTS` of the run in seconds, ``None`` for a part the run did not have (the synthesis when it
    read a CSV it was given, the quality report without truth)."""
    computed = {"of which training": training_seconds, "between the parts": between_parts_seconds}
    return {part: computed[part](run) if part in computed else run.get(key) for part, key in PARTS.items()}


def time_parts(run: dict) -> dict[str, str]:
    """Each of :data:`PARTS` of the run as :func:`support.bench.format_seconds` writes it, ``"none"`` for a part
    the run did not have."""
    return {part: "none" if value is None else format_seconds(value) for part, value in part_seconds(run).items()}


def time_table(runs: dict[str, dict]) -> list[dict[str, str]]:
    """One row per part of :func:`time_parts`, one column per run (``runs``: a name → the run's report)."""
    parts = {name: time_parts(run) for name, run in runs.items()}
    return [{"part": part} | {name: parts[name][part] for name in runs} for part in PARTS]
