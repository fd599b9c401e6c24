"""Byte counts as people read them.

>>> describe_bytes(3 * GIB)
'3.00 GiB'
>>> round_up(300 * MIB, 256 * MIB) == 512 * MIB
True
"""

from __future__ import annotations

KIB = 2**10
MIB = 2**20
GIB = 2**30


def describe_bytes(count: int) -> str:
    """Bytes in the largest binary unit that keeps the number at least 1: ``512 B``, ``1.50 MiB``."""
    if count < 0:
        raise ValueError(f"a byte count cannot be negative: {count}")
    for unit, scale in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if count >= scale:
            return f"{count / scale:.2f} {unit}"
    return f"{count} B"


def round_up(count: int, granularity: int) -> int:
    """The smallest multiple of ``granularity`` that is at least ``count``."""
    if granularity <= 0:
        raise ValueError(f"granularity must be positive, not {granularity}")
    return -(-count // granularity) * granularity
