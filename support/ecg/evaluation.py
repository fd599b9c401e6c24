"""Judging the anomaly scores honestly: three splits, a model chosen on validation, and what the flags hold.

A detector can look good for the wrong reason. An earlier version of the chapter cut each beat at the midpoints
to its neighbours; the beat before a premature one lost its T wave, and the model flagged the *neighbours* of
ectopic beats while the overall AUROC still looked fine. The tools here make that visible:

- :func:`beat_context` names each detected beat by what it is and what is next to it (its ectopic class,
  noise, the normal beat right after an ectopic one, right before one, next to noise, or an ordinary normal
  beat);
- :func:`split_rows` splits the beats into training, validation and test rows: at random, by time, or by
  blocks of a few minutes drawn at random (so that every true beat and every stretch of artefact, detected or
  not, belongs to exactly one part; :mod:`support.ecg.events` scores the true events that way);
- :func:`choose_model` trains one model per latent size and keeps the epoch whose validation scores flag the
  anomalies best: the test rows play no part in the choice;
- :func:`flag_table` sets the threshold on the validation rows (flag as many as they hold anomalies) and
  counts, per context, how many test beats that threshold flags.

>>> import numpy as np
>>> r_peaks = np.array([100, 300, 420, 700, 900, 1100])
>>> labels = np.array([0, 0, 2, 0, 0, 4])
>>> beat_context(np.array([101, 299, 421, 702, 899, 1098]), r_peaks, labels).tolist()
['normal', 'normal before an ectopic beat', 'ventricular', 'normal after an ectopic beat', \
'normal next to noise', 'noise']
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np

from support.arrays import to_host
from support.ecg import metrics, pipeline, vae
from support.ecg.beats import true_labels_of
from support.ecg.synthetic import ECTOPIC_CLASSES, KINDS, NOISE, NORMAL, is_ectopic

#: The contexts of :func:`beat_context`, anomalies first.
CONTEXTS = (
    "supraventricular",
    "ventricular",
    "fusion",
    "noise",
    "normal after an ectopic beat",
    "normal before an ectopic beat",
    "normal next to noise",
    "normal",
)
#: The anomalies a detector should flag, by context name.
ANOMALIES = {KINDS[label]: label for label in (*ECTOPIC_CLASSES, NOISE)}


def beat_context(peaks, r_peaks: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """For each detected peak, what its true beat is and, for a normal beat, which anomaly is next to it."""
    peaks = np.asarray(peaks)
    if len(r_peaks) == 0:
        raise ValueError("the ground truth has no beats")
    beat = np.searchsorted((r_peaks[1:] + r_peaks[:-1]) / 2, peaks)
    own = labels[beat]
    before = np.r_[NORMAL, labels[:-1]][beat]  # the true beat before this one
    after = np.r_[labels[1:], NORMAL][beat]
    context = np.full(len(peaks), "normal", dtype=object)
    context[(before == NOISE) | (after == NOISE)] = "normal next to noise"
    context[is_ectopic(after)] = "normal before an ectopic beat"
    context[is_ectopic(before)] = "normal after an ectopic beat"
    for label in (*ECTOPIC_CLASSES, NOISE):
        context[own == label] = KINDS[label]
    return context


PARTS = ("train", "validation", "test")


@dataclass(frozen=True)
class Split:
    """Row indices (on the beats' device) of the training, validation and test beats.

    For a split ``by="blocks"``, ``block_parts`` holds the part (0 train, 1 validation, 2 test) of each block
    of ``block_samples`` samples, so that any sample position (a true beat, a stretch of artefact) has a part.
    """

    train: object
    validation: object
    test: object
    by: str
    block_parts: np.ndarray | None = None
    block_samples: int | None = None

    def part_of(self, samples) -> np.ndarray:
        """The part (0, 1 or 2) of each sample position; only for a split by blocks."""
        if self.block_parts is None:
            raise ValueError(f"a split by {self.by!r} has no parts for sample positions; split by 'blocks'")
        block = np.clip(np.asarray(samples) // self.block_samples, 0, len(self.block_parts) - 1)
        return self.block_parts[block]

    def counts(self, labels_per_row: np.ndarray) -> list[dict]:
        """How many rows of each label each part holds (labels of all rows, on the host)."""
        labels_per_row = np.asarray(labels_per_row)
        table = []
        for part in PARTS:
            chosen = labels_per_row[getattr(self, part).cpu().numpy()]
            table.append({"part": part} | {KINDS[k]: int((chosen == k).sum()) for k in KINDS})
        return table


def split_rows(
    count: int,
    *,
    by: str = "random",
    seed: int = 0,
    device="cpu",
    fractions=(0.6, 0.2, 0.2),
    peaks=None,
    block_s: float = 300.0,
    fs: float = 250.0,
):
    """Split ``count`` beats into training, validation and test rows (drawn with NumPy on the host, then moved
    to ``device``: the same seed gives the same split on either side).

    ``by="random"`` draws the rows at random (with ``seed``); ``by="time"`` keeps the first 60 % of the
    recording for training, the next 20 % for validation and the last 20 % for the test, so the test beats
    come from hours the model never saw (the heart rate drifts over hours); ``by="blocks"`` cuts the recording
    into blocks of ``block_s`` seconds, shuffles them and gives each part its share of the blocks (needs the
    rows' ``peaks``).

    >>> s = split_rows(10, by="time")
    >>> s.train.tolist(), s.validation.tolist(), s.test.tolist()
    ([0, 1, 2, 3, 4, 5], [6, 7], [8, 9])
    """
    import torch

    if by not in ("random", "time", "blocks"):
        raise ValueError(f"split by 'random', 'time' or 'blocks', not {by!r}")
    if len(fractions) != 3 or min(fractions) <= 0 or abs(sum(fractions) - 1) > 1e-9:
        raise ValueError(f"need three positive fractions that add up to 1, got {fractions}")
    first = int(round(fractions[0] * count))
    second = first + int(round(fractions[1] * count))
    if first < 2 or second - first < 2 or count - second < 2:
        raise ValueError(f"{count} beats are too few to split into training, validation and test sets")
    rng = np.random.default_rng(seed)
    if by == "blocks":
        if peaks is None or len(peaks) != count:
            raise ValueError("a split by blocks needs the R-peak sample of every row (peaks=)")
        peaks = np.asarray(peaks)
        block_samples = max(1, int(round(block_s * fs)))
        blocks = int(peaks.max()) // block_samples + 1
        # the blocks shuffled, then cut at the fractions: each part gets its share of the blocks exactly
        cuts = np.round(np.cumsum(fractions)[:2] * blocks).astype(int)
        parts = np.empty(blocks, np.int64)
        parts[rng.permutation(blocks)] = np.repeat([0, 1, 2], np.diff(np.r_[0, cuts, blocks]))
        part = parts[peaks // block_samples]
        indices = [np.flatnonzero(part == k) for k in range(3)]
        if min(len(i) for i in indices) < 2:
            raise ValueError(f"{blocks} blocks of {block_s:g} s are too few to split three ways; use shorter blocks")
        tensors = [torch.as_tensor(i, device=device) for i in indices]
        return Split(*tensors, by, parts, block_samples)
    order = np.arange(count) if by == "time" else rng.permutation(count)
    order = torch.as_tensor(order, device=device)
    return Split(order[:first], order[first:second], order[second:], by)


@dataclass
class Choice:
    """What :func:`choose_model` tried and kept: a table row per latent size, the best model, its settings."""

    per_latent: list[dict]
    model: object
    latent: int
    epochs: int
    validation_score: float


def choose_model(
    train_beats, validation_beats, validation_anomalous, *, latents=(2, 4, 8), epochs=12, batch_size=4096, seed=0
):
    """Train one VAE per latent size on ``train_beats``; keep the (latent, epoch) whose scores of
    ``validation_beats`` give the highest precision at the labelled rate, then the highest AUROC (remaining
    ties: fewer dimensions, earlier epoch). ``validation_anomalous`` is a boolean NumPy array, one per
    validation beat."""
    validation_anomalous = np.asarray(validation_anomalous, bool)
    if len(validation_anomalous) != len(validation_beats):
        raise ValueError(f"{len(validation_beats)} validation beats but {len(validation_anomalous)} labels")
    per_latent, best = [], None
    for latent in latents:
        per_epoch = []

        def judge(epoch, model, per_epoch=per_epoch, latent=latent):
            nonlocal best
            scores = vae.anomaly_scores(model, validation_beats).cpu().numpy()
            value = (
                metrics.precision_at_rate(scores, validation_anomalous),
                metrics.auroc(scores, validation_anomalous),
            )
            per_epoch.append(value)
            if best is None or value > best[0]:
                best = (value, latent, epoch + 1, copy.deepcopy(model))

        vae.train(
            train_beats,
            latent=latent,
            epochs=epochs,
            batch_size=batch_size,
            seed=seed,
            progress=False,
            after_epoch=judge,
        )
        top = max(range(len(per_epoch)), key=lambda e: (per_epoch[e], -e))
        per_latent.append(
            {
                "latent": latent,
                "best epoch": top + 1,
                "precision at rate": per_epoch[top][0],
                "AUROC": per_epoch[top][1],
                f"precision after {epochs} epochs": per_epoch[-1][0],
            }
        )
    value, latent, epoch, model = best
    model.eval()
    return Choice(per_latent, model, latent, epoch, value[0])


#: The score that flags as many beats as the labels mark (:func:`support.ecg.metrics.threshold_at_rate`).
threshold_at_rate = metrics.threshold_at_rate


def flag_table(scores, contexts, threshold: float) -> list[dict]:
    """Per context: how many beats there are and how many score at or above ``threshold`` (flagged).

    >>> table = flag_table([3.0, 0.1, 2.0, 0.2], np.array(["ventricular", "normal", "normal", "noise"]), 1.0)
    >>> [(r["context"], r["beats"], r["flagged"]) for r in table]
    [('ventricular', 1, 1), ('noise', 1, 0), ('normal', 2, 1)]
    """
    scores, contexts = np.asarray(scores), np.asarray(contexts)
    if scores.shape != contexts.shape:
        raise ValueError(f"need one context per score, got {scores.shape} and {contexts.shape}")
    flagged = scores >= threshold
    table = []
    for name in CONTEXTS:
        chosen = contexts == name
        if chosen.any():
            count, hits = int(chosen.sum()), int(flagged[chosen].sum())
            table.append({"context": name, "beats": count, "flagged": hits, "share flagged": hits / count})
    return table


def summary(flags: list[dict]) -> dict[str, float]:
    """Recall of each anomaly kind and the precision of all flags, from :func:`flag_table`'s table."""
    by_name = {r["context"]: r for r in flags}
    flagged = sum(r["flagged"] for r in flags)
    true = sum(by_name[name]["flagged"] for name in ANOMALIES if name in by_name)
    out = {f"recall {name}": by_name[name]["share flagged"] for name in ANOMALIES if name in by_name}
    out["precision"] = true / flagged if flagged else float("nan")
    return out


@dataclass
class Judgement:
    """The test beats judged: the flag table, their scores and contexts, and the validation threshold."""

    flags: list[dict]
    scores: np.ndarray
    contexts: np.ndarray
    threshold: float


def judge_test(model, beats, split: Split, peaks, r_peaks, labels) -> Judgement:
    """Score the validation and test rows, set the threshold on validation, and tabulate the test flags."""
    peaks = np.asarray(peaks)
    indices = {name: getattr(split, name).cpu().numpy() for name in ("validation", "test")}
    validation_scores = vae.anomaly_scores(model, beats[split.validation]).cpu().numpy()
    anomalous = true_labels_of(peaks[indices["validation"]], r_peaks, labels) != NORMAL
    threshold = threshold_at_rate(validation_scores, anomalous)
    test_scores = vae.anomaly_scores(model, beats[split.test]).cpu().numpy()
    contexts = beat_context(peaks[indices["test"]], r_peaks, labels)
    return Judgement(flag_table(test_scores, contexts, threshold), test_scores, contexts, threshold)


def evaluate_recording(ecg, *, by: str = "random", latents=(2, 4, 8), epochs: int = 12, seed: int = 0) -> dict:
    """The chapter's whole evaluation on one synthetic recording, as one summary row.

    The beats are found and embedded where ``ecg.signal`` lives (CuPy: on the GPU), handed to PyTorch without
    a copy, split ``by`` random or time, the model chosen on validation, and the test flags judged.
    """
    found = pipeline.find_beats(ecg.signal, pipeline.PipelineConfig(fs=ecg.fs, seed=seed, progress=False))
    tensor = pipeline.to_torch(found.matrix)
    peaks = to_host(found.peaks)
    split = split_rows(len(found), by=by, seed=seed, device=tensor.device, peaks=peaks, fs=ecg.fs)
    anomalous = true_labels_of(peaks[split.validation.cpu().numpy()], ecg.r_peaks, ecg.labels) != NORMAL
    choice = choose_model(
        tensor[split.train], tensor[split.validation], anomalous, latents=latents, epochs=epochs, seed=seed
    )
    judged = judge_test(choice.model, tensor, split, peaks, ecg.r_peaks, ecg.labels)
    return {"split": by, "latent": choice.latent, "epochs": choice.epochs} | summary(judged.flags)
