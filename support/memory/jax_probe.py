"""JAX's GPU memory settings, and what each leaves for cuDF: measured in a fresh process per setting.

JAX has no interface for an outside allocator, so it cannot share the RMM pool. By default it preallocates 75 %
of the GPU's memory when it starts, and a cuDF job in the same process (or another one) finds the GPU nearly
full. Its environment variables, read once when JAX starts (so each setting needs a fresh process):

- ``XLA_PYTHON_CLIENT_PREALLOCATE=false``: grow on demand (and keep what it grew to);
- ``XLA_CLIENT_MEM_FRACTION=.25``: preallocate a smaller share (``XLA_PYTHON_CLIENT_MEM_FRACTION`` is the older
  name, which JAX 0.11 still reads; with both set its GPU backend fails to start, JAX writes the error to stderr
  and runs on the CPU: :data:`JAX_VARIABLES` clears both, and :func:`platform_and_stderr` returns the platform
  and what was written);
- ``XLA_PYTHON_CLIENT_ALLOCATOR=platform``: allocate and free each array exactly (slow, but holds nothing).

:func:`probe_in_fresh_process` starts JAX with one setting, runs a little JAX work, and then tries a cuDF job of
a given size in the same process; it reports the free memory JAX left, so the job's outcome can be checked
against it. The job is :data:`JOB_SHARE` of the free memory (:func:`job_bytes_for`), in as many cuDF columns as
it takes to keep each within cuDF's int32 row count (:func:`job_column_rows`), so it is the same share on a 16 GB
card and a 192 GB one. A setting whose process fails for another reason comes back as a :class:`JaxProbe` that says so
(``failed``), so that every setting that was not refused has its row.

**On a shared GPU** a setting that preallocates a large share would take memory other processes count on. The
probe refuses a setting whose preallocation would not leave ``margin`` of the free memory; and it refuses one
that preallocates half the GPU or more whenever the GPU looks shared (less than :data:`UNSHARED_FREE_SHARE` of it
free once this process's own RMM pool is counted as free, as under an MPS client limit or beside another job),
unless ``GPU_INTEROP_ALLOW_JAX_PREALLOCATION=1``.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass

from support import fresh_process
from support.bench import format_seconds
from support.fresh_process import environment
from support.memory.pools import MemorySetupError, summarize_error
from support.units import GIB, describe_bytes

#: The share of the free memory the cuDF job needs (chapter 4: "a cuDF job that needs 30 % of the memory that was
#: free before JAX started").
JOB_SHARE = 0.30
#: cuDF sizes a column with int32 (``size_type``): more rows raise ``OverflowError`` in ``plc.filling.sequence``.
CUDF_MAX_ROWS = 2**31 - 1
#: Bytes per row of the job: an int64 column and one int64 temporary as large.
JOB_BYTES_PER_ROW = 16

#: The prefixes of JAX's memory variables, old and new names; a probe's process starts with none of them.
JAX_VARIABLES = ("XLA_PYTHON_CLIENT_", "XLA_CLIENT_MEM_FRACTION")

SETTINGS: dict[str, dict[str, str]] = {
    "preallocate 75 % (JAX's default)": {"XLA_PYTHON_CLIENT_PREALLOCATE": "true"},
    "preallocate 25 %": {"XLA_PYTHON_CLIENT_PREALLOCATE": "true", "XLA_CLIENT_MEM_FRACTION": ".25"},
    "grow on demand": {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"},
    "platform allocator": {"XLA_PYTHON_CLIENT_PREALLOCATE": "false", "XLA_PYTHON_CLIENT_ALLOCATOR": "platform"},
}


def jax_environment_changes(setting: str, base: Mapping[str, str] | None = None) -> dict[str, str | None]:
    """What a JAX process with ``setting`` changes in ``base`` (this environment by default): its own JAX memory
    variables removed (None), the setting's set."""
    if setting not in SETTINGS:
        raise ValueError(f"unknown JAX memory setting {setting!r}; choose one of: {', '.join(SETTINGS)}")
    base = os.environ if base is None else base
    return {key: None for key in base if key.startswith(JAX_VARIABLES)} | SETTINGS[setting]


def jax_environment(setting: str, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a JAX process with ``setting``: ``base`` without its own JAX memory variables."""

    return environment(jax_environment_changes(setting, base), base)


def preallocated_fraction(setting: str) -> float:
    """The share of the GPU's memory JAX takes when it starts with ``setting`` (0 when it grows on demand)."""
    variables = jax_environment(setting, {})
    if variables.get("XLA_PYTHON_CLIENT_PREALLOCATE", "true").lower() in ("false", "0"):
        return 0.0
    return float(variables.get("XLA_CLIENT_MEM_FRACTION", ".75"))


OPT_IN = "GPU_INTEROP_ALLOW_JAX_PREALLOCATION"
#: A GPU with less than this share of its memory free is taken to be shared (others hold the rest).
UNSHARED_FREE_SHARE = 0.9


def pool_bytes(resource) -> int:
    """The size of the first RMM pool in ``resource``'s chain of adaptors (0 when there is none).

    >>> from types import SimpleNamespace as Fake
    >>> pool = Fake(pool_size=lambda: 4096)
    >>> pool_bytes(Fake(get_upstream=lambda: pool)), pool_bytes(Fake(get_upstream=lambda: None))
    (4096, 0)
    """
    seen = 0
    while resource is not None and seen < 16:
        if hasattr(resource, "pool_size"):
            return int(resource.pool_size())
        upstream = getattr(resource, "get_upstream", None)
        resource = upstream() if upstream is not None else None
        seen += 1
    return 0


def check_room_for_jax(
    setting: str,
    free: int,
    total: int,
    margin: int = 2 * GIB,
    environ: Mapping[str, str] | None = None,
    *,
    held_here: int = 0,
) -> None:
    """Refuse to start JAX with ``setting`` when it would crowd out other users of the GPU (module docstring).

    >>> check_room_for_jax("grow on demand", free=1 * GIB, total=16 * GIB)
    >>> check_room_for_jax("preallocate 75 % (JAX's default)", free=70 * GIB, total=80 * GIB, environ={})
    Traceback (most recent call last):
    ...
    support.memory.pools.MemorySetupError: this GPU looks shared: 70.00 GiB of its 80.00 GiB is free, ...
    >>> check_room_for_jax("preallocate 75 % (JAX's default)", 70 * GIB, 80 * GIB, environ={}, held_here=8 * GIB)
    """
    fraction = preallocated_fraction(setting)
    wanted = int(fraction * total)
    if wanted and wanted + margin > free:
        raise MemorySetupError(
            f"JAX with {setting!r} would take {describe_bytes(wanted)} of this GPU's {describe_bytes(total)}, "
            f"but only {describe_bytes(free)} is free: other processes are using it, and they could run out of "
            "memory; run this on a GPU of your own, or skip this setting"
        )
    environ = os.environ if environ is None else environ
    opted = environ.get(OPT_IN, "").strip().lower() in ("1", "true", "yes")
    if fraction >= 0.5 and free + held_here < UNSHARED_FREE_SHARE * total and not opted:
        others = total - free - held_here
        raise MemorySetupError(
            f"this GPU looks shared: {describe_bytes(free)} of its {describe_bytes(total)} is free, other processes "
            f"hold about {describe_bytes(others)}, and JAX with {setting!r} would take {describe_bytes(wanted)}; on a "
            f"GPU of your own, set {OPT_IN}=1"
        )


def job_bytes_for(free_bytes: int, share: float = JOB_SHARE) -> int:
    """The bytes of the cuDF job: ``share`` of ``free_bytes``, in whole rows of :data:`JOB_BYTES_PER_ROW`.

    >>> job_bytes_for(100 * GIB) // GIB
    30
    """
    if not 0 < share < 1:
        raise ValueError(f"the job's share of the free memory must lie between 0 and 1, not {share}")
    return int(share * free_bytes) // JOB_BYTES_PER_ROW * JOB_BYTES_PER_ROW


def job_column_rows(job_bytes: int, max_rows: int = CUDF_MAX_ROWS) -> list[int]:
    """The row counts of the job's columns: ``job_bytes`` in rows of :data:`JOB_BYTES_PER_ROW`, split evenly into
    as few columns as keep each within ``max_rows`` (cuDF's int32 row count).

    >>> job_column_rows(64), job_column_rows(10 * JOB_BYTES_PER_ROW, max_rows=4)
    ([4], [4, 3, 3])
    """
    rows = job_bytes // JOB_BYTES_PER_ROW
    columns = max(1, -(-rows // max_rows))
    return [rows // columns + (1 if i < rows % columns else 0) for i in range(columns)]


@dataclass(frozen=True)
class JaxProbe:
    """What one setting did: memory JAX held, the time of a JAX step, and whether the cuDF job fitted after it."""

    setting: str
    held_after_start: int
    held_after_work: int
    seconds_per_step: float
    job_bytes: int
    job_fitted: bool
    error: str
    free_after_work: int = 0
    #: Why the probe's process failed before it could report (empty when it reported): its figures are then 0.
    failed: str = ""
    #: The steps' lower and upper quartiles, in seconds: the middle half of the steps lies between them.
    step_quartiles: tuple[float, float] = (float("nan"), float("nan"))

    def row(self, total_bytes: int) -> dict[str, object]:
        """One line of the chapter's table; ``total_bytes`` is the GPU's memory."""

        if self.failed:
            return {"setting": self.setting, f"cuDF job of {describe_bytes(self.job_bytes)}": self.failed}
        return {
            "setting": self.setting,
            "JAX holds once started": describe_bytes(self.held_after_start),
            "after its work": describe_bytes(self.held_after_work),
            "share of the GPU": f"{self.held_after_work / total_bytes:.0%}",
            "JAX step (median)": format_seconds(self.seconds_per_step),
            "middle half of the steps": " to ".join(format_seconds(q) for q in self.step_quartiles),
            "free for cuDF": describe_bytes(self.free_after_work),
            f"cuDF job of {describe_bytes(self.job_bytes)}": "ran" if self.job_fitted else "out of memory",
        }


def _free_bytes() -> tuple[int, int]:
    import rmm

    return rmm.mr.available_device_memory()


def _jax_steps(steps: int) -> tuple[float, float, float]:
    """Seconds of a JAX step that makes new arrays of eight sizes (4–64 MiB) and reduces them, over ``steps``
    steps: the lower quartile, the median and the upper quartile."""
    import jax
    import jax.numpy as jnp

    @jax.jit
    def step(x):
        return jnp.tanh(x) * 2.0 + jnp.sin(x)

    lengths = [2**20 * k for k in (1, 2, 3, 4, 6, 8, 12, 16)]
    for n in lengths:  # compile every shape before timing
        step(jnp.full((n,), 1.0, jnp.float32)).block_until_ready()
    times = []
    for i in range(steps):
        n = lengths[i % len(lengths)]
        start = time.perf_counter()
        step(jnp.full((n,), float(i), jnp.float32)).block_until_ready()
        times.append(time.perf_counter() - start)
    lower, median, upper = statistics.quantiles(times, n=4)
    return lower, median, upper


def _cudf_job(job_bytes: int) -> None:
    """int64 cuDF columns of ``job_bytes // 16`` values in all (:func:`job_column_rows`) and one temporary as large
    beside each, all alive at once: ``job_bytes`` in all."""
    import cudf

    columns = [cudf.Series(range(rows), dtype="int64") for rows in job_column_rows(job_bytes)]
    doubled = [column * 2 for column in columns]
    max(int(column.max()) for column in doubled)


def probe(setting: str, job_bytes: int, steps: int = 256) -> JaxProbe:
    """Run in a process started with :func:`jax_environment` (``setting`` only labels the result)."""
    free_before, _ = _free_bytes()
    import jax.numpy as jnp

    jnp.ones(1).block_until_ready()
    free_started, _ = _free_bytes()
    lower, seconds, upper = _jax_steps(steps)
    free_worked, _ = _free_bytes()
    error = ""
    try:
        _cudf_job(job_bytes)
    except MemoryError as exc:
        error = f"{type(exc).__name__}: {summarize_error(str(exc))}"
    except Exception as exc:  # noqa: BLE001 - not a lack of memory: the job did not run, and the probe says why
        error = f"the cuDF job failed, not for lack of memory: {type(exc).__name__}: {summarize_error(str(exc))}"
    return JaxProbe(
        setting,
        free_before - free_started,
        free_before - free_worked,
        seconds,
        job_bytes,
        not error,
        error,
        free_worked,
        step_quartiles=(lower, upper),
    )


def platform_and_stderr() -> dict[str, str]:
    """Start JAX in this process; return the platform of its first device and what was written to stderr meanwhile.

    For a fresh process (``fresh_process.call("support.memory.jax_probe:platform_and_stderr", env=...)``): JAX reads
    its memory variables once, when it starts. JAX and XLA write from Python's logging and from C++, so it is file
    descriptor 2 that is redirected, not only ``sys.stderr``; a traceback still reaches the caller, since the
    descriptor is given back before it propagates, and a redirect that fails leaves no saved descriptor open.
    """
    with tempfile.TemporaryFile() as captured:
        saved = os.dup(2)
        try:
            os.dup2(captured.fileno(), 2)
            import jax

            platform = jax.devices()[0].platform
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
        captured.seek(0)
        return {"platform": platform, "stderr": captured.read().decode(errors="replace")}


def probe_in_fresh_process(setting: str, job_bytes: int, *, steps: int = 256, timeout: float = 300) -> JaxProbe:
    """:func:`probe` in a new Python process whose environment carries ``setting``.

    Refuses (:class:`MemorySetupError`) a setting whose preallocation would crowd out other users of the GPU. When
    the process fails (JAX does not start, the process dies), the probe comes back with ``failed`` saying why and
    no figures, so a chapter's table and asserts name the setting that failed.
    """
    import rmm

    held_here = pool_bytes(rmm.mr.get_current_device_resource())  # this process's pool is not another user
    check_room_for_jax(setting, *_free_bytes(), held_here=held_here)
    try:
        found = fresh_process.call(
            "support.memory.jax_probe:probe",
            setting=setting,
            job_bytes=job_bytes,
            steps=steps,
            what=f"the JAX probe {setting!r}",
            env=jax_environment_changes(setting),
            timeout=timeout,
        )
    except (fresh_process.FreshProcessError, subprocess.TimeoutExpired) as exc:
        return failed_probe(setting, job_bytes, exc)
    return JaxProbe(**found)


def failed_probe(setting: str, job_bytes: int, exc: BaseException) -> JaxProbe:
    """The probe of a setting whose process failed: no figures, the job not run, ``failed`` says why.

    >>> died = RuntimeError("it failed (exit 1):\\n  ...\\nOverflowError: too large")
    >>> failed_probe("grow on demand", 16, died).failed
    'failed: it failed (exit 1): OverflowError: too large'
    """
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()] or [type(exc).__name__]
    why = "failed: " + (lines[0] if len(lines) == 1 else f"{lines[0]} {lines[-1]}")
    return JaxProbe(setting, 0, 0, float("nan"), job_bytes, False, why, 0, why)
