"""Planning a workshop from the book's measured runs: what each chapter costs, and how many participants a GPU
holds. The teacher's page (``chapters/90_for_teachers.ipynb``) shows these; nothing here needs a GPU.
"""

from __future__ import annotations

from collections.abc import Sequence

from booktools.runs import RunGroup, chapter_name, chapter_needs, load
from support.units import GIB


def planning_rows(chapters: Sequence[str], groups: Sequence[RunGroup] | None = None, full: str = "H100 80GB"):
    """Per chapter (``01_why_gpus``): its run time on the ``full`` GPU and the memory it was measured to need
    under a limit (:func:`booktools.runs.chapter_needs`), from the recorded runs; None where nothing was measured."""
    groups = load() if groups is None else groups
    on_full = next((g for g in groups if g.label == full and not g.parallel), None)
    needs = chapter_needs(groups)
    rows = []
    for name in chapters:
        run = None if on_full is None else next((c for c in on_full.chapters if chapter_name(c.notebook) == name), None)
        need = needs.get(name)
        rows.append(
            {
                "chapter": name,
                f"run time ({full})": None if run is None else run.seconds,
                "GPU memory it needs": None if need is None else need.peak_bytes / GIB,
            }
        )
    return rows


def participants_per_gpu(card_gib: float, need_gib: float, share_gib: float = 16.0) -> int:
    """How many participants one GPU with ``card_gib`` usable can hold when each gets an MPS share of
    ``share_gib`` (at least what the session's most demanding chapter needs, ``need_gib``).

    >>> participants_per_gpu(79, need_gib=13.7), participants_per_gpu(22, need_gib=13.7)
    (4, 1)
    >>> participants_per_gpu(12, need_gib=13.7)
    0
    """
    if need_gib <= 0 or share_gib <= 0:
        raise ValueError(f"memory needs and shares are positive, not {need_gib} and {share_gib}")
    if card_gib < need_gib:
        return 0
    return max(1, int(card_gib // max(share_gib, need_gib)))
