"""support.many_gpus.scale on the CPU: recordings written, scored beat by beat on a two-process
distributed.LocalCluster, judged against their truth, joined with their metadata and ranked (by a shuffle and by a
broadcast). The same code runs on dask_cuda.LocalCUDACluster in chapter 7."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from support.ecg import synthetic
from support.many_gpus import scale


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
    assert set(table["flagged"]) <= {0.0, 1.0} and 0 < table["short_rr"].mean() < 0.5
    assert ((table["time_s"] * 250).round() == table["sample"]).all()
    quality = scale.recording_quality(table, paths[0].parent)
    assert quality["recording"] == "recording-010" and quality["beats"] == len(table)
    assert quality["anomalies"] > 0 and 0 <= quality["precision_at_rate"] <= 1
    # chapter 6's measures, per recording: every kind present gets its AUROC against the normal beats
    assert {"auroc", "auroc ectopic vs normal", "auroc noise vs normal"} <= set(quality)
    assert quality["auroc noise vs normal"] > 0.7  # a model trained on 300 beats still sees loud artefact


def test_the_traffic_of_a_recording_is_metered_stage_by_stage(recordings, model, monkeypatch):
    import contextlib

    from support import traffic

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
    assert list(stages) == ["read", "beats", "score", "table"]


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


def test_two_workers_score_and_rank_the_recordings(recordings, model, client):
    from distributed import get_task_stream, wait

    paths, metadata = recordings
    assert len(scale.worker_devices(client)) == 2
    with get_task_stream(client) as stream:
        tables = client.map(scale.beat_table, [str(p) for p in paths], model=model, pure=False)
        wait(tables)
    shuffled = scale.rank_recordings(tables, metadata)
    broadcast = scale.rank_recordings(tables, metadata, broadcast=True)
    with pytest.raises(ValueError, match="without beats or metadata: \\['recording-012'\\]"):
        scale.rank_recordings(tables[:2], metadata)
    qualities = client.gather(client.map(scale.recording_quality, tables, folder=str(paths[0].parent)))
    run = scale.measure_stages(client, paths, model, metadata, warmup=0, repeat=1)
    assert run.workers == 2 and list(run.timings) == list(scale.STAGES)
    assert run.timings["  read: on the workers"].median <= run.timings["read every recording"].median
    assert run.timings["  score: on the workers"].median <= run.timings["score every recording"].median
    # the reads were dealt out 2 + 1, and each recording was scored where it was read
    assert run.load.loc["read", "tasks"].to_dict() == {"worker 0": 2, "worker 1": 1}
    assert run.load.loc["score", "tasks"].to_dict() == {"worker 0": 2, "worker 1": 1}
    pd.testing.assert_frame_equal(run.ranking, shuffled)
    # the shuffle sends beat rows to the other worker; the broadcast sends the metadata and partial sums only
    assert run.sent["rank: shuffle"] > run.sent["rank: broadcast"] and run.table_bytes > 0
    table = scale.scaling_table(dataclasses.replace(run, workers=1), run)
    assert list(table.columns) == ["1 worker", "2 workers", "speed-up", "sent between workers (2)"]
    assert list(table["speed-up"]) == ["1.0×"] * 6 and table.loc["score every recording"].iloc[-1] == ""
    assert tuple(shuffled.columns) == scale.RANK_COLUMNS
    pd.testing.assert_frame_equal(shuffled, broadcast)
    assert shuffled["flagged_share"].is_monotonic_decreasing
    direct = scale.beat_table(paths[2], model)
    row = shuffled.set_index("recording").loc["recording-012"]
    assert row["beats"] == len(direct) and row["flagged_share"] == pytest.approx(direct["flagged"].mean())
    assert [q["recording"] for q in qualities] == [p.stem for p in paths]
    figure = scale.task_stream_figure(stream.data)
    assert [t.get_text() for t in figure.axes[0].get_yticklabels()][:1] == ["worker 0"]
    assert "beat_table" in [t.get_text() for t in figure.axes[0].get_legend().get_texts()]


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
    tables = client.map(scale.score_recording, read, model=model, pure=False)
    wait(tables)
    assert client.who_has(tables)[tables[1].key] == (workers[1],)  # scored where it was read
    pd.testing.assert_frame_equal(tables[2].result(), scale.beat_table(paths[2], model))
    before = scale.bytes_between_workers(client)  # a scoring pinned away from its recording fetches it
    client.submit(scale.score_recording, read[1], model=model, workers=[workers[0]], pure=False).result()
    samples = read[1].result().signal.nbytes
    assert samples <= scale.bytes_between_workers(client) - before < 2 * samples + 2**16


def test_dask_counts_a_recordings_samples():
    from dask.sizeof import sizeof

    from support.ecg.reading import Recording

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


def test_the_cluster_diagram_draws_one_box_per_worker():
    texts = [t.get_text() for t in scale.cluster_diagram(workers=3).axes[0].texts]
    assert sum(t.startswith("worker ") for t in texts) == 3 and "shuffle" in texts


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
