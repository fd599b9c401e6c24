"""A timing split into parts measured apart, and what the parts leave unexplained.

Chapter 3 asks where a Polars GPU-engine ``collect`` spends its time: the frame's trip to the GPU, the group-by,
the cost of a collect beside its data. Each part is timed on its own (the same clock as the whole, the wall
clock); :func:`account` sets them beside the whole and gives the rest, the time no measured part explains, so
that the prose names only what a row shows. Parts timed apart can add up to more than the whole (on a GPU shared
with other processes, say): the rest is then negative, and its row says so.

>>> from support.bench import Timing
>>> whole = Timing("collect", (0.010, 0.012, 0.011), "wall")
>>> parts = {"transfer": Timing("t", (0.004, 0.004, 0.005), "wall"), "work": Timing("w", (0.001,), "wall")}
>>> rows, rest = account(whole, parts)
>>> [row["share of the whole"] for row in rows]
['100%', '36%', '9%', '55%']
>>> rows[-1]["what"], rows[-1]["median"], round(rest, 4), largest_part(parts)
('not explained by the parts', '6.00 ms', 0.006, 'transfer')
>>> describe_rest(-0.0158)
'−15.8 ms: the parts add up to more than the whole'
>>> account(whole, {"transfer": Timing("t", (0.015,), "wall")})[0][-1]["share of the whole"]
'−36%'

"""

from __future__ import annotations

from support.bench import Timing, format_seconds


def _same_clock(whole: Timing, parts: dict[str, Timing]) -> None:
    clocks = {whole.clock} | {part.clock for part in parts.values()}
    if len(clocks) > 1:
        raise ValueError(f"time the whole and its parts with one clock, not {sorted(clocks)}")


def account(whole: Timing, parts: dict[str, Timing]) -> tuple[list[dict[str, str]], float]:
    """Rows (what, median, min–max, share of the whole's median) for the whole, each part and the rest (the last
    row, :func:`describe_rest`), and the rest in seconds: what of the whole's median the parts' medians leave
    unexplained (negative when the parts add up to more)."""
    if not parts:
        raise ValueError("give at least one part to set beside the whole")
    _same_clock(whole, parts)
    rows = []
    for name, timing in {whole.label: whole, **parts}.items():
        rows.append(
            {
                "what": name,
                "median": format_seconds(timing.median),
                "min–max": f"{format_seconds(timing.min)}–{format_seconds(timing.max)}",
                "share of the whole": _share(timing.median / whole.median),
            }
        )
    rest = whole.median - sum(timing.median for timing in parts.values())
    rows.append(
        {
            "what": "not explained by the parts",
            "median": describe_rest(rest),
            "min–max": "",
            "share of the whole": _share(rest / whole.median),
        }
    )
    return rows, rest


def _share(fraction: float) -> str:
    """A share as a percentage, a negative one with the minus sign :func:`describe_rest` writes (U+2212)."""
    return f"{fraction:.0%}".replace("-", "−")


def describe_rest(rest: float) -> str:
    """The rest of :func:`account` as a duration; a negative rest (the parts add up to more than the whole) is
    written with its sign and what it means, never refused."""
    if rest >= 0:
        return format_seconds(rest)
    return f"−{format_seconds(-rest)}: the parts add up to more than the whole"


def largest_part(parts: dict[str, Timing]) -> str:
    """The name of the part with the largest median."""
    if not parts:
        raise ValueError("no parts to compare")
    return max(parts, key=lambda name: parts[name].median)
