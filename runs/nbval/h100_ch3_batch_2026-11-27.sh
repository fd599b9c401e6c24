#!/usr/bin/env bash
# Kept beside the logs it wrote (runs/nbval/nbval_03_zero_copy_h100.log and _16g.log,
# runs/history/03_zero_copy_h100_execute_2026-11-27.log); run from a copy of the book at /tmp/book with the staged
# stack (../shared/gpu-host/README.md).
# Session 58, last: one H100. Chapter 3 after exercise 3.1's rename: execution -> MARK3E, nbval whole -> MARK3N,
# nbval under the 16 GB MPS limit -> MARK316; MARKALL. ~4.5 min. Collect after each mark (the budget may end first).
cd /tmp/book
source .gpubatch/env.sh
nvidia-smi -L
python3 -m booktools.runs measure --mode execute --label "H100 80GB" --log-dir /tmp/logs/execute chapters/03_zero_copy.ipynb
echo "executed 3 EXIT=$? MARK3E at $(date +%T)"
python3 -m booktools.runs measure --mode nbval --label "H100 80GB" --log-dir /tmp/logs/nbval chapters/03_zero_copy.ipynb
echo "nbval 03 EXIT=$? MARK3N at $(date +%T)"
python3 -m booktools.mps --limit 16G -- python3 -m booktools.runs measure --mode nbval \
  --label "16 GB (MPS limit)" --memory-limit 16G --log-dir /tmp/logs/nbval16 chapters/03_zero_copy.ipynb
echo "16g 03 EXIT=$? MARK316 at $(date +%T)"
echo quit | timeout 10 nvidia-cuda-mps-control > /dev/null 2>&1 || true
echo MARKALL
