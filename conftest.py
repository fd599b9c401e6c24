"""pytest wiring for the book.

- Notebooks (collected by nbval) that need a GPU are skipped with the reason "needs a CUDA GPU" on a machine
  without one, and with the missing libraries named on a GPU machine without the book's stack.
- ``--require-gpu`` (``make test-gpu``) turns that skip into a failure: the run stops and says why. A notebook
  that needs more GPUs than the machine has (``book.gpus`` in its metadata: chapter 7 needs two) is skipped
  with that reason, also under ``--require-gpu``.
- nbval ignores stderr (library warnings, progress bars) when comparing outputs; tests/nbval_sanitize.cfg masks
  timings, addresses, GPU names and versions.
- Where there is no GPU, Numba's CUDA simulator is switched on (``NUMBA_ENABLE_CUDASIM=1``) before anything
  imports Numba, so the CUDA kernels of support/ecg are tested on the CPU; on a GPU host they run on the GPU.
- The ``skip_or_fail`` fixture skips a test whose tool is missing here, but fails it in CI (``CI`` set),
  where .ci/run installs every tool.
- Under ``--require-gpu`` each notebook's kernel turns the deprecation and future warnings of the book's
  libraries into errors (``booktools.notebooks.strict_warnings``) and logs the claims it checks
  (``support.claims``); the session records them in ``runs/claims.json`` as the run labelled
  ``$BOOK_RUN_LABEL`` (default: the GPU's name and "make test-gpu"), unless ``booktools.runs`` started this
  session and collects them itself.
"""

from __future__ import annotations

import functools
import os
import tempfile
from pathlib import Path

import pytest

from booktools import notebooks
from support import claims, env

NEEDS_GPU = "needs a CUDA GPU"


def pytest_addoption(parser):
    parser.addoption(
        "--require-gpu",
        action="store_true",
        help="fail instead of skipping when no CUDA GPU and GPU stack are usable (make test-gpu)",
    )


@functools.cache
def gpu_skip_reason() -> str | None:
    """Why GPU notebooks cannot run here, or None when they can."""
    probe = env.probe_gpus()
    if not probe.available:
        return f"{NEEDS_GPU} ({probe.problem})"
    missing = env.missing_modules(env.GPU_STACK)
    if missing:
        return f"needs the book's GPU stack (environment.yml); not importable here: {', '.join(missing)}"
    return None


def pytest_configure(config):
    if env.probe_gpus().available is False:
        os.environ.setdefault("NUMBA_ENABLE_CUDASIM", "1")


def pytest_sessionstart(session):
    reason = gpu_skip_reason()
    if session.config.getoption("--require-gpu") and reason:
        pytest.exit(f"--require-gpu (make test-gpu): GPU notebooks cannot run: {reason}", returncode=1)
    if session.config.getoption("--require-gpu"):
        # the chapters' kernels raise the deprecation warnings of the book's libraries (notebooks.strict_warnings)
        os.environ["IPYTHONDIR"] = tempfile.mkdtemp(prefix="ipython-")
        notebooks.strict_warnings(Path(os.environ["IPYTHONDIR"]))
    if session.config.getoption("--require-gpu") and not os.environ.get(claims.LOG_VARIABLE):
        session.config._claims_folder = tempfile.mkdtemp(prefix="claims-")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Before a notebook's kernel starts (with its first cell), point its claims log at a file of its own."""
    folder = getattr(item.config, "_claims_folder", None)
    if folder and _is_notebook_node(item):
        os.environ[claims.LOG_VARIABLE] = os.path.join(folder, f"{item.parent.path.stem}.jsonl")
    elif folder:  # a unit test after a notebook: its claims are no notebook's
        os.environ.pop(claims.LOG_VARIABLE, None)


def pytest_sessionfinish(session):
    folder = getattr(session.config, "_claims_folder", None)
    if not folder:
        return
    os.environ.pop(claims.LOG_VARIABLE, None)
    from booktools import evidence
    from booktools.mps import LIMIT_VARIABLE
    from booktools.runs import limit_bytes

    found = {path.stem: evidence.read_log(path) for path in sorted(Path(folder).glob("*.jsonl"))}
    found = {name: logged for name, logged in found.items() if logged}
    if found:
        limit = os.environ.get(LIMIT_VARIABLE)
        where = f" under a {limit} MPS limit" if limit else ""
        label = os.environ.get("BOOK_RUN_LABEL") or f"{env.probe_gpus().gpus[0].name}{where} (make test-gpu)"
        run = evidence.this_machine(label, "nbval", limit_bytes(limit) if limit else None)
        run.chapters = found
        evidence.record(run)


def _is_notebook_node(node) -> bool:
    return type(node).__module__.startswith("nbval")


def pytest_collectstart(collector):
    if _is_notebook_node(collector) and hasattr(collector, "skip_compare"):
        collector.skip_compare = (*collector.skip_compare, "stderr")


def pytest_collection_modifyitems(config, items):
    reason = gpu_skip_reason()
    for item in items:
        if not _is_notebook_node(item):
            continue
        needed = notebooks.gpus_needed(item.parent.nb)
        why = (reason or notebooks.too_few_gpus(needed, env.probe_gpus())) if needed else None
        if why:
            item.add_marker(pytest.mark.skip(reason=why))


@pytest.fixture(scope="session")
def skip_or_fail():
    """Call with a reason to skip here, or to fail in CI, where every tool is installed."""

    def decide(reason: str):
        if os.environ.get("CI"):
            pytest.fail(f"{reason} (CI installs it: see .ci/run)")
        pytest.skip(reason)

    return decide


@pytest.fixture(autouse=True)
def close_figures():
    """Close the figures a test drew, so that matplotlib's many-open-figures warning reports a real leak only."""
    yield
    import sys

    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close("all")
