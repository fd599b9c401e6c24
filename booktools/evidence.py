"""The book's claims as data: every run's claims on record, the page that lists them, and ``make compare``.

Each chapter states its headline claims through :mod:`support.claims`, which appends every claim it checks to the
file named by ``GPU_INTEROP_CLAIMS_LOG``. ``booktools.runs measure`` (``make execute``, and the runs under a
memory limit) and ``make test-gpu`` set that variable, then :func:`record` keeps the claims in
``runs/claims.json`` with the machine they ran on: GPU, driver, library versions, memory limit, date. One run of a
setup (its label and mode) replaces the same chapters of that setup's earlier run.

``python -m booktools.evidence page`` writes :data:`PAGE`, the book's page *Claims and evidence*: every claim by
chapter, its value on each recorded run, its control, its bar, its verdict (a test keeps the page equal to what
the records give). ``python -m booktools.evidence compare`` (``make compare``) executes chapters on the reader's
GPU, in a scratch copy, and prints each claim's figure beside the book's, with the ratio.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from booktools import freshness, gpu_ready, records
from booktools.paths import CHAPTERS
from support import env
from support.claims import LOG_VARIABLE, describe

# booktools.notebooks (nbclient, nbformat) and pandas are imported in the functions that use them: ``compare`` first
# says in one line what this Python lacks (booktools.gpu_ready), and booktools.runs imports this module for its
# records alone (``python -m booktools.runs readme`` needs neither).

CLAIMS_FILE = records.CLAIMS.path
PAGE = CHAPTERS / "91_claims_and_evidence.md"


@dataclass
class ClaimRun:
    """The claims one setup's run checked, chapter by chapter, and the machine it ran on."""

    label: str  # the setup, as the runs of the README table name it: "H100 80GB", "16 GB (MPS limit)"
    mode: str  # execute or nbval
    gpu: str
    driver: str
    versions: dict[str, str | None]
    limit_bytes: int | None  # the per-process memory limit (an MPS limit), None for the whole GPU
    date: str  # the latest of its chapters' dates
    chapters: dict[str, list[dict]] = field(default_factory=dict)  # notebook name -> its claims, in order
    # notebook name -> the date it ran, where a series ran over several days; a chapter not named ran on ``date``
    chapter_dates: dict[str, str] = field(default_factory=dict)


def chapter_date(run: ClaimRun, notebook: str) -> str:
    """The date ``run`` checked ``notebook``'s claims: its own where the series ran over several days.

    >>> run = ClaimRun("H200", "nbval", "H200", "580", {}, None, "2026-11-27", chapter_dates={"01_a": "2026-11-26"})
    >>> chapter_date(run, "01_a"), chapter_date(run, "06_b")
    ('2026-11-26', '2026-11-27')
    """
    return run.chapter_dates.get(notebook, run.date)


def this_machine(label: str, mode: str, limit_bytes: int | None = None, *, today: str | None = None) -> ClaimRun:
    """An empty :class:`ClaimRun` for ``label`` and ``mode`` on this machine (GPU 0, driver, versions, date)."""
    probe = env.probe_gpus()
    gpu = probe.gpus[0].name if probe.available else f"no GPU ({probe.problem})"
    return ClaimRun(
        label,
        mode,
        gpu,
        probe.driver_version or "unknown",
        env.stack_versions(),
        limit_bytes,
        today or datetime.date.today().isoformat(),
    )


def read_log(path: Path | str) -> list[dict]:
    """The claims a run appended to ``path`` (one JSON object per line); [] when it wrote none."""
    path = Path(path)
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def load(path: Path = CLAIMS_FILE) -> list[ClaimRun]:
    """The recorded claim runs (:data:`booktools.records.CLAIMS`); [] before the first run."""
    return [ClaimRun(**run) for run in records.load(records.CLAIMS, path)]


def save(runs: Sequence[ClaimRun], path: Path = CLAIMS_FILE) -> None:
    """Write ``runs`` as the whole claims file (atomically, :func:`booktools.records.save`)."""
    records.save(records.CLAIMS, [asdict(run) for run in runs], path)


def same_machine(one: ClaimRun, other: ClaimRun) -> bool:
    """Whether two runs had the same GPU, driver, library versions and memory limit (the date aside)."""
    return (one.gpu, one.driver, one.versions, one.limit_bytes) == (
        other.gpu,
        other.driver,
        other.versions,
        other.limit_bytes,
    )


def record(run: ClaimRun, path: Path = CLAIMS_FILE) -> None:
    """Keep ``run`` in the claims file under its setup (label and mode). On the same machine (GPU, driver,
    versions, limit) its chapters replace the same chapters of the earlier run of that setup, so a series can be
    run in several calls, each chapter keeping the date it ran (:func:`chapter_date`); on another machine it
    replaces the earlier run whole, so that no chapter's figures are shown beside another machine's facts. A new
    setup is added at the end."""

    def merged(earlier: ClaimRun, run: ClaimRun) -> ClaimRun:
        if not same_machine(earlier, run):
            return run
        chapters = {**earlier.chapters, **run.chapters}
        dates = {name: chapter_date(earlier, name) for name in earlier.chapters} | {
            name: chapter_date(run, name) for name in run.chapters
        }
        latest = max(dates.values(), default=run.date)
        return ClaimRun(
            **{
                **asdict(run),
                "date": latest,
                "chapters": dict(sorted(chapters.items())),
                "chapter_dates": {name: day for name, day in sorted(dates.items()) if day != latest},
            }
        )

    save(records.upsert(load(path), run, key=lambda r: (r.label, r.mode), merge=merged), path)


def chapter_title(notebook: str, folder: Path = CHAPTERS) -> str:
    """The first heading of a chapter's notebook (its name when it has none)."""
    from booktools.notebooks import read_notebook  # noqa: PLC0415  # nbclient, nbformat (see the top)

    path = folder / f"{notebook}.ipynb"
    if path.exists():
        for cell in read_notebook(path).cells:
            if cell.cell_type == "markdown":
                for line in cell.source.splitlines():
                    if line.startswith("# "):
                        return line[2:].strip()
    return notebook


def shown(claim: dict | None) -> str:
    """A claim's measured value as the page shows it, with its verdict."""
    if claim is None:
        return ""
    value = describe(claim["value"], claim["unit"])
    if claim["kind"] == "beats":
        value = f"{value} ({describe(claim['factor'], '×')})"
    if claim["kind"] == "ahead":
        value = f"{value} ({claim['difference']:+.3g})"
    return f"{value} {'✓' if claim['holds'] else '✗'}"


def control_text(claim: dict) -> str:
    if not claim.get("control_is"):
        return ""
    if claim["kind"] in ("same_memory", "holds"):
        return f"{claim['control_is']}: {describe(claim['control'], '')}"
    if claim["kind"] == "refused":
        return f"{claim['control_is']}: {claim['control']}"
    return f"{claim['control_is']}: {describe(claim['control'], claim['unit'])}"


def run_name(run: ClaimRun, notebook: str | None = None) -> str:
    """A recorded run's name as a reader understands it: the setup, what was done, the date ("H100 80GB, executed
    2026-11-24"; "16 GB (MPS limit), re-run and compared 2026-11-24"): with ``notebook``, the date that chapter ran;
    without, the days the series ran ("2026-11-26 to 2026-11-27")."""
    done = {"execute": "executed", "nbval": "re-run and compared"}.get(run.mode, run.mode)
    if notebook is not None:
        return f"{run.label}, {done} {chapter_date(run, notebook)}"
    first = min([run.date, *run.chapter_dates.values()])
    return f"{run.label}, {done} {run.date if first == run.date else f'{first} to {run.date}'}"


#: What each kind of run did, for the page's list of runs.
RUN_MODES = {
    "execute": "every chapter executed top to bottom; the outputs the book shows are this run's",
    "nbval": "the committed notebooks run again and each cell's output compared with the committed one",
}
#: How many characters of a refusal's message a claim records (support.claims.refused).
RECORDED_MESSAGE = 80


def whole_words(text: str) -> str:
    """A recorded refusal's message that was cut at :data:`RECORDED_MESSAGE` characters, cut back to its last whole
    word and marked with an ellipsis; any other text as it is.

    >>> whole_words("Refused: " + "a managed allocation of 47.12 GiB, with the 47.12 GiB of managed memory this pro")
    'Refused: a managed allocation of 47.12 GiB, with the 47.12 GiB of managed memory this …'
    >>> whole_words("ValueError: no")
    'ValueError: no'
    """
    name, colon, message = text.partition(": ")
    if not colon or len(message) < RECORDED_MESSAGE:
        return text
    return f"{name}: {message[:RECORDED_MESSAGE].rsplit(' ', 1)[0]} …"


def shown_whole(claim: dict) -> str:
    """:func:`shown`, with a refusal's recorded message cut back to whole words (:func:`whole_words`)."""
    if claim["kind"] != "refused" or not isinstance(claim["value"], str):
        return shown(claim)
    return f"{whole_words(claim['value'])} {'✓' if claim['holds'] else '✗'}"


def slug(heading: str) -> str:
    """The anchor MyST gives a heading (``myst_heading_anchors`` in ``_config.yml``): its text without markup,
    lower case, spaces as hyphens, only letters, digits, ``_`` and ``-`` kept.

    >>> slug("A first taste: one buffer, `torch.from_dlpack` and **three** frameworks")
    'a-first-taste-one-buffer-torchfrom_dlpack-and-three-frameworks'
    """
    text = re.sub(r"\]\([^)]*\)", "", heading).replace("[", "")
    text = re.sub(r"(\*\*|__|`)", "", text).strip()
    return re.sub(r"[^\w\u4e00-\u9fff\- ]", "", text.lower().replace(" ", "-"))


def claim_sections(notebook: str, folder: Path = CHAPTERS) -> dict[str, tuple[str, str]]:
    """For each claim a chapter's code names in quotes (``"zero.same_memory"``, or built by an f-string such as
    ``f"start.{name}_shares"``), the section it is measured in:
    the nearest heading of level 1 to 3 above its cell, and that heading's anchor (as MyST numbers repeated
    headings: ``-1``, ``-2``)."""
    from booktools.notebooks import headings, read_notebook  # noqa: PLC0415  # nbclient, nbformat (see the top)

    path = folder / f"{notebook}.ipynb"
    if not path.exists():
        return {}
    found, seen, current, templates = {}, [], None, []
    for cell in read_notebook(path).cells:
        if cell.cell_type == "markdown":
            for level, text in headings(cell.source):
                if level <= 3:
                    anchor = base = slug(text)
                    number = 1
                    while anchor in seen:
                        anchor, number = f"{base}-{number}", number + 1
                    seen.append(anchor)
                    current = (re.sub(r"(\*\*|`)", "", text).strip(), anchor)
        elif current is not None:
            for name in re.findall(r"""["']([\w]+\.[\w.]+)["']""", cell.source):
                found.setdefault(name, current)
            for template in re.findall(r"""\bf["'](\w+\.[\w.{}()\[\]'"]*\{[^"']*)["']""", cell.source):
                parts = re.split(r"\{[^}]*\}", template)
                templates.append((re.compile(".+".join(map(re.escape, parts)) + "$"), current))
    return _with_templates(found, templates)


def _with_templates(found: dict, templates: list) -> dict:
    """``found`` that also answers names a cell builds with an f-string (``f"start.{name}_shares"``)."""

    class Sections(dict):
        def get(self, name, default=None):
            if name in self:
                return self[name]
            return next((where for pattern, where in templates if pattern.match(name)), default)

    return Sections(found)


def stale_chapters(folder: Path = CHAPTERS) -> set[str]:
    """The chapters (``06_ecg_pipeline``) whose committed outputs predate their code (:mod:`booktools.freshness`):
    their recorded claims are of an earlier version."""
    return {
        Path(path).stem
        for path, found in freshness.report(sorted(folder.glob("*.ipynb")), folder.parent).items()
        if found.status == "stale"
    }


def page(runs: Sequence[ClaimRun], folder: Path = CHAPTERS, stale: Collection[str] = ()) -> str:
    """The page *Claims and evidence* as MyST Markdown: the recorded runs, then per chapter one small block per
    claim (what it says, where it is measured, its control and bar, its value on each run that checked it), which
    reads the same on a phone as on a laptop. A chapter named in ``stale`` (:func:`stale_chapters`) says that its
    code changed after these runs."""
    lines = [
        "# Claims and evidence",
        "",
        "Every headline claim of the book, with the measurement that supports it, the control it was checked",
        "against, the bar it had to clear and its verdict (✓ holds, ✗ does not), on each recorded run. A chapter",
        "states each claim through `support.claims`, which asserts it, so a claim that fails stops its chapter.",
        "Each claim links to the section of its chapter that measures it; the claim's name is the one its cell",
        "prints after the ✓. This page is written by `python -m booktools.evidence page` from `runs/claims.json`;",
        "a test keeps it equal to the records. To see whether your GPU behaves like the book's, run `make compare`.",
        "",
        "## The recorded runs",
        "",
    ]
    if not runs:
        lines += ["No run has been recorded yet.", ""]
    executed: dict[str, str] = {}  # each chapter's latest execution
    for run in runs:
        if run.mode == "execute":
            for name in run.chapters:
                executed[name] = max(executed.get(name, ""), chapter_date(run, name))
    for run in runs:
        limit = (
            f"a memory limit of {describe(run.limit_bytes, 'B')} per process" if run.limit_bytes else "the whole GPU"
        )
        older = (
            " It ran before the latest execution, on earlier versions of the chapters: its figures are not of the"
            " outputs shown, and a claim renamed or removed since is not listed."
            if run.mode != "execute" and any(chapter_date(run, name) < executed.get(name, "") for name in run.chapters)
            else ""
        )
        lines += [
            f"- **{run_name(run)}**: {RUN_MODES.get(run.mode, run.mode)}; {run.gpu}, driver {run.driver}, {limit}."
            + older,
        ]
    lines += [""]
    notebooks = sorted({name for run in runs for name in run.chapters})
    for notebook in notebooks:
        sections = claim_sections(notebook, folder)
        lines += [f"## {chapter_title(notebook, folder)}", ""]
        absent = [run_name(run) for run in runs if notebook not in run.chapters]
        said = f"[Read the chapter]({notebook}.ipynb)."
        if absent:
            runs_said = "The run" + ("s " if len(absent) > 1 else " ") + " and ".join(f"*{name}*" for name in absent)
            said += f" {runs_said} did not include this chapter."
        lines += [said, ""]
        if notebook in stale:
            lines += [
                "**This chapter's code changed after these runs** (its cells, or the `support/` code it runs): the",
                "claims below, their controls and their figures are of the earlier version, until the chapter is",
                "executed again.",
                "",
            ]
        names = []
        for run in runs:
            for claim in run.chapters.get(notebook, []):
                if claim["name"] not in names:
                    names.append(claim["name"])
        for name in names:
            found = [(run, find(run, notebook, name)) for run in runs]
            first = next(c for _, c in found if c is not None)
            where = sections.get(name)
            place = f"[{where[0]}]({notebook}.ipynb#{where[1]})" if where else f"[the chapter]({notebook}.ipynb)"
            if where is None and notebook in stale:
                place += " (a claim the chapter's current code no longer makes)"
            lines += [f"**{first['says']}**", "", f"- measured in {place}, as `{name}`"]
            control = control_text(first)
            against = f"against {control}" if control else "no control: the check itself"
            lines += [f"- {against}; bar: {first['bar'] or 'none'}"]
            for run, claim in found:
                if claim is not None:
                    lines += [f"- {run_name(run, notebook)}: {shown_whole(claim)}"]
            missing = [run_name(run, notebook) for run, claim in found if claim is None and notebook in run.chapters]
            if missing:
                lines += [
                    f"- not checked in {' or '.join(missing)} (the chapter stopped before it, or had no such claim)"
                ]
            lines += [""]
    return "\n".join(lines).rstrip() + "\n"


def find(run: ClaimRun, notebook: str, name: str) -> dict | None:
    """The claim ``name`` as ``run`` recorded it in ``notebook`` (``06_ecg_pipeline``), or None."""
    return next((claim for claim in run.chapters.get(notebook, []) if claim["name"] == name), None)


def write_page(runs: Sequence[ClaimRun] | None = None, path: Path = PAGE) -> Path:
    path.write_text(page(load() if runs is None else runs, stale=stale_chapters()), encoding="utf-8")
    return path


#: A recorded bar as :func:`support.claims.describe` printed it, and what its unit is in the value's own units.
BAR = re.compile(r"at (?P<side>least|most) (?P<number>-?[\d,.]+)\s*(?P<unit>ms|µs|ns|s|%|×)?")
SCALE = {"ms": 1e-3, "µs": 1e-6, "ns": 1e-9, "s": 1.0, "%": 0.01, "×": 1.0, None: 1.0}


def recorded_bar(text: str) -> tuple[str, float]:
    """The side and the number of a recorded ``at_least``/``at_most`` bar, in the value's units. The bars are
    printed rounded (``describe``), which is how the records keep them.

    >>> recorded_bar("at most 15.0 ms"), recorded_bar("at least 85.0%")
    (('most', 0.015), ('least', 0.85))
    """
    found = BAR.match(text)
    if not found:
        raise ValueError(f"a bar this cannot read: {text!r}")
    return found["side"], float(found["number"].replace(",", "")) * SCALE[found["unit"]]


def control_clears_bar(claim: dict) -> bool:
    """Whether an ``at_least``/``at_most`` claim's numeric control clears the claim's own bar: then the claim says
    nothing, since what would make it trivial passes too. :func:`support.claims.at_least` and ``at_most`` print
    the control without checking it; the tests check every recorded run, :func:`comparison_rows` a reader's.
    False for every other kind of claim (each checks its control as it settles) and where there is no number."""
    control = claim.get("control")
    if claim.get("kind") not in ("at_least", "at_most") or isinstance(control, bool):
        return False
    if not isinstance(control, int | float):
        return False
    side, bar = recorded_bar(claim["bar"])
    return control >= bar if side == "least" else control <= bar


def comparison_rows(book: ClaimRun, mine: dict[str, list[dict]]) -> list[dict]:
    """Each claim run here beside the book's figure for it: both values, ``here / book`` for numbers (for a claim
    against a control, of the factor over the control), and whether it holds here: a claim whose control clears
    its bar too does not (:func:`control_clears_bar`)."""
    rows = []
    for notebook, claims in mine.items():
        for claim in claims:
            theirs = find(book, notebook, claim["name"])
            number = "factor" if claim["kind"] == "beats" else "value"
            ratio = None
            if theirs is not None and all(isinstance(c[number], int | float) for c in (claim, theirs)):
                if not isinstance(claim[number], bool) and theirs[number]:
                    ratio = claim[number] / theirs[number]
            rows.append(
                {
                    "claim": claim["name"],
                    "book": shown(theirs) or "not in the book's run",
                    "here": shown(claim),
                    "here / book": "" if ratio is None else f"{ratio:.2f}",
                    "holds here": holds_here(claim),
                }
            )
    return rows


def holds_here(claim: dict) -> str:
    """``"yes"``, ``"NO"``, or ``"NO: its control clears the bar too"`` (:func:`control_clears_bar`)."""
    if not claim["holds"]:
        return "NO"
    return "NO: its control clears the bar too" if control_clears_bar(claim) else "yes"


def execute_for_claims(notebooks: Sequence[Path], log) -> dict[str, list[dict]]:
    """Execute copies of ``notebooks`` (in a scratch copy of their folder, so the committed ones stay as they are)
    with claims logged; return each notebook's claims. A chapter that stops is reported with the claims it got to.
    """
    from booktools.notebooks import execute_notebook  # noqa: PLC0415  # nbclient, nbformat (see the top)

    found = {}
    with tempfile.TemporaryDirectory(prefix="book-compare-") as scratch:
        copy = Path(scratch) / "chapters"
        shutil.copytree(CHAPTERS, copy)
        for notebook in notebooks:
            claims_log = Path(scratch) / f"{Path(notebook).stem}.jsonl"
            os.environ[LOG_VARIABLE] = str(claims_log)
            log(f"executing {Path(notebook).name} ...")
            try:
                execute_notebook(copy / Path(notebook).name)
            except Exception as error:  # noqa: BLE001 - a stopped chapter is a finding here
                log(f"  it stopped: {str(error).strip().splitlines()[-1][:200]}")
            finally:
                os.environ.pop(LOG_VARIABLE, None)
            found[Path(notebook).stem] = read_log(claims_log)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m booktools.evidence", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="action", required=True)
    sub.add_parser("page", help=f"write {PAGE.relative_to(CHAPTERS.parent)} from runs/claims.json")
    compare = sub.add_parser("compare", help="execute chapters here and print their claims beside the book's")
    compare.add_argument("notebooks", nargs="*", type=Path, help="default: every chapter that needs one GPU")
    compare.add_argument("--reference", help="the recorded run to compare with (default: the first one)")
    args = parser.parse_args(argv)
    if args.action == "page":
        print(write_page())
        return 0
    said = gpu_ready.problem("compare", args.notebooks)  # no GPU or a library missing: one line, nothing executed
    if said:
        print(said, file=sys.stderr)
        return 2
    import pandas as pd  # noqa: PLC0415  # after the check above (see the top)

    from booktools import notebooks as nb  # noqa: PLC0415  # after the check above (see the top)

    runs = load()
    if not runs:
        print("no recorded run to compare with: runs/claims.json is empty")
        return 1
    labels = [run.label for run in runs]
    if args.reference and args.reference not in labels:
        print(f"no recorded run is labelled {args.reference!r}; choose one of: {', '.join(labels)}")
        return 2
    book = next(run for run in runs if run.label == (args.reference or labels[0]))
    chosen = args.notebooks or [p for p in nb.chapter_notebooks() if nb.gpus_needed(nb.read_notebook(p)) == 1]
    missing = [str(p) for p in chosen if not Path(p).exists()]
    if missing:
        print(f"no such notebook: {', '.join(missing)}")
        return 2
    mine = execute_for_claims(chosen, print)
    here = this_machine("here", "execute")
    print(f"\nthe book: {book.label} ({book.gpu}, driver {book.driver}, {book.date})")
    print(f"here:     {here.gpu}, driver {here.driver}, {here.date}\n")
    rows = comparison_rows(book, mine)
    with pd.option_context("display.max_colwidth", 60, "display.width", 200):
        print(pd.DataFrame(rows).to_string(index=False) if rows else "no claim ran")
    failed = [row["claim"] for row in rows if row["holds here"] != "yes"]
    expected = sum(len(book.chapters.get(Path(p).stem, [])) for p in chosen)
    print(f"\n{len(rows)} claims ran here ({expected} in the book's run of these chapters); {len(failed)} do not hold")
    return 1 if failed or len(rows) < expected else 0


if __name__ == "__main__":
    sys.exit(main())
