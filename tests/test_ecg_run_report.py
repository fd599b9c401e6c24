"""A command-line run's report read back: its time parts (on the CPU, from made-up reports)."""

import pytest

from support.ecg import run_report


def _run(**extra):
    stages = [{"stage": "read", "seconds": 0.25}, {"stage": "train", "seconds": 2.5}]
    return {"total_seconds": 9.0, "setup_seconds": 3.0, "pipeline_seconds": 4.0, "stages": stages} | extra


def test_time_parts_name_each_part_and_the_training_within_the_pipeline():
    parts = run_report.time_parts(_run(synthesize_and_write_seconds=1.25, quality_seconds=0.5))
    assert parts == {
        "start-up": "3.00 s",
        "synthesis and CSV": "1.25 s",
        "pipeline": "4.00 s",
        "of which training": "2.50 s",
        "quality report": "500 ms",
        "figures saved": "none",
        "between the parts": "250 ms",
        "start to finish": "9.00 s",
    }
    assert run_report.time_parts(_run())["synthesis and CSV"] == "none"  # it read a CSV it was given
    assert run_report.training_seconds(_run()) == 2.5


def test_the_rest_is_what_the_parts_in_sequence_leave_of_the_whole():
    run = _run(synthesize_and_write_seconds=1.0, quality_seconds=0.5, figures_seconds=0.25)
    seconds = run_report.part_seconds(run)
    in_sequence = sum(seconds[part] for part in run_report.IN_SEQUENCE)
    assert seconds["between the parts"] == pytest.approx(run["total_seconds"] - in_sequence)
    assert seconds["between the parts"] == pytest.approx(0.25)
    assert "of which training" not in run_report.IN_SEQUENCE  # inside the pipeline: counting it would count twice
    assert run_report.between_parts_seconds(_run()) == pytest.approx(2.0)  # parts a run lacks count as nothing


def test_time_table_has_a_row_per_part_and_a_column_per_run():
    rows = run_report.time_table({"first": _run(synthesize_and_write_seconds=1.0), "second": _run()})
    assert [row["part"] for row in rows] == list(run_report.PARTS)
    assert rows[1] == {"part": "synthesis and CSV", "first": "1.00 s", "second": "none"}


def test_a_report_without_a_train_stage_is_refused_in_one_line():
    with pytest.raises(ValueError, match="no train stage"):
        run_report.training_seconds({"stages": [{"stage": "read", "seconds": 0.1}]})
