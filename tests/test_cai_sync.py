"""CPU tests of support.interop.cai_sync: its checks (the timing needs a GPU)."""

import pytest

from support.interop import cai_sync


@pytest.mark.parametrize(("launches", "repeat"), [(0, 7), (200, 0)])
def test_counts_must_be_positive(launches, repeat):
    with pytest.raises(ValueError, match="at least one launch"):
        cai_sync.launch_overhead(sync=True, launches=launches, repeat=repeat)


def test_race_launch_must_try_at_least_once():
    with pytest.raises(ValueError, match="try at least once"):
        cai_sync.race_launch(sync=False, tries=0)


def test_launch_races_name_the_control():
    named, unnamed, as_array = cai_sync.LAUNCH_RACES
    assert "names its stream" in named and "names no stream" in unnamed and "as_cuda_array" in as_array


class _FakeArray:
    __cuda_array_interface__ = {"version": 3, "data": (1234, False), "shape": (4,), "typestr": "<f4", "stream": 7}


def test_interface_only_without_a_stream_drops_the_entry():
    described = cai_sync.InterfaceOnly(_FakeArray(), names_stream=False).__cuda_array_interface__
    assert "stream" not in described and described["data"] == (1234, False)
