"""The Numba kernels against plain NumPy references, on the CPU (njit) and as CUDA kernels (on the GPU, or in
Numba's CUDA simulator, which conftest.py switches on where there is no GPU)."""

import numpy as np
import pytest

from support.ecg import kernels

TARGETS = ["cpu", "gpu"]


def _to_target(x, target):
    if target == "cpu":
        return x
    from numba import cuda

    return cuda.to_device(x)


def _host(x):
    return x.copy_to_host() if hasattr(x, "copy_to_host") else np.asarray(x)


def reference_gate(y, half, threshold):
    gate = np.zeros(len(y), np.uint8)
    for i, value in enumerate(y):
        before = y[max(0, i - half) : i]
        after = y[i + 1 : i + half + 1]
        gate[i] = value >= threshold and (before < value).all() and (after <= value).all()
    return gate


def reference_embed(signal, peaks, keep, width, anchor):
    rows = []
    for k in np.flatnonzero(keep):
        row = np.zeros(width, np.float32)
        for column in range(width):
            sample = peaks[k] - anchor + column
            if 0 <= sample < len(signal):
                row[column] = signal[sample]
        rows.append(row)
    return np.array(rows, np.float32).reshape(-1, width)


@pytest.mark.parametrize("target", TARGETS)
def test_peak_gate_matches_the_reference_with_ties_plateaus_and_nan(target):
    rng = np.random.default_rng(0)
    y = rng.normal(size=400).astype(np.float32)
    y[50:53] = 5.0  # a plateau: only its first sample opens the gate
    y[200] = np.nan
    expected = reference_gate(np.nan_to_num(y, nan=-np.inf), 7, 0.5)
    gate = _host(kernels.peak_gate(_to_target(y, target), half_window=7, threshold=0.5, target=target))
    assert gate.tolist() == expected.tolist()
    assert gate[50] == 1 and gate[51] == 0 and gate[200] == 0


@pytest.mark.parametrize("target", TARGETS)
def test_peak_gate_keeps_peaks_at_least_a_window_apart(target):
    y = np.sin(np.linspace(0, 40 * np.pi, 2000)).astype(np.float32)
    positions = np.flatnonzero(_host(kernels.peak_gate(_to_target(y, target), half_window=20, threshold=0.9)))
    assert len(positions) == 20
    assert np.diff(positions).min() > 20


def test_peak_gate_refuses_a_signal_shorter_than_its_window():
    with pytest.raises(ValueError, match="fewer than one suppression window"):
        kernels.peak_gate(np.zeros(10, np.float32), half_window=5, threshold=0.0)
    with pytest.raises(ValueError, match="one-dimensional"):
        kernels.peak_gate(np.zeros((4, 4), np.float32), half_window=1, threshold=0.0)
    with pytest.raises(ValueError, match="target"):
        kernels.peak_gate(np.zeros(10, np.float32), half_window=1, threshold=0.0, target="tpu")


@pytest.mark.parametrize("target", TARGETS)
def test_plausible_beats_drops_the_ends_and_implausible_intervals(target):
    peaks = np.array([10, 110, 210, 230, 330, 430, 900, 1000], np.int64)
    keep = _host(kernels.plausible_beats(_to_target(peaks, target), min_gap=50, max_gap=200, target=target))
    # the ends are dropped; 210 and 230 are 20 apart; 430 and 900 are 470 apart
    assert keep.tolist() == [0, 1, 0, 0, 1, 0, 0, 0]
    keep = _host(kernels.plausible_beats(_to_target(peaks, target), min_gap=10, max_gap=500, target=target))
    assert keep.tolist() == [0, 1, 1, 1, 1, 1, 1, 0]


@pytest.mark.parametrize("target", TARGETS)
def test_embed_beats_matches_the_reference(target):
    rng = np.random.default_rng(1)
    signal = rng.normal(size=3000).astype(np.float32)
    peaks = np.array([5, 300, 520, 800, 1300, 1500, 2990], np.int64)
    keep = np.array([0, 1, 1, 1, 1, 1, 0], np.uint8)
    rows = np.cumsum(keep, dtype=np.int64) - keep
    matrix = kernels.embed_beats(
        *(_to_target(a, target) for a in (signal, peaks, keep, rows)), count=5, width=64, anchor=20, target=target
    )
    expected = reference_embed(signal, peaks, keep, 64, 20)
    np.testing.assert_array_equal(_host(matrix), expected)


@pytest.mark.parametrize("target", TARGETS)
def test_embed_beats_keeps_the_whole_window_whatever_the_neighbours(target):
    signal = np.arange(1, 201, dtype=np.float32)  # no zeros of its own
    peaks = np.array([12, 30, 40, 190], np.int64)  # close neighbours on both sides of the beats at 30 and 40
    keep = np.array([0, 1, 1, 0], np.uint8)
    rows = np.array([0, 0, 1, 2], np.int64)
    args = (_to_target(a, target) for a in (signal, peaks, keep, rows))
    matrix = _host(kernels.embed_beats(*args, count=2, width=64, anchor=20, target=target))
    # column c holds sample peak - 20 + c, neighbours or not: the same window around every R peak
    np.testing.assert_array_equal(matrix[0], signal[10:74])
    np.testing.assert_array_equal(matrix[1], signal[20:84])


@pytest.mark.parametrize("target", TARGETS)
def test_embed_beats_zero_pads_only_beyond_the_ends_of_the_recording(target):
    signal = np.arange(1, 101, dtype=np.float32)
    peaks = np.array([0, 5, 95, 99], np.int64)
    keep = np.array([0, 1, 1, 0], np.uint8)
    rows = np.array([0, 0, 1, 2], np.int64)
    args = (_to_target(a, target) for a in (signal, peaks, keep, rows))
    first, last = _host(kernels.embed_beats(*args, count=2, width=16, anchor=8, target=target))
    assert (first[:3] == 0).all() and np.array_equal(first[3:], signal[:13])
    assert np.array_equal(last[:13], signal[87:]) and (last[13:] == 0).all()


def test_embed_beats_refuses_an_anchor_outside_the_row():
    with pytest.raises(ValueError, match="inside the row width"):
        kernels.embed_beats(
            np.zeros(10, np.float32),
            np.zeros(3, np.int64),
            np.zeros(3, np.uint8),
            np.zeros(3, np.int64),
            count=0,
            width=8,
            anchor=8,
        )
