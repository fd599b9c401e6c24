"""Which of chapter 5's fresh-process runs leaves the other MPS clients with a sticky illegal address?

Under a 16 GB MPS limit, nbval of chapter 5 met ``cudaErrorIllegalAddress`` in the notebook's own process at
the first CUDA call after the cells that run the managed-memory budget runs in fresh processes (cells 18-19):
NVIDIA's MPS documentation says a fatal fault of one client reaches every client of the GPU. This probe runs
the same budget runs one by one, each in its own process as the chapter does, and after each one checks this
(parent) process's CUDA context with a small kernel and a synchronize, so the first run after which the parent
fails is named. Run it under the limit, on a GPU of your own::

    python -m booktools.mps --limit 16G -- python runs/probes/probe_managed_under_mps.py

One line per run: the mode, whether the run completed (its error otherwise), and the parent's state after it.
"""

from __future__ import annotations

import os
import sys

CHAPTER_RUNS = [  # (mode, options) in the order chapter 5 runs them
    ("pool", {}),
    ("managed", {}),
    ("managed pool", {}),
    ("managed pool + prefetch", {}),
    ("managed async", {}),
    ("torch managed", {"batch": 32768, "width": 4096}),
    ("torch managed pool", {"batch": 32768, "width": 4096}),
    ("torch managed pool + prefetch", {"batch": 32768, "width": 4096}),
]


def parent_state() -> str:
    """'ok' when a kernel and a synchronize succeed in this process, else the error's first line."""
    import cupy

    try:
        total = float(cupy.arange(1024, dtype=cupy.float32).sum())
        cupy.cuda.runtime.deviceSynchronize()
    except Exception as error:  # noqa: BLE001 - the error is what the probe reports
        return f"{type(error).__name__}: {str(error).splitlines()[0][:120]}"
    return "ok" if total == 1023 * 512 else f"wrong sum {total}"


def main() -> int:
    from support.memory import budget

    print(f"CUDA_LAUNCH_BLOCKING={os.environ.get('CUDA_LAUNCH_BLOCKING', '')}", flush=True)
    print(f"parent before any run: {parent_state()}", flush=True)
    for mode, options in CHAPTER_RUNS:
        try:
            run = budget.run_in_fresh_process(mode, 0, **options)
            outcome = "completed" if run.completed else f"not completed: {(run.error or run.detail)[:160]}"
        except Exception as error:  # noqa: BLE001 - a crashed child is a finding, not the probe's end
            outcome = f"child failed: {type(error).__name__}: {str(error).splitlines()[0][:160]}"
        state = parent_state()
        print(f"{mode:32} {outcome} | parent after: {state}", flush=True)
        if state != "ok":
            print(f"first run after which the parent fails: {mode}", flush=True)
            return 1
    print("the parent survived every run", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
