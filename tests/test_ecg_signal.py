"""The synthetic ECG, the wavelet and convolution, and reading CSV and WFDB files (on the CPU)."""

import numpy as np
import pytest
from scipy.signal import lfilter

from support.ecg import cpu_peers, detection, pipeline, reading, synthetic


@pytest.mark.slow
def test_synthetic_beats_follow_the_heart_rate_and_the_class_rates():
    ecg = synthetic.synthesize(seconds=3600, seed=0, heart_rate_bpm=70, ectopic_rate=0.06, noise_rate=0.03)
    # the mean rate drifts over hours and rises in bouts of activity, about the resting 70 bpm
    assert 3600 * 70 / 60 * 0.8 < len(ecg.r_peaks) < 3600 * 70 / 60 * 1.5
    classes = ecg.beat_classes
    for label, share in synthetic.ECTOPIC_SHARES.items():
        assert 0.4 < (classes == label).mean() / (0.06 * share) < 2.0, synthetic.KINDS[label]
    rr = np.diff(ecg.r_peaks) / ecg.fs
    local = np.convolve(rr, np.ones(9) / 9, mode="same")
    for label, early, pause in ((synthetic.VENTRICULAR, 0.8, 1.25), (synthetic.SUPRAVENTRICULAR, 0.93, 1.1)):
        k = np.flatnonzero(classes == label)
        k = k[(k > 5) & (k < len(rr) - 5)]
        assert np.median(rr[k - 1] / local[k - 1]) < early  # premature...
        assert (np.median(rr[k] / local[k]) > pause) == (label == synthetic.VENTRICULAR)  # ...a full pause after V
    assert not synthetic.is_ectopic(classes[1:])[synthetic.is_ectopic(classes[:-1])].any()  # no runs
    assert set(np.unique(ecg.labels)) == set(synthetic.KINDS)  # every class, and noise, is there
    noisy = ecg.labels == synthetic.NOISE
    assert synthetic.under_artefact(ecg.r_peaks[noisy], ecg.artefacts, max_snr_db=synthetic.NOISE_LABEL_DB).all()
    assert (ecg.labels[~noisy] == classes[~noisy]).all()
    assert ((ecg.onsets < ecg.r_peaks) & (ecg.onsets > ecg.r_peaks - 0.2 * ecg.fs)).all()


@pytest.mark.slow
def test_artefacts_cover_their_share_at_the_stress_test_snrs():
    ecg = synthetic.synthesize(seconds=3 * 3600, seed=2, noise_rate=0.05)
    a = ecg.artefacts
    covered = (a.stops - a.starts).sum() / len(ecg.signal)
    assert 0.025 < covered < 0.08 and (a.starts[1:] > a.stops[:-1]).all()
    assert set(a.snr_db.tolist()) <= set(synthetic.STRESS_SNR_DB) and len(set(a.snr_db.tolist())) >= 5
    assert set(a.kinds.tolist()) == set(synthetic.ARTEFACT_KINDS)
    # louder artefact (lower SNR) shows as a larger spread of the signal in its stretch
    clean = detection.remove_baseline(ecg.signal, ecg.fs)
    spread = {snr: [] for snr in synthetic.STRESS_SNR_DB}
    for start, stop, snr in zip(a.starts, a.stops, a.snr_db, strict=True):
        spread[int(snr)].append(clean[start:stop].std())
    assert np.median(spread[-6]) > 3 * np.median(spread[24])
    rows = a.rows(ecg.fs)
    assert sum(r["stretches"] for r in rows) == len(a)


def test_ventricular_foci_differ_between_recordings_and_heart_rates_drift():
    shapes = [synthetic.draw_person(np.random.default_rng([seed, 1])) for seed in range(6)]
    assert len({len(p.foci) for p in shapes}) > 1  # one to three foci
    widths = np.concatenate([p.foci[:, 2, 1] for p in shapes])
    assert widths.min() > 1.3 * max(p.normal[2, 1] for p in shapes) and widths.max() > 0.03
    polarity = np.sign(np.concatenate([p.foci[:, 2, 2] for p in shapes]))
    assert set(polarity.tolist()) == {-1.0, 1.0}
    schedule = synthetic.beat_schedule(10 * 3600, seed=3)
    rate = 60 / np.diff(schedule.times)
    hourly = [
        np.median(rate[(schedule.times[1:] >= h * 3600) & (schedule.times[1:] < (h + 1) * 3600)]) for h in range(9)
    ]
    assert max(hourly) / min(hourly) > 1.1  # the rate drifts over hours


def test_synthetic_ecg_is_reproducible_from_its_seed_and_peaks_at_r():
    first, again, other = (synthetic.synthesize(seconds=60, seed=s) for s in (5, 5, 6))
    np.testing.assert_array_equal(first.signal, again.signal)
    assert not np.array_equal(first.r_peaks, other.r_peaks)
    normal = first.r_peaks[first.labels == synthetic.NORMAL]
    window = np.stack([first.signal[r - 10 : r + 11] for r in normal[1:-1]])
    assert (np.abs(window.argmax(axis=1) - 10) <= 2).mean() > 0.95  # the R wave is the tallest sample


def test_synthetic_refuses_impossible_requests():
    with pytest.raises(TypeError, match="either seconds= or hours="):
        synthetic.synthesize(seconds=10, hours=1)
    with pytest.raises(ValueError, match="too low for an ECG"):
        synthetic.synthesize(seconds=60, fs=20)
    with pytest.raises(ValueError, match="fraction of beats"):
        synthetic.synthesize(seconds=60, ectopic_rate=0.7)
    with pytest.raises(ValueError, match="fraction of the recording"):
        synthetic.synthesize(seconds=60, noise_rate=0.7)
    with pytest.raises(ValueError, match="fewer than 3 beats"):
        synthetic.synthesize(seconds=1.5)


@pytest.mark.slow
def test_synthetic_qt_follows_rr_with_a_lag_and_r_amplitudes_vary():
    ecg = synthetic.synthesize(seconds=1800, seed=3, heart_rate_bpm=70, ectopic_rate=0.08, noise_rate=0.0)
    clean = detection.remove_baseline(ecg.signal, ecg.fs)
    fs, labels, r = ecg.fs, ecg.labels, ecg.r_peaks
    inner = np.arange(2, len(r) - 2)
    normal = inner[(labels[inner] == synthetic.NORMAL) & (labels[inner - 1] == synthetic.NORMAL)]
    after_pause = inner[(labels[inner] == synthetic.NORMAL) & (labels[inner - 1] == synthetic.VENTRICULAR)]

    def t_peak_delay(beats):  # where the T wave peaks, 0.15-0.45 s after R
        window = np.stack([clean[b + int(0.15 * fs) : b + int(0.45 * fs)] for b in r[beats]])
        return 0.15 + np.median(window.argmax(axis=1)) / fs

    # after the compensatory pause the T wave stays where it was: an instant QT would move it
    assert abs(t_peak_delay(after_pause) / t_peak_delay(normal) - 1) < 0.05
    heights = clean[r[normal]]
    assert 0.04 < heights.std() / heights.mean() < 0.4  # R amplitudes vary: breathing, axis, posture


def test_pink_noise_has_more_power_at_low_frequencies():
    noise = synthetic.pink_noise(2**16, np.random.default_rng(0))
    power = np.abs(np.fft.rfft(noise)) ** 2
    freqs = np.fft.rfftfreq(len(noise), d=1 / 250.0)
    low, high = power[(freqs > 1) & (freqs < 2)].mean(), power[(freqs > 50) & (freqs < 100)].mean()
    assert 20 < low / high < 100  # 1/f: about 50× between 1.5 Hz and 75 Hz
    assert power[freqs < 0.5].max() < 1e-6 * power.max()  # nothing in the baseline band


def test_truth_round_trips(tmp_path):
    ecg = synthetic.synthesize(seconds=600, seed=2, noise_rate=0.05)
    synthetic.save_truth(ecg, tmp_path / "truth.npz")
    r_peaks, labels, fs = synthetic.load_truth(tmp_path / "truth.npz")
    np.testing.assert_array_equal(r_peaks, ecg.r_peaks)
    np.testing.assert_array_equal(labels, ecg.labels)
    assert fs == ecg.fs
    truth = synthetic.load_truth(tmp_path / "truth.npz", full=True)
    np.testing.assert_array_equal(truth.beat_classes, ecg.beat_classes)
    np.testing.assert_array_equal(truth.onsets, ecg.onsets)
    assert len(truth.artefacts) == len(ecg.artefacts) > 0
    np.testing.assert_array_equal(truth.artefacts.snr_db, ecg.artefacts.snr_db)


def test_fft_convolution_matches_direct_convolution():
    rng = np.random.default_rng(0)
    x = rng.normal(size=1001).astype(np.float32)
    kernel = detection.ricker(250.0)
    expected = np.convolve(x.astype(np.float64), kernel, mode="same")
    np.testing.assert_allclose(detection.fft_convolve_same(x, kernel), expected, atol=1e-4)


def test_ricker_wavelet_has_zero_mean_unit_energy_and_refuses_low_rates():
    wavelet = detection.ricker(360.0)
    assert abs(float(wavelet.sum())) < 1e-5 and abs(float((wavelet**2).sum()) - 1) < 1e-5
    with pytest.raises(ValueError, match="needs at least 94 Hz"):
        detection.ricker(60.0)
    with pytest.raises(ValueError, match="positive number of Hz"):
        detection.ricker(float("nan"))


def test_baseline_removal_keeps_beats_and_drops_wander():
    fs = 250.0
    t = np.arange(int(60 * fs)) / fs
    wander = 0.5 * np.sin(2 * np.pi * 0.05 * t)
    beats = synthetic.synthesize(seconds=60, seed=0).signal
    clean = detection.remove_baseline((beats + wander).astype(np.float32), fs)
    middle = slice(int(5 * fs), int(55 * fs))  # away from the circular edges
    assert np.abs(np.corrcoef(clean[middle], wander[middle])[0, 1]) < 0.1
    # linear: what is left of the 0.5 mV wander, next to the filtered beats, is small
    leftover = clean - detection.remove_baseline(beats, fs)
    assert np.abs(leftover[middle]).max() < 0.05


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("", "is empty"),
        ("mv\n", "header but no samples"),
        ("0.1\n0.2\nabc\n0.4\n", r"1 rows are not numbers \(line 3: 'abc'\)"),
        ("mv\n0.1\n0.2\n1e\n0.4\n", r"line 4: '1e'"),
        ("0.1\n0.2,5\n0.3\n", r"more than one value, first at line 2 \('0.2', then '5'\)"),
        ("0.1,2\n0.2,3\n", "line 1 has 2 fields"),
        ("0.1\nnan\nnan\n0.4\n", "missing samples lie in runs .* first at line 2"),
        ("nan\n0.2\n0.3\n", "at either end"),
    ],
)
def test_bad_csv_input_names_the_problem(tmp_path, text, problem):
    path = tmp_path / "bad.csv"
    path.write_text(text)
    with pytest.raises(reading.SignalError, match=problem):
        reading.read_signal(path, on="cpu")


def test_isolated_gaps_are_filled_with_the_mean_of_their_neighbours(tmp_path):
    path = tmp_path / "gaps.csv"
    path.write_text("mv\n1.0\n\n3.0\nNA\n5.0\n")
    recording = reading.read_signal(path, on="cpu")
    assert recording.signal.tolist() == [1.0, 2.0, 3.0, 4.0, 5.0]
    assert recording.repaired == 2 and recording.signal.dtype == np.float32


def test_columns_by_name_and_missing_files(tmp_path):
    path = tmp_path / "two.csv"
    path.write_text("time,mv\n0,0.5\n1,0.7\n")
    assert reading.read_signal(path, on="cpu", column="mv").signal.tolist() == pytest.approx([0.5, 0.7])
    with pytest.raises(reading.SignalError, match="no column 'lead'"):
        reading.read_signal(path, on="cpu", column="lead")
    with pytest.raises(FileNotFoundError, match="no ECG file"):
        reading.read_signal(tmp_path / "absent.csv", on="cpu")
    with pytest.raises(ValueError, match="'gpu' or 'cpu'"):
        reading.read_signal(path, on="tpu", column="mv")


def test_written_csv_reads_back(tmp_path):
    ecg = synthetic.synthesize(seconds=20, seed=1)
    path = reading.write_csv(ecg.signal, tmp_path / "ecg.csv")
    assert path.read_text().splitlines()[0].count(".") == 1
    np.testing.assert_allclose(reading.read_signal(path, on="cpu").signal, ecg.signal, atol=6e-5)


def test_wfdb_record_written_by_the_test_reads_back_in_millivolts(tmp_path):
    wfdb = pytest.importorskip("wfdb")
    ecg = synthetic.synthesize(seconds=20, fs=360.0, seed=3)
    signal = ecg.signal.astype(np.float64)
    signal[1000] = np.nan  # an invalid sample, as WFDB marks them
    wfdb.wrsamp(
        "rec",
        fs=360,
        units=["mV"],
        sig_name=["MLII"],
        p_signal=signal[:, None],
        fmt=["16"],
        adc_gain=[1000.0],
        baseline=[0],
        write_dir=str(tmp_path),
    )
    recording = reading.read_wfdb(tmp_path / "rec", channel="MLII")
    assert recording.fs == 360.0 and recording.repaired == 1
    np.testing.assert_allclose(np.delete(recording.signal, 1000), np.delete(ecg.signal, 1000), atol=1e-3)
    with pytest.raises(reading.SignalError, match="no channel 'V5'"):
        reading.read_wfdb(tmp_path / "rec", channel="V5")
    with pytest.raises(FileNotFoundError, match="without extension"):
        reading.read_wfdb(tmp_path / "rec.dat")


def test_mitbih_symbols_map_to_the_aami_classes():
    mapping = reading.MITBIH_TO_AAMI
    assert [mapping[s] for s in "NLRej"] == ["N"] * 5
    assert [mapping[s] for s in "AaJS"] == ["S"] * 4
    assert (mapping["V"], mapping["E"], mapping["F"], mapping["/"], mapping["f"], mapping["Q"]) == tuple("VVFQQQ")
    for not_a_beat in '+~|x"[]!':
        assert not_a_beat not in mapping
    letters = [letter for letters in reading.AAMI_SYMBOLS.values() for letter in letters]
    assert len(letters) == len(set(letters))  # no symbol in two classes


def test_wfdb_annotations_come_with_the_record_as_aami_classes(tmp_path):
    wfdb = pytest.importorskip("wfdb")
    ecg = synthetic.synthesize(seconds=30, fs=360.0, seed=3)
    wfdb.wrsamp(
        "rec",
        fs=360,
        units=["mV"],
        sig_name=["MLII"],
        p_signal=ecg.signal.astype(np.float64)[:, None],
        fmt=["16"],
        adc_gain=[1000.0],
        baseline=[0],
        write_dir=str(tmp_path),
    )
    letters = {synthetic.NORMAL: "N", synthetic.SUPRAVENTRICULAR: "A", synthetic.VENTRICULAR: "V"}
    symbols = np.array([letters.get(int(c), "F") for c in ecg.beat_classes])
    samples = np.r_[ecg.r_peaks, ecg.r_peaks[3] + 20]  # and a change of signal quality, not a beat
    symbols = np.append(symbols, "~")
    order = np.argsort(samples, kind="stable")
    wfdb.wrann("rec", "atr", samples[order], symbol=list(symbols[order]), write_dir=str(tmp_path))
    recording = reading.read_wfdb(tmp_path / "rec", annotation="atr")
    notes = recording.annotations
    np.testing.assert_array_equal(notes.samples, ecg.r_peaks)
    expected = np.where(ecg.beat_classes == synthetic.FUSION, synthetic.FUSION, ecg.beat_classes)
    np.testing.assert_array_equal(notes.labels(), expected)
    assert sum(notes.counts().values()) == len(ecg.r_peaks)
    with pytest.raises(FileNotFoundError, match="no annotation file"):
        reading.read_annotations(tmp_path / "rec", extension="qrs")


@pytest.mark.slow
def test_the_fastest_cpu_stages_compute_what_the_pipeline_computes(tmp_path):
    ecg = synthetic.synthesize(seconds=120, seed=3)
    path = reading.write_csv(ecg.signal, tmp_path / "ecg.csv")
    familiar = reading.read_signal(path, on="cpu").signal
    fast = cpu_peers.read_signal(path).signal
    assert fast.dtype == np.float32 and np.array_equal(fast, familiar)
    response, clean = pipeline.convolve(familiar, ecg.fs)
    fast_response, fast_clean = cpu_peers.convolve(fast, ecg.fs)
    scale = float(np.abs(response).max())
    assert np.abs(fast_response - response).max() < 1e-4 * scale
    assert np.abs(fast_clean - clean).max() < 1e-4 * float(np.abs(clean).max())
    config = pipeline.PipelineConfig()
    assert np.array_equal(pipeline.find_candidates(fast_response, config), pipeline.find_candidates(response, config))


def test_the_fast_cpu_reader_refers_bad_files_to_the_pipeline_reader(tmp_path):
    (tmp_path / "gap.csv").write_text("0.1\n\n0.3\n")
    with pytest.raises(reading.SignalError, match="1 missing samples; read it with support.ecg.reading"):
        cpu_peers.read_signal(tmp_path / "gap.csv")
    (tmp_path / "text.csv").write_text("0.1\nlead II\n0.3\n")
    with pytest.raises(reading.SignalError, match="Polars could not read it as one column of numbers"):
        cpu_peers.read_signal(tmp_path / "text.csv")
    with pytest.raises(ValueError, match="1-D NumPy signal"):
        cpu_peers.convolve(np.zeros((3, 3), np.float32), 250.0)


def test_the_lagged_rr_is_the_first_order_recursive_average_scipy_computes():
    rr = np.random.default_rng(4).uniform(0.4, 1.6, 5000)
    for beats in (1, 8.5, synthetic.QT_LAG_BEATS):
        alpha = 1.0 / beats
        expected, _ = lfilter([alpha], [1, alpha - 1], rr, zi=[(1 - alpha) * np.median(rr)])
        np.testing.assert_allclose(synthetic.lagged_rr(rr, beats), expected, rtol=1e-12, atol=0)
    assert synthetic.lagged_rr(np.array([]), 3).shape == (0,)
    with pytest.raises(ValueError, match="at least one beat"):
        synthetic.lagged_rr(rr, 0.5)


def test_a_ventricular_beat_first_or_last_in_the_draw_gets_its_compensatory_pause():
    """Chapter 7's first GPU run stopped in beat_schedule: the pause after each ventricular beat took the coupling of
    the beats *before* ventricular ones, a mask one longer or shorter than the beats after them whenever the first
    or the last drawn beat is ventricular. Short recordings at a high ectopic rate draw such ends within a few seeds
    (each end is ventricular about one time in ten)."""
    ventricular_at_an_end = 0
    for seed in range(60):
        schedule = synthetic.beat_schedule(6.0, seed=seed, ectopic_rate=0.45, heart_rate_bpm=120)
        assert np.all(np.diff(schedule.times) > 0)
        ends = schedule.classes[[0, -1]]
        ventricular_at_an_end += int(np.any(ends == synthetic.VENTRICULAR))
    assert ventricular_at_an_end > 0  # the case the test is for was drawn
