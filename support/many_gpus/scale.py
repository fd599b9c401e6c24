"""Many ECG recordings on several workers with Dask: the code of chapter 7 (beyond one GPU).

The same code runs on a laptop's cores and on a machine's GPUs; only the cluster differs:

- :func:`make_cluster` starts ``dask_cuda.LocalCUDACluster`` on a GPU machine (one worker per GPU, each with its
  own RMM pool that cuDF, CuPy and PyTorch share: chapter 4's lesson applied per process) or
  ``distributed.LocalCluster`` on the CPU; :func:`worker_devices` shows which GPU each worker sees;
- :func:`write_recording` writes one synthetic recording (chapter 6's generator, one seed each, some with more
  anomalies) as a CSV, with its truth beside it, and returns its row of the metadata table;
- :func:`train_on_sample` trains one model for every recording, on beats sampled from a few of them;
- the per-recording work is two tasks, both where the data lives (the worker's GPU, or its CPU):
  :func:`read_recording` reads a CSV into the worker's memory, :func:`score_recording` runs chapter 6's stages
  on it to a score per beat, returned as a data frame that stays on the worker; :func:`beat_table` does both;
- :func:`recording_quality` judges one recording's scores against its truth, where the table lives;
- :func:`rank_recordings` joins every beat with its recording's metadata and ranks the recordings: a stage that
  needs the data of every recording at once (a shuffle between workers, or a broadcast of the small table);
- :func:`task_stream_figure` draws what each worker did and when, from the scheduler's task stream (the
  dashboard's "Task Stream" plot, as a figure for the page);
- :func:`read_everywhere` reads every recording, each worker its share (:func:`recordings_per_worker`);
- :func:`measure_stages` times the reading, the scoring and both rankings on one cluster (with the bytes sent
  between workers and each worker's load), :func:`scaling_table` sets two clusters side by side;
- :func:`cluster_diagram` draws the cluster;
- :func:`recording_size` tells Dask how many bytes a recording holds (its samples).
"""

from __future__ import annotations

import contextlib
import functools
import logging
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

#: The columns of :func:`beat_table`: one row per beat after the first of a recording.
BEAT_COLUMNS = ("recording", "sample", "time_s", "rr_s", "score", "flagged", "short_rr")

#: The columns of :func:`rank_recordings`, in order.
RANK_COLUMNS = ("recording", "ectopic_rate", "beats", "mean_bpm", "flagged_share", "short_rr_share")


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


def _frame(on: str, columns: dict):
    if on == "gpu":
        import cudf

        return cudf.DataFrame(columns)
    import pandas as pd

    return pd.DataFrame(columns)


def empty_beat_table(on: str = "cpu"):
    """A table with :data:`BEAT_COLUMNS` and no rows: the ``meta`` Dask needs to know the tables' types."""
    xp = _array_module(on)
    kinds = {"sample": xp.int64, "time_s": xp.float64, "rr_s": xp.float64, "score": xp.float32}
    columns = {"recording": []} | {name: xp.zeros(0, dtype=kind) for name, kind in kinds.items()}
    columns |= {"flagged": xp.zeros(0, dtype=xp.float32), "short_rr": xp.zeros(0, dtype=xp.float32)}
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


def score_recording(recording, model: GlobalModel, *, on: str = "cpu", meter=None):
    """Chapter 6's stages on a recording already in memory, where it lives: find and embed the beats, score them
    with ``model``; one row per beat after the first (cuDF on the GPU, pandas on the CPU).

    ``flagged`` is 1 where the score passes the model's threshold, ``short_rr`` where the interval before the
    beat is under 80 % of the recording's median (a premature beat); ``sample`` is the beat's R peak. A
    :class:`support.traffic.TrafficMeter` passed as ``meter`` records the copies of each stage.
    """
    from support.ecg import pipeline
    from support.interop import share

    xp = _array_module(on)
    stage = _stages(meter)
    name = Path(recording.source).stem
    with stage("beats"):
        found = pipeline.find_beats(recording.signal, pipeline.PipelineConfig(fs=model.fs, progress=False))
        if len(found) < 3:
            raise ValueError(f"{name}: fewer than three beats were found; is this an ECG sampled at {model.fs:g} Hz?")
    with stage("score"):
        scores = share(model.scores(pipeline.to_torch(found.matrix)), "cupy" if on == "gpu" else "numpy")
    with stage("table"):
        rr = xp.diff(found.peaks).astype(xp.float64) / model.fs
        columns = {
            "sample": found.peaks[1:].astype(xp.int64),
            "time_s": found.peaks[1:].astype(xp.float64) / model.fs,
            "rr_s": rr,
            "score": scores[1:],
            "flagged": (scores[1:] > model.threshold).astype(xp.float32),
            "short_rr": (rr < 0.8 * xp.median(rr)).astype(xp.float32),
        }
        table = _frame(on, columns)
        table.insert(0, "recording", name)
    return table


def beat_table(path, model: GlobalModel, *, on: str = "cpu", meter=None):
    """:func:`read_recording` then :func:`score_recording`: the recording at ``path`` as a table of scored beats
    (the ``meter``, if given, records the read as a stage of its own)."""
    stage = _stages(meter)
    with stage("read"):
        recording = read_recording(path, fs=model.fs, on=on)
    return score_recording(recording, model, on=on, meter=meter)


def recording_quality(table, folder) -> dict[str, object]:
    """How well the scores of one recording's :func:`beat_table` separate its anomalies from its normal beats,
    judged against the truth :func:`write_recording` left in ``folder``: chapter 6's measures
    (:func:`support.ecg.pipeline.evaluate_scores`: AUROC overall and per kind of anomaly, precision at the
    labelled rate) over every beat of the recording."""
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
    return {"recording": name, "beats": beats, "anomalies": anomalies} | quality


def rank_recordings(tables, metadata, *, on: str = "cpu", broadcast: bool = False):
    """Join every beat of ``tables`` (futures or delayed :func:`beat_table` results) with its recording's row of
    ``metadata`` and rank the recordings by their share of flagged beats, highest first (a pandas DataFrame).

    ``broadcast=False`` hash-partitions both sides by recording (a shuffle: each worker sends every beat row to
    the partition that owns its recording); ``broadcast=True`` sends the small metadata table, as one partition,
    to every beat partition instead, and no beat moves.
    """
    import dask.dataframe as dd

    if on == "gpu":
        import dask_cudf  # noqa: F401 - registers cuDF partitions with Dask DataFrame

    beats = dd.from_delayed(list(tables), meta=empty_beat_table(on), verify_meta=False)
    info = metadata[["recording", "ectopic_rate"]]
    if on == "gpu":
        import cudf

        info = cudf.from_pandas(info)
    # A one-partition table is joined to each beat partition where that partition lies (Dask's own choice for a
    # small table). Dask's broadcast join of a table in several partitions merges each beat partition with each
    # of them in separate tasks and gathers the pieces, which moves beat rows between workers after all.
    options = {} if broadcast else {"broadcast": False, "shuffle_method": "tasks"}
    right = dd.from_pandas(info, npartitions=1 if broadcast else 2)
    right = right.astype({"recording": beats.dtypes["recording"]})
    joined = beats.merge(right, on="recording", how="inner", **options)
    per_recording = joined.groupby(["recording", "ectopic_rate"]).agg(
        {"time_s": "count", "rr_s": "mean", "flagged": "mean", "short_rr": "mean"}
    )
    result = per_recording.compute()
    result = result.to_pandas() if hasattr(result, "to_pandas") else result
    result = result.reset_index().rename(
        columns={"time_s": "beats", "flagged": "flagged_share", "short_rr": "short_rr_share"}
    )
    result["mean_bpm"] = 60.0 / result.pop("rr_s")
    missing = sorted(set(metadata["recording"]) - set(result["recording"]))
    if len(result) != len(tables) or missing:
        raise ValueError(f"recordings without beats or metadata: {missing or 'some tables'}")
    ranked = result.sort_values(["flagged_share", "recording"], ascending=[False, True], ignore_index=True)
    return ranked[list(RANK_COLUMNS)]


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
    """Bytes the workers have sent one another so far (task results fetched by another worker), all together."""
    return sum(client.run(_sent_by_this_worker).values())


@dataclass
class ScalingRun:
    """The stages of the chapter timed on one cluster: their wall-clock timings, the bytes each ranking sent
    between workers (beside the size of all beat tables), and the ranking itself (to check that every cluster
    computes the same)."""

    workers: int
    timings: dict[str, object]  # stage -> support.bench.Timing
    sent: dict[str, int]
    ranking: object  # pandas DataFrame
    table_bytes: int  # the beat tables' size in memory, all together
    load: object  # pandas DataFrame: each worker's tasks in the last timed read and score (worker_load)


#: The stages :func:`measure_stages` times, in order. Each "on the workers" line is the stage above it seen from the
#: workers: from the start of its first task to the end of its last, without the notebook's part (sending the
#: tasks, hearing back).
STAGES = (
    "read every recording",
    "  read: on the workers",
    "score every recording",
    "  score: on the workers",
    "rank: shuffle",
    "rank: broadcast",
)


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


def worker_load(records):
    """Each worker's share of a task stream: how many tasks it computed, their median duration, and the time from
    its first start to its last end (a pandas DataFrame, workers in address order as "worker 0", "worker 1"…)."""
    import pandas as pd

    found = pd.DataFrame(_computations(records), columns=["worker", "function", "start", "stop"])
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


def measure_stages(client, paths, model: GlobalModel, metadata, *, on: str = "cpu", warmup: int = 1, repeat: int = 5):
    """Time each of :data:`STAGES` on ``client``'s cluster with the wall clock (``warmup`` untimed runs, then
    ``repeat`` timed ones): every recording read (:func:`read_everywhere`) until all are in memory, then every
    recording scored (:func:`score_recording`, one task each, where its recording lives; the model travels
    with each task) until every table is done, then the tables ranked with their metadata by a shuffle and by
    a broadcast (:func:`rank_recordings`). Returns a :class:`ScalingRun`."""
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

    recordings = read()
    timings = {STAGES[0]: time_wall(read, label=STAGES[0], warmup=warmup, repeat=repeat)}

    def score():
        return streamed("score", lambda: client.map(score_recording, recordings, model=model, on=on, pure=False))

    timings[STAGES[2]] = time_wall(score, label=STAGES[2], warmup=warmup, repeat=repeat)
    for kind, label in (("read", STAGES[1]), ("score", STAGES[3])):
        timed = streams[kind][-repeat:]
        timings[label] = Timing(label, tuple(busy_span(records) for records in timed), "wall")
    load = pd.concat({kind: worker_load(streams[kind][-1]) for kind in streams}, names=["stage", "worker"])
    tables = score()
    sent = {}
    for stage, broadcast in zip(STAGES[4:], (False, True), strict=True):
        rank = functools.partial(rank_recordings, tables, metadata, on=on, broadcast=broadcast)
        before = bytes_between_workers(client)
        rank()
        sent[stage] = bytes_between_workers(client) - before
        timings[stage] = time_wall(rank, label=stage, warmup=warmup, repeat=repeat)
    table_bytes = sum(client.gather(client.map(_table_bytes, tables)))
    workers = len(client.scheduler_info()["workers"])
    return ScalingRun(
        workers, {s: timings[s] for s in STAGES}, sent, rank_recordings(tables, metadata, on=on), int(table_bytes), load
    )


def _table_bytes(table) -> int:
    return int(table.memory_usage(deep=True).sum())


def scaling_table(one: ScalingRun, more: ScalingRun):
    """The stages side by side on two clusters (median times, and how much faster the larger one is), and the
    bytes each ranking sent between workers on the larger one; a pandas DataFrame."""
    import pandas as pd

    from support.bench import format_ratio, format_seconds
    from support.units import describe_bytes

    rows = []
    for stage in STAGES:
        few, many = one.timings[stage].median, more.timings[stage].median
        sent = describe_bytes(more.sent[stage]) if stage in more.sent else ""
        rows.append(
            {
                "stage": stage,
                f"{one.workers} worker{'s' * (one.workers > 1)}": format_seconds(few),
                f"{more.workers} workers": format_seconds(many),
                "speed-up": format_ratio(few / many),
                f"sent between workers ({more.workers})": sent,
            }
        )
    return pd.DataFrame(rows).set_index("stage")


def make_cluster(
    kind: str = "cpu",
    *,
    workers: int | None = None,
    rmm_pool_size: str | None = "4GB",
    work_stealing: bool = False,
    **options,
):
    """A local Dask cluster: ``"gpu"`` is ``dask_cuda.LocalCUDACluster`` (one worker per visible GPU, or on the
    first ``workers`` of them, each with an RMM pool of ``rmm_pool_size`` that cuDF, CuPy and PyTorch allocate from),
    ``"cpu"`` a ``distributed.LocalCluster`` of ``workers`` single-threaded processes. ``options`` go to the
    cluster as they are. Returns the cluster; ``distributed.Client(cluster)`` connects to it.

    Work stealing (the scheduler moving a queued task, and the data it needs, to an idle worker) is off unless
    ``work_stealing``: here every task is placed where its recording lives, and moving a recording between GPUs
    costs more than scoring it."""
    import dask

    # Worker and scheduler log lines (a heartbeat missed while a cluster closes, a shuffle's progress) would land
    # in the notebook's output; a task's failure still reaches the client as its exception.
    options = {"silence_logs": logging.CRITICAL} | options
    if kind == "gpu":
        from dask_cuda import LocalCUDACluster

        if rmm_pool_size:
            options |= {"rmm_pool_size": rmm_pool_size, "rmm_allocator_external_lib_list": ["cupy", "torch"]}
        # fewer workers than GPUs: the first ``workers`` GPUs get one each, and every worker still sees all GPUs
        # (its own first), so a process on a smaller cluster runs in the same conditions as on a larger one
        start = functools.partial(LocalCUDACluster, n_workers=workers, **options)
    elif kind == "cpu":
        from distributed import LocalCluster

        options = {"threads_per_worker": 1, "processes": True, "dashboard_address": None} | options
        start = functools.partial(LocalCluster, n_workers=workers or 2, **options)
    else:
        raise ValueError(f"kind must be 'gpu' or 'cpu', not {kind!r}")
    with dask.config.set({"distributed.scheduler.work-stealing": work_stealing}):  # read when the scheduler starts
        return start()


def cluster_diagram(workers: int = 2):
    """Chapter 7's cluster: the client hands tasks to the scheduler, which gives each recording to a free worker;
    each worker owns one GPU and its RMM pool; the ranking's shuffle moves rows between workers."""
    from support.figures import arrow, box, canvas

    figure, axes = canvas(26, 11, size=(11, 4.4))
    box(axes, 0.3, 8.4, 5.6, 2.0, "client\n(this notebook)", "#f3f3f3", size=9)
    box(axes, 8.6, 8.4, 6.0, 2.0, "scheduler\nwho does which task", "#f3f3f3", size=9)
    arrow(axes, (5.9, 9.4), (8.6, 9.4), "tasks", size=8)
    width = 10.8
    for k in range(workers):
        x = 0.3 + k * (width + 3.6)
        box(axes, x, 0.4, width, 5.8, "", "#e8eef7")
        axes.text(x + 0.3, 5.7, f"worker {k}: one process, CUDA_VISIBLE_DEVICES={k},…", fontsize=8.5, va="top")
        box(axes, x + 0.4, 2.9, 4.6, 2.0, "beat_table\nrecording after\nrecording", "white", size=8)
        box(axes, x + 5.8, 2.9, 4.6, 2.0, f"GPU {k}\nits RMM pool:\ncuDF, CuPy, PyTorch", "#dfeedd", size=8)
        arrow(axes, (x + 5.0, 3.9), (x + 5.8, 3.9), color="#55a868", offset=(0, 0.15))
        box(axes, x + 0.4, 0.8, 10.0, 1.4, "its beat tables stay here (futures)", "white", size=8)
        arrow(axes, (11.6, 8.4), (x + width / 2, 6.2), color="#4c72b0")
    arrow(axes, (0.3 + width, 1.5), (0.3 + width + 3.6, 1.5), "shuffle", color="#c44e52", offset=(-0.4, 0.25))
    note = "a recording goes to whichever worker\nis free; its samples never leave that GPU"
    axes.text(16.2, 9.1, note, fontsize=8.5)
    return figure


def _device_of_this_worker() -> dict[str, object]:
    import os

    row: dict[str, object] = {"CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES", "(not set)")}
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


def worker_devices(client):
    """One row per worker, by name: the GPUs it may see (``CUDA_VISIBLE_DEVICES``; the first is its own), the
    name of its GPU and its RMM memory resource (a pandas DataFrame)."""
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
