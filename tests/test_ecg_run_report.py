"""A command-line run's report read back: its time parts (on the CPU, from made-up reports)."""

import pytest

from support.ecg import run_report


def _run(**extra):
    stages = [{"stage": "read", "seconds": 0.25}, {"stage": "train", "seconds": 2.5}]
    return {"total_seconds": 9.0, "setup_seconds": 3.0, "pipeline_seconds": 4.0, "stages": stages} | extra


def test_time_parts_name_each_part_and_the_training_within_the_pipeline():
    parts = run_report.time_parts(_run(synthesize_and_write_seconds=12.5))
    assert parts == {
        "in all": "9.00 s",
        "start-up": "3.00 s",
        "synthesis and CSV": "12.5 s",
        "pipeline": "4.00 s",
        "of which training": "2.50 s",
    }
    assert run_report.time_parts(_run())["synthesis and CSV"] == "none"  # it read a CSV it was given
    assert run_report.training_seconds(_run()) == 2.5


def test_time_table_has_a_row_per_run_named_first():
    rows = run_report.time_table({"first": _run(synthesize_and_write_seconds=1.0), "second": _run()})
    assert [row["run"] for row in rows] == ["first", "second"] and list(rows[0])[0] == "run"


def test_a_report_without_a_train_stage_is_refused_in_one_line():
    with pytest.raises(ValueError, match="no train stage"):
        run_report.training_seconds({"stages": [{"stage": "read", "seconds": 0.1}]})
