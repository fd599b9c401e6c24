"""Retiring a run whose outputs changed (booktools.retire): the record and its log move to the history whole, the
live stores keep every other chapter, and nothing is overwritten or lost on a bad request. CPU only."""

from __future__ import annotations

import json

import pytest

from booktools import evidence, records, retire


def claim(name: str) -> dict:
    return {"name": name, "kind": "at_least", "value": 1.0, "holds": True}


def stores(tmp_path):
    """Two setups; the H200 one ran chapters 04 and 06 on different days."""
    runs_file, claims_file = tmp_path / "chapter_runs.json", tmp_path / "claims.json"

    def chapter(name: str) -> dict:
        return {"notebook": f"chapters/{name}.ipynb", "seconds": 1.0, "peak_bytes": 1, "passed": True, "summary": "ok"}

    groups = [
        {"label": "H100 80GB", "mode": "nbval", "parallel": False, "wall_seconds": 2.0, "peak_bytes": 1,
         "limit_bytes": None, "chapters": [chapter("04_a"), chapter("06_b")]},
        {"label": "H200 141GB", "mode": "nbval", "parallel": False, "wall_seconds": 2.0, "peak_bytes": 1,
         "limit_bytes": None, "chapters": [chapter("04_a"), chapter("06_b")]},
    ]  # fmt: skip
    records.save(records.CHAPTER_RUNS, groups, runs_file)
    h100 = evidence.ClaimRun("H100 80GB", "nbval", "H100", "580", {}, None, "2026-11-27",
                             {"04_a": [claim("a.x")], "06_b": [claim("b.y")]})  # fmt: skip
    h200 = evidence.ClaimRun("H200 141GB", "nbval", "H200", "580", {}, None, "2026-11-27",
                             {"04_a": [claim("a.x")], "06_b": [claim("b.gone")]},
                             chapter_dates={"04_a": "2026-11-26"})  # fmt: skip
    evidence.save([h100, h200], claims_file)
    return runs_file, claims_file


def test_the_run_and_its_log_move_to_the_history_and_every_other_record_stays(tmp_path):
    runs_file, claims_file = stores(tmp_path)
    log = tmp_path / "nbval_06_b_h200.log"
    log.write_text("70 passed\n")
    to = tmp_path / "history" / "06_b_h200_earlier"
    retire.retire("H200 141GB", "nbval", "06_b", to, log, runs_file=runs_file, claims_file=claims_file)

    kept = json.loads((to / "records.json").read_text())
    assert [c["notebook"] for c in kept["chapter_runs"]["chapters"]] == ["chapters/06_b.ipynb"]
    assert kept["claims"]["chapters"] == {"06_b": [claim("b.gone")]}
    assert kept["claims"]["date"] == "2026-11-27"
    assert (to / log.name).read_text() == "70 passed\n" and not log.exists()

    groups = {g["label"]: g for g in records.load(records.CHAPTER_RUNS, runs_file)}
    assert [c["notebook"] for c in groups["H200 141GB"]["chapters"]] == ["chapters/04_a.ipynb"]
    assert len(groups["H100 80GB"]["chapters"]) == 2
    claim_runs = {r.label: r for r in evidence.load(claims_file)}
    assert list(claim_runs["H200 141GB"].chapters) == ["04_a"]
    assert claim_runs["H200 141GB"].date == "2026-11-26" and claim_runs["H200 141GB"].chapter_dates == {}
    assert list(claim_runs["H100 80GB"].chapters) == ["04_a", "06_b"]


def test_a_setup_left_without_chapters_leaves_the_claims_file(tmp_path):
    runs_file, claims_file = stores(tmp_path)
    for chapter in ("04_a", "06_b"):
        retire.retire("H200 141GB", "nbval", chapter, tmp_path / chapter, runs_file=runs_file, claims_file=claims_file)
    assert [r.label for r in evidence.load(claims_file)] == ["H100 80GB"]


@pytest.mark.parametrize(
    ("label", "chapter", "folder_exists", "log_name", "said"),
    [
        ("H200 141GB", "06_b", True, None, "exists already"),
        ("H200 141GB", "06_b", False, "missing.log", "no log at"),
        ("2 × H200", "06_b", False, None, "no nbval run of 06_b under '2 × H200'"),
        ("H200 141GB", "07_c", False, None, "the setups are"),
    ],
)
def test_a_bad_request_says_why_and_changes_nothing(tmp_path, label, chapter, folder_exists, log_name, said):
    runs_file, claims_file = stores(tmp_path)
    before = runs_file.read_bytes(), claims_file.read_bytes()
    to = tmp_path / "history"
    if folder_exists:
        to.mkdir()
        (to / "records.json").write_text("earlier history\n")
    with pytest.raises(retire.RetireError, match=said):
        log = tmp_path / log_name if log_name else None
        retire.retire(label, "nbval", chapter, to, log, runs_file=runs_file, claims_file=claims_file)
    assert (runs_file.read_bytes(), claims_file.read_bytes()) == before
    if folder_exists:
        assert (to / "records.json").read_text() == "earlier history\n"


def test_the_command_line_names_the_problem_without_a_traceback(tmp_path, capsys):
    to = tmp_path / "exists"
    to.mkdir()
    assert retire.main(["--label", "H200 141GB", "--mode", "nbval", "--chapter", "06_b", "--to", str(to)]) == 2
    assert capsys.readouterr().err.startswith("nothing moved: ")
