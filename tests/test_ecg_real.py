"""The real recording (MIT-BIH record 208, 5 minutes), the published detectors, and the CPU side's helpers."""

import numpy as np
import pytest

from support.ecg import cpu_peers, detection, pipeline, plots, real


def test_the_excerpt_reads_as_five_minutes_of_millivolts():
    recording = real.load_mitdb_excerpt()
    assert recording.fs == 360.0 and len(recording.signal) == 300 * 360
    assert recording.signal.dtype == np.float32
    assert 0.5 < float(np.percentile(recording.signal, 99.9) - np.median(recording.signal)) < 6  # mV, not ADC units
    with pytest.raises(FileNotFoundError, match="ships with the book"):
        real.load_mitdb_excerpt("absent.npz")


@pytest.mark.slow
def test_the_chapter_and_a_published_detector_agree_on_the_real_beats():
    pytest.importorskip("ecgdetectors")
    recording = real.load_mitdb_excerpt()
    config = pipeline.PipelineConfig(fs=recording.fs, progress=False)
    found = pipeline.find_beats(recording.signal, config)
    published = real.published_beats(recording.signal, recording.fs)
    assert set(published) == set(real.DETECTORS)
    check = real.agreement(published["Pan-Tompkins"], found.peaks, recording.fs)
    assert check["sensitivity"] > 0.9 and check["PPV"] > 0.9, check
    table = real.agreement_table({"a": found.peaks, **published}, recording.fs)
    assert len(table) == 6 and {row["reference"] for row in table} == {"a", *real.DETECTORS}


def test_threaded_overlap_add_is_the_pipelines_convolution():
    x = np.random.default_rng(0).normal(size=50_001).astype(np.float32)
    wavelet = detection.ricker(250.0)
    expected = detection.fft_convolve_same(x, wavelet)
    for workers, chunk in ((1, 4096), (3, 1000), (None, 1 << 20)):
        got = cpu_peers.oa_convolve_threaded(x, wavelet, workers=workers, chunk=chunk)
        assert np.abs(got - expected).max() < 1e-4
    with pytest.raises(ValueError, match="at least the kernel"):
        cpu_peers.oa_convolve_threaded(x, wavelet, chunk=3)


def test_the_cpu_is_named_with_the_threads_each_tool_used():
    info = cpu_peers.cpu_description()
    assert info["logical CPUs"] >= info["physical cores"] >= 1 and info["CPU"]
    assert info["threads"]["pandas read_csv"] == 1 and info["threads"]["PyTorch training"] >= 1
    assert all(len(line) <= 88 for line in cpu_peers.describe_cpu(info).splitlines())


@pytest.mark.slow
def test_training_is_timed_on_the_cpu_with_the_threads_restored():
    import torch

    before = torch.get_num_threads()
    seconds = cpu_peers.time_training(torch.randn(64, 64), latent=2, epochs=1, batch_size=32, threads=1)
    assert seconds > 0 and torch.get_num_threads() == before


def test_the_real_recordings_figures_draw_from_host_arrays():
    import matplotlib

    matplotlib.use("Agg")

    matrix = np.zeros((5, 16), np.float32)
    matrix[3, 8] = 2.0
    scores = np.array([1.0, 2.0, 0.5, 9.0, 3.0])
    fig, chosen = plots.top_beats_figure(matrix, scores, fs=360.0, anchor=4, count=2, peaks=np.arange(5) * 360)
    assert list(chosen) == [3, 4] and "at 3 s" in fig.axes[0].get_title()
    timeline = plots.scores_over_time_figure(np.arange(5) * 360, scores, fs=360.0)
    assert len(timeline.axes[0].lines) == 1
    with pytest.raises(ValueError, match="one score per"):
        plots.scores_over_time_figure(np.arange(4), scores, fs=360.0)
