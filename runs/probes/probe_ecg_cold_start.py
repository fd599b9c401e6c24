"""Where a fresh ``python -m support.ecg --hours 20`` spends its time on the GPU host (issue 40, item 5: under 6 s
end to end). Run from the repository root on the host: ``python runs/probes/probe_ecg_cold_start.py LOG_DIR``.

1. The command line twice through ``cli_runs.run_command_line`` (the first fills Python's bytecode cache, the
   Numba cache and matplotlib's font list; the second is a user's second run): its parts and the process's wall
   time, end to end.
2. The same command under ``-X importtime``: the slowest imports, cumulative.
3. The same command under cProfile: the functions with the most cumulative time.
4. In a fresh process, cold: the first CUDA SVD of a beats × width matrix (cuSOLVER loaded on first use) against
   the covariance's eigendecomposition on the host, which ``baselines.PCABaseline.fit`` uses since this round.
"""

from __future__ import annotations

import json
import os
import pstats
import subprocess
import sys
import tempfile
from pathlib import Path

from support import fresh_process
from support.ecg import cli_runs, run_report

COMMAND = ["--hours", "20", "--seed", "0", "--no-progress"]


def main(log_dir: Path) -> None:
    log_dir.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix="cold-start-"))
    found: dict = {}
    for attempt in ("first", "second"):
        run = cli_runs.run_command_line(COMMAND[:-1], out=work / attempt)
        found[attempt] = run_report.time_parts(run) | {"process, end to end": f"{run['process_seconds']:.2f} s"}
        print(attempt, found[attempt], flush=True)
    env = fresh_process.environment(cli_runs.CACHE_ENV)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [os.getcwd(), env.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "support.ecg", *COMMAND, "--out", str(work / "importtime")],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    rows = []
    for line in done.stderr.splitlines():
        parts = line.replace("import time:", "").split("|")
        if len(parts) == 3 and parts[1].strip().isdigit():
            rows.append((int(parts[1]), parts[2].rstrip()))
    rows.sort(reverse=True)
    (log_dir / "importtime.txt").write_text("\n".join(f"{us / 1e6:8.3f} s  {name}" for us, name in rows[:80]) + "\n")
    print(
        "slowest imports (cumulative):", *(f"{us / 1e6:.3f} s {name}" for us, name in rows[:25]), sep="\n", flush=True
    )
    profile = work / "cli.prof"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "cProfile",
            "-o",
            str(profile),
            "-m",
            "support.ecg",
            *COMMAND,
            "--out",
            str(work / "prof"),
        ],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    with open(log_dir / "cprofile.txt", "w") as out:
        stats = pstats.Stats(str(profile), stream=out)
        stats.sort_stats("cumulative").print_stats(120)
    with open(log_dir / "cprofile.txt") as text:
        print(*text.readlines()[:90], sep="", flush=True)
    found["pca, cold"] = fresh_process.run_code(PCA_COLD, what="PCA, cold, two ways", timeout=300)
    print("pca, cold:", found["pca, cold"], flush=True)
    (log_dir / "cold_start.json").write_text(json.dumps(found, indent=1) + "\n")


PCA_COLD = """
import time, torch
x = torch.randn(50_000, 64, device="cuda")
x.T @ x  # cuBLAS is loaded, as training has loaded it before the quality report
torch.cuda.synchronize()
started = time.perf_counter()
centred = x - x.mean(dim=0)
_, vectors = torch.linalg.eigh((centred.T @ centred).double().cpu())
torch.cuda.synchronize()
covariance = time.perf_counter() - started
started = time.perf_counter()
_, _, v = torch.linalg.svd(centred, full_matrices=False)
torch.cuda.synchronize()
svd_first = time.perf_counter() - started
started = time.perf_counter()
_, _, v = torch.linalg.svd(centred, full_matrices=False)
torch.cuda.synchronize()
svd_second = time.perf_counter() - started
result = {"covariance + host eigh, first": covariance, "CUDA svd, first": svd_first, "CUDA svd, second": svd_second}
"""

if __name__ == "__main__":
    main(Path(sys.argv[1]))
