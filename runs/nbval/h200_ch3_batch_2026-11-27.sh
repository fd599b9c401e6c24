#!/usr/bin/env bash
# 2026-11-27: the script that ran chapter 3's H200 nbval and `make compare` (its H200 branch, below). It was written
# for four H100s (chapter 7's nbval and two rehearsals at once); both four-GPU bookings came as H200s, so its H100
# branch has not run, and was edited after (rehearsal C moved); the H200 branch is as it ran; the rehearsals then ran one after another on a one-GPU H100 (python -m booktools.rehearse).
#  H100s: chapter 7's nbval on GPUs 0,1 (the 2 x H100 column), pinned to half the host's cores (a two-GPU host's share);
#         rehearsals A (two-hours 4x16G) on GPU 2 and B (two-hours 5x14G) on GPU 3, each with its own MPS daemon
#         (own pipe directory) and pinned to a quarter of the cores (a one-GPU host's 16); rehearsal C (half-day 5x14G)
#         on a one-GPU H100 (counted at half) instead: rehearse.sh. Each rehearsal in its own copy of the book (records written apart).
#  H200s: chapter 3's nbval on GPU 0 and make compare of chapter 3 on GPU 1.
# Marks: MARK7N, MARKRA, MARKRB, MARKRC, MARK3H, MARKC3, MARKALL.
cd /tmp/book
source .gpubatch/env.sh
nvidia-smi -L
lscpu > /tmp/logs/lscpu.txt 2>&1; nvidia-smi topo -m > /tmp/logs/topo.txt 2>&1
case "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)" in
  *H200*)
    (CUDA_VISIBLE_DEVICES=0 python3 -m booktools.runs measure --mode nbval --label "H200 141GB" \
       --log-dir /tmp/logs/nbval_h200 chapters/03_zero_copy.ipynb > /tmp/logs/nbval_h200_03.out 2>&1
     echo "nbval h200 03 EXIT=$? MARK3H at $(date +%T)") &
    (CUDA_VISIBLE_DEVICES=1 make compare PYTHON=python3 COMPARE="chapters/03_zero_copy.ipynb" \
       > /tmp/logs/compare_h200_03.txt 2>&1
     echo "compare 03 EXIT=$? MARKC3 at $(date +%T)") &
    wait
    tail -n 2 /tmp/logs/nbval_h200_03.out; tail -n 4 /tmp/logs/compare_h200_03.txt
    echo MARKALL; exit 0;;
esac
# four groups of whole physical cores, in the order of (socket, core), among the CPUs this process may use
python3 - > /tmp/logs/cpugroups.txt <<'PY'
import collections, os, subprocess
usable = os.sched_getaffinity(0)
rows = [line.split(",") for line in subprocess.run(["lscpu", "-p=CPU,CORE,SOCKET"], capture_output=True,
        text=True).stdout.splitlines() if not line.startswith("#")]
cores = collections.defaultdict(list)
for cpu, core, socket in rows:
    if int(cpu) in usable:
        cores[(int(socket or 0), int(core))].append(int(cpu))
keys = sorted(cores)
n = len(keys) // 4
for i in range(4):
    print(",".join(str(c) for k in keys[i * n:(i + 1) * n] for c in sorted(cores[k])))
PY
cat /tmp/logs/cpugroups.txt
G0=$(sed -n 1p /tmp/logs/cpugroups.txt); G1=$(sed -n 2p /tmp/logs/cpugroups.txt)
G2=$(sed -n 3p /tmp/logs/cpugroups.txt); G3=$(sed -n 4p /tmp/logs/cpugroups.txt)
mapfile -t UUID < <(nvidia-smi --query-gpu=uuid --format=csv,noheader)
# participants import the book from /tmp/book without PYTHONPATH (as rehearse.sh sets it up)
SITE=$(python3 -c "import site; print(site.getsitepackages()[0])")
echo "import sys; sys.path[:0] = [p for p in ('/tmp/site', '/tmp/book') if p not in sys.path]" > "$SITE/zz-gpu-interop-book.pth"
env -u PYTHONPATH python3 -c "import support, booktools, cudf, torch; print('participant imports OK')"
for r in A B C; do rm -rf /tmp/reh$r; cp -a /tmp/book /tmp/reh$r; done

rehearsal() {  # NAME GPU CPUS ARGS...
  local name=$1 gpu=$2 cpus=$3; shift 3
  (
    cd /tmp/reh$name
    export PYTHONPATH=/tmp/site:/tmp/reh$name CUDA_VISIBLE_DEVICES=${UUID[$gpu]}
    export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps$gpu/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps$gpu/log
    mkdir -p $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
    echo "=== rehearsal $name on GPU $gpu (${UUID[$gpu]}), CPUs $cpus: $* at $(date +%T)"
    taskset -c "$cpus" timeout 2000 python3 -m booktools.rehearse "$@" --timeout 1800
    echo "rehearsal $name EXIT=$? at $(date +%T)"
    echo quit | timeout 20 nvidia-cuda-mps-control > /dev/null 2>&1 || true
    echo "MARKR$name"
  ) > /tmp/logs/rehearsal_$name.out 2>&1
}

rehearsal A 2 "$G2" --agenda two-hours --seats 4 --limit 16G --chapters 03_zero_copy 06_ecg_pipeline &
rehearsal B 3 "$G3" --agenda two-hours --seats 5 --limit 14G --chapters 03_zero_copy 06_ecg_pipeline &
(
  echo "=== ch7 nbval on GPUs 0,1, CPUs $G0,$G1 at $(date +%T)"
  CUDA_VISIBLE_DEVICES=0,1 taskset -c "$G0,$G1" timeout 900 python3 -m booktools.runs measure --mode nbval \
    --label "2 × H100 80GB" --log-dir /tmp/logs/nbval chapters/07_many_gpus.ipynb
  echo "ch7 nbval EXIT=$? MARK7N at $(date +%T)"
) > /tmp/logs/ch7_nbval.out 2>&1
cat /tmp/logs/ch7_nbval.out | tail -n 3
wait
for r in A B; do tail -n 12 /tmp/logs/rehearsal_$r.out; done
echo MARKALL
