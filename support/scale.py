"""Many ECG recordings on several workers with Dask: the groundwork of chapter 7 (beyond one GPU).

The same code runs on a laptop's cores and on a machine's GPUs; only the cluster differs:

- :func:`make_cluster` starts ``dask_cuda.LocalCUDACluster`` on a GPU machine (one worker per GPU, each with its
  own RMM pool, chapter 4's lesson applied per process) or ``distributed.LocalCluster`` on the CPU;
- :func:`write_recordings` writes N synthetic recordings (chapter 6's generator, one seed each, some with more
  anomalies) as one CSV per recording, and returns their metadata table;
- :func:`recording_summary` is the per-recording task: chapter 6's stages from reading to beats, where the data
  lives (the worker's GPU, or its CPU), reduced to one row of beat statistics;
- :func:`summarize` maps that task over the files with ``client.map``, one task per recording, on whichever
  worker is free;
- :func:`rank_recordings` joins the summaries with the metadata and ranks the recordings: a stage that needs
  data from every recording at once, done as a Dask DataFrame merge (a shuffle between workers).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

#: The per-recording statistics :func:`recording_summary` returns, in order.
SUMMARY_COLUMNS = ("recording", "seconds", "beats", "median_bpm", "short_rr_share", "long_rr_share")


@dataclass(frozen=True)
class RecordingSpec:
    """One synthetic recording: its seed, length and anomaly rates (chapter 6's generator)."""

    seed: int
    hours: float
    ectopic_rate: float = 0.02
    noise_rate: float = 0.01

    @property
    def name(self) -> str:
        return f"recording-{self.seed:03d}"


def recording_specs(count: int, hours: float, *, seed: int = 0) -> list[RecordingSpec]:
    """``count`` recordings of ``hours`` each; every third has three times the ectopic beats of the others.

    >>> [(s.name, s.ectopic_rate) for s in recording_specs(3, 0.1)]
    [('recording-000', 0.06), ('recording-001', 0.02), ('recording-002', 0.02)]
    """
    if count < 1 or hours <= 0:
        raise ValueError(f"need at least one recording of positive length, not {count} of {hours} h")
    return [RecordingSpec(seed + k, hours, ectopic_rate=0.06 if k % 3 == 0 else 0.02) for k in range(count)]


def write_recordings(folder, specs: list[RecordingSpec], *, fs: float = 250.0, xp=np):
    """Write each recording as ``<name>.csv`` in ``folder``; return (paths, metadata as a pandas DataFrame)."""
    import pandas as pd

    from support.ecg import reading, synthetic

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths, rows = [], []
    for spec in specs:
        ecg = synthetic.synthesize(
            hours=spec.hours, fs=fs, seed=spec.seed, xp=xp, ectopic_rate=spec.ectopic_rate, noise_rate=spec.noise_rate
        )
        paths.append(reading.write_csv(ecg.signal, folder / f"{spec.name}.csv"))
        counts = ecg.counts()
        rows.append(
            {"recording": spec.name, "seed": spec.seed, "hours": spec.hours, "ectopic_rate": spec.ectopic_rate}
            | {f"true {kind}": n for kind, n in counts.items()}
        )
    return paths, pd.DataFrame(rows)


def recording_summary(path, fs: float = 250.0, on: str = "cpu") -> dict[str, object]:
    """Chapter 6's stages from the CSV at ``path`` to the beats, on ``on`` ("gpu" or "cpu"), as one row:
    the number of beats, the median heart rate, and the shares of RR intervals much shorter or longer than
    the median (premature beats, and the pauses after them)."""
    from support.ecg import beats as beat_tools
    from support.ecg import pipeline, reading
    from support.ecg.backend import array_module

    recording = reading.read_signal(path, on=on)
    config = pipeline.PipelineConfig(fs=fs, progress=False)
    pipeline.check_length(recording.signal, fs)
    response, clean = pipeline.convolve(recording.signal, fs)
    candidates = pipeline.find_candidates(response, config)
    found = beat_tools.extract_beats(clean, candidates, fs, limits=config.limits)
    xp = array_module(found.peaks)
    rr = xp.diff(found.peaks).astype(xp.float64) / fs
    if len(rr) < 2:
        raise ValueError(f"{path}: fewer than three beats were found; is this an ECG sampled at {fs:g} Hz?")
    median = float(xp.median(rr))
    return {
        "recording": Path(path).stem,
        "seconds": len(recording.signal) / fs,
        "beats": int(len(found.peaks)),
        "median_bpm": 60.0 / median,
        "short_rr_share": float((rr < 0.8 * median).mean()),
        "long_rr_share": float((rr > 1.2 * median).mean()),
    }


def make_cluster(kind: str = "cpu", *, workers: int | None = None, rmm_pool_size: str | None = "4GB"):
    """A local Dask cluster: ``"gpu"`` is ``dask_cuda.LocalCUDACluster`` (one worker per visible GPU, each with an
    RMM pool of ``rmm_pool_size``), ``"cpu"`` a ``distributed.LocalCluster`` of ``workers`` single-threaded
    processes. Returns the cluster; ``distributed.Client(cluster)`` connects to it."""
    if kind == "gpu":
        from dask_cuda import LocalCUDACluster

        options = {"rmm_pool_size": rmm_pool_size} if rmm_pool_size else {}
        if workers is not None:
            options["n_workers"] = workers
        return LocalCUDACluster(**options)
    if kind == "cpu":
        from distributed import LocalCluster

        return LocalCluster(n_workers=workers or 2, threads_per_worker=1, processes=True, dashboard_address=None)
    raise ValueError(f"kind must be 'gpu' or 'cpu', not {kind!r}")


def summarize(client, paths, *, fs: float = 250.0, on: str = "cpu"):
    """Run :func:`recording_summary` on every file, one task each, spread over the client's workers; return a
    pandas DataFrame with one row per recording (in the order of ``paths``)."""
    import pandas as pd

    futures = client.map(recording_summary, [str(p) for p in paths], fs=fs, on=on, pure=False)
    return pd.DataFrame(client.gather(futures), columns=list(SUMMARY_COLUMNS))


def rank_recordings(summaries, metadata, *, partitions: int = 2):
    """Join the per-recording summaries with the metadata (a Dask DataFrame merge, which shuffles rows between
    workers by recording) and rank the recordings by their share of short RR intervals, highest first."""
    import dask.dataframe as dd

    left = dd.from_pandas(summaries, npartitions=partitions)
    right = dd.from_pandas(metadata, npartitions=partitions)
    joined = left.merge(right, on="recording", how="inner")
    ranked = joined.compute().sort_values("short_rr_share", ascending=False, ignore_index=True)
    if len(ranked) != len(summaries):
        missing = sorted(set(summaries["recording"]) - set(ranked["recording"]))
        raise ValueError(f"recordings without metadata: {missing}")
    return ranked
