"""support.fresh_process: the one way the book runs an experiment in a new Python process, tested with real
processes on the CPU."""

import os

import pytest

from support import fresh_process


def test_a_function_runs_in_a_new_process_with_the_environment_it_is_given(monkeypatch):
    monkeypatch.setenv("BOOK_TEST_GONE", "here")
    found = fresh_process.call(
        "os:getenv", key="BOOK_TEST_SET", what="reading a variable", env={"BOOK_TEST_SET": "7", "BOOK_TEST_GONE": None}
    )
    assert found == "7"
    assert fresh_process.call("os:getenv", key="BOOK_TEST_GONE", what="reading a removed variable") == "here"
    gone = fresh_process.call(
        "os:getenv", key="BOOK_TEST_GONE", what="a removed variable", env={"BOOK_TEST_GONE": None}
    )
    assert gone is None


def test_a_dataclass_comes_back_as_a_dict_and_library_prints_are_not_the_result():
    found = fresh_process.call("support.needs:Need", chapter="x", peak_bytes=1, limit_bytes=2, label="y", what="a Need")
    assert found == {"chapter": "x", "peak_bytes": 1, "limit_bytes": 2, "label": "y"}
    assert fresh_process.call("builtins:print", what="a print") is None  # print's own line is not the result


def test_a_failure_names_the_experiment_and_quotes_the_error():
    with pytest.raises(fresh_process.FreshProcessError, match=r"(?s)the missing function failed.*AttributeError"):
        fresh_process.call("support.fresh_process:no_such_function", what="the missing function")
    with pytest.raises(ValueError, match="module:name"):
        fresh_process.call("support.fresh_process", what="no function named")


def test_code_runs_in_a_new_process_and_returns_what_it_leaves_in_result():
    source = "import os\nresult = {'pid': os.getpid(), 'two': 1 + 1}"
    found = fresh_process.run_code(source, what="a snippet")
    assert found["two"] == 2 and found["pid"] != os.getpid()
    assert fresh_process.run_code("x = 1", what="no result") is None
    with pytest.raises(fresh_process.FreshProcessError, match=r"(?s)the broken snippet failed.*ZeroDivisionError"):
        fresh_process.run_code("1 / 0", what="the broken snippet")
