"""Every function of support/ that sizes work from the GPU's memory, on cards of 16, 24, 80, 141 and 192 GB (the
memory query faked): the sizes stay within what the libraries accept (cuDF's int32 row count, a memory fraction
of at most 1) and within the share the chapter asks for.

On a 141 GB H200 the JAX probe of chapter 4 once sized its cuDF job as one column of 2.4 billion rows, and cuDF's
``plc.filling.sequence`` raised ``OverflowError: value too large to convert to int32_t``."""

import sys
import types

import pytest

from support.ecg import __main__ as ecg_command
from support.memory import fragmentation, jax_probe, oversubscription, pools
from support.units import GIB, MIB

INT32_MAX = 2**31 - 1
CARDS_GB = (16, 24, 80, 141, 192)


def card(gb: int) -> tuple[int, int]:
    """(free, total) bytes of a card of ``gb`` GB as the chapters see it: most of it free, the book's 4 GiB pool and
    the CUDA contexts taken."""
    total = gb * 10**9
    return total - 4 * GIB - 600 * MIB, total


class FakeSeries:
    """cuDF's Series as far as the probe's job uses it; more rows than int32 holds fail as cuDF's do."""

    made: list[int] = []

    def __init__(self, values, dtype="int64"):
        rows = len(values)
        if rows > INT32_MAX:
            raise OverflowError("value too large to convert to int32_t")
        self.rows = rows
        FakeSeries.made.append(rows)

    def __mul__(self, factor):
        return FakeSeries(range(self.rows))

    def max(self):
        return self.rows - 1


@pytest.fixture
def fake_cudf(monkeypatch):
    FakeSeries.made = []
    monkeypatch.setitem(sys.modules, "cudf", types.SimpleNamespace(Series=FakeSeries))
    return FakeSeries


@pytest.mark.parametrize("gb", CARDS_GB)
def test_the_jax_probes_cudf_job_is_the_chapters_share_in_columns_cudf_accepts(gb, fake_cudf):
    free, _ = card(gb)
    job = jax_probe.job_bytes_for(free)
    assert jax_probe.JOB_SHARE * free - jax_probe.JOB_BYTES_PER_ROW < job <= jax_probe.JOB_SHARE * free
    jax_probe._cudf_job(job)  # the job as the probe's process runs it, on the fake cuDF
    assert max(fake_cudf.made) <= INT32_MAX
    assert sum(fake_cudf.made) * 8 == job  # the columns and their temporaries, int64: the whole job, alive at once


def test_the_old_single_column_job_fails_on_a_141_gb_card_as_it_did(fake_cudf):
    """The fake cuDF refuses what cuDF refused: one column of the whole job."""
    rows = jax_probe.job_bytes_for(card(141)[0]) // jax_probe.JOB_BYTES_PER_ROW
    with pytest.raises(OverflowError, match="int32"):
        fake_cudf(range(rows))


def test_a_job_splits_into_as_few_even_columns_as_cudf_needs():
    assert jax_probe.job_column_rows(0) == [0]
    rows = jax_probe.job_column_rows(16 * (2 * INT32_MAX + 1))
    assert len(rows) == 3 and max(rows) <= INT32_MAX
    rows = jax_probe.job_column_rows(16 * 2 * INT32_MAX)
    assert len(rows) == 2 and sum(rows) == 2 * INT32_MAX and max(rows) - min(rows) <= 1


@pytest.mark.parametrize("gb", CARDS_GB)
def test_the_oversubscription_experiment_leaves_its_room_and_asks_for_more_than_that(gb):
    free, _ = card(gb)
    plan = oversubscription.plan(free)
    assert plan.ballast + plan.room == free and 0 < plan.ballast < free
    assert plan.room < plan.managed <= 2 * plan.room  # oversubscribes what is left, by the chapter's 1.5×
    assert plan.managed // 4 <= INT32_MAX and plan.chunk // 4 <= INT32_MAX  # float32 elements


@pytest.mark.parametrize("gb", (*CARDS_GB, 15.5))
def test_the_caching_allocators_cap_is_a_fraction_of_the_card_pytorch_accepts(gb, monkeypatch):
    """``set_per_process_memory_fraction`` takes a share of the card's total (PyTorch refuses one above 1); under a
    16 GB MPS limit the total PyTorch sees is the limit (15.5 GiB)."""
    total = int(gb * 10**9) if gb != 15.5 else int(15.5 * GIB)
    fractions = []
    cuda = types.SimpleNamespace(
        mem_get_info=lambda: (total // 2, total),
        set_per_process_memory_fraction=fractions.append,
        caching_allocator_alloc=None,
        caching_allocator_delete=None,
        synchronize=None,
    )
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda, OutOfMemoryError=MemoryError))
    for cap in (GIB, 2 * GIB):  # chapter 4's two plans
        fragmentation._torch(cap)
    assert all(0 < fraction <= 1 for fraction in fractions) and len(fractions) == 2
    assert fractions[1] * total == pytest.approx(2 * GIB)


@pytest.mark.parametrize("gb", CARDS_GB)
def test_a_suggested_pool_fits_the_free_memory(gb):
    free, _ = card(gb)
    for peak in (140 * MIB, 702 * MIB, 8 * GIB):  # chapter 4's small and large workloads, and a larger one
        assert peak < pools.suggest_pool_size(peak, free) <= free


@pytest.mark.parametrize("gb", CARDS_GB)
def test_the_ecg_command_lines_memory_bound_stays_within_one_cudf_column(gb):
    """``python -m support.ecg`` refuses a recording larger than the free memory allows and suggests the most hours
    that fit (``check_memory``, 300 bytes a sample): on every card that bound is within cuDF's int32 rows."""
    free, _ = card(gb)
    assert free // ecg_command.BYTES_PER_SAMPLE <= INT32_MAX
