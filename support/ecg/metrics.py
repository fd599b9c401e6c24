"""How well anomaly scores separate labelled anomalies from normal beats (NumPy, on the host).

:func:`separation` is the per-class loop every score table of chapter 6 runs (the baseline table on the
synthetic test beats, record 100's table against its annotated classes): each class against the normal
beats alone, with its AUROC and average precision.

>>> auroc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1])
0.75
>>> precision_at_rate([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1])
0.5
"""

from __future__ import annotations

import numpy as np


def _checked(scores, labels) -> tuple[np.ndarray, np.ndarray]:
    scores = np.asarray(scores, dtype=np.float64)
    labels = np.asarray(labels).astype(bool)
    if scores.shape != labels.shape or scores.ndim != 1:
        raise ValueError(f"need one score per label, got shapes {scores.shape} and {labels.shape}")
    if not np.isfinite(scores).all():
        raise ValueError("the scores contain NaN or infinite values")
    if labels.all() or not labels.any():
        raise ValueError("need both anomalies and normal beats to measure how well scores separate them")
    return scores, labels


def _average_ranks(values: np.ndarray) -> np.ndarray:
    order = np.argsort(values, kind="stable")
    ranks = np.empty(len(values))
    ranks[order] = np.arange(1, len(values) + 1)
    unique, inverse = np.unique(values, return_inverse=True)
    sums = np.bincount(inverse, weights=ranks, minlength=len(unique))
    return (sums / np.bincount(inverse, minlength=len(unique)))[inverse]  # ties share their mean rank


def auroc(scores, labels) -> float:
    """Area under the ROC curve: the chance that a random anomaly scores above a random normal beat (ties ½)."""
    scores, labels = _checked(scores, labels)
    ranks = _average_ranks(scores)
    positives, negatives = labels.sum(), (~labels).sum()
    return float((ranks[labels].sum() - positives * (positives + 1) / 2) / (positives * negatives))


def precision_at_rate(scores, labels) -> float:
    """Precision among the top-scored beats when as many are flagged as there are labelled anomalies."""
    scores, labels = _checked(scores, labels)
    flagged = np.argsort(-scores, kind="stable")[: labels.sum()]
    return float(labels[flagged].mean())


def average_precision(scores, labels) -> float:
    """The mean of the precision at the rank of each anomaly, beats ranked by score (ties broken by order).

    >>> average_precision([0.9, 0.8, 0.7, 0.1], [1, 0, 1, 0])
    0.8333333333333333
    """
    scores, labels = _checked(scores, labels)
    ranked = labels[np.argsort(-scores, kind="stable")]
    hits = np.cumsum(ranked)
    precision = hits / np.arange(1, len(ranked) + 1)
    return float(precision[ranked].mean())


def threshold_at_rate(scores, anomalous) -> float:
    """The score that flags as many beats as ``anomalous`` marks (the lowest flagged score).

    >>> threshold_at_rate([0.1, 0.9, 0.5, 0.7], [0, 1, 1, 0])
    0.7
    """
    scores = np.asarray(scores, dtype=np.float64)
    count = int(np.asarray(anomalous, bool).sum())
    if count == 0:
        raise ValueError("no labelled anomalies to set the threshold by")
    return float(np.sort(scores)[::-1][count - 1])


def separation(scores, groups: dict, normal) -> dict[str, dict]:
    """Per group (``groups``: name → a boolean mask over ``scores``), its members against the ``normal`` rows, the
    rows of neither left out: the number of members, the AUROC and the average precision (``"AP"``). A group with
    no members, or none when no row is normal, is left out.

    >>> scores = [0.1, 0.2, 0.9, 0.8, 0.5]
    >>> normal = [True, True, False, False, False]
    >>> separation(scores, {"S": [0, 0, 1, 0, 0], "V": [0, 0, 0, 1, 1], "F": [0, 0, 0, 0, 0]}, normal)
    {'S': {'beats': 1, 'AUROC': 1.0, 'AP': 1.0}, 'V': {'beats': 2, 'AUROC': 1.0, 'AP': 1.0}}
    """
    scores = np.asarray(scores, dtype=np.float64)
    normal = np.asarray(normal, bool)
    if normal.shape != scores.shape:
        raise ValueError(f"need one normal flag per score, got shapes {normal.shape} and {scores.shape}")
    table = {}
    for name, members in groups.items():
        members = np.asarray(members, bool)
        if members.shape != scores.shape:
            raise ValueError(f"group {name!r}: need one flag per score, got shape {members.shape}")
        if not members.any() or not normal.any():
            continue
        chosen = members | normal
        table[name] = {
            "beats": int(members.sum()),
            "AUROC": auroc(scores[chosen], members[chosen]),
            "AP": average_precision(scores[chosen], members[chosen]),
        }
    return table
