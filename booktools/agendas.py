"""The workshop's agendas: each a day's slots and the chapters a participant runs in them. The teachers' page
(:mod:`booktools.teaching`) plans them, the participant edition (:mod:`booktools.workshop`) and the rehearsal
(:mod:`booktools.rehearse`) take their chapters from here.
"""

from __future__ import annotations

#: The agendas of the teachers' page: each a day's slots in order, ``(what, minutes)``, where ``what`` is a chapter
#: a participant runs (its notebook's name) or a slot without a chapter (opening, break, questions, a chapter
#: the teacher shows from the book), and the minutes the agenda has in all. Every agenda runs on a shared GPU,
#: so none has a participant run chapter 5 (:data:`SHOWN_NOT_RUN`).
PLANS: dict[str, dict] = {
    "two-hours": {
        "minutes": 120,
        "slots": [
            ("opening: the room, the plan, chapter 0's banner at every seat", 5),
            ("00_getting_started", 10),
            ("01_why_gpus", 25),
            ("break", 10),
            ("03_zero_copy", 30),
            ("06_ecg_pipeline", 30),
            ("questions, and where the book goes on", 5),
        ],
    },
    "half-day": {
        "minutes": 210,
        "slots": [
            ("opening: the room, the plan, chapter 0's banner at every seat", 5),
            ("00_getting_started", 10),
            ("01_why_gpus", 25),
            ("02_memory_layouts", 30),
            ("break", 15),
            ("03_zero_copy", 35),
            ("04_memory_pools", 30),
            ("06_ecg_pipeline", 35),
            ("questions, and where the book goes on", 10),
        ],
    },
    "full-day": {
        "minutes": 390,
        "slots": [
            ("opening: the room, the plan, chapter 0's banner at every seat", 10),
            ("00_getting_started", 15),
            ("01_why_gpus", 35),
            ("02_memory_layouts", 40),
            ("break", 15),
            ("03_zero_copy", 45),
            ("lunch", 60),
            ("04_memory_pools", 35),
            ("04_watching_memory", 30),
            ("chapter 5, unified memory, shown from the book on the teacher's screen", 15),
            ("break", 15),
            ("06_ecg_pipeline", 45),
            ("a participant's own CSV through chapter 6's command line", 20),
            ("questions, and where the book goes on", 10),
        ],
    },
}
#: Chapters no shared-GPU agenda has participants run: an earlier version of chapter 5 met a sticky illegal address
#: under MPS, which MPS reports to every client on the GPU; the current one passes alone under a 16 GB share but has
#: not been rehearsed with several seats (the teachers' page says more).
SHOWN_NOT_RUN = ("05_unified_memory",)

#: The agendas, each the chapters a participant runs, in order (``make rehearse AGENDA=``, ``make workshop``).
AGENDAS: dict[str, list[str]] = {
    name: [what for what, _ in plan["slots"] if what[:2].isdigit()] for name, plan in PLANS.items()
}


def agenda(name: str) -> list[str]:
    """The chapters of the agenda ``name``; an unknown name is refused with the known ones.

    >>> agenda("two-hours")[:2]
    ['00_getting_started', '01_why_gpus']
    >>> agenda("1h")
    Traceback (most recent call last):
    ...
    ValueError: no agenda '1h': choose one of two-hours, half-day, full-day
    """
    if name not in AGENDAS:
        raise ValueError(f"no agenda {name!r}: choose one of {', '.join(AGENDAS)}")
    return list(AGENDAS[name])


def plan(name: str) -> dict:
    """The agenda ``name``'s plan (:data:`PLANS`); an unknown name is refused as :func:`agenda` refuses it."""
    agenda(name)
    return PLANS[name]
