"""The records layer (booktools.records): the three stores read, written and appended in one place, on the CPU."""

from __future__ import annotations

import json
import os

import pytest

from booktools import evidence, records, rehearse, runs
from support.units import GIB


@pytest.mark.parametrize("store", [records.CHAPTER_RUNS, records.CLAIMS], ids=lambda s: s.path.name)
def test_each_committed_store_is_read_and_written_back_byte_for_byte(store, tmp_path):
    committed = store.path.read_bytes()
    copy = tmp_path / "nested" / store.path.name  # a folder that does not exist yet
    records.save(store, records.load(store), copy)
    assert copy.read_bytes() == committed


@pytest.mark.parametrize(
    ("owner", "path"),
    [(runs, records.CHAPTER_RUNS.path), (evidence, records.CLAIMS.path)],
    ids=["runs", "evidence"],
)
def test_each_owner_reads_and_writes_its_committed_store_byte_for_byte(owner, path, tmp_path):
    copy = tmp_path / path.name
    owner.save(owner.load(path), copy)
    assert copy.read_bytes() == path.read_bytes()


def made_up_rehearsal(agenda: str = "two-hours") -> rehearse.Rehearsal:
    seat = rehearse.Seat(1, "teacher", [rehearse.ChapterAtSeat("00_a", True, 3.0, "ValueError: ✗")], GIB)
    return rehearse.Rehearsal(agenda, "16G", "GPU", "580.1", 80 * GIB, "2026-11-26", 60.0, None, [seat], ["00_a"])


def test_a_rehearsals_store_round_trips_byte_for_byte(tmp_path):
    path = tmp_path / "rehearsals.json"
    rehearse.record(made_up_rehearsal(), path)
    rehearse.record(made_up_rehearsal("one-day"), path)
    written = path.read_bytes()
    assert written.isascii() and written.endswith(b"}\n")  # non-ASCII escaped, as the runs file does
    again = tmp_path / "again.json"
    records.save(records.REHEARSALS, records.load(records.REHEARSALS, path), again)
    assert again.read_bytes() == written
    assert [r.agenda for r in rehearse.load(path)] == ["two-hours", "one-day"]


def test_the_layout_is_one_list_under_the_stores_key_indented_by_one():
    assert records.dumps(records.REHEARSALS, [{"a": 1}]) == '{\n "rehearsals": [\n  {\n   "a": 1\n  }\n ]\n}\n'
    assert records.dumps(records.CHAPTER_RUNS, []) == '{\n "runs": []\n}\n'
    assert "✓" in records.dumps(records.CLAIMS, [{"holds": "✓"}])
    assert "✓" not in records.dumps(records.CHAPTER_RUNS, [{"holds": "✓"}])


def test_a_missing_store_is_empty_and_append_creates_it(tmp_path):
    path = tmp_path / "deep" / "er" / "store.json"
    assert records.load(records.REHEARSALS, path) == []
    records.append(records.REHEARSALS, {"n": 1}, path)
    records.append(records.REHEARSALS, {"n": 2}, path)
    assert records.load(records.REHEARSALS, path) == [{"n": 1}, {"n": 2}]


def test_the_stores_live_in_runs_and_the_owners_use_them():
    assert {store.path.parent for store in records.STORES} == {records.RUNS}
    assert runs.RUNS_FILE == records.CHAPTER_RUNS.path
    assert evidence.CLAIMS_FILE == records.CLAIMS.path
    assert rehearse.RECORDS == records.REHEARSALS.path


def test_upsert_replaces_the_first_of_the_same_key_in_place_or_appends():
    items = [{"k": "a", "n": 1}, {"k": "b", "n": 2}]

    def key(item):
        return item["k"]

    def merge(old, new):
        return {"k": new["k"], "n": old["n"] + new["n"]}

    assert records.upsert(items, {"k": "b", "n": 5}, key, merge) == [{"k": "a", "n": 1}, {"k": "b", "n": 7}]
    assert records.upsert(items, {"k": "c", "n": 3}, key, merge) == [*items, {"k": "c", "n": 3}]
    assert items == [{"k": "a", "n": 1}, {"k": "b", "n": 2}]  # the list given is left as it was


def test_a_write_cut_short_leaves_the_old_file_whole_and_no_scratch(tmp_path, monkeypatch):
    path = tmp_path / "store.json"
    records.save(records.CHAPTER_RUNS, [{"n": 1}], path)
    before = path.read_bytes()

    def taken_back(*_):
        raise OSError("host taken back")

    monkeypatch.setattr(os, "replace", taken_back)
    with pytest.raises(OSError, match="taken back"):
        records.save(records.CHAPTER_RUNS, [{"n": 2}] * 1000, path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["store.json"]


def test_an_atomic_write_keeps_the_usual_file_mode(tmp_path):
    plain, atomic = tmp_path / "plain.json", tmp_path / "atomic.json"
    plain.write_text("{}\n")
    records.write_atomic(atomic, "{}\n")
    assert atomic.stat().st_mode == plain.stat().st_mode  # the umask's, not a temporary file's 0600
    assert json.loads(atomic.read_text()) == {}
