#!/usr/bin/env bash
# One GPU batch for the chapters named, on the lab's GPU hosts (../shared/gpu-host/README.md: the staged stack at
# /tmp/site, a copy of the book at /tmp/book). It replaces the per-chapter copies kept beside the logs they wrote
# (h100_ch3_batch_2026-11-27.sh, h100_ch6_batch_2026-11-27.sh, ...): their execute and nbval steps, the chapters as
# arguments (chapter 6's floor probe and freshness check stay in its own script). It refuses a host whose cards are
# not the mode's: a booking may come as the other card, and a run's label names the card.
#
#   bash runs/nbval/gpu_batch.sh h100 chapters/03_zero_copy.ipynb chapters/06_ecg_pipeline.ipynb
#       for each chapter: execution, nbval on the whole GPU, nbval under the 16 GB MPS limit (labels "H100 80GB"
#       and "16 GB (MPS limit)"); chapter 6's command-line records are made before its execution. A chapter whose
#       execution fails gets no nbval (its marks still print, saying so). On a host with two GPUs it uses GPU 0
#       alone, so one two-H100 booking can run chapter 7's two-h100 nbval and then this, one after the other.
#   bash runs/nbval/gpu_batch.sh h200 chapters/03_zero_copy.ipynb
#       nbval on GPU 0 (label "H200 141GB") and, on GPU 1 where the host has two, `make compare` of the same
#       chapters at once (else after it), its output in /tmp/logs/compare_h200.txt.
#   bash runs/nbval/gpu_batch.sh two-h100 chapters/07_many_gpus.ipynb
#       nbval of a chapter that needs two GPUs, one run using both H100s (label "2 × H100").
#   bash runs/nbval/gpu_batch.sh two-gpu chapters/07_many_gpus.ipynb
#       for a chapter that needs two GPUs, on whichever two cards the host has (labels "2 × H100" or "2 × H200"):
#       execution, nbval using both GPUs, nbval under the 16 GB MPS limit on both ("2 × H200, 16 GB (MPS limit)").
#   env NBVAL_ONLY=1 bash runs/nbval/gpu_batch.sh two-gpu chapters/07_many_gpus.ipynb   (or mode h100)
#       the same without the execution: both nbval runs of the committed outputs, when their execution ran in an
#       earlier session (chapter 7's three runs need about 27 minutes, more than one session's device time with
#       the staging). Chapter 6's command-line records are then not made again.
#
# The helpers in runs/nbval/host/ copy the tree to /tmp/book (sync.sh), start this script detached (bg.sh) and
# bring back what it made (collect.sh).
#
# Each step prints "MARK<step> <chapter>" when done and the batch "MARKALL" last: collect after each mark, since the
# session's device time may end first. MPS is stopped when the script ends or is stopped (not after a SIGKILL).
set -u
mode=${1:?"name the mode first: h100, h200, two-h100 or two-gpu"}; shift
[ $# -gt 0 ] || { echo "name at least one chapter, e.g. chapters/03_zero_copy.ipynb" >&2; exit 2; }
book=${GPU_BATCH_BOOK:-/tmp/book} logs=${GPU_BATCH_LOGS:-/tmp/logs}  # other folders only for its tests
cd "$book" || exit 2
export PYTHONPATH=/tmp/site:$book PATH=/tmp/site/bin:$PATH
export XLA_PYTHON_CLIENT_PREALLOCATE=false PYTHONUNBUFFERED=1 PYTHONHASHSEED=0
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p "$logs"
trap 'echo quit | timeout 10 nvidia-cuda-mps-control > /dev/null 2>&1 || true' EXIT
nvidia-smi -L
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$mode:$card" in
  h100:*H100*|two-h100:*H100*|h200:*H200*) ;;
  h100:*|two-h100:*|h200:*) echo "this host's cards are $card, not the mode's $mode: book again" >&2; exit 3;;
esac
case "$card" in *H100*) pair="2 × H100";; *H200*) pair="2 × H200";; *) pair="2 × $card";; esac
# Execution, nbval on the whole GPU(s) and nbval under the 16 GB MPS limit, chapter by chapter: $1 the runs' label,
# $2 the 16 GB run's label, $3 the GPUs MPS limits ("" for GPU 0, "--device 0 --device 1" for two), then the
# chapters. Chapter 6's command-line records are made just before its execution.
three_runs() {
  local label=$1 label16=$2 devices=$3 chapter name executed; shift 3
  for chapter in "$@"; do
    name=$(basename "$chapter" .ipynb)
    if [ "${NBVAL_ONLY:-0}" = 1 ]; then  # the committed outputs, executed in an earlier session
      echo "execute skipped (NBVAL_ONLY=1) MARKE $name at $(date +%T)"
    else
      [ "$name" = 06_ecg_pipeline ] && bash runs/ecg_cli_records.sh
      python3 -m booktools.runs measure --mode execute --label "$label" --log-dir "$logs/execute" "$chapter"
      executed=$?
      # a file the execution writes beside the notebook (chapter 7's Dask report) belongs with its outputs:
      # kept now, before the nbval runs write it again; collect.sh brings /tmp/logs back
      mkdir -p "$logs/execute"; cp chapters/"$name"_*.html "$logs/execute/" 2>/dev/null || true
      echo "execute EXIT=$executed MARKE $name at $(date +%T)"
      if [ "$executed" -ne 0 ]; then  # nbval of a failed execution checks nothing worth the device time
        echo "nbval skipped: the execution failed MARKN $name"; echo "16g skipped MARK16 $name"; continue
      fi
    fi
    python3 -m booktools.runs measure --mode nbval --label "$label" --log-dir "$logs/nbval" "$chapter"
    echo "nbval EXIT=$? MARKN $name at $(date +%T)"
    # shellcheck disable=SC2086  # $devices is several words, or none
    python3 -m booktools.mps --limit 16G $devices -- python3 -m booktools.runs measure --mode nbval \
      --label "$label16" --memory-limit 16G --log-dir "$logs/nbval16" "$chapter"
    echo "16g EXIT=$? MARK16 $name at $(date +%T)"
  done
}
case "$mode" in
  h100)
    # on a host with more GPUs (a two-H100 booking that also ran chapter 7), one GPU, as on a one-GPU host: the
    # MPS limit and the chapter see GPU 0 alone
    gpus=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)
    if [ "$gpus" -ge 2 ]; then export CUDA_VISIBLE_DEVICES=0; echo "this host has $gpus GPUs: the h100 runs use GPU 0"; fi
    three_runs "H100 80GB" "16 GB (MPS limit)" "" "$@";;
  h200)
    gpus=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)
    nbval() {
      CUDA_VISIBLE_DEVICES=0 python3 -m booktools.runs measure --mode nbval --label "H200 141GB" \
        --log-dir "$logs/nbval_h200" "$@" > "$logs/nbval_h200.out" 2>&1
      echo "nbval h200 EXIT=$? MARKH at $(date +%T)"; tail -n 2 "$logs/nbval_h200.out"
    }
    compare() {
      CUDA_VISIBLE_DEVICES=$1 make compare PYTHON=python3 COMPARE="${*:2}" > "$logs/compare_h200.txt" 2>&1
      echo "compare EXIT=$? MARKC at $(date +%T)"; tail -n 2 "$logs/compare_h200.txt"
    }
    if [ "$gpus" -ge 2 ]; then nbval "$@" & compare 1 "$@" & wait; else nbval "$@"; compare 0 "$@"; fi;;
  two-h100)
    gpus=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)
    [ "$gpus" -ge 2 ] || { echo "two-h100 needs two GPUs, this host has $gpus" >&2; exit 3; }
    CUDA_VISIBLE_DEVICES=0,1 python3 -m booktools.runs measure --mode nbval --label "2 × H100" \
      --log-dir "$logs/nbval_h100x2" "$@"
    echo "nbval two-h100 EXIT=$? MARKN2 at $(date +%T)";;
  two-gpu)
    gpus=$(nvidia-smi --query-gpu=name --format=csv,noheader | wc -l)
    [ "$gpus" -ge 2 ] || { echo "two-gpu needs two GPUs, this host has $gpus" >&2; exit 3; }
    export CUDA_VISIBLE_DEVICES=0,1
    three_runs "$pair" "$pair, 16 GB (MPS limit)" "--device 0 --device 1" "$@";;
  *) echo "unknown mode $mode: h100, h200, two-h100 or two-gpu" >&2; exit 2;;
esac
echo MARKALL
