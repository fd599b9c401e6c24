#!/usr/bin/env bash
# The two command-line records chapter 6 reads (chapters/ecg_cli_metrics.json, chapters/ecg_cli_second_run.json),
# made on the GPU host just before the chapter is executed: each run in a fresh process, Python allowed to cache
# bytecode (the host's environment sets PYTHONDONTWRITEBYTECODE=1) in a folder of its own. The first synthesizes
# 20 hours with the traffic meter on; the second reads the CSV the first wrote, without the meter. Both records
# are copied into chapters/ only once both runs have succeeded. Run from the repository root with the GPU host's
# environment set; the runs go into a new temporary folder.
set -euo pipefail
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ecg-cli-records.XXXXXX")
cli() { env -u PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX="$WORK/pycache" python3 -m support.ecg --no-progress "$@"; }
cli --hours 20 --seed 0 --traffic --out "$WORK/first"
cli --input "$WORK/first/ecg.csv" --truth "$WORK/first/truth.npz" --out "$WORK/second"
cp "$WORK/first/metrics.json" chapters/ecg_cli_metrics.json
cp "$WORK/second/metrics.json" chapters/ecg_cli_second_run.json
echo "records written; the runs are in $WORK"
