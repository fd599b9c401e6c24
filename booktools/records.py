"""The book's three record stores, read and written in one place.

======================  ==========================  ================  =====================================
store                   file                        list under        written by
======================  ==========================  ================  =====================================
:data:`CHAPTER_RUNS`    ``runs/chapter_runs.json``  ``"runs"``        :func:`booktools.runs.record`
:data:`CLAIMS`          ``runs/claims.json``        ``"runs"``        :func:`booktools.evidence.record`
:data:`REHEARSALS`      ``runs/rehearsals.json``    ``"rehearsals"``  :func:`booktools.rehearse.record`
======================  ==========================  ================  =====================================

Each file is one JSON object holding one list of records (plain dicts here; each owner turns them into its
dataclasses), written with an indentation of 1 and a final newline; the claims keep their non-ASCII characters
(``✓``, ``×``) as they are, the two others escape them, as the files always have. A missing file is an empty
store. Every write goes to a temporary file beside the store and then replaces it (:func:`write_atomic`), so a host
taken back mid-write leaves the old file or the new one, never half of one.

How a new record joins a store is the owner's rule, on top of :func:`upsert` (the chapter runs and the claims: one
record per setup, a later run merged into the earlier one of the same setup) or :func:`append` (the rehearsals:
every one kept).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from booktools.paths import RUNS

T = TypeVar("T")


@dataclass(frozen=True)
class Store:
    """One record store: where it is, the key its list is under, and whether it escapes non-ASCII characters."""

    path: Path
    key: str
    ensure_ascii: bool = True


CHAPTER_RUNS = Store(RUNS / "chapter_runs.json", "runs")
CLAIMS = Store(RUNS / "claims.json", "runs", ensure_ascii=False)
REHEARSALS = Store(RUNS / "rehearsals.json", "rehearsals")
STORES = (CHAPTER_RUNS, CLAIMS, REHEARSALS)


def load(store: Store, path: Path | None = None) -> list[dict]:
    """The records of ``store`` (read from ``path`` when given, else from the store's own file); [] without a file.

    >>> load(REHEARSALS, Path("/no/such/file.json"))
    []
    """
    path = store.path if path is None else Path(path)
    if not path.exists():
        return []
    return json.loads(path.read_text(encoding="utf-8"))[store.key]


def dumps(store: Store, items: Sequence[dict]) -> str:
    """The text of a store holding ``items``, exactly as it is committed.

    >>> print(dumps(CLAIMS, [{"holds": "✓"}]), end="")
    {
     "runs": [
      {
       "holds": "✓"
      }
     ]
    }
    >>> dumps(CHAPTER_RUNS, [{"holds": "✓"}]).splitlines()[3]
    '   "holds": "\\\\u2713"'
    """
    return json.dumps({store.key: list(items)}, indent=1, ensure_ascii=store.ensure_ascii) + "\n"


def save(store: Store, items: Sequence[dict], path: Path | None = None) -> None:
    """Write ``items`` as the whole of ``store`` (to ``path`` when given), creating its folder, atomically."""
    write_atomic(store.path if path is None else Path(path), dumps(store, items))


def append(store: Store, item: dict, path: Path | None = None) -> None:
    """Add ``item`` at the end of ``store``, keeping every record already there."""
    save(store, [*load(store, path), item], path)


def upsert(items: Sequence[T], new: T, key: Callable[[T], Hashable], merge: Callable[[T, T], T]) -> list[T]:
    """``items`` with ``new`` in place of the first item of the same ``key``, as ``merge(earlier, new)`` makes it, or
    with ``new`` at the end when none has that key. A store kept this way holds one record per key.

    >>> upsert([("a", 1), ("b", 2)], ("a", 5), key=lambda x: x[0], merge=lambda old, new: (new[0], old[1] + new[1]))
    [('a', 6), ('b', 2)]
    >>> upsert([("a", 1)], ("c", 3), key=lambda x: x[0], merge=lambda old, new: new)
    [('a', 1), ('c', 3)]
    """
    wanted = key(new)
    found = list(items)
    for index, earlier in enumerate(found):
        if key(earlier) == wanted:
            found[index] = merge(earlier, new)
            return found
    return [*found, new]


def write_atomic(path: Path, text: str, *, mode: int | None = None) -> None:
    """Write ``text`` to ``path`` (UTF-8) through a temporary file in the same folder and :func:`os.replace`, creating
    the folder: a reader, or a write cut short, sees the old file or the new one whole. The temporary file is made
    like any other (the umask decides its mode), or with ``mode`` from its creation (0o600: never readable by
    others, not even for a moment), and is removed if the write fails. A symbolic link at ``path`` is replaced,
    not followed."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    scratch = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        if mode is None:
            out = scratch.open("w", encoding="utf-8")
        else:
            descriptor = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, mode)
            os.fchmod(descriptor, mode)  # the umask narrows the mode os.open is given
            out = open(descriptor, "w", encoding="utf-8")  # noqa: SIM115 - closed by the with below
        with out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        os.replace(scratch, path)
    finally:
        scratch.unlink(missing_ok=True)
