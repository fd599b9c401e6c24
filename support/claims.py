"""A headline claim beside its control: measured, asserted and recorded.

A chapter calls one of these for each claim its opening summary or a figure's title makes:

- :func:`beats`: a value against its control, better by at least a factor (a speed-up as the ratio of two
  timings of one run);
- :func:`ahead`: a bounded score (an AUROC, a recall) against its control, better by at least a difference, for
  which a ratio means little (0.98 against 0.82 is "1.2×" of nothing);
- :func:`at_least`, :func:`at_most`: a value against a bar, with its control printed beside it;
- :func:`same_memory`: zero-copy: the consumer's pointer is the producer's, and a copy (the control) is told
  apart by the same check;
- :func:`refused`: an operation raises the error the text says, and the fix (the control) works;
- :func:`holds`: a yes/no observation, beside the observation that would make it trivial.

Each prints one line that says what was measured, against what, and whether it holds (the page wraps it); a
claim that does not hold raises :class:`ClaimError`, an ``AssertionError``, so the chapter stops as an ``assert``
would. When the variable :data:`LOG_VARIABLE` names a file, each claim is appended to it as one JSON
line: ``booktools.runs`` sets it for every chapter it runs and collects the claims into ``runs/claims.json``,
from which the book's page *Claims and evidence* is written.

>>> claim = beats("demo.gpu_vs_cpu", 0.002, 0.1, unit="s", higher_is_better=False, by=20,
...               control_is="the CPU", says="the GPU is at least 20x faster than the CPU")
✓ demo.gpu_vs_cpu: 2.00 ms against 100 ms (the CPU): 50× better, needs 20×
>>> claim.holds, round(claim.factor, 1)
(True, 50.0)
>>> at_least("demo.auroc", 0.71, 0.9, says="...")
Traceback (most recent call last):
...
support.claims.ClaimError: demo.auroc does not hold: 0.71, needs at least 0.9 (...)
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass

from support.bench import format_ratio, format_seconds
from support.interop import device_pointer
from support.interop import same_memory as points_at_the_same_memory
from support.units import describe_bytes

#: The environment variable that names the file claims are appended to (one JSON object per line).
LOG_VARIABLE = "GPU_INTEROP_CLAIMS_LOG"


class ClaimError(AssertionError):
    """A claim did not hold: the message says what was measured and what it needed."""


@dataclass(frozen=True)
class Claim:
    """One claim as measured: what it says, its value and its control, the bar, and the verdict."""

    name: str  # stable: "chapter-topic.what", e.g. "ecg.gpu_vs_fastest_cpu"
    kind: str  # beats, at_least, at_most, same_memory, refused, holds
    says: str  # the sentence it supports
    value: float | bool | str
    unit: str
    control: float | bool | str | None
    control_is: str  # what the control is: the baseline, the setting switched off, the fix
    bar: str  # what holding means, in words
    holds: bool
    factor: float | None = None  # how many times better than the control (beats), else None
    difference: float | None = None  # how far ahead of the control (ahead), else None

    def _ipython_display_(self) -> None:
        """Nothing: a cell that ends with a claim shows its printed line, not the record's repr."""

    def line(self) -> str:
        """The printed line: ✓ or ✗, the name, what was measured against what."""
        mark = "✓" if self.holds else "✗"
        return f"{mark} {self.name}: {self._summary()}"

    def _summary(self) -> str:
        value = describe(self.value, self.unit)
        if self.kind == "beats":
            return (
                f"{value} against {describe(self.control, self.unit)} ({self.control_is}): "
                f"{describe(self.factor, '×')} better, needs {self.bar}"
            )
        if self.kind == "ahead":
            return (
                f"{value} against {describe(self.control, self.unit)} ({self.control_is}): "
                f"{self.difference:+.3g} ahead, needs {self.bar}"
            )
        if self.kind in ("at_least", "at_most"):
            control = f"; {self.control_is}: {describe(self.control, self.unit)}" if self.control_is else ""
            return f"{value}, needs {self.bar}{control}"
        if self.kind == "same_memory":
            return f"{self.bar}; {self.control_is}: {'same' if self.control else 'another'} pointer"
        if self.kind == "refused":
            return f"{self.value} raised; {self.control_is}: {self.control}"
        control = f"; {self.control_is}: {describe(self.control, '')}" if self.control_is else ""
        return f"{describe(self.value, '')}{control}"


def describe(value, unit: str) -> str:
    """A measured value as the book prints it: seconds and bytes in readable units, ratios with ×."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, str):
        return value
    if unit == "s":
        return format_seconds(value)
    if unit == "×":
        return format_ratio(value)
    if unit == "B":
        return describe_bytes(int(value))
    if unit == "%":
        return f"{value:.1%}"
    number = f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
    return f"{number} {unit}".rstrip()


def _settle(claim: Claim) -> Claim:
    """Print the claim, record it where :data:`LOG_VARIABLE` says, and raise if it does not hold."""
    print(claim.line())
    log = os.environ.get(LOG_VARIABLE)
    if log:
        with open(log, "a", encoding="utf-8") as out:
            out.write(json.dumps(asdict(claim), default=_plain) + "\n")
    if not claim.holds:
        raise ClaimError(f"{claim.name} does not hold: {claim._summary()} ({claim.says})")
    return claim


def _plain(value):
    """A NumPy scalar (``np.bool_``, ``np.float64``) as the Python value JSON can write."""
    if hasattr(value, "item"):
        return value.item()
    raise TypeError(f"a claim cannot record {type(value).__name__} values")


def _number(value, what: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{what} must be a number, not {value!r}") from None
    if number != number:  # NaN
        raise ValueError(f"{what} is NaN: the measurement failed")
    return number


def beats(
    name: str,
    value: float,
    control: float,
    *,
    says: str,
    control_is: str,
    unit: str = "",
    higher_is_better: bool = True,
    by: float = 1.0,
) -> Claim:
    """``value`` is better than ``control`` by a factor of at least ``by`` (greater when ``higher_is_better``,
    else smaller): the factor is ``value / control`` or ``control / value``, from one run. With ``by=1`` the value
    must be strictly better: a tie does not beat the control."""
    value, control = _number(value, f"{name}'s value"), _number(control, f"{name}'s control")
    if value <= 0 or control <= 0:
        raise ValueError(f"{name}: a factor needs positive measurements, not {value} and {control}")
    if by < 1:
        raise ValueError(f"{name}: a claim to beat the control needs a factor of at least 1, not {by}")
    factor = value / control if higher_is_better else control / value
    bar = describe(by, "×") if by != 1 else ("more" if higher_is_better else "less") + " than the control"
    verdict = factor > 1 if by == 1 else factor >= by
    claim = Claim(name, "beats", says, value, unit, control, control_is, bar, verdict, factor)
    return _settle(claim)


def ahead(
    name: str,
    value: float,
    control: float,
    *,
    says: str,
    control_is: str,
    margin: float,
    unit: str = "",
    higher_is_better: bool = True,
) -> Claim:
    """``value`` is ahead of ``control`` by at least ``margin`` (``value - control``, or ``control - value`` when
    lower is better), on the same data in one run: for bounded scores, where a difference says what a ratio hides.

    >>> claim = ahead("demo.rr_vs_vae", 0.97, 0.82, margin=0.1, control_is="the VAE", says="...")
    ✓ demo.rr_vs_vae: 0.97 against 0.82 (the VAE): +0.15 ahead, needs +0.1 or more
    """
    value, control = _number(value, f"{name}'s value"), _number(control, f"{name}'s control")
    if not margin > 0:
        raise ValueError(f"{name}: a claim to be ahead of the control needs a positive margin, not {margin}")
    difference = value - control if higher_is_better else control - value
    bar = f"{margin:+.3g} or more"
    claim = Claim(name, "ahead", says, value, unit, control, control_is, bar, difference >= margin, None, difference)
    return _settle(claim)


def at_least(
    name: str, value: float, bar: float, *, says: str, unit: str = "", control=None, control_is: str = ""
) -> Claim:
    """``value`` reaches ``bar``; ``control`` (with what it is) is printed and recorded beside it."""
    value = _number(value, f"{name}'s value")
    text = f"at least {describe(bar, unit)}"
    return _settle(Claim(name, "at_least", says, value, unit, control, control_is, text, value >= bar))


def at_most(
    name: str, value: float, bar: float, *, says: str, unit: str = "", control=None, control_is: str = ""
) -> Claim:
    """``value`` stays at or under ``bar``; ``control`` (with what it is) is printed and recorded beside it."""
    value = _number(value, f"{name}'s value")
    text = f"at most {describe(bar, unit)}"
    return _settle(Claim(name, "at_most", says, value, unit, control, control_is, text, value <= bar))


def same_memory(name: str, view, source, *, says: str, copy, copy_is: str = "a copy") -> Claim:
    """``view`` shares ``source``'s memory (same device pointer), and ``copy``, made from ``source`` the way a
    copy is made, does not: the check that passes for the view fails for a copy."""
    value, control = bool(points_at_the_same_memory(view, source)), bool(points_at_the_same_memory(copy, source))
    bar = "same pointer" if value else f"another pointer ({device_pointer(view):#x})"
    return _settle(Claim(name, "same_memory", says, value, "", control, copy_is, bar, value and not control))


def refused(
    name: str,
    attempt: Callable[[], object],
    error: type[BaseException] | tuple[type[BaseException], ...],
    *,
    says: str,
    match: str | None = None,
    fix: Callable[[], object] | None = None,
    fix_is: str = "",
) -> Claim:
    """``attempt()`` raises ``error`` whose message matches the regular expression ``match`` (the refusal the text
    describes), and ``fix()``, the way out the error names, succeeds."""
    try:
        attempt()
    except error as raised:
        value = f"{type(raised).__name__}: {str(raised).splitlines()[0][:80]}" if str(raised) else type(raised).__name__
        refused_as_said = match is None or re.search(match, str(raised)) is not None
    except Exception as raised:  # noqa: BLE001 - another error is a verdict, not a crash
        value, refused_as_said = f"{type(raised).__name__} (not the error said)", False
    else:
        value, refused_as_said = "nothing", False
    control, fixed = "not tried", True
    if fix is not None:
        try:
            fix()
        except Exception as failed:  # noqa: BLE001
            control, fixed = f"fails too ({type(failed).__name__})", False
        else:
            control = "works"
    claim = Claim(name, "refused", says, value, "", control, fix_is or "the fix", "", refused_as_said and fixed)
    return _settle(claim)


def holds(name: str, observed: bool, *, control: bool, control_is: str, says: str) -> Claim:
    """A yes/no observation holds, and the control observation (what would make it trivial, e.g. the same check
    on a case that must fail) is False: a control that cannot be False makes the claim an assert, so give one."""
    if control is None:
        raise TypeError(f"{name}: give the control observation (True or False), not None")
    observed, control = bool(observed), bool(control)
    verdict = observed and not control
    return _settle(Claim(name, "holds", says, observed, "", control, control_is, "yes", verdict))
