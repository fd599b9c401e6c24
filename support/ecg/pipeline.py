"""The ECG pipeline, stage by stage, on the GPU (cuDF, CuPy, Numba, PyTorch) or on the CPU (pandas, NumPy and
SciPy, Numba, PyTorch) with the same functions.

======================  ==========================================================================
stage                   what happens
======================  ==========================================================================
read                    the CSV into memory (cuDF on the GPU, pandas on the CPU), gaps repaired
convolve                Ricker-wavelet response and baseline removal, both through the FFT
gate                    threshold and non-maximum suppression (Numba kernel): beat candidates
lengths                 RR intervals between candidates (``diff``)
embed                   plausibility pruning and embedding into a beats × width matrix (Numba kernels)
to torch                the matrix handed to PyTorch (DLPack, no copy)
train                   the variational autoencoder on 75 % of the beats
score                   reconstruction error of the other 25 %
======================  ==========================================================================

:func:`run_pipeline` runs them in order and reports each stage's time (the GPU waited for), the peak GPU
memory it allocated (with :func:`support.memory.use_one_pool`) and, given a
:class:`support.traffic.TrafficMeter`, the bytes it copied between host and GPU.
"""

from __future__ import annotations

import contextlib
import functools
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from support import bench
from support.arrays import array_module, synchronize, to_host
from support.bench import format_ratio, format_seconds
from support.ecg import baselines, detection, kernels, metrics, reading, vae
from support.ecg import beats as beat_tools
from support.ecg.synthetic import KINDS, NORMAL, is_ectopic
from support.interop import share
from support.memory import MemoryUse, memory_scope, pools
from support.units import describe_bytes

STAGES = ("read", "convolve", "gate", "lengths", "embed", "to torch", "train", "score")
#: The stages both sides run with the same algorithm; the GPU/CPU comparison covers these.
SHARED_STAGES = ("read", "convolve", "gate", "embed")
MIN_SECONDS = 10.0


@dataclass(frozen=True)
class PipelineConfig:
    """Settings of one run. ``fs`` is the sampling rate of the CSV (a CSV does not carry it)."""

    fs: float = 250.0
    refractory_s: float = 0.2  # the suppression window reaches this far on each side of a peak
    limits: beat_tools.RRLimits = beat_tools.RRLimits()
    train_fraction: float = 0.75
    # Few epochs: chapter 6's model selection scores validation beats after every epoch and prints the epoch
    # it keeps beside this default; each epoch is training time.
    epochs: int = 4
    batch_size: int = 4096  # fewer, fuller steps: at 512 beats a step is launch-bound (chapter 6)
    latent: int = 2  # a narrow bottleneck: rare shapes (ectopic beats) stay hard to reconstruct
    seed: int = 0
    progress: bool = True
    #: Train with the step captured as a CUDA graph where PyTorch allocates on its own (vae.graph_ready); False
    #: trains eagerly everywhere.
    graph: bool = True

    def __post_init__(self):
        detection.ricker(self.fs)  # refuses a sampling rate at which the QRS wavelet has no shape
        if not 0 < self.train_fraction < 1:
            raise ValueError(f"train_fraction must lie strictly between 0 and 1, not {self.train_fraction}")
        if self.epochs < 1 or self.batch_size < 1:
            raise ValueError(f"need at least one epoch and a batch of at least 1, got {self.epochs}, {self.batch_size}")

    @property
    def half_window(self) -> int:
        return max(1, round(self.refractory_s * self.fs))


@dataclass
class StageReport:
    """One stage of one run."""

    name: str
    seconds: float
    memory: MemoryUse


@dataclass
class StageLog:
    """Times every stage (waiting for the GPU at its end), counts its memory and, with a meter, its copies."""

    meter: object = None  # support.traffic.TrafficMeter
    reports: list[StageReport] = field(default_factory=list)

    @contextlib.contextmanager
    def stage(self, name: str):
        traffic = self.meter.stage(name) if self.meter is not None else contextlib.nullcontext()
        with traffic, memory_scope() as memory, _pytorch_scope() as own:
            synchronize()
            start = time.perf_counter()
            yield
            synchronize()
            seconds = time.perf_counter() - start
        # PyTorch on its own allocator (use_one_pool(pytorch=False)) is counted by PyTorch, not RMM: add it. The two
        # peaks need not fall at the same moment, so their sum is an upper bound of the stage's combined peak.
        memory = MemoryUse(memory.peak_bytes + own.peak_bytes, memory.held_after + own.held_after)
        self.reports.append(StageReport(name, seconds, memory))

    def rows(self) -> list[dict[str, str]]:
        """One row per stage: its time, the memory it allocated at its peak, and what was held after it."""
        return [
            {
                "stage": r.name,
                "time": format_seconds(r.seconds),
                "peak allocated": describe_bytes(r.memory.peak_bytes),
                "held after": describe_bytes(r.memory.held_after),
            }
            for r in self.reports
        ]


@contextlib.contextmanager
def _pytorch_scope():
    """Like :func:`support.memory.memory_scope`, for PyTorch's own caching allocator: the peak of the tensors a
    block allocated (above what was allocated when it began) and what is allocated at its end. Zero when
    PyTorch has not used CUDA yet or allocates through RMM (then RMM's statistics count its tensors). It resets
    PyTorch's peak statistics of the current device (``torch.cuda.reset_peak_memory_stats()`` with no device,
    as its documentation says): a caller's own ``max_memory_allocated`` of that device, read across a stage,
    sees only the peak since the stage began."""
    use = MemoryUse()
    torch = sys.modules.get("torch")
    counting = (
        torch is not None and torch.cuda.is_available() and torch.cuda.is_initialized() and not pools.pytorch_on_rmm()
    )
    if counting:
        before = torch.cuda.memory_allocated()
        torch.cuda.reset_peak_memory_stats()
    try:
        yield use
    finally:
        if counting:
            use.peak_bytes = max(0, torch.cuda.max_memory_allocated() - before)
            use.held_after = torch.cuda.memory_allocated()


def check_length(signal, fs: float) -> None:
    """Refuse a signal too short to hold a few beats and the windows of the pipeline."""
    seconds = len(signal) / fs
    if seconds < MIN_SECONDS:
        raise reading.SignalError(
            f"the signal lasts {seconds:.2f} s ({len(signal)} samples at {fs:g} Hz); the pipeline needs at least "
            f"{MIN_SECONDS:g} s to find beats and their intervals"
        )


def convolve(signal, fs: float):
    """The Ricker-wavelet response (for finding beats) and the signal without baseline wander (for embedding)."""
    xp = array_module(signal)
    response = detection.fft_convolve_same(signal, detection.ricker(fs, xp=xp))
    return response, detection.remove_baseline(signal, fs)


def find_candidates(response, config: PipelineConfig):
    """Sample positions (int64) where the non-maximum-suppression gate opens."""
    xp = array_module(response)
    threshold = detection.peak_threshold(response)
    gate = kernels.peak_gate(response, half_window=config.half_window, threshold=threshold)
    return xp.flatnonzero(gate)


def find_beats(signal, config: PipelineConfig) -> beat_tools.Beats:
    """The stages from a signal to its embedded beats, where the signal lives: convolve, gate, prune, embed
    (what :func:`run_from_signal` does stage by stage, for code that needs the beats and not the log)."""
    response, clean = convolve(signal, config.fs)
    return beat_tools.extract_beats(clean, find_candidates(response, config), config.fs, limits=config.limits)


def beat_lengths(candidates):
    """Samples between consecutive candidates: the RR intervals, where each candidate is a beat."""
    return array_module(candidates).diff(candidates)


def to_torch(matrix):
    """The beats as a PyTorch tensor over the same memory (DLPack, on either side); raises if a copy would be
    needed."""
    return share(matrix, "torch")


def split(count: int, fraction: float, seed: int, device) -> tuple:
    """A random split of ``count`` rows into training and test rows, on ``device``."""
    import torch

    # drawn on the host with NumPy, so that a seed gives the same split on either side
    order = torch.as_tensor(np.random.default_rng(seed).permutation(count), device=device)
    cut = int(round(fraction * count))
    if cut < 2 or cut >= count:
        raise reading.SignalError(f"{count} beats are too few to split into training and test sets")
    return order[:cut], order[cut:]


@dataclass
class PipelineResult:
    """Everything a run produced, where it lives (GPU arrays on the GPU), and its stage log."""

    config: PipelineConfig
    recording: reading.Recording
    response: object
    clean: object
    candidates: object
    lengths: object
    beats: beat_tools.Beats
    tensor: object
    train_rows: object
    test_rows: object
    training: vae.Training
    scores: object
    log: StageLog


def run_pipeline(path, config: PipelineConfig = PipelineConfig(), *, on: str = "gpu", log: StageLog | None = None):
    """Run every stage on ``on`` ("gpu" or "cpu") from the CSV at ``path`` to anomaly scores."""
    log = log or StageLog()
    with log.stage("read"):
        recording = reading.read_signal(Path(path), on=on)
        check_length(recording.signal, config.fs)
    return run_from_signal(recording, config, log=log)


def run_from_signal(recording: reading.Recording, config: PipelineConfig, *, log: StageLog | None = None):
    """The stages after ``read``, for a signal already in memory (a WFDB record, a synthetic one)."""
    log = log or StageLog()
    signal = recording.signal
    check_length(signal, config.fs)
    with log.stage("convolve"):
        response, clean = convolve(signal, config.fs)
    with log.stage("gate"):
        candidates = find_candidates(response, config)
    with log.stage("lengths"):
        lengths = beat_lengths(candidates)
    with log.stage("embed"):
        beats = beat_tools.extract_beats(clean, candidates, config.fs, limits=config.limits)
        if len(beats) < 8:
            raise reading.SignalError(
                f"only {len(beats)} plausible beats were found in {len(signal) / config.fs:.1f} s; is this an ECG "
                f"sampled at {config.fs:g} Hz?"
            )
    with log.stage("to torch"):
        tensor = to_torch(beats.matrix)
    with log.stage("train"):
        train_rows, test_rows = split(len(beats), config.train_fraction, config.seed, tensor.device)
        training = vae.train(
            tensor[train_rows],
            latent=config.latent,
            epochs=config.epochs,
            batch_size=config.batch_size,
            seed=config.seed,
            progress=config.progress,
            graph=None if config.graph else False,
        )
    with log.stage("score"):
        scores = vae.anomaly_scores(training.model, tensor[test_rows])
    return PipelineResult(
        config,
        recording,
        response,
        clean,
        candidates,
        lengths,
        beats,
        tensor,
        train_rows,
        test_rows,
        training,
        scores,
        log,
    )


def evaluate_scores(scores, labels) -> dict[str, float]:
    """AUROC and precision at the labelled rate of anomaly ``scores`` against ground-truth ``labels`` (0 = normal),
    and each kind of anomaly's AUROC against the normal beats alone (:func:`support.ecg.metrics.separation`)."""
    labels = np.asarray(labels)
    scores = np.asarray(scores)
    anomalous = labels != 0
    quality = {
        "test_beats": int(len(anomalous)),
        "test_anomalies": int(anomalous.sum()),
        "auroc": metrics.auroc(scores, anomalous),
        "precision_at_rate": metrics.precision_at_rate(scores, anomalous),
    }
    groups = {name: labels == label for label, name in KINDS.items() if label != NORMAL}
    groups["ectopic"] = is_ectopic(labels)  # S, V and F together
    for name, scored in metrics.separation(scores, groups, labels == NORMAL).items():
        quality[f"auroc {name} vs normal"] = scored["AUROC"]
    return quality


#: The key of :func:`evaluate` whose AUROC names the best method: the ectopic beats (S, V, F) against the normal.
BEST_BY = "auroc ectopic vs normal"


def baseline_scores(result: PipelineResult) -> dict[str, object]:
    """The training-free methods of chapter 6's baseline table on a run's test rows, fitted on its training rows
    with no labels: the RR prematurity score, PCA with the VAE's bottleneck (``config.latent`` components) and
    the distance to the median training beat (torch tensors, on the beats' device)."""
    rows, test = result.tensor, result.test_rows
    fit = rows[result.train_rows]
    return {
        "RR prematurity": baselines.rr_prematurity(result.beats.peaks, result.config.fs)[test],
        "PCA": baselines.PCABaseline.fit(fit, result.config.latent).scores(rows[test]),
        "median distance": baselines.median_distance(fit, rows[test]),
    }


def evaluate(result: PipelineResult, r_peaks: np.ndarray, labels: np.ndarray) -> dict[str, object]:
    """Detection and scoring quality of a run against the ground truth (on the host, after the pipeline).

    The top-level scores are the VAE's (the pipeline's own) on the test beats; ``"baselines"`` holds the same
    scores for each of :func:`baseline_scores`. ``"best_method"`` names the method, the VAE included, with the
    highest AUROC of the ectopic beats against the normal ones on one half of the test beats (drawn with the
    run's seed), and ``"best_method " + BEST_BY`` gives its AUROC on the other half, which played no part in the
    choice: the score to quote beside the VAE's. With too few ectopic beats to pick on, ``"best_method"`` is
    None and ``"best_method_note"`` says why.
    """
    peaks = to_host(result.beats.peaks)
    test_rows = result.test_rows.cpu().numpy()
    truth = beat_tools.true_labels_of(peaks[test_rows], r_peaks, labels)
    tolerance = max(1, round(0.05 * result.config.fs))
    vae_scores = result.scores.cpu().numpy()
    quality = {
        "beats_true": int(len(r_peaks)),
        "beats_detected": int(len(peaks)),
        "detected_within_50ms": beat_tools.match_rate(peaks, r_peaks, tolerance),
    } | evaluate_scores(vae_scores, truth)
    others = {name: scores.detach().cpu().numpy() for name, scores in baseline_scores(result).items()}
    report = quality | {"baselines": {name: evaluate_scores(scores, truth) for name, scores in others.items()}}
    order = np.random.default_rng(result.config.seed).permutation(len(truth))
    pick_rows, report_rows = order[: len(order) // 2], order[len(order) // 2 :]
    try:
        pick = baselines.pick_on_validation({"VAE": vae_scores} | others, truth, pick_rows, report_rows)
    except ValueError as error:
        return report | {"best_method": None, "best_method_note": str(error)}
    return report | {
        "best_method": pick.method,
        f"best_method {BEST_BY}": pick.test,
        "best_method_note": "picked on half of the test beats, scored on the other half",
    }


#: The sides :func:`time_shared_stages` can time: the GPU, the CPU code a reader writes first (the pipeline's own
#: functions on NumPy arrays), and the fastest CPU tools for each stage (:mod:`support.ecg.cpu_peers`).
SIDES = ("gpu", "cpu", "cpu, fastest")


def stage_clock(on: str):
    """The timer of the speed table's rows on ``on``, one of :data:`SIDES`: the wall clock on every side
    (:func:`support.bench.time_wall`), so that each of the table's GPU-against-CPU ratios is one clock's. On the
    GPU each call is followed, inside the timing, by a wait for every stream of the device
    (:func:`support.arrays.synchronize`, CuPy's ``Device.synchronize``): a GPU figure is what a program waits for
    the work it queued, launches included.

    >>> stage_clock("cpu") is bench.time_wall
    True
    """
    if on not in SIDES:
        raise ValueError(f"on must be one of {', '.join(map(repr, SIDES))}, not {on!r}")
    if on != "gpu":
        return bench.time_wall
    import cupy  # noqa: F401, PLC0415 - synchronize waits through CuPy, which a GPU timing needs loaded

    return functools.partial(bench.time_wall, sync=synchronize)


def time_shared_stages(path, config: PipelineConfig, *, on: str, warmup: int = 2, repeat: int = 5) -> dict:
    """Time each stage of :data:`SHARED_STAGES` on one of :data:`SIDES`, with :func:`stage_clock` (the wall
    clock on every side, on the GPU up to the device's end of the work).

    Each stage is fed the output of the one before, made once outside the timing.
    """
    clock = stage_clock(on)

    def timed(fn, label):
        return clock(fn, label=label, warmup=warmup, repeat=repeat)

    # SciPy's signal module comes with the CPU tools: a run of the pipeline itself never imports it
    from support.ecg import cpu_peers  # noqa: PLC0415

    fastest = on == "cpu, fastest"
    read = (lambda: cpu_peers.read_signal(path)) if fastest else (lambda: reading.read_signal(path, on=on))
    stage_convolve = cpu_peers.convolve if fastest else convolve
    fs = config.fs
    timings = {"read": timed(read, "read")}
    signal = read().signal
    timings["convolve"] = timed(lambda: stage_convolve(signal, fs), "convolve")
    response, clean = stage_convolve(signal, fs)
    timings["gate"] = timed(lambda: find_candidates(response, config), "gate")
    candidates = find_candidates(response, config)
    timings["embed"] = timed(lambda: beat_tools.extract_beats(clean, candidates, fs, limits=config.limits), "embed")
    return timings


@dataclass(frozen=True)
class StageSpeedup:
    """One shared stage (or the total): the two CPU sides scaled to the whole signal, the GPU, the ratios."""

    stage: str
    cpu_familiar: float
    cpu_fastest: float
    gpu: float

    @property
    def label(self) -> str:
        """What the figure calls this row: the stage."""
        return self.stage

    @property
    def speedup(self) -> float:
        """GPU against the familiar CPU code."""
        return self.cpu_familiar / self.gpu

    @property
    def honest_speedup(self) -> float:
        """GPU against the fastest CPU code: the figure the chapter quotes."""
        return self.cpu_fastest / self.gpu

    def row(self) -> dict[str, str]:
        return {
            "stage": self.stage,
            "CPU familiar": format_seconds(self.cpu_familiar),
            "CPU fastest": format_seconds(self.cpu_fastest),
            "GPU": format_seconds(self.gpu),
            "vs familiar": format_ratio(self.speedup),
            "vs fastest": format_ratio(self.honest_speedup),
        }


def stage_speedups(
    familiar: dict, fastest: dict, gpu: dict, cpu_scale: float = 1.0, extra: tuple = ()
) -> list[StageSpeedup]:
    """One entry per shared stage, the ``extra`` entries (a training row, say), and a total of them all; the CPU
    medians are multiplied by ``cpu_scale`` (1 when the CPU sides ran on the whole signal).

    A CPU side that is slower than the familiar code at some stage keeps its own time there: "fastest" is the
    side's name, and the table shows what it measured.
    """
    if not (list(familiar) == list(fastest) == list(gpu)):
        raise ValueError(f"the three sides timed different stages: {list(familiar)}, {list(fastest)}, {list(gpu)}")
    entries = [
        StageSpeedup(stage, familiar[stage].median * cpu_scale, fastest[stage].median * cpu_scale, gpu[stage].median)
        for stage in gpu
    ]
    entries += list(extra)
    total = StageSpeedup(
        "total", *(sum(getattr(e, side) for e in entries) for side in ("cpu_familiar", "cpu_fastest", "gpu"))
    )
    return [*entries, total]


def scale_factor(full_samples: int, subset_samples: int) -> float:
    """How much longer the full signal is than a subset timed on the CPU (the CPU figure is scaled by it)."""
    if subset_samples <= 0 or full_samples < subset_samples:
        raise ValueError(f"a subset of {subset_samples} samples cannot stand for {full_samples}")
    return full_samples / subset_samples


def write_head(path, out, seconds: float, fs: float) -> int:
    """Copy the first ``seconds`` of a one-value-per-line CSV to ``out``; returns the lines copied."""
    lines = math.ceil(seconds * fs)
    with open(path) as source, open(out, "w") as target:
        for count, line in enumerate(source):
            if count >= lines:
                return count
            target.write(line)
    return count + 1
