"""The order in which chapter 6 times several contenders: in turns, the given order in even rounds and backwards in
odd ones, so that a drift over the runs (the GPU's clocks warming, files the operating system keeps in memory)
does not fall on the last contender alone. Training steps (:func:`support.ecg.step_speed.time_rounds`) and whole
command-line runs (:func:`support.ecg.cli_runs.compare_settings`, :func:`~support.ecg.cli_runs.alternate_runs`)
take it from here."""

from __future__ import annotations

from collections.abc import Iterator, Sequence


def in_turns(names: Sequence[str], rounds: int) -> Iterator[tuple[int, str]]:
    """``(round, name)`` for ``rounds`` rounds of ``names``, in their order in even rounds and backwards in odd
    ones, so that no name always runs first or last.

    >>> list(in_turns(["a", "b"], 3))
    [(0, 'a'), (0, 'b'), (1, 'b'), (1, 'a'), (2, 'a'), (2, 'b')]
    """
    for round_number in range(rounds):
        for name in names if round_number % 2 == 0 else list(reversed(names)):
            yield round_number, name
