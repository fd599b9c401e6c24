"""Where chapter 6's training time goes at the default batch (4096 beats), and what shortens it.

Run on the GPU host with only PyTorch (no staging): ms per training step of the beat autoencoder under cuDNN's
deterministic algorithms (the chapter's setting) and without, eager and CUDA-graphed, and the top kernels.
"""

import json
import sys
import time

import torch

from support.ecg import step_speed, vae

torch.manual_seed(0)
N, WIDTH = 67_500, 176
data = torch.randn(N, WIDTH, device="cuda")
out = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__}


def timed(label, make, batch, **flags):
    with torch.backends.cudnn.flags(enabled=True, **flags):
        step = make(data, batch)
        ms = step_speed.time_steps(step, steps=30, warmup=5)
    out[label] = ms
    print(f"{label}: {ms:.3f} ms/step", flush=True)
    return step


det = dict(benchmark=False, deterministic=True)
fast = dict(benchmark=True, deterministic=False)
plain = dict(benchmark=False, deterministic=False)
for batch in (512, 4096, 16384):
    timed(f"eager fused b{batch} deterministic", lambda d, b: step_speed.eager_step(d, b, fused=True), batch, **det)
    timed(f"eager fused b{batch} default", lambda d, b: step_speed.eager_step(d, b, fused=True), batch, **plain)
    timed(f"eager fused b{batch} benchmark", lambda d, b: step_speed.eager_step(d, b, fused=True), batch, **fast)
    for name, flags in (("deterministic", det), ("benchmark", fast)):
        try:
            timed(f"graphed b{batch} {name}", step_speed.graphed_step, batch, **flags)
        except RuntimeError as e:
            out[f"graphed b{batch} {name}"] = str(e)
            print(e)

from torch.profiler import ProfilerActivity, profile

for name, flags in (("deterministic", det), ("benchmark", fast)):
    with torch.backends.cudnn.flags(enabled=True, **flags):
        step = step_speed.eager_step(data, 4096, fused=True)
        for _ in range(5):
            step()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as p:
            for _ in range(10):
                step()
            torch.cuda.synchronize()
    table = p.key_averages().table(sort_by="cuda_time_total", row_limit=12, max_name_column_width=70)
    print(name, "\n", table, flush=True)
    out[f"profile {name}"] = table

# the whole default training (12 epochs of 4096) as the pipeline runs it, wall clock, twice
for name, flags in (("deterministic", det), ("benchmark", fast)):
    times = []
    for _ in range(3):
        torch.cuda.synchronize()
        t = time.perf_counter()
        with torch.backends.cudnn.flags(enabled=True, **flags):
            # vae.train sets deterministic itself; call its loop body through a patched flags context
            orig = torch.backends.cudnn.flags
            torch.backends.cudnn.flags = lambda **kw: orig(**{**kw, **flags})
            try:
                vae.train(data, progress=False)
            finally:
                torch.backends.cudnn.flags = orig
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
    out[f"train() s {name}"] = times
    print(f"train() {name}: {[round(x, 3) for x in times]} s", flush=True)

json.dump(out, open(sys.argv[1] if len(sys.argv) > 1 else "/dev/null", "w"), indent=1)
