"""From beat candidates to a matrix of beats, one per row, and the ground-truth label of each detected beat.

>>> import numpy as np
>>> window = BeatWindow.for_rate(250.0)
>>> window.width, window.anchor
(176, 62)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from support.arrays import array_module
from support.ecg import kernels


@dataclass(frozen=True)
class BeatWindow:
    """Where a beat sits in its row: ``width`` samples, the R peak at column ``anchor``."""

    width: int
    anchor: int

    @classmethod
    def for_rate(cls, fs: float, seconds: float = 0.7, before_s: float = 0.25) -> BeatWindow:
        """About ``seconds`` per row (rounded up to a multiple of 8 for the autoencoder's strides), the R peak
        ``before_s`` from the start.

        The defaults hold one beat's own waves: the P wave (about 0.2 s before R) and the end of the T wave
        (about 0.4 s after R at 70 beats per minute). A premature beat arrives about 0.5 s after the R peak
        before it, past the window's end, so the beat before an ectopic one does not carry its QRS complex
        (a 1 s window did, and its rows were scored as anomalies).
        """
        width = 8 * math.ceil(seconds * fs / 8)
        return cls(width=width, anchor=min(width - 1, round(before_s * fs)))


@dataclass(frozen=True)
class RRLimits:
    """Plausible RR intervals: 30 to 200 beats per minute, unless told otherwise."""

    min_s: float = 0.3
    max_s: float = 2.0

    def in_samples(self, fs: float) -> tuple[int, int]:
        return max(1, math.floor(self.min_s * fs)), math.ceil(self.max_s * fs)


@dataclass(frozen=True)
class Beats:
    """Detected beats: ``matrix`` (beats × width, float32) and each beat's R-peak sample in ``peaks``."""

    matrix: object
    peaks: object
    window: BeatWindow

    def __len__(self) -> int:
        return int(self.peaks.shape[0])


def extract_beats(signal, candidates, fs: float, *, window: BeatWindow | None = None, limits=RRLimits()) -> Beats:
    """Prune implausible candidates and embed the others, zero-padded, into rows (both Numba kernels)."""
    xp = array_module(candidates)
    window = window or BeatWindow.for_rate(fs)
    min_gap, max_gap = limits.in_samples(fs)
    keep = kernels.plausible_beats(candidates, min_gap=min_gap, max_gap=max_gap)
    running = xp.cumsum(keep, dtype=xp.int64)
    rows = running - keep
    count = int(running[-1]) if len(running) else 0
    matrix = kernels.embed_beats(signal, candidates, keep, rows, count=count, width=window.width, anchor=window.anchor)
    return Beats(matrix=matrix, peaks=candidates[keep.astype(bool)], window=window)


def true_labels_of(peaks, r_peaks: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """The label of the true beat whose span (between midpoints of true R peaks) holds each detected peak.

    A detection inside a noise burst takes the burst's label, whether it found the beat or the noise.
    """
    peaks = np.asarray(peaks)
    if len(r_peaks) == 0:
        raise ValueError("the ground truth has no beats")
    midpoints = (r_peaks[1:] + r_peaks[:-1]) / 2
    return labels[np.searchsorted(midpoints, peaks)]


def match_rate(peaks, r_peaks: np.ndarray, tolerance: int) -> float:
    """The fraction of true R peaks with a detected peak within ``tolerance`` samples."""
    peaks = np.sort(np.asarray(peaks))
    if len(peaks) == 0:
        return 0.0
    where = np.clip(np.searchsorted(peaks, r_peaks), 1, len(peaks) - 1) if len(peaks) > 1 else np.zeros_like(r_peaks)
    nearest = np.minimum(np.abs(peaks[where] - r_peaks), np.abs(peaks[np.maximum(where - 1, 0)] - r_peaks))
    return float((nearest <= tolerance).mean())
