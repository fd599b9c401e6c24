"""Explanatory diagrams for the chapters, drawn by code so that anyone can regenerate them.

Each ``draw_*`` function returns a matplotlib figure of one idea that is easier to see than to read:

- :func:`draw_aos_vs_soa` (chapter 2): the same records as an array of structures and as a structure of arrays,
  and the 32-byte sectors eight threads of a warp touch when each reads one field;
- :func:`draw_dlpack_handshake` (chapter 3): DLPack's handshake (the consumer names its stream, the producer
  orders its work before it and hands over a capsule with a deleter) beside the CUDA Array Interface (a
  dictionary, and the consumer waits on the producer's stream itself);
- :func:`draw_pool_vs_cudamalloc` (chapter 4): ``cudaMalloc`` per request against a pool that asks the driver once
  and carves its block;
- :func:`draw_page_migration` (chapter 5): managed pages moved one fault at a time against one bulk prefetch;
- :func:`draw_ecg_flow` (chapter 6): the pipeline as libraries and the handoffs between them, none through the host.

``python -m booktools.diagrams`` (``make diagrams``) writes them as PNGs into ``chapters/diagrams/``, where the
chapters' Markdown shows them; a test checks that the committed images are what this code draws.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from booktools.paths import CHAPTERS
from support.figures import DPI, arrow, box, canvas

FOLDER = CHAPTERS / "diagrams"
FIELD_COLORS = {"x": "#4c72b0", "y": "#dd8452", "z": "#55a868", "w": "#c44e52"}


def draw_aos_vs_soa(threads: int = 8):
    """Records of four float32 fields (x, y, z, w); ``threads`` threads each read field x of one record."""
    figure, axes = canvas(38, 14, size=(10, 3.9))
    cell = 1.0
    layouts = {
        "array of structures (AoS): x y z w of record 0, then of record 1, ...": [
            f for _ in range(threads) for f in "xyzw"
        ],
        "structure of arrays (SoA): every x, then every y, ...": [f for f in "xyzw" for _ in range(threads)],
    }
    for row, (title, fields) in enumerate(layouts.items()):
        y = 8.2 - row * 6.6
        axes.text(0.2, y + 3.6, title, fontsize=9, weight="bold", va="bottom")
        read = [i for i, f in enumerate(fields) if f == "x"][:threads]
        for thread in range(threads):
            box(axes, 0.2 + thread * 1.6, y + 2.3, 1.3, 0.8, f"t{thread}", "#eeeeee", size=7)
        for i, field in enumerate(fields):
            box(axes, 0.2 + i * cell, y, cell, cell, field, FIELD_COLORS[field], size=8, text_color="white")
        sectors = sorted({i // 8 for i in read})  # a 32-byte sector holds eight float32 values
        for sector in range(len(fields) // 8):
            axes.plot(
                [0.2 + sector * 8 * cell, 0.2 + (sector + 1) * 8 * cell - 0.1],
                [y - 0.35, y - 0.35],
                color="black" if sector in sectors else "#cccccc",
                lw=3,
            )
        for thread, index in enumerate(read):
            axes.annotate(
                "",
                xy=(0.2 + index * cell + 0.5, y + cell),
                xytext=(0.2 + thread * 1.6 + 0.65, y + 2.3),
                arrowprops={"arrowstyle": "->", "color": "#333333", "lw": 0.8},
            )
        axes.text(
            0.2 + len(fields) * cell + 0.4,
            y + 0.5,
            f"a warp's {len(read)} threads read x:\n{len(sectors)} sector(s) of 32 B move,\n"
            f"{len(read) * 4} of {len(sectors) * 32} bytes are used",
            fontsize=8,
            va="center",
        )
    axes.text(
        0.2,
        0.1,
        "bars: the 32-byte sectors of memory; black ones are moved for this read, grey ones are not",
        fontsize=8,
    )
    return figure


def _note(axes, centre_x, centre_y, text, color, size=7, pad=0.25):
    """A note box centred at (``centre_x``, ``centre_y``), sized to its text (measured, plus ``pad`` on each side).

    Returns its vertical extent, which the lifeline through it skips."""
    from matplotlib.patches import Rectangle

    label = axes.text(centre_x, centre_y, text, ha="center", va="center", fontsize=size, zorder=3)
    extent = label.get_window_extent(axes.figure.canvas.get_renderer()).transformed(axes.transData.inverted())
    width, height = extent.width + 2 * pad, extent.height + 2 * pad
    axes.add_patch(
        Rectangle(
            (centre_x - width / 2, centre_y - height / 2), width, height, facecolor=color, edgecolor="black", lw=1
        )
    )
    return centre_y - height / 2, centre_y + height / 2


def _lifeline(axes, x, top, bottom, gaps):
    """The dashed lifeline at ``x`` from ``top`` down to ``bottom``, interrupted where a note box sits on it."""
    y = top
    for low, high in sorted(gaps, reverse=True):
        axes.plot([x, x], [y, high], color="#999999", lw=1, ls="--", zorder=1)
        y = low
    axes.plot([x, x], [y, bottom], color="#999999", lw=1, ls="--", zorder=1)


def draw_dlpack_handshake():
    """DLPack (left) and the CUDA Array Interface (right), as the calls between producer and consumer.

    Each panel has a lifeline for the consumer and one for the producer; a call is an arrow between them with its
    label between the lifelines, and a step of one side is a note box on its lifeline, sized to its text."""
    figure, axes = canvas(20, 10, size=(10, 5))
    gaps: dict[float, list[tuple[float, float]]] = {}
    for left, title in ((0.3, "DLPack: torch.from_dlpack(x)"), (10.5, "CUDA Array Interface: cupy.asarray(t)")):
        axes.text(left, 9.4, title, fontsize=10, weight="bold")
        box(axes, left, 8.0, 3.4, 0.9, "consumer", "#e8eef7")
        box(axes, left + 5.4, 8.0, 3.4, 0.9, "producer", "#fbeee6")
        gaps[left + 1.7], gaps[left + 7.1] = [], []

    c, p = 0.3 + 1.7, 0.3 + 7.1
    arrow(axes, (c, 6.8), (p, 6.8), "__dlpack__(stream=\nthe consumer's stream)")
    gaps[p].append(_note(axes, p, 5.7, "event: the consumer's stream\nwaits for the producer's work", "#fbeee6"))
    arrow(axes, (p, 3.7), (c, 3.7), "capsule: pointer, shape,\nstrides, dtype, device,\ndeleter")
    gaps[c].append(_note(axes, c, 2.6, "tensor views the\nsame memory", "#e8eef7"))
    arrow(axes, (c, 0.9), (p, 0.9), "tensor dropped: deleter(),\nthe producer may free", color="#777777")

    c, p = 10.5 + 1.7, 10.5 + 7.1
    arrow(axes, (c, 6.8), (p, 6.8), "read\n__cuda_array_interface__")
    fields = '{"data": (pointer, read-only),\n"shape", "strides", "typestr",\n"stream": the producer\'s}'
    arrow(axes, (p, 4.9), (c, 4.9), fields)
    gaps[c].append(_note(axes, c, 3.7, "the consumer syncs on\nthe producer's stream", "#e8eef7"))
    gaps[c].append(_note(axes, c, 2.1, "it keeps the producer's\nobject alive", "#e8eef7"))

    for x, skipped in gaps.items():
        _lifeline(axes, x, 8.0, 0.4, skipped)
    return figure


def draw_pool_vs_cudamalloc():
    """Five requests served by cudaMalloc one by one, and by a pool that asked the driver once."""
    figure, axes = canvas(20, 9, size=(10, 4.5))
    sizes = [3, 1, 2, 1.5, 2.5]
    colors = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b2"]
    axes.text(0.3, 8.4, "cudaMalloc per request", fontsize=10, weight="bold")
    axes.text(10.5, 8.4, "a pool (RMM): one cudaMalloc, carved", fontsize=10, weight="bold")
    box(axes, 0.3, 0.4, 9.0, 1.2, "GPU memory (the driver maps each allocation)", "#eeeeee", size=8)
    x = 0.5
    for i, (size, color) in enumerate(zip(sizes, colors, strict=True)):
        box(axes, x, 2.4, size * 0.55, 0.8, "", color)
        arrow(axes, (x + size * 0.27, 7.4 - i * 0.9), (x + size * 0.27, 3.3), color=color)
        axes.text(x + size * 0.27 + 0.15, 7.45 - i * 0.9, f"cudaMalloc #{i + 1}", fontsize=7, color=color)
        x += size * 0.55 + 0.35
    axes.text(0.3, 1.8, "each free is cudaFree: it waits for all GPU work", fontsize=8)
    box(axes, 10.5, 0.4, 9.0, 1.2, "GPU memory", "#eeeeee", size=8)
    box(axes, 10.7, 2.3, 8.6, 1.0, "", "white", edge="black")
    arrow(axes, (18.6, 7.4), (18.6, 3.4))
    axes.text(19.2, 7.6, "one cudaMalloc, when the pool is made (and when it grows)", fontsize=8, ha="right")
    x = 10.8
    for size, color in zip(sizes, colors, strict=True):
        box(axes, x, 2.4, size * 0.62, 0.8, "", color)
        x += size * 0.62 + 0.05
    box(axes, x, 2.4, 19.2 - x, 0.8, "free", "white", edge="#999999", size=7)
    axes.text(10.5, 4.6, "requests and frees are bookkeeping inside the block:\nno driver call, no wait", fontsize=8)
    return figure


def draw_page_migration(pages: int = 8):
    """Managed pages moving to the GPU: one fault at a time, or all at once by a prefetch."""
    figure, axes = canvas(22, 10, size=(10, 4.6))
    for column, (title, steps) in enumerate(
        (("page faults on first GPU touch", pages), ("prefetch, then the pass", 1))
    ):
        left = 0.3 + column * 11.2
        axes.text(left, 9.4, title, fontsize=10, weight="bold")
        box(axes, left, 6.8, 9.6, 1.6, "", "#fbeee6")
        axes.text(left + 0.1, 8.0, "host memory", fontsize=8)
        box(axes, left, 0.6, 9.6, 1.6, "", "#e8eef7")
        axes.text(left + 0.1, 0.75, "GPU memory", fontsize=8)
        for page in range(pages):
            box(axes, left + 0.3 + page * 1.15, 6.95, 0.9, 0.7, "", "#dddddd")
            box(axes, left + 0.3 + page * 1.15, 1.3, 0.9, 0.7, "", "#55a868")
        if steps > 1:
            for page in range(pages):
                x = left + 0.75 + page * 1.15
                arrow(axes, (x, 6.9), (x, 2.1), color="#c44e52")
                axes.text(x, 4.5 + (page % 2) * 0.5, f"fault\n{page + 1}", fontsize=6, ha="center", color="#c44e52")
            axes.text(left, 5.9, "", fontsize=8)
            axes.text(left + 0.2, 2.45, "the kernel stalls at each fault; pages move as faults arrive", fontsize=7)
        else:
            from matplotlib.patches import FancyArrow

            axes.add_patch(
                FancyArrow(
                    left + 4.8,
                    6.8,
                    0,
                    -4.4,
                    width=7.5,
                    head_width=8.6,
                    head_length=0.8,
                    length_includes_head=True,
                    color="#4c72b0",
                    alpha=0.35,
                )
            )
            axes.text(left + 4.8, 4.4, "cudaMemPrefetchAsync:\none bulk move at link speed", fontsize=8, ha="center")
            axes.text(left + 0.2, 2.45, "then the kernel finds every page already on the GPU", fontsize=7)
    return figure


def draw_ecg_flow():
    """Chapter 6's stages, the library of each, and the zero-copy handoffs between them."""
    figure, axes = canvas(26, 6, size=(11, 2.9))
    stages = [
        ("read CSV", "cuDF"),
        ("convolve", "CuPy"),
        ("gate peaks", "Numba"),
        ("lengths", "CuPy"),
        ("embed beats", "Numba"),
        ("train, score", "PyTorch"),
    ]
    width, gap = 3.3, 0.95
    for i, (stage, library) in enumerate(stages):
        x = 0.3 + i * (width + gap)
        box(axes, x, 2.4, width, 1.6, f"{stage}\n{library}", "#e8eef7", size=9)
        if i:
            arrow(axes, (x - gap, 3.2), (x, 3.2), color="#55a868")
    axes.text(
        0.3,
        4.6,
        "every arrow: a zero-copy handoff on the GPU (CUDA Array Interface or DLPack)",
        fontsize=9,
        color="#55a868",
    )
    box(
        axes,
        0.3,
        0.3,
        25.2,
        1.0,
        "host ↔ GPU link: the CSV's bytes in, the scores out; no stage's data goes through the host",
        "#fbeee6",
        size=8,
    )
    return figure


DIAGRAMS: dict[str, Callable] = {
    "aos_vs_soa": draw_aos_vs_soa,
    "dlpack_handshake": draw_dlpack_handshake,
    "pool_vs_cudamalloc": draw_pool_vs_cudamalloc,
    "page_migration": draw_page_migration,
    "ecg_flow": draw_ecg_flow,
}


def write_all(folder: Path = FOLDER) -> list[Path]:
    """Draw every diagram into ``folder`` as ``<name>.png``; return the paths."""
    import matplotlib

    matplotlib.use("Agg")  # files only, no window
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, draw in DIAGRAMS.items():
        figure = draw()
        path = folder / f"{name}.png"
        figure.savefig(path, dpi=DPI, bbox_inches="tight", metadata={"Software": None})
        plt.close(figure)
        written.append(path)
    return written


if __name__ == "__main__":
    for path in write_all(Path(sys.argv[1]) if len(sys.argv) > 1 else FOLDER):
        print(path)
