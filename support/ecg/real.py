"""Real recordings: five minutes of MIT-BIH Arrhythmia Database record 208 (no annotations), the whole of record
100 with its reference beat annotations, and two published detectors to compare the chapter's beats with.

The excerpt (``support/ecg/data/mitdb_208_excerpt.npz``, installed with the package, its attribution beside it)
is lead MLII at 360 Hz, as SciPy shipped it until version 1.11. It carries no beat annotations, so no anomaly
score can be judged on it; what can be checked is whether the chapter's detector finds the beats that
independent, published detectors find. :func:`published_beats` runs two of them from ``py-ecg-detectors`` (Pan &
Tompkins 1985; Hamilton 2002, on the CPU), and :func:`agreement` scores one list of beats against another the
way ANSI/AAMI EC57 scores a detector against reference annotations: pairs within 150 ms, sensitivity and
positive predictivity.

Record 100 (``support/ecg/data/100.hea``, ``100.dat``, ``100.atr``: 30 min, two leads at 360 Hz, as
``MIT-LCP/wfdb-python`` ships it in ``sample-data/``; attribution in ``data/mitdb_100.md``) carries the database's
reference annotations, so there the detectors are scored against the truth, per AAMI beat class
(:func:`detector_scores`; :func:`shortfalls` sets each beside the better published one, :func:`naive_peaks` the
baseline that shows how easy the record is), and the anomaly scores against the annotated classes
(:func:`class_scores`).

>>> import numpy as np
>>> agreement(np.array([100, 460, 820]), np.array([102, 470, 1200]), fs=360.0)
{'reference beats': 3, 'tested beats': 3, 'matched': 2, 'sensitivity': 0.667, 'PPV': 0.667}
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from support.arrays import to_host
from support.ecg import baselines, events, metrics, reading

#: The committed excerpt, package data of support.ecg (so an installed package finds it too).
EXCERPT = Path(__file__).resolve().parent / "data" / "mitdb_208_excerpt.npz"
#: MIT-BIH record 100 (WFDB header, signal and reference annotations), package data of support.ecg.
RECORD_100 = Path(__file__).resolve().parent / "data" / "100"
#: The published detectors :func:`published_beats` runs, by the name the chapter prints.
DETECTORS = {"Pan-Tompkins": "pan_tompkins_detector", "Hamilton": "hamilton_detector"}


def load_mitdb_excerpt(path=EXCERPT, *, xp=np) -> reading.Recording:
    """The excerpt in millivolts (``(raw - baseline) / gain``), float32, made by ``xp`` (CuPy: on the GPU)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(
            f"no excerpt at {path}: it ships with the book in support/ecg/data; "
            "a checkout without it: git checkout -- support/ecg/data"
        )
    with np.load(path) as data:
        raw, baseline, gain, fs = data["raw"], int(data["baseline"]), float(data["gain_per_mv"]), float(data["fs"])
    millivolts = ((raw.astype(np.float32) - baseline) / gain).astype(np.float32)
    return reading.Recording(xp.asarray(millivolts), f"MIT-BIH record 208, 5 min excerpt ({path.name})", fs=fs)


def published_beats(signal, fs: float) -> dict[str, np.ndarray]:
    """R-peak samples from each of :data:`DETECTORS` (py-ecg-detectors, on the CPU, on a host copy)."""
    try:
        from ecgdetectors import Detectors  # noqa: PLC0415  # optional: the error below names the fix
    except ImportError:
        raise ModuleNotFoundError(
            "the published detectors need py-ecg-detectors: pip install py-ecg-detectors"
        ) from None
    host = np.asarray(to_host(signal), dtype=np.float64)
    detectors = Detectors(fs)
    return {
        name: np.sort(np.asarray(getattr(detectors, method)(host), dtype=np.int64))
        for name, method in DETECTORS.items()
    }


def naive_peaks(signal, fs: float, *, min_interval_s: float = 0.2, height_share: float = 0.5) -> np.ndarray:
    """R-peak samples by the simplest rule there is: the raw signal's local maxima at least ``min_interval_s``
    apart, above ``height_share`` of its 99th percentile (after its median is subtracted), with
    ``scipy.signal.find_peaks``: no filter, no adaptive threshold, no plausibility rule. The baseline that tells
    whether a recording is hard enough to rank detectors on (on a host copy).

    >>> beat = np.r_[np.zeros(100), 1.0, np.zeros(99)]
    >>> naive_peaks(np.tile(beat, 3), fs=200.0)
    array([100, 300, 500])
    """
    from scipy.signal import find_peaks  # noqa: PLC0415  # the chapter's pipeline never imports SciPy's signal module

    host = np.asarray(to_host(signal), dtype=np.float64)
    centred = host - np.median(host)
    peaks, _ = find_peaks(
        centred, distance=max(1, round(min_interval_s * fs)), height=height_share * np.percentile(centred, 99)
    )
    return peaks.astype(np.int64)


def agreement(reference, tested, fs: float, *, window_s: float = events.MATCH_WINDOW_S) -> dict:
    """How well ``tested`` beats agree with ``reference`` beats: pairs within ``window_s``, one to one; the
    share of reference beats paired (sensitivity) and of tested beats paired (positive predictivity)."""
    reference = np.sort(np.asarray(reference, dtype=np.int64))
    tested = np.sort(np.asarray(tested, dtype=np.int64))
    found, matched = events.match_beats(tested, reference, max(1, int(round(window_s * fs))))
    pairs = int((found >= 0).sum())
    return {
        "reference beats": len(reference),
        "tested beats": len(tested),
        "matched": pairs,
        "sensitivity": round(pairs / len(reference), 3) if len(reference) else float("nan"),
        "PPV": round(pairs / len(tested), 3) if len(tested) else float("nan"),
    }


def agreement_table(beat_lists: dict[str, np.ndarray], fs: float) -> list[dict]:
    """:func:`agreement` for every ordered pair of the named beat lists (reference first)."""
    table = []
    for reference, ref_beats in beat_lists.items():
        for tested, test_beats in beat_lists.items():
            if reference != tested:
                table.append({"reference": reference, "tested": tested} | agreement(ref_beats, test_beats, fs))
    return table


def load_mitdb_100(record=RECORD_100, *, xp=np) -> tuple[reading.Recording, reading.BeatAnnotations]:
    """Lead MLII of MIT-BIH record 100 in millivolts, float32, made by ``xp`` (CuPy: on the GPU), and its
    reference beat annotations (:func:`support.ecg.reading.read_wfdb`; needs the ``wfdb`` package)."""
    if not Path(f"{record}.hea").is_file():
        raise FileNotFoundError(
            f"no record at {record}.hea: record 100 ships with the book in support/ecg/data; "
            "a checkout without it: git checkout -- support/ecg/data"
        )
    recording = reading.read_wfdb(record, channel="MLII", annotation="atr")
    signal = xp.asarray(recording.signal)
    source = f"MIT-BIH record 100, lead MLII ({Path(record).name}.dat)"
    return reading.Recording(signal, source, recording.repaired, fs=recording.fs), recording.annotations


def detector_scores(beat_lists: dict[str, np.ndarray], annotations: reading.BeatAnnotations, fs: float) -> list[dict]:
    """Each detector against the reference annotations, as ANSI/AAMI EC57 scores a beat detector: a detection
    matches an annotated beat within 150 ms (one to one); per AAMI class the annotated beats and the sensitivity,
    and per detector a row of class ``"all"`` with the positive predictivity of all its detections (a false
    detection has no annotated beat, hence no class).

    >>> from support.ecg.reading import BeatAnnotations
    >>> truth = BeatAnnotations(np.array([100, 460, 820]), np.array(["N", "V", "N"]), np.array(["N", "V", "N"]))
    >>> rows = detector_scores({"d": np.array([101, 900])}, truth, 360.0)
    >>> [(r["class"], r["sensitivity"], r.get("+P")) for r in rows]
    [('N', 0.5, None), ('V', 0.0, None), ('all', 0.3333, 0.5)]
    """
    tolerance = max(1, int(round(events.MATCH_WINDOW_S * fs)))
    truth = np.asarray(annotations.samples, dtype=np.int64)
    order = np.argsort(truth, kind="stable")
    truth, classes = truth[order], np.asarray(annotations.classes)[order]
    table = []
    for name, found in beat_lists.items():
        found = np.sort(np.asarray(found, dtype=np.int64))
        paired, matched = events.match_beats(found, truth, tolerance)
        for letter in reading.AAMI_SYMBOLS:
            chosen = classes == letter
            if chosen.any():
                hits = int((paired[chosen] >= 0).sum())
                table.append(
                    {
                        "detector": name,
                        "class": letter,
                        "annotated beats": int(chosen.sum()),
                        "found": hits,
                        "sensitivity": round(hits / int(chosen.sum()), 4),
                    }
                )
        table.append(
            {
                "detector": name,
                "class": "all",
                "annotated beats": len(truth),
                "found": int((paired >= 0).sum()),
                "sensitivity": round(float((paired >= 0).mean()), 4) if len(truth) else float("nan"),
                "detections": len(found),
                "+P": round(float(matched.mean()), 4) if len(found) else float("nan"),
            }
        )
    return table


def shortfalls(table: list[dict], references) -> list[dict]:
    """Per detector of a :func:`detector_scores` table that is not one of ``references``: its overall sensitivity
    and +P, and its **shortfall**, the larger of the two gaps below the better reference in each (the best of
    ``references`` on sensitivity, and on +P): 0 or less is level with or ahead of the better reference in both.

    >>> rows = [
    ...     {"detector": "ref", "class": "all", "sensitivity": 0.998, "+P": 0.999},
    ...     {"detector": "a", "class": "all", "sensitivity": 0.997, "+P": 1.0},
    ...     {"detector": "a", "class": "N", "sensitivity": 0.5},
    ... ]
    >>> shortfalls(rows, ["ref"])
    [{'detector': 'a', 'sensitivity': 0.997, '+P': 1.0, 'shortfall': 0.001}]
    """
    overall = {r["detector"]: r for r in table if r["class"] == "all"}
    missing = [name for name in references if name not in overall]
    if missing or not references:
        raise ValueError(f"the table holds no reference detector {missing or references}; it has {sorted(overall)}")
    best = {metric: max(overall[name][metric] for name in references) for metric in ("sensitivity", "+P")}
    return [
        {
            "detector": name,
            "sensitivity": row["sensitivity"],
            "+P": row["+P"],
            "shortfall": round(max(best[metric] - row[metric] for metric in best), 4),
        }
        for name, row in overall.items()
        if name not in references
    ]


def annotated_classes(peaks, annotations: reading.BeatAnnotations, fs: float) -> np.ndarray:
    """The AAMI class of the annotated beat each detected peak matches within 150 ms (one to one), ``""`` for a
    detection that matches none (left out of :func:`class_scores`).

    >>> from support.ecg.reading import BeatAnnotations
    >>> truth = BeatAnnotations(np.array([100, 460, 820]), np.array(["N", "A", "V"]), np.array(["N", "S", "V"]))
    >>> annotated_classes(np.array([99, 300, 470, 1000]), truth, 360.0).tolist()
    ['N', '', 'S', '']
    """
    peaks = np.asarray(peaks, dtype=np.int64)
    order = np.argsort(peaks, kind="stable")
    truth = np.asarray(annotations.samples, dtype=np.int64)
    by_truth = np.argsort(truth, kind="stable")
    tolerance = max(1, int(round(events.MATCH_WINDOW_S * fs)))
    found, _ = events.match_beats(peaks[order], truth[by_truth], tolerance)
    classes = np.full(len(peaks), "", dtype="<U1")
    hit = found >= 0
    classes[order[found[hit]]] = np.asarray(annotations.classes)[by_truth][hit]
    return classes


def class_scores(scores: dict, classes, *, against: str = "N", kinds=("S", "V")) -> list[dict]:
    """Per method (``scores``: name → one score per detected beat) and per annotated class in ``kinds``: the
    AUROC and average precision of that class against the beats of class ``against``, with the counts.
    Beats of other classes, and detections matching no annotated beat, are left out of each comparison.

    >>> rows = class_scores({"m": np.array([0.1, 0.2, 0.9, 0.8])}, np.array(["N", "N", "S", "V"]))
    >>> [(r["class"], r["AUROC"]) for r in rows]
    [('S', 1.0), ('V', 1.0)]
    """
    classes = np.asarray(classes)
    groups = {kind: classes == kind for kind in kinds}
    table = []
    for method, values in scores.items():
        values = np.asarray(baselines._tensor(values).detach().cpu().numpy(), dtype=np.float64)
        if values.shape != classes.shape:
            raise ValueError(f"{method}: {values.shape[0]} scores for {classes.shape[0]} beats")
        for kind, scored in metrics.separation(values, groups, classes == against).items():
            table.append(
                {
                    "method": method,
                    "class": kind,
                    "beats": scored["beats"],
                    f"{against} beats": int((classes == against).sum()),
                    "AUROC": scored["AUROC"],
                    "AP": scored["AP"],
                }
            )
    return table
