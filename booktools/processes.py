"""Stopping the processes the book's tools start (a rehearsal's seats, a room's servers) and what a signal does
meanwhile: one mechanism, so that a seat and a server stop alike.

- :func:`stop_all` stops processes together, each with the processes of its group: SIGTERM to every one at once,
  one deadline for all, then SIGKILL to what is left, with Ctrl-C and SIGTERM held off meanwhile. A Jupyter
  kernel is not in its server's group (jupyter_client 8.10 starts each in a session of its own): ipykernel ends
  it when it sees its parent gone (``JPY_PARENT_PID``), about a second later;
- :func:`let_it_stop` gives one interrupted command its own way out before it is killed;
- :func:`sigterm_as_interrupt` makes a SIGTERM raise ``KeyboardInterrupt`` meanwhile, as Ctrl-C does, so that one
  ``except`` or ``finally`` cleans up after either, as :class:`Terminated`, which tells the two apart.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence


def _signal_group(process: subprocess.Popen, signum: int) -> None:
    """Send ``signum`` to a process's group (the process and those it started), or to the process alone where it
    has no group of its own; nothing where both are gone."""
    try:
        os.killpg(process.pid, signum)
    except ProcessLookupError:
        if process.poll() is None:
            process.send_signal(signum)
    except PermissionError:  # the group's id is someone else's: the server did not start a session of its own
        process.send_signal(signum)


def _running(process: subprocess.Popen) -> bool:
    """Whether a process, or a process of its group, still runs."""
    if process.poll() is None:
        return True
    try:
        os.killpg(process.pid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


@contextlib.contextmanager
def signals_ignored(*signums: int) -> Iterator[None]:
    """Ignore these signals meanwhile (in the main thread; elsewhere signals cannot be set, nor do they arrive)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {signum: signal.signal(signum, signal.SIG_IGN) for signum in signums}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def stop_all(processes: Sequence[subprocess.Popen], grace: float, *, poll: float = 0.05) -> list[subprocess.Popen]:
    """Stop every process of ``processes`` at once: SIGTERM to each one's process group, then a wait for all of
    them against one deadline ``grace`` seconds away, then SIGKILL to what is left. Ctrl-C and SIGTERM are ignored
    meanwhile (a second Ctrl-C must not leave processes behind). Returns the processes that had to be killed."""
    with signals_ignored(signal.SIGINT, signal.SIGTERM):
        for process in processes:
            _signal_group(process, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while any(_running(process) for process in processes) and time.monotonic() < deadline:
            time.sleep(poll)
        killed = [process for process in processes if _running(process)]
        for process in killed:
            _signal_group(process, signal.SIGKILL)
        for process in killed:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(5)  # SIGKILL cannot be refused: this is the kernel reaping it
    return killed


class Terminated(KeyboardInterrupt):
    """A SIGTERM, raised as Ctrl-C's ``KeyboardInterrupt`` is (:func:`sigterm_as_interrupt`): one ``except
    KeyboardInterrupt`` cleans up after either, and ``isinstance`` tells them apart."""


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM raises :class:`Terminated` (a ``KeyboardInterrupt``) meanwhile: the room stops its servers either
    way."""

    def stop_on_signal(signum, frame):
        raise Terminated(f"signal {signum}")

    if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
        yield
        return
    previous = signal.signal(signal.SIGTERM, stop_on_signal)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


#: Seconds an interrupted command has to stop its own processes (a room's servers, nbval's kernels) before MPS is
#: asked to quit (booktools.mps): MPS's quit waits for its clients.
CHILD_GRACE = 60.0


def let_it_stop(child: subprocess.Popen, *, forward: bool, grace: float = CHILD_GRACE) -> None:
    """After Ctrl-C or SIGTERM, give the command its own way out: a Ctrl-C at a terminal reached it too (the same
    process group), a SIGTERM sent to this process is passed on (``forward``); then wait up to ``grace`` seconds
    for it to exit before it is killed (:func:`subprocess.run` kills it after a quarter of a second, cutting short
    whatever it stops in turn)."""
    if forward and child.poll() is None:
        child.terminate()
    try:
        child.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        print(f"the command did not stop within {grace:g} s; killing it", file=sys.stderr, flush=True)
        child.kill()
        child.wait()
    except KeyboardInterrupt:  # a second Ctrl-C: stop waiting
        child.kill()
        child.wait()
