"""A recording scored where it lives: its beats as a table, three scores each, judged against its truth.

- :func:`score_recording` runs chapter 6's stages on a recording already in memory, fine-tunes a copy of the
  global model on its beats (:func:`support.many_gpus.models.fine_tune`) and scores every beat three ways (the
  global model, the fine-tuned one, the RR-prematurity score): a table with :data:`BEAT_COLUMNS` that stays on the
  worker; :func:`score_everywhere` hands one such task per recording to the cluster; :func:`beat_table` reads and
  scores in one call;
- :func:`recording_quality` judges one table's scores against the recording's truth, where the table lives, and
  :func:`fine_tuning_effect` says what fine-tuning did to the ectopic beats' AUROC on a group of recordings;
- :func:`beat_table_traffic` meters the host↔GPU copies of each stage; :func:`table_bytes` sizes a table.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np
import pandas as pd

from support.ecg.baselines import rr_prematurity
from support.ecg.beats import true_labels_of
from support.interop import share
from support.many_gpus.models import GlobalModel, fine_tune
from support.many_gpus.recordings import array_module, read_recording, truth_path
from support.traffic import TrafficMeter

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


def _frame(on: str, columns: dict):
    if on == "gpu":
        import cudf

        return cudf.DataFrame(columns)
    return pd.DataFrame(columns)


def empty_beat_table(on: str = "cpu"):
    """A table with :data:`BEAT_COLUMNS` and no rows: the ``meta`` Dask needs to know the tables' types."""
    xp = array_module(on)
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
    from support.ecg import pipeline  # noqa: PLC0415  # support.ecg.pipeline imports PyTorch at its top (through vae)

    xp = array_module(on)
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
    from support.ecg.pipeline import evaluate_scores  # noqa: PLC0415  # support.ecg.pipeline imports PyTorch at its top (through vae)

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


def fine_tuning_effect(quality, name: str) -> str:
    """One line on what fine-tuning did on the recordings of ``quality`` (rows of :func:`recording_quality`, a
    pandas DataFrame): the fine-tuned model's AUROC of ectopic against normal beats minus the global model's, its
    median and range over the recordings, and on how many of them fine-tuning lowered it. ``name`` starts the line
    and says which recordings they are (called once for the group in question and once for its control).

    >>> rows = pd.DataFrame({"ectopic: global model": [0.70, 0.60, 0.65]})
    >>> rows["ectopic: fine-tuned model"] = [0.75, 0.55, 0.70]
    >>> fine_tuning_effect(rows, "ectopic-heavy")
    'ectopic-heavy: median +0.050, from -0.050 to +0.050; lowered on 1 of 3'
    """
    tuned, untuned = (quality[f"ectopic: {SCORERS[column]}"] for column in ("tuned_score", "score"))
    difference = tuned - untuned
    if difference.empty or difference.isna().any():
        missing = int(difference.isna().sum())
        raise ValueError(
            f"{name}: {len(difference)} recordings, {missing} without an ectopic AUROC; give recordings whose "
            "ectopic beats recording_quality judged"
        )
    return (
        f"{name}: median {difference.median():+.3f}, from {difference.min():+.3f} to {difference.max():+.3f}; "
        f"lowered on {int((difference < 0).sum())} of {len(difference)}"
    )


def beat_table_traffic(path, model: GlobalModel, *, on: str = "gpu") -> dict[str, object]:
    """The host↔GPU copies of each stage of :func:`beat_table` on the recording at ``path``, as a
    :class:`support.traffic.TrafficMeter` records them in the process that runs it.

    On a worker, run it with ``client.run(..., workers=[address])``, in the worker's main thread: the profiler
    under the meter refuses to start in a thread other than the one that loaded it (a task's thread)."""
    meter = TrafficMeter()
    beat_table(path, model, on=on, meter=meter)
    return meter.stages


def table_bytes(table) -> int:
    """The bytes a beat table holds in memory (all its columns, strings included)."""
    return int(table.memory_usage(deep=True).sum())
