"""Many ECG recordings on several workers with Dask: the code of chapter 7 (beyond one GPU).

The same code runs on a laptop's cores and on a machine's GPUs; only the cluster differs:

- :func:`make_cluster` starts ``dask_cuda.LocalCUDACluster`` on a GPU machine (one worker per GPU, each with its
  own RMM pool that cuDF, CuPy and PyTorch share: chapter 4's lesson applied per process) or
  ``distributed.LocalCluster`` on the CPU, and with ``workers_per_gpu`` puts several workers on one GPU
  (:func:`share_each_worker_s_device`); :func:`worker_devices` shows which GPU each worker sees;
  :data:`PLACEMENTS` are the chapter's three clusters (one worker on one GPU, two on one, two on two);
- :func:`write_recording` writes one synthetic recording (chapter 6's generator, one seed each, some with more
  ectopic beats) as a CSV, with its truth beside it, and returns its row of the metadata table;
- :func:`train_on_sample` trains one model for every recording, on beats sampled from a few of them;
  :func:`fine_tune` makes a model per recording from it;
- the per-recording work is two tasks, both where the data lives (the worker's GPU, or its CPU):
  :func:`read_recording` reads a CSV into the worker's memory, :func:`score_recording` runs chapter 6's stages
  on it, fine-tunes a copy of the model on its beats, and scores every beat three ways (the global model, the
  fine-tuned one, the RR-prematurity score), as a data frame that stays on the worker; :func:`beat_table` does
  both; :func:`drop_from_page_cache` makes the next read of a file come from the disk (:func:`time_cold`;
  :func:`page_cache_bytes` and :func:`filesystem_of` check that there is a disk to come from);
- :func:`recording_quality` judges one recording's scores against its truth, where the table lives;
- the rankings: :func:`recording_summary` reduces a table to one row where it lives, and
  :func:`rank_recordings` ranks the gathered rows with their metadata (:func:`summaries_and_bytes` counts what
  came back); :func:`rank_every_beat` ranks every beat across recordings, a stage that needs all of them at once
  (a shuffle between workers);
- :func:`task_stream_figure` draws what each worker did and when, from the scheduler's task stream (the
  dashboard's "Task Stream" plot, as a figure for the page);
- :func:`read_everywhere` reads every recording, each worker its share (:func:`recordings_per_worker`);
- :func:`measure_stages` times the reading (from disk and from the page cache), the scoring and both rankings on
  one cluster (with the bytes sent between workers and each worker's load); :func:`scaling_table` sets the
  clusters side by side, :func:`spread_table` shows a stage's repeats, :func:`second_gpu_speedup` bounds what the
  second GPU buys against two workers on one;
- :func:`available_transports` says whether UCX can be tried here;
- :func:`cluster_diagram` draws the cluster;
- :func:`recording_size` tells Dask how many bytes a recording holds (its samples).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

#: The columns of :func:`beat_table`: one row per beat after the first of a recording. ``score`` is the global
#: model's, ``tuned_score`` that of the model fine-tuned on the recording (:func:`fine_tune`), ``rr_score``
#: chapter 6's RR-prematurity score (the rhythm alone, no model: the control of both).
BEAT_COLUMNS = (
    "recording",
    "sample",
    "time_s",
    "rr_s",
    "score",
    "tuned_score",
    "rr_score",
    "flagged",
    "premature",
)

#: A beat is ``premature`` where chapter 6's RR-prematurity score (:func:`support.ecg.baselines.rr_prematurity`)
#: passes this: it came at least 20 % early against the median of the intervals around it, or less early and
#: followed by a pause. Against the recording's own median instead, a bout of exercise (a faster rate for
#: minutes) would count as premature beats.
PREMATURE = float(np.log(1 / 0.8))

#: The columns of :func:`rank_recordings`, in order.
RANK_COLUMNS = ("recording", "ectopic_rate", "beats", "mean_bpm", "premature_share", "flagged_share")


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


def _array_module(on: str):
    if on == "gpu":
        import cupy

        return cupy
    if on == "cpu":
        return np
    raise ValueError(f"on must be 'gpu' or 'cpu', not {on!r}")


def truth_path(csv_path) -> Path:
    """Where :func:`write_recording` keeps the true R peaks and labels of the recording at ``csv_path``."""
    csv_path = Path(csv_path)
    return csv_path.with_name(f"{csv_path.stem}.truth.npz")


def write_recording(spec: RecordingSpec, folder, *, fs: float = 250.0, on: str = "cpu") -> dict[str, object]:
    """Synthesize ``spec`` (on the GPU with ``on="gpu"``), write it as ``<name>.csv`` in ``folder`` with its truth
    beside it, and return its row of the metadata table."""
    from support.ecg import reading, synthetic

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    ecg = synthetic.synthesize(
        hours=spec.hours,
        fs=fs,
        seed=spec.seed,
        xp=_array_module(on),
        ectopic_rate=spec.ectopic_rate,
        noise_rate=spec.noise_rate,
    )
    path = reading.write_csv(ecg.signal, folder / f"{spec.name}.csv")
    np.savez(truth_path(path), r_peaks=ecg.r_peaks, labels=ecg.labels)
    counts = {f"true {kind}": n for kind, n in ecg.counts().items()}
    return {"recording": spec.name, "seed": spec.seed, "hours": spec.hours, "ectopic_rate": spec.ectopic_rate} | counts


def write_recordings(folder, specs: list[RecordingSpec], *, fs: float = 250.0, on: str = "cpu", client=None):
    """Write every recording (one task each on ``client``'s workers, if given); return (paths, metadata as a
    pandas DataFrame), both in the order of ``specs``."""
    import pandas as pd

    if client is None:
        rows = [write_recording(spec, folder, fs=fs, on=on) for spec in specs]
    else:
        rows = client.gather(client.map(write_recording, specs, folder=str(folder), fs=fs, on=on, pure=False))
    return [Path(folder) / f"{spec.name}.csv" for spec in specs], pd.DataFrame(rows)


#: Beats scored per batch: a whole recording's beats at once. Scoring in chapter 6's training batches (4096) is
#: launch-bound: the same kernels launched twenty times over, each with little work, and it was what kept scoring
#: on two GPUs from scaling (the probe in drafts/07_many_gpus_h200_runs.txt).
SCORE_BATCH = 2**17


@dataclass
class GlobalModel:
    """One model for every recording: the autoencoder (kept on the CPU to travel between processes), the score
    above which a beat is flagged, and the sampling rate of the recordings it was trained on."""

    model: object  # support.ecg.vae.BeatVAE
    threshold: float
    fs: float
    trained_on: int  # beats

    def scores(self, tensor):
        """Anomaly scores of the beats in ``tensor``, computed where they live, in batches of
        :data:`SCORE_BATCH` beats."""
        from support.ecg import vae

        return vae.anomaly_scores(self.model.to(tensor.device), tensor, batch_size=SCORE_BATCH)


def _beats_of(path, fs: float, on: str):
    from support.ecg import pipeline, reading

    recording = reading.read_signal(path, on=on)
    pipeline.check_length(recording.signal, fs)
    return pipeline.find_beats(recording.signal, pipeline.PipelineConfig(fs=fs, progress=False))


def train_on_sample(
    paths, *, beats_per_recording: int = 8000, fs: float = 250.0, on: str = "cpu", flag_share: float = 0.03, seed=0
) -> GlobalModel:
    """Train chapter 6's autoencoder on up to ``beats_per_recording`` beats drawn from each recording in ``paths``,
    and set the threshold that flags the ``flag_share`` of those beats that score highest."""
    import torch

    from support.ecg import pipeline, vae

    if not 0 < flag_share < 1:
        raise ValueError(f"flag_share must lie strictly between 0 and 1, not {flag_share}")
    xp = _array_module(on)
    rng = np.random.default_rng(seed)
    sampled = []
    for path in paths:
        matrix = _beats_of(path, fs, on).matrix
        rows = np.sort(rng.choice(len(matrix), size=min(beats_per_recording, len(matrix)), replace=False))
        sampled.append(matrix[xp.asarray(rows)])
    tensor = pipeline.to_torch(xp.concatenate(sampled))
    config = pipeline.PipelineConfig(fs=fs, seed=seed, progress=False)
    training = vae.train(
        tensor, latent=config.latent, epochs=config.epochs, batch_size=config.batch_size, seed=seed, progress=False
    )
    scores = vae.anomaly_scores(training.model, tensor)
    threshold = float(torch.quantile(scores.float(), 1 - flag_share))
    return GlobalModel(training.model.cpu(), threshold, fs, trained_on=len(tensor))


def fine_tune(model: GlobalModel, tensor, *, epochs: int, batch_size: int = 4096, seed: int = 0):
    """A copy of ``model``'s autoencoder trained ``epochs`` more epochs on the beats in ``tensor`` (one recording's,
    on their device), from the global weights: a model per recording, fine-tuned from the global one. The
    global model is left as it was. Deterministic as :func:`support.ecg.vae.train` is (same seed, same GPU)."""
    import copy

    import torch

    from support.ecg import vae

    if epochs < 1:
        raise ValueError(f"fine-tuning needs at least one epoch, not {epochs}")
    tuned = copy.deepcopy(model.model).to(tensor.device)
    fused = True if tensor.device.type == "cuda" else None  # one kernel for every parameter's update (CUDA only)
    optimizer = torch.optim.Adam(tuned.parameters(), lr=1e-3, fused=fused)
    generator = torch.Generator(device=tensor.device).manual_seed(seed)
    steps = max(1, len(tensor) // batch_size)
    tuned.train()
    devices = [tensor.device] if tensor.device.type == "cuda" else []
    # the VAE's sampling draws from the global generator: seeded here, and restored after (fork_rng)
    with (
        torch.random.fork_rng(devices=devices),
        torch.backends.cudnn.flags(enabled=True, benchmark=False, deterministic=True),
    ):
        torch.manual_seed(seed)
        for _ in range(epochs):
            order = torch.randperm(len(tensor), device=tensor.device, generator=generator)
            for step in range(steps):
                vae.train_step(tuned, optimizer, tensor[order[step * batch_size : (step + 1) * batch_size]])
    tuned.eval()
    return tuned


def _frame(on: str, columns: dict):
    if on == "gpu":
        import cudf

        return cudf.DataFrame(columns)
    import pandas as pd

    return pd.DataFrame(columns)


def empty_beat_table(on: str = "cpu"):
    """A table with :data:`BEAT_COLUMNS` and no rows: the ``meta`` Dask needs to know the tables' types."""
    xp = _array_module(on)
    kinds = {"sample": xp.int64, "time_s": xp.float64, "rr_s": xp.float64}
    kinds |= {"score": xp.float32, "tuned_score": xp.float32, "rr_score": xp.float32}
    columns = {"recording": []} | {name: xp.zeros(0, dtype=kind) for name, kind in kinds.items()}
    columns |= {"flagged": xp.zeros(0, dtype=xp.float32), "premature": xp.zeros(0, dtype=xp.float32)}
    frame = _frame(on, columns)
    frame["recording"] = frame["recording"].astype(str)
    return frame


def _stages(meter):
    """``meter.stage`` (a :class:`support.traffic.TrafficMeter`'s), or a stand-in that records nothing."""
    return meter.stage if meter is not None else (lambda name: contextlib.nullcontext())


def read_recording(path, *, fs: float = 250.0, on: str = "cpu"):
    """Read the recording at ``path`` into this process's memory (its GPU with ``on="gpu"``: cuDF parses the
    CSV there) and check that it is long enough: a :class:`support.ecg.reading.Recording`. On a cluster the
    result stays on the worker that read it, as a future, until a task there uses it."""
    from support.ecg import pipeline, reading

    recording = reading.read_signal(path, on=on)
    pipeline.check_length(recording.signal, fs)
    return recording


def score_recording(recording, model: GlobalModel, *, on: str = "cpu", meter=None, fine_tune_epochs: int = 0):
    """Chapter 6's stages on a recording already in memory, where it lives: find and embed the beats, score them
    with ``model``, fine-tune a copy of it on the recording's beats for ``fine_tune_epochs`` epochs
    (:func:`fine_tune`) and score them again; one row per beat after the first (cuDF on the GPU, pandas on the
    CPU), with the columns :data:`BEAT_COLUMNS`.

    ``flagged`` is 1 where the global score passes the model's threshold (one scale for every recording),
    ``premature`` where the RR-prematurity score passes :data:`PREMATURE` (the beat came early against the
    intervals around it); ``sample`` is the beat's R peak. With ``fine_tune_epochs=0`` nothing is tuned and
    ``tuned_score`` is the global score. A :class:`support.traffic.TrafficMeter` passed as ``meter`` records the
    copies of each stage.
    """
    from support.ecg import pipeline
    from support.ecg.baselines import rr_prematurity
    from support.interop import share

    xp = _array_module(on)
    stage = _stages(meter)
    name = Path(recording.source).stem
    target = "cupy" if on == "gpu" else "numpy"
    with stage("beats"):
        found = pipeline.find_beats(recording.signal, pipeline.PipelineConfig(fs=model.fs, progress=False))
        if len(found) < 3:
            raise ValueError(f"{name}: fewer than three beats were found; is this an ECG sampled at {model.fs:g} Hz?")
        tensor = pipeline.to_torch(found.matrix)
    with stage("score"):
        scores = share(model.scores(tensor), target)
    with stage("fine-tune"):
        tuned = scores
        if fine_tune_epochs:
            own = GlobalModel(fine_tune(model, tensor, epochs=fine_tune_epochs), model.threshold, model.fs, len(tensor))
            tuned = share(own.scores(tensor), target)
        rhythm = share(rr_prematurity(found.peaks, model.fs), target)
    with stage("table"):
        rr = xp.diff(found.peaks).astype(xp.float64) / model.fs
        columns = {
            "sample": found.peaks[1:].astype(xp.int64),
            "time_s": found.peaks[1:].astype(xp.float64) / model.fs,
            "rr_s": rr,
            "score": scores[1:],
            "tuned_score": tuned[1:],
            "rr_score": rhythm[1:],
            "flagged": (scores[1:] > model.threshold).astype(xp.float32),
            "premature": (rhythm[1:] > PREMATURE).astype(xp.float32),
        }
        table = _frame(on, columns)
        table.insert(0, "recording", name)
    return table


def score_everywhere(
    client, recordings, model: GlobalModel, *, on: str = "cpu", fine_tune_epochs: int = 0, workers=None
):
    """One :func:`score_recording` task per recording future, each where its recording lives (or on ``workers``):
    the futures of the scored tables. The one place the chapter's scoring is handed to the cluster."""
    return client.map(
        score_recording,
        recordings,
        model=model,
        on=on,
        fine_tune_epochs=fine_tune_epochs,
        workers=workers,
        pure=False,
    )


def beat_table(path, model: GlobalModel, *, on: str = "cpu", meter=None):
    """:func:`read_recording` then :func:`score_recording`: the recording at ``path`` as a table of scored beats
    (the ``meter``, if given, records the read as a stage of its own)."""
    stage = _stages(meter)
    with stage("read"):
        recording = read_recording(path, fs=model.fs, on=on)
    return score_recording(recording, model, on=on, meter=meter)


#: The scores of a beat table that :func:`recording_quality` judges on the ectopic beats, and their names there.
SCORERS = {"score": "global model", "tuned_score": "fine-tuned model", "rr_score": "RR prematurity"}


def recording_quality(table, folder) -> dict[str, object]:
    """How well the scores of one recording's :func:`beat_table` separate its anomalies from its normal beats,
    judged against the truth :func:`write_recording` left in ``folder``: chapter 6's measures
    (:func:`support.ecg.pipeline.evaluate_scores`: AUROC overall and per kind of anomaly, precision at the
    labelled rate) of the global model's score over every beat of the recording, and the AUROC of ectopic
    against normal beats of each of :data:`SCORERS` (``"ectopic: <scorer>"``; NaN where the recording has
    none)."""
    from support.ecg.beats import true_labels_of
    from support.ecg.pipeline import evaluate_scores

    name = str(table["recording"].iloc[0])
    truth = truth_path(Path(folder) / f"{name}.csv")
    if not truth.exists():
        raise ValueError(f"{name}: no truth file {truth.name} in {folder}; write the recording with write_recording")
    with np.load(truth) as known:
        label = true_labels_of(np.asarray(table["sample"].to_numpy()), known["r_peaks"], known["labels"])
    quality = evaluate_scores(np.asarray(table["score"].to_numpy()), label)
    beats, anomalies = quality.pop("test_beats"), quality.pop("test_anomalies")
    ectopic = {}
    for column, scorer in SCORERS.items():
        judged = evaluate_scores(np.asarray(table[column].to_numpy()), label)
        ectopic[f"ectopic: {scorer}"] = judged.get("auroc ectopic vs normal", float("nan"))
    return {"recording": name, "beats": beats, "anomalies": anomalies} | quality | ectopic


def recording_summary(table) -> dict[str, object]:
    """One recording's :func:`beat_table` in one row, computed where the table lives: its beats, heart rate
    (from the mean interval), and the shares of its beats that came early and that the global model flags. On a
    cluster, ``client.map(recording_summary, tables)`` sends back these few numbers, not the beats."""
    return {
        "recording": str(table["recording"].iloc[0]),
        "beats": int(len(table)),
        "mean_bpm": 60.0 / float(table["rr_s"].mean()),
        "flagged_share": float(table["flagged"].mean()),
        "premature_share": float(table["premature"].mean()),
    }


def rank_recordings(summaries, metadata, *, by: str = "premature_share"):
    """The :func:`recording_summary` rows joined with ``metadata`` (in the notebook: one row per recording on
    each side) and ranked by ``by`` (the share of premature beats, or ``"flagged_share"``: of beats the global
    model flags), highest first; a pandas DataFrame with :data:`RANK_COLUMNS`."""
    import pandas as pd

    rows = pd.DataFrame(list(summaries))
    missing = sorted(set(metadata["recording"]) ^ set(rows["recording"]))
    if missing or len(rows) != len(metadata):
        raise ValueError(f"recordings without a summary or metadata: {missing or 'a recording summarized twice'}")
    joined = rows.merge(metadata[["recording", "ectopic_rate"]], on="recording", validate="one_to_one")
    ranked = joined.sort_values([by, "recording"], ascending=[False, True], ignore_index=True)
    return ranked[list(RANK_COLUMNS)]


#: The columns of :func:`rank_every_beat`, in order.
TOP_COLUMNS = ("recording", "beats", "in_top", "top_share")


def _global_positions(partition, offsets, partition_info=None):
    """Each row's position among all rows of a sorted Dask DataFrame: its partition's offset plus its place."""
    xp = np if not hasattr(partition, "to_pandas") else _array_module("gpu")
    first = offsets[partition_info["number"]] if partition_info else 0
    return partition.assign(position=xp.arange(first, first + len(partition)))


def rank_every_beat(tables, *, on: str = "cpu", top: float = 0.01):
    """Rank every beat of every recording by its global score, across recordings, and count per recording the
    beats among the ``top`` share of all: a pandas DataFrame with :data:`TOP_COLUMNS`, most first.

    The rank of one beat depends on every other beat, so this stage needs the beats of all recordings together:
    Dask DataFrame's ``sort_values`` samples the scores, cuts their range into partitions, and sends each beat
    row to the partition of its range (a shuffle: rows change workers). ``shuffle_method="tasks"`` runs it as
    ordinary tasks, whose transfers :func:`bytes_between_workers` counts (a peer-to-peer shuffle moves its rows
    outside them)."""
    import dask.dataframe as dd

    if not 0 < top < 1:
        raise ValueError(f"top must be a share strictly between 0 and 1, not {top}")
    if on == "gpu":
        import dask_cudf  # noqa: F401 - registers cuDF partitions with Dask DataFrame

    beats = dd.from_delayed(list(tables), meta=empty_beat_table(on), verify_meta=False)[["recording", "score"]]
    ordered = beats.sort_values("score", ascending=False, shuffle_method="tasks").persist()
    sizes = ordered.map_partitions(len).compute()
    offsets = np.concatenate([[0], np.cumsum(np.asarray(sizes))[:-1]]).tolist()
    placed = ordered.map_partitions(_global_positions, offsets)
    placed = placed.assign(in_top=(placed["position"] < top * int(sum(sizes))).astype("int64"))
    counted = placed.groupby("recording").agg({"position": "count", "in_top": "sum"}).compute()
    counted = counted.to_pandas() if hasattr(counted, "to_pandas") else counted
    counted = counted.reset_index().rename(columns={"position": "beats"})
    counted["top_share"] = counted["in_top"] / counted["beats"]
    ranked = counted.sort_values(["in_top", "recording"], ascending=[False, True], ignore_index=True)
    return ranked[list(TOP_COLUMNS)]


def summaries_and_bytes(client, tables) -> tuple[list[dict], int, int]:
    """:func:`recording_summary` of every table, computed where it lives and gathered: the summaries, the bytes
    they hold (Dask's ``sizeof``: what came to the notebook) and the bytes the workers sent meanwhile
    (:func:`bytes_between_workers`: the gathered summaries, and any table that changed workers)."""
    from dask.sizeof import sizeof

    before = bytes_between_workers(client)
    summaries = client.gather(client.map(recording_summary, tables))
    return summaries, int(sum(sizeof(row) for row in summaries)), bytes_between_workers(client) - before


def beat_table_traffic(path, model: GlobalModel, *, on: str = "gpu") -> dict[str, object]:
    """The host↔GPU copies of each stage of :func:`beat_table` on the recording at ``path``, as a
    :class:`support.traffic.TrafficMeter` records them in the process that runs it.

    On a worker, run it with ``client.run(..., workers=[address])``, in the worker's main thread: the profiler
    under the meter refuses to start in a thread other than the one that loaded it (a task's thread)."""
    from support.traffic import TrafficMeter

    meter = TrafficMeter()
    beat_table(path, model, on=on, meter=meter)
    return meter.stages


def recording_size(recording) -> int:
    """The bytes a :class:`support.ecg.reading.Recording` holds: its samples (the cuDF column they were read into
    shares their memory). Registered as Dask's ``sizeof`` for recordings when this module is imported (as every
    worker does to run its tasks): without it, Dask counts a recording as the few dozen bytes of the object
    around its arrays, and its memory reports, its spilling and :func:`bytes_between_workers` miss the samples.
    """
    from dask.sizeof import sizeof

    return int(sizeof(recording.signal))


def _register_recording_size() -> None:
    try:
        from dask.sizeof import sizeof
    except ImportError:  # no Dask here, nothing to tell it
        return
    from support.ecg.reading import Recording

    sizeof.register(Recording)(recording_size)


_register_recording_size()


def _sent_by_this_worker(dask_worker) -> int:
    return dask_worker.transfer_outgoing_bytes_total


def bytes_between_workers(client) -> int:
    """Bytes the workers have sent so far, all together: task results fetched by another worker, and those the
    client gathered from them (a worker counts both as outgoing transfers)."""
    return sum(client.run(_sent_by_this_worker).values())


@dataclass(frozen=True)
class Placement:
    """How many worker processes a cluster has, and how many of them share each GPU."""

    workers: int
    workers_per_gpu: int = 1

    def __post_init__(self):
        if self.workers < 1 or self.workers_per_gpu < 1 or self.workers % self.workers_per_gpu:
            raise ValueError(
                f"{self.workers} workers cannot be shared {self.workers_per_gpu} to a GPU: give a multiple of it"
            )

    @property
    def gpus(self) -> int:
        """The GPUs the workers run on."""
        return self.workers // self.workers_per_gpu

    @property
    def label(self) -> str:
        return f"{self.workers} worker{'s' * (self.workers > 1)}, {self.gpus} GPU{'s' * (self.gpus > 1)}"


#: The chapter's three clusters: one worker on one GPU; two on ONE GPU (the control: a second process, not a
#: second GPU); two on two GPUs. The speed-up of the second GPU is the second's time over the third's.
PLACEMENTS = (Placement(1), Placement(2, workers_per_gpu=2), Placement(2))


@dataclass
class ScalingRun:
    """The stages of the chapter timed on one cluster: their wall-clock timings (every repeat kept), the bytes
    each ranking sent between workers (beside the size of all beat tables) and the bytes the summaries brought to
    the notebook, and both rankings themselves (to check that every cluster computes the same)."""

    placement: Placement
    timings: dict[str, object]  # stage -> support.bench.Timing
    sent: dict[str, int]  # ranking stage -> bytes the workers sent one another
    gathered: int  # bytes of the per-recording summaries gathered into the notebook
    ranking: object  # pandas DataFrame: rank_recordings
    top: object  # pandas DataFrame: rank_every_beat
    table_bytes: int  # the beat tables' size in memory, all together
    load: object  # pandas DataFrame: each worker's tasks in the last timed read and score (worker_load)
    starts: int = 1  # how many clusters were started for these repeats (pool_runs adds them up)

    @property
    def workers(self) -> int:
        return self.placement.workers


#: The stages :func:`measure_stages` times, in order. Each "on the workers" line is the stage above it seen from the
#: workers: from the start of its first task to the end of its last, without the notebook's part (sending the
#: tasks, hearing back).
STAGES = (
    "read from disk",
    "read from the page cache",
    "  read: on the workers",
    "score every recording",
    "  score: on the workers",
    "rank: summaries gathered",
    "rank: every beat (shuffle)",
)


def drop_from_page_cache(path) -> int:
    """Ask the kernel to forget the cached pages of the file at ``path``, so that the next read comes from the disk;
    returns the file's size in bytes.

    ``POSIX_FADV_DONTNEED`` is advice: the kernel drops only clean pages, and may keep some. The file is
    ``fsync``-ed first, so that pages still waiting to be written (dirty pages, as right after
    :func:`write_recording`) are written out and can be dropped. It acts on this machine's page cache: on a
    cluster of several servers, call it on the server that holds the file (``client.run``)."""
    import os

    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
        os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
        return os.fstat(descriptor).st_size
    finally:
        os.close(descriptor)


def page_cache_bytes(meminfo="/proc/meminfo") -> int:
    """The bytes the kernel holds in its page cache now (``Cached`` in ``/proc/meminfo``; machine-wide, also
    inside a container): the control of :func:`drop_from_page_cache`, which should make it fall."""
    for line in Path(meminfo).read_text().splitlines():
        if line.startswith("Cached:"):
            return int(line.split()[1]) * 1024  # the file counts in kB
    raise ValueError(f"{meminfo} has no Cached line: is this Linux?")


def filesystem_of(path, mounts="/proc/self/mounts") -> str:
    """The type of the file system that holds ``path`` (``ext4``, ``xfs``, ``overlay``, ``tmpfs``…), from the
    mount table: on ``tmpfs`` a file lives in memory, and no read of it comes from a disk."""
    path = Path(path).resolve()
    best, kind = "", "unknown"
    for line in Path(mounts).read_text().splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        if (path == Path(point) or Path(point) in path.parents) and len(point) > len(best):
            best, kind = point, fields[2]
    return kind


def time_cold(run, paths, *, label: str, warmup: int = 1, repeat: int = 5):
    """Time ``run()`` with the wall clock as :func:`support.bench.time_wall` does, with every file of ``paths``
    dropped from the page cache (:func:`drop_from_page_cache`) before each call, outside the timing."""
    import time

    from support.bench import Timing

    samples = []
    for k in range(warmup + repeat):
        for path in paths:
            drop_from_page_cache(path)
        start = time.perf_counter()
        run()
        if k >= warmup:
            samples.append(time.perf_counter() - start)
    return Timing(label, tuple(samples), "wall")


def _computations(records) -> list[tuple[str, str, float, float]]:
    """(worker, function, start, stop) of every computation in a task stream's records (transfers left out)."""
    if not records:
        raise ValueError("the task stream is empty: record it with `with get_task_stream(client) as ts:`")
    found = [
        (record["worker"], _task_name(record["key"]), span["start"], span["stop"])
        for record in records
        for span in record.get("startstops", ())
        if span.get("action") == "compute"
    ]
    if not found:
        raise ValueError("the task stream holds no computation")
    return found


def worker_load(records, *, function: str | None = None):
    """Each worker's share of a task stream: how many tasks it computed, their median duration, and the time from
    its first start to its last end (a pandas DataFrame, workers in address order as "worker 0", "worker 1"…).
    ``function`` (a task's function name, such as ``"score_recording"``) keeps only that function's tasks."""
    import pandas as pd

    found = pd.DataFrame(_computations(records), columns=["worker", "function", "start", "stop"])
    if function is not None:
        if function not in set(found["function"]):
            raise ValueError(f"the task stream ran no {function!r}: it ran {sorted(set(found['function']))}")
        found = found[found["function"] == function]
    found["seconds"] = found["stop"] - found["start"]
    rows = []
    for k, (_, mine) in enumerate(found.groupby("worker", sort=True)):
        span = mine["stop"].max() - mine["start"].min()
        rows.append(
            {"worker": f"worker {k}", "tasks": len(mine), "median task": mine["seconds"].median(), "busy": span}
        )
    return pd.DataFrame(rows).set_index("worker")


def busy_span(records) -> float:
    """Seconds from the start of the first computation to the end of the last in a task stream's records."""
    found = _computations(records)
    return max(stop for *_, stop in found) - min(start for _, _, start, _ in found)


def recordings_per_worker(paths, workers) -> dict[str, list[str]]:
    """Which recordings each worker reads: ``paths`` dealt out in turn, as even as they go (a cluster whose nodes
    each hold their own files on disk splits the same way)."""
    if not workers:
        raise ValueError("the cluster has no workers: start it, or wait for its workers to arrive")
    workers = sorted(workers)
    return {worker: [str(p) for p in paths[k :: len(workers)]] for k, worker in enumerate(workers)}


def read_everywhere(client, paths, *, fs: float = 250.0, on: str = "cpu") -> list:
    """Read every recording on ``client``'s cluster, each worker its :func:`recordings_per_worker` (the reads are pinned
    there); returns the futures of the recordings, in the order of ``paths``. A task that takes one of them
    runs where it lives."""
    placed = recordings_per_worker(paths, client.scheduler_info()["workers"])
    futures = {}
    for worker, mine in placed.items():
        read = client.map(read_recording, mine, fs=fs, on=on, workers=[worker], pure=False)
        futures |= dict(zip(mine, read, strict=True))
    return [futures[str(p)] for p in paths]


def measure_stages(
    client,
    paths,
    model: GlobalModel,
    metadata,
    *,
    on: str = "cpu",
    warmup: int = 1,
    repeat: int = 5,
    fine_tune_epochs: int = 0,
    placement: Placement | None = None,
    cold: bool = True,
):
    """Time each of :data:`STAGES` on ``client``'s cluster with the wall clock (``warmup`` untimed runs, then
    ``repeat`` timed ones): every recording read (:func:`read_everywhere`) until all are in memory, from the disk
    (:func:`time_cold`) and from the page cache; then every recording scored (:func:`score_recording` with
    ``fine_tune_epochs``, one task each, where its recording lives; the model travels with each task) until
    every table is done; then the two rankings: the per-recording summaries computed where the tables live and
    gathered (:func:`rank_recordings`), and every beat ranked across recordings (:func:`rank_every_beat`, a
    shuffle). ``placement`` says what the cluster is (by default: its workers, one per GPU). ``cold=False`` leaves
    the read from disk out (where nothing can be dropped from the page cache, as on ``tmpfs``, it would time the
    read from the page cache again). Returns a :class:`ScalingRun`."""
    import pandas as pd
    from distributed import get_task_stream, wait

    from support.bench import Timing, time_wall

    streams = {"read": [], "score": []}

    def streamed(kind, start):
        with get_task_stream(client) as stream:
            futures = start()
            wait(futures)
        streams[kind].append(stream.data)
        return futures

    def read():
        return streamed("read", lambda: read_everywhere(client, paths, fs=model.fs, on=on))

    timings = {STAGES[0]: time_cold(read, paths, label=STAGES[0], warmup=warmup, repeat=repeat)} if cold else {}
    timings[STAGES[1]] = time_wall(read, label=STAGES[1], warmup=warmup, repeat=repeat)
    recordings = read()

    def score():
        def start():
            return score_everywhere(client, recordings, model, on=on, fine_tune_epochs=fine_tune_epochs)

        return streamed("score", start)

    timings[STAGES[3]] = time_wall(score, label=STAGES[3], warmup=warmup, repeat=repeat)
    # the last `repeat` streams of each kind are the timed runs (the read after them is the one kept): the warm
    # reads, never the cold ones before them
    for kind, label, last in (("read", STAGES[2], -1), ("score", STAGES[4], None)):
        timed = streams[kind][:last][-repeat:]
        timings[label] = Timing(label, tuple(busy_span(records) for records in timed), "wall")
    load = pd.concat({kind: worker_load(streams[kind][-1]) for kind in streams}, names=["stage", "worker"])
    tables = score()
    summaries, gathered, sent_by_summaries = summaries_and_bytes(client, tables)
    before = bytes_between_workers(client)
    top = rank_every_beat(tables, on=on)
    sent = {STAGES[5]: sent_by_summaries, STAGES[6]: bytes_between_workers(client) - before}
    timings[STAGES[5]] = time_wall(
        lambda: rank_recordings(summaries_and_bytes(client, tables)[0], metadata),
        label=STAGES[5],
        warmup=warmup,
        repeat=repeat,
    )
    timings[STAGES[6]] = time_wall(
        functools.partial(rank_every_beat, tables, on=on), label=STAGES[6], warmup=warmup, repeat=repeat
    )
    tables_size = sum(client.gather(client.map(table_bytes, tables)))
    placement = placement or Placement(len(client.scheduler_info()["workers"]))
    return ScalingRun(
        placement,
        {s: timings[s] for s in STAGES if s in timings},
        sent,
        gathered,
        rank_recordings(summaries, metadata),
        top,
        int(tables_size),
        load,
    )


def table_bytes(table) -> int:
    """The bytes a beat table holds in memory (all its columns, strings included)."""
    return int(table.memory_usage(deep=True).sum())


def second_gpu_speedup(shared: ScalingRun, own: ScalingRun, stage: str) -> dict[str, float]:
    """What the second GPU buys on ``stage``: the time of two workers sharing one GPU (``shared``) over that of two
    workers on a GPU each (``own``), by median, and as the repeats bound it: the fastest shared repeat over the
    slowest own one (``"at least"``, what every repeat supports) and the slowest over the fastest (``"at most"``)."""
    if shared.workers != own.workers or shared.placement.gpus >= own.placement.gpus:
        raise ValueError(f"compare as many workers on fewer GPUs with more, not {shared.placement} and {own.placement}")
    few, many = shared.timings[stage], own.timings[stage]
    return {"at least": few.min / many.max, "median": few.median / many.median, "at most": few.max / many.min}


def scaling_table(runs):
    """The stages side by side on every cluster of ``runs`` (a sequence of :class:`ScalingRun`: median times), and
    the bytes each ranking sent between workers on the last (a stage only where every run timed it); where the last
    two runs are as many workers on fewer
    GPUs and on more, also the second GPU's speed-up by median (:func:`second_gpu_speedup`). A pandas DataFrame."""
    import pandas as pd

    from support.bench import format_ratio, format_seconds
    from support.units import describe_bytes

    *_, last = runs
    pair = runs[-2:] if len(runs) > 1 else []
    compared = bool(pair) and pair[0].workers == last.workers and pair[0].placement.gpus < last.placement.gpus
    rows = []
    for stage in (s for s in STAGES if all(s in run.timings for run in runs)):  # what every cluster timed
        row = {"stage": stage} | {run.placement.label: format_seconds(run.timings[stage].median) for run in runs}
        if compared:
            row["second GPU"] = format_ratio(second_gpu_speedup(*pair, stage)["median"])
        row[f"sent between workers ({last.placement.label})"] = (
            describe_bytes(last.sent[stage]) if stage in last.sent else ""
        )
        rows.append(row)
    return pd.DataFrame(rows).set_index("stage")


def spread_table(runs, stage: str):
    """The spread of one stage's repeats on every cluster of ``runs``: how many, the fastest, the median and the
    slowest (seconds, as numbers); a pandas DataFrame, one row per cluster."""
    import pandas as pd

    rows = []
    for run in runs:
        timing = run.timings[stage]
        rows.append(
            {
                "cluster": run.placement.label,
                "repeats": len(timing.samples),
                "fastest": timing.min,
                "median": timing.median,
                "slowest": timing.max,
            }
        )
    return pd.DataFrame(rows).set_index("cluster")


def pool_runs(runs) -> list[ScalingRun]:
    """The runs of ``runs`` pooled by placement, in the order each placement first appears: every stage's repeats
    of all the runs of one placement in one :class:`support.bench.Timing` (so that the spread spans the clusters
    started for it, not one start's repeats), the rest (bytes, rankings, load) from that placement's last run.
    Run the clusters in a mirrored order (A B C C B A) and pool them: drift over the run (a warming GPU, a filling
    page cache) then weighs on every placement alike."""
    from support.bench import Timing

    if not runs:
        raise ValueError("no runs to pool: measure at least one cluster")
    groups: dict[Placement, list[ScalingRun]] = {}
    for run in runs:
        groups.setdefault(run.placement, []).append(run)
    pooled = []
    for mine in groups.values():
        timings = {
            stage: Timing(stage, tuple(x for run in mine for x in run.timings[stage].samples), "wall")
            for stage in mine[0].timings
        }
        pooled.append(dataclasses.replace(mine[-1], timings=timings, starts=sum(run.starts for run in mine)))
    return pooled


def shared_limits(workers: int, workers_per_gpu: int, kind: str = "gpu") -> dict[str, object]:
    """The memory limits of each of ``workers`` worker processes when ``workers_per_gpu`` share a GPU: the host
    memory divided among all workers (``memory_limit``, a share of the machine's), and on a GPU the spilling
    threshold (``device_memory_limit``, Dask-CUDA's default 0.8 of the GPU) and the RMM pool's ceiling
    (``rmm_maximum_pool_size``, 0.9 of the GPU) divided among the workers that share it: without them each copy
    would believe it may fill what one worker alone was given. Options for :func:`make_cluster`."""
    Placement(workers, workers_per_gpu)  # refuses what cannot be shared
    limits: dict[str, object] = {"memory_limit": 1 / workers}
    if kind == "gpu":
        limits |= {"device_memory_limit": 0.8 / workers_per_gpu, "rmm_maximum_pool_size": 0.9 / workers_per_gpu}
    return limits


def make_cluster(
    kind: str = "cpu",
    *,
    workers: int | None = None,
    workers_per_gpu: int = 1,
    rmm_pool_size: str | None = "4GB",
    work_stealing: bool = False,
    **options,
):
    """A local Dask cluster: ``"gpu"`` is ``dask_cuda.LocalCUDACluster`` (one worker per visible GPU, or on the
    first ``workers`` of them, each with an RMM pool of ``rmm_pool_size`` that cuDF, CuPy and PyTorch allocate from),
    ``"cpu"`` a ``distributed.LocalCluster`` of ``workers`` single-threaded processes. ``options`` go to the
    cluster as they are. Returns the cluster; ``distributed.Client(cluster)`` connects to it.

    ``workers_per_gpu`` above 1 puts that many worker processes on each GPU (:func:`share_each_worker_s_device`):
    ``workers=2, workers_per_gpu=2`` is two workers on one GPU, the control that tells a second process from a
    second GPU; their memory limits are divided among them (:func:`shared_limits`, unless ``options`` give
    them). On the CPU the same copies are made (it tests the mechanism; no device is shared).

    Work stealing (the scheduler moving a queued task, and the data it needs, to an idle worker) is off unless
    ``work_stealing``: here every task is placed where its recording lives, and moving a recording between GPUs
    costs more than scoring it."""
    import dask

    if workers_per_gpu > 1 and kind == "gpu" and workers is None:
        raise ValueError("give workers= with workers_per_gpu=: how many workers in all")
    placement = Placement(workers or 2, workers_per_gpu) if kind == "cpu" or workers else None
    if workers_per_gpu > 1 and kind in ("gpu", "cpu"):
        options = shared_limits(placement.workers, workers_per_gpu, kind) | options
    # Worker and scheduler log lines (a heartbeat missed while a cluster closes, a shuffle's progress) would land
    # in the notebook's output; a task's failure still reaches the client as its exception.
    options = {"silence_logs": logging.CRITICAL} | options
    if kind == "gpu":
        from dask_cuda import LocalCUDACluster

        if rmm_pool_size:
            options |= {"rmm_pool_size": rmm_pool_size, "rmm_allocator_external_lib_list": ["cupy", "torch"]}
        # fewer workers than GPUs: the first ``workers`` GPUs get one each, and every worker still sees all GPUs
        # (its own first), so a process on a smaller cluster runs in the same conditions as on a larger one
        start = functools.partial(LocalCUDACluster, n_workers=placement.gpus if placement else None, **options)
    elif kind == "cpu":
        from distributed import LocalCluster

        options = {"threads_per_worker": 1, "processes": True, "dashboard_address": None} | options
        start = functools.partial(LocalCluster, n_workers=placement.gpus, **options)
    else:
        raise ValueError(f"kind must be 'gpu' or 'cpu', not {kind!r}")
    with dask.config.set({"distributed.scheduler.work-stealing": work_stealing}):  # read when the scheduler starts
        cluster = start()
    if workers_per_gpu > 1:
        share_each_worker_s_device(cluster, workers_per_gpu)
    return cluster


def share_each_worker_s_device(cluster, workers_per_device: int) -> None:
    """Start ``workers_per_device - 1`` more workers beside each worker of ``cluster`` (a ``SpecCluster``: a
    ``LocalCUDACluster`` or a ``LocalCluster``), each a copy of its specification: the same environment, hence the
    same ``CUDA_VISIBLE_DEVICES`` and GPU, the same RMM pool size and plugins. Returns when all have arrived.

    Why not ``LocalCUDACluster(CUDA_VISIBLE_DEVICES="0,0")``: dask-cuda names each worker after its device
    (``new_worker_spec`` takes ``min(set(CUDA_VISIBLE_DEVICES) - set(worker_spec))``, 26.10), so a repeated
    device starts one worker and the second raises "Can not scale beyond visible devices". A ``SpecCluster``
    starts every entry of its ``worker_spec`` that is not running when it is scaled to their number.

    Each copy keeps the first worker's limits and its CPU affinity (the cores Dask-CUDA pinned it to, near its
    GPU): :func:`make_cluster` divides the memory limits before the first worker starts (:func:`shared_limits`),
    and :func:`worker_devices` shows each worker's cores."""
    import copy

    if workers_per_device < 1:
        raise ValueError(f"need at least one worker per device, not {workers_per_device}")
    for name, spec in list(cluster.worker_spec.items()):
        for k in range(1, workers_per_device):
            cluster.worker_spec[f"{name}-{k}"] = copy.deepcopy(spec)
    cluster.scale(len(cluster.worker_spec))
    cluster.wait_for_workers(len(cluster.worker_spec), timeout=120)


def available_transports(find_spec=None) -> list[str]:
    """The protocols this environment can give a cluster's workers: ``"tcp"`` always, ``"ucx"`` where the UCXX
    wheels (``ucxx`` and ``distributed_ucxx``) are installed. ``find_spec`` is ``importlib.util.find_spec``
    (replaceable in tests)."""
    import importlib.util

    find_spec = find_spec or importlib.util.find_spec
    return ["tcp"] + (["ucx"] if all(find_spec(name) is not None for name in ("ucxx", "distributed_ucxx")) else [])


def cluster_diagram(placement: Placement | None = None):
    """Chapter 7's cluster as ``placement`` builds it (by default two workers, one per GPU): the client hands tasks
    to the scheduler, which sends each to the worker that holds its recording (reads are pinned, work stealing is
    off); each worker is a process with its RMM pool on its GPU (shared where ``workers_per_gpu`` is above 1); the
    ranking's shuffle moves rows between workers."""
    from support.figures import arrow, box, canvas

    placement = placement or Placement(2)
    workers = placement.workers
    figure, axes = canvas(26, 11, size=(11, 4.4))
    box(axes, 0.3, 8.4, 5.6, 2.0, "client\n(this notebook)", "#f3f3f3", size=9)
    box(axes, 8.6, 8.4, 6.0, 2.0, "scheduler\nwho does which task", "#f3f3f3", size=9)
    arrow(axes, (5.9, 9.4), (8.6, 9.4), "tasks", size=8)
    width = 10.8
    for k in range(workers):
        gpu = k // placement.workers_per_gpu
        shared = f", shared by {placement.workers_per_gpu} workers" if placement.workers_per_gpu > 1 else ""
        x = 0.3 + k * (width + 3.6)
        box(axes, x, 0.4, width, 5.8, "", "#e8eef7")
        axes.text(x + 0.3, 5.7, f"worker {k}: one process, CUDA_VISIBLE_DEVICES={gpu},…", fontsize=8.5, va="top")
        box(axes, x + 0.4, 2.9, 4.6, 2.0, "beat_table\nrecording after\nrecording", "white", size=8)
        label = f"GPU {gpu}{shared}\nits own RMM pool:\ncuDF, CuPy, PyTorch"
        box(axes, x + 5.8, 2.9, 4.6, 2.0, label, "#dfeedd", size=7 if shared else 8)
        arrow(axes, (x + 5.0, 3.9), (x + 5.8, 3.9), color="#55a868", offset=(0, 0.15))
        box(axes, x + 0.4, 0.8, 10.0, 1.4, "its beat tables stay here (futures)", "white", size=8)
        arrow(axes, (11.6, 8.4), (x + width / 2, 6.2), color="#4c72b0")
    if workers > 1:
        arrow(axes, (0.3 + width, 1.5), (0.3 + width + 3.6, 1.5), "shuffle", color="#c44e52", offset=(-0.4, 0.25))
    note = "each worker reads its share of the recordings;\na recording's tasks run where it was read"
    axes.text(16.2, 9.1, note, fontsize=8.5)
    return figure


def _device_of_this_worker() -> dict[str, object]:
    import os

    row: dict[str, object] = {
        "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES", "(not set)"),
        "CPU cores": describe_cores(os.sched_getaffinity(0)),
    }
    try:
        import rmm
        import torch
    except ImportError:
        return row | {"GPU": None, "memory resource": None}
    if not torch.cuda.is_available():
        return row | {"GPU": None, "memory resource": None}
    return row | {
        "GPU": torch.cuda.get_device_name(0),
        "memory resource": type(rmm.mr.get_current_device_resource()).__name__,
    }


def describe_cores(cores) -> str:
    """A set of CPU core numbers as ranges: ``{0, 1, 2, 3, 8}`` → ``"0-3,8"``."""
    spans: list[list[int]] = []
    for core in sorted(cores):
        if spans and core == spans[-1][1] + 1:
            spans[-1][1] = core
        else:
            spans.append([core, core])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in spans) or "(none)"


def worker_devices(client):
    """One row per worker, by name: the GPUs it may see (``CUDA_VISIBLE_DEVICES``; the first is its own), the CPU
    cores it may run on (``os.sched_getaffinity``: Dask-CUDA pins each worker to the cores near its GPU, and a
    copy from :func:`share_each_worker_s_device` keeps its original's), the name of its GPU and its RMM memory
    resource (a pandas DataFrame)."""
    import pandas as pd

    seen = client.run(_device_of_this_worker)
    names = {address: info["name"] for address, info in client.scheduler_info()["workers"].items()}
    rows = sorted(({"worker": names[address]} | row for address, row in seen.items()), key=lambda r: str(r["worker"]))
    return pd.DataFrame(rows).set_index("worker")


def task_stream_figure(records, *, title: str = "What each worker did"):
    """Draw the task stream (``distributed.get_task_stream``'s records): one row per worker, one bar per task
    from its start to its end, coloured by the task's function; returns the matplotlib Figure."""
    import matplotlib.pyplot as plt

    bars = _computations(records)
    origin = min(start for _, _, start, _ in bars)
    workers = sorted({worker for worker, *_ in bars})
    names = sorted({name for _, name, *_ in bars})
    colours = {name: plt.get_cmap("tab10")(k % 10) for k, name in enumerate(names)}
    figure, axes = plt.subplots(figsize=(8.8, 0.6 + 0.7 * len(workers)), layout="constrained")
    for worker, name, start, stop in bars:
        axes.barh(
            workers.index(worker),
            stop - start,
            left=start - origin,
            color=colours[name],
            height=0.6,
            edgecolor="white",
            linewidth=0.8,
        )
    axes.set_yticks(range(len(workers)), [f"worker {k}" for k in range(len(workers))])
    axes.invert_yaxis()
    axes.set_xlabel("seconds since the first task started")
    axes.set_title(title)
    handles = [plt.Rectangle((0, 0), 1, 1, color=colours[name]) for name in names]
    axes.legend(handles, names, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    return figure


_KEY_TOKEN = re.compile(r"-(?:[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}|[0-9a-f]+)(?:-\d+)?$")


def _task_name(key) -> str:
    """The function part of a Dask key, without its token and index: ``"beat_table-3f2a…-0"`` → ``beat_table``."""
    text = key[0] if isinstance(key, tuple) else str(key)
    return _KEY_TOKEN.sub("", text) or text
