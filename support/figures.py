"""The book's figure style in one place: small PNGs (dpi 90), constrained layout, labelled horizontal bars.

>>> import matplotlib
>>> matplotlib.use("Agg")
>>> fig, axes = new_figure(size=(4, 2))
>>> labelled_bars(axes, {"a": 1.0, "b": 10.0}, label=lambda value: f"{value:.0f}×")
>>> [text.get_text() for text in axes.texts]
['1×', '10×']
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

DPI = 90


def new_figure(rows: int = 1, cols: int = 1, size=(8, 3)):
    """``matplotlib.pyplot.subplots`` in the book's style; returns (figure, axes)."""
    import matplotlib.pyplot as plt

    return plt.subplots(rows, cols, figsize=size, dpi=DPI, layout="constrained")


def labelled_bars(
    axes,
    values: Mapping[str, float],
    *,
    label: Callable[[float], str],
    color: str | Sequence[str] = "tab:blue",
) -> None:
    """Horizontal bars, the first entry on top, each with its value written just past its end."""
    axes.barh(list(values), list(values.values()), color=color)
    axes.invert_yaxis()
    for y, value in enumerate(values.values()):
        axes.annotate(label(value), (value, y), xytext=(4, 0), textcoords="offset points", va="center")
