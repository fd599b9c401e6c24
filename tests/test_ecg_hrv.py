"""Beat-to-beat variability and prematurity (on the CPU), on made-up rhythms and on MIT-BIH record 100."""

import numpy as np
import pytest

from support.ecg import hrv, real, synthetic


def test_rmssd_of_an_alternating_rhythm_and_only_between_normal_beats():
    times = np.cumsum(np.tile([0.8, 0.84], 20))  # intervals alternate: successive differences of 40 ms
    normal = np.ones(len(times), bool)
    assert hrv.rmssd_ms(times, normal) == pytest.approx(40.0)
    early = times.copy()
    early[10] -= 0.3  # an ectopic beat: its two intervals and the differences next to them are left out
    normal[10] = False
    assert hrv.rmssd_ms(early, normal) == pytest.approx(40.0)
    assert np.isnan(hrv.rmssd_ms(times, np.zeros(len(times), bool)))
    with pytest.raises(ValueError, match="at least 3"):
        hrv.rmssd_ms(times[:2], normal[:2])


def test_prematurity_is_the_interval_before_over_the_rhythm_around():
    times = np.arange(30) * 0.8
    times[15] -= 0.24  # 30 % early
    normal = np.ones(30, bool)
    normal[15] = False
    chosen = ~normal
    assert hrv.prematurity(times, normal, chosen).tolist() == pytest.approx([0.7])
    summary = hrv.rhythm_summary(times, normal, chosen)
    assert summary["S beats"] == 1 and summary["RMSSD (ms)"] == 0.0 and summary["mean NN (s)"] == 0.8


def test_the_synthetic_rhythm_varies_within_the_published_range_and_its_s_beats_come_early():
    schedule = synthetic.beat_schedule(2 * 3600, seed=0)
    summary = hrv.rhythm_summary(
        schedule.times, schedule.classes == synthetic.NORMAL, schedule.classes == synthetic.SUPRAVENTRICULAR
    )
    low, high = hrv.HEALTHY_RMSSD_MS
    assert low <= summary["RMSSD (ms)"] <= high, summary
    assert 0.7 <= summary["S prematurity (median)"] <= 0.92  # the generator's range of S coupling


def test_record_100s_rhythm_from_its_annotations():
    pytest.importorskip("wfdb")
    recording, annotations = real.load_mitdb_100()
    summary = hrv.rhythm_summary(
        annotations.samples / recording.fs, annotations.classes == "N", annotations.classes == "S"
    )
    assert summary["S beats"] == annotations.counts()["S"]
    assert 0.3 < summary["mean NN (s)"] < 2 and summary["RMSSD (ms)"] > 0
    assert summary["S prematurity (median)"] < 1  # premature beats, as annotated


def test_rate_per_minute_averages_the_rates_of_each_minute():
    fs = 250.0
    first = np.arange(0, 60 * 250, 250)  # minute 0: one beat a second
    second = 60 * 250 + np.arange(0, 60 * 250, 125)  # minute 1: two beats a second
    beats = np.r_[first, second]
    rate = hrv.rate_per_minute(beats, np.diff(beats), fs, minutes=3)
    assert rate[0] == pytest.approx(60.0) and rate[2] == 0.0
    # minute 1 holds the one-second interval that ends in it and 119 half-second ones
    assert rate[1] == pytest.approx((60.0 + 119 * 120.0) / 120)
    with pytest.raises(ValueError, match="one interval between each two"):
        hrv.rate_per_minute(beats, np.diff(beats)[1:], fs, minutes=3)
