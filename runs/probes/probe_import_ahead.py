"""Whether importing PyTorch's compiler stack in a thread shortens a fresh ``python -m support.ecg --hours 20``
(issue 40, item 5), run on the GPU host before chapter 6 is executed, so that an execution is not spent on a claim
that would not hold. Run from the repository root: ``python runs/probes/probe_import_ahead.py OUT.json [BAR]``.

One unreported run fills Python's bytecode cache (as chapter 6's earlier cells have by the time its first-command
cell runs); then the default and ``--no-import-ahead`` run in turns, three rounds, the order turned round each
round (``cli_runs.alternate_runs``, what the chapter runs). It prints the median table and the ratio of the two
settings' median process times, writes every run's report to OUT.json, and exits 0 when the control's median is
at least BAR (default 1.10) times the default's, else 3.

It ran once, on the H100 on 2026-11-26, at commit 31b3487 (``probe_import_ahead_h100_2026-11-26.log`` and
``.json``): the runs with the thread were not shorter, the chapter was not executed with the change, and the change
was reverted (a83b020): ``support/ecg/import_ahead.py`` and the command line's ``--import-ahead``.
``cli_runs.alternate_runs``, ``process_timing`` and ``median_part_rows`` came back later for chapter 6's
functional-Adam comparison, ``alternate_runs`` now taking launchers, not extra arguments. This script runs only at
commit 31b3487.
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from support.ecg import cli_runs

COMMAND = ["--hours", "20", "--seed", "0"]
SETTINGS = {"import ahead": [], "--no-import-ahead": ["--no-import-ahead"]}


def main(out: Path, bar: float) -> int:
    work = Path(tempfile.mkdtemp(prefix="import-ahead-"))
    cli_runs.run_command_line(COMMAND, out=work / "cache-filling-run")
    runs = cli_runs.alternate_runs(COMMAND, SETTINGS, repeat=3, folder=work)
    for row in cli_runs.median_part_rows(runs):
        print("  ".join(f"{value:>18}" for value in row.values()), flush=True)
    ahead, control = (cli_runs.process_timing(each) for each in runs.values())
    ratio = control.median / ahead.median
    print(f"control / import ahead, median process time: {ratio:.3f} (bar {bar})")
    out.write_text(json.dumps({"ratio": ratio, "bar": bar, "runs": runs}, indent=1, default=str) + "\n")
    return 0 if ratio >= bar else 3


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), float(sys.argv[2]) if len(sys.argv) > 2 else 1.10))
