#!/usr/bin/env bash
# The two command-line records chapter 6 reads (chapters/ecg_cli_metrics.json, chapters/ecg_cli_second_run.json),
# made on the GPU host just before the chapter is executed, each run in a fresh process by
# support.ecg.cli_runs.run_command_line (the launcher the chapter's own runs use: Python may cache bytecode in a
# folder of its own, support/ first on the path). The first synthesizes 20 hours with the traffic meter on; the
# second reads the CSV the first wrote, without the meter. Both records are copied into chapters/ only once both
# runs have succeeded; the runs go into a new temporary folder. Run from the repository root with the GPU host's
# environment set.
set -euo pipefail
python3 - <<'PY'
import shutil
import tempfile
from pathlib import Path

from support.ecg import cli_runs

work = Path(tempfile.mkdtemp(prefix="ecg-cli-records-"))
first = cli_runs.run_command_line(["--hours", 20, "--seed", 0, "--traffic"], out=work / "first")
second = cli_runs.run_command_line(
    ["--input", work / "first" / "ecg.csv", "--truth", work / "first" / "truth.npz"], out=work / "second"
)
for folder, name in (("first", "ecg_cli_metrics.json"), ("second", "ecg_cli_second_run.json")):
    shutil.copy(work / folder / "metrics.json", Path("chapters") / name)
print(f"records written: {first['process_seconds']:.2f} s and {second['process_seconds']:.2f} s; runs in {work}")
PY
