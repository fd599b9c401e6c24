#!/usr/bin/env bash
# Issue 40, item 5: a fresh `python -m support.ecg --hours 20` under 6 s end to end on the H100 (it took 6.99 s).
# Times the command at BASE's support/ against NEW's, each a git ref (its `git archive`) or a folder holding a
# support/ tree (a GPU host's copy of the book has no .git), copied into a temp dir, so the two runs differ in the
# code only. Same command as runs/probes/probe_ecg_cold_start.py (--hours 20 --seed 0 --no-progress); every output
# goes to a temp dir, never into the repository. The host's PYTHONPATH is kept behind the copied code.
# Run on the GPU host from the repository root:  bash runs/probes/probe_ecg_cold_start_imports.sh BASE NEW [RUNS]
set -euo pipefail
BASE=${1:?give BASE and NEW: a git ref or a folder holding support/}
NEW=${2:?give BASE and NEW: a git ref or a folder holding support/}
RUNS=${3:-5}
EXTRA=${ECG_EXTRA_ARGS:-}  # a smoke test off the GPU host: ECG_EXTRA_ARGS="--device cpu --hours 0.05"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ecg-cold-imports-XXXXXX")
trap 'rm -rf "$WORK"' EXIT
echo "# $(date -u +%FT%TZ) host $(hostname); $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)"
name_of() { if [ -d "$1/support" ]; then cat "$1/COMMIT" 2>/dev/null || echo "$1"; else git rev-parse --short "$1"; fi; }
echo "# python $(python3 -c 'import sys; print(sys.version.split()[0])'); base $(name_of "$BASE"), new $(name_of "$NEW")"
for side in base new; do  # BASE and NEW: a git ref, or a folder holding a support/ tree (a host without .git)
  ref=$BASE; [ "$side" = new ] && ref=$NEW
  mkdir -p "$WORK/$side/code"
  if [ -d "$ref/support" ]; then cp -a "$ref/support" "$WORK/$side/code/"; else git archive "$ref" support | tar -x -C "$WORK/$side/code"; fi
done
run_once() {  # side, out folder: wall seconds of one fresh process, end to end
  local code=$WORK/$1/code start end
  start=$(date +%s.%N)
  (cd "$code" && PYTHONPATH="$code${PYTHONPATH:+:$PYTHONPATH}" python3 -m support.ecg --hours 20 --seed 0 --no-progress $EXTRA --out "$2" >"$2.stdout" 2>"$2.stderr") \
    || { echo "run failed ($1): $(tail -3 "$2.stderr")" >&2; exit 1; }
  end=$(date +%s.%N)
  python3 -c "print(f'{$end - $start:.3f}')"
}
summary() {  # name, seconds...
  python3 - "$@" <<'PY'
import statistics, sys
name, values = sys.argv[1], [float(v) for v in sys.argv[2:]]
print(f"{name}: median {statistics.median(values):.2f} s, min {min(values):.2f} s, max {max(values):.2f} s, runs {' '.join(sys.argv[2:])}")
PY
}
# warm-up: one run of each (Numba's cache, matplotlib's font list; the bytecode cache only where PYTHONDONTWRITEBYTECODE is unset), not counted
for side in base new; do seconds=$(run_once $side "$WORK/$side/warmup"); echo "warm-up $side: $seconds s"; done
declare -a base_times new_times
for i in $(seq 1 "$RUNS"); do  # alternating, so that neither side always goes first
  for side in base new; do
    seconds=$(run_once $side "$WORK/$side/run$i")
    if [ $side = base ]; then base_times+=("$seconds"); else new_times+=("$seconds"); fi
  done
done
summary "base ($BASE) end to end" "${base_times[@]}"
summary "new ($NEW) end to end" "${new_times[@]}"
for side in base new; do
  echo "last run's parts, $side: $(tail -1 "$WORK/$side/run$RUNS.stdout" | cut -c1-200)"
done
for side in base new; do
  code=$WORK/$side/code
  echo "# -X importtime, import support.ecg.__main__ ($side), top 15 cumulative:"
  (cd "$code" && PYTHONPATH="$code${PYTHONPATH:+:$PYTHONPATH}" python3 -X importtime -c "import support.ecg.__main__" 2>&1 >/dev/null) \
    | awk -F'|' '/import time:/ && $2 ~ /[0-9]/ {printf "%9.3f s %s\n", $2 / 1e6, $3}' | sort -rn | head -15
  echo "# after a whole run ($side), imported: $(cd "$code" && PYTHONPATH="$code${PYTHONPATH:+:$PYTHONPATH}" python3 -c "
import sys
from support.ecg import __main__ as cli
cli.main(['--hours', '20', '--seed', '0', '--no-progress', *'$EXTRA'.split(), '--out', '$WORK/$side/modules'])
print(sorted(m for m in ('matplotlib.pyplot', 'scipy.fft', 'scipy.signal') if m in sys.modules))" | tail -1)"
done
echo "probe EXIT=0"
