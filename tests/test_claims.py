"""support.claims and booktools.evidence on the CPU: each kind of claim holds or stops the chapter, prints one line
the page can show, and is recorded; the records make the page and the comparison; the committed page is the one
the committed records give, and every recorded claim shows in its notebook's outputs."""

from __future__ import annotations

import configparser
import json
import re
from pathlib import Path

import nbformat
import numpy as np
import pytest
from IPython.core.formatters import DisplayFormatter

from booktools import evidence, freshness, notebooks
from support import claims


@pytest.fixture
def logged(tmp_path, monkeypatch):
    path = tmp_path / "claims.jsonl"
    monkeypatch.setenv(claims.LOG_VARIABLE, str(path))
    return path


def test_a_claim_against_its_control_holds_by_the_factor_it_asks_and_is_logged(logged, capsys):
    fast = claims.beats("t.fast", 0.01, 0.5, unit="s", higher_is_better=False, by=20, says="s", control_is="CPU")
    assert fast.holds and fast.factor == pytest.approx(50)
    better = claims.beats("t.auroc", 0.95, 0.80, says="the model beats the baseline", control_is="the baseline")
    assert better.holds and better.bar == "more than the control"
    with pytest.raises(claims.ClaimError, match=r"t.slow does not hold: .*2.0× better, needs 20×"):
        claims.beats("t.slow", 0.25, 0.5, unit="s", higher_is_better=False, by=20, says="s", control_is="CPU")
    with pytest.raises(AssertionError):  # a chapter stops on it as on an assert
        claims.beats("t.worse", 0.7, 0.8, says="s", control_is="the baseline")
    printed = capsys.readouterr().out.splitlines()
    assert [line[0] for line in printed] == ["✓", "✓", "✗", "✗"]
    recorded = evidence.read_log(logged)
    assert [(c["name"], c["holds"]) for c in recorded] == [
        ("t.fast", True),
        ("t.auroc", True),
        ("t.slow", False),
        ("t.worse", False),
    ]


def test_a_bounded_score_is_ahead_of_its_control_by_a_difference_not_a_ratio():
    ahead = claims.ahead("t.rr", 0.978, 0.825, margin=0.1, says="s", control_is="the VAE")
    assert ahead.holds and ahead.difference == pytest.approx(0.153) and ahead.factor is None
    with pytest.raises(claims.ClaimError, match=r"t.close does not hold: .*\+0.03 ahead, needs \+0.1 or more"):
        claims.ahead("t.close", 0.85, 0.82, margin=0.1, says="s", control_is="the VAE")
    assert claims.ahead("t.error", 0.02, 0.10, margin=0.05, higher_is_better=False, says="s", control_is="c").holds
    with pytest.raises(ValueError, match="positive margin"):
        claims.ahead("t.none", 0.9, 0.8, margin=0, says="s", control_is="c")
    shown = evidence.shown({**ahead.__dict__})
    assert shown.endswith("(+0.153) ✓")


def test_numpy_values_are_recorded_and_printed_as_python_values(logged, capsys):
    claims.holds("t.np", np.bool_(True), control=np.bool_(False), control_is="the control", says="s")
    claims.at_least("t.npf", np.float64(0.95), 0.9, control=np.float32(0.5), control_is="chance", says="s")
    assert capsys.readouterr().out.splitlines()[0].endswith("the control: no")
    recorded = evidence.read_log(logged)
    assert recorded[0]["control"] is False and recorded[1]["control"] == pytest.approx(0.5)


def test_a_cell_that_ends_with_a_claim_shows_only_its_line():
    claim = claims.holds("t.shown", True, control=False, control_is="c", says="s")
    assert DisplayFormatter().format(claim) == ({}, {})


def test_bars_in_both_directions_and_measurements_that_failed():
    assert claims.at_least("t.recall", 0.93, 0.9, says="s", unit="", control=0.5, control_is="chance").holds
    assert claims.at_most("t.bytes", 20, 1024, says="s", unit="B").holds
    with pytest.raises(claims.ClaimError):
        claims.at_most("t.bytes", 2048, 1024, says="s", unit="B")
    with pytest.raises(ValueError, match="NaN"):
        claims.at_least("t.nan", float("nan"), 0.9, says="s")
    with pytest.raises(ValueError, match="positive"):
        claims.beats("t.zero", 0.0, 1.0, says="s", control_is="c")


def test_zero_copy_needs_the_same_pointer_and_a_copy_told_apart():
    source = np.arange(8.0)
    assert claims.same_memory("t.view", source[:], source, says="s", copy=source.copy()).holds
    with pytest.raises(claims.ClaimError):
        claims.same_memory("t.copied", source.copy(), source, says="s", copy=source.copy())
    with pytest.raises(claims.ClaimError):  # a "copy" that shares memory is no control: the check proves nothing
        claims.same_memory("t.no_control", source[:], source, says="s", copy=source[:])


def test_a_refusal_is_the_error_said_and_its_fix_works():
    def refuse():
        raise ValueError("no")

    claim = claims.refused("t.refused", refuse, ValueError, says="s", match="^no$", fix=lambda: 1, fix_is="copy=True")
    assert claim.holds and claim.value == "ValueError: no" and claim.control == "works"
    with pytest.raises(claims.ClaimError):  # the right type, the wrong message: not the refusal the text means
        claims.refused("t.other_message", refuse, ValueError, says="s", match="copy=True")
    for attempt, fix in ((lambda: 1, None), (refuse, refuse)):  # no refusal; a fix that fails too
        with pytest.raises(claims.ClaimError):
            claims.refused("t.not", attempt, ValueError, says="s", fix=fix)
    with pytest.raises(claims.ClaimError, match="KeyError"):
        claims.refused("t.other", lambda: {}["x"], ValueError, says="s")


def test_an_observation_holds_only_when_its_control_does_not():
    assert claims.holds("t.seen", True, says="s", control=False, control_is="the same check on a copy").holds
    with pytest.raises(claims.ClaimError):
        claims.holds("t.trivial", True, says="s", control=True, control_is="the check on a case that must fail")
    with pytest.raises(TypeError, match="control observation"):
        claims.holds("t.no_control", True, says="s", control=None, control_is="")


def test_beating_the_control_means_strictly_better_and_a_factor_below_one_is_refused():
    with pytest.raises(claims.ClaimError):
        claims.beats("t.tie", 1.0, 1.0, says="s", control_is="c")
    with pytest.raises(ValueError, match="at least 1"):
        claims.beats("t.weak", 1.0, 1.0, says="s", control_is="c", by=0.5)


def test_a_claim_is_one_line_and_the_sanitizer_keeps_its_name_verdict_and_what_follows(capsys):
    claims.at_least("t.long", 0.93, 0.9, says="s", control=0.5, control_is="a very long description " * 6)
    print("  an indented line that follows")
    out = capsys.readouterr().out
    assert len(out.splitlines()) == 2
    rules = configparser.RawConfigParser()
    rules.read(notebooks.ROOT / "tests" / "nbval_sanitize.cfg", encoding="utf-8")
    for section in rules.sections():
        out = re.sub(rules[section]["regex"], rules[section]["replace"], out)
    assert out.splitlines() == ["✓~t.long:~CLAIM", "~an~indented~line~that~follows"], out


def made_up_run(label, mode, chapters, limit=None):
    return evidence.ClaimRun(
        label, mode, "NVIDIA H100 80GB HBM3", "580.1", {"cupy": "14"}, limit, "2026-11-24", chapters
    )


def claim(name, value, holds=True, kind="at_least", **extra):
    return {
        "name": name,
        "kind": kind,
        "says": f"{name} says",
        "value": value,
        "unit": "",
        "control": 0.5,
        "control_is": "chance",
        "bar": "at least 0.9",
        "holds": holds,
        "factor": None,
    } | extra


def test_a_later_run_of_a_setup_replaces_its_chapters_and_keeps_the_others(tmp_path):
    path = tmp_path / "claims.json"
    evidence.record(made_up_run("H100", "execute", {"01_a": [claim("a.x", 0.91)]}), path)
    evidence.record(made_up_run("H100", "execute", {"02_b": [claim("b.y", 0.95)]}), path)
    evidence.record(made_up_run("H100", "execute", {"01_a": [claim("a.x", 0.97)]}), path)
    evidence.record(made_up_run("16 GB", "nbval", {"01_a": [claim("a.x", 0.92)]}, 16 * 2**30), path)
    runs = evidence.load(path)
    assert [(r.label, sorted(r.chapters)) for r in runs] == [("H100", ["01_a", "02_b"]), ("16 GB", ["01_a"])]
    assert runs[0].chapters["01_a"][0]["value"] == 0.97
    upgraded = made_up_run("H100", "execute", {"02_b": [claim("b.y", 0.96)]})
    upgraded.driver = "590.1"  # another machine under the same label: its facts may not stand beside 01_a's
    evidence.record(upgraded, path)
    assert sorted(evidence.load(path)[0].chapters) == ["02_b"]


def test_the_page_shows_every_claim_on_every_run_beside_its_control(tmp_path):
    runs = [
        made_up_run("H100", "execute", {"01_a": [claim("a.x", 0.91), claim("a.y", 29.0, kind="beats", factor=29.0)]}),
        made_up_run("16 GB", "nbval", {"01_a": [claim("a.x", 0.88, holds=False)]}, 16 * 2**30),
    ]
    text = evidence.page(runs, folder=tmp_path)
    block = text[text.index("**a.x says**") :].split("\n\n")[1]
    assert block.splitlines() == [
        "- measured in [the chapter](01_a.ipynb), as `a.x`",
        "- against chance: 0.5; bar: at least 0.9",
        "- H100, executed 2026-11-24: 0.91 ✓",
        "- 16 GB, re-run and compared 2026-11-24: 0.88 ✗",
    ]
    assert "29 (29×) ✓" in text and "a memory limit of 16.00 GiB per process" in text and "## 01_a" in text
    assert "|" not in text, "no table: a claim is a small block that reads the same on a phone"


def test_a_run_without_a_chapter_or_a_claim_says_so_rather_than_leaving_a_cell_empty(tmp_path):
    runs = [
        made_up_run(
            "H100", "execute", {"01_a": [claim("a.x", 0.91), claim("a.z", 0.93)], "02_b": [claim("b.y", 0.95)]}
        ),
        made_up_run("H100", "nbval", {"01_a": [claim("a.x", 0.9)], "02_b": [claim("b.y", 0.93)]}),
        made_up_run("16 GB", "nbval", {"02_b": [claim("b.y", 0.92)]}, 16 * 2**30),
    ]
    text = evidence.page(runs, folder=tmp_path)
    assert "The run *16 GB, re-run and compared 2026-11-24* did not include this chapter." in text
    assert "- not checked in H100, re-run and compared 2026-11-24 (the chapter stopped" in text
    assert "- H100, re-run and compared 2026-11-24: 0.93 ✓" in text


def test_each_claim_links_to_the_section_that_measures_it(tmp_path):
    chapter = nbformat.v4.new_notebook()
    chapter.cells = [
        nbformat.v4.new_markdown_cell("# A chapter\n\n## Zero-copy: `torch.from_dlpack`"),
        nbformat.v4.new_code_cell('claims.holds("a.x", True, says="s")'),
        nbformat.v4.new_markdown_cell("## Zero-copy: `torch.from_dlpack`\n\n```python\n# not a heading\n```"),
        nbformat.v4.new_code_cell('for name in names:\n    claims.holds(f"a.{name}_shares", True, says="s")'),
    ]
    nbformat.write(chapter, tmp_path / "01_a.ipynb")
    runs = [made_up_run("H100", "execute", {"01_a": [claim("a.x", 0.91), claim("a.torch_shares", 0.95)]})]
    text = evidence.page(runs, folder=tmp_path)
    assert "- measured in [Zero-copy: torch.from_dlpack](01_a.ipynb#zero-copy-torchfrom_dlpack), as `a.x`" in text
    assert "[Zero-copy: torch.from_dlpack](01_a.ipynb#zero-copy-torchfrom_dlpack-1), as `a.torch_shares`" in text
    assert "## A chapter" in text


def test_the_committed_page_links_every_claim_to_a_section_and_cuts_no_word():
    text = evidence.PAGE.read_text(encoding="utf-8")
    unlinked = [line for line in text.splitlines() if line.startswith("- measured in [the chapter](")]
    # a chapter whose outputs predate its code may have dropped a claim its records still hold: the page says so
    unexplained = [line for line in unlinked if "current code no longer makes" not in line]
    assert unexplained == [], f"claims whose cell the page could not find: {unexplained}"
    assert "this pro ✓" not in text and " ✓ |" not in text


def test_the_comparison_sets_each_claim_beside_the_books_with_the_ratio():
    book = made_up_run("H100", "execute", {"01_a": [claim("a.x", 0.9), claim("a.y", 2.0, kind="beats", factor=20.0)]})
    mine = {"01_a": [claim("a.x", 0.45, holds=False), claim("a.y", 1.0, kind="beats", factor=10.0), claim("a.z", 1)]}
    rows = {row["claim"]: row for row in evidence.comparison_rows(book, mine)}
    assert rows["a.x"]["here / book"] == "0.50" and rows["a.x"]["holds here"] == "NO"
    assert rows["a.y"]["here / book"] == "0.50"  # the factor over the control, not the raw value
    assert rows["a.z"]["book"] == "not in the book's run"


def test_the_committed_page_is_the_one_the_committed_records_give():
    expected = evidence.page(evidence.load(), stale=evidence.stale_chapters())
    assert evidence.PAGE.read_text(encoding="utf-8") == expected, "run `python -m booktools.evidence page`"


def test_every_recorded_claim_shows_in_its_notebooks_committed_outputs():
    for run in evidence.load():
        for name, recorded in run.chapters.items():
            notebook = notebooks.read_notebook(notebooks.ROOT / "chapters" / f"{name}.ipynb")
            text = json.dumps([cell.get("outputs", []) for cell in notebook.cells], ensure_ascii=False)
            missing = [c["name"] for c in recorded if f" {c['name']}: " not in text]
            assert missing == [], f"{name} ({run.label}): claims recorded but not in its outputs: {missing}"


def test_a_run_older_than_the_latest_execution_is_said_to_be_of_earlier_chapters(tmp_path):
    executed = made_up_run("H100", "execute", {"01_a": [claim("a.x", 0.91)]})
    executed.date = "2026-11-26"
    older = made_up_run("16 GB", "nbval", {"01_a": [claim("a.x", 0.88)]}, 16 * 2**30)
    text = evidence.page([executed, older], folder=tmp_path)
    runs = text[text.index("## The recorded runs") :].split("\n\n")[1].splitlines()
    assert "earlier versions of the chapters" in runs[1] and "earlier versions" not in runs[0]
    older.date = "2026-11-26"
    assert "earlier versions" not in evidence.page([executed, older], folder=tmp_path)


def test_a_series_run_over_several_days_keeps_each_chapter_s_date_and_is_judged_per_chapter(tmp_path):
    path = tmp_path / "claims.json"
    first = made_up_run("H200", "nbval", {"01_a": [claim("a.x", 0.91)], "02_b": [claim("b.y", 0.9)]})
    later = made_up_run("H200", "nbval", {"02_b": [claim("b.y", 0.95)]})
    later.date = "2026-11-27"
    evidence.record(first, path)
    evidence.record(later, path)
    (run,) = evidence.load(path)
    assert (run.date, run.chapter_dates) == ("2026-11-27", {"01_a": "2026-11-24"})
    assert evidence.run_name(run) == "H200, re-run and compared 2026-11-24 to 2026-11-27"
    assert evidence.run_name(run, "01_a") == "H200, re-run and compared 2026-11-24"
    text = evidence.page([run], folder=tmp_path)
    assert "- H200, re-run and compared 2026-11-24: 0.91 ✓" in text
    assert "- H200, re-run and compared 2026-11-27: 0.95 ✓" in text
    # executed again: 02_b on the 27th, 03_c (another setup's chapter) on the 28th; 01_a's run predates nothing
    executed = made_up_run("H100", "execute", {"02_b": [claim("b.y", 0.9)], "03_c": [claim("c.z", 0.9)]})
    executed.date, executed.chapter_dates = "2026-11-28", {"02_b": "2026-11-27"}
    assert "earlier versions" not in evidence.page([executed, run], folder=tmp_path)
    executed.chapter_dates = {}  # 02_b executed on the 28th, after its re-run
    assert "earlier versions" in evidence.page([executed, run], folder=tmp_path)


def test_a_recorded_bar_is_read_in_the_values_units():
    assert evidence.recorded_bar("at most 15.0 ms") == ("most", pytest.approx(0.015))
    assert evidence.recorded_bar("at least 85.0%") == ("least", pytest.approx(0.85))
    assert evidence.recorded_bar("at most 10 passes") == ("most", 10.0)
    assert evidence.recorded_bar("at least -0.5 ms") == ("least", pytest.approx(-0.0005))
    with pytest.raises(ValueError, match="cannot read"):
        evidence.recorded_bar("more than the control")


def test_a_control_that_clears_its_own_bar_is_found_and_a_compare_does_not_count_the_claim():
    clear = claim("a.trivial", 0.95, control=0.93)  # at least 0.9, and the control reaches it too
    assert evidence.control_clears_bar(clear)
    assert not evidence.control_clears_bar(claim("a.fine", 0.95))  # control 0.5
    at_most = claim("a.gap", 0.003, kind="at_most", bar="at most 1.0%", control=0.005)
    assert evidence.control_clears_bar(at_most)
    assert not evidence.control_clears_bar(at_most | {"control": 0.18})
    assert not evidence.control_clears_bar(claim("a.yes", True, kind="holds", bar="yes", control=True))
    book = made_up_run("H100", "execute", {"01_a": [claim("a.trivial", 0.95), claim("a.fine", 0.95)]})
    rows = {row["claim"]: row for row in evidence.comparison_rows(book, {"01_a": [clear, claim("a.fine", 0.95)]})}
    assert rows["a.trivial"]["holds here"] == "NO: its control clears the bar too"
    assert rows["a.fine"]["holds here"] == "yes"


def test_every_recorded_bar_claim_has_a_control_that_fails_its_bar():
    """support.claims.at_least and at_most print their control beside the value without checking it: a claim whose
    control also clears the bar is not a claim (the book's rule). Every run on record, every such claim."""
    checked = 0
    for run in evidence.load():
        for chapter, recorded in run.chapters.items():
            for claim in recorded:
                control = claim.get("control")
                if claim["kind"] not in ("at_least", "at_most") or not isinstance(control, int | float):
                    continue
                if isinstance(control, bool):
                    continue
                assert not evidence.control_clears_bar(claim), (
                    f"{run.label} {run.mode}, {chapter}: {claim['name']}'s control {control} clears {claim['bar']}"
                )
                checked += 1
    assert checked > 0  # the records hold such claims: a test that read none would prove nothing


def test_a_chapter_whose_code_changed_after_its_runs_says_so_on_the_page(tmp_path):
    run = evidence.ClaimRun(
        "H100 80GB", "execute", "NVIDIA H100", "580", {}, None, "2026-11-27", {"06_b": [claim("b.x", 1)]}
    )
    note = "This chapter's code changed after these runs"
    dropped = "a claim the chapter's current code no longer makes"
    assert note in evidence.page([run], folder=tmp_path, stale={"06_b"})
    assert dropped in evidence.page([run], folder=tmp_path, stale={"06_b"})  # tmp_path holds no such cell
    assert note not in evidence.page([run], folder=tmp_path, stale={"05_a"})
    assert dropped not in evidence.page([run], folder=tmp_path, stale={"05_a"})


def test_the_stale_chapters_are_those_the_freshness_check_finds_stale():
    found = freshness.report(notebooks.published_notebooks())
    assert evidence.stale_chapters() == {Path(path).stem for path, state in found.items() if state.status == "stale"}
