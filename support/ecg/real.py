"""A real recording: five minutes of MIT-BIH Arrhythmia Database record 208, and two published detectors to
compare the chapter's beats with.

The excerpt (``support/ecg/data/mitdb_208_excerpt.npz``, installed with the package, its attribution beside it)
is lead MLII at 360 Hz, as SciPy shipped it until version 1.11. It carries no beat annotations, so no anomaly
score can be judged on it; what can be checked is whether the chapter's detector finds the beats that
independent, published detectors find. :func:`published_beats` runs two of them from ``py-ecg-detectors`` (Pan &
Tompkins 1985; Hamilton 2002, on the CPU), and :func:`agreement` scores one list of beats against another the
way ANSI/AAMI EC57 scores a detector against reference annotations: pairs within 150 ms, sensitivity and
positive predictivity.

>>> import numpy as np
>>> agreement(np.array([100, 460, 820]), np.array([102, 470, 1200]), fs=360.0)
{'reference beats': 3, 'tested beats': 3, 'matched': 2, 'sensitivity': 0.667, 'PPV': 0.667}
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from support.ecg import events, reading

#: The committed excerpt, package data of support.ecg (so an installed package finds it too).
EXCERPT = Path(__file__).resolve().parent / "data" / "mitdb_208_excerpt.npz"
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
        from ecgdetectors import Detectors
    except ImportError:
        raise ModuleNotFoundError(
            "the published detectors need py-ecg-detectors: pip install py-ecg-detectors"
        ) from None
    from support.arrays import to_host

    host = np.asarray(to_host(signal), dtype=np.float64)
    detectors = Detectors(fs)
    return {
        name: np.sort(np.asarray(getattr(detectors, method)(host), dtype=np.int64))
        for name, method in DETECTORS.items()
    }


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
