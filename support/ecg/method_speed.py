"""What the best answer costs on each side: read to anomaly scores with one training-free method of the
baseline table, on the GPU and on the fastest CPU route.

Chapter 6's baseline table (:mod:`support.ecg.baselines`) finds that methods with no neural network, the RR
prematurity score and PCA, rank the ectopic beats better than the VAE the pipeline trains. A speed-up measured
on the VAE's training then says what the GPU does for the weakest method. This module times the other path:

- :func:`beats_on` runs the shared stages on one side: on the GPU the pipeline's own (cuDF, CuPy, Numba), on
  the CPU the fastest route of :mod:`support.ecg.cpu_peers` (Polars read, threaded overlap-add convolution,
  the Numba kernels compiled for every core);
- :func:`method_scores` scores every beat with one of :data:`TRAINING_FREE` (PyTorch on the beats' device:
  every core on the CPU), fitted on the same training rows the pipeline uses;
- :func:`time_method` times that scoring on one side (the wall clock on both, on the GPU up to the device's end
  of the work), the beats made once outside the timing, as :func:`support.ecg.pipeline.time_shared_stages`
  times each stage;
- :func:`pick_training_free` picks the method on the validation rows (:func:`support.ecg.baselines.pick_on_validation`)
  and reports its score on the test rows, which play no part in the pick;
- :func:`time_training` times the VAE's training on one side, with repeats, for the read-to-trained-VAE path;
- :func:`speedup_rows` puts both paths in one table: the shared stages, the VAE's training, the method's
  scoring, and a total for each path; :func:`repeat_ranges` gives the repeats behind each of its medians;
- :func:`faster_cpu_per_stage` is the CPU control of a total: each shared stage on whichever CPU side timed it
  faster, so a stage where the "fastest" route came out slower does not flatter the GPU.

>>> import numpy as np
>>> labels = np.array([0, 0, 0, 1] * 2)  # rows 0-3 validate, rows 4-7 test
>>> scores = {"VAE": np.arange(8.0), "PCA": np.array([0, 1, 2, 3, 3, 2, 1, 0.0]), "RR prematurity": np.zeros(8)}
>>> pick = pick_training_free(scores, labels, np.arange(4), np.arange(4, 8))
>>> pick.method, pick.validation, pick.test, sorted(pick.candidates)
('PCA', 1.0, 0.0, ['PCA', 'RR prematurity'])
"""

from __future__ import annotations

from support import bench
from support.ecg import baselines, cpu_peers, pipeline, reading, vae
from support.ecg import beats as beat_tools

#: The methods of the baseline table that train no network: each fits in one pass over the training rows.
TRAINING_FREE = ("median distance", "RR prematurity", "PCA")
#: The sides :func:`beats_on` and :func:`time_method` accept.
SIDES = ("gpu", "cpu, fastest")


def pick_training_free(scores: dict, labels, validation, test, name: str = "ectopic", metric: str = "AUROC"):
    """The method of :data:`TRAINING_FREE` among ``scores`` with the highest ``metric`` on class ``name`` over the
    ``validation`` rows, with that score on the ``test`` rows: a :class:`support.ecg.baselines.Pick`."""
    return baselines.pick_on_validation(scores, labels, validation, test, among=TRAINING_FREE, name=name, metric=metric)


def beats_on(path, config: pipeline.PipelineConfig, *, on: str) -> beat_tools.Beats:
    """The embedded beats of the CSV at ``path``, made on ``on``: ``"gpu"`` (the pipeline's stages) or
    ``"cpu, fastest"`` (the fastest CPU route of :mod:`support.ecg.cpu_peers`)."""
    if on not in SIDES:
        raise ValueError(f"on must be one of {', '.join(map(repr, SIDES))}, not {on!r}")
    if on == "gpu":
        signal = reading.read_signal(path, on="gpu").signal
        response, clean = pipeline.convolve(signal, config.fs)
    else:
        signal = cpu_peers.read_signal(path).signal
        response, clean = cpu_peers.convolve(signal, config.fs)
    candidates = pipeline.find_candidates(response, config)
    return beat_tools.extract_beats(clean, candidates, config.fs, limits=config.limits)


def method_scores(method: str, matrix, peaks, train_rows, fs: float, *, components: int = 8):
    """One score per row of ``matrix`` (beats × width, NumPy, CuPy or torch) with ``method``, one of
    :data:`TRAINING_FREE`, fitted on ``train_rows``; a torch tensor on the beats' device.

    >>> import numpy as np, torch
    >>> rows = np.zeros((6, 3), np.float32); rows[5] = 1
    >>> method_scores("median distance", rows, np.arange(6) * 100, torch.arange(5), 100.0).tolist()[-1] > 1
    True
    """
    if method not in TRAINING_FREE:
        raise ValueError(f"{method!r} is not a training-free method of the table; pick one of {TRAINING_FREE}")
    if method == "RR prematurity":
        return baselines.rr_prematurity(peaks, fs)
    tensor = baselines._tensor(matrix)
    rows = baselines._tensor(train_rows, tensor.device)
    if method == "PCA":
        return baselines.PCABaseline.fit(tensor[rows], components).scores(tensor)
    return baselines.median_distance(tensor[rows], tensor)


def time_method(
    path, config: pipeline.PipelineConfig, method: str, *, on: str, components: int = 8, warmup=2, repeat=5
):
    """A :class:`support.bench.Timing` of :func:`method_scores` on ``on`` (the wall clock on both sides, on the GPU
    up to the device's end of the work: :func:`support.ecg.pipeline.stage_clock`), on the beats :func:`beats_on`
    makes there, with the pipeline's training rows (:func:`support.ecg.pipeline.split`, the same seed)."""
    beats = beats_on(path, config, on=on)
    tensor = pipeline.to_torch(beats.matrix)
    train_rows, _ = pipeline.split(len(beats), config.train_fraction, config.seed, tensor.device)

    def score():
        return method_scores(method, tensor, beats.peaks, train_rows, config.fs, components=components)

    return pipeline.stage_clock(on)(score, label=f"{method} on {on}", warmup=warmup, repeat=repeat)


def time_training(beats, config: pipeline.PipelineConfig, *, on: str, warmup: int = 1, repeat: int = 3) -> bench.Timing:
    """A :class:`support.bench.Timing` of training the VAE on ``beats`` (a torch tensor of training beats) with the
    pipeline's settings (latent size, epochs, batch size, seed), ``warmup`` untimed trainings first, with the wall
    clock on both sides: on the GPU, where ``beats`` are, up to the device's end of the work
    (:func:`support.ecg.pipeline.stage_clock`), the steps as :func:`support.ecg.vae.train` decides (a CUDA graph
    where :func:`support.ecg.vae.graph_ready` allows, else eager, as the pipeline's own run in that process
    trains); on the CPU (``"cpu, fastest"``), on a host copy, PyTorch on every core
    (:func:`support.ecg.cpu_peers.time_training`)."""
    if on not in SIDES:
        raise ValueError(f"on must be one of {', '.join(map(repr, SIDES))}, not {on!r}")
    if repeat < 1 or warmup < 0:
        raise ValueError(f"time at least one training after no fewer than none, not {repeat} after {warmup}")
    settings = {"latent": config.latent, "epochs": config.epochs, "batch_size": config.batch_size, "seed": config.seed}
    if on == "gpu":

        def train():
            vae.train(beats, progress=False, graph=None if config.graph else False, **settings)

        return pipeline.stage_clock("gpu")(train, label="training on gpu", warmup=warmup, repeat=repeat)
    seconds = [cpu_peers.time_training(beats, **settings) for _ in range(warmup + repeat)]
    return bench.Timing("training on cpu, fastest", tuple(seconds[warmup:]), "wall")


def speedup_rows(
    familiar: dict, fastest: dict, gpu: dict, *, training: pipeline.StageSpeedup, method: pipeline.StageSpeedup
) -> tuple[list[pipeline.StageSpeedup], pipeline.StageSpeedup, pipeline.StageSpeedup]:
    """The table of both paths: the shared stages, the VAE's training, the method's scoring, then the total of
    the shared stages with the training (read to a trained VAE) and with the method (read to the method's
    scores). Returns the rows and the two totals."""
    with_vae = pipeline.stage_speedups(familiar, fastest, gpu, extra=(training,))
    with_method = pipeline.stage_speedups(familiar, fastest, gpu, extra=(method,))
    vae_total = _renamed(with_vae[-1], "total, read → trained VAE")
    method_total = _renamed(with_method[-1], f"total, read → {method.stage.removeprefix('score: ')}")
    return [*with_vae[:-1], method, vae_total, method_total], vae_total, method_total


def faster_cpu_per_stage(familiar: dict, fastest: dict, *, last: pipeline.StageSpeedup) -> float:
    """The strongest CPU control of a total: each shared stage's median on whichever CPU side ran it faster,
    summed, plus the total's own last row (the VAE's training or the method's scoring) on its faster side.

    ``familiar`` and ``fastest`` map each shared stage to its timing (:class:`support.bench.Timing`), as for
    :func:`speedup_rows`. The two CPU routes share the gate and embed kernels, and which one times a stage faster
    can differ between machines; taking the faster per stage makes the control a route no CPU side ran whole,
    but one a reader could assemble from the two. The medians are the sides' own, unscaled, as the speed table's
    rows are (:func:`speedup_rows` scales neither CPU side).

    >>> t = lambda *s: bench.Timing("x", s, "wall")
    >>> familiar, fastest = {"read": t(3.0), "embed": t(0.01)}, {"read": t(0.1), "embed": t(0.03)}
    >>> round(faster_cpu_per_stage(familiar, fastest, last=pipeline.StageSpeedup("train", 9.0, 8.0, 0.5)), 6)
    8.11
    """
    if list(familiar) != list(fastest):
        raise ValueError(f"the two CPU sides timed different stages: {list(familiar)}, {list(fastest)}")
    shared = sum(min(familiar[stage].median, fastest[stage].median) for stage in familiar)
    return shared + min(last.cpu_familiar, last.cpu_fastest)


def _renamed(entry: pipeline.StageSpeedup, stage: str) -> pipeline.StageSpeedup:
    return pipeline.StageSpeedup(stage, entry.cpu_familiar, entry.cpu_fastest, entry.gpu)


def repeat_ranges(sides: dict, extra: dict | None = None) -> list[dict[str, str]]:
    """The spread behind the speed table's medians: per stage, each side's repeats from the fastest to the slowest
    (:class:`support.bench.Timing`), or "one run" where the stage was timed once (``None``).

    ``sides`` maps a column ("CPU familiar") to its stages' timings, in the table's order; ``extra`` adds rows
    (training, the method's scoring) as a stage's timing per column.

    >>> fast, slow = bench.Timing("read", (0.2, 0.1, 0.3), "wall"), bench.Timing("read", (0.002,), "cuda-events")
    >>> once = {"train": {"CPU": None, "GPU": None}}
    >>> rows = repeat_ranges({"CPU": {"read": fast}, "GPU": {"read": slow}}, extra=once)
    >>> rows[0]
    {'stage': 'read', 'CPU': '100 ms to 300 ms (3)', 'GPU': '2.00 ms (1)'}
    >>> rows[1]
    {'stage': 'train', 'CPU': 'one run', 'GPU': 'one run'}
    """
    stages = {
        stage: {column: timings[stage] for column, timings in sides.items()} for stage in next(iter(sides.values()))
    }
    rows = []
    for stage, columns in (stages | (extra or {})).items():
        rows.append({"stage": stage} | {column: _range(timing) for column, timing in columns.items()})
    return rows


def _range(timing) -> str:
    if timing is None:
        return "one run"
    if timing.min == timing.max:
        return f"{bench.format_seconds(timing.min)} ({len(timing.samples)})"
    return f"{bench.format_seconds(timing.min)} to {bench.format_seconds(timing.max)} ({len(timing.samples)})"
