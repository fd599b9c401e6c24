"""Reading an ECG: a one-column CSV straight into GPU memory with cuDF (or into host memory with pandas), or a
WFDB record (PhysioNet's format, e.g. the MIT-BIH database) with the ``wfdb`` package.

Bad input gets a :class:`SignalError` that names the problem and where it is, never a crash inside a library:
an empty file, rows that are not numbers, missing values. One documented repair is made: an isolated missing
sample (a blank line, ``nan``, ``NA``) whose neighbours are present becomes the mean of its neighbours; runs of
two or more missing samples are an error, because inventing a stretch of ECG would invent beats.

>>> import pathlib, tempfile
>>> path = pathlib.Path(tempfile.mkdtemp()) / "ecg.csv"
>>> _ = path.write_text("0.1\\n0.3\\nnan\\n0.7\\n")
>>> recording = read_signal(path, on="cpu")
>>> recording.signal.tolist(), recording.repaired
([0.10000000149011612, 0.30000001192092896, 0.5, 0.699999988079071], 1)
"""

from __future__ import annotations

import contextlib
import math
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas

from support.arrays import array_module, to_host
from support.ecg import synthetic
from support.interop import share

#: Tokens that stand for a missing value (after stripping blanks), as pandas and cuDF read them.
MISSING_TOKENS = frozenset({"", "nan", "NaN", "NAN", "NA", "N/A", "n/a", "null", "NULL", "None", "-nan", "-NaN"})
SHOWN = 3  # bad rows quoted in an error


class SignalError(ValueError):
    """The input cannot be read as an ECG; the message says what is wrong and where."""


@dataclass(frozen=True)
class Recording:
    """Samples (float32, NumPy or CuPy), where they came from, and how many isolated gaps were filled."""

    signal: object
    source: str
    repaired: int = 0
    fs: float | None = None  # known for WFDB records; a CSV does not say
    column: object = None  # the cuDF column the samples were read into, when they share its memory
    annotations: object = None  # BeatAnnotations of a WFDB record read with annotation=


def _first_line(path: Path) -> str:
    with path.open("r", errors="replace") as handle:
        return handle.readline().rstrip("\r\n")


def _is_number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


def _layout(path: Path, column: str | int | None) -> tuple[bool, str | int | None]:
    """Whether the file has a header line, and which column to read."""
    first = _first_line(path)
    fields = first.split(",")
    has_header = not all(_is_number(f.strip()) or f.strip() in MISSING_TOKENS for f in fields)
    if column is None:
        if len(fields) != 1:
            raise SignalError(
                f"{path}: expected one value per line, but line 1 has {len(fields)} fields ({first[:60]!r}); "
                "pass column= to choose one"
            )
        return has_header, None  # one column: a row with more fields is an error, not ignored
    if isinstance(column, str):
        if not has_header:
            raise SignalError(f"{path}: column {column!r} was asked for, but the file has no header line")
        if column not in [f.strip() for f in fields]:
            raise SignalError(f"{path}: no column {column!r}; the header has {[f.strip() for f in fields]}")
        return has_header, column
    if not 0 <= column < len(fields):
        raise SignalError(f"{path}: column {column} does not exist; line 1 has {len(fields)} fields")
    return has_header, column


def _read_frame(path: Path, on: str, has_header: bool, column, as_text: bool):
    if on == "gpu":
        import cudf as library
    elif on == "cpu":
        library = pandas
    else:
        raise ValueError(f"on must be 'gpu' or 'cpu', not {on!r}")
    options = dict(header=0 if has_header else None, skip_blank_lines=False)
    value_type = str if as_text else "float32"
    if column is None:  # a second column catches rows with more than one value, which readers may drop
        options.update(header=None, skiprows=1 if has_header else 0, names=["value", "extra"])
        options.update(dtype={"value": value_type, "extra": str})
    else:
        options.update(usecols=[column], dtype=value_type)
    if as_text:
        options.update(keep_default_na=False, na_filter=False)
    try:
        frame = library.read_csv(path, **options)
    except Exception as error:  # the libraries raise many types; say which file and what they said
        raise SignalError(f"{path} could not be read as a CSV of numbers: {str(error).strip()}") from error
    if column is None:
        extra = frame["extra"]
        crowded = (extra.fillna("").str.len() > 0) if as_text else extra.notna()
        if bool(crowded.any()):
            rows = to_host(crowded.to_numpy() if on == "cpu" else crowded.values).nonzero()[0]
            row = int(rows[0])
            raise SignalError(
                f"{path}: {len(rows)} rows have more than one value, first at line {row + (2 if has_header else 1)} "
                f"({_text_at(frame['value'], row)!r}, then {_text_at(extra, row)!r}); expected one value per line"
            )
        return frame["value"]
    return frame[frame.columns[0]]


def _null_count(series) -> int:
    return int(series.null_count) if hasattr(series, "null_count") else int(series.isna().sum())


def _values(series, on: str):
    """The column as an array where it lives (CuPy on the GPU, shared with cuDF when it has no nulls)."""
    if on == "gpu":
        if _null_count(series):
            return series.to_cupy(na_value=math.nan)
        return share(series, "cupy")
    return series.to_numpy(dtype=np.float32, na_value=np.nan)


def read_signal(path, *, on: str = "gpu", column: str | int | None = None) -> Recording:
    """Read one column of numbers from a CSV into GPU memory (``on="gpu"``, cuDF) or host memory (pandas).

    The file has one value per line, with or without a header line; for a file with several columns, name the
    column. Rows that are not numbers raise :class:`SignalError` quoting the first ones with their line numbers.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no ECG file at {path}")
    if path.stat().st_size == 0:
        raise SignalError(f"{path} is empty: expected one number per line")
    has_header, column = _layout(path, column)
    try:
        series = _read_frame(path, on, has_header, column, as_text=False)
        bad = None
    except SignalError:  # a reader that refuses non-numbers (pandas does): find them as text
        series, bad = None, _read_frame(path, on, has_header, column, as_text=True)
    first_line = 2 if has_header else 1
    if series is not None and len(series) == 0:
        raise SignalError(f"{path} has a header but no samples")
    if series is not None and not _null_count(series):
        return Recording(_values(series, on), str(path), column=series if on == "gpu" else None)
    text = bad if bad is not None else _read_frame(path, on, has_header, column, as_text=True)
    return _repair_or_refuse(series, text, on, path, first_line)


def _repair_or_refuse(series, text, on: str, path: Path, first_line: int) -> Recording:
    """Classify the rows that did not parse: missing values (repaired when isolated) or not numbers (refused)."""
    stripped = text.fillna("").str.strip()  # cuDF leaves empty fields null even as text
    missing_token = stripped.isin(sorted(MISSING_TOKENS))
    if on == "gpu":
        import cudf

        numeric = cudf.to_numeric(stripped.where(~missing_token, None), errors="coerce")
    else:
        numeric = pandas.to_numeric(stripped.where(~missing_token, None), errors="coerce")
    not_number = numeric.isna() & ~missing_token
    if bool(not_number.any()):
        rows = to_host(not_number.to_numpy() if on == "cpu" else not_number.values).nonzero()[0]
        quoted = ", ".join(f"line {first_line + r}: {_text_at(text, r)!r}" for r in rows[:SHOWN])
        raise SignalError(f"{path}: {len(rows)} rows are not numbers ({quoted}{', …' if len(rows) > SHOWN else ''})")
    values = _values(numeric.astype("float32"), on)
    return repair_isolated_gaps(values, str(path), first_line)


def _text_at(series, row: int) -> str:
    return str(series.iloc[int(row)])


def repair_isolated_gaps(values, source: str, first_line: int = 1) -> Recording:
    """Fill each NaN whose neighbours are numbers with their mean; refuse runs of NaN, naming where they are."""
    xp = array_module(values)
    missing = xp.isnan(values)
    count = int(missing.sum())
    if count == 0:
        return Recording(values, source)
    if len(values) < 3:
        raise SignalError(f"{source}: {count} of its {len(values)} samples are missing")
    previous_missing = xp.concatenate([xp.ones(1, bool), missing[:-1]])
    next_missing = xp.concatenate([missing[1:], xp.ones(1, bool)])
    isolated = missing & ~previous_missing & ~next_missing
    in_runs = missing & ~isolated
    if bool(in_runs.any()):
        rows = to_host(xp.flatnonzero(in_runs)[:SHOWN])
        where = ", ".join(f"line {first_line + int(r)}" for r in rows)
        raise SignalError(
            f"{source}: {int(in_runs.sum())} missing samples lie in runs (or at either end), first at {where}; "
            "only isolated missing samples are filled in, by the mean of their neighbours"
        )
    filled = values.copy()
    neighbours_mean = (xp.roll(values, 1) + xp.roll(values, -1)) / 2
    filled[isolated] = neighbours_mean[isolated]
    return Recording(filled, source, repaired=count)


@contextlib.contextmanager
def _wfdb_quietly():
    """wfdb 4.3 calls DataFrame.set_index and drop with ``inplace=True``, which pandas 3 deprecates: wfdb's to
    fix, not the reader's. Silences that one deprecation, in wfdb's own modules, while wfdb runs."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The inplace keyword in DataFrame", module=r"wfdb\..*")
        yield


def read_wfdb(record, *, channel: int | str = 0, annotation: str | None = None) -> Recording:
    """Read one channel of a WFDB record (``record`` is the path without extension) into host memory, in mV.

    Needs the ``wfdb`` package. Samples the record marks invalid become NaN and are repaired as in a CSV.
    With ``annotation="atr"`` (the MIT-BIH databases' reference annotations), the beat annotations come too,
    mapped to AAMI classes (:func:`read_annotations`), so that the detector can be scored per class.
    """
    with _wfdb_quietly():
        try:
            import wfdb  # noqa: PLC0415  # optional: the error below names the fix
        except ImportError:
            raise ModuleNotFoundError("reading WFDB records needs the wfdb package: pip install wfdb") from None
    record = str(record)
    if not Path(record + ".hea").is_file():
        raise FileNotFoundError(f"no WFDB header at {record}.hea (pass the record path without extension)")
    with _wfdb_quietly():
        header = wfdb.rdheader(record)
    names = list(header.sig_name or [])
    index = names.index(channel) if isinstance(channel, str) and channel in names else channel
    if not isinstance(index, int) or not 0 <= index < header.n_sig:
        raise SignalError(f"{record}: no channel {channel!r}; the record has {names}")
    with _wfdb_quietly():
        data = wfdb.rdrecord(record, channels=[index], physical=True)
    unit = (data.units or ["mV"])[0]
    scale = {"mV": 1.0, "uV": 1e-3, "µV": 1e-3, "V": 1e3}.get(unit)
    if scale is None:
        raise SignalError(f"{record}: channel {names[index]!r} is in {unit!r}, not a voltage this reader knows")
    signal = (data.p_signal[:, 0] * scale).astype(np.float32)
    if len(signal) == 0:
        raise SignalError(f"{record} has no samples")
    repaired = repair_isolated_gaps(signal, record)
    annotations = read_annotations(record, extension=annotation) if annotation else None
    return Recording(repaired.signal, record, repaired.repaired, fs=float(data.fs), annotations=annotations)


#: MIT-BIH beat annotation symbols by AAMI class (ANSI/AAMI EC57): N normal and bundle-branch-block beats and
#: nodal/atrial escapes, S supraventricular ectopic, V ventricular ectopic, F fusion of ventricular and normal,
#: Q paced, fusion of paced and normal, and unclassifiable. Other symbols (rhythm changes, noise, comments)
#: are not beats.
AAMI_SYMBOLS = {
    "N": ("N", "L", "R", "e", "j"),
    "S": ("A", "a", "J", "S"),
    "V": ("V", "E"),
    "F": ("F",),
    "Q": ("/", "f", "Q"),
}
#: One MIT-BIH symbol to its AAMI class.
MITBIH_TO_AAMI = {symbol: aami for aami, symbols in AAMI_SYMBOLS.items() for symbol in symbols}


def aami_classes(symbols) -> np.ndarray:
    """The AAMI class (``"N"``, ``"S"``, ``"V"``, ``"F"``, ``"Q"``) of each MIT-BIH beat symbol; ``""`` for an
    annotation that is not a beat.

    >>> aami_classes(["N", "L", "A", "V", "F", "/", "+", "~"]).tolist()
    ['N', 'N', 'S', 'V', 'F', 'Q', '', '']
    """
    return np.array([MITBIH_TO_AAMI.get(str(s), "") for s in symbols], dtype="<U1")


@dataclass(frozen=True)
class BeatAnnotations:
    """A record's beat annotations: sample of each beat, its MIT-BIH symbol and its AAMI class."""

    samples: np.ndarray
    symbols: np.ndarray
    classes: np.ndarray

    def labels(self) -> np.ndarray:
        """The chapter's labels (:data:`support.ecg.synthetic.KINDS`): N, S, V, F as normal, supraventricular,
        ventricular, fusion; Q (paced or unclassifiable) as the label the chapter gives unreadable beats."""
        by_letter = {letter: label for label, letter in synthetic.AAMI_LETTERS.items()}
        return np.array([by_letter[c] for c in self.classes], dtype=np.int8)

    def counts(self) -> dict[str, int]:
        return {letter: int((self.classes == letter).sum()) for letter in AAMI_SYMBOLS}


def read_annotations(record, *, extension: str = "atr") -> BeatAnnotations:
    """The beat annotations of a WFDB record (``record.atr`` by default), non-beat annotations left out."""
    with _wfdb_quietly():
        try:
            import wfdb  # noqa: PLC0415  # optional: the error below names the fix
        except ImportError:
            raise ModuleNotFoundError("reading WFDB annotations needs the wfdb package: pip install wfdb") from None
    record = str(record)
    if not Path(f"{record}.{extension}").is_file():
        raise FileNotFoundError(f"no annotation file {record}.{extension}")
    with _wfdb_quietly():
        annotation = wfdb.rdann(record, extension)
    symbols = np.asarray(annotation.symbol, dtype=str)
    classes = aami_classes(symbols)
    beat = classes != ""
    return BeatAnnotations(np.asarray(annotation.sample, dtype=np.int64)[beat], symbols[beat], classes[beat])


def write_csv(signal, path, decimals: int = 4) -> Path:
    """Write samples one per line, no header, rounded to ``decimals`` (with cuDF for a CuPy array)."""
    path = Path(path)
    xp = array_module(signal)
    rounded = xp.round(signal.astype(xp.float64), decimals)
    if xp is np:
        pandas.Series(rounded).to_csv(path, index=False, header=False, float_format=f"%.{decimals}f")
    else:
        import cudf

        cudf.DataFrame({"mv": rounded}).to_csv(path, index=False, header=False)
    return path
