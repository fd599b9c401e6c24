"""support.interop on the CPU: NumPy, PyTorch and JAX speak DLPack on the host too.

The decision (obstacle) is tested for every rule with hand-made ArrayFacts, including the GPU-only cases
(cuDF nulls and DataFrames, device mismatch); the handoffs themselves are tested with real host arrays.
"""

import numpy as np
import pytest

from support.bench import Timing
from support.interop import ArrayFacts, ZeroCopyError, breakdown, describe, obstacle, races, same_memory, share
from support.interop import handoffs as interop

torch = pytest.importorskip("torch")
jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")


def aligned(n, dtype=np.float32, alignment=64):
    return interop.aligned_host_array(n, dtype, alignment)


def host_jax(values):
    """A JAX array in host memory, also on a machine whose default JAX device is a GPU."""
    return jax.device_put(values, jax.devices("cpu")[0])


def gpu_facts(**changes):
    base = ArrayFacts("cupy", "cuda", "float32", (1024,), None, 4)
    return ArrayFacts(**{**base.__dict__, **changes})


# ---- the decision, rule by rule --------------------------------------------------------------------------


def test_a_plain_gpu_vector_can_go_anywhere_on_the_gpu():
    for target in ("cudf", "numba", "torch", "jax"):
        assert obstacle(gpu_facts(), target) is None


def test_cudf_columns_without_fixed_size_values_cannot_be_wrapped():
    strings = gpu_facts(framework="cudf", dtype="object", itemsize=0)
    reason = obstacle(strings, "cupy")
    assert "not one buffer of fixed-size values" in reason and ".str.len()" in reason
    assert "not one buffer" in obstacle(strings, "cudf.DataFrame")  # not measured: refused rather than guessed


@pytest.mark.parametrize("target", ["torch", "jax"])
def test_datetimes_must_be_viewed_as_integers_for_torch_and_jax(target):
    reason = obstacle(gpu_facts(dtype="datetime64[ns]", itemsize=8), target)
    assert "no datetime64[ns] dtype" in reason and "astype('int64')" in reason
    assert obstacle(gpu_facts(dtype="datetime64[ns]", itemsize=8), "cupy") is None


def test_same_framework_needs_nothing():
    assert obstacle(gpu_facts(), "cupy") is None


def test_unknown_target_is_a_usage_error():
    with pytest.raises(ValueError, match="unknown framework 'tensorflow'"):
        obstacle(gpu_facts(), "tensorflow")


def test_dataframe_to_matrix_is_a_copy_because_columns_are_separate_buffers():
    facts = gpu_facts(framework="cudf.DataFrame", shape=(256, 4))
    assert "every column in its own buffer" in obstacle(facts, "cupy")
    assert obstacle(facts, "cudf") is None  # one column of it is a Series, shared


def test_a_matrix_becomes_a_dataframe_by_copy_but_a_vector_is_one_shared_column():
    assert "copies every column" in obstacle(gpu_facts(shape=(256, 4)), "cudf.DataFrame")
    assert obstacle(gpu_facts(), "cudf.DataFrame") is None  # measured: cuDF 26.10 wraps a 1-D array
    assert obstacle(gpu_facts(framework="cudf"), "cudf.DataFrame") is None
    assert "negative strides" in obstacle(gpu_facts(strides=(-4,)), "cudf.DataFrame")
    assert "no float16 columns" in obstacle(gpu_facts(dtype="float16"), "cudf.DataFrame")


@pytest.mark.parametrize("target", ["cudf", "cupy", "numba"])
def test_host_memory_cannot_be_shared_with_gpu_only_frameworks(target):
    assert "lives in host memory" in obstacle(gpu_facts(framework="numpy", device="cpu"), target)


def test_gpu_memory_cannot_be_shared_with_numpy():
    assert "lives in GPU memory" in obstacle(gpu_facts(), "numpy")


@pytest.mark.parametrize("target", ["cupy", "torch", "numba", "jax"])
def test_nulls_block_every_framework_without_a_validity_mask(target):
    reason = obstacle(gpu_facts(framework="cudf", null_count=2), target)
    assert "2 null(s)" in reason and "fillna" in reason


def test_negative_strides_block_torch_jax_and_cudf_but_not_cupy_or_numba():
    reversed_view = gpu_facts(strides=(-4,))
    assert "aborts the whole process" in obstacle(reversed_view, "torch")
    assert "compact layouts" in obstacle(reversed_view, "jax")
    assert "contiguous buffer" in obstacle(reversed_view, "cudf")
    assert obstacle(reversed_view, "numba") is None
    assert obstacle(gpu_facts(framework="numba", strides=(-4,)), "cupy") is None


def test_gaps_between_elements_block_jax_and_cudf_only():
    every_other = gpu_facts(strides=(8,))
    assert "gaps between elements" in obstacle(every_other, "jax")
    assert "gaps between elements" in obstacle(every_other, "cudf")
    assert obstacle(every_other, "torch") is None


def test_a_transposed_matrix_is_compact_and_jax_takes_it():
    transposed = gpu_facts(shape=(4, 256), strides=(4, 16))
    assert transposed.compact
    assert obstacle(transposed, "jax") is None
    assert "2 dimensions" in obstacle(transposed, "cudf")


def test_a_contiguous_matrix_cannot_be_a_series():
    assert "2 dimensions" in obstacle(gpu_facts(shape=(4, 256)), "cudf")


@pytest.mark.parametrize("dtype", ["float16", "complex64", "complex128"])
def test_cudf_has_no_half_or_complex_columns(dtype):
    assert f"no {dtype} columns" in obstacle(gpu_facts(dtype=dtype), "cudf")


@pytest.mark.parametrize(
    ("dtype", "narrowed"), [("float64", "float32"), ("int64", "int32"), ("complex128", "complex64")]
)
def test_jax_32bit_mode_blocks_64bit_dtypes_and_says_how_to_fix_it(dtype, narrowed):
    reason = obstacle(gpu_facts(dtype=dtype), "jax")
    assert "32-bit mode" in reason and narrowed in reason and "jax_enable_x64" in reason
    assert obstacle(gpu_facts(dtype=dtype), "jax", jax_x64=True) is None


def test_jax_on_the_cpu_needs_64_byte_alignment():
    assert "aligned to 16" in obstacle(gpu_facts(framework="numpy", device="cpu", alignment=16), "jax")
    assert obstacle(gpu_facts(alignment=16), "jax") is None  # on the GPU JAX shares any view (measured)
    assert obstacle(gpu_facts(framework="numpy", device="cpu", alignment=16), "torch") is None


# ---- facts read from real objects -----------------------------------------------------------------------


def test_describe_reads_layout_from_numpy_torch_and_jax():
    matrix = np.zeros((3, 4), dtype=np.float64)
    assert describe(matrix).strides is None
    assert describe(matrix.T).strides == (8, 32) and describe(matrix.T).compact
    assert describe(matrix[:, ::2]).compact is False
    assert describe(np.arange(5.0)[::-1]).negative_strides
    tensor = torch.zeros(2, 3)
    assert describe(tensor) == ArrayFacts(
        "torch", "cpu", "float32", (2, 3), None, 4, alignment=describe(tensor).alignment
    )
    assert describe(tensor.t()).strides == (4, 12)
    assert describe(host_jax(jnp.zeros(3, dtype=jnp.int32))).dtype == "int32"


def test_alignment_is_the_largest_power_of_two_dividing_the_address():
    base = aligned(64, alignment=256)
    assert describe(base).alignment == 256
    assert describe(base[1:]).alignment == 4
    assert describe(base[16:]).alignment == 64


def test_unsupported_objects_are_named():
    with pytest.raises(TypeError, match="got builtins.list"):
        interop.framework_of([1, 2, 3])


# ---- handoffs between real host arrays --------------------------------------------------------------------


@pytest.mark.parametrize("to", ["torch", "jax", "numpy"])
@pytest.mark.parametrize(
    "make", [lambda: aligned(256), lambda: torch.arange(256.0), lambda: host_jax(jnp.arange(256.0))]
)
def test_share_hands_over_host_arrays_without_a_copy(make, to):
    source = make()
    result = share(source, to)
    assert interop.framework_of(result) == to
    assert same_memory(result, source)


def test_writes_through_a_shared_view_are_seen_by_the_producer():
    source = aligned(8)
    share(source, "torch")[0] = 42
    assert source[0] == 42


@pytest.mark.parametrize(
    ("source", "to", "match"),
    [
        (lambda: aligned(16)[::-1], "torch", "negative strides"),
        (lambda: aligned(16)[::2], "jax", "gaps between elements"),
        (lambda: aligned(17)[1:], "jax", "aligned to 4"),
        (lambda: aligned(16, dtype=np.float64), "jax", "32-bit mode"),
        (lambda: aligned(16), "cupy", "lives in host memory"),
        (lambda: aligned(16), "numba", "lives in host memory"),
        (lambda: aligned(16), "cudf", "lives in host memory"),
    ],
)
def test_share_refuses_with_the_reason_and_the_way_out(source, to, match):
    with pytest.raises(ZeroCopyError, match=match) as error:
        share(source(), to)
    assert "allow_copy=True" in str(error.value)


@pytest.mark.parametrize(
    ("source", "to", "expected"),
    [
        (lambda: aligned(6)[::-1], "torch", [5, 4, 3, 2, 1, 0]),
        (lambda: aligned(12)[::2], "jax", [0, 2, 4, 6, 8, 10]),
        (lambda: aligned(7)[1:], "jax", [1, 2, 3, 4, 5, 6]),
    ],
)
def test_allow_copy_makes_one_contiguous_copy(source, to, expected):
    array = source()
    result = share(array, to, allow_copy=True)
    assert np.asarray(result).tolist() == expected
    assert not same_memory(result, array)


def test_allow_copy_lets_jax_convert_64bit_data_in_32bit_mode():
    result = share(aligned(4, dtype=np.float64), "jax", allow_copy=True)
    assert result.dtype == (jnp.float64 if jax.config.jax_enable_x64 else jnp.float32)


def test_share_with_its_own_framework_returns_the_object():
    array = aligned(4)
    assert share(array, "numpy") is array


def test_a_library_that_copies_unexpectedly_is_caught_by_the_pointer_check(monkeypatch):
    monkeypatch.setattr(interop, "route", lambda source, to: ("x.numpy().copy()", lambda x: x.numpy().copy()))
    with pytest.raises(ZeroCopyError, match="copied the data although nothing in its layout required it"):
        share(torch.arange(4.0), "numpy")


# ---- the table, the protocols and the handshake -----------------------------------------------------------


def test_conversion_table_measures_every_ordered_pair():
    sources = {
        "numpy": lambda: aligned(1024),
        "torch": lambda: torch.arange(1024.0),
        "jax": lambda: host_jax(jnp.arange(1024.0)),
    }
    rows = interop.conversion_table(sources, ["numpy", "torch", "jax"], timer=lambda fn: (fn(), 1e-6)[1])
    assert [(r.source, r.target) for r in rows] == [
        ("numpy", "torch"),
        ("numpy", "jax"),
        ("torch", "numpy"),
        ("torch", "jax"),
        ("jax", "numpy"),
        ("jax", "torch"),
    ]
    assert all(r.zero_copy and r.predicted_zero_copy and r.why_copy == "" and r.seconds == 1e-6 for r in rows)
    assert rows[0].as_dict()["call"] == "torch.from_dlpack(x)"


def test_conversion_table_says_why_when_it_copies():
    rows = interop.conversion_table({"numpy": lambda: aligned(64, dtype=np.float64)}, ["jax"], timer=lambda fn: 0.0)
    assert not rows[0].zero_copy and not rows[0].predicted_zero_copy
    assert "32-bit mode" in rows[0].why_copy and rows[0].as_dict()["zero-copy"] == "no"


def test_protocols_spoken_reads_attributes():
    assert interop.protocols_spoken(np.arange(3)) == {
        "DLPack": True,
        "CUDA Array Interface": False,
        "NumPy array interface": True,
        "Arrow C device data": False,
    }


def test_stream_recorder_sees_the_consumers_stream_argument():
    recorder = interop.StreamRecorder(aligned(4))
    tensor = torch.from_dlpack(recorder)
    assert recorder.streams == [None]  # host memory: no stream to hand over
    assert tensor.tolist() == [0, 1, 2, 3]


def test_measure_ways_times_each_way_for_each_size():
    rows = interop.measure_ways(
        lambda size: np.zeros(size // 4, dtype=np.float32),
        {"view": lambda a: a[:], "copy": lambda a: a.copy()},
        [1024, 4096],
        timer=lambda fn: (fn(), 0.5)[1],
    )
    assert [(r["bytes"], r["way"], r["seconds"]) for r in rows] == [
        (1024, "view", 0.5),
        (1024, "copy", 0.5),
        (4096, "view", 0.5),
        (4096, "copy", 0.5),
    ]


def test_refusal_returns_the_message_and_insists_on_a_refusal():
    assert "32-bit mode" in interop.refusal(aligned(4, dtype=np.float64), "jax")
    with pytest.raises(AssertionError, match="expected a refusal"):
        interop.refusal(aligned(4), "torch")


@pytest.mark.parametrize(
    ("value", "words"),
    [(None, "no stream"), (-1, "must not synchronize"), (1, "legacy default"), (2, "per-thread"), (0x7F00, "handle")],
)
def test_describe_stream_names_the_dlpack_stream_conventions(value, words):
    assert words in interop.describe_stream(value)


def test_handoff_outcome_reports_shared_copied_or_failed(monkeypatch):
    assert interop.handoff_outcome(aligned(4), "torch") == "shared"
    assert interop.handoff_outcome(aligned(4, dtype=np.float64), "jax") == (
        "shared" if jax.config.jax_enable_x64 else "copy to float32"
    )
    assert interop.handoff_outcome(torch.arange(4.0), "jax") == "shared"
    monkeypatch.setattr(interop, "route", lambda source, to: ("boom", lambda x: 1 / 0))
    assert interop.handoff_outcome(aligned(4), "torch") == "fails: ZeroDivisionError"


def test_outcome_names_shared_copied_or_failed_with_the_dtype_when_asked():
    host = aligned(4)
    assert interop.outcome(lambda: torch.from_numpy(host), host) == "shared"
    assert interop.outcome(lambda: torch.from_numpy(host), host, with_dtype=True) == "shared as float32"
    assert interop.outcome(lambda: torch.from_numpy(host.astype(np.float64)), host) == "copy to float64"
    assert interop.outcome(lambda: host.view(np.uint16), host, with_dtype=True) == "shared as uint16"
    assert interop.outcome(lambda: np.from_dlpack(object()), host) == "fails: AttributeError"


def test_outcome_in_words_gives_the_dtype_and_sharing_or_the_message_a_reader_sees():
    needs_grad = torch.ones(4, requires_grad=True)
    refused = interop.outcome_in_words(np.from_dlpack, needs_grad)
    assert refused.startswith(("BufferError: ", "RuntimeError: ")) and "detach" in refused
    assert len(refused.split(": ", 1)[1]) <= 70, "the first 70 characters of the message"
    assert interop.outcome_in_words(np.from_dlpack, needs_grad.detach()) == "float32, shares memory: True"
    host = aligned(4)
    assert interop.outcome_in_words(lambda a: a.astype(np.float64), host) == "float64, shares memory: False"

    def silent(_):
        raise KeyError

    assert interop.outcome_in_words(silent, host) == "KeyError", "an error without a message keeps its class"


def test_routes_name_a_call_for_every_pair():
    for source in interop.TARGETS:
        for target in interop.TARGETS:
            if source != target:
                text, call = interop.route(source, target)
                assert "x" in text and callable(call)
    with pytest.raises(ValueError, match="unknown framework"):
        interop.route("cupy", "tensorflow")


def test_routes_to_pytorch_never_leave_the_device_to_chance():
    """``torch.as_tensor(obj)`` without ``device=`` is the call users report silently copying
    (pytorch/pytorch#54139): every route into PyTorch is DLPack or names the device."""
    for source in interop.TARGETS:
        if source != "torch":
            text, _ = interop.route(source, "torch")
            assert text == "torch.from_dlpack(x)" or "device='cuda'" in text, text


def test_routes_to_cudf_keep_nan_as_values():
    """cuDF's default scans for NaN (a wait for the GPU) and masks them: the shared view is asked for."""
    for source in ("cupy", "numba", "torch", "jax"):
        assert "nan_as_null=False" in interop.route(source, "cudf")[0]


def test_a_copy_route_names_the_copy_inside_the_onward_call():
    facts = gpu_facts(framework="cupy", shape=(4,), strides=(8,), itemsize=4, dtype="float32")
    text, _ = interop._copy_route(facts, "cudf")
    assert text == "cudf.Series(cupy.ascontiguousarray(x), nan_as_null=False)"


def test_allow_copy_cannot_invent_a_nan_for_integer_nulls():
    with pytest.raises(ZeroCopyError, match="integers have no NaN"):
        interop._copy_route(gpu_facts(framework="cudf", dtype="int64", itemsize=8, null_count=1), "cupy")


def test_allow_copy_cannot_give_cudf_a_dtype_it_lacks():
    with pytest.raises(ZeroCopyError, match="no float16 columns"):
        interop._copy_route(gpu_facts(dtype="float16", itemsize=2), "cudf")


def test_jax_on_the_cpu_really_copies_a_buffer_that_is_not_64_byte_aligned():
    """The measurement behind the alignment rule (and chapter 3's prose): NumPy promises only 16 bytes."""
    base = aligned(32, alignment=256)
    sixteen_aligned = base[4:]  # starts 16 bytes in
    assert describe(sixteen_aligned).alignment == 16
    assert interop.handoff_outcome(sixteen_aligned, "jax") == "copy to float32"
    assert interop.handoff_outcome(base[16:], "jax") == "shared"  # 64 bytes in


def _race_row(route, non_blocking, blocking):
    free, tied = races.SIDE_STREAMS
    return {"route": route, "handed over": "after it", free: non_blocking, tied: blocking}


def test_changed_by_the_stream_sorts_every_change():
    rows = [
        _race_row("fixed", "10/10 wrong", "0/10 wrong"),
        _race_row("broken", "0/10 wrong", "3/10 wrong"),
        _race_row("refused", "fails: X: no", "0/10 wrong"),
        _race_row("same", "10/10 wrong", "10/10 wrong"),
        _race_row("fewer", "10/10 wrong", "4/10 wrong"),
    ]
    changed = races.changed_by_the_stream(rows)
    assert changed == {
        "wrong only when non-blocking": ["fixed / after it"],
        "wrong only when blocking": ["broken / after it"],
        "otherwise changed": ["refused / after it", "fewer / after it"],
    }


def test_the_race_table_names_both_side_streams():
    assert list(races.SIDE_STREAMS.values()) == [True, False]


def test_breakdown_refuses_mixed_clocks():
    whole = Timing("whole", (1.0,), "wall")
    with pytest.raises(ValueError, match="one clock"):
        breakdown.account(whole, {"part": Timing("part", (0.5,), "cuda-events")})
    with pytest.raises(ValueError, match="at least one part"):
        breakdown.account(whole, {})


def test_breakdown_gives_the_rest_of_the_whole():
    whole = Timing("whole", (1.0, 1.2, 1.1), "wall")
    parts = {"a": Timing("a", (0.3,), "wall"), "b": Timing("b", (0.5,), "wall")}
    rows, rest = breakdown.account(whole, parts)
    assert [row["what"] for row in rows] == ["whole", "a", "b", "not explained by the parts"]
    assert rest == pytest.approx(0.3) and breakdown.largest_part(parts) == "b"
    assert rows[-1]["median"] == "300 ms" and rows[-1]["share of the whole"] == "27%"


def test_parts_that_add_up_to_more_than_the_whole_are_a_row_not_an_error():
    # seen in a workshop rehearsal: five seats on one GPU, the parts timed apart outran the whole collect
    whole = Timing("whole", (1.0,), "wall")
    rows, rest = breakdown.account(whole, {"a": Timing("a", (0.7,), "wall"), "b": Timing("b", (0.5,), "wall")})
    assert rest == pytest.approx(-0.2)
    assert rows[-1]["median"] == "−200 ms: the parts add up to more than the whole"
    assert rows[-1]["share of the whole"] == "−20%"  # the median's minus sign, not ASCII "-"
