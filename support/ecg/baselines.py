"""Baselines beside the autoencoder, scored the same way, per true class.

A detector is worth its GPU time only where it beats what a reader would try first. Each scorer here gives
one score per detected row (higher = more unusual), in PyTorch, on the device of its input (CUDA tensors stay
on the GPU):

- :func:`median_distance`: the Euclidean distance of a row to the median of the training rows (no training,
  no labels): the obvious baseline;
- :class:`PCABaseline`: the reconstruction error of a linear autoencoder, principal components of the
  training rows, the number of components chosen on validation rows as the VAE's latent size is;
- :func:`rr_prematurity`: how early a beat came and how long the pause after it was, against the median of
  the intervals around it: the rhythm alone, blind to shape;
- :func:`combine`: two scores on one scale (each divided by its spread over the validation rows) and added,
  as the VAE with the RR feature.

:func:`score_table` judges every method on the same test rows with the same metrics: per true class, the
AUROC and the average precision against the normal beats, and the recall at a threshold set on the
validation rows (flag as many as they hold anomalies).

>>> import torch
>>> train = torch.zeros(10, 4)
>>> median_distance(train, torch.tensor([[0.0, 0, 0, 0], [3.0, 4, 0, 0]])).tolist()
[0.0, 5.0]
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from support.ecg import metrics
from support.ecg.synthetic import ECTOPIC_CLASSES, KINDS, NOISE, NORMAL, is_ectopic

#: The classes of :func:`score_table`, and "ectopic" (S, V and F together).
TABLE_CLASSES = (*(KINDS[c] for c in ECTOPIC_CLASSES), "ectopic", KINDS[NOISE])


def _tensor(x, device=None):
    import torch

    if isinstance(x, torch.Tensor):
        return x if device is None else x.to(device)
    if isinstance(x, np.ndarray):
        tensor = torch.from_numpy(np.ascontiguousarray(x))
    else:
        tensor = torch.from_dlpack(x)  # a CuPy array: same memory, on the GPU
    return tensor if device is None else tensor.to(device)


def median_distance(train, rows, batch_size: int = 65536):
    """The L2 distance of each of ``rows`` to the element-wise median of ``train`` (tensors, beats × width)."""
    import torch

    train, rows = _tensor(train), _tensor(rows)
    centre = train.median(dim=0).values
    parts = [
        torch.linalg.vector_norm(rows[s : s + batch_size] - centre, dim=1) for s in range(0, len(rows), batch_size)
    ]
    return torch.cat(parts) if parts else rows.new_zeros(0)


@dataclass
class PCABaseline:
    """A linear autoencoder: the mean and the first ``components`` principal directions of the training rows."""

    mean: object
    directions: object  # width × components

    @classmethod
    def fit(cls, train, components: int) -> PCABaseline:
        import torch

        train = _tensor(train).float()
        if not 1 <= components < min(train.shape):
            raise ValueError(f"need between 1 and {min(train.shape) - 1} components, not {components}")
        mean = train.mean(dim=0)
        centred = train - mean
        # The directions are the top eigenvectors of the width × width covariance: a product in the rows' dtype on
        # their device, then a small symmetric eigenproblem in float64 on the host, which loads no GPU solver
        # library (tests/test_ecg_baselines.py holds its scores to the SVD's within 1e-4 relative in float32).
        covariance = (centred.T @ centred).double().cpu()
        _, vectors = torch.linalg.eigh(covariance)  # eigenvalues ascending
        directions = vectors[:, -components:].flip(1).to(device=train.device, dtype=train.dtype)
        return cls(mean, directions.contiguous())

    def scores(self, rows, batch_size: int = 65536):
        """The squared reconstruction error of each row through the components."""
        import torch

        rows = _tensor(rows).float()
        parts = []
        for start in range(0, len(rows), batch_size):
            centred = rows[start : start + batch_size] - self.mean
            back = centred @ self.directions @ self.directions.T
            parts.append(((centred - back) ** 2).sum(dim=1))
        return torch.cat(parts) if parts else rows.new_zeros(0)


def choose_pca(train, validation, validation_anomalous, *, components=(2, 4, 8, 16)) -> tuple[PCABaseline, list[dict]]:
    """Fit one :class:`PCABaseline` per number of components and keep the one whose validation scores have the
    highest average precision (ties: fewer components), as the VAE's latent size is chosen."""
    validation_anomalous = np.asarray(validation_anomalous, bool)
    table, best = [], None
    for count in components:
        model = PCABaseline.fit(train, count)
        scores = model.scores(validation).cpu().numpy()
        quality = metrics.average_precision(scores, validation_anomalous)
        table.append({"components": count, "validation AP": quality})
        if best is None or quality > best[0]:
            best = (quality, model)
    return best[1], table


def rr_prematurity(peaks, fs: float, *, neighbours: int = 8):
    """Per beat: ``log(reference / RR before) + max(0, log(RR after / reference))``, where the reference is the
    median of the ``2 * neighbours + 1`` intervals around the beat's own.

    High for a premature beat (short interval before it) and higher still when a compensatory pause follows;
    near zero for a beat on time. The first and last beats use their one interval twice.

    >>> import numpy as np
    >>> scores = rr_prematurity(np.array([0, 100, 200, 300, 360, 500, 600, 700]), 100.0, neighbours=2)
    >>> [round(s, 2) for s in scores.tolist()]
    [0.0, 0.0, 0.0, 0.0, 0.85, -0.34, 0.0, 0.0]
    """
    import torch

    peaks = _tensor(peaks).to(torch.float64)
    if peaks.ndim != 1 or len(peaks) < 3:
        raise ValueError(f"need the R peaks of at least 3 beats, got shape {tuple(peaks.shape)}")
    rr = torch.diff(peaks) / fs
    padded = torch.cat([rr[:1].expand(neighbours), rr, rr[-1:].expand(neighbours)])
    reference = padded.unfold(0, 2 * neighbours + 1, 1).median(dim=1).values  # one per interval
    before = torch.cat([rr[:1], rr])  # the interval that ends at each beat
    after = torch.cat([rr, rr[-1:]])
    ref = torch.cat([reference[:1], reference])
    score = torch.log(ref / before) + torch.clamp(torch.log(after / ref), min=0)
    return score.to(torch.float32)


def spread(scores) -> tuple[float, float]:
    """The median and the interquartile range of ``scores`` (host floats): a scale that a few outliers barely
    move."""
    values = np.asarray(_tensor(scores).detach().cpu().numpy(), dtype=np.float64)
    low, middle, high = np.quantile(values, [0.25, 0.5, 0.75])
    return float(middle), float(max(high - low, 1e-12))


def combine(first, second, first_reference, second_reference):
    """``first`` and ``second`` each centred and scaled by the median and IQR of its reference (the validation
    rows' scores: no labels), then added."""
    (m1, s1), (m2, s2) = spread(first_reference), spread(second_reference)
    return (_tensor(first) - m1) / s1 + (_tensor(second) - m2) / s2


def threshold_at_rate(scores, anomalous) -> float:
    """The lowest of the top-``k`` scores, ``k`` the number of anomalies (as the evaluation sets its flags)."""
    return metrics.threshold_at_rate(scores, anomalous)


def score_table(scores: dict, labels, validation, test) -> list[dict]:
    """One row per method and class: AUROC and average precision of the class against the normal test rows,
    and the recall of the class at the threshold set on the validation rows; and per method a row of class
    ``"all flags"`` with the precision of its flags (:func:`flag_precision`).

    ``scores`` maps a method's name to a score per row (all rows; NumPy, CuPy or torch); ``labels`` is the
    true label of every row (host); ``validation`` and ``test`` are row indices.
    """
    labels = np.asarray(labels)
    validation, test = np.asarray(validation), np.asarray(test)
    table = []
    for method, values in scores.items():
        values = _on_host(values, labels, method)
        threshold = threshold_at_rate(values[validation], labels[validation] != NORMAL)
        test_values, test_labels = values[test], labels[test]
        flagged = test_values >= threshold
        groups = {name: members_of(test_labels, name) for name in TABLE_CLASSES}
        for name, scored in metrics.separation(test_values, groups, test_labels == NORMAL).items():
            table.append(
                {
                    "method": method,
                    "class": name,
                    "test beats": scored["beats"],
                    "AUROC": scored["AUROC"],
                    "AP": scored["AP"],
                    "recall": float(flagged[groups[name]].mean()),
                }
            )
        anomalies = test_labels != NORMAL
        table.append(
            {
                "method": method,
                "class": "all flags",
                "test beats": int(flagged.sum()),
                "precision": float(anomalies[flagged].mean()) if flagged.any() else float("nan"),
            }
        )
    return table


def flag_precision(table: list[dict]) -> dict[str, float]:
    """Per method: the share of its flagged test beats that are anomalies (any class)."""
    return {r["method"]: r["precision"] for r in table if r["class"] == "all flags"}


def _label(name: str) -> int:
    return next(label for label, kind in KINDS.items() if kind == name)


def members_of(labels, name: str) -> np.ndarray:
    """Which of ``labels`` (the synthetic truth's) belong to class ``name`` of :data:`TABLE_CLASSES`
    (``"ectopic"``: S, V and F together)."""
    labels = np.asarray(labels)
    return is_ectopic(labels) if name == "ectopic" else labels == _label(name)


def _on_host(values, labels, method: str) -> np.ndarray:
    """One method's scores as host float64, one per label (else a one-line error naming the method)."""
    values = np.asarray(_tensor(values).detach().cpu().numpy(), dtype=np.float64)
    if values.shape != np.shape(labels):
        raise ValueError(f"{method}: {values.shape[0]} scores for {np.shape(labels)[0]} rows")
    return values


def pivot(table: list[dict], metric: str):
    """One metric of :func:`score_table` as a DataFrame: a row per method, a column per class."""
    frame = pd.DataFrame([r for r in table if r["class"] != "all flags"])
    return frame.pivot(index="method", columns="class", values=metric)[
        [c for c in TABLE_CLASSES if c in set(frame["class"])]
    ].loc[list(dict.fromkeys(frame["method"]))]


def best_method(table: list[dict], name: str, metric: str = "AUROC") -> tuple[str, float]:
    """The method with the highest ``metric`` on class ``name``, and that value."""
    rows = [r for r in table if r["class"] == name]
    if not rows:
        raise ValueError(f"no class {name!r} in the table")
    top = max(rows, key=lambda r: r[metric])
    return top["method"], top[metric]


def value(table: list[dict], method: str, name: str, metric: str = "AUROC") -> float:
    """One cell of :func:`score_table`."""
    for r in table:
        if r["method"] == method and r["class"] == name:
            return r[metric]
    raise KeyError(f"no row for {method!r} and {name!r}")


@dataclass(frozen=True)
class Pick:
    """A method picked on the validation rows: its score there and, for the record, on the test rows."""

    method: str
    validation: float  # ``metric`` of class ``name`` on the validation rows, which made the pick
    test: float  # the same on the test rows, which played no part in it
    name: str
    metric: str
    candidates: dict  # every method considered, with its score on the validation rows


def pick_on_validation(
    scores: dict, labels, validation, test, *, among=None, name: str = "ectopic", metric: str = "AUROC"
) -> Pick:
    """The method of ``scores`` (those named in ``among``, when given) with the highest ``metric`` (``"AUROC"`` or
    ``"AP"``) for class ``name`` against the normal rows, measured on the ``validation`` rows; and that method's
    ``metric`` on the ``test`` rows, which play no part in the choice. Ties go to the first method of ``scores``.

    ``scores`` maps a method's name to one score per row (all rows; NumPy, CuPy or torch); ``labels`` is the true
    label of every row (host); ``validation`` and ``test`` are row indices.

    >>> labels = np.array([0, 0, 0, 1, 0, 0, 0, 1])  # rows 0-3 validate, rows 4-7 test
    >>> scores = {"a": np.array([0, 1, 2, 3, 3, 2, 1, 0.0]), "b": np.array([2, 3, 0, 1, 0, 1, 2, 3.0])}
    >>> pick = pick_on_validation(scores, labels, np.arange(4), np.arange(4, 8))
    >>> pick.method, pick.validation, pick.test  # b would have won on the test rows
    ('a', 1.0, 0.0)
    """
    labels = np.asarray(labels)
    validation, test = np.asarray(validation), np.asarray(test)
    considered = [method for method in scores if among is None or method in among]
    if not considered:
        raise ValueError(f"none of the methods {sorted(scores)} is among {tuple(among)}")

    def measured(method: str, rows: np.ndarray) -> float:
        values, part = _on_host(scores[method], labels, method)[rows], labels[rows]
        scored = metrics.separation(values, {name: members_of(part, name)}, part == NORMAL)
        if name not in scored:
            raise ValueError(f"these rows hold no {name} beats or no normal beats to pick a method by")
        return scored[name][metric]

    on_validation = {method: measured(method, validation) for method in considered}
    best = max(on_validation, key=on_validation.get)
    return Pick(best, on_validation[best], measured(best, test), name, metric, on_validation)
