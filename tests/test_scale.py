"""support.many_gpus.scale on the CPU: recordings written, scored beat by beat (and by a model fine-tuned on each) on a
two-process distributed.LocalCluster, judged against their truth, summarized where they live and ranked, every beat
ranked across recordings by a shuffle, read cold and warm, and timed on the chapter's three clusters (two workers
sharing one device among them). The same code runs on dask_cuda.LocalCUDACluster in chapter 7."""

from __future__ import annotations

import contextlib

import numpy as np
import pandas as pd
import psutil  # noqa: TID253 - these tests need it: without it they cannot run
import pytest

from support import traffic
from support.bench import Timing
from support.ecg import pipeline, synthetic
from support.ecg.reading import Recording
from support.many_gpus import scale

# A two-process Dask cluster per module, and models trained on the CPU: minutes, the cluster's start included.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def recordings(tmp_path_factory):
    specs = scale.recording_specs(3, hours=0.05, seed=10)  # 3 minutes each
    return scale.write_recordings(tmp_path_factory.mktemp("recordings"), specs)


@pytest.fixture(scope="module")
def model(recordings):
    paths, _ = recordings
    return scale.train_on_sample(paths[:2], beats_per_recording=150, flag_share=0.05)


def test_recordings_are_written_with_their_metadata_and_truth(recordings):
    paths, metadata = recordings
    assert [p.name for p in paths] == ["recording-010.csv", "recording-011.csv", "recording-012.csv"]
    assert list(metadata["recording"]) == [p.stem for p in paths]
    assert metadata.loc[0, "ectopic_rate"] == 0.06 and (metadata["true normal"] > 100).all()
    assert all(scale.truth_path(p).exists() for p in paths)


def test_the_global_model_flags_the_share_it_was_asked_for(model):
    assert model.trained_on == 300 and model.fs == 250.0
    assert next(model.model.parameters()).device.type == "cpu"  # it travels between processes


def test_one_recording_becomes_a_table_of_scored_beats(recordings, model):
    paths, metadata = recordings
    table = scale.beat_table(paths[0], model)
    assert tuple(table.columns) == scale.BEAT_COLUMNS
    true_beats = metadata.loc[0, [f"true {kind}" for kind in synthetic.KINDS.values()]].sum()
    assert abs(len(table) + 1 - true_beats) <= 0.05 * true_beats
    assert (table["recording"] == "recording-010").all() and table["time_s"].is_monotonic_increasing
    assert (table["tuned_score"] == table["score"]).all()  # nothing fine-tuned: the global model's scores
    assert set(table["flagged"]) <= {0.0, 1.0} and 0 < table["premature"].mean() < 0.5
    assert ((table["time_s"] * 250).round() == table["sample"]).all()
    quality = scale.recording_quality(table, paths[0].parent)
    assert quality["recording"] == "recording-010" and quality["beats"] == len(table)
    assert quality["anomalies"] > 0 and 0 <= quality["precision_at_rate"] <= 1
    # chapter 6's measures, per recording: every kind present gets its AUROC against the normal beats
    assert {"auroc", "auroc ectopic vs normal", "auroc noise vs normal"} <= set(quality)
    assert quality["auroc noise vs normal"] > 0.7  # a model trained on 300 beats still sees loud artefact
    # each scorer's AUROC of ectopic against normal beats; without fine-tuning, the global model's twice
    assert quality["ectopic: global model"] == quality["ectopic: fine-tuned model"]
    assert quality["ectopic: RR prematurity"] > 0.8  # the rhythm alone: chapter 6's control


def test_a_model_fine_tuned_on_a_recording_scores_it_with_weights_of_its_own(recordings, model):
    import torch

    paths, _ = recordings
    recording = scale.read_recording(paths[0])
    before = [w.clone() for w in model.model.parameters()]
    tuned = scale.score_recording(recording, model, fine_tune_epochs=2)
    assert all(torch.equal(a, b) for a, b in zip(before, model.model.parameters(), strict=True))  # global untouched
    assert not np.allclose(tuned["tuned_score"], tuned["score"])
    again = scale.score_recording(recording, model, fine_tune_epochs=2)
    pd.testing.assert_frame_equal(tuned, again)  # same seed, same model
    beats = pipeline.to_torch(pipeline.find_beats(recording.signal, pipeline.PipelineConfig(progress=False)).matrix)
    one = scale.fine_tune(model, beats, epochs=1)
    assert any(not torch.equal(a, b) for a, b in zip(one.parameters(), model.model.parameters(), strict=True))
    with pytest.raises(ValueError, match="at least one epoch"):
        scale.fine_tune(model, beats, epochs=0)


def test_the_traffic_of_a_recording_is_metered_stage_by_stage(recordings, model, monkeypatch):

    class FakeMeter:  # the real one needs CUDA's profiler; this one notes the stages it was asked to record
        def __init__(self):
            self.stages = {}

        @contextlib.contextmanager
        def stage(self, name):
            yield
            self.stages[name] = traffic.Copies()

    monkeypatch.setattr(traffic, "TrafficMeter", FakeMeter)
    paths, _ = recordings
    stages = scale.beat_table_traffic(paths[0], model, on="cpu")
    assert list(stages) == ["read", "beats", "score", "fine-tune", "table"]


def test_a_recording_without_truth_cannot_be_judged(recordings, model, tmp_path):
    paths, _ = recordings
    copy = tmp_path / "copy.csv"
    copy.write_bytes(paths[1].read_bytes())
    table = scale.beat_table(copy, model)
    with pytest.raises(ValueError, match="copy: no truth file copy.truth.npz in"):
        scale.recording_quality(table, tmp_path)


@pytest.fixture(scope="module")
def client():
    """One two-worker CPU cluster for the module's tests (starting one takes seconds)."""
    from distributed import Client

    with scale.make_cluster("cpu", workers=2) as cluster, Client(cluster) as connected:
        yield connected


def test_two_workers_score_summarize_and_rank_the_recordings(recordings, model, client):
    from distributed import get_task_stream, wait

    paths, metadata = recordings
    assert len(scale.worker_devices(client)) == 2
    with get_task_stream(client) as stream:
        tables = client.map(scale.beat_table, [str(p) for p in paths], model=model, pure=False)
        wait(tables)
    summaries, gathered, sent = scale.summaries_and_bytes(client, tables)
    assert sent == gathered < 2**12  # a few numbers per recording came back, and no beat moved
    ranking = scale.rank_recordings(summaries, metadata)
    assert tuple(ranking.columns) == scale.RANK_COLUMNS
    assert ranking["premature_share"].is_monotonic_decreasing
    by_model = scale.rank_recordings(summaries, metadata, by="flagged_share")
    assert by_model["flagged_share"].is_monotonic_decreasing
    direct = scale.beat_table(paths[2], model)
    row = ranking.set_index("recording").loc["recording-012"]
    assert row["beats"] == len(direct) and row["flagged_share"] == pytest.approx(direct["flagged"].mean())
    assert row["mean_bpm"] == pytest.approx(60 / direct["rr_s"].mean())
    with pytest.raises(ValueError, match="without a summary or metadata: \\['recording-012'\\]"):
        scale.rank_recordings(summaries[:2], metadata)
    with pytest.raises(ValueError, match="a recording summarized twice"):
        scale.rank_recordings([*summaries, summaries[0]], metadata)
    qualities = client.gather(client.map(scale.recording_quality, tables, folder=str(paths[0].parent)))
    assert [q["recording"] for q in qualities] == [p.stem for p in paths]
    figure = scale.task_stream_figure(stream.data)
    assert [t.get_text() for t in figure.axes[0].get_yticklabels()][:1] == ["worker 0"]
    assert "beat_table" in [t.get_text() for t in figure.axes[0].get_legend().get_texts()]


def test_every_beat_is_ranked_across_recordings_by_a_shuffle(recordings, model, client):
    from distributed import wait

    paths, _ = recordings
    tables = client.map(scale.beat_table, [str(p) for p in paths], model=model, pure=False)
    wait(tables)
    before = scale.bytes_between_workers(client)
    top = scale.rank_every_beat(tables, top=0.05)
    assert scale.bytes_between_workers(client) > before  # beat rows changed workers
    assert tuple(top.columns) == scale.TOP_COLUMNS and top["in_top"].is_monotonic_decreasing
    every = pd.concat(client.gather(tables), ignore_index=True)  # the same count, in one process
    best = every.nlargest(int(np.ceil(0.05 * len(every))), "score")
    in_top = best["recording"].value_counts().reindex(every["recording"].unique(), fill_value=0)
    assert top.set_index("recording")["in_top"].to_dict() == in_top.to_dict()
    assert top["beats"].sum() == len(every)
    with pytest.raises(ValueError, match="top must be a share"):
        scale.rank_every_beat(tables, top=1.0)


def test_the_three_clusters_are_timed_stage_by_stage(recordings, model, client):
    paths, metadata = recordings
    run = scale.measure_stages(client, paths, model, metadata, warmup=0, repeat=1)
    assert run.workers == 2 and run.placement == scale.Placement(2) and list(run.timings) == list(scale.STAGES)
    assert run.timings["  read: on the workers"].median <= run.timings["read from the page cache"].median
    assert run.timings["  score: on the workers"].median <= run.timings["score every recording"].median
    # the reads were dealt out 2 + 1, and each recording was scored where it was read
    assert run.load.loc["read", "tasks"].to_dict() == {"worker 0": 2, "worker 1": 1}
    assert run.load.loc["score", "tasks"].to_dict() == {"worker 0": 2, "worker 1": 1}
    # the summaries are all that the workers sent; the global rank's shuffle moves beat rows
    assert run.sent["rank: summaries gathered"] == run.gathered < run.sent["rank: every beat (shuffle)"]
    assert run.ranking["premature_share"].is_monotonic_decreasing
    assert run.top["beats"].sum() == run.ranking["beats"].sum()
    warm_only = scale.measure_stages(client, paths, model, metadata, warmup=0, repeat=1, cold=False)
    assert list(warm_only.timings) == list(scale.STAGES[1:])  # no read from disk where nothing can be dropped
    assert "read from disk" not in scale.scaling_table([run, warm_only]).index


def _timings(seconds):
    return {stage: Timing(stage, tuple(seconds), "wall") for stage in scale.STAGES}


def _run(placement, seconds, sent=0):
    return scale.ScalingRun(
        placement, _timings(seconds), dict.fromkeys(scale.STAGES[5:], sent), 100, None, None, 1000, None
    )


def test_the_second_gpu_is_credited_only_as_far_as_the_repeats_go():
    one, shared, own = scale.PLACEMENTS
    assert [p.label for p in scale.PLACEMENTS] == ["1 worker, 1 GPU", "2 workers, 1 GPU", "2 workers, 2 GPUs"]
    assert (one.gpus, shared.gpus, own.gpus) == (1, 1, 2)
    runs = [_run(one, [4.0, 4.2, 4.4]), _run(shared, [2.0, 2.4, 3.0]), _run(own, [1.0, 1.2, 1.5], sent=2048)]
    speedup = scale.second_gpu_speedup(runs[1], runs[2], "score every recording")
    assert speedup == pytest.approx({"at least": 2.0 / 1.5, "median": 2.0, "at most": 3.0})
    with pytest.raises(ValueError, match="as many workers on fewer GPUs"):
        scale.second_gpu_speedup(runs[2], runs[1], "score every recording")
    with pytest.raises(ValueError, match="as many workers on fewer GPUs"):
        scale.second_gpu_speedup(runs[0], runs[2], "score every recording")
    table = scale.scaling_table(runs)
    assert list(table.columns) == [
        "1 worker, 1 GPU",
        "2 workers, 1 GPU",
        "2 workers, 2 GPUs",
        "second GPU",
        "sent between workers (2 workers, 2 GPUs)",
    ]
    assert list(table["second GPU"]) == ["2.0×"] * len(scale.STAGES)
    assert table.loc["rank: every beat (shuffle)"].iloc[-1] == "2.00 KiB" and table.loc["read from disk"].iloc[-1] == ""
    one_gpu = scale.scaling_table(runs[:2])  # no two-GPU cluster: no second-GPU column
    assert list(one_gpu.columns) == ["1 worker, 1 GPU", "2 workers, 1 GPU", "sent between workers (2 workers, 1 GPU)"]
    spread = scale.spread_table(runs, "score every recording")
    assert spread.loc["2 workers, 1 GPU"].to_dict() == {"repeats": 3, "fastest": 2.0, "median": 2.4, "slowest": 3.0}
    with pytest.raises(ValueError, match="3 workers cannot be shared 2 to a GPU"):
        scale.Placement(3, workers_per_gpu=2)


def test_runs_of_a_mirrored_order_are_pooled_by_placement():
    one, shared, own = scale.PLACEMENTS
    order = [_run(one, [4.0]), _run(shared, [2.0, 2.2]), _run(own, [1.0]), _run(own, [1.4]), _run(shared, [3.0])]
    pooled = scale.pool_runs(order)
    assert [run.placement for run in pooled] == [one, shared, own]  # in the order each first ran
    assert [run.starts for run in pooled] == [1, 2, 2]
    assert pooled[1].timings["read from disk"].samples == (2.0, 2.2, 3.0)  # both starts' repeats
    assert pooled[1] is not order[4] and pooled[1].gathered == order[4].gathered
    assert scale.spread_table(pooled, "read from disk").loc["2 workers, 2 GPUs", "repeats"] == 2
    with pytest.raises(ValueError, match="no runs to pool"):
        scale.pool_runs([])


def test_workers_sharing_a_gpu_share_its_memory_limits():
    assert scale.shared_limits(2, 2) == {
        "memory_limit": 0.5,
        "device_memory_limit": 0.4,
        "rmm_maximum_pool_size": 0.45,
    }
    assert scale.shared_limits(4, 2, kind="cpu") == {"memory_limit": 0.25}
    with pytest.raises(ValueError, match="cannot be shared"):
        scale.shared_limits(3, 2)
    assert scale.describe_cores({0, 1, 2, 3, 8, 10, 11}) == "0-3,8,10-11"
    assert scale.describe_cores([]) == "(none)" and scale.describe_cores({5}) == "5"


def test_two_workers_can_share_one_device():
    from distributed import Client

    # a port of its own for the scheduler's HTTP server: the module's cluster holds the default one
    shared = scale.make_cluster("cpu", workers=2, workers_per_gpu=2, dashboard_address=":0")
    with shared as cluster, Client(cluster) as connected:
        assert list(cluster.worker_spec) == [0, "0-1"]  # one started, one copied beside it
        assert len(connected.scheduler_info()["workers"]) == 2
        limits = {info["memory_limit"] for info in connected.scheduler_info()["workers"].values()}
        assert len(limits) == 1 and 0 < limits.pop() <= 0.51 * psutil.virtual_memory().total  # divided
        cores = scale.worker_devices(connected)["CPU cores"]
        assert len(set(cores)) == 1  # both workers report the cores they run on, and they are the same
    with pytest.raises(ValueError, match="at least one worker per device"):
        scale.share_each_worker_s_device(None, 0)
    with pytest.raises(ValueError, match="give workers= with workers_per_gpu="):
        scale.make_cluster("gpu", workers_per_gpu=2)


def test_a_file_is_read_cold_after_its_pages_are_dropped(tmp_path, monkeypatch):
    path = tmp_path / "a.csv"
    path.write_text("1.0\n2.0\n")  # dirty pages: fsync-ed before they are dropped
    assert scale.drop_from_page_cache(path) == 8 and path.read_text() == "1.0\n2.0\n"
    with pytest.raises(FileNotFoundError):
        scale.drop_from_page_cache(tmp_path / "missing.csv")
    dropped, ran = [], []
    monkeypatch.setattr(scale, "drop_from_page_cache", dropped.append)
    timing = scale.time_cold(lambda: ran.append(len(dropped)), ["a", "b"], label="cold", warmup=1, repeat=3)
    assert len(timing.samples) == 3 and timing.clock == "wall"
    assert ran == [2, 4, 6, 8]  # every file dropped before every call, the warm-up's too


def test_the_page_cache_and_the_file_system_are_read_from_the_kernel(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:  100 kB\nCached:    2048 kB\nSwapCached: 0 kB\n")
    assert scale.page_cache_bytes(meminfo) == 2048 * 1024
    assert scale.page_cache_bytes() > 0  # this machine's
    meminfo.write_text("MemTotal:  100 kB\n")
    with pytest.raises(ValueError, match="no Cached line"):
        scale.page_cache_bytes(meminfo)
    mounts = tmp_path / "mounts"
    mounts.write_text("overlay / overlay rw 0 0\ntmpfs /scratch tmpfs rw 0 0\n/dev/sda1 /scratch/disk ext4 rw 0 0\n")
    assert scale.filesystem_of("/scratch/a.csv", mounts) == "tmpfs"
    assert scale.filesystem_of("/scratch/disk/a.csv", mounts) == "ext4"  # the longest mount point
    assert scale.filesystem_of("/scratchy/a.csv", mounts) == "overlay"  # a prefix of the name is not a parent
    assert scale.filesystem_of(tmp_path) != "unknown"  # this machine's


def test_ucx_is_offered_only_where_its_wheels_are():
    assert scale.available_transports(lambda name: None) == ["tcp"]
    assert scale.available_transports(lambda name: object()) == ["tcp", "ucx"]
    assert scale.available_transports(lambda name: object() if name == "ucxx" else None) == ["tcp"]


def test_each_worker_reads_its_share_and_the_recordings_stay_there(recordings, model, client):
    from distributed import wait

    paths, _ = recordings
    assert scale.recordings_per_worker(paths, ["b", "a"]) == {"a": [str(paths[0]), str(paths[2])], "b": [str(paths[1])]}
    with pytest.raises(ValueError, match="the cluster has no workers"):
        scale.recordings_per_worker(paths, [])
    stealing = client.run_on_scheduler(lambda dask_scheduler: "stealing" in dask_scheduler.extensions)
    assert not stealing  # a task stays where its recording is
    read = scale.read_everywhere(client, paths)
    wait(read)
    holders = client.who_has(read)
    workers = sorted(client.scheduler_info()["workers"])
    assert [holders[f.key] for f in read] == [(workers[0],), (workers[1],), (workers[0],)]
    assert [r.source for r in client.gather(read)] == [str(p) for p in paths]
    tables = scale.score_everywhere(client, read, model)
    wait(tables)
    assert client.who_has(tables)[tables[1].key] == (workers[1],)  # scored where it was read
    pd.testing.assert_frame_equal(tables[2].result(), scale.beat_table(paths[2], model))
    before = scale.bytes_between_workers(client)  # a scoring pinned away from its recording fetches it
    wait(scale.score_everywhere(client, [read[1]], model, workers=[workers[0]]))
    samples = read[1].result().signal.nbytes
    assert samples <= scale.bytes_between_workers(client) - before < 2 * samples + 2**16


def test_dask_counts_a_recordings_samples():
    from dask.sizeof import sizeof

    samples = np.zeros(1000, dtype=np.float32)
    assert sizeof(Recording(samples, "a.csv")) == scale.recording_size(Recording(samples, "a.csv")) == 4000


def test_task_names_and_an_empty_stream():
    assert scale._task_name(("beat_table-3f2a9c", 0)) == "beat_table"
    assert scale._task_name("beat_table-a0890c92-0308-4d8d-a294-7ff50c5aa5bb-3") == "beat_table"
    assert scale._task_name("finalize-hlgfinalizecompute-1a2b") == "finalize-hlgfinalizecompute"
    assert scale._task_name("write_recording") == "write_recording"
    with pytest.raises(ValueError, match="task stream is empty"):
        scale.task_stream_figure([])
    with pytest.raises(ValueError, match="no computation"):
        scale.task_stream_figure([{"worker": "w", "key": "x-1", "startstops": [{"action": "transfer"}]}])
    stream = [
        {"worker": "a", "key": "f-1", "startstops": [{"action": "compute", "start": 10.0, "stop": 12.0}]},
        {
            "worker": "b",
            "key": "f-2",
            "startstops": [
                {"action": "transfer", "start": 9.0, "stop": 9.5},
                {"action": "compute", "start": 11.0, "stop": 13.5},
            ],
        },
    ]
    assert scale.busy_span(stream) == 3.5  # the transfer before the first computation does not count
    load = scale.worker_load(stream)
    assert load.to_dict("index") == {
        "worker 0": {"tasks": 1, "median task": 2.0, "busy": 2.0},
        "worker 1": {"tasks": 1, "median task": 2.5, "busy": 2.5},
    }
    stream.append({"worker": "a", "key": "g-3", "startstops": [{"action": "compute", "start": 12.0, "stop": 12.5}]})
    assert scale.worker_load(stream).loc["worker 0", "tasks"] == 2
    assert scale.worker_load(stream, function="g").to_dict("index") == {
        "worker 0": {"tasks": 1, "median task": 0.5, "busy": 0.5}
    }
    with pytest.raises(ValueError, match="ran no 'h'"):
        scale.worker_load(stream, function="h")


def test_the_cluster_diagram_draws_one_box_per_worker_on_its_gpu():
    texts = [t.get_text() for t in scale.cluster_diagram(scale.Placement(3)).axes[0].texts]
    assert sum(t.startswith("worker ") for t in texts) == 3 and "shuffle" in texts
    assert any(t.startswith("GPU 2\n") for t in texts)
    shared = [t.get_text() for t in scale.cluster_diagram(scale.Placement(2, 2)).axes[0].texts]
    assert sum(t.startswith("GPU 0, shared by 2 workers") for t in shared) == 2
    assert not any(t.startswith("GPU 1") for t in shared)
    assert not any("whichever worker" in t for t in texts + shared)  # reads are pinned, no stealing


def test_bad_requests_are_refused_with_what_to_do(recordings):
    paths, _ = recordings
    with pytest.raises(ValueError, match="at least one recording"):
        scale.recording_specs(0, hours=1)
    with pytest.raises(ValueError, match="kind must be 'gpu' or 'cpu'"):
        scale.make_cluster("tpu")
    with pytest.raises(ValueError, match="on must be 'gpu' or 'cpu'"):
        scale.write_recording(scale.RecordingSpec(1, 0.01), paths[0].parent, on="tpu")
    with pytest.raises(ValueError, match="flag_share must lie strictly between 0 and 1"):
        scale.train_on_sample(paths[:1], flag_share=1.5)
