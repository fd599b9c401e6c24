"""conftest.py's fixtures do what the tests that use them rely on."""

from __future__ import annotations

import os

import pytest

from support import claims, env, needs
from support.units import GIB


def test_fake_gpu_is_what_the_book_sees(fake_gpu):
    probe = fake_gpu("NVIDIA A2", 16, count=2)
    assert env.require_gpu(8 * GIB, gpus=2, free=(15 * GIB, 16 * GIB)) == probe.gpus[0]
    fake_gpu(problem="no NVIDIA driver")
    with pytest.raises(env.GpuUnavailableError, match="no NVIDIA driver"):
        needs.check_gpu("00_getting_started")


def test_records_are_empty_and_the_claims_log_points_there(records):
    assert not any(path.exists() for path in (records.runs, records.claims, records.needs, records.claims_log))
    assert os.environ[claims.LOG_VARIABLE] == str(records.claims_log)


def test_a_variable_set_without_monkeypatch_is_undone_after_the_test():
    os.environ["GPU_INTEROP_FIXTURE_CHECK"] = "set by a test"  # the next test checks it is gone


def test_the_variable_of_the_test_before_is_gone():
    assert "GPU_INTEROP_FIXTURE_CHECK" not in os.environ
