"""Baselines beside the VAE and scoring per true event (on the CPU)."""

import numpy as np
import pytest
import torch  # noqa: TID253 - these tests need it: without it they cannot run

from support.ecg import baselines, events, metrics, synthetic


def test_average_precision_matches_its_definition():
    rng = np.random.default_rng(1)
    scores, labels = rng.random(200), rng.random(200) < 0.2
    ranked = labels[np.argsort(-scores)]
    expected = np.mean([ranked[: k + 1].mean() for k in np.flatnonzero(ranked)])
    assert metrics.average_precision(scores, labels) == pytest.approx(expected)
    assert metrics.average_precision([3, 2, 1], [1, 0, 0]) == 1.0


def test_median_distance_and_pca_score_an_odd_row_highest():
    torch.manual_seed(0)
    t = torch.linspace(-1, 1, 32)
    shape = torch.exp(-(t**2) / 0.02)
    train = shape * (1 + 0.1 * torch.randn(300, 1)) + 0.01 * torch.randn(300, 32)
    rows = torch.cat([train[:20], -shape[None]])
    assert baselines.median_distance(train, rows).argmax().item() == 20
    pca = baselines.PCABaseline.fit(train, 2)
    assert pca.scores(rows).argmax().item() == 20
    assert pca.scores(train[:50]).mean() < 0.01  # amplitude changes lie in the first component
    anomalous = np.r_[np.zeros(20, bool), True]
    chosen, table = baselines.choose_pca(train, rows, anomalous, components=(1, 2))
    assert [r["components"] for r in table] == [1, 2] and table[0]["validation AP"] == 1.0
    with pytest.raises(ValueError, match="components"):
        baselines.PCABaseline.fit(train, 40)


def test_pca_from_the_covariance_reconstructs_as_the_singular_vectors_do():
    generator = torch.Generator().manual_seed(3)
    mixing = torch.randn(24, 24, generator=generator)
    train = torch.randn(2000, 24, generator=generator) @ mixing
    rows = torch.randn(100, 24, generator=generator) @ mixing
    fitted = baselines.PCABaseline.fit(train, 5)
    _, _, v = torch.linalg.svd(train - train.mean(dim=0), full_matrices=False)
    singular = baselines.PCABaseline(train.mean(dim=0), v[:5].T.contiguous())
    assert fitted.directions.shape == (24, 5) and fitted.directions.dtype == train.dtype
    torch.testing.assert_close(fitted.scores(rows), singular.scores(rows), rtol=1e-4, atol=1e-4)


def test_rr_prematurity_is_high_for_premature_beats_and_higher_with_a_pause():
    rr = np.full(40, 0.8)
    rr[10] = 0.5  # a supraventricular beat: early, no full pause
    rr[20], rr[21] = 0.5, 1.1  # a ventricular beat: early, then the compensatory pause
    peaks = np.r_[0, np.cumsum(rr)] * 250
    score = baselines.rr_prematurity(peaks.round().astype(np.int64), 250.0).numpy()
    assert score[11] > 0.4 and score[21] > score[11] + 0.2  # rr[k] ends at beat k + 1
    assert np.abs(np.delete(score, [11, 12, 21, 22])).max() < 0.01
    with pytest.raises(ValueError, match="at least 3 beats"):
        baselines.rr_prematurity(np.array([0, 100]), 250.0)


def test_score_table_judges_every_method_on_the_same_rows():
    labels = np.array([0] * 80 + [1] * 10 + [2] * 10)
    rng = np.random.default_rng(0)
    perfect = labels.astype(float) + rng.random(100) * 0.1
    blind = rng.random(100)
    validation, test = np.arange(0, 100, 2), np.arange(1, 100, 2)
    table = baselines.score_table({"perfect": perfect, "blind": torch.tensor(blind)}, labels, validation, test)
    assert baselines.value(table, "perfect", "ventricular") == 1.0
    assert baselines.value(table, "perfect", "supraventricular", "recall") == 1.0
    assert baselines.best_method(table, "ectopic") == ("perfect", 1.0)
    assert baselines.flag_precision(table)["perfect"] == 1.0
    frame = baselines.pivot(table, "AUROC")
    assert list(frame.index) == ["perfect", "blind"] and "fusion" not in frame.columns
    combined = baselines.combine(torch.tensor(perfect), torch.tensor(blind), perfect[validation], blind[validation])
    assert combined.shape == (100,)
    with pytest.raises(ValueError, match="scores for"):
        baselines.score_table({"short": perfect[:10]}, labels, validation, test)


def test_separation_ranks_each_group_against_the_normal_rows_only():
    scores = np.array([0.1, 0.2, 0.3, 0.9, 0.05, 0.8])
    normal = np.array([True, True, True, False, False, False])
    groups = {"high": [0, 0, 0, 1, 0, 0], "low": [0, 0, 0, 0, 1, 0], "none": np.zeros(6, bool)}
    table = metrics.separation(scores, groups, normal)
    assert list(table) == ["high", "low"]  # an empty group is left out, the order kept
    assert table["high"] == {"beats": 1, "AUROC": 1.0, "AP": 1.0}
    assert table["low"]["AUROC"] == 0.0  # row 5 (another group's) is not among low's rivals
    assert metrics.separation(scores, groups, np.zeros(6, bool)) == {}
    with pytest.raises(ValueError, match="one flag per score"):
        metrics.separation(scores, {"short": [True]}, normal)


def test_the_method_is_picked_on_validation_rows_and_scored_on_test_rows():
    labels = np.array([0, 0, 0, 2, 1] * 20)
    validation, test = np.arange(50), np.arange(50, 100)
    shape_first = np.where(np.arange(100) < 50, labels, -labels).astype(float)  # perfect on validation only
    rhythm = np.where(np.arange(100) < 50, 0.5 * labels, labels).astype(float)  # less sure on validation
    scores = {"rhythm": rhythm, "shape": torch.tensor(shape_first), "VAE": labels * 2.0}
    pick = baselines.pick_on_validation(scores, labels, validation, test, among=("rhythm", "shape"))
    assert pick.method == "rhythm" and set(pick.candidates) == {"rhythm", "shape"}  # tie: the first
    assert pick.validation == pick.test == 1.0
    shape_only = baselines.pick_on_validation(scores, labels, validation, test, among=("shape",), name="ventricular")
    assert (shape_only.validation, shape_only.test) == (1.0, 0.0)  # the test rows did not pick it
    assert baselines.pick_on_validation(scores, labels, validation, test).method == "rhythm"
    with pytest.raises(ValueError, match="none of the methods"):
        baselines.pick_on_validation(scores, labels, validation, test, among=("PCA",))
    with pytest.raises(ValueError, match="no fusion beats"):
        baselines.pick_on_validation(scores, labels, validation, test, name="fusion")


def test_matching_is_one_to_one_within_the_window():
    truth = np.array([100, 200, 300, 400])
    found, matched = events.match_beats(np.array([101, 104, 290, 520]), truth, tolerance=15)
    assert found.tolist() == [0, -1, 2, -1]  # 104 is 101's rival for beat 100; 520 is too far from 400
    assert matched.tolist() == [True, False, True, False]
    with pytest.raises(ValueError, match="sorted"):
        events.match_beats(np.array([5, 1]), truth, 10)


def test_detector_table_counts_true_beats_per_class_and_false_detections():
    fs = 100.0
    r_peaks = np.arange(20) * 100 + 50
    classes = np.zeros(20, np.int8)
    classes[[4, 9]] = synthetic.VENTRICULAR
    artefacts = synthetic.Artefacts(np.array([1500]), np.array([1800]), np.array([1]), np.array([0.0]))
    detected = np.r_[np.delete(r_peaks, [9, 12]) + 3, 1620, 1640]  # misses a V and an N; two in noise
    table, summary = events.detector_table(detected, r_peaks, classes, fs, artefacts=artefacts)
    by_class = {row["class"]: row for row in table}
    assert by_class["V"]["found"] == 1 and by_class["V"]["sensitivity"] == 0.5
    assert by_class["N"]["true beats"] == 18 and by_class["N"]["found"] == 17
    assert summary["false detections"] == 2 and summary["false detections under artefact"] == 2
    assert summary["+P in clean signal"] == 1.0 and summary["+P"] == pytest.approx(18 / 20)


def test_event_recall_counts_a_beat_with_no_row_as_missed_and_pruning_as_a_report():
    fs = 100.0
    r_peaks = np.arange(30) * 100 + 50
    labels = np.zeros(30, np.int8)
    labels[[5, 15]] = synthetic.VENTRICULAR
    labels[[20, 21]] = synthetic.NOISE
    artefacts = synthetic.Artefacts(
        np.array([1980, 2700]), np.array([2180, 2800]), np.array([0, 1]), np.array([0.0, 24.0])
    )
    kept = np.delete(r_peaks, [15, 20, 21])  # the second V and the noisy beats have no row
    flagged = np.isin(kept, r_peaks[[5]])
    pruned = np.array([2010, 2100])
    by_class, by_snr = events.event_recall(kept, flagged, pruned, r_peaks, labels, artefacts, fs)
    v = next(row for row in by_class if row["class"] == "ventricular")
    assert (v["true beats"], v["with a row"], v["flagged"]) == (2, 1, 1)
    assert v["per true beat"] == 0.5 and v["per row"] == 1.0
    loud = next(row for row in by_snr if row["SNR dB"] == 0.0)
    assert loud["flagged"] == 0 and loud["flagged or pruned"] == 1 and loud["recall"] == 1.0
    mild = next(row for row in by_snr if row["SNR dB"] == 24.0)
    assert mild["recall"] == 0.0
    assert events.pruned_outside_artefact(np.array([10, 2010]), artefacts) == 1
    with pytest.raises(ValueError, match="one flag per kept row"):
        events.event_recall(kept, flagged[:3], pruned, r_peaks, labels, artefacts, fs)
