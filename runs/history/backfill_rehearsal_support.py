"""One-off: give each rehearsal on record the hash of its chapters' support code as its seats ran it.

    PYTHONPATH=. python runs/history/backfill_rehearsal_support.py [--write]   # from the repository root

Records made before :attr:`booktools.rehearse.Rehearsal.support` was kept hold only their chapters' code cells.
Each record was appended to ``runs/rehearsals.json`` by one commit, and the rehearsal ran on the tree before it:
the commit's parent. For each chapter the record ran, the support hash is
:func:`booktools.rehearse.support_hash` of the files the notebook's fingerprint lists at that parent, read there
(``git show PARENT:path``). It also says, for each, whether the hash differs at any commit of the 90 minutes before
the record's commit (the window the cells' backfill checked): a rehearsal may have started on an earlier tree. The
parent's hash is recorded unless those versions disagree on whether they are the current code (then whichever ran,
the record could be wrong, and the chapter's support is left unrecorded); where all of them are earlier versions, a
chapter ran an earlier version whichever it was. A chapter whose cells were left unrecorded gets its support too.
Without ``--write`` it prints what it would record.
"""

from __future__ import annotations

import json
import subprocess
import sys

from booktools import records, rehearse
from booktools.paths import ROOT

RECORDS = "runs/rehearsals.json"
WINDOW_S = 90 * 60


def git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout


def show(commit: str, path: str) -> bytes | None:
    found = subprocess.run(["git", "show", f"{commit}:{path}"], cwd=ROOT, capture_output=True)
    return found.stdout if found.returncode == 0 else None


def adding_commits() -> list[str]:
    """The commit that appended each record of ``runs/rehearsals.json``, in the records' order."""
    added: list[str] = []
    for commit in git("log", "--format=%H", "--reverse", "--", RECORDS).split():
        data = show(commit, RECORDS)
        count = 0 if data is None else len(json.loads(data)["rehearsals"])
        added += [commit] * (count - len(added))
    return added


def support_at(commit: str, chapter: str) -> str | None:
    notebook = show(commit, f"chapters/{chapter}.ipynb")
    if notebook is None:
        return None
    return rehearse.support_hash(json.loads(notebook), ROOT, read=lambda name: show(commit, name))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    data = json.loads((ROOT / RECORDS).read_text())
    commits = adding_commits()
    assert len(commits) == len(data["rehearsals"]), (len(commits), len(data["rehearsals"]))
    for number, (item, commit) in enumerate(zip(data["rehearsals"], commits, strict=True), start=1):
        parent = git("rev-parse", f"{commit}^").strip()
        when = int(git("show", "-s", "--format=%ct", commit))
        window = git("rev-list", f"--since={when - WINDOW_S}", parent).split()
        support = {}
        for chapter in item["chapters"]:
            found = support_at(parent, chapter)
            others = {support_at(c, chapter) for c in window} - {found}
            now = rehearse.support_of(chapter)
            if others and any((other == now) != (found == now) for other in others):
                print(
                    f"rehearsal {number} ({commit[:7]}^): {chapter} not recorded, {found} or {sorted(map(str, others))}"
                )
                continue
            support[chapter] = found
            also = f" (in the 90 min before also {sorted(map(str, others))}, none the current)" if others else ""
            print(f"rehearsal {number} ({commit[:7]}^): {chapter} {found}{also}")
        item["support"] = support
    if "--write" in argv:
        records.save(records.REHEARSALS, data["rehearsals"], ROOT / RECORDS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
