"""support.many_gpus on the CPU: recordings written (recordings), scored beat by beat and by a model fine-tuned on each
(models, scoring) on a two-process distributed.LocalCluster (cluster), judged against their truth, summarized where
they live and ranked, every beat ranked across recordings by a shuffle (ranking), read cold and warm (host), and
timed on the chapter's three clusters (timing, task_stream; two workers sharing one device among them), and drawn
(figures). The same code runs on dask_cuda.LocalCUDACluster in chapter 7."""

from __future__ import annotations

import contextlib
import itertools
from types import SimpleNamespace as Mount

import numpy as np
import pandas as pd
import psutil  # noqa: TID253 - these tests need it: without it they cannot run
import pytest

from support import traffic
from support.bench import Timing
from support.ecg import pipeline, synthetic
from support.ecg.reading import Recording
from support.many_gpus import (
    cluster,
    figures,
    host,
    models,
    ranking,
    recordings,
    scoring,
    task_stream,
    timing,
    utilisation,
)

# A two-process Dask cluster per module, and models trained on the CPU: minutes, the cluster's start included.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def written(tmp_path_factory):
    specs = recordings.recording_specs(3, hours=0.05, seed=10)  # 3 minutes each
    return recordings.write_recordings(tmp_path_factory.mktemp("recordings"), specs)


@pytest.fixture(scope="module")
def model(written):
    paths, _ = written
    return models.train_on_sample(paths[:2], beats_per_recording=150, flag_share=0.05)


def test_recordings_are_written_with_their_metadata_and_truth(written):
    paths, metadata = written
    assert [p.name for p in paths] == ["recording-010.csv", "recording-011.csv", "recording-012.csv"]
    assert list(metadata["recording"]) == [p.stem for p in paths]
    assert metadata.loc[0, "ectopic_rate"] == 0.06 and (metadata["true normal"] > 100).all()
    assert all(recordings.truth_path(p).exists() for p in paths)


def test_the_global_model_flags_the_share_it_was_asked_for(model):
    assert model.trained_on == 300 and model.fs == 250.0
    assert next(model.model.parameters()).device.type == "cpu"  # it travels between processes


def test_one_recording_becomes_a_table_of_scored_beats(written, model):
    paths, metadata = written
    table = scoring.beat_table(paths[0], model)
    assert tuple(table.columns) == scoring.BEAT_COLUMNS
    true_beats = metadata.loc[0, [f"true {kind}" for kind in synthetic.KINDS.values()]].sum()
    assert abs(len(table) + 1 - true_beats) <= 0.05 * true_beats
    assert (table["recording"] == "recording-010").all() and table["time_s"].is_monotonic_increasing
    assert (table["tuned_score"] == table["score"]).all()  # nothing fine-tuned: the global model's scores
    assert set(table["flagged"]) <= {0.0, 1.0} and 0 < table["premature"].mean() < 0.5
    assert ((table["time_s"] * 250).round() == table["sample"]).all()
    quality = scoring.recording_quality(table, paths[0].parent)
    assert quality["recording"] == "recording-010" and quality["beats"] == len(table)
    assert quality["anomalies"] > 0 and 0 <= quality["precision_at_rate"] <= 1
    # chapter 6's measures, per recording: every kind present gets its AUROC against the normal beats
    assert {"auroc", "auroc ectopic vs normal", "auroc noise vs normal"} <= set(quality)
    assert quality["auroc noise vs normal"] > 0.7  # a model trained on 300 beats still sees loud artefact
    # each scorer's AUROC of ectopic against normal beats; without fine-tuning, the global model's twice
    assert quality["ectopic: global model"] == quality["ectopic: fine-tuned model"]
    assert quality["ectopic: RR prematurity"] > 0.8  # the rhythm alone: chapter 6's control


def test_a_model_fine_tuned_on_a_recording_scores_it_with_weights_of_its_own(written, model):
    import torch

    paths, _ = written
    recording = recordings.read_recording(paths[0])
    before = [w.clone() for w in model.model.parameters()]
    tuned = scoring.score_recording(recording, model, fine_tune_epochs=2)
    assert all(torch.equal(a, b) for a, b in zip(before, model.model.parameters(), strict=True))  # global untouched
    assert not np.allclose(tuned["tuned_score"], tuned["score"])
    again = scoring.score_recording(recording, model, fine_tune_epochs=2)
    pd.testing.assert_frame_equal(tuned, again)  # same seed, same model
    beats = pipeline.to_torch(pipeline.find_beats(recording.signal, pipeline.PipelineConfig(progress=False)).matrix)
    one = models.fine_tune(model, beats, epochs=1)
    assert any(not torch.equal(a, b) for a, b in zip(one.parameters(), model.model.parameters(), strict=True))
    with pytest.raises(ValueError, match="at least one epoch"):
        models.fine_tune(model, beats, epochs=0)


def test_the_traffic_of_a_recording_is_metered_stage_by_stage(written, model, monkeypatch):

    class FakeMeter:  # the real one needs CUDA's profiler; this one notes the stages it was asked to record
        def __init__(self):
            self.stages = {}

        @contextlib.contextmanager
        def stage(self, name):
            yield
            self.stages[name] = traffic.Copies()

    monkeypatch.setattr(scoring, "TrafficMeter", FakeMeter)  # where beat_table_traffic finds it
    paths, _ = written
    stages = scoring.beat_table_traffic(paths[0], model, on="cpu")
    assert list(stages) == ["read", "beats", "score", "fine-tune", "table"]


def test_a_recording_without_truth_cannot_be_judged(written, model, tmp_path):
    paths, _ = written
    copy = tmp_path / "copy.csv"
    copy.write_bytes(paths[1].read_bytes())
    table = scoring.beat_table(copy, model)
    with pytest.raises(ValueError, match="copy: no truth file copy.truth.npz in"):
        scoring.recording_quality(table, tmp_path)


@pytest.fixture(scope="module")
def client():
    """One two-worker CPU cluster for the module's tests (starting one takes seconds)."""
    from distributed import Client

    with cluster.make_cluster("cpu", workers=2) as started, Client(started) as connected:
        yield connected


def test_two_workers_score_summarize_and_rank_the_recordings(written, model, client):
    from distributed import get_task_stream, wait

    paths, metadata = written
    assert len(cluster.worker_devices(client)) == 2
    with get_task_stream(client) as stream:
        tables = client.map(scoring.beat_table, [str(p) for p in paths], model=model, pure=False)
        wait(tables)
    summaries, gathered, sent = ranking.summaries_and_bytes(client, tables)
    assert sent == gathered < 2**12  # a few numbers per recording came back, and no beat moved
    ranked = ranking.rank_recordings(summaries, metadata)
    assert tuple(ranked.columns) == ranking.RANK_COLUMNS
    assert ranked["premature_share"].is_monotonic_decreasing
    by_model = ranking.rank_recordings(summaries, metadata, by="flagged_share")
    assert by_model["flagged_share"].is_monotonic_decreasing
    direct = scoring.beat_table(paths[2], model)
    row = ranked.set_index("recording").loc["recording-012"]
    assert row["beats"] == len(direct) and row["flagged_share"] == pytest.approx(direct["flagged"].mean())
    assert row["mean_bpm"] == pytest.approx(60 / direct["rr_s"].mean())
    with pytest.raises(ValueError, match="without a summary or metadata: \\['recording-012'\\]"):
        ranking.rank_recordings(summaries[:2], metadata)
    with pytest.raises(ValueError, match="a recording summarized twice"):
        ranking.rank_recordings([*summaries, summaries[0]], metadata)
    qualities = client.gather(client.map(scoring.recording_quality, tables, folder=str(paths[0].parent)))
    assert [q["recording"] for q in qualities] == [p.stem for p in paths]
    figure = figures.task_stream_figure(stream.data)
    assert [t.get_text() for t in figure.axes[0].get_yticklabels()][:1] == ["worker 0"]
    assert "beat_table" in [t.get_text() for t in figure.axes[0].get_legend().get_texts()]


def test_every_beat_is_ranked_across_recordings_by_a_shuffle(written, model, client):
    from distributed import wait

    paths, _ = written
    tables = client.map(scoring.beat_table, [str(p) for p in paths], model=model, pure=False)
    wait(tables)
    before = ranking.bytes_between_workers(client)
    top = ranking.rank_every_beat(tables, top=0.05)
    assert ranking.bytes_between_workers(client) > before  # beat rows changed workers
    assert tuple(top.columns) == ranking.TOP_COLUMNS and top["in_top"].is_monotonic_decreasing
    every = pd.concat(client.gather(tables), ignore_index=True)  # the same count, in one process
    best = every.nlargest(int(np.ceil(0.05 * len(every))), "score")
    in_top = best["recording"].value_counts().reindex(every["recording"].unique(), fill_value=0)
    assert top.set_index("recording")["in_top"].to_dict() == in_top.to_dict()
    assert top["beats"].sum() == len(every)
    with pytest.raises(ValueError, match="top must be a share"):
        ranking.rank_every_beat(tables, top=1.0)


def test_the_three_clusters_are_timed_stage_by_stage(written, model, client, monkeypatch):
    paths, metadata = written
    samplers = []

    class Sampler(utilisation.UtilisationSampler):  # a GPU busy at 50 % and one idle, without NVML; a third
        def __init__(self):  # "GPU" reads the sample's number, so that which samples were kept can be told apart
            ticks = itertools.count()
            super().__init__(interval=0.005, read=lambda: [50.0, 0.0, float(next(ticks))])
            samplers.append(self)

    monkeypatch.setattr(timing, "UtilisationSampler", Sampler)
    run = timing.measure_stages(client, paths, model, metadata, warmup=0, repeat=1)
    assert run.workers == 2 and run.placement == cluster.Placement(2) and list(run.timings) == list(timing.STAGES)
    # every timed task kept, by kind: three recordings read cold, three warm, three scored
    assert {kind: len(seconds) for kind, seconds in run.tasks.items()} == dict.fromkeys(timing.TASKS, 3)
    assert 0 < timing.task_median([run], "score") <= run.timings["  score: on the workers"].median
    # the utilisation kept is the workers' busy span only: not the sample taken before the first task was handed out
    # (how many samples fall inside the span depends on the machine's load, so none is asked for)
    (sampler,) = samplers
    kept = len(run.utilisation[0])
    assert kept < len(sampler.samples[0]) and set(run.utilisation[0]) <= {50.0} and len(run.utilisation[1]) == kept
    assert ((run.load["occupancy"] > 0) & (run.load["occupancy"] <= 1 + 1e-9)).all()
    # the first sample, taken as the sampler started and before the timed scoring runs handed out a task, is not kept
    numbers = run.utilisation[2]
    assert 0.0 not in numbers and set(numbers) < set(sampler.samples[2])
    assert run.timings["  read: on the workers"].median <= run.timings["read from the page cache"].median
    assert run.timings["  score: on the workers"].median <= run.timings["score every recording"].median
    # the reads were dealt out 2 + 1, and each recording was scored where it was read
    assert run.load.loc["read", "tasks"].to_dict() == {"worker 0": 2, "worker 1": 1}
    assert run.load.loc["score", "tasks"].to_dict() == {"worker 0": 2, "worker 1": 1}
    # the summaries are all that the workers sent; the global rank's shuffle moves beat rows
    assert run.sent["rank: summaries gathered"] == run.gathered < run.sent["rank: every beat (shuffle)"]
    assert run.ranking["premature_share"].is_monotonic_decreasing
    assert run.top["beats"].sum() == run.ranking["beats"].sum()
    warm_only = timing.measure_stages(client, paths, model, metadata, warmup=0, repeat=1, cold=False)
    assert list(warm_only.timings) == list(timing.STAGES[1:])  # no read from disk where nothing can be dropped
    assert "read from disk" not in timing.scaling_table([run, warm_only]).index
    assert "read from disk" not in warm_only.tasks
    tasks = timing.task_table([run, warm_only])  # only the reads every run timed
    assert list(tasks.columns) == [
        "scoring task",
        "read task (read from the page cache)",
        "scoring / read (read from the page cache)",
    ]
    assert list(tasks.index) == ["2 workers, 2 GPUs"] * 2 + ["every cluster"]
    with pytest.raises(ValueError, match="no run kept a 'read from disk' task"):
        timing.task_median([warm_only], "read from disk")


def _timings(seconds):
    return {stage: Timing(stage, tuple(seconds), "wall") for stage in timing.STAGES}


def _run(placement, seconds, sent=0, tasks=None):
    return timing.ScalingRun(
        placement,
        _timings(seconds),
        dict.fromkeys(timing.STAGES[5:], sent),
        100,
        None,
        None,
        1000,
        None,
        tasks=tasks or {},
    )


def test_the_second_gpu_is_credited_only_as_far_as_the_repeats_go():
    one, shared, own = cluster.PLACEMENTS
    assert [p.label for p in cluster.PLACEMENTS] == ["1 worker, 1 GPU", "2 workers, 1 GPU", "2 workers, 2 GPUs"]
    assert (one.gpus, shared.gpus, own.gpus) == (1, 1, 2)
    runs = [_run(one, [4.0, 4.2, 4.4]), _run(shared, [2.0, 2.4, 3.0]), _run(own, [1.0, 1.2, 1.5], sent=2048)]
    speedup = timing.second_gpu_speedup(runs[1], runs[2], "score every recording")
    assert speedup == pytest.approx({"at least": 2.0 / 1.5, "median": 2.0, "at most": 3.0})
    with pytest.raises(ValueError, match="as many workers on fewer GPUs"):
        timing.second_gpu_speedup(runs[2], runs[1], "score every recording")
    with pytest.raises(ValueError, match="as many workers on fewer GPUs"):
        timing.second_gpu_speedup(runs[0], runs[2], "score every recording")
    table = timing.scaling_table(runs)
    assert list(table.columns) == [
        "1 worker, 1 GPU",
        "2 workers, 1 GPU",
        "2 workers, 2 GPUs",
        "speed-up vs 2 workers, 1 GPU",  # the ratio is against the column of that name
        "sent by the workers (2 workers, 2 GPUs)",  # to each other and to the notebook
    ]
    assert list(table["speed-up vs 2 workers, 1 GPU"]) == ["2.0×"] * len(timing.STAGES)
    assert table.loc["rank: every beat (shuffle)"].iloc[-1] == "2.00 KiB" and table.loc["read from disk"].iloc[-1] == ""
    one_gpu = timing.scaling_table(runs[:2])  # no two-GPU cluster: no second-GPU column
    assert list(one_gpu.columns) == [
        "1 worker, 1 GPU",
        "2 workers, 1 GPU",
        "sent by the workers (2 workers, 1 GPU)",
    ]
    spread = timing.spread_table(runs, "score every recording")
    assert spread.loc["2 workers, 1 GPU"].to_dict() == {"repeats": 3, "fastest": 2.0, "median": 2.4, "slowest": 3.0}
    with pytest.raises(ValueError, match="3 workers cannot be shared 2 to a GPU"):
        cluster.Placement(3, workers_per_gpu=2)


def test_a_job_of_several_stages_is_bounded_by_its_stages_repeats():
    one = cluster.PLACEMENTS[0]
    run = _run(one, [4.0, 4.2, 4.4])
    run.timings["read from disk"] = Timing("read from disk", (0.5, 0.9, 0.7), "wall")
    job = ["read from disk", "score every recording"]
    assert timing.job_bounds(run, job) == pytest.approx({"fastest": 4.5, "slowest": 5.3})
    assert timing.job_bounds(run, job[1:]) == pytest.approx({"fastest": 4.0, "slowest": 4.4})
    assert timing.job_bounds(run, (stage for stage in job)) == timing.job_bounds(run, job)  # any iterable
    with pytest.raises(ValueError, match="name stages"):
        timing.job_bounds(run, ["read from tape"])
    with pytest.raises(ValueError, match="none named"):
        timing.job_bounds(run, [])


def test_runs_of_a_mirrored_order_are_pooled_by_placement():
    one, shared, own = cluster.PLACEMENTS
    order = [_run(one, [4.0]), _run(shared, [2.0, 2.2]), _run(own, [1.0]), _run(own, [1.4]), _run(shared, [3.0])]
    pooled = timing.pool_runs(order)
    assert [run.placement for run in pooled] == [one, shared, own]  # in the order each first ran
    assert [run.starts for run in pooled] == [1, 2, 2]
    assert pooled[1].timings["read from disk"].samples == (2.0, 2.2, 3.0)  # both starts' repeats
    assert pooled[1] is not order[4] and pooled[1].gathered == order[4].gathered
    assert timing.spread_table(pooled, "read from disk").loc["2 workers, 2 GPUs", "repeats"] == 2
    with pytest.raises(ValueError, match="no runs to pool"):
        timing.pool_runs([])


def test_a_scoring_task_is_set_beside_the_read_tasks_of_every_cluster_pooled():
    one, shared, own = cluster.PLACEMENTS
    starts = [
        _run(
            one, [4.0], tasks={"read from disk": (0.04, 0.05), "read from the page cache": (0.01,), "score": (0.5, 0.7)}
        ),
        _run(shared, [3.0], tasks={"read from disk": (0.08,), "read from the page cache": (0.02,), "score": (1.2,)}),
        _run(one, [4.0], tasks={"read from disk": (0.06,), "read from the page cache": (0.01,), "score": (0.6,)}),
    ]
    runs = timing.pool_runs(starts)
    assert runs[0].tasks["score"] == (0.5, 0.7, 0.6)  # both starts' tasks
    assert timing.task_median(runs, "score") == pytest.approx(0.65)  # every cluster's tasks together
    assert timing.task_median(runs, "read from disk") == pytest.approx(0.055)
    table = timing.task_table(runs)
    assert list(table.index) == ["1 worker, 1 GPU", "2 workers, 1 GPU", "every cluster"]
    assert table.loc["1 worker, 1 GPU", "scoring task"] == "600 ms"
    assert table.loc["2 workers, 1 GPU", "scoring / read (read from disk)"] == "15×"
    assert table.loc["every cluster", "read task (read from the page cache)"] == "10.0 ms"
    with pytest.raises(ValueError, match="needs its scoring tasks"):
        timing.task_table([_run(one, [1.0])])


def test_workers_sharing_a_gpu_share_its_memory_limits():
    assert cluster.shared_limits(2, 2) == {
        "memory_limit": 0.5,
        "device_memory_limit": 0.4,
        "rmm_maximum_pool_size": 0.45,
    }
    assert cluster.shared_limits(4, 2, kind="cpu") == {"memory_limit": 0.25}
    with pytest.raises(ValueError, match="cannot be shared"):
        cluster.shared_limits(3, 2)
    assert cluster.describe_cores({0, 1, 2, 3, 8, 10, 11}) == "0-3,8,10-11"
    assert cluster.describe_cores([]) == "(none)" and cluster.describe_cores({5}) == "5"
    for cores in ({0, 1, 2, 3, 8, 10, 11}, set(), {5}, set(range(32))):
        assert cluster.parse_cores(cluster.describe_cores(cores)) == cores


def test_two_workers_can_share_one_device():
    from distributed import Client

    # a port of its own for the scheduler's HTTP server: the module's cluster holds the default one
    shared = cluster.make_cluster("cpu", workers=2, workers_per_gpu=2, dashboard_address=":0")
    with shared as started, Client(started) as connected:
        assert list(started.worker_spec) == [0, "0-1"]  # one started, one copied beside it
        assert len(connected.scheduler_info()["workers"]) == 2
        limits = {info["memory_limit"] for info in connected.scheduler_info()["workers"].values()}
        assert len(limits) == 1 and 0 < limits.pop() <= 0.51 * psutil.virtual_memory().total  # divided
        cores = cluster.worker_devices(connected)["CPU cores"]
        assert len(set(cores)) == 1  # both workers report the cores they run on, and they are the same
    with pytest.raises(ValueError, match="at least one worker per device"):
        cluster.share_each_worker_s_device(None, 0)
    with pytest.raises(ValueError, match="give workers= with workers_per_gpu="):
        cluster.make_cluster("gpu", workers_per_gpu=2)


def test_a_file_is_read_cold_after_its_pages_are_dropped(tmp_path, monkeypatch):
    path = tmp_path / "a.csv"
    path.write_text("1.0\n2.0\n")  # dirty pages: fsync-ed before they are dropped
    assert host.drop_from_page_cache(path) == 8 and path.read_text() == "1.0\n2.0\n"
    with pytest.raises(FileNotFoundError):
        host.drop_from_page_cache(tmp_path / "missing.csv")
    dropped, ran = [], []
    monkeypatch.setattr(host, "drop_from_page_cache", dropped.append)
    cold = host.time_cold(lambda: ran.append(len(dropped)), ["a", "b"], label="cold", warmup=1, repeat=3)
    assert len(cold.samples) == 3 and cold.clock == "wall"
    assert ran == [2, 4, 6, 8]  # every file dropped before every call, the warm-up's too


def test_the_file_system_is_read_from_the_kernel(tmp_path):
    mounts = [Mount(mountpoint="/", fstype="overlay"), Mount(mountpoint="/scratch", fstype="tmpfs")]
    mounts.append(Mount(mountpoint="/scratch/disk", fstype="ext4"))
    assert host.filesystem_of("/scratch/a.csv", mounts) == "tmpfs"
    assert host.filesystem_of("/scratch/disk/a.csv", mounts) == "ext4"  # the longest mount point
    assert host.filesystem_of("/scratchy/a.csv", mounts) == "overlay"  # a prefix of the name is not a parent
    assert host.filesystem_of("/scratch/a.csv", []) == "unknown"
    assert host.filesystem_of(tmp_path) != "unknown"  # this machine's


def test_ucx_is_offered_only_where_its_wheels_are():
    assert cluster.available_transports(lambda name: None) == ["tcp"]
    assert cluster.available_transports(lambda name: object()) == ["tcp", "ucx"]
    assert cluster.available_transports(lambda name: object() if name == "ucxx" else None) == ["tcp"]


def test_each_worker_reads_its_share_and_the_recordings_stay_there(written, model, client):
    from distributed import wait

    paths, _ = written
    assert recordings.recordings_per_worker(paths, ["b", "a"]) == {
        "a": [str(paths[0]), str(paths[2])],
        "b": [str(paths[1])],
    }
    with pytest.raises(ValueError, match="the cluster has no workers"):
        recordings.recordings_per_worker(paths, [])
    stealing = client.run_on_scheduler(lambda dask_scheduler: "stealing" in dask_scheduler.extensions)
    assert not stealing  # a task stays where its recording is
    read = recordings.read_everywhere(client, paths)
    wait(read)
    holders = client.who_has(read)
    workers = sorted(client.scheduler_info()["workers"])
    assert [holders[f.key] for f in read] == [(workers[0],), (workers[1],), (workers[0],)]
    assert [r.source for r in client.gather(read)] == [str(p) for p in paths]
    tables = scoring.score_everywhere(client, read, model)
    wait(tables)
    assert client.who_has(tables)[tables[1].key] == (workers[1],)  # scored where it was read
    pd.testing.assert_frame_equal(tables[2].result(), scoring.beat_table(paths[2], model))
    before = ranking.bytes_between_workers(client)  # a scoring pinned away from its recording fetches it
    wait(scoring.score_everywhere(client, [read[1]], model, workers=[workers[0]]))
    samples = read[1].result().signal.nbytes
    assert samples <= ranking.bytes_between_workers(client) - before < 2 * samples + 2**16


def test_dask_counts_a_recordings_samples():
    from dask.sizeof import sizeof

    samples = np.zeros(1000, dtype=np.float32)
    assert sizeof(Recording(samples, "a.csv")) == recordings.recording_size(Recording(samples, "a.csv")) == 4000


def test_task_names_and_an_empty_stream():
    assert task_stream.task_name(("beat_table-3f2a9c", 0)) == "beat_table"
    assert task_stream.task_name("beat_table-a0890c92-0308-4d8d-a294-7ff50c5aa5bb-3") == "beat_table"
    assert task_stream.task_name("finalize-hlgfinalizecompute-1a2b") == "finalize-hlgfinalizecompute"
    assert task_stream.task_name("write_recording") == "write_recording"
    with pytest.raises(ValueError, match="task stream is empty"):
        figures.task_stream_figure([])
    with pytest.raises(ValueError, match="no computation"):
        figures.task_stream_figure([{"worker": "w", "key": "x-1", "startstops": [{"action": "transfer"}]}])
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
    assert task_stream.busy_span(stream) == 3.5  # the transfer before the first computation does not count
    assert task_stream.busy_window(stream) == (10.0, 13.5)
    load = task_stream.worker_load(stream)
    assert load.to_dict("index") == {
        "worker 0": {"tasks": 1, "median task": 2.0, "busy": 2.0, "occupancy": 1.0},
        "worker 1": {"tasks": 1, "median task": 2.5, "busy": 2.5, "occupancy": 1.0},
    }
    # a second task on worker "a", after a gap of half a second: 2.5 s of tasks in a span of 3 s
    stream.append({"worker": "a", "key": "g-3", "startstops": [{"action": "compute", "start": 12.5, "stop": 13.0}]})
    assert task_stream.worker_load(stream).loc["worker 0"].to_dict() == {
        "tasks": 2,
        "median task": 1.25,
        "busy": 3.0,
        "occupancy": pytest.approx(2.5 / 3.0),
    }
    assert task_stream.worker_load(stream, function="g").to_dict("index") == {
        "worker 0": {"tasks": 1, "median task": 0.5, "busy": 0.5, "occupancy": 1.0}
    }
    # a worker with two threads runs two tasks at once: the overlap counts once, so occupancy stays at most 1
    both = [
        {"worker": "c", "key": f"h-{k}", "startstops": [{"action": "compute", "start": k, "stop": k + 2.0}]}
        for k in (0.0, 1.0)
    ]
    assert task_stream.worker_load(both).loc["worker 0", "occupancy"] == 1.0
    assert task_stream.task_seconds(stream, function="f") == (2.0, 2.5)
    with pytest.raises(ValueError, match="ran no 'h'"):
        task_stream.worker_load(stream, function="h")


def test_the_cluster_diagram_draws_one_box_per_worker_on_its_gpu():
    texts = [t.get_text() for t in figures.cluster_diagram(cluster.Placement(3)).axes[0].texts]
    assert sum(t.startswith("worker ") for t in texts) == 3 and "shuffle" in texts
    assert any(t.startswith("GPU 2\n") for t in texts)
    shared = [t.get_text() for t in figures.cluster_diagram(cluster.Placement(2, 2)).axes[0].texts]
    assert sum(t.startswith("GPU 0, shared by 2 workers") for t in shared) == 2
    assert not any(t.startswith("GPU 1") for t in shared)
    assert not any("whichever worker" in t for t in texts + shared)  # reads are pinned, no stealing


def test_bad_requests_are_refused_with_what_to_do(written):
    paths, _ = written
    with pytest.raises(ValueError, match="at least one recording"):
        recordings.recording_specs(0, hours=1)
    with pytest.raises(ValueError, match="kind must be 'gpu' or 'cpu'"):
        cluster.make_cluster("tpu")
    with pytest.raises(ValueError, match="on must be 'gpu' or 'cpu'"):
        recordings.write_recording(recordings.RecordingSpec(1, 0.01), paths[0].parent, on="tpu")
    with pytest.raises(ValueError, match="flag_share must lie strictly between 0 and 1"):
        models.train_on_sample(paths[:1], flag_share=1.5)
