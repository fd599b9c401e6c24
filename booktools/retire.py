"""Retire one setup's run of one chapter once the chapter's outputs have changed since: its records leave the live
stores (the README table, the claims page and the seat needs are made from those) and go, with the run's log, to a
folder of ``runs/history/``, where the runs that no longer stand behind the committed outputs are kept.

    python -m booktools.retire --label "H200 141GB" --mode nbval --chapter 06_ecg_pipeline \\
        --log runs/nbval/nbval_06_ecg_pipeline_h200.log --to runs/history/06_ecg_pipeline_h200_of_an_earlier_run

An nbval run compares a notebook with the outputs that were committed when it ran; after the chapter is executed
again that log says nothing of the new outputs, and its claims may name a claim the chapter no longer makes. The
folder holds ``records.json`` (``{"chapter_runs": ..., "claims": ...}``, each the setup's record cut down to that
chapter) and the log. Nothing is overwritten: a folder that exists is refused, and the history is written before
the live stores are, so a run cut short leaves the record in both places, never in neither.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import asdict
from pathlib import Path

from booktools import evidence, records
from booktools.evidence import ClaimRun


class RetireError(Exception):
    """What stops a retirement, said so that the reader can fix it."""


def without_chapter(run: ClaimRun, chapter: str) -> ClaimRun | None:
    """``run`` without ``chapter``'s claims, its date the latest of the chapters left; None when none is left.

    >>> run = ClaimRun("H200", "nbval", "H200", "580", {}, None, "2026-11-27",
    ...                {"01_a": [], "06_b": []}, chapter_dates={"01_a": "2026-11-26"})
    >>> left = without_chapter(run, "06_b")
    >>> left.chapters, left.date, left.chapter_dates
    ({'01_a': []}, '2026-11-26', {})
    >>> without_chapter(left, "01_a") is None
    True
    """
    dates = {name: evidence.chapter_date(run, name) for name in run.chapters if name != chapter}
    if not dates:
        return None
    latest = max(dates.values())
    return ClaimRun(
        **{
            **asdict(run),
            "date": latest,
            "chapters": {name: claims for name, claims in run.chapters.items() if name != chapter},
            "chapter_dates": {name: day for name, day in sorted(dates.items()) if day != latest},
        }
    )


def retire(
    label: str,
    mode: str,
    chapter: str,
    to: Path,
    log: Path | None = None,
    *,
    runs_file: Path | None = None,
    claims_file: Path | None = None,
) -> Path:
    """Move the run of ``chapter`` (a notebook's name, ``06_ecg_pipeline``) under the setup ``label`` and ``mode``
    from the chapter runs and the claims into the new folder ``to``, with ``log`` beside it; returns the folder."""
    runs_path = records.CHAPTER_RUNS.path if runs_file is None else Path(runs_file)
    claims_path = records.CLAIMS.path if claims_file is None else Path(claims_file)
    to = Path(to)
    if to.exists():
        raise RetireError(f"{to} exists already: name a new folder, so that no earlier history is overwritten")
    if log is not None and not Path(log).is_file():
        raise RetireError(f"no log at {log}: name the run's log, or leave --log out if it has none")
    notebook = f"chapters/{chapter}.ipynb"
    groups = records.load(records.CHAPTER_RUNS, runs_path)
    claim_runs = evidence.load(claims_path)
    group = next((g for g in groups if (g["label"], g["mode"]) == (label, mode)), None)
    claim_run = next((r for r in claim_runs if (r.label, r.mode) == (label, mode)), None)
    ran = group is not None and any(c["notebook"] == notebook for c in group["chapters"])
    if not ran and (claim_run is None or chapter not in claim_run.chapters):
        setups = sorted({f"{g['label']!r} {g['mode']}" for g in groups})
        raise RetireError(
            f"no {mode} run of {chapter} under {label!r} is recorded; the setups are: {', '.join(setups)}"
        )
    kept: dict[str, object] = {}
    if ran:
        kept["chapter_runs"] = {**group, "chapters": [c for c in group["chapters"] if c["notebook"] == notebook]}
    if claim_run is not None and chapter in claim_run.chapters:
        date = evidence.chapter_date(claim_run, chapter)
        kept["claims"] = {
            **asdict(claim_run),
            "date": date,
            "chapters": {chapter: claim_run.chapters[chapter]},
            "chapter_dates": {},
        }
    to.mkdir(parents=True)
    records.write_atomic(to / "records.json", json.dumps(kept, indent=1, ensure_ascii=False) + "\n")
    if log is not None:
        os.replace(log, to / Path(log).name)
    left_groups = []
    for g in groups:
        if g is group:
            g = {**g, "chapters": [c for c in g["chapters"] if c["notebook"] != notebook]}
        left_groups.append(g)
    records.save(records.CHAPTER_RUNS, left_groups, runs_path)
    left_runs = [run if run is not claim_run else without_chapter(run, chapter) for run in claim_runs]
    evidence.save([run for run in left_runs if run is not None], claims_path)
    return to


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m booktools.retire", description=__doc__.split("\n")[0])
    parser.add_argument("--label", required=True, help='the setup, as the records name it: "H200 141GB"')
    parser.add_argument("--mode", required=True, choices=("execute", "nbval"))
    parser.add_argument("--chapter", required=True, help="the notebook's name: 06_ecg_pipeline")
    parser.add_argument("--to", required=True, type=Path, help="a new folder under runs/history/")
    parser.add_argument("--log", type=Path, help="the run's log, moved into the folder")
    args = parser.parse_args(argv)
    try:
        folder = retire(args.label, args.mode, args.chapter, args.to, args.log)
    except RetireError as problem:
        print(f"nothing moved: {problem}", file=sys.stderr)
        return 2
    print(f"moved the {args.mode} run of {args.chapter} under {args.label!r} to {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
