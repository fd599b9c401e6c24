"""The recordings of chapter 7: written by the workers, read where they are dealt, and sized for Dask.

- :func:`recording_specs` and :class:`RecordingSpec`: which synthetic recordings (chapter 6's generator, one seed
  each, every third with three times the ectopic beats), and :func:`ectopic_heavy`, which of them those are;
- :func:`write_recording` writes one as a CSV with its truth beside it (:func:`truth_path`), and
  :func:`write_recordings` all of them (one task each on a cluster);
- :func:`read_recording` reads one into a worker's memory (its GPU with ``on="gpu"``), and :func:`read_everywhere`
  reads every one, each worker its share (:func:`recordings_per_worker`), pinned there;
- :func:`recording_size` tells Dask how many bytes a recording holds (its samples);
- :func:`array_module` is CuPy for ``"gpu"`` and NumPy for ``"cpu"``, the switch every module here uses.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from support.ecg import reading, synthetic

ECTOPIC_RATE = 0.02  # the share of ectopic beats in most recordings
ECTOPIC_HEAVY_RATE = 3 * ECTOPIC_RATE  # every third recording's


@dataclass(frozen=True)
class RecordingSpec:
    """One synthetic recording: its seed, length and anomaly rates (chapter 6's generator)."""

    seed: int
    hours: float
    ectopic_rate: float = ECTOPIC_RATE
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
    rates = [ECTOPIC_HEAVY_RATE if k % 3 == 0 else ECTOPIC_RATE for k in range(count)]
    return [RecordingSpec(seed + k, hours, ectopic_rate=rate) for k, rate in enumerate(rates)]


def ectopic_heavy(ectopic_rates):
    """Which recordings have more ectopic beats than most (``ectopic_rates``: a pandas Series of
    :attr:`RecordingSpec.ectopic_rate`, as the metadata of :func:`write_recordings` holds them): a boolean Series.

    >>> import pandas as pd
    >>> ectopic_heavy(pd.Series([0.06, 0.02, 0.02])).tolist()
    [True, False, False]
    """
    return ectopic_rates > (ECTOPIC_RATE + ECTOPIC_HEAVY_RATE) / 2  # between the two: a rate read back may round


def array_module(on: str):
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
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    ecg = synthetic.synthesize(
        hours=spec.hours,
        fs=fs,
        seed=spec.seed,
        xp=array_module(on),
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
    if client is None:
        rows = [write_recording(spec, folder, fs=fs, on=on) for spec in specs]
    else:
        rows = client.gather(client.map(write_recording, specs, folder=str(folder), fs=fs, on=on, pure=False))
    return [Path(folder) / f"{spec.name}.csv" for spec in specs], pd.DataFrame(rows)


def read_recording(path, *, fs: float = 250.0, on: str = "cpu"):
    """Read the recording at ``path`` into this process's memory (its GPU with ``on="gpu"``: cuDF parses the
    CSV there) and check that it is long enough: a :class:`support.ecg.reading.Recording`. On a cluster the
    result stays on the worker that read it, as a future, until a task there uses it."""
    from support.ecg import pipeline  # noqa: PLC0415  # support.ecg.pipeline imports PyTorch at its top (through vae)

    recording = reading.read_signal(path, on=on)
    pipeline.check_length(recording.signal, fs)
    return recording


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
    sizeof.register(reading.Recording)(recording_size)


_register_recording_size()


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
