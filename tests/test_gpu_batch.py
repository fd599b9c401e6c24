"""runs/nbval/gpu_batch.sh, the GPU sessions' batch, run here with stand-ins for the GPU host's commands.

The stand-ins (``nvidia-smi``, ``python3``, MPS's control, ``make``) print what they were asked and succeed, except
``python3`` executing a chapter whose file name holds ``fail``. So each test reads the order of the commands and marks
the batch printed: what a session polls for, and what a failed or refused step must not start.
"""

import os
import stat
import subprocess
from pathlib import Path

import pytest

BATCH = Path(__file__).resolve().parent.parent / "runs" / "nbval" / "gpu_batch.sh"

STUBS = {
    "nvidia-smi": """#!/bin/sh
if [ "$1" = "-L" ]; then echo "GPU 0: NVIDIA $CARD"; exit 0; fi
i=0; while [ $i -lt "${GPUS:-1}" ]; do echo "NVIDIA $CARD"; i=$((i + 1)); done
""",
    "python3": """#!/bin/sh
echo "RAN python3 $*"
echo "ENV CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-unset}"
case "$*" in *"--mode execute"*" chapters/"*fail*) exit 1;; esac
""",
    "nvidia-cuda-mps-control": "#!/bin/sh\nexit 0\n",
    "make": '#!/bin/sh\necho "RAN make $*"\n',
}


@pytest.fixture
def host(tmp_path):
    """A stand-in host: the stubs first on PATH, a copy of the book with chapter 6's record script and a report
    that chapter 7's execution leaves beside its notebook, and a folder for the logs."""
    stubs = tmp_path / "bin"
    stubs.mkdir()
    for name, text in STUBS.items():
        path = stubs / name
        path.write_text(text)
        path.chmod(path.stat().st_mode | stat.S_IXUSR)
    book = tmp_path / "book"
    (book / "chapters").mkdir(parents=True)
    (book / "runs").mkdir()
    (book / "runs" / "ecg_cli_records.sh").write_text('echo "RAN ecg_cli_records"\n')
    (book / "chapters" / "07_many_gpus_performance.html").write_text("<html></html>")
    return {"stubs": stubs, "book": book, "logs": tmp_path / "logs"}


def batch(host, *arguments, card="H100 80GB HBM3", gpus=1, **extra):
    environment = {k: v for k, v in os.environ.items() if k not in ("NBVAL_ONLY", "CUDA_VISIBLE_DEVICES")}
    environment |= {
        "PATH": f"{host['stubs']}{os.pathsep}{os.environ['PATH']}",
        "GPU_BATCH_BOOK": str(host["book"]),
        "GPU_BATCH_LOGS": str(host["logs"]),
        "CARD": card,
        "GPUS": str(gpus),
        **extra,
    }
    done = subprocess.run(["bash", str(BATCH), *arguments], capture_output=True, text=True, env=environment, timeout=60)
    return done.returncode, done.stdout, done.stderr


def ran(stdout):
    """The commands the stand-ins were asked to run, and the marks, in order."""
    kept = []
    for line in stdout.splitlines():
        if line.startswith("RAN "):
            kept.append(line[4:])
        elif "MARK" in line:
            kept.append(next(word for word in line.split() if word.startswith("MARK")))
    return kept


def test_h100_runs_execution_nbval_and_16_gb_per_chapter_with_a_mark_after_each(host):
    code, out, _ = batch(host, "h100", "chapters/04_memory_pools.ipynb", "chapters/06_ecg_pipeline.ipynb")
    assert code == 0
    steps = ran(out)
    assert [s for s in steps if s.startswith("MARK")] == ["MARKE", "MARKN", "MARK16"] * 2 + ["MARKALL"]
    execute, nbval, limited = steps[0], steps[2], steps[4]
    assert "--mode execute" in execute and "--label H100 80GB" in execute
    assert "--mode nbval" in nbval and "04_memory_pools" in nbval
    assert limited.startswith("python3 -m booktools.mps --limit 16G --") and "16 GB (MPS limit)" in limited
    sixth = steps.index("ecg_cli_records")  # chapter 6's command-line records, just before its execution
    assert "--mode execute" in steps[sixth + 1] and "06_ecg_pipeline" in steps[sixth + 1]


def test_a_failed_execution_gets_no_nbval_but_its_marks_and_the_next_chapter_run(host):
    code, out, _ = batch(host, "h100", "chapters/05_fail.ipynb", "chapters/04_memory_pools.ipynb")
    assert code == 0
    steps = ran(out)
    assert not [s for s in steps if "--mode nbval" in s and "05_fail" in s]
    assert "execute EXIT=1" in out and "nbval skipped" in out
    assert [s for s in steps if "--mode nbval" in s and "04_memory_pools" in s]
    assert steps[-1] == "MARKALL"


def test_nbval_only_skips_the_execution_and_chapter_6s_records(host):
    code, out, _ = batch(host, "h100", "chapters/06_ecg_pipeline.ipynb", NBVAL_ONLY="1")
    assert code == 0
    steps = ran(out)
    assert not [s for s in steps if "--mode execute" in s] and "ecg_cli_records" not in steps
    assert [s for s in steps if s.startswith("MARK")] == ["MARKE", "MARKN", "MARK16", "MARKALL"]
    assert "execute skipped (NBVAL_ONLY=1)" in out


def test_two_gpu_labels_the_runs_by_the_cards_limits_both_gpus_and_keeps_the_report(host):
    code, out, _ = batch(host, "two-gpu", "chapters/07_many_gpus.ipynb", card="H200", gpus=2)
    assert code == 0
    steps = ran(out)
    assert "--label 2 × H200 " in steps[0] + " "
    assert "--device 0 --device 1" in steps[4] and "2 × H200, 16 GB (MPS limit)" in steps[4]
    assert (host["logs"] / "execute" / "07_many_gpus_performance.html").exists()


@pytest.mark.parametrize(
    ("mode", "card", "gpus", "said"),
    [
        ("h100", "H200", 1, "not the mode's h100"),
        ("h200", "H100 80GB HBM3", 2, "not the mode's h200"),
        ("two-gpu", "H100 80GB HBM3", 1, "needs two GPUs"),
        ("two-h100", "H100 80GB HBM3", 1, "needs two GPUs"),
    ],
)
def test_a_host_that_is_not_the_modes_is_refused_before_anything_runs(host, mode, card, gpus, said):
    code, out, err = batch(host, mode, "chapters/07_many_gpus.ipynb", card=card, gpus=gpus)
    assert code == 3 and said in err
    assert not [s for s in ran(out) if s.startswith("python3") or s.startswith("make")]


def test_h200_on_two_gpus_runs_nbval_and_compare_side_by_side(host):
    code, out, _ = batch(host, "h200", "chapters/03_zero_copy.ipynb", card="H200", gpus=2)
    assert code == 0
    assert "MARKH" in out and "MARKC" in out and out.rstrip().endswith("MARKALL")
    assert "--label H200 141GB" in (host["logs"] / "nbval_h200.out").read_text()
    assert "COMPARE=chapters/03_zero_copy.ipynb" in (host["logs"] / "compare_h200.txt").read_text()


@pytest.mark.parametrize(
    ("arguments", "said"), [(["h100"], "name at least one chapter"), (["tpu", "x"], "unknown mode tpu")]
)
def test_a_request_without_chapters_or_with_an_unknown_mode_is_refused(host, arguments, said):
    code, out, err = batch(host, *arguments)
    assert code == 2 and said in err
    assert not [s for s in ran(out) if s.startswith("python3")]


def test_h100_on_a_host_with_two_gpus_runs_on_gpu_0_alone_and_a_one_gpu_host_is_left_as_it_is(host):
    code, out, _ = batch(host, "h100", "chapters/04_memory_pools.ipynb", gpus=2)
    assert code == 0 and "the h100 runs use GPU 0" in out
    assert set(line for line in out.splitlines() if line.startswith("ENV ")) == {"ENV CUDA_VISIBLE_DEVICES=0"}
    code, out, _ = batch(host, "h100", "chapters/04_memory_pools.ipynb", gpus=1)
    assert code == 0 and "use GPU 0" not in out
    assert set(line for line in out.splitlines() if line.startswith("ENV ")) == {"ENV CUDA_VISIBLE_DEVICES=unset"}
