"""Figures of the ECG chapter. Whatever is summarized (envelopes, histograms) is summarized where the data
lives; only the few numbers a figure draws travel to the host."""

from __future__ import annotations

import numpy as np

from support.arrays import array_module, to_host
from support.ecg.evaluation import CONTEXTS
from support.ecg.synthetic import KINDS
from support.figures import DPI, new_figure


def _figure(rows: int = 1, cols: int = 1, size=(9, 3), margins=None, *, pyplot: bool = True):
    """A figure in the book's style. ``pyplot=False`` draws it on a bare :class:`matplotlib.figure.Figure` with
    the Agg canvas, outside pyplot: for a figure that is only saved (the command line's), which spares the import
    of ``matplotlib.pyplot`` and its choice of backend; a notebook shows only pyplot's figures by itself."""
    if pyplot:
        return new_figure(rows, cols, size, margins=margins)
    from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: PLC0415 - only for a figure to save
    from matplotlib.figure import Figure  # noqa: PLC0415

    # support.figures.new_figure's rule for fixed margins, outside pyplot (new_figure has no such option: adding one
    # there would change a file every chapter imports; tests/test_ecg_cli.py compares the two figures' PNG bytes).
    # Only the figures the command line saves come here, and each has its margins: no layout search to copy.
    if margins is None:
        raise ValueError("a figure drawn outside pyplot takes fixed margins (STREAM_MARGINS, LENGTHS_MARGINS)")
    fig = Figure(figsize=size, dpi=DPI)
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, cols)
    fig.subplots_adjust(**margins)
    return fig, axes


#: Fixed margins of the stream figure, which the pipeline draws on every run (no layout search).
STREAM_MARGINS = {"left": 0.08, "right": 0.98, "top": 0.93, "bottom": 0.11, "hspace": 0.55}
#: Fixed margins of the histogram of beat lengths, which the command line saves on every run.
LENGTHS_MARGINS = {"left": 0.1, "right": 0.98, "top": 0.9, "bottom": 0.17}


def envelope(signal, bins: int = 2000):
    """Minimum and maximum of ``signal`` in ``bins`` equal stretches (computed where the signal lives)."""
    per_bin = max(1, len(signal) // bins)
    usable = signal[: per_bin * (len(signal) // per_bin)].reshape(-1, per_bin)
    return to_host(usable.min(axis=1)), to_host(usable.max(axis=1)), per_bin


def stream_figure(signal, fs: float, peaks=None, zoom=(3600.0, 8.0), *, pyplot: bool = True):
    """The whole recording as a min/max envelope, and ``zoom`` = (start s, length s) with detected R peaks.
    ``pyplot=False``: outside pyplot, for a figure that is only saved (:func:`_figure`)."""
    low, high, per_bin = envelope(signal)
    fig, (overview, detail) = _figure(2, 1, (9, 4.5), margins=STREAM_MARGINS, pyplot=pyplot)
    hours = np.arange(len(low)) * per_bin / fs / 3600
    overview.fill_between(hours, low, high, linewidth=0, color="tab:blue")
    overview.set(xlabel="time (h)", ylabel="mV", title="the whole recording (min/max per bin)")
    start = int(min(zoom[0], max(0.0, len(signal) / fs - zoom[1])) * fs)
    stop = min(len(signal), start + int(zoom[1] * fs))
    piece = to_host(signal[start:stop])
    detail.plot(np.arange(start, stop) / fs, piece, linewidth=0.8, color="tab:blue")
    if peaks is not None:
        shown = to_host(peaks[(peaks >= start) & (peaks < stop)])
        detail.plot(shown / fs, piece[shown - start], "v", color="tab:red", label="detected R peaks")
        detail.legend(loc="upper right")
    detail.set(xlabel="time (s)", ylabel="mV", title=f"{zoom[1]:g} s of it")
    return fig


def filter_figure(signal, clean, response, fs: float, start_s: float = 3600.0, seconds: float = 4.0):
    """A few seconds of the signal, the signal without baseline wander, and the wavelet response."""
    start = int(start_s * fs)
    stop = start + int(seconds * fs)
    t = np.arange(start, stop) / fs
    fig, axes = _figure(3, 1, (9, 4.8))
    for ax, series, title in zip(
        axes, (signal, clean, response), ("as read", "baseline removed", "Ricker-wavelet response"), strict=True
    ):
        ax.plot(t, to_host(series[start:stop]), linewidth=0.8)
        ax.set(ylabel="mV" if title != "Ricker-wavelet response" else "a.u.", title=title)
    axes[-1].set(xlabel="time (s)")
    return fig


def lengths_figure(lengths, fs: float, bins: int = 120, *, pyplot: bool = True):
    """Histogram of the intervals between candidates, in seconds (counted where the intervals live).
    ``pyplot=False``: outside pyplot, for a figure that is only saved (:func:`_figure`)."""
    xp = array_module(lengths)
    counts, edges = xp.histogram(lengths / fs, bins=bins, range=(0.0, 2.4))
    counts, edges = to_host(counts), to_host(edges)
    fig, ax = _figure(size=(7, 2.8), margins=LENGTHS_MARGINS, pyplot=pyplot)
    ax.bar(edges[:-1], counts, width=np.diff(edges), align="edge", color="tab:blue")
    ax.set(xlabel="interval between candidates (s)", ylabel="count", yscale="log", title="beat lengths")
    return fig


def beats_figure(beats, labels, fs: float, per_kind: int = 30):
    """The first ``per_kind`` embedded beats of each ground-truth kind, aligned on the R peak, one panel per
    kind (overlaid in one panel, the noisy rows hid the normal ones), each over the mean of the normal rows
    drawn (grey) for comparison.

    Only those rows travel to the host.
    """
    xp = array_module(beats.matrix)
    labels = np.asarray(labels)
    present = [(label, name) for label, name in KINDS.items() if (labels == label).any()]
    fig, axes = _figure(1, len(present), size=(2.1 * len(present) + 0.6, 2.6))
    axes = np.atleast_1d(axes)
    t = (np.arange(beats.window.width) - beats.window.anchor) / fs
    normal_rows = np.flatnonzero(labels == 0)[:per_kind]
    reference = to_host(beats.matrix[xp.asarray(normal_rows)]).mean(axis=0) if len(normal_rows) else None
    for ax, (label, name) in zip(axes, present, strict=True):
        rows = np.flatnonzero(labels == label)[:per_kind]
        ax.plot(t, to_host(beats.matrix[xp.asarray(rows)]).T, linewidth=0.5, color=f"C{label}", alpha=0.5)
        if reference is not None and label != 0:
            ax.plot(t, reference, color="0.3", linewidth=1.2, linestyle="--", zorder=3)
        ax.set_title(f"{name} ({len(rows)})", fontsize=9)
        ax.set_xlabel("s from R", fontsize=8)
    axes[0].set_ylabel("mV")
    for ax in axes[1:]:
        ax.sharey(axes[0])
    fig.suptitle(f"up to {per_kind} embedded beats of each kind (dashed: mean normal beat)", fontsize=9)
    return fig


def top_normal_beats_figure(beats_matrix, scores, contexts, fs: float, anchor: int, count: int = 4):
    """The ``count`` highest-scoring beats whose ground truth is normal (any context starting with "normal"),
    each over the median of all normal beats: what makes a normal beat look unusual to the model.

    ``beats_matrix`` holds the scored beats' rows (GPU or host), ``scores`` and ``contexts`` one entry per row.
    Only the chosen rows and the median travel to the host. Returns the figure and the chosen rows.
    """
    xp = array_module(beats_matrix)
    scores, contexts = np.asarray(scores, dtype=np.float64), np.asarray(contexts)
    normal = np.flatnonzero(np.char.startswith(contexts.astype(str), "normal"))
    if len(normal) == 0:
        raise ValueError("no normal beats among the scored ones")
    chosen = normal[np.argsort(scores[normal])[::-1][:count]]
    typical = to_host(xp.median(beats_matrix[xp.asarray(normal)], axis=0))
    rows = to_host(beats_matrix[xp.asarray(chosen)])
    t = (np.arange(rows.shape[1]) - anchor) / fs
    fig, axes = _figure(1, len(chosen), size=(2.6 * len(chosen), 2.6))
    for ax, row, index in zip(np.atleast_1d(axes), rows, chosen, strict=True):
        ax.plot(t, typical, color="gray", linewidth=1, label="median normal beat")
        ax.plot(t, row, color="C3", linewidth=1, label="this beat")
        ax.set_title(f"{contexts[index]}\nscore {scores[index]:.1f}", fontsize=8)
        ax.set_xlabel("s from R peak", fontsize=8)
    np.atleast_1d(axes)[0].legend(fontsize=7, loc="lower left")
    return fig, chosen


def latent_figure(latents, scores, labels):
    """The latent means of the scored beats in their first two principal components, coloured by anomaly
    score and by the ground-truth kind."""
    import torch

    centred = latents - latents.mean(dim=0)
    _, _, components = torch.pca_lowrank(centred, q=2, center=False)
    points = (centred @ components).cpu().numpy()
    scores = np.asarray(scores)
    labels = np.asarray(labels)
    fig, (by_score, by_kind) = _figure(1, 2, (9, 3.6))
    shown = by_score.scatter(points[:, 0], points[:, 1], c=np.log10(scores), s=3, cmap="viridis")
    fig.colorbar(shown, ax=by_score, label="log10 anomaly score")
    by_score.set(xlabel="PC 1", ylabel="PC 2", title="coloured by score")
    for label, name in KINDS.items():
        chosen = labels == label
        by_kind.scatter(points[chosen, 0], points[chosen, 1], s=3 if label == 0 else 8, label=name)
    by_kind.set(xlabel="PC 1", title="coloured by ground truth")
    by_kind.legend(markerscale=2, loc="best")
    return fig


def score_histogram_figure(scores, contexts, threshold: float | None = None):
    """Histograms of the anomaly scores per beat context (log scale), and the flagging threshold.

    The picture that shows what a detector flags: a context whose scores sit above the threshold is what the
    model finds, whatever the overall AUROC says.
    """
    scores, contexts = np.asarray(scores, dtype=np.float64), np.asarray(contexts)
    logs = np.log10(np.maximum(scores, 1e-12))
    edges = np.linspace(logs.min(), logs.max(), 61)
    fig, ax = _figure(size=(9, 3.2))
    for index, name in enumerate(CONTEXTS):
        chosen = contexts == name
        if chosen.any():
            counts, _ = np.histogram(logs[chosen], bins=edges)
            ax.stairs(counts, edges, label=f"{name} ({chosen.sum():,})", color=f"C{index}", linewidth=1.2)
    if threshold is not None:
        ax.axvline(np.log10(threshold), color="black", linestyle="--", label="threshold (from validation)")
    ax.set(xlabel="log10 anomaly score", ylabel="beats", yscale="log", title="scores of the test beats, by context")
    ax.legend(fontsize=7, loc="upper right")
    return fig


def scores_over_time_figure(peaks, scores, fs: float, *, title: str = "anomaly score of every beat"):
    """Each beat's score against its time (minutes), log scale: where in the recording the unusual beats lie."""
    peaks = np.asarray(to_host(peaks), dtype=np.float64)
    scores = np.asarray(to_host(scores), dtype=np.float64)
    if peaks.shape != scores.shape:
        raise ValueError(f"need one score per beat, got {scores.shape} and {peaks.shape}")
    fig, ax = _figure(size=(9, 2.6))
    ax.plot(peaks / fs / 60, scores, ".", markersize=3, color="tab:blue")
    ax.set(xlabel="time (min)", ylabel="score", yscale="log", title=title)
    return fig


def top_beats_figure(beats_matrix, scores, fs: float, anchor: int, count: int = 4, peaks=None):
    """The ``count`` highest-scoring rows of ``beats_matrix``, each over the median row (grey), titled with
    the score (and the time, given ``peaks``). Only those rows and the median travel to the host.

    Returns the figure and the chosen rows."""
    xp = array_module(beats_matrix)
    scores = np.asarray(to_host(scores), dtype=np.float64)
    if len(scores) != beats_matrix.shape[0]:
        raise ValueError(f"need one score per row, got {len(scores)} for {beats_matrix.shape[0]} rows")
    chosen = np.argsort(scores)[::-1][:count]
    typical = to_host(xp.median(beats_matrix, axis=0))
    rows = to_host(beats_matrix[xp.asarray(chosen)])
    t = (np.arange(rows.shape[1]) - anchor) / fs
    fig, axes = _figure(1, len(chosen), size=(2.3 * len(chosen), 2.4))
    host_peaks = None if peaks is None else np.asarray(to_host(peaks))
    for ax, row, index in zip(np.atleast_1d(axes), rows, chosen, strict=True):
        ax.plot(t, typical, color="gray", linewidth=1, label="median beat")
        ax.plot(t, row, color="C3", linewidth=1, label="this beat")
        when = "" if host_peaks is None else f" at {host_peaks[index] / fs:.0f} s"
        ax.set_title(f"score {scores[index]:.1f}{when}", fontsize=8)
        ax.set_xlabel("s from R peak", fontsize=8)
    np.atleast_1d(axes)[0].legend(fontsize=7, loc="lower left")
    return fig, chosen
