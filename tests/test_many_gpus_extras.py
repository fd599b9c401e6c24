"""support.many_gpus' measuring aids and readers' questions on the CPU: each GPU's utilisation sampled and summarized
(utilisation, timing.utilisation_table), a wider autoencoder and its scoring batch (models), the torchrun program
with two ranks on the Gloo backend (ranks), spilling measured on a CPU worker and its spilled bytes counted
(spilling), and the scripts that show where workers compute when a CUDA context came too early (contexts); the
chapter's bookkeeping, from made-up inputs: the headline's inputs and the read added to them (timing), the clusters
started in a mirrored order and checked at each start (timing, cluster), the fine-tuning effect on a group of
recordings (scoring), and the page drop counted file by file with fincore (host). The GPU parts run in chapter 7."""

from __future__ import annotations

import builtins
import json
import os
import shutil
import subprocess
import sys
import time
import warnings
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from support.bench import Timing
from support.many_gpus import (
    cluster,
    contexts,
    host,
    models,
    ranks,
    recordings,
    scoring,
    spilling,
    timing,
    utilisation,
)
from support.many_gpus.ranking import separation


def test_the_sampler_keeps_every_gpus_samples_and_says_when_nvml_is_missing():
    readings = iter([[100.0, 0.0], [50.0, 0.0], [90.0, 10.0]] + [[95.0, 0.0]] * 1000)
    with utilisation.UtilisationSampler(interval=0.001, read=lambda: next(readings)) as sampler:
        pass
    assert sampler.samples[0][0] == 100.0 and len(sampler.samples) == 2  # one sample at once, even for a short block
    assert sampler.unavailable is None and sampler.seconds >= 0
    summary = utilisation.summarize({0: (100.0, 50.0, 90.0, 95.0), 1: (0.0, 0.0, 10.0, 0.0)})
    assert summary[0] == {"mean": 83.75, "busy share": 0.75, "samples": 4} and summary[1]["busy share"] == 0
    assert utilisation.summarize({0: ()}) == {}
    with pytest.raises(ValueError, match="interval must be positive"):
        utilisation.UtilisationSampler(interval=0)


def test_the_sampler_keeps_the_samples_taken_inside_given_spans_for_every_gpu():
    readings = iter([[0.0, 0.0], [90.0, 5.0], [100.0, 0.0], [0.0, 0.0]] + [[0.0, 0.0]] * 1000)
    clock = iter(range(10_000))  # each sample one "second" after the last
    with utilisation.UtilisationSampler(
        interval=0.001, read=lambda: next(readings), clock=lambda: float(next(clock))
    ) as sampler:
        while len(sampler.times) < 4:
            time.sleep(0.001)
    assert sampler.times[:4] == (0.0, 1.0, 2.0, 3.0)
    assert sampler.within([(0.5, 2.5)]) == {0: (90.0, 100.0), 1: (5.0, 0.0)}  # the same samples for every GPU
    assert sampler.within([(0.5, 1.5), (2.5, 3.5)]) == {0: (90.0, 0.0), 1: (5.0, 0.0)}
    assert sampler.within([(-2.0, -1.0)]) == {0: (), 1: ()}  # nothing inside: no samples, and summarize skips it
    assert utilisation.summarize(sampler.within([])) == {}
    assert utilisation.UtilisationSampler(read=lambda: [1.0]).within([(0.0, 1.0)]) == {}  # never started


def test_without_nvml_the_sampler_records_nothing_and_says_why(monkeypatch):

    real_import = builtins.__import__

    def no_pynvml(name, *args, **kwargs):
        if name == "pynvml":
            raise ImportError("No module named 'pynvml'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pynvml)
    with utilisation.UtilisationSampler() as sampler:
        pass
    assert sampler.samples == {} and "NVML cannot start here" in sampler.unavailable


def _run(placement, samples):
    timings = {stage: Timing(stage, (1.0,), "wall") for stage in timing.STAGES}
    return timing.ScalingRun(placement, timings, {}, 0, None, None, 0, None, utilisation=samples)


def test_utilisation_is_pooled_per_placement_and_tabled_per_gpu():
    one, shared, own = cluster.PLACEMENTS
    runs = [_run(one, {0: (40.0, 60.0), 1: (0.0, 0.0)}), _run(shared, {0: (100.0,), 1: (0.0,)})]
    runs.append(_run(shared, {0: (80.0,), 1: (0.0,)}))
    pooled = timing.pool_runs(runs)
    assert pooled[1].utilisation == {0: (100.0, 80.0), 1: (0.0, 0.0)}
    table = timing.utilisation_table(pooled)
    assert table.loc[("2 workers, 1 GPU", 0)].to_dict() == {"mean": 90.0, "busy share": 0.5, "samples": 2}
    assert table.loc[("1 worker, 1 GPU", 1), "mean"] == 0.0
    assert timing.utilisation_table([_run(own, {})]).empty  # no NVML: no rows


def test_a_wider_model_scores_in_smaller_batches_and_fine_tunes_in_its_own(tmp_path):
    specs = recordings.recording_specs(2, hours=0.03, seed=20)
    paths, _ = recordings.write_recordings(tmp_path, specs)
    narrow = models.train_on_sample(paths[:1], beats_per_recording=100, flag_share=0.05)
    wide = models.train_on_sample(paths[:1], beats_per_recording=100, flag_share=0.05, channels=64, batch_size=32)
    assert (narrow.channels, wide.channels, wide.batch_size) == (32, 64, 32)
    assert narrow.score_batch(176) == models.SCORE_BATCH  # chapter 6's model: a recording at once
    assert wide.score_batch(176) < narrow.score_batch(176) and wide.score_batch(1 << 30) == 1
    with pytest.raises(ValueError, match="even number of channels"):
        models.train_on_sample(paths[:1], channels=3)
    narrow_flops, wide_flops = (models.flops_per_beat(176, c) for c in (32, 64))
    assert 0 < narrow_flops < wide_flops < 4 * narrow_flops + 1e6  # the convolutions grow with channels squared


def test_counting_a_steps_flops_touches_no_gpu(monkeypatch):
    import torch

    def no_gpu(*args, **kwargs):
        raise AssertionError("flops_per_beat touched a GPU's generator")

    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)  # as on the two-GPU host
    monkeypatch.setattr(torch.cuda, "get_rng_state", no_gpu)
    monkeypatch.setattr(torch.cuda, "set_rng_state", no_gpu)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*available devices")  # fork_rng's warning on several GPUs
        assert models.flops_per_beat(176, 32) > 0


def test_torchrun_ranks_score_their_share_each(tmp_path):
    import torch

    specs = recordings.recording_specs(3, hours=0.03, seed=30)
    paths, _ = recordings.write_recordings(tmp_path, specs)
    model = models.train_on_sample(paths[:1], beats_per_recording=100, flag_share=0.05)
    torch.save(model, tmp_path / "model.pt")
    out = tmp_path / "ranks.json"
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2"]
    command += ["-m", "support.many_gpus.ranks", "--model", tmp_path / "model.pt", "--out", out]
    command += ["--epochs", 1, "--on", "cpu", *paths]
    rows = ranks.run_ranks(command, out, timeout=240)
    assert list(rows.index) == [0, 1] and list(rows["recordings"]) == [2, 1]  # every second recording
    assert (rows["beats"] > 0).all() and (rows["seconds"] >= 0).all() and rows["device"].eq("cpu").all()
    assert ranks.span(rows) >= rows["seconds"].max()
    with pytest.raises(RuntimeError, match="torchrun failed"):
        ranks.run_ranks([sys.executable, "-m", "support.many_gpus.ranks", "--model", "m", "--out", "o", "x"], "o")


def test_spilling_is_measured_on_one_worker():
    from distributed import Client

    with cluster.make_cluster("cpu", workers=1, dashboard_address=":0") as started, Client(started) as client:
        case = spilling.spill_case(client, blocks=3, nbytes=2**16, warmup=0, repeat=2)
        assert len(case["timing"].samples) == 2 and case["bytes"] == 3 * 2**16
        assert case["placed"]["host"] >= 3 * 2**16  # a CPU worker keeps its results in host memory
        assert set(case["after passes"]) == {"host", "disk"}
        with pytest.raises(ValueError, match="at least one block"):
            spilling.spill_case(client, blocks=0, nbytes=8)
    assert spilling.block_sum(spilling.make_block(1, nbytes=80)) == pytest.approx(
        spilling.make_block(1, nbytes=80).sum()
    )


def test_a_cpu_workers_spilled_results_count_on_disk(tmp_path):
    from distributed.spill import SpillBuffer

    buffer = SpillBuffer(str(tmp_path), target=3 * 2**16)  # room for about three blocks in memory
    for k in range(6):
        buffer[f"block-{k}"] = np.ones(2**13)  # 64 KiB each
    where = spilling.where_results_live(SimpleNamespace(data=buffer))
    assert where["disk"] > 0 and where["host"] > 0  # some blocks left for the disk, some stayed
    assert where["disk"] + where["host"] == pytest.approx(6 * 2**16, rel=0.05)
    assert spilling.where_results_live(SimpleNamespace(data={"a": np.ones(8)}))["disk"] == 0


def test_the_early_context_scripts_differ_only_at_their_top_level():
    nothing, cupy_array = contexts.script("nothing"), contexts.script("a CuPy array")
    compile(nothing, "nothing", "exec") and compile(cupy_array, "cupy", "exec")
    guard = 'if __name__ == "__main__":'
    assert nothing.split(guard)[1] == cupy_array.split(guard)[1]  # the same client and cluster
    assert "cupy.zeros(1)" in cupy_array.split(guard)[0] and "cupy" not in nothing.split(guard)[0]
    assert "import cudf" in contexts.script("import cudf").split(guard)[0]
    with pytest.raises(ValueError, match="top_level must be one of"):
        contexts.script("import torch")


def test_the_processes_started_with_their_own_environment_keep_nvlink_multicast_off(monkeypatch, tmp_path):
    seen = []

    def run(command, *, env, **_):
        seen.append(env)
        return subprocess.CompletedProcess(command, 1, "", "stopped by the test")

    monkeypatch.setattr(subprocess, "run", run)
    monkeypatch.setenv("NCCL_NVLS_ENABLE", "1")  # the caller's own value is kept
    with pytest.raises(RuntimeError, match="torchrun failed"):
        ranks.run_ranks(["torchrun"], tmp_path / "none.json")
    with pytest.raises(RuntimeError, match="the cluster script failed"):
        contexts.worker_gpus("nothing")
    assert len(seen) == 2
    for env in seen:
        assert env["NCCL_NVLS_ENABLE"] == "1"
        assert env["TORCH_SYMM_MEM_DISABLE_MULTICAST"] == "1" and env["NVSHMEM_DISABLE_NVLS"] == "1"
    assert set(cluster.without_multicast({})) == set(cluster.MULTICAST_OFF)


def test_flushing_a_file_without_the_advice_is_the_drop_s_control(tmp_path):
    path = tmp_path / "a.csv"
    path.write_text("1.0\n2.0\n")
    assert host.drop_from_page_cache(path, advise=False) == 8 and path.read_text() == "1.0\n2.0\n"


def test_the_workers_context_warnings_come_back_beside_their_rows(monkeypatch):
    rows = '[{"pid": 1, "CUDA_VISIBLE_DEVICES": "1,0", "its GPU": 1, "arrays on GPU": 0}]'
    log = (
        "2026-11-26 distributed.worker - INFO - Start worker\n"
        "2026-11-26 dask_cuda.initialize - WARNING - Worker with process ID 1 should have a CUDA context assigned to"
        " device 1, but instead the CUDA context is on device 0\n"
    )

    def run(command, **_):
        return subprocess.CompletedProcess(command, 0, f"ROWS {rows}\n", log)

    monkeypatch.setattr(subprocess, "run", run)
    frame = contexts.worker_gpus("nothing")
    assert list(frame.index) == [1]
    (warning,) = frame.attrs["context warnings"]
    assert "should have a CUDA context assigned to device 1" in warning


def test_separation_is_above_one_only_when_the_whole_group_leads():
    table = pd.DataFrame({"recording": list("abcd"), "share": [0.06, 0.05, 0.02, 0.01]})
    assert separation(table, "share", ["a", "b"]) == pytest.approx(2.5)
    assert separation(table, "share", ["a", "c"]) == pytest.approx(0.02 / 0.05)  # b, outside, beats c
    for group, said in ((list("abcd"), "not all"), (["a", "x"], "lacks: \\['x'\\]"), ([], "not none")):
        with pytest.raises(ValueError, match=said):
            separation(table, "share", group)


def _timed(placement, scoring_on_workers, *, read=(1.0,), scoring_run=(1.0,)):
    """A pooled run whose scoring on the workers, read from disk and whole scoring run took these repeats."""
    timings = {stage: Timing(stage, (1.0,), "wall") for stage in timing.STAGES}
    given = {timing.SCORING: scoring_on_workers, "read from disk": read, "score every recording": scoring_run}
    timings |= {stage: Timing(stage, tuple(seconds), "wall") for stage, seconds in given.items()}
    return timing.ScalingRun(placement, timings, {}, 0, None, None, 0, None)


def test_the_headline_sets_the_second_gpu_against_both_one_gpu_clusters():
    one, shared, own = cluster.PLACEMENTS
    runs = [_timed(one, [5.5, 5.6, 5.8]), _timed(shared, [6.1, 6.2, 6.3]), _timed(own, [2.7, 2.8, 2.9])]
    headline = timing.second_gpu_scoring(runs)
    assert headline.two_gpus and headline.process_gain == pytest.approx(5.6 / 6.2)
    # the claim: the slowest two-GPU repeat against the fastest repeat of either one-GPU cluster
    assert headline.slowest_two_gpus == 2.9 and headline.fastest_one_gpu == 5.5
    assert headline.lines() == [
        "a second process on the same GPU, scoring: 0.90×",
        "the second GPU against two workers on one, scoring: at least 2.1×, median 2.2×, at most 2.3×",
        "the slowest two-GPU repeat against 1 worker, 1 GPU: 1.9×",
        "the slowest two-GPU repeat against 2 workers, 1 GPU: 2.1×",
    ]
    assert timing.second_gpu_scoring(runs[::-1]) == headline  # found by placement, not by position
    faster_shared = [runs[0], _timed(shared, [4.0, 4.1, 4.2]), runs[2]]
    assert timing.second_gpu_scoring(faster_shared).fastest_one_gpu == 4.0  # the faster control is the control


def test_on_one_gpu_the_headline_has_only_the_second_process():
    one, shared, own = cluster.PLACEMENTS
    headline = timing.second_gpu_scoring([_timed(one, [4.0]), _timed(shared, [5.0])])
    assert not headline.two_gpus and headline.lines() == ["a second process on the same GPU, scoring: 0.80×"]
    with pytest.raises(ValueError, match="no two-GPU cluster ran"):
        headline.fastest_one_gpu  # noqa: B018 - the property refuses
    with pytest.raises(ValueError, match="the one-GPU clusters are the controls"):
        timing.second_gpu_scoring([_timed(own, [1.0]), _timed(one, [2.0])])


def test_the_read_is_added_to_the_scoring_as_cautiously_as_the_headline():
    one, shared, own = cluster.PLACEMENTS
    runs = [
        _timed(one, [5.0], read=[0.5, 0.55, 0.6], scoring_run=[6.0, 6.2, 6.4]),
        _timed(shared, [6.0], read=[0.38, 0.4, 0.49], scoring_run=[6.5, 6.5, 6.6]),
        _timed(own, [2.0], read=[0.36, 0.4, 0.41], scoring_run=[3.1, 3.2, 3.3]),
    ]
    added = timing.second_gpu_with_the_read(runs, "read from disk")
    assert added.read_alone == pytest.approx(1.0)  # medians: 0.4 against 0.4
    # the faster one-GPU cluster's fastest read and scoring (one worker: 0.5 + 6.0, not 0.38 + 6.5) over the two
    # GPUs' slowest (0.41 + 3.3)
    assert added.together == pytest.approx(6.5 / 3.71)
    assert added.read_share == pytest.approx(0.4 / 3.6)
    assert added.lines() == [
        "the second GPU, read from disk alone (median): 1.0×",
        "the second GPU, read from disk and scoring added (slowest two-GPU against fastest one-GPU): 1.8×",
        "the read's share of the two on two GPUs (medians): 11.1%",
    ]
    with pytest.raises(ValueError, match="no two-GPU cluster ran"):
        timing.second_gpu_with_the_read(runs[:2], "read from disk")


def test_clusters_start_in_a_mirrored_order_and_each_start_is_checked_against_its_placement():
    one, shared, own = cluster.PLACEMENTS
    assert timing.mirrored_order(cluster.PLACEMENTS) == [one, shared, own, own, shared, one]
    assert timing.mirrored_order(p for p in cluster.PLACEMENTS if p.gpus <= 1) == [one, shared, shared, one]
    two_on_one = pd.DataFrame({"CUDA_VISIBLE_DEVICES": ["0,1", "0,1"], "CPU cores": ["0-31", "0-15"]})
    assert cluster.describe_start(shared, two_on_one) == (
        "2 workers, 1 GPU: a worker on GPU 0 may use 32 cores, a worker on GPU 0 may use 16 cores; "
        "16 cores open to every worker"
    )
    with pytest.raises(ValueError, match="2 workers, 2 GPUs was asked for, but the workers' first GPUs are"):
        cluster.describe_start(own, two_on_one)  # both workers on GPU 0: not two GPUs
    with pytest.raises(ValueError, match="did not start as placed"):
        cluster.describe_start(one, two_on_one)  # one worker asked for, two came


def test_the_fine_tuning_effect_is_one_line_per_group_of_recordings():
    quality = pd.DataFrame(
        {
            "recording": ["a", "b", "c", "d"],
            "ectopic: global model": [0.60, 0.70, 0.50, 0.80],
            "ectopic: fine-tuned model": [0.70, 0.65, 0.60, 0.80],
        }
    )
    assert scoring.fine_tuning_effect(quality, "ectopic-heavy") == (
        "ectopic-heavy: median +0.050, from -0.050 to +0.100; lowered on 1 of 4"
    )
    assert scoring.fine_tuning_effect(quality.iloc[[1]], "one").endswith("from -0.050 to -0.050; lowered on 1 of 1")
    with pytest.raises(ValueError, match="0 recordings"):
        scoring.fine_tuning_effect(quality.iloc[[]], "none")
    unjudged = quality.assign(**{"ectopic: global model": [0.6, float("nan"), 0.5, 0.8]})
    with pytest.raises(ValueError, match="1 without an ectopic AUROC"):
        scoring.fine_tuning_effect(unjudged, "light")


class FakeFincore:
    """Answers as ``fincore --json --bytes --output RES,FILE`` would, each call from the next of ``answers`` (the
    share of every file resident), and keeps the commands it was given."""

    def __init__(self, *answers):
        self.answers, self.commands = list(answers), []

    def __call__(self, command, **_):
        self.commands.append(command)
        share = self.answers.pop(0)
        files = command[command.index("RES,FILE") + 1 :]
        rows = [{"res": int(share * os.path.getsize(name)), "file": name} for name in files]
        return subprocess.CompletedProcess(command, 0, json.dumps({"fincore": rows}), "")


def test_the_page_drop_is_counted_file_by_file_beside_the_flush_alone(tmp_path):
    paths = [tmp_path / "a.csv", tmp_path / "b.csv"]
    paths[0].write_bytes(b"1" * 4096)
    paths[1].write_bytes(b"2" * 8192)
    fincore = FakeFincore(1.0, 1.0, 0.25)  # read in whole, still whole when flushed, a quarter left when dropped
    drop = host.measure_page_drop(paths, run=fincore)
    assert drop == host.PageDrop(size=12288, read_in=12288, flushed=12288, dropped=3072)
    assert drop.fell_when_flushed == 0 and drop.fell_when_dropped == 9216
    assert len(fincore.commands) == 3 and all("--bytes" in command for command in fincore.commands)
    assert fincore.commands[0][-2:] == [str(p) for p in paths]  # each file by its own name
    # a flush that let the pages go would show as a fall of the control, and a failed drop as no fall
    failed = host.measure_page_drop(paths, run=FakeFincore(1.0, 0.5, 0.5))
    assert failed.fell_when_flushed == 6144 and failed.fell_when_dropped == 0
    with pytest.raises(ValueError, match="at least one file"):
        host.measure_page_drop([])


def test_fincore_missing_or_failing_is_said_plainly(tmp_path, monkeypatch):
    path = tmp_path / "a.csv"
    path.write_bytes(b"1" * 100)
    assert host.resident_bytes([]) == {}

    def fails(command, **_):
        return subprocess.CompletedProcess(command, 1, "", "fincore: failed to open: x.csv: No such file")

    with pytest.raises(RuntimeError, match="No such file"):
        host.resident_bytes([path], run=fails)

    def forgets(command, **_):
        return subprocess.CompletedProcess(command, 0, json.dumps({"fincore": []}), "")

    with pytest.raises(RuntimeError, match="reported no residency for"):
        host.resident_bytes([path], run=forgets)
    monkeypatch.setattr(host.shutil, "which", lambda name: None)  # no fincore: the system call it makes counts
    monkeypatch.setattr(host, "mincore_bytes", lambda p: 12345)
    assert host.resident_bytes([path]) == {str(path): 12345}


def test_the_system_call_counts_a_file_s_pages_as_fincore_does(tmp_path):
    if host.filesystem_of(tmp_path) in ("tmpfs", "ramfs"):
        pytest.skip(f"{tmp_path} is on {host.filesystem_of(tmp_path)}: a file there lives in memory, nothing drops")
    path = tmp_path / "recording.csv"
    path.write_bytes(os.urandom(3 * 2**20))
    path.read_bytes()
    host.drop_from_page_cache(path, advise=False)
    assert host.mincore_bytes(path) >= 0.9 * 3 * 2**20  # read in, flushed: still cached
    if shutil.which("fincore") is not None:
        assert host.resident_bytes([path]) == {str(path): host.mincore_bytes(path)}
    host.drop_from_page_cache(path)
    assert host.mincore_bytes(path) < 3 * 2**20 / 2  # dropped
    if shutil.which("fincore") is not None:
        assert host.resident_bytes([path]) == {str(path): host.mincore_bytes(path)}
    empty = tmp_path / "empty.csv"
    empty.touch()
    assert host.mincore_bytes(empty) == 0


def test_a_real_file_leaves_the_page_cache_when_dropped_and_stays_when_only_flushed(tmp_path):
    if host.filesystem_of(tmp_path) in ("tmpfs", "ramfs"):  # without fincore, its system call counts
        pytest.skip(f"{tmp_path} is on {host.filesystem_of(tmp_path)}: a file there lives in memory, nothing drops")
    path = tmp_path / "recording.csv"
    path.write_bytes(os.urandom(4 * 2**20))
    for _ in range(2):  # the second time, the file comes back into the cache only by measure_page_drop's read
        drop = host.measure_page_drop([path])
        assert drop.size == 4 * 2**20 and drop.read_in >= 0.9 * drop.size
        assert drop.fell_when_dropped >= drop.size / 2 and drop.fell_when_flushed < drop.size / 2
    assert host.mincore_bytes(path) < drop.size / 2  # the kernel's own answer, asked again: still out of the cache
