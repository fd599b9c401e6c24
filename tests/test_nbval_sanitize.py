"""The rules of tests/nbval_sanitize.cfg on real outputs: a line the published run printed and the line a second
machine prints compare equal once masked, and a changed word still makes them differ.

Each case is (the committed output, what another machine or run printed, the committed output with one word
changed). The figures of the second come from the H200 try of issue #38 or from the machines a reader may have
(16–192 GB cards, 8–128 cores, another driver)."""

import re

import pytest
from nbval.plugin import get_sanitize_patterns

from booktools import paths

#: The rules as nbval reads them (a ``regex:`` line and the ``replace:`` line after it), in the file's order.
RULES = get_sanitize_patterns((paths.ROOT / "tests" / "nbval_sanitize.cfg").read_text(encoding="utf-8"))


def sanitized(text: str) -> str:
    """The text as nbval compares it: every rule of the cfg, in order."""
    for regex, replace in RULES:
        text = re.sub(regex, replace, text)
    return text


FRAGMENTATION_TEXT = """\
                                                 free under the cap  \\
blocks              allocator
blocks of 16–64 MiB PyTorch caching allocator           1021.66 MiB
                    PyTorch, expandable segments        1021.66 MiB

                                                 largest request that fits  \\
blocks              allocator
blocks of 16–64 MiB PyTorch caching allocator                   994.00 MiB
                    PyTorch, expandable segments                {fit} MiB

                                                 usable in one piece
blocks              allocator
blocks of 16–64 MiB PyTorch caching allocator                    97%
                    PyTorch, expandable segments                 48%
"""

FRAGMENTATION_HTML = """\
    <tr>
      <th>PyTorch, expandable segments</th>
      <td>53</td>
      <td>1.00 GiB</td>
      <td>1021.66 MiB</td>
      <td>{fit} MiB</td>
      <td>48%</td>
    </tr>
"""

OOM = (
    "CUDA out of memory. Tried to allocate 460.00 MiB. GPU 0 has "
    "a total capacity of {cap} GiB of which {free} GiB is free. Process {pi"
    "d} has {held} GiB memory in use. Including non-PyTorch memory, this pr"
    "ocess has {mine} GiB memory in use. 1024.00 MiB allowed; Of the alloca"
    "ted memory 380.00 MiB is allocated by PyTorch"
)

#: The same message from the H100 under a 16 GB CUDA MPS limit (2026-11-26): the driver lists no process.
OOM_UNDER_MPS = (
    "CUDA out of memory. Tried to allocate 460.00 MiB. GPU 0 has "
    "a total capacity of 79.18 GiB of which 14.50 GiB is free. Including non-PyTorch memory, this pr"
    "ocess has 1.09 GiB memory in use. 1024.00 MiB allowed; Of the alloca"
    "ted memory 380.00 MiB is allocated by PyTorch"
)

CASES = {
    "chapter 4, the sign of the unclaimed gap between all-RMM and PyTorch's own": (
        "all-RMM minus PyTorch's own: +0.35 ms; between the two setups that train with PyTorch's own "
        "allocator: 0.69 ms",
        "all-RMM minus PyTorch's own: -0.12 ms; between the two setups that train with PyTorch's own "
        "allocator: 0.41 ms",
        "all-RMM minus PyTorch's own: +0.35 ms; between the two setups that train with RMM's own allocator: 0.69 ms",
    ),
    "chapter 1, the CPU line": (
        "CPU: Intel(R) Xeon(R) Processor: 16 cores for this process (of 16)",
        "CPU: AMD EPYC 9454 48-Core Processor: 32 cores for this process (of 192)",
        "CPU: Intel(R) Xeon(R) Processor: 16 cores for this thread (of 16)",
    ),
    "chapter 3, the CPU engine's machine": (
        "CPU engine on Intel(R) Xeon(R) Processor: 16 cores for this process (of 16)",
        "CPU engine on AMD EPYC 9454 48-Core Processor: 32 cores for this process (of 32)",
        "GPU engine on Intel(R) Xeon(R) Processor: 16 cores for this process (of 16)",
    ),
    "chapter 3, Polars' thread pool": (
        "Polars' thread pool: 16 threads",
        "Polars' thread pool: 32 threads",
        "Polars' process pool: 16 threads",
    ),
    "chapter 3, how many of ten racing launches were wrong": (
        "kernel launched on x, the interface names no stream                         9/10 wrong",
        "kernel launched on x, the interface names no stream                        10/10 wrong",
        "kernel launched on x, the interface names no stream                         0/10 wrong",
    ),
    "chapter 1, CPU cores": (
        "the CPU contenders use 16 CPU cores",
        "the CPU contenders use 128 CPU cores",
        "the CPU contenders use 16 GPU cores",
    ),
    "chapter 2, a float32 sum of a GPU reduction": (
        "  library, strided AoS view, float32 sum: 67,111,840.0",
        "  library, strided AoS view, float32 sum: 67,111,816.0",
        "  library, strided AoS view, float64 sum: 67,111,840.0",
    ),
    "chapter 5, a sum in chunks": (
        "in chunks: 134,193,021, the pool held 128 MiB",
        "in chunks: 134,193,016, the pool held 128 MiB",
        "in chunks: 134,193,021, the pool held 256 MiB",
    ),
    "chapter 6, kernels in a training step": (
        "one step at 512 beats: 126 kernels, 0.61 ms of kernel time in a 9.37 ms step",
        "one step at 512 beats: 131 kernels, 0.58 ms of kernel time in a 8.12 ms step",
        "one step at 4096 beats: 126 kernels, 0.61 ms of kernel time in a 9.37 ms step",
    ),
    "chapter 1, where the lines cross": (
        "CuPy, data on the GPU: faster than the best CPU line from 1.00 MiB up",
        "CuPy, data on the GPU: faster than the best CPU line nowhere in this range",
        "CuPy, data on the host: faster than the best CPU line from 1.00 MiB up",
    ),
    "chapter 1, where repeats spread most": (
        "NumPy, 1 core: repeats at most 3.2× apart (at 4.00 KiB)",
        "NumPy, 1 core: repeats at most 1.4× apart (at 1.00 KiB)",
        "NumPy, 2 cores: repeats at most 3.2× apart (at 4.00 KiB)",
    ),
    "chapter 4, a step's repeats": (
        "PyTorch's own: 4.05 ms a step (repeats 3.89 to 4.19)",
        "PyTorch's own: 3.72 ms a step (repeats 3.37 to 3.97)",
        "PyTorch's own: 4.05 ms a batch (repeats 3.89 to 4.19)",
    ),
    "chapter 4, PyTorch's out-of-memory message": (
        OOM.format(cap="79.18", free="69.43", pid="2010", held="8.52", mine="1.09"),
        OOM.format(cap="139.80", free="120.10", pid="1248", held="15.52", mine="1.11"),
        OOM.format(cap="79.18", free="69.43", pid="2010", held="8.52", mine="1.09").replace("460.00", "470.00"),
    ),
    "chapter 4, PyTorch's out-of-memory message under an MPS limit, which lists no process": (
        OOM.format(cap="79.18", free="69.43", pid="2010", held="8.52", mine="1.09"),
        OOM_UNDER_MPS,
        OOM.format(cap="79.18", free="69.43", pid="2010", held="8.52", mine="1.09").replace("380.00", "390.00"),
    ),
    "chapter 4, fragmentation's largest hole, text": (
        FRAGMENTATION_TEXT.format(fit="486.00"),
        FRAGMENTATION_TEXT.format(fit="491.00"),
        FRAGMENTATION_TEXT.format(fit="486.00").replace("1021.66 MiB", "1000.00 MiB", 1),
    ),
    "chapter 3, a breakdown's rest that another run found negative": (
        "4             not explained by the parts  21.0 ms                                 33%",
        "4             not explained by the parts  −15.8 ms: the parts add up to more than the whole   −25%",
        "4             not explained by the parts  21.0 ms                                 33% of the parts",
    ),
    "chapter 3, the same row in the HTML table": (
        "<td>21.0 ms</td>\n      <td></td>\n      <td>33%</td>",
        "<td>−15.8 ms: the parts add up to more than the whole</td>\n      <td></td>\n      <td>−25%</td>",
        "<td>21.0 ms</td>\n      <td></td>\n      <td>−33%</td>",  # a negative share elsewhere is still compared
    ),
    "chapter 6, a saving within the runs' spread, whose sign follows the run": (
        "  in the rest of the process: 968 ms longer",
        "  in the rest of the process: 412 ms shorter",
        "  in training: 968 ms longer",
    ),
    "chapter 4, fragmentation's largest hole, HTML": (
        FRAGMENTATION_HTML.format(fit="486.00"),
        FRAGMENTATION_HTML.format(fit="491.00"),
        FRAGMENTATION_HTML.format(fit="486.00").replace("<td>53</td>", "<td>54</td>"),
    ),
}


@pytest.mark.parametrize("published, elsewhere, changed", CASES.values(), ids=CASES.keys())
def test_a_machine_dependent_figure_is_masked_and_a_changed_word_is_not(published, elsewhere, changed):
    assert published != elsewhere
    assert sanitized(published) == sanitized(elsewhere)
    assert sanitized(published) != sanitized(changed)


def test_the_fragmentation_rules_mask_only_their_column():
    """The deterministic columns beside the largest hole (blocks, bytes still allocated) are still compared."""
    html = FRAGMENTATION_HTML.format(fit="486.00")
    assert "1021.66~MiB" in sanitized(html) and "<td>53</td>" in sanitized(html)
    text = sanitized(FRAGMENTATION_TEXT.format(fit="486.00"))
    assert "1021.66~MiB" in text and "usable~in~one~piece" in text and "994.00" not in text


def test_the_sign_of_training_s_saving_is_still_compared():
    """Chapter 6 claims the first training is shorter: a run that printed it longer must not pass nbval."""
    assert sanitized("  in training: 1.18 s shorter") != sanitized("  in training: 1.18 s longer")
    assert sanitized("  in the whole process: 208 ms shorter") == sanitized("  in the whole process: 9 ms longer")
