#!/usr/bin/env bash
# The two command-line records chapter 6 reads (chapters/ecg_cli_metrics.json, chapters/ecg_cli_second_run.json),
# made on the GPU host just before the chapter is executed: each run in a fresh process, Python allowed to cache
# bytecode (the host's environment sets PYTHONDONTWRITEBYTECODE=1) in a folder of its own. The first synthesizes
# 20 hours with the traffic meter on; the second reads the CSV the first wrote, without the meter. Run from the
# repository root with the GPU host's environment set.
set -eu
WORK=${1:-/tmp/ecg-cli-records}
rm -rf "$WORK" && mkdir -p "$WORK"
cli() { env -u PYTHONDONTWRITEBYTECODE PYTHONPYCACHEPREFIX="$WORK/pycache" python3 -m support.ecg --no-progress "$@"; }
cli --hours 20 --seed 0 --traffic --out "$WORK/first"
cp "$WORK/first/metrics.json" chapters/ecg_cli_metrics.json
cli --input "$WORK/first/ecg.csv" --truth "$WORK/first/truth.npz" --out "$WORK/second"
cp "$WORK/second/metrics.json" chapters/ecg_cli_second_run.json
