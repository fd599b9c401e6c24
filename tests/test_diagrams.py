"""booktools.diagrams: every diagram draws, and the committed PNGs in chapters/diagrams/ are what the code draws now
(regenerate them with `make diagrams`)."""

from __future__ import annotations

import numpy as np
import pytest

from booktools import diagrams, notebooks


@pytest.mark.slow
@pytest.mark.parametrize("name", list(diagrams.DIAGRAMS))
def test_the_committed_diagram_is_what_the_code_draws(name, tmp_path):
    import matplotlib.image

    (drawn,) = [path for path in diagrams.write_all(tmp_path) if path.stem == name]
    committed = diagrams.FOLDER / f"{name}.png"
    assert committed.is_file(), f"{committed} is missing: run `make diagrams`"
    new, old = matplotlib.image.imread(drawn), matplotlib.image.imread(committed)
    assert new.shape == old.shape, f"{name}: the committed image is stale (run `make diagrams`)"
    assert np.abs(new - old).mean() < 0.01, f"{name}: the committed image differs from the code (run `make diagrams`)"


def test_every_diagram_is_shown_in_a_chapter():
    text = "".join(path.read_text() for path in notebooks.chapter_notebooks())
    for name in diagrams.DIAGRAMS:
        assert f"diagrams/{name}.png" in text, f"no chapter shows {name}"


@pytest.mark.slow
def test_the_aos_diagram_counts_the_sectors_a_warp_moves():
    figure = diagrams.draw_aos_vs_soa(threads=8)
    texts = [text.get_text() for text in figure.axes[0].texts]
    assert any("4 sector(s) of 32 B move" in t and "32 of 128 bytes" in t for t in texts)
    assert any("1 sector(s) of 32 B move" in t and "32 of 32 bytes" in t for t in texts)


def _drawn_parts(figure):
    """The texts, rectangles and dashed lines of a drawn figure, as extents in pixels."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Rectangle

    renderer = figure.canvas.get_renderer()
    axes = figure.axes[0]
    texts = [(t.get_text(), t.get_window_extent(renderer)) for t in axes.texts if t.get_text()]
    boxes = [patch.get_window_extent(renderer) for patch in axes.patches if isinstance(patch, Rectangle)]
    lines = [line.get_window_extent(renderer) for line in axes.lines if isinstance(line, Line2D)]
    lines = [extent for extent, line in zip(lines, axes.lines, strict=True) if line.get_linestyle() == "--"]
    return texts, boxes, lines


def _overlap(a, b, slack=1.0) -> bool:
    return a.x0 + slack < b.x1 and b.x0 + slack < a.x1 and a.y0 + slack < b.y1 and b.y0 + slack < a.y1


def test_the_dlpack_diagram_keeps_its_text_in_its_boxes_and_its_lifelines_off_the_labels():
    figure = diagrams.draw_dlpack_handshake()
    figure.canvas.draw()
    texts, boxes, lifelines = _drawn_parts(figure)
    for text, extent in texts:
        inside = [b for b in boxes if b.contains(*extent.get_points().mean(axis=0))]
        for b in inside:  # a box's own text fits in it
            assert b.x0 <= extent.x0 and extent.x1 <= b.x1 and b.y0 <= extent.y0 and extent.y1 <= b.y1, text
        crossed = [b for b in boxes if b not in inside and _overlap(b, extent)]
        assert not crossed, f"{text!r} runs into a box that is not its own"
        for line in lifelines:
            assert not _overlap(line, extent, slack=0.0), f"a lifeline crosses {text!r}"
    for i, (text, extent) in enumerate(texts):
        for other, other_extent in texts[i + 1 :]:
            assert not _overlap(extent, other_extent), f"{text!r} overlaps {other!r}"
    for line in lifelines:  # lifelines stop at a note box and go on below it
        heads = [b for b in boxes if abs(b.y0 - line.y1) < 2 and b.x0 < line.x0 < b.x1]
        assert all(not _overlap(line, b) for b in boxes if b not in heads)
