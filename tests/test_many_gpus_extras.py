"""support.many_gpus' measuring aids and readers' questions on the CPU: each GPU's utilisation sampled and summarized
(utilisation, timing.utilisation_table), a wider autoencoder and its scoring batch (models), the torchrun program
with two ranks on the Gloo backend (ranks), spilling measured on a CPU worker (spilling), and the scripts that show
where workers compute when a CUDA context came too early (contexts). The GPU parts run in chapter 7."""

from __future__ import annotations

import builtins
import subprocess
import sys
import time
import warnings

import pandas as pd
import pytest

from support.bench import Timing
from support.many_gpus import cluster, contexts, host, models, ranks, recordings, spilling, timing, utilisation
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
