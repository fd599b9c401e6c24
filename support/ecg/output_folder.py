"""Where ``python -m support.ecg`` writes, checked before any work starts: the files a run writes are known up
front (:func:`planned_files`), ``--out`` must be a folder this process can create or write into, no input may be
one of those files, and a file already there is never replaced unless the reader passed ``--overwrite``
(:func:`check`). Each file is then created with :func:`create`, which refuses one that appeared meanwhile, so a
file this run did not make is never overwritten.

>>> [p.name for p in planned_files(Path("run"), synthetic=True)]
['ecg.csv', 'truth.npz', 'stream.png', 'lengths.png', 'metrics.json']
>>> [p.name for p in planned_files(Path("run"), synthetic=False)]
['stream.png', 'lengths.png', 'metrics.json']
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path

#: What a synthetic run writes before the pipeline: the recording and its ground truth.
SYNTHETIC_FILES = ("ecg.csv", "truth.npz")
#: What every run writes once the pipeline is done: the two figures and the report.
RESULT_FILES = ("stream.png", "lengths.png", "metrics.json")


class OutputRefused(ValueError):
    """``--out`` cannot take this run's files; the message says why and what to do."""


def planned_files(out: Path, *, synthetic: bool) -> list[Path]:
    """Every file a run writes into ``out``, in the order it writes them."""
    return [out / name for name in (*(SYNTHETIC_FILES if synthetic else ()), *RESULT_FILES)]


def _writable(folder: Path) -> bool:
    """Whether this process may create files in ``folder`` (a read-only file system or a folder not its own says
    no; the kernel decides, for the effective user)."""
    effective = os.access in os.supports_effective_ids
    return os.access(folder, os.W_OK | os.X_OK, effective_ids=effective)


def _listed(paths: Sequence[Path]) -> str:
    names = [p.name for p in paths]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def check(out: Path, files: Sequence[Path], *, overwrite: bool = False, inputs: Mapping[str, Path] = {}) -> None:
    """Raise :class:`OutputRefused` when ``files`` cannot be written into ``out`` without loss.

    ``inputs`` maps a flag (``--input``) to the file it names: an input that is one of ``files`` is refused even
    with ``overwrite``, since the run would replace what it reads.
    """
    if out.exists() and not out.is_dir():
        raise OutputRefused(f"--out {out} is a file; give a folder (it is created when missing)")
    if not out.exists():
        base = next(parent for parent in out.absolute().parents if parent.exists())
        if not base.is_dir():
            raise OutputRefused(f"--out {out} cannot be created: {base} is a file; give another folder")
        if not _writable(base):
            raise OutputRefused(
                f"--out {out} cannot be created: {base} is not writable here (read-only, or not yours); "
                "give a folder you can write to"
            )
        return  # a new folder holds nothing to lose
    if not _writable(out):
        raise OutputRefused(
            f"--out {out} is not writable here (read-only, or not yours); give a folder you can write to"
        )
    for flag, given in inputs.items():
        hit = next((f for f in files if f.exists() and given.exists() and os.path.samefile(f, given)), None)
        if hit is not None:
            raise OutputRefused(
                f"{flag} {given} is the {hit.name} this run writes into --out {out}; give another --out "
                "(the run would replace the file it reads)"
            )
    folders = [f for f in files if f.is_dir()]
    if folders:
        raise OutputRefused(
            f"--out {out} holds a folder named {_listed(folders)} where this run writes a file; give another --out"
        )
    present = [f for f in files if os.path.lexists(f)]
    if present and not overwrite:
        raise OutputRefused(
            f"--out {out} already holds {_listed(present)}, which this run would overwrite; give another --out, "
            "or pass --overwrite to replace them"
        )


@contextlib.contextmanager
def create(path: Path, *, overwrite: bool = False) -> Iterator[Path]:
    """Create ``path`` empty for the ``with`` block to write; an error writing it is one sentence.

    The file is created exclusively: one that appeared since :func:`check` is left alone and refused. With
    ``overwrite``, an existing file (or link) is removed first, so a link is replaced, not the file it points to.
    """
    try:
        if overwrite and os.path.lexists(path) and not path.is_dir():
            path.unlink()
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666))
    except FileExistsError:
        raise OutputRefused(
            f"{path} appeared while the run went on and was left as it is; give another --out"
        ) from None
    except OSError as error:
        raise OutputRefused(f"cannot write {path}: {error.strerror}; give a folder you can write to") from None
    try:
        yield path
    except OSError as error:  # a full disk, a file system gone read-only
        raise OutputRefused(f"writing {path} failed: {error.strerror or error}") from None


def make_folder(out: Path) -> None:
    """Create ``out`` (and its parents) when missing; an error is one sentence."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise OutputRefused(f"cannot create --out {out}: {error.strerror or error}") from None
