"""The book's figure style in one place: small PNGs (dpi 90), constrained layout, labelled horizontal bars, and
the boxes and arrows its diagrams are drawn with (``canvas``, ``box``, ``arrow``).

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


def new_figure(rows: int = 1, cols: int = 1, size=(8, 3), *, margins: Mapping[str, float] | None = None):
    """``matplotlib.pyplot.subplots`` in the book's style; returns (figure, axes).

    The layout is matplotlib's constrained layout, unless ``margins`` (``subplots_adjust``'s left, right, top,
    bottom, hspace, wspace) fixes it: a figure drawn on every run of a pipeline saves the layout's search, which
    is most of a simple figure's drawing time.
    """
    import matplotlib.pyplot as plt

    if margins is None:
        return plt.subplots(rows, cols, figsize=size, dpi=DPI, layout="constrained")
    fig, axes = plt.subplots(rows, cols, figsize=size, dpi=DPI)
    fig.subplots_adjust(**margins)
    return fig, axes


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


def canvas(width: float, height: float, size=(9.0, 3.6)):
    """An empty drawing area ``width`` × ``height`` in data units, equal aspect, no axes; returns (figure, axes)."""
    import matplotlib.pyplot as plt  # the caller's backend: inline in a notebook, Agg in write_all

    figure, axes = plt.subplots(figsize=size, dpi=DPI)
    axes.set_xlim(0, width)
    axes.set_ylim(0, height)
    axes.set_aspect("equal")
    axes.axis("off")
    return figure, axes


def box(axes, x, y, w, h, text="", color="white", edge="black", size=9, weight="normal", text_color="black"):
    """A rectangle with its lower-left corner at (``x``, ``y``) and ``text`` centred in it."""
    from matplotlib.patches import Rectangle

    axes.add_patch(Rectangle((x, y), w, h, facecolor=color, edgecolor=edge, linewidth=1))
    if text:
        axes.text(x + w / 2, y + h / 2, text, ha="center", va="center", fontsize=size, weight=weight, color=text_color)


def arrow(axes, start, end, text="", color="black", size=8, offset=(0.0, 0.15)):
    """An arrow from ``start`` to ``end`` with ``text`` above its middle (moved by ``offset``)."""
    axes.annotate("", xy=end, xytext=start, arrowprops={"arrowstyle": "->", "color": color, "lw": 1.2})
    if text:
        middle = ((start[0] + end[0]) / 2 + offset[0], (start[1] + end[1]) / 2 + offset[1])
        axes.text(*middle, text, ha="center", va="bottom", fontsize=size, color=color)
