"""support.scale on the CPU: recordings written, summarized on a two-process distributed.LocalCluster, joined
with their metadata and ranked. The same code runs on dask_cuda.LocalCUDACluster in chapter 7."""

from __future__ import annotations

import pytest

from support import scale


@pytest.fixture(scope="module")
def recordings(tmp_path_factory):
    specs = scale.recording_specs(3, hours=0.05, seed=10)  # 3 minutes each
    return scale.write_recordings(tmp_path_factory.mktemp("recordings"), specs)


def test_recordings_are_written_with_their_metadata(recordings):
    paths, metadata = recordings
    assert [p.name for p in paths] == ["recording-010.csv", "recording-011.csv", "recording-012.csv"]
    assert list(metadata["recording"]) == [p.stem for p in paths]
    assert metadata.loc[0, "ectopic_rate"] == 0.06 and (metadata["true normal"] > 100).all()


def test_one_recording_summarized_where_it_lives(recordings):
    paths, metadata = recordings
    row = scale.recording_summary(paths[0])
    assert list(row) == list(scale.SUMMARY_COLUMNS)
    assert row["recording"] == "recording-010" and row["seconds"] == pytest.approx(180)
    true_beats = metadata.loc[0, ["true normal", "true ectopic", "true noise burst"]].sum()
    assert abs(row["beats"] - true_beats) <= 0.05 * true_beats
    assert 40 < row["median_bpm"] < 120 and 0 < row["short_rr_share"] < 0.5


def test_summaries_from_two_workers_are_ranked_with_their_metadata(recordings):
    from distributed import Client

    paths, metadata = recordings
    with scale.make_cluster("cpu", workers=2) as cluster, Client(cluster) as client:
        summaries = scale.summarize(client, paths)
        assert len(client.scheduler_info()["workers"]) == 2
    assert list(summaries["recording"]) == [p.stem for p in paths]
    assert summaries.loc[0].to_dict() == pytest.approx(scale.recording_summary(paths[0]))
    ranked = scale.rank_recordings(summaries, metadata)
    assert ranked["short_rr_share"].is_monotonic_decreasing
    assert ranked.loc[0, "ectopic_rate"] == 0.06  # the recording with three times the ectopic beats comes first
    with pytest.raises(ValueError, match="without metadata: \\['recording-012'\\]"):
        scale.rank_recordings(summaries, metadata.iloc[:2])


def test_bad_requests_are_refused_with_what_to_do():
    with pytest.raises(ValueError, match="at least one recording"):
        scale.recording_specs(0, hours=1)
    with pytest.raises(ValueError, match="kind must be 'gpu' or 'cpu'"):
        scale.make_cluster("tpu")
