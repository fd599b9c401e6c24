"""The ECG chapter's evaluation: contexts, splits, the model chosen on validation, the flag table (on the CPU)."""

import numpy as np
import pytest
import torch  # noqa: TID253 - these tests need it: without it they cannot run

from support.ecg import evaluation, plots, synthetic, vae


def test_random_split_is_a_partition_drawn_on_the_host_and_the_time_split_keeps_order():
    split = evaluation.split_rows(100, by="random", seed=3)
    again = evaluation.split_rows(100, by="random", seed=3)
    assert split.test.tolist() == again.test.tolist()
    rows = torch.cat([split.train, split.validation, split.test]).sort().values
    assert rows.tolist() == list(range(100))
    assert (len(split.train), len(split.validation), len(split.test)) == (60, 20, 20)
    assert split.train.tolist() != list(range(60))  # shuffled
    by_time = evaluation.split_rows(100, by="time")
    assert by_time.train.max() < by_time.validation.min() and by_time.validation.max() < by_time.test.min()


def test_a_split_by_blocks_gives_every_sample_position_a_part_and_counts_the_classes():
    fs = 100.0
    peaks = np.arange(0, 3600 * 100, 80)  # an hour of beats, 0.8 s apart
    labels = np.zeros(len(peaks), np.int8)
    labels[::50] = synthetic.VENTRICULAR
    split = evaluation.split_rows(len(peaks), by="blocks", seed=1, peaks=peaks, fs=fs, block_s=60)
    rows = torch.cat([split.train, split.validation, split.test]).sort().values
    assert rows.tolist() == list(range(len(peaks)))
    parts = split.part_of(peaks)
    for k, part in enumerate(evaluation.PARTS):  # a row is in the part of its block
        assert (parts[getattr(split, part).numpy()] == k).all()
    assert 0.18 < len(split.test) / len(peaks) < 0.22  # 12 of the 60 blocks
    counts = {row["part"]: row for row in split.counts(labels)}
    assert sum(row["ventricular"] for row in counts.values()) == (labels == synthetic.VENTRICULAR).sum()
    assert counts["test"]["normal"] + counts["test"]["ventricular"] == len(split.test)
    with pytest.raises(ValueError, match="split by 'blocks'"):
        evaluation.split_rows(len(peaks), seed=1).part_of(peaks)
    with pytest.raises(ValueError, match="needs the R-peak sample"):
        evaluation.split_rows(len(peaks), by="blocks")


def test_split_refuses_what_it_cannot_do():
    with pytest.raises(ValueError, match="'random', 'time' or 'blocks'"):
        evaluation.split_rows(100, by="patient")
    with pytest.raises(ValueError, match="add up to 1"):
        evaluation.split_rows(100, fractions=(0.5, 0.2, 0.2))
    with pytest.raises(ValueError, match="too few"):
        evaluation.split_rows(6)


def test_contexts_name_the_neighbours_of_anomalies():
    r_peaks = np.arange(10) * 200 + 100
    labels = np.zeros(10, np.int8)
    labels[3], labels[7] = synthetic.SUPRAVENTRICULAR, synthetic.NOISE
    contexts = evaluation.beat_context(r_peaks + 3, r_peaks, labels)
    assert contexts[2] == "normal before an ectopic beat" and contexts[4] == "normal after an ectopic beat"
    assert contexts[3] == "supraventricular" and contexts[7] == "noise"
    assert contexts[6] == contexts[8] == "normal next to noise"
    assert set(contexts[[0, 1, 5, 9]]) == {"normal"}


def test_threshold_flags_the_labelled_rate_and_the_summary_counts_it():
    scores = np.array([5.0, 4.0, 3.0, 2.0, 1.0, 0.5])
    threshold = evaluation.threshold_at_rate(scores, [1, 0, 1, 0, 0, 0])
    assert threshold == 4.0
    contexts = np.array(["ventricular", "normal", "noise", "normal before an ectopic beat", "normal", "ventricular"])
    flags = evaluation.flag_table(scores, contexts, threshold)
    summary = evaluation.summary(flags)
    assert summary == {"recall ventricular": 0.5, "recall noise": 0.0, "precision": 0.5}
    with pytest.raises(ValueError, match="no labelled anomalies"):
        evaluation.threshold_at_rate(scores, np.zeros(6))


def test_choose_model_keeps_the_best_validation_epoch_and_prefers_fewer_dimensions(monkeypatch):
    anomalous = np.array([1, 1, 0, 0, 0, 0], bool)
    good = np.array([9.0, 8.0, 1.0, 1.0, 1.0, 1.0])  # both anomalies on top
    half = np.array([9.0, 1.0, 8.0, 1.0, 1.0, 1.0])  # one of them
    plan = {2: [half, good, half], 8: [good, good, good]}  # latent → scores after each epoch

    class Fake:
        def __init__(self, latent, epoch):
            self.latent, self.epoch = latent, epoch

        def eval(self):
            return self

    def fake_train(beats, *, latent, epochs, batch_size, seed, progress, after_epoch):
        assert batch_size == 4096  # the launch-bound default (chapter 6 measures why)
        for epoch in range(epochs):
            after_epoch(epoch, Fake(latent, epoch))

    monkeypatch.setattr(vae, "train", fake_train)
    monkeypatch.setattr(vae, "anomaly_scores", lambda model, beats: torch.tensor(plan[model.latent][model.epoch]))
    choice = evaluation.choose_model(torch.zeros(4, 8), torch.zeros(6, 8), anomalous, latents=(2, 8), epochs=3)
    assert (choice.latent, choice.epochs, choice.validation_score) == (2, 2, 1.0)
    assert [row["best epoch"] for row in choice.per_latent] == [2, 1]
    assert choice.per_latent[0]["precision after 3 epochs"] == 0.5
    with pytest.raises(ValueError, match="validation beats but"):
        evaluation.choose_model(torch.zeros(4, 8), torch.zeros(5, 8), anomalous)


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_the_evaluation_runs_end_to_end_on_a_short_cpu_recording():
    ecg = synthetic.synthesize(seconds=1800, seed=4, ectopic_rate=0.08, noise_rate=0.03)
    row = evaluation.evaluate_recording(ecg, latents=(2,), epochs=4, seed=4)
    assert row["split"] == "random" and row["latent"] == 2
    assert 0 <= row["recall ventricular"] <= 1 and row["precision"] > 0.2, row


def test_score_histogram_draws_one_line_per_context_and_the_threshold():
    import matplotlib

    matplotlib.use("Agg")

    contexts = np.array(["normal"] * 50 + ["ventricular"] * 5 + ["normal after an ectopic beat"] * 5)
    scores = np.r_[np.linspace(1, 2, 50), np.linspace(10, 20, 5), np.linspace(1, 3, 5)]
    fig = plots.score_histogram_figure(scores, contexts, threshold=5.0)
    assert len(fig.axes[0].patches) == 3 and len(fig.axes[0].lines) == 1
