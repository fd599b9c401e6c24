#!/usr/bin/env bash
# Kept beside the logs it wrote (runs/nbval/nbval_06_ecg_pipeline_h100.log and _16g.log,
# runs/history/06_ecg_pipeline_h100_execute_2026-11-27_after_fe1cee1.log, runs/probes/probe_ecg_first_command_floor_*);
# run from a copy of the book at /tmp/book with the staged stack (../shared/gpu-host/README.md).
# Session 58, first: one H100 (nvidia-h100-x1; check `nvidia-smi -L` says H100). Chapter 6 after its claim cell
# changed (fe1cee1): its two command-line records, execution -> MARK6E, nbval whole -> MARK6N, nbval under the
# 16 GB MPS limit -> MARK616; then the first command's floor probe (#40 item 5) -> MARKF; MARKALL. ~20 min held.
cd /tmp/book
source .gpubatch/env.sh
nvidia-smi -L
bash runs/ecg_cli_records.sh
python3 -m booktools.runs measure --mode execute --label "H100 80GB" --log-dir /tmp/logs/execute chapters/06_ecg_pipeline.ipynb
echo "executed 6 EXIT=$? MARK6E at $(date +%T)"
python3 -m booktools.notebooks fresh 2>&1 | tail -3
python3 -m booktools.runs measure --mode nbval --label "H100 80GB" --log-dir /tmp/logs/nbval chapters/06_ecg_pipeline.ipynb
echo "nbval 06 EXIT=$? MARK6N at $(date +%T)"
python3 -m booktools.mps --limit 16G -- python3 -m booktools.runs measure --mode nbval \
  --label "16 GB (MPS limit)" --memory-limit 16G --log-dir /tmp/logs/nbval16 chapters/06_ecg_pipeline.ipynb
echo "16g 06 EXIT=$? MARK616 at $(date +%T)"
echo quit | timeout 10 nvidia-cuda-mps-control > /dev/null 2>&1 || true
timeout 400 python3 runs/probes/probe_ecg_first_command_floor.py /tmp/logs/floor 5 > /tmp/logs/floor.log 2>&1
echo "floor EXIT=$? MARKF at $(date +%T)"; tail -n 6 /tmp/logs/floor.log
echo MARKALL
