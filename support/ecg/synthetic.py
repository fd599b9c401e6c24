"""A synthetic ECG with ground truth: every beat's R-peak position and whether it is normal or an anomaly.

No recording can be downloaded when the book runs, so the chapter makes its own. Each beat is a sum of
Gaussian bumps for the P, Q, R, S and T waves, with the wave shapes of McSharry et al. (2003), "A dynamical
model for generating synthetic electrocardiogram signals", IEEE Trans. Biomed. Eng. 50(3); the bumps are summed
directly, not integrated through that paper's ODE. The bumps sit at fixed times around the R peak; P and T move
and widen with the square root of a *lagged* RR interval (an exponential average over about
:data:`QT_LAG_BEATS` beats), as the QT interval adapts to the heart rate with a delay of a minute or more, so
the beat after a compensatory pause keeps an ordinary T wave. On top come heart-rate variability (respiratory
sinus arrhythmia, drifts over minutes and over hours, jitter), R amplitudes that vary with breathing and from
beat to beat, baseline wander, coloured (1/f) measurement noise over white noise, and two kinds of labelled
anomaly:

- **ectopic** beats (premature ventricular contractions): early, followed by a compensatory pause, with no P
  wave, a wide QRS and an inverted T wave;
- **noise** bursts: muscle noise over one beat's span.

The beat schedule and labels are drawn on the CPU with NumPy from ``seed`` (they are small: one row per beat),
so the ground truth is the same whichever side makes the samples; the samples are made with the array module
asked for, on the GPU with ``xp=cupy``.

>>> ecg = synthesize(seconds=60, seed=1)
>>> ecg.signal.dtype, ecg.signal.shape
(dtype('float32'), (15000,))
>>> 55 <= len(ecg.r_peaks) <= 90
True
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

NORMAL, ECTOPIC, NOISE = 0, 1, 2
#: Beat kinds by label.
KINDS = {NORMAL: "normal", ECTOPIC: "ectopic", NOISE: "noise burst"}

# Waves as (centre s, width s, amplitude mV, does it scale with sqrt(RR)). The QRS complex keeps its width.
NORMAL_WAVES = (
    (-0.20, 0.025, 0.15, True),  # P
    (-0.030, 0.010, -0.12, False),  # Q
    (0.0, 0.011, 1.00, False),  # R
    (0.032, 0.011, -0.25, False),  # S
    (0.28, 0.060, 0.30, True),  # T
)
ECTOPIC_WAVES = (
    (-0.20, 0.025, 0.0, True),  # no P wave
    (-0.030, 0.010, 0.0, False),
    (0.0, 0.032, 1.30, False),  # wide R
    (0.075, 0.030, -0.45, False),  # wide S
    (0.33, 0.070, -0.40, True),  # inverted T
)
PREMATURITY = 0.62  # an ectopic beat comes after this fraction of the normal RR interval...
COMPENSATION = 1.38  # ...and the next beat after this fraction
NOISE_BURST_MV = 0.30  # standard deviation of the muscle noise over a noise-burst beat
MEASUREMENT_NOISE_MV = 0.015  # white noise, standard deviation
PINK_NOISE_MV = 0.02  # 1/f noise above the baseline band, standard deviation
QT_LAG_BEATS = 60  # the QT interval follows an exponential average of RR over about this many beats
HOURLY_DRIFT = 0.10  # the mean RR interval drifts by up to about this fraction over hours (activity, sleep)
QRS_AMPLITUDE_JITTER = 0.06  # beat-to-beat variation of the Q, R and S amplitudes (fraction)
QRS_RESPIRATORY_MODULATION = 0.05  # the same amplitudes swell and shrink with breathing (fraction)


@dataclass(frozen=True)
class SyntheticECG:
    """Samples in millivolts and the truth about every beat."""

    signal: object  # float32, NumPy or CuPy
    fs: float  # samples per second
    r_peaks: np.ndarray  # int64 sample index of every beat's R peak
    labels: np.ndarray  # int8: NORMAL, ECTOPIC or NOISE per beat

    @property
    def seconds(self) -> float:
        return len(self.signal) / self.fs

    def counts(self) -> dict[str, int]:
        """How many beats of each kind."""
        return {name: int((self.labels == label).sum()) for label, name in KINDS.items()}


def beat_schedule(
    seconds: float,
    *,
    seed: int,
    heart_rate_bpm: float = 70.0,
    ectopic_rate: float = 0.02,
    noise_rate: float = 0.01,
) -> tuple[np.ndarray, np.ndarray]:
    """R-peak times in seconds and labels of every beat in ``seconds`` of recording (NumPy, reproducible)."""
    if not seconds > 0:
        raise ValueError(f"a recording must last a positive number of seconds, not {seconds}")
    if not 20 <= heart_rate_bpm <= 220:
        raise ValueError(f"heart rate {heart_rate_bpm} bpm is outside the plausible 20-220 bpm")
    for name, rate in (("ectopic_rate", ectopic_rate), ("noise_rate", noise_rate)):
        if not 0 <= rate < 0.5:
            raise ValueError(f"{name} must be a fraction of beats in [0, 0.5), not {rate}")
    rng = np.random.default_rng(seed)
    mean_rr = 60.0 / heart_rate_bpm
    count = int(seconds / mean_rr * 1.3) + 8
    beat = np.arange(count)
    # Respiratory sinus arrhythmia (~0.25 Hz), drifts over minutes and over hours, and jitter.
    drift = np.cumsum(rng.normal(0.0, 0.004, count))
    width = min(301, count)
    drift -= np.convolve(drift, np.ones(width) / width, mode="same")
    hours = beat * mean_rr / 3600.0
    hourly = HOURLY_DRIFT * np.sin(2 * np.pi * hours / rng.uniform(4.0, 8.0) + rng.uniform(0, 2 * np.pi))
    rr = mean_rr * (1 + 0.04 * np.sin(2 * np.pi * 0.25 * mean_rr * beat) + drift + hourly)
    rr += rng.normal(0, 0.01, count)
    rr = np.clip(rr, 0.6 * mean_rr, 1.6 * mean_rr)
    labels = np.zeros(count, np.int8)
    draw = rng.random(count)
    labels[draw < ectopic_rate] = ECTOPIC
    labels[(draw >= ectopic_rate) & (draw < ectopic_rate + noise_rate)] = NOISE
    labels[:2] = NORMAL  # the first beats are normal: each ectopic beat needs a normal one before it
    ectopic = labels == ECTOPIC
    after = np.roll(ectopic, 1)
    after[0] = False
    labels[after & ectopic] = NORMAL  # no runs of ectopic beats
    ectopic = labels == ECTOPIC
    after = np.roll(ectopic, 1)
    after[0] = False
    rr[ectopic] *= PREMATURITY  # rr[k] is the interval that ends at beat k
    rr[after] *= COMPENSATION
    times = 0.5 + np.cumsum(rr)
    keep = times < seconds - 0.5
    return times[keep], labels[keep]


def lagged_rr(rr: np.ndarray, beats: float = QT_LAG_BEATS) -> np.ndarray:
    """An exponential moving average of the RR intervals over about ``beats`` beats, started at the median.

    >>> lagged_rr(np.array([1.0, 1.0, 2.0, 1.0]), beats=1).tolist()
    [1.0, 1.0, 2.0, 1.0]
    """
    from scipy.signal import lfilter

    if beats < 1:
        raise ValueError(f"the lag must be at least one beat, not {beats}")
    alpha = 1.0 / beats
    start = np.median(rr) if len(rr) else 1.0
    averaged, _ = lfilter([alpha], [1, alpha - 1], rr, zi=[(1 - alpha) * start])
    return averaged


def _beat_waves(xp, times_s: np.ndarray, labels: np.ndarray, rng: np.random.Generator):
    """Per-beat wave centres, widths and amplitudes (beats × 5), on the side of ``xp``."""
    rr = np.diff(times_s, prepend=times_s[0] - np.median(np.diff(times_s)) if len(times_s) > 1 else 1.0)
    scale = np.sqrt(np.clip(lagged_rr(rr), 0.3, 2.0))
    table = {label: np.array(waves) for label, waves in ((NORMAL, NORMAL_WAVES), (ECTOPIC, ECTOPIC_WAVES))}
    shape = np.where(labels == ECTOPIC, ECTOPIC, NORMAL)
    waves = np.stack([table[int(s)] for s in (NORMAL, ECTOPIC)])[shape]  # beats × 5 × 4
    stretch = np.where(waves[..., 3] > 0, scale[:, None], 1.0)
    centres = waves[..., 0] * stretch
    widths = waves[..., 1] * stretch
    breathing = np.sin(2 * np.pi * 0.25 * times_s + rng.uniform(0, 2 * np.pi))
    qrs_gain = 1 + QRS_RESPIRATORY_MODULATION * breathing + rng.normal(0, QRS_AMPLITUDE_JITTER, len(times_s))
    gain = np.ones_like(waves[..., 2])
    gain[:, 1:4] = qrs_gain[:, None]  # Q, R and S: the QRS complex
    return xp.asarray(centres), xp.asarray(widths), xp.asarray(waves[..., 2] * gain)


def pink_noise(n: int, rng, xp=np, low_hz: float = 0.5, fs: float = 250.0):
    """``n`` samples of 1/f noise above ``low_hz`` with unit standard deviation, made by ``xp`` from ``rng``.

    >>> x = pink_noise(10_000, np.random.default_rng(0))
    >>> round(float(x.std()), 3)
    1.0
    """
    spectrum = xp.fft.rfft(rng.standard_normal(n))
    freqs = xp.fft.rfftfreq(n, d=1.0 / fs)
    spectrum /= xp.sqrt(xp.maximum(freqs, low_hz))
    spectrum[freqs < low_hz] = 0
    noise = xp.fft.irfft(spectrum, n)
    return noise / noise.std()


def synthesize(
    seconds: float | None = None,
    *,
    hours: float | None = None,
    fs: float = 250.0,
    seed: int = 0,
    xp=np,
    heart_rate_bpm: float = 70.0,
    ectopic_rate: float = 0.02,
    noise_rate: float = 0.01,
) -> SyntheticECG:
    """Generate ``seconds`` (or ``hours``) of ECG at ``fs`` Hz; ``xp=cupy`` makes the samples on the GPU.

    Each sample sums the waves of its own beat and of both neighbours, so premature beats that start inside
    the previous T wave stay continuous.
    """
    if (seconds is None) == (hours is None):
        raise TypeError("give the duration as either seconds= or hours=")
    seconds = hours * 3600.0 if hours is not None else seconds
    if not fs >= 50:
        raise ValueError(f"sampling rate {fs} Hz is too low for an ECG (the QRS complex needs at least 50 Hz)")
    times, labels = beat_schedule(
        seconds, seed=seed, heart_rate_bpm=heart_rate_bpm, ectopic_rate=ectopic_rate, noise_rate=noise_rate
    )
    if len(times) < 3:
        raise ValueError(f"{seconds} s holds fewer than 3 beats; ask for a longer recording")
    n = int(round(seconds * fs))
    t = xp.arange(n, dtype=xp.float64) / fs
    times_dev = xp.asarray(times)
    midpoints = (times_dev[1:] + times_dev[:-1]) / 2
    nearest = xp.searchsorted(midpoints, t)  # the beat whose span holds each sample
    centres, widths, amplitudes = _beat_waves(xp, times, labels, np.random.default_rng([seed, 1]))
    signal = xp.zeros(n, dtype=xp.float64)
    for offset in (-1, 0, 1):
        neighbour = nearest + offset
        exists = (neighbour >= 0) & (neighbour < len(times))
        beat = xp.clip(neighbour, 0, len(times) - 1)
        dt = (t - times_dev[beat])[:, None] - centres[beat]
        waves = (amplitudes[beat] * xp.exp(-0.5 * (dt / widths[beat]) ** 2)).sum(axis=1)
        signal += xp.where(exists, waves, 0.0)
    rng = _generator(xp, seed)
    phases = rng.uniform(0, 2 * np.pi, 3)
    for (freq, amp), phase in zip(((0.23, 0.12), (0.05, 0.10), (0.011, 0.15)), phases, strict=True):
        signal += amp * xp.sin(2 * np.pi * freq * t + phase)  # baseline wander: breathing, movement
    noisy_beat = xp.asarray(labels == NOISE)[nearest]
    signal += rng.standard_normal(n) * (MEASUREMENT_NOISE_MV + NOISE_BURST_MV * noisy_beat)
    signal += PINK_NOISE_MV * pink_noise(n, rng, xp, fs=fs)
    r_peaks = np.round(times * fs).astype(np.int64)
    return SyntheticECG(signal.astype(xp.float32), float(fs), r_peaks, labels)


def _generator(xp, seed: int):
    if xp is np:
        return np.random.default_rng(seed)
    return xp.random.default_rng(seed)


def save_truth(ecg: SyntheticECG, path) -> None:
    """Keep the ground truth (R peaks, labels, sampling rate) beside the CSV, as ``.npz``."""
    np.savez(path, r_peaks=ecg.r_peaks, labels=ecg.labels, fs=ecg.fs)


def load_truth(path) -> tuple[np.ndarray, np.ndarray, float]:
    """R peaks, labels and sampling rate saved by :func:`save_truth`."""
    with np.load(path) as data:
        return data["r_peaks"], data["labels"], float(data["fs"])
