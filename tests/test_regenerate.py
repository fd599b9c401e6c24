"""``make regenerate`` (booktools.regenerate): every generated file rewritten from the committed records into a
temporary copy is the committed file. Text files must be equal to the byte; the diagrams (PNGs, whose bytes vary
with the fonts and the renderer's version) equal to the eye."""

from __future__ import annotations

import difflib

import numpy as np
import pytest

from booktools import diagrams, regenerate
from booktools.paths import ROOT


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory):
    """Everything regenerated into a temporary folder, the diagrams included (seconds)."""
    into = tmp_path_factory.mktemp("regenerated")
    return into, regenerate.regenerate(into)


@pytest.fixture(scope="module")
def regenerated_text(tmp_path_factory):
    """The text files only, regenerated into a temporary folder (fast: make test-fast runs it)."""
    into = tmp_path_factory.mktemp("regenerated-text")
    return into, regenerate.regenerate(into, drawings=False)


@pytest.mark.slow
def test_regenerate_writes_every_generated_file(regenerated):
    into, written = regenerated
    names = {path.relative_to(into) for path in written}
    assert set(regenerate.TEXT_FILES) <= names
    assert {regenerate.DIAGRAM_FOLDER / f"{name}.png" for name in diagrams.DIAGRAMS} <= names


@pytest.mark.parametrize("name", regenerate.TEXT_FILES, ids=str)
def test_the_committed_file_is_what_the_records_give(regenerated_text, name):
    into, _ = regenerated_text
    committed, fresh = (ROOT / name).read_text(), (into / name).read_text()
    diff = "".join(difflib.unified_diff(committed.splitlines(True), fresh.splitlines(True), "committed", "records"))
    assert committed == fresh, f"{name} is stale: run `make regenerate` and commit it\n{diff[:3000]}"


@pytest.mark.slow
@pytest.mark.parametrize("name", list(diagrams.DIAGRAMS))
def test_the_committed_diagram_is_what_the_code_draws(regenerated, name):
    import matplotlib.image

    into, _ = regenerated
    path = regenerate.DIAGRAM_FOLDER / f"{name}.png"
    assert (ROOT / path).is_file(), f"{path} is missing: run `make regenerate`"
    new, old = matplotlib.image.imread(into / path), matplotlib.image.imread(ROOT / path)
    assert new.shape == old.shape and np.abs(new - old).mean() < 0.01, f"{path} is stale: run `make regenerate`"
