"""Call a function of the book's package in a fresh Python process and get back what it returns.

Allocators, JAX's memory settings, cuDF's spilling, PyTorch's allocator and Numba's synchronisation on the CUDA
Array Interface are each chosen once per process, so the experiments that compare them start one process per
setting. This module is the one way the book does that::

    found = fresh_process.call(
        "support.memory.churn:measure", name="pool", repeat=5,
        what="the churn of the pool", env={"PYTORCH_ALLOC_CONF": None},
    )

A chapter that shows the code of its experiment runs that code instead: ``fresh_process.run_code(source,
what=...)`` executes ``source`` in the new process and returns the value it leaves in ``result``.

The child is ``python -m support.fresh_process``. It reads the request (the function as ``module:name`` and its
keyword arguments, or the code) as JSON from its standard input, calls the function (or runs the code), and
prints the result as JSON on one line of its standard output, after :data:`RESULT_MARK`; a dataclass comes back
as a dict. Arguments and results
are JSON values. It then leaves without Python's teardown: a failed CUDA graph capture, for one, leaves a stream
that tearing PyTorch and RMM down can trip on, and the result is out already.

>>> environment({"A": "1", "B": None}, base={"B": "2", "C": "3"})
{'C': '3', 'A': '1'}
>>> request = encode_request("json:dumps", obj=[1, 2])
>>> json.loads(request)["function"], json.loads(request)["arguments"]
('json:dumps', {'obj': [1, 2]})
"""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

#: What the child prints before the JSON of its result, so that a library's own prints cannot be mistaken for it.
RESULT_MARK = "fresh-process result: "


class FreshProcessError(RuntimeError):
    """The fresh process failed or printed no result; the message quotes the end of its standard error."""


def environment(changes: Mapping[str, str | None] | None = None, base: Mapping[str, str] | None = None) -> dict:
    """``base`` (this process's environment by default) with ``changes`` applied: a value of None removes the
    variable."""
    result = dict(os.environ if base is None else base)
    for key, value in (changes or {}).items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = value
    return result


def encode_request(function: str, /, **arguments) -> str:
    """The JSON the child reads: ``function`` as ``module:name`` and its keyword ``arguments``."""
    module, _, name = function.partition(":")
    if not module or not name:
        raise ValueError(f"name the function as 'module:name', e.g. 'support.memory.churn:measure', not {function!r}")
    return json.dumps({"function": function, "arguments": arguments})


def _where_support_lives() -> str:
    """The folder this process imported ``support`` from, so that the child imports the same code."""
    return str(Path(__file__).resolve().parent.parent)


def _run(request: str, what: str, env, timeout: float):
    variables = environment(env)
    variables["PYTHONPATH"] = os.pathsep.join(filter(None, [_where_support_lives(), variables.get("PYTHONPATH")]))
    done = subprocess.run(
        [sys.executable, "-m", "support.fresh_process"],
        input=request,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=variables,
    )
    if done.returncode != 0:
        tail = "\n".join(done.stderr.strip().splitlines()[-5:])
        raise FreshProcessError(f"{what} failed in its process (exit {done.returncode}):\n{tail}")
    results = [line[len(RESULT_MARK) :] for line in done.stdout.splitlines() if line.startswith(RESULT_MARK)]
    if not results:
        raise FreshProcessError(f"{what} printed no result")
    return json.loads(results[-1])


def call(
    function: str,
    /,
    *,
    what: str,
    env: Mapping[str, str | None] | None = None,
    timeout: float = 300,
    **arguments,
):
    """Call ``function`` (``"module:name"``) with keyword ``arguments`` in a new Python process; return its result.

    ``env`` changes the child's environment (a value of None removes a variable); ``what`` names the experiment in
    the :class:`FreshProcessError` raised when the process fails, which quotes the last lines of its standard error.
    """
    return _run(encode_request(function, **arguments), what, env, timeout)


def run_code(source: str, /, *, what: str, env: Mapping[str, str | None] | None = None, timeout: float = 300):
    """Run Python ``source`` in a new process; return the JSON value it assigns to ``result`` (None if none)."""
    return _run(json.dumps({"code": source}), what, env, timeout)


def _jsonable(value):
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    return value


def _serve() -> None:
    """The child's side: read the request, call the function, print the result, leave."""
    request = json.loads(sys.stdin.read())
    if "code" in request:
        namespace = {"__name__": "__fresh_process__"}
        exec(compile(request["code"], "<fresh process>", "exec"), namespace)
        result = namespace.get("result")
    else:
        module, _, name = request["function"].partition(":")
        result = getattr(importlib.import_module(module), name)(**request["arguments"])
    print(RESULT_MARK + json.dumps(_jsonable(result)), flush=True)
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    _serve()
