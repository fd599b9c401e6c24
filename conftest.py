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
import sys
import tempfile
from pathlib import Path

import pytest

from booktools import evidence, notebooks
from booktools.mps import LIMIT_VARIABLE
from booktools.runs import limit_bytes
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
    if "matplotlib.pyplot" in sys.modules:
        sys.modules["matplotlib.pyplot"].close("all")


# ---- fixtures every test may ask for (RMM's conftest style: fakes of the machine, temporary records) --------


@pytest.fixture
def fake_gpu(monkeypatch):
    """Make this process see made-up GPUs: ``fake_gpu()`` is one H100 80GB, ``fake_gpu(name=..., memory_gib=...,
    count=2)`` others, ``fake_gpu(gpus=(gpu, ...))`` the ones given, ``fake_gpu(problem="no NVIDIA driver")`` none.
    Whatever reads the cached probe of :mod:`support.env` (``require_gpu``, ``banner``, ``needs.check_gpu``,
    ``bench.time_cuda``) sees it; returns the probe."""

    def install(
        name: str = "NVIDIA H100 80GB HBM3",
        memory_gib: float = 80,
        *,
        count: int = 1,
        compute_capability: tuple[int, int] = (9, 0),
        cuda_version: str = "13.0",
        driver_version: str | None = "580.159.04",
        problem: str | None = None,
        gpus: tuple[env.Gpu, ...] | None = None,
    ) -> env.GpuProbe:
        if problem is not None:
            probe = env.GpuProbe(problem=problem)
        else:
            memory = int(memory_gib * 2**30)
            gpus = gpus or tuple(env.Gpu(i, name, memory, compute_capability, 132) for i in range(count))
            probe = env.GpuProbe(gpus=gpus, cuda_version=cuda_version, driver_version=driver_version)
        monkeypatch.setattr(env, "_probe_once", lambda: probe)
        return probe

    return install


@pytest.fixture
def records(tmp_path, monkeypatch):
    """Temporary record files, empty: ``records.runs`` (chapter runs), ``records.claims``, ``records.needs`` and
    ``records.claims_log`` (the log :mod:`support.claims` appends to, which this fixture points it at). Pass them
    to ``booktools.runs`` / ``booktools.evidence`` / ``support.needs``, whose defaults are the committed files."""
    found = _Records(tmp_path / "runs")
    found.folder.mkdir()
    monkeypatch.setenv(claims.LOG_VARIABLE, str(found.claims_log))
    return found


class _Records:
    """The paths of the ``records`` fixture."""

    def __init__(self, folder: Path):
        self.folder = folder
        self.runs = folder / "chapter_runs.json"
        self.claims = folder / "claims.json"
        self.needs = folder / "chapter_needs.json"
        self.claims_log = folder / "claims.jsonl"


@pytest.fixture(autouse=True)
def reset_global_state():
    """Undo what a test left in process-wide state: environment variables it set without ``monkeypatch``, and a
    GPU probe cached while it ran (a probe made under a test's stand-in driver must not serve the next test)."""
    environment = dict(os.environ)
    probed_before = env._probe_once.cache_info().currsize
    yield
    if probed_before == 0 and env._probe_once.cache_info().currsize:
        env._probe_once.cache_clear()
    if os.environ != environment:
        os.environ.clear()
        os.environ.update(environment)


#: Doctests that compile kernels or start processes and threads (seconds each): ``make test-fast`` leaves them out.
SLOW_DOCTESTS = (
    "support/ecg/kernels.py::support.ecg.kernels",
    "support/ecg/cpu_peers.py::support.ecg.cpu_peers.oa_convolve_threaded",
    "support/why_gpus/speedups.py::support.why_gpus.speedups.identity_failures_parallel",
    "support/figures.py::support.figures",
    "support/ecg/synthetic.py::support.ecg.synthetic",
)


@pytest.hookimpl(specname="pytest_collection_modifyitems", tryfirst=True)
def pytest_collection_modifyitems_marks(config, items):
    """The default time limit (``timeout`` in pyproject.toml) is for tests; a notebook cell on a GPU may run for
    minutes, and nbval's own cell timeout holds it. Doctests cannot carry a marker: the slow ones are named here."""
    for item in items:
        if _is_notebook_node(item):
            item.add_marker(pytest.mark.timeout(0))
        elif item.nodeid in SLOW_DOCTESTS:
            item.add_marker(pytest.mark.slow)
