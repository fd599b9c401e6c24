#!/usr/bin/env bash
# Kept beside the logs it wrote (runs/nbval/*_h200.log, runs/compare_h200.txt); run from a copy of the book at /tmp/book
# with the staged stack (../shared/gpu-host/README.md). Its label was "H200"; the records call the run "H200 141GB".
# Session 54 got two H200s for a two-GPU booking: the H200 column (issue 38). nbval of chapters 0-6 in two
# batches at once, one per GPU (-> MARKN0, MARKN1), then `make compare` on each batch's chapters against the
# H100's records (-> MARKC0, MARKC1). Collect after both nbval marks, again after both compare marks.
cd /tmp/book
source .gpubatch/env.sh
nvidia-smi -L
batch() {
  local gpu=$1; shift
  CUDA_VISIBLE_DEVICES=$gpu python3 -m booktools.runs measure --mode nbval --label "H200" \
    --log-dir /tmp/logs/nbval_h200 "$@" > /tmp/logs/nbval_h200_gpu$gpu.out 2>&1
  echo "nbval gpu$gpu EXIT=$? MARKN$gpu at $(date +%T)"
  CUDA_VISIBLE_DEVICES=$gpu make compare PYTHON=python3 COMPARE="$*" > /tmp/logs/compare_h200_gpu$gpu.txt 2>&1
  echo "compare gpu$gpu EXIT=$? MARKC$gpu at $(date +%T)"
}
batch 0 chapters/05_unified_memory.ipynb chapters/01_why_gpus.ipynb chapters/03_zero_copy.ipynb \
  chapters/00_getting_started.ipynb &
batch 1 chapters/06_ecg_pipeline.ipynb chapters/04_memory_pools.ipynb chapters/04_watching_memory.ipynb \
  chapters/02_memory_layouts.ipynb &
wait
echo "MARKALL $(date +%T)"
