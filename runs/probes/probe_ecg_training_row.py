"""Why chapter 6's training row (method_speed.time_training, repeats) came out slower than the pipeline run's
own train stage (one run) in the same process: the same training, timed both ways in each of four rounds, in a
fresh process under the book's one pool, with no profiler anywhere. On a GPU host:
python runs/probes/probe_ecg_training_row.py
"""

import statistics
import tempfile
import time
from pathlib import Path

if __name__ == "__main__":
    from support.memory import use_one_pool

    print(use_one_pool())
    import cupy
    import torch

    from support.ecg import method_speed, pipeline, reading, synthetic, vae

    workdir = Path(tempfile.mkdtemp(prefix="probe-"))
    ecg = synthetic.synthesize(hours=20, fs=250.0, seed=0, xp=cupy)
    csv_path = reading.write_csv(ecg.signal, workdir / "ecg.csv")
    del ecg
    defaults = pipeline.PipelineConfig(fs=250.0, seed=0, progress=False)
    stage, repeated, bare = [], [], []
    for round_ in range(4):
        log = pipeline.StageLog()
        result = pipeline.run_pipeline(csv_path, defaults, log=log)
        stage.append(next(r.seconds for r in log.reports if r.name == "train"))
        beats = result.tensor[result.train_rows]
        timing = method_speed.time_training(beats, defaults, on="gpu", warmup=1, repeat=3)
        repeated.extend(timing.samples)
        torch.cuda.synchronize()
        started = time.perf_counter()
        vae.train(beats, progress=False, graph=False, latent=defaults.latent, epochs=defaults.epochs,
                  batch_size=defaults.batch_size, seed=defaults.seed)
        torch.cuda.synchronize()
        bare.append(time.perf_counter() - started)
        print(f"round {round_}: stage {stage[-1] * 1e3:.0f} ms, time_training "
              f"{[round(s * 1e3) for s in timing.samples]} ms, bare call {bare[-1] * 1e3:.0f} ms", flush=True)
    for name, values in (("pipeline train stage", stage), ("time_training", repeated), ("bare call", bare)):
        print(f"{name}: median {statistics.median(values) * 1e3:.0f} ms, "
              f"{min(values) * 1e3:.0f} to {max(values) * 1e3:.0f} ms ({len(values)})")
