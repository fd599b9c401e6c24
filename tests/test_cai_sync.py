"""CPU tests of support.cai_sync: the fresh process's environment and its checks (the timing needs a GPU)."""

import pytest

from support import cai_sync


@pytest.mark.parametrize(("sync", "value"), [(True, "1"), (False, "0")])
def test_each_setting_gets_its_own_environment(sync, value):
    env = cai_sync.environment(sync=sync, base={"PATH": "/bin", cai_sync.SYNC_VARIABLE: "7"})
    assert env == {"PATH": "/bin", cai_sync.SYNC_VARIABLE: value}


def test_the_process_refuses_a_setting_that_disagrees_with_its_environment(monkeypatch, capsys):
    monkeypatch.setenv(cai_sync.SYNC_VARIABLE, "1")
    with pytest.raises(SystemExit):
        cai_sync.main(["--no-sync"])
    assert "must be 0" in capsys.readouterr().err


@pytest.mark.parametrize(("launches", "repeat"), [(0, 7), (200, 0)])
def test_counts_must_be_positive(launches, repeat):
    with pytest.raises(ValueError, match="at least one launch"):
        cai_sync.launch_overhead(sync=True, launches=launches, repeat=repeat)
