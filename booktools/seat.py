"""The first check of a chapter in the participant edition: the book's own, worded for a seat.

Every chapter starts with ``needs.check_gpu(chapter)`` (:func:`support.needs.check_gpu`), which stops it with the
reason and the installer's way out (the book's environment, the built book). The participant edition
(:mod:`booktools.workshop`) calls :func:`check_gpu` there instead: the same check, and when it stops the chapter,
the same reason followed by what a participant does about it, printed by Jupyter as one message, without a
traceback (:class:`SeatNotReady`).
"""

from __future__ import annotations

from support import env, needs

#: Where a participant without a GPU is sent: chapter 0's section of the edition (``workshop.participant_setup``),
#: named alike by this check, the set-up check and its fallback (:mod:`booktools.workshop`).
WITHOUT_A_GPU_SECTION = "chapter 0's 'Before the workshop, and without a GPU'"
#: ... and what that section says.
FOLLOW_WITHOUT_A_GPU = (
    f"{WITHOUT_A_GPU_SECTION} says where the book's executed chapters are, and which chapter runs on the CPU"
)
#: What a participant does when the seat's share of GPU memory is too small, or cannot be read.
MEMORY_ADVICE = (
    "Shut down the kernels of the chapters you have finished (Kernel → Shut Down All Kernels, or the Running "
    "panel), then restart this notebook's kernel and run from the top; if it stops again, tell your teacher. "
    "To try anyway: insert a cell above this one, run `%env GPU_INTEROP_SKIP_MEMORY_CHECK=1` there, then run "
    "this cell again."
)
#: What a participant does, by the kind of stop, keyed by words of :func:`support.env.require_gpu`'s messages
#: (tests/test_seat.py makes each message and checks its advice).
ADVICE = {
    "none is usable": (
        "On the workshop's GPU server, open this notebook in the kernel your teacher named, or tell your teacher; "
        "once the seat is fixed, restart this notebook's kernel (Kernel → Restart Kernel) and run from the top. "
        f"On a computer of your own, follow along without a GPU: {FOLLOW_WITHOUT_A_GPU}."
    ),
    "GPUs and this machine has": "This seat has fewer GPUs than the chapter asks for here: tell your teacher.",
    "GiB of GPU memory": MEMORY_ADVICE,
}
#: ... and where the reason is none of those.
OTHER_ADVICE = "Tell your teacher, with this message."


class SeatNotReady(RuntimeError):
    """This seat cannot run the chapter: the message says why and what to do."""

    def _render_traceback_(self) -> list[str]:
        # IPython prints what this returns in place of the traceback (InteractiveShell.showtraceback): the
        # participant reads the message, not the frames of the book's code that raised it
        return [f"{type(self).__name__}: {self}"]


#: Where the installer's advice starts in :func:`support.env.require_gpu`'s messages: the reason comes before.
INSTALLER_ADVICE = (". Run it on a machine", ". Read the published outputs", ". Free memory on the GPU")


def for_participant(message: str) -> str:
    """A :class:`support.env.GpuUnavailableError` message's reason (what comes before the installer's advice,
    :data:`INSTALLER_ADVICE`), then a participant's way out in its place.

    >>> for_participant("This needs a CUDA GPU, and none is usable: no driver. Run it on a machine ...")[:58]
    'This needs a CUDA GPU, and none is usable: no driver. On t'
    """
    ends = [message.find(start) for start in INSTALLER_ADVICE if start in message]
    reason = message[: min(ends)] if ends else message.rstrip(".")
    advice = next((text for words, text in ADVICE.items() if words in reason), OTHER_ADVICE)
    return f"{reason}. {advice}"


def check_gpu(chapter: str, **options) -> env.Gpu:
    """:func:`support.needs.check_gpu` for ``chapter`` (``options`` passed on: ``gpus=2`` for chapter 7); where it
    stops the chapter, raise :class:`SeatNotReady` worded by :func:`for_participant`."""
    try:
        return needs.check_gpu(chapter, **options)
    except env.GpuUnavailableError as error:
        raise SeatNotReady(for_participant(str(error))) from None
    except OSError as error:  # the driver refused the memory read (no context left in a used-up MPS share)
        if error.filename is not None:  # a file the check reads (the chapters' needs), not the driver: the book's
            raise
        raise SeatNotReady(f"This seat's GPU memory could not be read ({error}). {MEMORY_ADVICE}") from None
