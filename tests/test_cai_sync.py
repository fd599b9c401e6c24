"""CPU tests of support.interop.cai_sync: its checks (the timing needs a GPU)."""

import pytest

from support.interop import cai_sync


@pytest.mark.parametrize(("launches", "repeat"), [(0, 7), (200, 0)])
def test_counts_must_be_positive(launches, repeat):
    with pytest.raises(ValueError, match="at least one launch"):
        cai_sync.launch_overhead(sync=True, launches=launches, repeat=repeat)
