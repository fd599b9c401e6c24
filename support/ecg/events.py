"""Scoring per TRUE beat and per true stretch of artefact, not per detected row.

A table of detected rows hides what the detector never kept: a true beat with no row counts nowhere. The
tools here start from the truth instead, as ANSI/AAMI EC57 scores beat detectors:

- :func:`match_beats` pairs detected R peaks with true ones, one to one, within a match window (150 ms);
- :func:`detector_table`: per true class, how many true beats the detector found (sensitivity), and how many
  of its detections are true beats (positive predictivity, +P), in and out of artefact;
- :func:`event_recall`: per true class, the share of true beats that the anomaly flags caught, where a true
  beat with no kept row counts as **missed**; and per stretch of artefact, whether it was reported.

**What counts as reporting a stretch of artefact.** The pipeline prunes beat candidates whose intervals to
their neighbours are implausible (under 0.3 s or over 2 s): noise opens the gate several times a second, so
most candidates in a loud stretch are pruned before the model sees them. A pruned candidate is evidence of an
unreadable stretch, so the chapter reports it as one: a stretch counts as found when one of its kept rows is
flagged *or* one of its candidates was pruned. :func:`event_recall` returns both figures (flags alone, and
flags or pruning), and :func:`pruned_outside_artefact` counts the pruned candidates in clean signal: the
false alarms that rule raises.

>>> truth = np.array([100, 300, 500, 700])
>>> found, matched = match_beats(np.array([103, 290, 640, 900]), truth, tolerance=20)
>>> found.tolist(), matched.tolist()
([0, 1, -1, -1], [True, True, False, False])
"""

from __future__ import annotations

import numpy as np

from support.ecg.synthetic import AAMI_LETTERS, ECTOPIC_CLASSES, KINDS, NOISE, NORMAL, Artefacts, under_artefact

#: The match window of ANSI/AAMI EC57 for beat detection, in seconds.
MATCH_WINDOW_S = 0.15


def match_beats(detected, truth: np.ndarray, tolerance: int) -> tuple[np.ndarray, np.ndarray]:
    """Pair detections with true beats, one to one: a pair is a detection and a true beat that are each
    other's nearest, no more than ``tolerance`` samples apart.

    Returns, per true beat, the index of its detection (-1 if none), and per detection whether it was paired.
    """
    detected = np.asarray(detected, dtype=np.int64)
    truth = np.asarray(truth, dtype=np.int64)
    if len(detected) and np.any(np.diff(detected) < 0) or len(truth) and np.any(np.diff(truth) < 0):
        raise ValueError("detections and true beats must be sorted by sample")
    found = np.full(len(truth), -1, np.int64)
    matched = np.zeros(len(detected), bool)
    if len(detected) == 0 or len(truth) == 0:
        return found, matched
    nearest_detection = _nearest(detected, truth)
    nearest_truth = _nearest(truth, detected)
    mutual = nearest_truth[nearest_detection] == np.arange(len(truth))
    close = np.abs(detected[nearest_detection] - truth) <= tolerance
    paired = mutual & close
    found[paired] = nearest_detection[paired]
    matched[found[paired]] = True
    return found, matched


def _nearest(sorted_positions: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Index of the nearest of ``sorted_positions`` to each query (ties: the earlier)."""
    right = np.clip(np.searchsorted(sorted_positions, queries), 0, len(sorted_positions) - 1)
    left = np.maximum(right - 1, 0)
    use_left = np.abs(sorted_positions[left] - queries) <= np.abs(sorted_positions[right] - queries)
    return np.where(use_left, left, right)


def detector_table(
    detected, r_peaks: np.ndarray, beat_classes: np.ndarray, fs: float, *, artefacts: Artefacts | None = None
) -> tuple[list[dict], dict]:
    """Per true class: true beats, beats found within :data:`MATCH_WINDOW_S`, sensitivity; and a summary
    with the positive predictivity of all detections, in clean signal and under artefact.

    Detections are attributed to no class (a false detection has no true beat), so +P is one figure for
    all classes, split by where the detection lies.
    """
    detected = np.sort(np.asarray(detected, dtype=np.int64))
    tolerance = max(1, int(round(MATCH_WINDOW_S * fs)))
    found, matched = match_beats(detected, r_peaks, tolerance)
    table = []
    for label in (NORMAL, *ECTOPIC_CLASSES):
        chosen = np.asarray(beat_classes) == label
        if chosen.any():
            hits = int((found[chosen] >= 0).sum())
            table.append(
                {
                    "class": AAMI_LETTERS[label],
                    "true beats": int(chosen.sum()),
                    "found": hits,
                    "sensitivity": hits / int(chosen.sum()),
                }
            )
    noisy = under_artefact(detected, artefacts) if artefacts is not None else np.zeros(len(detected), bool)
    summary = {
        "sensitivity": float((found >= 0).mean()) if len(found) else float("nan"),
        "+P": float(matched.mean()) if len(matched) else float("nan"),
        "+P in clean signal": float(matched[~noisy].mean()) if (~noisy).any() else float("nan"),
        "+P under artefact": float(matched[noisy].mean()) if noisy.any() else float("nan"),
        "false detections": int((~matched).sum()),
        "false detections under artefact": int((~matched & noisy).sum()),
    }
    return table, summary


def event_recall(
    kept_peaks,
    flagged,
    pruned,
    r_peaks: np.ndarray,
    labels: np.ndarray,
    artefacts: Artefacts,
    fs: float,
    *,
    evaluated_beats: np.ndarray | None = None,
    evaluated_rows: np.ndarray | None = None,
    evaluated_stretches: np.ndarray | None = None,
) -> tuple[list[dict], list[dict]]:
    """Recall per true event: per class of true beat, and per stretch of artefact by SNR.

    ``kept_peaks`` are the R peaks of the kept rows and ``flagged`` whether each row scored at or above the
    threshold; ``pruned`` the candidates the plausibility rule dropped. ``evaluated_*`` choose the beats, rows
    and stretches to count (the test part of a split by blocks); by default all.

    Per class: true beats, those with a kept row within the match window, those flagged, the recall per true
    beat (flagged / true beats: a beat with no row is missed) and per row (flagged / beats with a row). Per
    SNR: stretches, found by a flag, found by a flag or a pruned candidate.
    """
    kept_peaks = np.asarray(kept_peaks, dtype=np.int64)
    flagged = np.asarray(flagged, bool)
    if flagged.shape != kept_peaks.shape:
        raise ValueError(f"need one flag per kept row, got {flagged.shape} and {kept_peaks.shape}")
    rows_in = np.ones(len(kept_peaks), bool) if evaluated_rows is None else np.asarray(evaluated_rows, bool)
    beats_in = np.ones(len(r_peaks), bool) if evaluated_beats is None else np.asarray(evaluated_beats, bool)
    tolerance = max(1, int(round(MATCH_WINDOW_S * fs)))
    order = np.argsort(kept_peaks, kind="stable")
    found, _ = match_beats(kept_peaks[order], r_peaks, tolerance)
    row = np.where(found >= 0, order[np.maximum(found, 0)], -1)  # the kept row of each true beat
    has_row = (row >= 0) & rows_in[np.maximum(row, 0)]
    caught = has_row & flagged[np.maximum(row, 0)]
    by_class = []
    for label in (*ECTOPIC_CLASSES, NOISE, NORMAL):
        chosen = (np.asarray(labels) == label) & beats_in
        if chosen.any():
            true, with_row, hits = int(chosen.sum()), int(has_row[chosen].sum()), int(caught[chosen].sum())
            by_class.append(
                {
                    "class": KINDS[label],
                    "true beats": true,
                    "with a row": with_row,
                    "flagged": hits,
                    "per true beat": hits / true,
                    "per row": hits / with_row if with_row else float("nan"),
                }
            )
    by_snr = _stretch_recall(
        kept_peaks, flagged & rows_in, np.asarray(pruned, dtype=np.int64), artefacts, evaluated_stretches
    )
    return by_class, by_snr


def _stretch_recall(kept_peaks, flagged, pruned, artefacts: Artefacts, evaluated) -> list[dict]:
    chosen = np.ones(len(artefacts), bool) if evaluated is None else np.asarray(evaluated, bool)
    flag_positions = np.sort(kept_peaks[flagged])
    pruned = np.sort(pruned)

    def any_in(positions):
        first = np.searchsorted(positions, artefacts.starts)
        last = np.searchsorted(positions, artefacts.stops)
        return last > first

    by_flag, by_prune = any_in(flag_positions), any_in(pruned)
    table = []
    for snr in sorted(set(artefacts.snr_db[chosen].tolist()), reverse=True):
        here = chosen & (artefacts.snr_db == snr)
        count = int(here.sum())
        table.append(
            {
                "SNR dB": snr,
                "stretches": count,
                "flagged": int(by_flag[here].sum()),
                "flagged or pruned": int((by_flag | by_prune)[here].sum()),
                "recall": float((by_flag | by_prune)[here].mean()),
            }
        )
    return table


def pruned_outside_artefact(pruned, artefacts: Artefacts) -> int:
    """How many pruned candidates lie in clean signal (no stretch of artefact): the pruning rule's false alarms.

    >>> a = Artefacts(np.array([10]), np.array([20]), np.array([0]), np.array([0.0]))
    >>> pruned_outside_artefact(np.array([5, 15, 25]), a)
    2
    """
    pruned = np.asarray(pruned, dtype=np.int64)
    return int((~under_artefact(pruned, artefacts)).sum())


def pruned_candidates(candidates, kept_peaks) -> np.ndarray:
    """The candidates (host arrays) that the plausibility rule dropped.

    >>> pruned_candidates(np.array([5, 9, 12, 40]), np.array([9, 12])).tolist()
    [5, 40]
    """
    candidates, kept_peaks = np.asarray(candidates), np.asarray(kept_peaks)
    return candidates[~np.isin(candidates, kept_peaks)]
