"""Run a command on a GPU shrunk to a smaller one: CUDA MPS with a per-client memory limit, always stopped after.

    python -m booktools.mps --limit 16G -- make test-gpu

starts the MPS control daemon (``nvidia-cuda-mps-control -d``), sets the default pinned device-memory limit of
every client on GPU 0 (``set_default_device_pinned_mem_limit 0 16G``; ``--device 0 --device 1`` sets it on each
GPU named, as chapter 7 needs on a two-GPU host; :func:`nvml_index` says which card an index is where
``CUDA_VISIBLE_DEVICES`` is set), runs the command, and stops MPS
(``quit``) whatever happens: when the command fails, raises, or is interrupted (Ctrl-C, SIGTERM). Every CUDA
process started meanwhile is a client: it sees the limit as its free memory and cannot allocate more, which is
how a 16 GB GPU looks to the book, and how several workshop participants can share one GPU without one of them
taking it all. Use it on a GPU of your own: MPS changes how every process on that GPU runs while it is on.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from booktools.processes import Terminated, let_it_stop, signals_ignored, sigterm_as_interrupt

CONTROL = "nvidia-cuda-mps-control"
#: Set for the command run under the limit, to the limit (``16G``).
LIMIT_VARIABLE = "GPU_INTEROP_MPS_LIMIT"
#: Set for the command run under the limit, to the GPUs limited as MPS numbers them (``0``, or ``0,1``): what
#: ``booktools.room`` reads to check the seats' shares against those cards, not another, and a rehearsal's seats to
#: read their memory there (:func:`limited_devices`).
DEVICES_VARIABLE = "GPU_INTEROP_MPS_DEVICES"
LIMIT_PATTERN = re.compile(r"\d+(\.\d+)?[MG]")


class MpsError(RuntimeError):
    """MPS could not be started as asked: the message says why."""


def devices_named(device: int | Sequence[int]) -> tuple[int, ...]:
    """The GPUs a limit is set on: one index or several, each once, in order.

    >>> devices_named(0), devices_named([0, 1, 0])
    ((0,), (0, 1))
    >>> devices_named([-1])
    Traceback (most recent call last):
    ...
    booktools.mps.MpsError: a GPU is named by its index, 0 or more (nvidia-smi -L lists them), not -1
    >>> devices_named("01")
    Traceback (most recent call last):
    ...
    booktools.mps.MpsError: a GPU is named by its index, 0 or more (nvidia-smi -L lists them), not '0'
    """
    named = (device,) if isinstance(device, int) else tuple(dict.fromkeys(device))
    for index in named:
        if isinstance(index, bool) or not isinstance(index, int) or index < 0:
            raise MpsError(f"a GPU is named by its index, 0 or more (nvidia-smi -L lists them), not {index!r}")
    return named or (0,)


def nvml_index(device: int, environ: Mapping[str, str] | None = None) -> int | None:
    """NVML's index (nvidia-smi's) of the GPU that MPS numbers ``device``, or None where the environment does not
    say which card that is.

    The control daemon starts in this process's environment, and where ``CUDA_VISIBLE_DEVICES`` is set then, the
    MPS server remaps the GPUs (NVIDIA's MPS documentation, appendix "Environment Variables"): ``device`` is a
    position among the GPUs it names. NVML numbers every GPU of the machine and ignores ``CUDA_VISIBLE_DEVICES``,
    so the position is mapped back to the card it names: an index as it is, a UUID (``GPU-...``, or its first
    characters, as CUDA accepts) through NVML (:func:`index_of_uuid`). A MIG instance (``MIG-...``), a UUID no GPU
    has, a position past the list's end, or an empty list gives None. The same appendix says that clients which
    keep an index list set after the daemon started with it fail (they see the remapped GPUs), and recommends
    UUIDs; :func:`limited` passes its environment on to the command, so name the GPUs by UUID there. The order
    caveat of :func:`booktools.runs.visible_gpu` holds here too (CUDA puts the fastest GPU first unless
    ``CUDA_DEVICE_ORDER=PCI_BUS_ID``; NVML orders by PCI bus: the same on a machine of identical GPUs). Not
    checked on a GPU: read from the documentation.

    >>> nvml_index(0, {}), nvml_index(1, {}), nvml_index(0, {"CUDA_VISIBLE_DEVICES": "2"})
    (0, 1, 2)
    >>> nvml_index(1, {"CUDA_VISIBLE_DEVICES": "3, 1"}), nvml_index(1, {"CUDA_VISIBLE_DEVICES": "3"})
    (1, None)
    >>> nvml_index(0, {"CUDA_VISIBLE_DEVICES": "MIG-8f1c"}), nvml_index(0, {"CUDA_VISIBLE_DEVICES": ""})
    (None, None)
    >>> nvml_index(1, {"CUDA_VISIBLE_DEVICES": "0,2,-1,1"}), nvml_index(2, {"CUDA_VISIBLE_DEVICES": "0,2,-1,1"})
    (2, None)

    An entry that is neither an index nor a UUID ends the list, as in the CUDA programming guide's
    ``CUDA_VISIBLE_DEVICES`` example. Finer rules CUDA applies (a repeated entry, digits followed by letters, an
    index past the last GPU; PyTorch's ``torch.cuda._parse_visible_devices`` models some) are not followed.
    """
    visible = (os.environ if environ is None else environ).get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return device
    entries = []
    for entry in (entry.strip() for entry in visible.split(",")) if visible.strip() else ():
        if not (entry.isdigit() or entry.startswith(("GPU-", "MIG-"))):
            break  # CUDA sees only the GPUs listed before an invalid entry (``0,2,-1,1``: 0 and 2)
        entries.append(entry)
    if device >= len(entries):
        return None
    entry = entries[device]
    if entry.isdigit():
        return int(entry)
    return index_of_uuid(entry) if entry.startswith("GPU-") else None


def index_of_uuid(prefix: str) -> int | None:
    """NVML's index of the one GPU whose UUID starts with ``prefix`` (``GPU-8f1c...``), or None where none does, more
    than one does, or NVML cannot say (no driver, no ``nvidia-ml-py``, an NVML error on the way)."""
    try:
        import pynvml  # noqa: PLC0415 - nvidia-ml-py, only when a GPU is named by UUID

        pynvml.nvmlInit()
    except Exception:  # noqa: BLE001 - no NVML here: the card cannot be named
        return None
    try:
        found = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            uuid = pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(index))
            uuid = uuid.decode() if isinstance(uuid, bytes) else uuid
            if uuid.startswith(prefix):
                found.append(index)
        return found[0] if len(found) == 1 else None
    except Exception:  # noqa: BLE001 - whatever NVML raised, the card is not named
        return None
    finally:
        with contextlib.suppress(Exception):  # a failed shutdown must not replace the answer
            pynvml.nvmlShutdown()


def limited_devices(environ: Mapping[str, str]) -> tuple[int, ...]:
    """The GPUs :func:`limited` limited, as it numbers them (:data:`DEVICES_VARIABLE`), read from the environment
    of what runs under it; GPU 0, its default, where the variable is not set (a limit set by hand).

    >>> limited_devices({}), limited_devices({DEVICES_VARIABLE: "0,1"})
    ((0,), (0, 1))
    >>> limited_devices({DEVICES_VARIABLE: "all"})
    Traceback (most recent call last):
    ...
    booktools.mps.MpsError: GPU_INTEROP_MPS_DEVICES='all' does not name GPUs as booktools.mps does (0, or 0,1): unset it
    """
    named = environ.get(DEVICES_VARIABLE, "0")
    try:
        return devices_named([int(index) for index in named.split(",")])
    except (ValueError, MpsError):
        raise MpsError(
            f"{DEVICES_VARIABLE}={named!r} does not name GPUs as booktools.mps does (0, or 0,1): unset it"
        ) from None


def card_total(index: int) -> int | None:
    """The memory in bytes of the GPU that NVML numbers ``index``, or None where NVML cannot say (a function of its
    own, for tests to stand in for)."""
    from support import env  # noqa: PLC0415  # NVML through the book's probe, only when a card is read

    card = env.card_memory(index)
    return card.total if card is not None else None


@dataclass(frozen=True)
class LimitedCard:
    """A GPU that MPS limits: ``device`` as MPS numbers it, ``index`` as NVML does (:func:`nvml_index`; None where
    the environment does not say), its memory in bytes (None where it cannot be read, and ``unread`` says why)."""

    device: int
    index: int | None
    total: int | None
    unread: str | None = None

    @property
    def shown(self) -> str:
        """The card in a message: its number as MPS counts it, and NVML's where that differs.

        >>> LimitedCard(1, 1, 40).shown, LimitedCard(0, 2, 24).shown
        ('GPU 1', "GPU 0 (NVML's GPU 2)")
        """
        return (
            f"GPU {self.device}"
            if self.index in (self.device, None)
            else f"GPU {self.device} (NVML's GPU {self.index})"
        )


def limited_cards(devices: Sequence[int], environ: Mapping[str, str] | None = None) -> list[LimitedCard]:
    """The memory of each GPU in ``devices`` (as MPS numbers them: :func:`limited`'s ``device``, or
    :func:`limited_devices` under it), each read by NVML's index of it (:func:`nvml_index`, from ``environ``, the
    environment MPS starts or started in): what a check that shares fit the limited cards reads, not NVML's GPU 0."""
    environ = os.environ if environ is None else environ
    cards = []
    for device in devices:
        index = nvml_index(device, environ)
        total = None if index is None else card_total(index)
        unread = None
        if total is None:
            unread = (
                f"CUDA_VISIBLE_DEVICES={environ.get('CUDA_VISIBLE_DEVICES')} names it by no index, nor by a UUID "
                "NVML finds on one GPU"
                if index is None
                else "NVML cannot say"
            )
        cards.append(LimitedCard(device, index, total, unread))
    return cards


def check_limit(limit: str) -> str:
    """A limit as MPS reads it, such as ``16G`` or ``8192M``.

    >>> check_limit("16G")
    '16G'
    >>> check_limit("16GB")
    Traceback (most recent call last):
    ...
    booktools.mps.MpsError: a memory limit is a number and M or G, such as 16G or 8192M, not '16GB'
    """
    if not LIMIT_PATTERN.fullmatch(limit):
        raise MpsError(f"a memory limit is a number and M or G, such as 16G or 8192M, not {limit!r}")
    return limit


def _control(control: str, command: str | None = None, *, timeout: float = 30) -> subprocess.CompletedProcess:
    if command is None:
        return subprocess.run([control, "-d"], capture_output=True, text=True, timeout=timeout)
    return subprocess.run([control], input=command + "\n", capture_output=True, text=True, timeout=timeout)


def mps_running(control: str = CONTROL) -> bool:
    """Whether an MPS control daemon answers already (``get_server_list`` succeeds only then)."""
    return _control(control, "get_server_list").returncode == 0


@contextlib.contextmanager
def limited(
    limit: str, *, device: int | Sequence[int] = 0, control: str = CONTROL, quit_timeout: float = 30
) -> Iterator[dict[str, str]]:
    """Start MPS with ``limit`` per client on ``device`` (an index, or several) and stop it (``quit``) whatever
    happens inside: an error, Ctrl-C, SIGTERM. Yields the environment for the processes to start under it (it names
    the limit and the GPUs limited)."""
    check_limit(limit)
    devices = devices_named(device)
    found = shutil.which(control)
    if found is None:
        raise MpsError(f"{control} is not on PATH: MPS comes with the NVIDIA driver on Linux")
    if mps_running(found):
        raise MpsError(
            "an MPS control daemon already runs on this machine; stop it (echo quit | nvidia-cuda-mps-control) or run "
            "the command without mps"
        )
    with sigterm_as_interrupt():
        start_failed = False
        try:  # the start inside: a Ctrl-C while the daemon starts still asks it to quit
            started = _control(found)
            if started.returncode != 0:
                start_failed = True
                raise MpsError(f"could not start MPS: {(started.stderr or started.stdout).strip()}")
            for index in devices:
                limit_set = _control(found, f"set_default_device_pinned_mem_limit {index} {limit}")
                if limit_set.returncode != 0:
                    said = (limit_set.stderr or limit_set.stdout).strip()
                    raise MpsError(f"MPS refused the limit {limit} on GPU {index}: {said}")
            # what runs under it knows its limit: a run it records (booktools.runs, make test-gpu) is labelled with it
            yield {**os.environ, LIMIT_VARIABLE: limit, DEVICES_VARIABLE: ",".join(str(index) for index in devices)}
        finally:
            if not start_failed:
                with signals_ignored(signal.SIGINT, signal.SIGTERM):  # a second Ctrl-C must not leave MPS running
                    _quit(found, quit_timeout)


def _quit(control: str, timeout: float) -> None:
    """Ask MPS to quit, and say whether it did."""
    try:
        _control(control, "quit", timeout=timeout)
        print("mps: MPS stopped", flush=True)
    except subprocess.TimeoutExpired:  # quit waits for its clients: one still running holds it
        print(
            f"mps: MPS did not stop within {timeout:g} s, a CUDA process still runs under it; stop that "
            "process, then: echo quit | nvidia-cuda-mps-control",
            file=sys.stderr,
            flush=True,
        )


def run_with_limit(
    command: Sequence[str], limit: str, *, device: int | Sequence[int] = 0, control: str = CONTROL
) -> int:
    """Start MPS with ``limit`` per client on ``device`` (an index, or several), run ``command``, stop MPS; return
    the command's status."""
    check_limit(limit)
    if not command:
        raise MpsError("give the command to run after --, e.g. -- make test-gpu")
    with limited(limit, device=device, control=control) as environment:
        named = devices_named(device)
        gpus = f"GPU {named[0]}" if len(named) == 1 else "GPUs " + ", ".join(str(index) for index in named)
        print(f"mps: MPS on, each client limited to {limit} on {gpus}: {' '.join(command)}", flush=True)
        child = subprocess.Popen(list(command), env=environment)
        try:
            return child.wait()
        except KeyboardInterrupt as interruption:
            let_it_stop(child, forward=isinstance(interruption, Terminated))
            raise


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m booktools.mps", description=__doc__.split("\n")[0])
    parser.add_argument("--limit", required=True, help="device memory per client, e.g. 16G")
    parser.add_argument(
        "--device",
        type=int,
        action="append",
        help=(
            "a GPU to limit (default 0), as nvidia-smi numbers them, or, where CUDA_VISIBLE_DEVICES is set, its "
            "position in that list; repeat it for several"
        ),
    )
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the command to run")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    try:
        return run_with_limit(command, args.limit, device=args.device or [0])
    except MpsError as error:
        print(f"mps: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as interruption:  # the lines above say whether MPS stopped
        print("mps: interrupted", file=sys.stderr)
        return TERMINATED if isinstance(interruption, Terminated) else INTERRUPTED


#: The statuses :func:`main` returns when Ctrl-C (SIGINT) or SIGTERM stopped the run, as a shell numbers them.
INTERRUPTED, TERMINATED = 128 + signal.SIGINT, 128 + signal.SIGTERM


def end_as_signalled(status: int) -> None:
    """Exit as a process the signal killed, after the cleanup: a shell loop over ``booktools.mps`` then stops at
    Ctrl-C, as it would for the command itself. Other statuses exit as they are."""
    for code, signalled in ((INTERRUPTED, signal.SIGINT), (TERMINATED, signal.SIGTERM)):
        if status == code:
            signal.signal(signalled, signal.SIG_DFL)
            os.kill(os.getpid(), signalled)
    sys.exit(status)


if __name__ == "__main__":
    end_as_signalled(main())
