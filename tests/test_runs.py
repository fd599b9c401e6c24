"""booktools.runs on the CPU: sampling memory, running notebooks one by one and all at once (with stand-in commands),
the runs file, and the README table, which must be the one the committed runs file gives."""

from __future__ import annotations

import itertools
import sys
import time

import pytest

from booktools import evidence, mps, runs
from booktools.runs import ChapterRun, RunGroup
from support.claims import LOG_VARIABLE
from support.units import GIB


def test_the_sampler_keeps_the_peak_above_where_it_started():
    values = itertools.chain([GIB, 3 * GIB, 2 * GIB], itertools.repeat(GIB))
    deadline = time.monotonic() + 10
    with runs.MemorySampler(lambda: next(values), interval=0.001) as sampler:
        while sampler.peak < 3 * GIB and time.monotonic() < deadline:
            time.sleep(0.001)
    assert sampler.peak_above_start == 2 * GIB


@pytest.mark.slow
def test_measure_runs_each_notebook_and_records_pass_time_and_peak(monkeypatch):
    def fake_command(mode, notebook, python=sys.executable):
        code = "print('1 passed')" if "good" in notebook else "import sys; print('1 failed'); sys.exit(1)"
        return [python, "-c", code]

    monkeypatch.setattr(runs, "command_for", fake_command)
    memory = itertools.cycle([GIB, 2 * GIB])
    group = runs.measure(
        ["a_good.ipynb", "b_bad.ipynb"], "test GPU", "nbval", read=lambda: next(memory), log=lambda line: None
    )
    assert [(c.notebook, c.passed, c.summary) for c in group.chapters] == [
        ("a_good.ipynb", True, "1 passed"),
        ("b_bad.ipynb", False, "1 failed"),
    ]
    assert all(c.seconds > 0 and c.peak_bytes in (0, GIB) for c in group.chapters)
    together = runs.measure(
        ["a_good.ipynb", "b_bad.ipynb"], "test GPU", "nbval", parallel=True, read=lambda: 0, log=lambda line: None
    )
    assert together.parallel and [c.peak_bytes for c in together.chapters] == [None, None]
    assert [c.passed for c in together.chapters] == [True, False]
    assert together.wall_seconds >= max(c.seconds for c in together.chapters)


def test_each_chapters_whole_output_can_be_kept(monkeypatch, tmp_path):
    monkeypatch.setattr(runs, "command_for", lambda mode, notebook: [sys.executable, "-c", "print('E  assert 1 == 2')"])
    runs.measure(["chapters/01_a.ipynb"], "test GPU", "nbval", read=lambda: 0, log=lambda line: None, log_dir=tmp_path)
    assert (tmp_path / "nbval_01_a.log").read_text() == "E  assert 1 == 2\n"


@pytest.mark.slow
def test_each_chapter_is_handed_on_with_its_claims_before_the_next_starts(monkeypatch, tmp_path):
    """A host taken back during a later chapter must not lose what the earlier ones measured."""
    marker = tmp_path / "kept"
    claim = '{"name": "a.x", "holds": true}'
    first = f"import os; open(os.environ['{LOG_VARIABLE}'], 'w').write('{claim}' + chr(10))"
    second = f"import pathlib, sys; sys.exit(0 if pathlib.Path({str(marker)!r}).exists() else 3)"
    commands = {"chapters/01_a.ipynb": first, "chapters/02_b.ipynb": second}
    monkeypatch.setattr(runs, "command_for", lambda mode, notebook: [sys.executable, "-c", commands[notebook]])
    seen = []

    def keep(chapter, logged):
        seen.append((chapter.notebook, chapter.passed, logged))
        marker.touch()

    runs.measure(list(commands), "test GPU", "execute", read=lambda: 0, log=lambda line: None, on_chapter=keep)
    assert seen == [
        ("chapters/01_a.ipynb", True, [{"name": "a.x", "holds": True}]),
        ("chapters/02_b.ipynb", True, []),  # it found the first chapter already kept
    ]


def test_unknown_modes_are_refused():
    with pytest.raises(ValueError, match="unknown mode 'run'"):
        runs.command_for("run", "x.ipynb")


def test_the_runs_file_keeps_one_group_per_setup(tmp_path):
    path = tmp_path / "runs.json"
    first = RunGroup("H100", "execute", False, 10.0, GIB, [ChapterRun("chapters/01_a.ipynb", 10.0, GIB, True)])
    again = RunGroup("H100", "execute", False, 12.0, GIB, [ChapterRun("chapters/01_a.ipynb", 12.0, 2 * GIB, True)])
    limited = RunGroup(
        "16 GB", "nbval", False, 11.0, GIB, [ChapterRun("chapters/01_a.ipynb", 11.0, GIB, False)], 16 * GIB
    )
    other = RunGroup("H100", "execute", False, 5.0, GIB, [ChapterRun("chapters/02_b.ipynb", 5.0, 3 * GIB, True)])
    together = RunGroup("16 GB", "nbval", True, 7.0, 9 * GIB, [ChapterRun("chapters/01_a.ipynb", 7.0, None, True)])
    for group in (first, limited, again, other, together):
        runs.record(group, path)
    h100, sixteen, parallel = runs.load(path)
    assert sixteen == limited and parallel == together
    assert [c.seconds for c in h100.chapters] == [12.0, 5.0]  # 01_a measured again, 02_b added in a later call
    assert (h100.wall_seconds, h100.peak_bytes) == (17.0, 3 * GIB)
    # a need is shown only by a passing run under a limit: the 16 GB run of 01_a failed, the H100 runs had none
    assert "01_a" not in runs.chapter_needs(runs.load(path))
    passed = RunGroup(
        "16 GB", "nbval", False, 11.0, GIB, [ChapterRun("chapters/01_a.ipynb", 11.0, 4 * GIB, True)], 16 * GIB
    )
    runs.record(passed, path)
    assert runs.chapter_needs(runs.load(path))["01_a"].peak_bytes == 4 * GIB  # its peak there
    tight = RunGroup("8 GB", "nbval", False, 9.0, GIB, [ChapterRun("chapters/01_a.ipynb", 9.0, 7 * GIB, True)], 8 * GIB)
    runs.record(tight, path)
    assert runs.chapter_needs(runs.load(path))["01_a"].peak_bytes == 4 * GIB  # the smaller of the two peaks
    assert "02_b" not in runs.chapter_needs(runs.load(path))
    table = runs.runs_table(runs.load(path))
    assert "| 01_a | 12 s | 2.0 GiB | 11 s | 4.0 GiB | 9 s | 7.0 GiB |" in table, table
    assert "1 chapters at once (16 GB, nbval): 1 passed, 7 s in all, peak 9.0 GiB" in table
    limited_together = RunGroup(
        "16 GB, 1 reader", "nbval", True, 7.0, GIB, [ChapterRun("chapters/01_a.ipynb", 7.0, None, True)], 16 * GIB
    )
    assert runs.one_after_another(limited_together, runs.load(path)) == 11.0  # 01_a's run under the 16 GB limit
    assert runs.one_after_another(together, runs.load(path)) is None  # no nbval run without a limit to compare


def test_the_readme_table_is_the_one_the_committed_runs_give():
    readme = runs.README.read_text()
    assert runs.readme_with_table(readme, runs.runs_table(runs.load())) == readme, (
        "README's table of chapter runs is stale: run `python -m booktools.runs readme`"
    )
    with pytest.raises(ValueError, match="no <!-- chapter-runs: start -->"):
        runs.readme_with_table("no markers", "table")


@pytest.mark.slow
def test_each_chapter_is_recorded_into_its_setups_group_with_its_claims(tmp_path):
    runs_file, claims_file = tmp_path / "chapter_runs.json", tmp_path / "claims.json"
    claim = {"name": "a.x", "kind": "holds", "holds": True}
    for name, seconds, logged in (("01_a", 10.0, [claim]), ("02_b", 20.0, [])):
        chapter = runs.ChapterRun(f"chapters/{name}.ipynb", seconds, GIB, True)
        runs.record_chapter(chapter, logged, "H100", "nbval", None, runs_file=runs_file, claims_file=claims_file)
    (group,) = runs.load(runs_file)
    assert [c.notebook for c in group.chapters] == ["chapters/01_a.ipynb", "chapters/02_b.ipynb"]
    assert group.wall_seconds == 30.0 and not group.parallel

    (recorded,) = evidence.load(claims_file)
    assert recorded.chapters == {"01_a": [claim]}  # a chapter that checked no claim adds none


def test_a_run_reads_the_gpu_named_by_uuid_as_a_rehearsal_does(monkeypatch):
    """CUDA_VISIBLE_DEVICES=GPU-...: the run's memory is sampled on the card NVML finds for that UUID, as
    booktools.mps.nvml_index finds it for a rehearsal, not on GPU 0."""
    monkeypatch.setattr(mps, "index_of_uuid", {"GPU-2a": 2}.get)  # NVML's answer for the one UUID it knows
    assert runs.visible_gpu({"CUDA_VISIBLE_DEVICES": "GPU-2a"}) == 2
    assert runs.visible_gpu({"CUDA_VISIBLE_DEVICES": "GPU-8f1c"}) == 0  # NVML does not know it: the best guess


def test_by_default_a_run_finds_its_gpu_once_and_samples_that_card(monkeypatch):
    found, sampled = [], []
    monkeypatch.setattr(runs, "visible_gpu", lambda: found.append(1) or 1)
    monkeypatch.setattr(runs.env, "card_memory", lambda index: sampled.append(index))  # None: NVML has no answer
    monkeypatch.setattr(runs, "command_for", lambda mode, notebook, python=sys.executable: [python, "-c", "0"])
    runs.measure(["a.ipynb", "b.ipynb"], "test GPU", "nbval", log=lambda line: None)
    assert found == [1] and sampled and set(sampled) == {1}
