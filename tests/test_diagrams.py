"""booktools.diagrams: every diagram draws, and the committed PNGs in chapters/diagrams/ are what the code draws now
(regenerate them with `make diagrams`)."""

from __future__ import annotations

import numpy as np
import pytest

from booktools import diagrams


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
    from booktools import notebooks

    text = "".join(path.read_text() for path in notebooks.chapter_notebooks())
    for name in diagrams.DIAGRAMS:
        assert f"diagrams/{name}.png" in text, f"no chapter shows {name}"


def test_the_aos_diagram_counts_the_sectors_a_warp_moves():
    figure = diagrams.draw_aos_vs_soa(threads=8)
    texts = [text.get_text() for text in figure.axes[0].texts]
    assert any("4 sector(s) of 32 B move" in t and "32 of 128 bytes" in t for t in texts)
    assert any("1 sector(s) of 32 B move" in t and "32 of 32 bytes" in t for t in texts)
