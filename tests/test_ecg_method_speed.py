"""Timing the baseline table's best training-free method on the fastest CPU route (on the CPU)."""

import numpy as np
import pytest

from support import bench
from support.ecg import baselines, method_speed, pipeline, reading, synthetic


@pytest.fixture(scope="module")
def csv_and_config(tmp_path_factory):
    ecg = synthetic.synthesize(hours=0.1, fs=250.0, seed=3, xp=np)
    path = reading.write_csv(ecg.signal, tmp_path_factory.mktemp("ecg") / "ecg.csv")
    return path, pipeline.PipelineConfig(fs=250.0, seed=3, progress=False)


def test_the_training_free_pick_ignores_the_trained_methods_and_the_test_rows():
    labels = np.array([0, 0, 0, 1] * 10)
    validation, test = np.arange(20), np.arange(20, 40)
    on_test_only = np.where(np.arange(40) < 20, 0.0, labels)
    scores = {"VAE + RR": labels * 1.0, "median distance": on_test_only, "PCA": labels + 0.01 * np.arange(40)}
    pick = method_speed.pick_training_free(scores, labels, validation, test)
    assert pick.method == "PCA" and set(pick.candidates) == {"median distance", "PCA"}
    assert pick.candidates["median distance"] == 0.5 and pick.test == 1.0
    with pytest.raises(ValueError, match="none of the methods"):
        method_speed.pick_training_free({"VAE": labels * 1.0}, labels, validation, test)


def test_the_fastest_cpu_route_makes_the_pipelines_beats(csv_and_config):
    path, config = csv_and_config
    fastest = method_speed.beats_on(path, config, on="cpu, fastest")
    familiar = pipeline.find_beats(reading.read_signal(path, on="cpu").signal, config)
    assert abs(len(fastest) - len(familiar)) <= 2
    assert np.isin(fastest.peaks, familiar.peaks).mean() > 0.99
    with pytest.raises(ValueError, match="on must be one of"):
        method_speed.beats_on(path, config, on="tpu")


def test_method_scores_are_the_baselines_own(csv_and_config):
    import torch

    path, config = csv_and_config
    beats = method_speed.beats_on(path, config, on="cpu, fastest")
    tensor = torch.from_numpy(beats.matrix)
    train, _ = pipeline.split(len(beats), config.train_fraction, config.seed, tensor.device)
    rr = method_speed.method_scores("RR prematurity", tensor, beats.peaks, train, config.fs)
    assert torch.equal(rr, baselines.rr_prematurity(beats.peaks, config.fs))
    pca = method_speed.method_scores("PCA", tensor, beats.peaks, train, config.fs, components=4)
    expected = baselines.PCABaseline.fit(tensor[train], 4).scores(tensor)
    assert torch.allclose(pca, expected, rtol=1e-4, atol=1e-6)
    median = method_speed.method_scores("median distance", beats.matrix, beats.peaks, train, config.fs)
    assert median.shape == (len(beats),)
    with pytest.raises(ValueError, match="training-free"):
        method_speed.method_scores("VAE", tensor, beats.peaks, train, config.fs)


def test_time_method_on_the_cpu_and_the_two_totals(csv_and_config):
    path, config = csv_and_config
    timing = method_speed.time_method(path, config, "RR prematurity", on="cpu, fastest", warmup=0, repeat=2)
    assert timing.clock == "wall" and len(timing.samples) == 2 and timing.median > 0
    stages = {name: type(timing)(name, (seconds,), "wall") for name, seconds in (("read", 1.0), ("convolve", 2.0))}
    gpu = {name: type(timing)(name, (0.1,), "cuda-events") for name in stages}
    training = pipeline.StageSpeedup("train", 50.0, 50.0, 1.0)
    method = pipeline.StageSpeedup("score: PCA", 0.5, 0.5, 0.05)
    rows, vae_total, method_total = method_speed.speedup_rows(stages, stages, gpu, training=training, method=method)
    assert [r.stage for r in rows] == [
        "read",
        "convolve",
        "train",
        "score: PCA",
        "total, read → trained VAE",
        "total, read → PCA",
    ]
    assert vae_total.cpu_fastest == pytest.approx(53.0) and vae_total.gpu == pytest.approx(1.2)
    assert method_total.cpu_fastest == pytest.approx(3.5) and method_total.gpu == pytest.approx(0.25)


def test_the_faster_cpu_per_stage_control_takes_each_stage_from_the_side_that_ran_it_faster():
    def timed(**medians):  # three repeats each, the median apart from the fastest and the slowest
        return {stage: bench.Timing(stage, (s / 2, s, 3 * s), "wall") for stage, s in medians.items()}

    familiar = timed(read=3.0, convolve=2.0, gate=0.2, embed=0.003)
    fastest = timed(read=0.08, convolve=0.5, gate=0.25, embed=0.012)  # slower at gate and embed
    gpu = {stage: bench.Timing(stage, (0.001,), "cuda-events") for stage in familiar}
    training = pipeline.StageSpeedup("train", 11.0, 10.0, 0.4)
    method = pipeline.StageSpeedup("score: RR prematurity", 0.07, 0.07, 0.001)
    _, vae_total, method_total = method_speed.speedup_rows(familiar, fastest, gpu, training=training, method=method)
    vae_control = method_speed.faster_cpu_per_stage(familiar, fastest, last=training)
    method_control = method_speed.faster_cpu_per_stage(familiar, fastest, last=method)
    assert vae_control == pytest.approx(0.08 + 0.5 + 0.2 + 0.003 + 10.0)
    assert method_control == pytest.approx(0.08 + 0.5 + 0.2 + 0.003 + 0.07)
    # shorter than the fastest route's own total by the rows where that route was slower
    assert method_total.cpu_fastest - method_control == pytest.approx(0.05 + 0.009)
    assert vae_control < min(vae_total.cpu_fastest, vae_total.cpu_familiar)
    familiar_faster_at_training = pipeline.StageSpeedup("train", 8.0, 9.0, 0.4)
    control = method_speed.faster_cpu_per_stage(familiar, fastest, last=familiar_faster_at_training)
    assert control == pytest.approx(0.08 + 0.5 + 0.2 + 0.003 + 8.0)
    with pytest.raises(ValueError, match="different stages"):
        method_speed.faster_cpu_per_stage(familiar, timed(read=1.0), last=method)


def test_training_is_timed_with_repeats_after_warm_ups_and_the_pipelines_settings(monkeypatch):
    import torch

    config = pipeline.PipelineConfig(fs=250.0, seed=5, progress=False, epochs=2, latent=4, batch_size=64)
    seen, seconds = [], iter([9.0, 3.0, 5.0, 4.0])

    def fake_cpu_training(beats, **settings):
        seen.append(settings)
        return next(seconds)

    monkeypatch.setattr(method_speed.cpu_peers, "time_training", fake_cpu_training)
    timing = method_speed.time_training(torch.zeros(8, 4), config, on="cpu, fastest", warmup=1, repeat=3)
    assert timing.samples == (3.0, 5.0, 4.0) and timing.clock == "wall"  # the warm-up's 9 s is not counted
    assert seen == [{"latent": 4, "epochs": 2, "batch_size": 64, "seed": 5}] * 4
    with pytest.raises(ValueError, match="on must be one of"):
        method_speed.time_training(torch.zeros(8, 4), config, on="tpu")
    with pytest.raises(ValueError, match="at least one training"):
        method_speed.time_training(torch.zeros(8, 4), config, on="cpu, fastest", repeat=0)


def test_a_real_training_on_the_cpu_is_timed(csv_and_config):
    import torch

    _, config = csv_and_config
    small = pipeline.PipelineConfig(fs=250.0, seed=3, progress=False, epochs=1, latent=2, batch_size=32)
    timing = method_speed.time_training(torch.randn(64, 176), small, on="cpu, fastest", warmup=0, repeat=2)
    assert len(timing.samples) == 2 and all(s > 0 for s in timing.samples)


def test_training_on_the_gpu_is_timed_with_the_stage_clock_and_the_pipelines_settings(monkeypatch):
    import torch

    config = pipeline.PipelineConfig(fs=250.0, seed=5, progress=False, epochs=2, latent=4, batch_size=64, graph=False)
    trained, timed = [], {}

    def fake_clock(fn, *, label, warmup, repeat):
        timed.update(label=label, warmup=warmup, repeat=repeat)
        fn()
        return "the timing"

    clocks = []
    monkeypatch.setattr(method_speed.pipeline, "stage_clock", lambda on: clocks.append(on) or fake_clock)
    monkeypatch.setattr(method_speed.vae, "train", lambda beats, **settings: trained.append(settings))
    assert method_speed.time_training(torch.zeros(8, 4), config, on="gpu", repeat=5) == "the timing"
    assert timed == {"label": "training on gpu", "warmup": 1, "repeat": 5} and clocks == ["gpu"]
    # the pipeline's settings, and eager steps where the pipeline's config turns the graph off
    assert trained == [{"progress": False, "graph": False, "latent": 4, "epochs": 2, "batch_size": 64, "seed": 5}]
