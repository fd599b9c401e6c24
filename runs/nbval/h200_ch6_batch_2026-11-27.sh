#!/usr/bin/env bash
# Kept beside the logs it wrote (runs/nbval/nbval_06_ecg_pipeline_h200.log, the last section of runs/compare_h200.txt);
# run from a copy of the book at /tmp/book with the staged stack (../shared/gpu-host/README.md), .gpubatch/env.sh
# being the environment that README gives (PYTHONPATH, NCCL_NVLS_ENABLE=0 and the other multicast switches).
# Session 58, first booking: a two-GPU host (nvidia-h100-x2, counted in full). What it does depends on the cards:
# Run it after s58_h100.sh (chapter 6 executed again and its notebook copied back into the working tree).
#  H100s: chapter 7's nbval on the two whole GPUs (#38's last chapter-7 piece) -> MARK7N (~9.5 min); MARKALL.
#  H200s: chapter 6's nbval on GPU 0 (its H200 column) and `make compare` of chapter 6 on GPU 1, at once
#         -> MARK6H, MARKC6 (~6 min); MARKALL. Then book again for the other half if the device time allows.
cd /tmp/book
source .gpubatch/env.sh
nvidia-smi -L
case "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" in
  *H200*)
    (CUDA_VISIBLE_DEVICES=0 python3 -m booktools.runs measure --mode nbval --label "H200 141GB" \
       --log-dir /tmp/logs/nbval_h200 chapters/06_ecg_pipeline.ipynb > /tmp/logs/nbval_h200_06.out 2>&1
     echo "nbval h200 06 EXIT=$? MARK6H at $(date +%T)") &
    (CUDA_VISIBLE_DEVICES=1 make compare PYTHON=python3 COMPARE="chapters/06_ecg_pipeline.ipynb" \
       > /tmp/logs/compare_h200_06.txt 2>&1
     echo "compare 06 EXIT=$? MARKC6 at $(date +%T)") &
    wait
    tail -n 2 /tmp/logs/nbval_h200_06.out; tail -n 4 /tmp/logs/compare_h200_06.txt;;
  *)
    timeout 900 python3 -m booktools.runs measure --mode nbval --label "2 × H100 80GB" --log-dir /tmp/logs/nbval \
      chapters/07_many_gpus.ipynb
    echo "ch7 nbval EXIT=$? MARK7N at $(date +%T)";;
esac
echo MARKALL
