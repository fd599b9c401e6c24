"""How regular a rhythm is, and how early its premature beats come: why the RR score finds what it finds.

The RR prematurity score (:func:`support.ecg.baselines.rr_prematurity`) sees a supraventricular beat only
when the interval before it is shorter than the rhythm's own beat-to-beat variation. :func:`rhythm_summary`
puts the two side by side for one recording, synthetic or annotated:

- the **RMSSD**, the root mean square of successive differences between normal-to-normal intervals, the
  standard short-term measure of beat-to-beat variability; :data:`HEALTHY_RMSSD_MS` is the range the chapter
  compares it with, for healthy adults at rest. Source: F. Shaffer and J. P. Ginsberg (2017), "An Overview of
  Heart Rate Variability Metrics and Norms", *Frontiers in Public Health* 5:258 (doi:10.3389/fpubh.2017.00258),
  which surveys published norms and cautions that they depend on the recording's length, age and sex: the
  range is a yardstick for the order of magnitude, not a diagnostic bound;
- the **prematurity** of the supraventricular beats: the interval before each, divided by the median of the
  normal-to-normal intervals around it (1 is on time).

:func:`rate_per_minute` is the heart rate of every minute from detected beats, computed where the beats are
(CuPy: on the GPU, with nothing copied to the host): the stage chapter 6's last exercise adds.

>>> import numpy as np
>>> times = np.arange(12) * 1.0
>>> times[6] -= 0.2  # one beat 20 % early
>>> normal = np.ones(12, bool); normal[6] = False
>>> summary = rhythm_summary(times, normal, ~normal)
>>> summary["RMSSD (ms)"], summary["S beats"], summary["S prematurity (median)"]
(0.0, 1, 0.8)
"""

from __future__ import annotations

import numpy as np

from support.arrays import array_module

#: RMSSD of healthy adults, short-term recordings at rest, in ms (the norms Shaffer & Ginsberg 2017 survey).
HEALTHY_RMSSD_MS = (20.0, 50.0)


def rmssd_ms(times_s, normal) -> float:
    """RMSSD in ms over the runs of normal beats: successive differences of normal-to-normal intervals only
    (an interval touching an ectopic beat, and the difference next to it, are left out)."""
    times, normal = np.asarray(times_s, dtype=np.float64), np.asarray(normal, bool)
    if times.shape != normal.shape or len(times) < 3:
        raise ValueError(f"need at least 3 beat times, each with a normal flag; got {times.shape} and {normal.shape}")
    rr = np.diff(times)
    nn = normal[1:] & normal[:-1]  # interval k runs from beat k to beat k + 1
    both = nn[1:] & nn[:-1]
    if not both.any():
        return float("nan")
    return float(1000 * np.sqrt(np.mean(np.diff(rr)[both] ** 2)))


def prematurity(times_s, normal, chosen, *, neighbours: int = 8) -> np.ndarray:
    """For each ``chosen`` beat (not the first): the interval before it over the median of the ``neighbours``
    normal-to-normal intervals on each side."""
    times, normal, chosen = (np.asarray(a) for a in (times_s, normal, chosen))
    rr = np.diff(times.astype(np.float64))
    nn = normal[1:] & normal[:-1]
    nn_index, nn_rr = np.flatnonzero(nn), rr[nn]
    out = []
    for beat in np.flatnonzero(chosen.astype(bool)):
        if beat == 0 or len(nn_rr) == 0:
            continue
        at = np.searchsorted(nn_index, beat - 1)
        around = nn_rr[max(0, at - neighbours) : at + neighbours]
        out.append(rr[beat - 1] / np.median(around))
    return np.asarray(out)


def rhythm_summary(times_s, normal, supraventricular) -> dict[str, float]:
    """Mean normal-to-normal interval, RMSSD, the RMSSD as a share of the mean interval, and the count and
    median prematurity of the supraventricular beats."""
    times, normal = np.asarray(times_s, dtype=np.float64), np.asarray(normal, bool)
    rr = np.diff(times)
    mean_nn = float(rr[normal[1:] & normal[:-1]].mean())
    rmssd = rmssd_ms(times, normal)
    early = prematurity(times, normal, supraventricular)
    return {
        "mean NN (s)": round(mean_nn, 3),
        "RMSSD (ms)": round(rmssd, 1),
        "RMSSD / mean NN": round(rmssd / 1000 / mean_nn, 3),
        "S beats": int(np.asarray(supraventricular, bool).sum()),
        "S prematurity (median)": round(float(np.median(early)), 3) if len(early) else float("nan"),
    }


def rate_per_minute(candidates, lengths, fs: float, minutes: int):
    """Mean heart rate (beats per minute) of each of ``minutes`` minutes, where the arrays live (NumPy, or CuPy on
    the GPU): ``candidates`` are beat positions in samples, ``lengths`` the ``len(candidates) - 1`` intervals
    between them. Each interval counts in the minute it ends in; a minute with no interval is 0.

    Two scatter-adds (``add.at``): the sum of the instantaneous rates in each minute, and how many there are.
    ``minutes`` is passed in (the signal's length fixes it), so the GPU is never asked for the largest minute,
    as ``bincount`` would ask it: nothing crosses to the host. Pass at least ``ceil(n_samples / int(60 * fs))``
    (``-(-n_samples // int(60 * fs))``): NumPy raises for a beat past the last minute, but CuPy's scatter-add
    takes the index modulo the length (read in CuPy 14.2's ``_create_scatter_kernel``), so on the GPU that beat
    would silently land in an earlier minute.

    >>> beats = np.arange(0, 180 * 250, 250)  # one beat a second for three minutes at 250 Hz
    >>> rate_per_minute(beats, np.diff(beats), 250.0, minutes=4).tolist()
    [60.0, 60.0, 60.0, 0.0]
    >>> rate_per_minute(beats, np.diff(beats), 250.0, minutes=2)  # too few minutes: NumPy refuses
    Traceback (most recent call last):
    ...
    IndexError: index 2 is out of bounds for axis 0 with size 2
    """
    if len(lengths) != len(candidates) - 1:
        raise ValueError(f"need one interval between each two of {len(candidates)} beats, got {len(lengths)}")
    xp = array_module(candidates)
    minute = candidates[1:] // int(60 * fs)  # the minute each interval ends in
    rate = 60.0 * fs / lengths  # beats per minute, one per interval
    total, beats = xp.zeros(minutes), xp.zeros(minutes)
    xp.add.at(total, minute, rate)
    xp.add.at(beats, minute, 1.0)
    return total / xp.maximum(beats, 1)
