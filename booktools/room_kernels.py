"""One kernel per seat: the kernel manager each of :mod:`booktools.room`'s servers runs with.

    jupyter lab --ServerApp.kernel_manager_class=booktools.room_kernels.OneKernelPerSeat

Under MPS each kernel is a client with a memory share of its own, so a participant with three chapters open holds
three shares. :class:`OneKernelPerSeat` refuses to start a kernel while the seat's server holds another that is
alive (:func:`booktools.room.kernel_refusal` decides), with an HTTP 403 whose message says to shut that one down.

Written against jupyter_server 2.21.1's ``AsyncMappingKernelManager`` (``services/kernels/kernelmanager.py``; the
version ``locks/gpu-cp312-linux-x86_64.txt`` pins for the ``gpu`` extra): ``start_kernel`` is
``_async_start_kernel(self, *, kernel_id=None, path=None, **kwargs)``, assigned by name in the class body, so the
subclass overrides ``start_kernel`` itself. Every new kernel comes through it: ``POST /api/kernels`` and a new
session (``SessionManager.start_kernel_for_session``); a restart does not (it restarts the same kernel id through
jupyter_client's ``KernelManager.restart_kernel``), and neither does a session that names a kernel the server holds
(``start_kernel`` returns it, starting nothing). ``POST /api/kernels`` answers the refusal as a 403 with this
message (seen against jupyter_server 2.21.1); a new session wraps it in an HTTP 500 whose message carries it.
JupyterLab 4.6 shows the latter as *Error Starting Kernel*, the message on one line cut at the dialog's width (seen
in Chromium: ``runs/probes/room_refusal_in_jupyterlab_4.6.png``), then offers *Select Kernel*, whose list includes
the other notebook's running kernel (picking it starts nothing, so it is allowed).
Changing a notebook's kernel starts the new kernel before the old one is shut down, so it is refused too: shut
the kernel down first, then pick the new one.

jupyter_server is imported here only, inside the servers (the ``gpu`` extra's jupyterlab brings it); without it
the module imports, and asking for the class says what is missing.
"""

from __future__ import annotations

import asyncio

from booktools.room import kernel_refusal

try:
    from jupyter_server.services.kernels.kernelmanager import AsyncMappingKernelManager
    from tornado.web import HTTPError
except ModuleNotFoundError as missing:  # the CPU tests import every module for its doctests
    _MISSING = missing.name

    def __getattr__(name: str):
        if name == "OneKernelPerSeat":
            raise ModuleNotFoundError(
                f"booktools.room_kernels runs inside a Jupyter server, and {_MISSING} is not installed here: the "
                "gpu extra has jupyterlab (pip install -e '.[gpu]')"
            )
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

else:

    class OneKernelPerSeat(AsyncMappingKernelManager):
        """A seat's kernels: at most one alive at a time."""

        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self._one_at_a_time = asyncio.Lock()  # two notebooks opened at once: the second sees the first

        def seat_kernels(self) -> dict[str, str]:
            """Each kernel this server holds and its execution state."""
            return {
                kernel_id: getattr(self._kernels[kernel_id], "execution_state", "unknown")
                for kernel_id in self.list_kernel_ids()
            }

        async def start_kernel(self, *, kernel_id: str | None = None, path=None, **kwargs) -> str:
            async with self._one_at_a_time:
                refusal = kernel_refusal(self.seat_kernels(), kernel_id)
                if refusal is not None:
                    self.log.warning("one kernel per seat: refused a second kernel for %s", path)
                    raise HTTPError(403, refusal)
                return await super().start_kernel(kernel_id=kernel_id, path=path, **kwargs)
