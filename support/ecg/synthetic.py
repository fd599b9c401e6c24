"""A synthetic Holter ECG with ground truth for every beat and every stretch of artefact.

No recording can be downloaded when the book runs, so the chapter makes its own, and makes it hard enough that
a one-line baseline does not solve it. Each beat is a sum of five Gaussian bumps (P, Q, R, S, T), with the
wave shapes of McSharry et al. (2003), "A dynamical model for generating synthetic electrocardiogram signals",
IEEE Trans. Biomed. Eng. 50(3), summed directly rather than integrated through that paper's ODE. What real
Holter data has, and this generator draws from ``seed``:

- **per recording**: the heart rate, the amplitudes and widths of the normal waves, the noise levels, and one
  to three ventricular *foci*, each with its own QRS width, polarity, amplitude and coupling interval;
- **beat classes** (AAMI EC57's beat classes): normal (N); *supraventricular* premature beats (S) with a normal
  QRS complex and an altered P wave, which only their timing gives away; *ventricular* premature beats (V)
  from one of the foci, followed by a compensatory pause; *fusion* beats (F), halfway between a normal beat
  and a ventricular one, on time;
- **beat to beat**: QRS amplitude and electrical axis (the R/S balance) that swing with breathing, wander over
  minutes and jitter from beat to beat; P and T waves that follow a lagged RR interval (the QT interval adapts
  to the rate over about :data:`QT_LAG_BEATS` beats);
- **over hours**: a heart rate that drifts by up to :data:`HOURLY_DRIFT` (sleep, activity) and a gain that
  drifts (electrode contact);
- **noise**: baseline wander, white and 1/f measurement noise, and stretches of *electrode-motion* and
  *muscle* artefact at the signal-to-noise ratios of the MIT-BIH Noise Stress Test (:data:`STRESS_SNR_DB`,
  24 down to -6 dB). A beat whose R peak lies in a stretch at :data:`NOISE_LABEL_DB` or below is labelled
  :data:`NOISE` (the signal there is unreadable); its cardiac class is kept in ``beat_classes``.

The beat schedule, the classes and the artefact stretches are drawn on the CPU with NumPy (one row per beat or
stretch: small), so the ground truth is the same whichever side makes the samples; the samples are made with
the array module asked for, on the GPU with ``xp=cupy``, in vectorised array code (no loop over beats).

>>> ecg = synthesize(seconds=60, seed=1)
>>> ecg.signal.dtype, ecg.signal.shape
(dtype('float32'), (15000,))
>>> 50 <= len(ecg.r_peaks) <= 100
True
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

NORMAL, SUPRAVENTRICULAR, VENTRICULAR, FUSION, NOISE = 0, 1, 2, 3, 4
#: Beat labels by value (the name is also the beat's class in tables).
KINDS = {
    NORMAL: "normal",
    SUPRAVENTRICULAR: "supraventricular",
    VENTRICULAR: "ventricular",
    FUSION: "fusion",
    NOISE: "noise",
}
#: The AAMI letter of each label (N, S, V, F; Q for unreadable).
AAMI_LETTERS = {NORMAL: "N", SUPRAVENTRICULAR: "S", VENTRICULAR: "V", FUSION: "F", NOISE: "Q"}
#: The ectopic classes: beats that do not start in the sinus node.
ECTOPIC_CLASSES = (SUPRAVENTRICULAR, VENTRICULAR, FUSION)
#: How ``ectopic_rate`` is shared between the ectopic classes.
ECTOPIC_SHARES = {SUPRAVENTRICULAR: 0.55, VENTRICULAR: 0.35, FUSION: 0.10}

#: Artefact kinds of :class:`Artefacts`.
ELECTRODE_MOTION, MUSCLE = 0, 1
ARTEFACT_KINDS = {ELECTRODE_MOTION: "electrode motion", MUSCLE: "muscle"}
#: Signal-to-noise ratios of the MIT-BIH Noise Stress Test records, in dB.
STRESS_SNR_DB = (24, 18, 12, 6, 0, -6)
#: Beats under artefact at this SNR or below are labelled NOISE.
NOISE_LABEL_DB = 6

QT_LAG_BEATS = 60  # the QT interval follows an exponential average of RR over about this many beats
HOURLY_DRIFT = 0.15  # the mean RR interval drifts by up to about this fraction over hours (activity, sleep)
QRS_AMPLITUDE_JITTER = 0.06  # beat-to-beat variation of the Q, R and S amplitudes (fraction)
QRS_RESPIRATORY_MODULATION = 0.05  # the same amplitudes swell and shrink with breathing (fraction)
AXIS_WANDER = 0.15  # the R/S balance wanders over minutes by about this fraction
CHUNK = 1 << 22  # samples made at a time (bounds the temporary arrays on either side)

_WAVES = ("P", "Q", "R", "S", "T")
_SCALES = np.array([True, False, False, False, True])  # P and T move and widen with sqrt(lagged RR)


def is_ectopic(labels) -> np.ndarray:
    """True where a label is one of :data:`ECTOPIC_CLASSES`.

    >>> is_ectopic(np.array([0, 1, 2, 3, 4])).tolist()
    [False, True, True, True, False]
    """
    return np.isin(np.asarray(labels), ECTOPIC_CLASSES)


@dataclass(frozen=True)
class Artefacts:
    """Stretches of artefact: sample where each starts and stops (exclusive), its kind and its SNR in dB."""

    starts: np.ndarray
    stops: np.ndarray
    kinds: np.ndarray
    snr_db: np.ndarray

    def __len__(self) -> int:
        return len(self.starts)

    def rows(self, fs: float) -> list[dict]:
        """Per SNR and kind: how many stretches and how many seconds."""
        out = []
        for snr in sorted(set(self.snr_db.tolist()), reverse=True):
            for kind, name in ARTEFACT_KINDS.items():
                chosen = (self.snr_db == snr) & (self.kinds == kind)
                if chosen.any():
                    seconds = float((self.stops[chosen] - self.starts[chosen]).sum() / fs)
                    out.append({"SNR dB": snr, "kind": name, "stretches": int(chosen.sum()), "seconds": seconds})
        return out


def _no_artefacts() -> Artefacts:
    empty = np.zeros(0, np.int64)
    return Artefacts(empty, empty, np.zeros(0, np.int8), np.zeros(0, float))


@dataclass(frozen=True)
class SyntheticECG:
    """Samples in millivolts and the truth about every beat and every stretch of artefact."""

    signal: object  # float32, NumPy or CuPy
    fs: float  # samples per second
    r_peaks: np.ndarray  # int64 sample index of every beat's R peak
    labels: np.ndarray  # int8: NORMAL, SUPRAVENTRICULAR, VENTRICULAR, FUSION, or NOISE under loud artefact
    beat_classes: np.ndarray = None  # int8: the cardiac class of every beat, artefact or not
    onsets: np.ndarray = None  # int64: sample where each beat's QRS complex begins
    artefacts: Artefacts = field(default_factory=_no_artefacts)

    @property
    def seconds(self) -> float:
        return len(self.signal) / self.fs

    def counts(self) -> dict[str, int]:
        """How many beats of each label."""
        return {name: int((self.labels == label).sum()) for label, name in KINDS.items()}


@dataclass(frozen=True)
class Schedule:
    """The beats of a recording, drawn on the host: R times (s), classes, and each one's ventricular focus."""

    times: np.ndarray
    classes: np.ndarray
    focus: np.ndarray  # index into the recording's foci for V and F beats, -1 otherwise
    mean_rr: float


@dataclass(frozen=True)
class Person:
    """What differs between recordings: the normal beat's waves, the ventricular foci, the noise levels."""

    normal: np.ndarray  # 5 × 3: centre s, width s, amplitude mV
    foci: np.ndarray  # foci × 5 × 3
    coupling: np.ndarray  # each focus's coupling interval, as a fraction of RR
    focus_share: np.ndarray
    white_mv: float
    pink_mv: float
    wander_mv: np.ndarray  # three sines: breathing, movement, slow drift

    @property
    def qrs_peak_to_peak(self) -> float:
        """Peak-to-peak amplitude of the normal QRS complex (mV): the signal of a signal-to-noise ratio."""
        return float(self.normal[2, 2] - min(self.normal[1, 2], self.normal[3, 2]))


def draw_person(rng: np.random.Generator) -> Person:
    """The recording's own normal beat, ventricular foci and noise levels."""
    qrs = rng.uniform(0.009, 0.013)
    normal = np.array(
        [
            [rng.uniform(-0.22, -0.17), rng.uniform(0.02, 0.03), rng.uniform(0.08, 0.2)],  # P
            [-2.8 * qrs, qrs, rng.uniform(-0.15, -0.03)],  # Q
            [0.0, qrs, rng.uniform(0.7, 1.5)],  # R
            [2.9 * qrs, qrs, rng.uniform(-0.45, -0.1)],  # S
            [rng.uniform(0.26, 0.31), rng.uniform(0.05, 0.07), rng.uniform(0.15, 0.4)],  # T
        ]
    )
    count = int(rng.integers(1, 4))
    foci = np.empty((count, 5, 3))
    for k in range(count):  # a loop over one to three foci, not over beats
        width = rng.uniform(0.018, 0.04)
        polarity = 1.0 if rng.random() < 0.7 else -1.0
        height = rng.uniform(0.4, 1.4) * normal[2, 2]
        foci[k] = [
            [-0.2, 0.025, 0.0],  # no P wave
            [-1.6 * width, 0.7 * width, -0.15 * polarity * height * rng.random()],
            [0.0, width, polarity * height],
            [1.7 * width, width, -polarity * height * rng.uniform(0.1, 0.5)],
            [rng.uniform(0.3, 0.36), rng.uniform(0.06, 0.09), -polarity * rng.uniform(0.15, 0.45)],
        ]
    return Person(
        normal=normal,
        foci=foci,
        coupling=rng.uniform(0.55, 0.75, count),
        focus_share=rng.dirichlet(np.ones(count)),
        white_mv=rng.uniform(0.005, 0.02),
        pink_mv=rng.uniform(0.01, 0.03),
        wander_mv=rng.uniform(0.03, 0.25, 3),
    )


def beat_schedule(
    seconds: float,
    *,
    seed: int,
    heart_rate_bpm: float | None = None,
    ectopic_rate: float = 0.04,
    person: Person | None = None,
) -> Schedule:
    """R-peak times in seconds and the class of every beat in ``seconds`` of recording (NumPy, reproducible).

    ``ectopic_rate`` is the share of ectopic beats, split as :data:`ECTOPIC_SHARES`; with no
    ``heart_rate_bpm``, the recording's mean rate is drawn between 58 and 82 beats per minute.
    """
    if not seconds > 0:
        raise ValueError(f"a recording must last a positive number of seconds, not {seconds}")
    rng = np.random.default_rng([seed, 0])
    if heart_rate_bpm is None:
        heart_rate_bpm = float(rng.uniform(58, 82))
    if not 20 <= heart_rate_bpm <= 220:
        raise ValueError(f"heart rate {heart_rate_bpm} bpm is outside the plausible 20-220 bpm")
    if not 0 <= ectopic_rate < 0.5:
        raise ValueError(f"ectopic_rate must be a fraction of beats in [0, 0.5), not {ectopic_rate}")
    person = person or draw_person(np.random.default_rng([seed, 1]))
    mean_rr = 60.0 / heart_rate_bpm
    count = int(seconds / mean_rr * 1.5) + 8
    beat = np.arange(count)
    # Respiratory sinus arrhythmia (~0.25 Hz), drifts over minutes and over hours, and jitter.
    drift = np.cumsum(rng.normal(0.0, 0.004, count))
    width = min(301, count)
    drift -= np.convolve(drift, np.ones(width) / width, mode="same")
    hours = beat * mean_rr / 3600.0
    hourly = HOURLY_DRIFT * np.sin(2 * np.pi * hours / rng.uniform(4.0, 10.0) + rng.uniform(0, 2 * np.pi))
    base = mean_rr * (1 + 0.04 * np.sin(2 * np.pi * 0.25 * mean_rr * beat) + drift + hourly)
    base = np.clip(base + rng.normal(0, 0.01, count), 0.55 * mean_rr, 1.7 * mean_rr)
    base *= activity(beat * mean_rr, rng)
    classes = np.zeros(count, np.int8)
    draw = rng.random(count)
    edge = 0.0
    for label, share in ECTOPIC_SHARES.items():  # three classes, not a loop over beats
        classes[(draw >= edge) & (draw < edge + ectopic_rate * share)] = label
        edge += ectopic_rate * share
    classes[:2] = NORMAL  # each ectopic beat needs a normal one before it
    previous = np.r_[NORMAL, classes[:-1]]
    classes[np.isin(previous, ECTOPIC_CLASSES)] = NORMAL  # no runs of ectopic beats
    focus = np.where(
        np.isin(classes, (VENTRICULAR, FUSION)), rng.choice(len(person.foci), count, p=person.focus_share), -1
    )
    rr = base.copy()  # rr[k] is the interval that ends at beat k
    v = classes == VENTRICULAR
    coupling = person.coupling[np.maximum(focus, 0)] + rng.normal(0, 0.02, count)
    rr[v] = base[v] * coupling[v]
    after_v = np.r_[False, v[:-1]]
    rr[after_v] = base[after_v] * (2.0 - coupling[np.r_[v[:-1], False]])  # a full compensatory pause
    s = classes == SUPRAVENTRICULAR
    rr[s] = base[s] * rng.uniform(0.7, 0.92, count)[s]  # often barely premature
    after_s = np.r_[False, s[:-1]]
    rr[after_s] = base[after_s] * rng.uniform(1.0, 1.1, count)[after_s]  # the sinus node resets: no full pause
    f = classes == FUSION
    rr[f] = base[f] * rng.uniform(0.93, 1.0, count)[f]  # on time: the sinus beat and the focus collide
    times = 0.5 + np.cumsum(rr)
    keep = times < seconds - 0.5
    return Schedule(times[keep], classes[keep], focus[keep], mean_rr)


ACTIVITY_PER_HOUR = 0.7  # bouts of activity (walking, stairs) per hour, on average


def activity(seconds: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """The factor on the RR interval at each time: 1 at rest, down to about 0.55 during bouts of activity of
    a few minutes, reached and left over about a minute.

    >>> factor = activity(np.arange(0.0, 7200.0, 10.0), np.random.default_rng(0))
    >>> bool(0.5 < factor.min() < 1.0 and factor.max() == 1.0)
    True
    """
    seconds = np.asarray(seconds, float)
    span = float(seconds[-1]) if len(seconds) else 0.0
    bouts = rng.poisson(ACTIVITY_PER_HOUR * span / 3600.0) + 1
    starts = rng.uniform(0, max(span, 1.0), bouts)
    lengths = np.clip(rng.lognormal(np.log(300.0), 0.8, bouts), 60.0, 1800.0)
    depths = rng.uniform(0.15, 0.45, bouts)
    factor = np.ones(len(seconds))
    for start, length, depth in zip(starts, lengths, depths, strict=True):  # a loop over bouts, not beats
        rise = np.clip((seconds - start) / 60.0, 0, 1) * np.clip((start + length - seconds) / 60.0, 0, 1)
        factor = np.minimum(factor, 1 - depth * rise)
    return factor


def lagged_rr(rr: np.ndarray, beats: float = QT_LAG_BEATS) -> np.ndarray:
    """An exponential moving average of the RR intervals over about ``beats`` beats, started at the median.

    >>> lagged_rr(np.array([1.0, 1.0, 2.0, 1.0]), beats=1).tolist()
    [1.0, 1.0, 2.0, 1.0]
    """
    import pandas as pd  # noqa: PLC0415 - not a declared dependency of the package (NumPy is)

    if beats < 1:
        raise ValueError(f"the lag must be at least one beat, not {beats}")
    start = np.median(rr) if len(rr) else 1.0
    # pandas' recursive form (adjust=False): y[i] = (1 - alpha) y[i-1] + alpha x[i], from y[-1] = start
    averaged = pd.Series(np.r_[start, rr]).ewm(alpha=1.0 / beats, adjust=False).mean().to_numpy()
    return averaged[1:]


def _slow_walk(rng, count: int, beats: int, scale: float) -> np.ndarray:
    """A smooth random wander over about ``beats`` beats, of standard deviation about ``scale``."""
    walk = np.cumsum(rng.normal(0, 1, count))
    width = max(1, min(beats, count))
    walk -= np.convolve(walk, np.ones(width) / width, mode="same")
    return scale * walk / max(float(walk.std()), 1e-9)


def beat_waves(schedule: Schedule, person: Person, rng: np.random.Generator) -> np.ndarray:
    """Every beat's five waves (beats × 5 × 3: centre s, width s, amplitude mV), on the host."""
    times, classes, focus = schedule.times, schedule.classes, schedule.focus
    count = len(times)
    waves = np.broadcast_to(person.normal, (count, 5, 3)).copy()
    ventricular = person.foci[np.maximum(focus, 0)]
    v = classes == VENTRICULAR
    waves[v] = ventricular[v]
    f = classes == FUSION
    mix = rng.uniform(0.3, 0.7, count)[:, None, None]
    waves[f] = ((1 - mix) * waves + mix * ventricular)[f]
    waves[f, 0, 2] = person.normal[0, 2]  # the sinus P wave came first
    s = classes == SUPRAVENTRICULAR
    waves[s, 0, 2] = person.normal[0, 2] * rng.uniform(-0.8, 0.6, count)[s]  # an ectopic P: flat or inverted
    waves[s, 0, 0] = rng.uniform(-0.2, -0.12, count)[s]
    # P and T follow the lagged RR interval; the QRS complex keeps its width.
    rr = np.diff(times, prepend=times[0] - (np.median(np.diff(times)) if count > 1 else 1.0))
    stretch = np.sqrt(np.clip(lagged_rr(rr), 0.3, 2.0))
    waves[:, _SCALES, 0] *= stretch[:, None]
    waves[:, _SCALES, 1] *= stretch[:, None]
    # Amplitude and axis: breathing, wander over minutes, jitter; and a gain that drifts over hours.
    breathing = np.sin(2 * np.pi * 0.25 * times + rng.uniform(0, 2 * np.pi))
    axis = _slow_walk(rng, count, 200, AXIS_WANDER) + 0.03 * breathing
    gain = 1 + QRS_RESPIRATORY_MODULATION * breathing + rng.normal(0, QRS_AMPLITUDE_JITTER, count)
    hours = times / 3600.0
    gain *= 1 + 0.1 * np.sin(2 * np.pi * hours / rng.uniform(3.0, 9.0) + rng.uniform(0, 2 * np.pi))
    # Body position: every so often (minutes to an hour) the patient turns, and the heart's axis, the
    # lead's gain and the T wave change together, in a second or so.
    posture = _postures(times, rng)
    waves[:, :, 2] *= posture[:, 0:1]  # gain of the whole beat
    waves[:, 1:4, 2] *= gain[:, None]
    waves[:, 2, 2] *= 1 + axis + posture[:, 1]
    waves[:, 3, 2] *= 1 - 2 * (axis + posture[:, 1])
    waves[:, 4, 2] *= posture[:, 2]
    return waves


POSTURE_MINUTES = 20.0  # the mean time between changes of body position


def _postures(times: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """Per beat: the gain, axis shift and T-wave scale of the body position it was recorded in (beats × 3)."""
    seconds = float(times[-1]) + 1.0 if len(times) else 1.0
    changes = np.sort(rng.uniform(0, seconds, rng.poisson(seconds / 60 / POSTURE_MINUTES) + 1))
    states = np.column_stack(
        [
            rng.uniform(0.7, 1.3, len(changes) + 1),
            rng.uniform(-0.25, 0.25, len(changes) + 1),
            rng.uniform(0.6, 1.3, len(changes) + 1),
        ]
    )
    states[0] = (1.0, 0.0, 1.0)
    which = np.searchsorted(changes, times)
    settle = np.clip((times - changes[np.maximum(which - 1, 0)]) / 1.5, 0, 1)  # about 1.5 s to settle
    settle[which == 0] = 1.0
    before = states[np.maximum(which - 1, 0)]
    return before + settle[:, None] * (states[which] - before)


def draw_artefacts(seconds: float, fs: float, rate: float, rng: np.random.Generator) -> Artefacts:
    """Stretches of artefact covering about ``rate`` of the recording, 1 to 20 s each, at the stress test's
    SNRs, half electrode motion and half muscle; they do not overlap."""
    if not 0 <= rate < 0.5:
        raise ValueError(f"noise_rate must be a fraction of the recording in [0, 0.5), not {rate}")
    durations = np.clip(rng.lognormal(np.log(3.0), 0.7, int(rate * seconds / 3.5) + 1), 1.0, 20.0)
    if rate == 0 or seconds < 30:
        return _no_artefacts()
    starts = np.sort(rng.uniform(2.0, seconds - 22.0, len(durations)))
    stops = starts + durations
    keep = np.r_[True, starts[1:] > stops[:-1] + 1.0]  # drop a stretch that starts inside the one before
    starts, stops = starts[keep], stops[keep]
    count = len(starts)
    return Artefacts(
        starts=np.round(starts * fs).astype(np.int64),
        stops=np.round(stops * fs).astype(np.int64),
        kinds=rng.integers(0, 2, count).astype(np.int8),
        snr_db=rng.choice(np.array(STRESS_SNR_DB, float), count),
    )


def pink_noise(n: int, rng, xp=np, low_hz: float = 0.5, fs: float = 250.0):
    """``n`` samples of 1/f noise above ``low_hz`` with unit standard deviation, made by ``xp`` from ``rng``.

    >>> x = pink_noise(10_000, np.random.default_rng(0))
    >>> round(float(x.std()), 3)
    1.0
    """
    return shaped_noise(n, rng, xp, fs=fs, low_hz=low_hz, slope=0.5)


def shaped_noise(n: int, rng, xp=np, *, fs: float, low_hz: float, high_hz: float | None = None, slope: float = 0.0):
    """Unit-variance noise whose amplitude spectrum falls as ``f**-slope`` between ``low_hz`` and ``high_hz``
    (a soft edge above it), made in the FFT by ``xp``."""
    spectrum = xp.fft.rfft(rng.standard_normal(n))
    freqs = xp.fft.rfftfreq(n, d=1.0 / fs)
    spectrum /= xp.maximum(freqs, low_hz) ** slope
    if high_hz is not None:
        spectrum /= 1 + (freqs / high_hz) ** 4
    spectrum[freqs < low_hz] = 0
    noise = xp.fft.irfft(spectrum, n)
    return noise / noise.std()


def _sum_waves(xp, t, times_dev, centres, widths, amplitudes, nearest):
    """The waves of each sample's own beat and of both neighbours, summed (premature beats stay continuous)."""
    out = xp.zeros(len(t), dtype=xp.float64)
    beats = len(times_dev)
    for offset in (-1, 0, 1):
        neighbour = nearest + offset
        exists = (neighbour >= 0) & (neighbour < beats)
        beat = xp.clip(neighbour, 0, beats - 1)
        dt = (t - times_dev[beat])[:, None] - centres[beat]
        waves = (amplitudes[beat] * xp.exp(-0.5 * (dt / widths[beat]) ** 2)).sum(axis=1)
        out += xp.where(exists, waves, 0.0)
    return out


def synthesize(
    seconds: float | None = None,
    *,
    hours: float | None = None,
    fs: float = 250.0,
    seed: int = 0,
    xp=np,
    heart_rate_bpm: float | None = None,
    ectopic_rate: float = 0.04,
    noise_rate: float = 0.03,
) -> SyntheticECG:
    """Generate ``seconds`` (or ``hours``) of ECG at ``fs`` Hz; ``xp=cupy`` makes the samples on the GPU.

    ``ectopic_rate`` is the share of ectopic beats (S, V and F together), ``noise_rate`` the share of the
    recording under artefact; with no ``heart_rate_bpm`` the mean rate is drawn from ``seed``.
    """
    if (seconds is None) == (hours is None):
        raise TypeError("give the duration as either seconds= or hours=")
    seconds = hours * 3600.0 if hours is not None else seconds
    if not fs >= 50:
        raise ValueError(f"sampling rate {fs} Hz is too low for an ECG (the QRS complex needs at least 50 Hz)")
    person = draw_person(np.random.default_rng([seed, 1]))
    schedule = beat_schedule(
        seconds, seed=seed, heart_rate_bpm=heart_rate_bpm, ectopic_rate=ectopic_rate, person=person
    )
    artefacts = draw_artefacts(seconds, fs, noise_rate, np.random.default_rng([seed, 2]))
    times, classes = schedule.times, schedule.classes
    if len(times) < 3:
        raise ValueError(f"{seconds} s holds fewer than 3 beats; ask for a longer recording")
    waves = beat_waves(schedule, person, np.random.default_rng([seed, 3]))
    n = int(round(seconds * fs))
    times_dev = xp.asarray(times)
    midpoints = (times_dev[1:] + times_dev[:-1]) / 2
    centres, widths, amplitudes = (xp.asarray(np.ascontiguousarray(waves[..., k])) for k in range(3))
    rng = _generator(xp, seed)
    signal = xp.empty(n, dtype=xp.float32)
    phases = np.random.default_rng([seed, 4]).uniform(0, 2 * np.pi, 3)
    for start in range(0, n, CHUNK):  # a loop over blocks of samples, bounding the temporaries
        t = xp.arange(start, min(n, start + CHUNK), dtype=xp.float64) / fs
        nearest = xp.searchsorted(midpoints, t)  # the beat whose span holds each sample
        piece = _sum_waves(xp, t, times_dev, centres, widths, amplitudes, nearest)
        for freq, amp, phase in zip((0.23, 0.05, 0.011), person.wander_mv, phases, strict=True):
            piece += amp * xp.sin(2 * np.pi * freq * t + phase)  # baseline wander: breathing, movement
        signal[start : start + len(t)] = piece
    noise = person.white_mv * rng.standard_normal(n) + person.pink_mv * pink_noise(n, rng, xp, fs=fs)
    if len(artefacts):
        noise += _artefact_noise(xp, n, fs, artefacts, person.qrs_peak_to_peak, rng)
    signal += noise.astype(xp.float32)
    r_peaks = np.round(times * fs).astype(np.int64)
    qrs_start = (waves[:, 1, 0] - 2.5 * waves[:, 1, 1]).clip(max=-0.01)
    onsets = np.round((times + qrs_start) * fs).astype(np.int64)
    labels = classes.copy()
    labels[under_artefact(r_peaks, artefacts, max_snr_db=NOISE_LABEL_DB)] = NOISE
    return SyntheticECG(signal, float(fs), r_peaks, labels, classes, onsets, artefacts)


def _artefact_noise(xp, n: int, fs: float, artefacts: Artefacts, qrs_pp: float, rng):
    """Electrode-motion and muscle noise, each switched on in its stretches at its SNR.

    The SNR is the stress test's: signal power (QRS peak to peak)² / 8 over the noise's mean square.
    """
    motion = shaped_noise(n, rng, xp, fs=fs, low_hz=0.5, high_hz=15.0, slope=1.0)
    muscle = shaped_noise(n, rng, xp, fs=fs, low_hz=5.0, high_hz=0.4 * fs)
    rms = qrs_pp / np.sqrt(8) / 10 ** (artefacts.snr_db / 20)
    index = xp.arange(n, dtype=xp.int64)
    which = xp.searchsorted(xp.asarray(artefacts.starts), index, side="right") - 1
    inside = (which >= 0) & (index < xp.asarray(artefacts.stops)[xp.maximum(which, 0)])
    which = xp.maximum(which, 0)
    gain = xp.where(inside, xp.asarray(rms)[which], 0.0)
    is_motion = xp.asarray(artefacts.kinds == ELECTRODE_MOTION)[which]
    return gain * xp.where(is_motion, motion, muscle)


def under_artefact(samples, artefacts: Artefacts, *, max_snr_db: float = np.inf) -> np.ndarray:
    """True for each sample position inside a stretch of artefact at ``max_snr_db`` or below.

    >>> a = Artefacts(np.array([10, 50]), np.array([20, 60]), np.array([0, 1]), np.array([0.0, 24.0]))
    >>> under_artefact(np.array([5, 15, 55]), a).tolist(), under_artefact(np.array([15, 55]), a, max_snr_db=6).tolist()
    ([False, True, True], [True, False])
    """
    samples = np.asarray(samples)
    if len(artefacts) == 0:
        return np.zeros(len(samples), bool)
    which = np.searchsorted(artefacts.starts, samples, side="right") - 1
    safe = np.maximum(which, 0)
    return (which >= 0) & (samples < artefacts.stops[safe]) & (artefacts.snr_db[safe] <= max_snr_db)


def _generator(xp, seed: int):
    if xp is np:
        return np.random.default_rng(seed)
    return xp.random.default_rng(seed)


def save_truth(ecg: SyntheticECG | Truth, path) -> None:
    """Keep the ground truth (beats, classes, onsets, artefact stretches, sampling rate) beside the CSV, as
    ``.npz``."""
    a = ecg.artefacts
    np.savez(
        path,
        r_peaks=ecg.r_peaks,
        labels=ecg.labels,
        fs=ecg.fs,
        beat_classes=ecg.beat_classes if ecg.beat_classes is not None else ecg.labels,
        onsets=ecg.onsets if ecg.onsets is not None else ecg.r_peaks,
        artefact_starts=a.starts,
        artefact_stops=a.stops,
        artefact_kinds=a.kinds,
        artefact_snr_db=a.snr_db,
    )


@dataclass(frozen=True)
class Truth:
    """The ground truth of a recording without its samples (what :func:`save_truth` keeps)."""

    r_peaks: np.ndarray
    labels: np.ndarray
    fs: float
    beat_classes: np.ndarray
    onsets: np.ndarray
    artefacts: Artefacts


def load_truth(path, *, full: bool = False):
    """R peaks, labels and sampling rate saved by :func:`save_truth`; with ``full=True``, a :class:`Truth`."""
    with np.load(path) as data:
        if not full:
            return data["r_peaks"], data["labels"], float(data["fs"])
        keys = set(data.files)
        labels = data["labels"]
        artefacts = (
            Artefacts(*(data[f"artefact_{k}"] for k in ("starts", "stops", "kinds", "snr_db")))
            if "artefact_starts" in keys
            else _no_artefacts()
        )
        return Truth(
            data["r_peaks"],
            labels,
            float(data["fs"]),
            data["beat_classes"] if "beat_classes" in keys else labels,
            data["onsets"] if "onsets" in keys else data["r_peaks"],
            artefacts,
        )
