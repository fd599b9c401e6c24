"""booktools.teaching: the teacher's tables from recorded runs, stating only what was measured."""

from __future__ import annotations

import nbformat
import pytest

from booktools import evidence, notebooks, rehearse, teaching
from booktools.runs import ChapterRun, RunGroup
from support.units import GIB


def _chapter(name: str, seconds: float, peak: int | None, passed: bool = True) -> ChapterRun:
    return ChapterRun(f"chapters/{name}.ipynb", seconds, peak, passed)


def test_planning_rows_read_times_on_the_full_gpu_and_peaks_under_the_limit_passed():
    full = RunGroup(
        "H100 80GB",
        "execute",
        False,
        10.0,
        5 * GIB,
        [_chapter("01_why_gpus", 80.0, 5 * GIB), _chapter("05_unified_memory", 200.0, 13 * GIB)],
        None,
    )
    limited = RunGroup(
        "16 GB",
        "nbval",
        False,
        10.0,
        4 * GIB,
        [_chapter("01_why_gpus", 60.0, 4 * GIB), _chapter("05_unified_memory", 90.0, 8 * GIB, passed=False)],
        16 * GIB,
    )
    rows = teaching.planning_rows(["01_why_gpus", "05_unified_memory", "99_unmeasured"], [full, limited])
    assert rows[0] == {
        "chapter": "01_why_gpus",
        teaching.TIME: 80.0,
        teaching.PEAK: 4.0,
        teaching.LIMIT: "16 GB",
    }
    assert rows[1][teaching.PEAK] is None  # a failed run under a limit says nothing of a need
    assert rows[1][teaching.LIMIT] == "failed under 16 GB"
    assert rows[2][teaching.TIME] is None and rows[2][teaching.LIMIT] == "never run under a limit"


def test_runs_together_say_which_chapters_ran_side_by_side():
    together = RunGroup(
        "16 GB, 2 readers",
        "nbval",
        True,
        95.0,
        30 * GIB,
        [_chapter("02_memory_layouts", 18.0, None), _chapter("03_zero_copy", 39.0, None, passed=False)],
        16 * GIB,
    )
    alone = RunGroup("H100 80GB", "execute", False, 1.0, GIB, [_chapter("02_memory_layouts", 1.0, GIB)], None)
    assert teaching.runs_together([alone, together]) == [
        {
            "run": "16 GB, 2 readers",
            "chapters at once": "02_memory_layouts, 03_zero_copy",
            "passed": "1 of 2",
            "wall time (s)": 95.0,
            "GPU peak (GiB)": 30.0,
        }
    ]


def test_every_agenda_names_chapters_of_the_book_in_order():
    names = [path.stem for path in notebooks.chapter_notebooks()]
    for name, chapters in teaching.AGENDAS.items():
        assert chapters == sorted(chapters) and set(chapters) <= set(names), name
    with pytest.raises(ValueError, match="choose one of two-hours, half-day, full-day"):
        teaching.agenda("a week")


def test_errors_in_a_log_are_read_once_each_without_colours(tmp_path):
    log = tmp_path / "nbval.log"
    log.write_text(
        "\x1b[31mRuntimeError\x1b[39m: CUDA error: cudaErrorIllegalAddress\n"
        "E   RuntimeError: not at the start of the line\n"
        "RuntimeError: CUDA error: cudaErrorIllegalAddress\n"
        "ClaimError: memory.x does not hold\n"
    )
    assert teaching.errors_in_log(log) == [
        "RuntimeError: CUDA error: cudaErrorIllegalAddress",
        "ClaimError: memory.x does not hold",
    ]
    assert teaching.errors_in_log(tmp_path / "missing.log") == []


def test_the_largest_need_is_the_largest_peak_a_chapter_passed_under_a_limit_with():
    limited = RunGroup(
        "16 GB",
        "nbval",
        False,
        10.0,
        0,
        [
            _chapter("01_a", 1.0, 4 * GIB),
            _chapter("02_b", 1.0, int(13.2 * GIB)),
            _chapter("03_c", 1.0, 15 * GIB, passed=False),  # a failed run says nothing of a need
        ],
        16 * GIB,
    )
    assert teaching.largest_need(["01_a", "02_b", "03_c"], [limited]) == ("02_b", int(13.2 * GIB))
    assert teaching.share_for(["01_a", "02_b"], [limited]) == 14
    assert teaching.largest_need(["03_c"], [limited]) is None and teaching.share_for(["03_c"], [limited]) is None


def test_every_agenda_fits_its_minutes_with_its_break_and_one_exercise_per_chapter_that_has_them():
    for name in teaching.AGENDAS:
        slots = teaching.agenda_plan(name)
        assert sum(slot["minutes"] for slot in slots) <= teaching.PLANS[name]["minutes"], name
        assert any(slot["what"] == "break" for slot in slots), name
        for slot in slots:
            chapter = slot["chapter"]
            if chapter is None:
                continue
            assert chapter["planned minutes"] <= slot["minutes"], (name, slot["what"])
            assert chapter["exercise"] is not None or chapter["exercises"] == 0, (name, slot["what"])
            assert all(part["how"] for part in chapter["parts"])
        assert len(teaching.agenda_text(name).splitlines()[0]) <= 88


def test_no_shared_gpu_agenda_has_participants_run_chapter_5():
    for name, chapters in teaching.AGENDAS.items():
        assert not set(chapters) & set(teaching.SHOWN_NOT_RUN), name


def test_a_chapter_is_run_whole_in_order_discussed_from_the_top_while_its_slot_holds_it(tmp_path):
    chapter = nbformat.v4.new_notebook()
    chapter.cells = [nbformat.v4.new_markdown_cell("# A chapter")]
    for section in ("First", "Second", "Third"):
        chapter.cells.append(nbformat.v4.new_markdown_cell(f"## {section}"))
        chapter.cells += [nbformat.v4.new_code_cell("x = 1") for _ in range(10)]
    chapter.cells += [
        nbformat.v4.new_markdown_cell("```{exercise-start}\n:label: ex-a\n```\n**Find the copy.** Where?"),
        nbformat.v4.new_markdown_cell("```{exercise-end}\n```"),
    ]
    nbformat.write(chapter, tmp_path / "01_a.ipynb")
    talk = teaching.TALK_SECONDS
    # 30 cells of 1 s each: run through, 30 * (1 + 4) s = 2.5 min; the exercise 10 min; one section discussed
    # adds 10 * (45 - 4) s = 6.8 min; live-coding its first cell adds (150 - 45) s = 1.75 min.
    plan = teaching.chapter_plan("01_a", 22, 30.0, tmp_path)  # the second section would not fit
    assert [part["how"] for part in plan["parts"]] == ["read", "live 1, talk 9", "run through", "run through"]
    assert plan["exercise"] == "Exercise 1.1: Find the copy"
    exercise = 10 * 60 + 1  # and its one code cell, the empty one to write in, at the chapter's share of 1 s
    expected = 30 * (1 + talk["room runs through"]) + exercise + 10 * (talk["room runs, discussed"] - 4) + 105
    assert plan["planned minutes"] == pytest.approx(expected / 60)
    tight = teaching.chapter_plan("01_a", 5, 30.0, tmp_path)
    assert tight["exercise"] is None and tight["exercises"] == 1  # the exercise does not fit five minutes
    assert [part["how"] for part in tight["parts"]][1:] == ["run through"] * 3


def test_an_exercise_that_needs_a_later_chapter_is_chosen_only_when_no_other_is_there(tmp_path):
    def exercise(label, title, text=""):
        return [
            nbformat.v4.new_markdown_cell(f"```{{exercise-start}}\n:label: {label}\n```\n**{title}.** {text}"),
            nbformat.v4.new_markdown_cell("```{exercise-end}\n```"),
        ]

    later = "With the meter of [chapter 6](06_ecg_pipeline.ipynb)."
    chapter = nbformat.v4.new_notebook()
    chapter.cells = [nbformat.v4.new_markdown_cell("# A chapter"), nbformat.v4.new_code_cell("x = 1")]
    chapter.cells += exercise("ex-a", "Predict, then measure") + exercise("ex-b", "Find the copy", later)
    nbformat.write(chapter, tmp_path / "01_a.ipynb")
    assert teaching.chapter_plan("01_a", 30, 1.0, tmp_path)["exercise"] == "Exercise 1.1: Predict, then measure"
    chapter.cells = chapter.cells[:2] + exercise("ex-b", "Find the copy", later)  # the only one left
    nbformat.write(chapter, tmp_path / "01_a.ipynb")
    assert teaching.chapter_plan("01_a", 30, 1.0, tmp_path)["exercise"] == "Exercise 1.1: Find the copy"
    chapter.cells = chapter.cells[:2] + exercise("ex-a", "Predict, then measure") + exercise("ex-b", "Find the copy")
    nbformat.write(chapter, tmp_path / "01_a.ipynb")  # the control: without the link, the preferred one is chosen
    assert teaching.chapter_plan("01_a", 30, 1.0, tmp_path)["exercise"] == "Exercise 1.2: Find the copy"


def test_a_claim_that_stopped_the_seats_is_shown_beside_the_same_claim_alone():
    def claim(name, value, holds, kind="at_most", control=None):
        return {"name": name, "kind": kind, "value": value, "unit": "s", "holds": holds, "control": control,
                "factor": None, "difference": None}  # fmt: skip

    def run(gpu, limit, claims, date="2026-11-26", label="H100 80GB"):
        return evidence.ClaimRun(label, "nbval", gpu, "580", {}, limit, date, {"06_ecg_pipeline": claims})

    stopped = "cell 99: ClaimError: ecg.warm does not hold: 529 ms, needs at most 500 ms; the earlier defaults"
    beats = "cell 9: ClaimError: ecg.polars does not hold: 115 ms against 87.7 ms (Polars' GPU engine): 0.77×"
    seats = [
        rehearse.Seat(1, "teacher", [rehearse.ChapterAtSeat("06_ecg_pipeline", False, 9.0, stopped)]),
        rehearse.Seat(2, "participant", [rehearse.ChapterAtSeat("06_ecg_pipeline", False, 9.0, beats)]),
        rehearse.Seat(3, "participant", [rehearse.ChapterAtSeat("06_ecg_pipeline", False, 9.0, "cell 3: crash")]),
    ]
    done = rehearse.Rehearsal("two-hours", "16G", "H100", "580", 80 * GIB, "2026-11-26", 9.0, None, seats)
    alone = [
        run("H100", None, [claim("ecg.warm", 0.346, True)]),  # the latest whole-GPU run, later in the file below
        run("H100", None, [claim("ecg.warm", 0.4, True)], "2026-11-24"),  # older, though later in the file
        run("H200", None, [claim("ecg.warm", 0.1, True)]),  # another GPU: never the control
        run("H100", None, [claim("ecg.polars", 0.0344, True, "beats", 0.052)]),
    ]
    rows = teaching.claims_the_room_failed([done], alone)
    assert [(r["claim"], r["stopped seats"], r["at the seats"]) for r in rows] == [
        ("ecg.warm", 1, "529 ms; Run All stopped at cell 99: run the cells below it"),
        ("ecg.polars", 1, "115 ms against 87.7 ms; Run All stopped at cell 9: run the cells below it"),
    ]  # the crash is no claim; where Run All stopped, for the room to run the cells below it
    assert [r["stopped at"] for r in rows] == ["cell 99", "cell 9"]
    assert rows[0]["alone"] == "346 ms ✓ (H100 80GB, re-run and compared 2026-11-26)"  # by date, not file order
    assert rows[1]["alone"] == "34.4 ms against 52.0 ms ✓ (H100 80GB, re-run and compared 2026-11-26)"  # same fields
    assert rows[0]["rehearsal"] == (
        "this rehearsal (two-hours, 3 seats of 16G, 2026-11-26; which version of 06_ecg_pipeline ran is not recorded)"
    )
    alone.append(run("H100", 16 * GIB, [claim("ecg.warm", 0.339, True)], "2026-11-20", "16 GB (MPS limit)"))
    shared = teaching.claims_the_room_failed([done], alone)[0]["alone"]
    assert shared == "339 ms ✓ (16 GB (MPS limit), re-run and compared 2026-11-20)"  # the seats' own share first
    assert teaching.claims_the_room_failed([done], [])[0]["alone"] == "not recorded alone on this GPU"


def test_the_other_errors_at_the_seats_are_listed_once_each_with_their_seats():
    small = "cell 5: MemorySetupError: a pool of 4.00 GiB does not fit: the GPU has 3.50 GiB free of 79.18 GiB; ask"
    claim = "cell 9: ClaimError: ecg.warm does not hold: 529 ms, needs at most 500 ms"
    seats = [
        rehearse.Seat(1, "teacher", [rehearse.ChapterAtSeat("00_getting_started", False, 9.0, small)]),
        rehearse.Seat(2, "participant", [rehearse.ChapterAtSeat("00_getting_started", False, 9.0, small)]),
        rehearse.Seat(3, "participant", [rehearse.ChapterAtSeat("06_ecg_pipeline", False, 9.0, claim)]),
        rehearse.Seat(4, "participant", [rehearse.ChapterAtSeat("03_zero_copy", False, 9.0, "cell 2: " + "x" * 300)]),
        rehearse.Seat(5, "participant", [rehearse.ChapterAtSeat("03_zero_copy", True, 9.0)]),
        rehearse.Seat(
            6, "participant", [rehearse.ChapterAtSeat("03_zero_copy", False, 9.0, "not finished within 2100 s")]
        ),
    ]
    done = rehearse.Rehearsal("two-hours", "4G", "H100", "580", 80 * GIB, "2026-11-26", 9.0, None, seats)
    rows = teaching.errors_the_room_met([done], width=100)
    assert [(r["chapter"], r["stopped seats"]) for r in rows] == [("00_getting_started", 2), ("03_zero_copy", 1)]
    assert rows[0]["error"].startswith("cell 5: MemorySetupError: a pool of 4.00 GiB does not fit")
    assert len(rows[1]["error"]) == 100 and rows[1]["error"].startswith("cell 2: xxx")  # cut, not dropped
    assert rows[1]["error"].endswith(" …")  # the claim and the chapter never finished are not here
    assert rows[0]["rehearsal"] == (
        "this rehearsal (two-hours, 6 seats of 4G, 2026-11-26; which version of 00_getting_started ran is not recorded)"
    )
    assert teaching.errors_the_room_met([]) == []


def test_a_chapter_is_paced_by_its_slowest_seat_where_a_rehearsal_ran_it_slower_than_alone():
    def seat(number, seconds, passed=True):
        return rehearse.Seat(number, "participant", [rehearse.ChapterAtSeat("01_why_gpus", passed, seconds)])

    def rehearsal(agenda, seats, date="2026-11-26", check=True, interrupted=False):
        return rehearse.Rehearsal(
            agenda, "14G", "H100", "580", 80 * GIB, date, 9.0, None, seats, memory_check=check, interrupted=interrupted
        )

    small = rehearsal("two-hours", [seat(1, 900.0)])
    crowded = rehearsal("half-day", [seat(1, 300.0), seat(2, 5000.0, False)], "2026-11-25")  # any agenda counts
    unchecked = rehearsal("two-hours", [seat(n, 9e3) for n in range(9)], check=False)  # a share below the peaks
    cut = rehearsal("two-hours", [seat(n, 9e3) for n in range(9)], interrupted=True)
    failed = rehearsal("two-hours", [seat(n, 9e3, False) for n in range(4)])  # no seat passed it
    records = [small, crowded, unchecked, cut, failed]
    for number, made in enumerate(records, start=1):
        made.number = number
    found = teaching.seconds_at_the_seats(["01_why_gpus", "00_getting_started"], records)
    assert found == {  # no record of the current code: the slowest passing seat of any, not the most crowded
        "01_why_gpus": (
            900.0,
            "2 rehearsals of an earlier or unrecorded version (none of the current), rehearsal 1 (two-hours, 1 seat "
            "of 14G, 2026-11-26)",
        )
    }
    crowded.cells = {"01_why_gpus": rehearse.code_of("01_why_gpus")}  # the current code, only here
    found = teaching.seconds_at_the_seats(["01_why_gpus"], records)
    assert found["01_why_gpus"] == (
        300.0,
        "1 rehearsal of its current code, rehearsal 2 (half-day, 2 seats of 14G, 2026-11-25)",
    )  # the current code first, though slower seats ran an earlier one; passed seats only
    slots = {s["what"]: s["chapter"] for s in teaching.agenda_plan("two-hours", rehearsals=[crowded])}
    alone = slots["01_why_gpus"]["alone seconds"]
    assert slots["01_why_gpus"]["run seconds"] == max(alone, 300.0)
    assert slots["01_why_gpus"]["timed at"] == "slowest passing seat over " + found["01_why_gpus"][1]
    assert slots["00_getting_started"]["timed at"] == "alone on the whole GPU (no rehearsal on record ran it)"
    quick = rehearsal("two-hours", [seat(1, 1.0)])
    timed = teaching.agenda_plan("two-hours", rehearsals=[quick])[2]["chapter"]
    assert timed["run seconds"] == alone and timed["timed at"].startswith("alone on the whole GPU (not slower")


def test_set_up_cells_are_never_the_ones_live_coded():
    for chapter in ("00_getting_started", "03_zero_copy"):
        sections = {part["title"]: part for part in teaching.chapter_sections(chapter)}
        assert sections["One allocator for every measurement"]["setup"], chapter
        planned = teaching.chapter_plan(chapter, 60, 60.0)  # room enough to live-code every section
        for part in planned["parts"]:
            if sections[part["section"]]["setup"]:
                assert not part["how"].startswith("live 1"), (chapter, part)
        assert any(part["how"].startswith("live 1") for part in planned["parts"]), chapter


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("print(use_one_pool())", True),
        ("pool = memory.use_one_pool()", True),
        ("gpu = needs.check_gpu('03_zero_copy')\nenv.banner(env.GPU_STACK)", True),
        ("for x in y:\n    use_one_pool()", False),  # not a statement of the cell's own
        ('"use_one_pool() (RMM\'s pool)"', False),
        ('text = """\nuse_one_pool()\n"""', False),
        ("%%time\nuse_one_pool()", False),
    ],
)
def test_a_set_up_cell_is_one_that_calls_the_set_up_itself(source, expected):
    assert teaching.sets_up(source) is expected


def test_an_exercise_s_tool_met_in_a_section_run_through_is_named_for_the_teacher_to_show(tmp_path):
    chapter = nbformat.v4.new_notebook()
    chapter.cells = [nbformat.v4.new_markdown_cell("# A chapter")]
    chapter.cells += [nbformat.v4.new_markdown_cell("## First"), nbformat.v4.new_code_cell("x = 1")]
    chapter.cells.append(nbformat.v4.new_markdown_cell("## The meter"))
    chapter.cells += [nbformat.v4.new_code_cell("meter = traffic.TrafficMeter()") for _ in range(10)]
    chapter.cells += [
        nbformat.v4.new_markdown_cell(
            "```{exercise-start}\n:label: ex-a\n```\n**Find the copy.** Find where `leaky` copies "
            "with `traffic.TrafficMeter`."
        ),
        nbformat.v4.new_code_cell("def leaky(x):\n    return x\n\n\nmeter = traffic.TrafficMeter"),
        nbformat.v4.new_markdown_cell("```{exercise-end}\n```"),
    ]
    nbformat.write(chapter, tmp_path / "01_a.ipynb")
    parts = teaching.chapter_sections("01_a", tmp_path)
    exercise = next(part for part in parts if part["exercise"])
    assert teaching.where_met(parts, exercise) == {"traffic.TrafficMeter": ["The meter"]}  # not `leaky`: its own
    exercise["text"] = exercise["text"].replace("`leaky`", "`first`")  # `x = 1` in "First" names no `first`
    exercise["text"] = exercise["text"].replace("copies", "copies, with `as_tensor`")
    parts[1]["text"] += "torch.as_tensor(x)\n"  # torch's as_tensor is not a name of its own
    assert teaching.where_met(parts, exercise) == {"traffic.TrafficMeter": ["The meter"]}
    exercise["text"] += "\ntraffic.TrafficMeter = None\n"  # assigned in the exercise: its own, left out
    assert teaching.where_met(parts, exercise) == {}
    tight = teaching.chapter_plan("01_a", 12, 11.0, tmp_path)  # the exercise fits, the meter is run through
    assert tight["exercise"] == "Exercise 1.1: Find the copy"
    assert [part["how"] for part in tight["parts"]][-1] == "run through"
    assert tight["exercise needs"] == {"traffic.TrafficMeter": "The meter"}
    roomy = teaching.chapter_plan("01_a", 60, 11.0, tmp_path)  # the control: the meter's section is discussed
    assert roomy["parts"][-1]["how"].startswith("live") and roomy["exercise needs"] == {}
    chapter.cells[2].source = "meter = traffic.TrafficMeter()"  # met in "First" too, which the tight plan discusses
    nbformat.write(chapter, tmp_path / "01_a.ipynb")
    assert teaching.chapter_plan("01_a", 12, 11.0, tmp_path)["exercise needs"] == {}


def test_a_rehearsal_that_skipped_the_memory_check_or_was_cut_short_rehearsed_nothing_for_the_plan():
    def rehearsal(limit, chapters, check=True, interrupted=False):
        return rehearse.Rehearsal(
            "two-hours",
            limit,
            "H100",
            "580",
            80 * GIB,
            "2026-11-26",
            9.0,
            None,
            [],
            chapters,
            memory_check=check,
            interrupted=interrupted,
        )

    everything = list(teaching.AGENDAS["two-hours"])
    assert teaching.unrehearsed("two-hours", []) == everything
    small = rehearsal("4G", everything, check=False)  # a share below the chapters' peaks, on purpose
    cut = rehearsal("11G", everything, interrupted=True)
    assert teaching.unrehearsed("two-hours", [small, cut]) == everything
    assert teaching.rehearsed_at("two-hours", "4G", [small]) == [] == teaching.rehearsed_at("two-hours", "11G", [cut])
    first_two = rehearsal("14G", everything[:2])
    assert teaching.unrehearsed("two-hours", [small, first_two]) == everything[2:]
    assert teaching.rehearsed_at("two-hours", "14G", [first_two]) == everything[:2]
    assert teaching.rehearsed_at("two-hours", "16G", [first_two]) == []
    assert teaching.share_note("two-hours", "14G", [first_two]) == " (rehearsed at it: 2 of its 4 chapters)"
    assert teaching.share_note("two-hours", "14G", [rehearsal("14G", everything)]) == ""
    # the seats ran the same code whatever agenda it named: chapters 0 and 1 of the half day were rehearsed
    assert teaching.rehearsed_at("half-day", "14G", [first_two]) == everything[:2]
    mixed = rehearsal("14G", ["02_memory_layouts", "06_ecg_pipeline"])  # one chapter the two-hour agenda lacks
    assert teaching.unrehearsed("two-hours", [mixed]) == everything[:3]  # its chapter 6 counts all the same


def test_the_seats_per_chapter_count_every_rehearsal_of_its_current_code_in_each_room():
    chapter = "06_ecg_pipeline"
    claim = "In [54], cell 99: ClaimError: ecg.read_to_plot_warm does not hold: 854 ms against 1.30 s (x): 1.5×"
    crash = "In [50], cell 91: AssertionError: {'allocator': 'torch'}"

    def seats(*errors, teacher=True, kernels=1):
        made = [
            rehearse.Seat(n, "participant", [rehearse.ChapterAtSeat(chapter, error is None, 9.0, error)])
            for n, error in enumerate(errors, start=2)
        ]
        if kernels > 1:
            made[-1].kernels = kernels
        lead = rehearse.Seat(1, "teacher", [rehearse.ChapterAtSeat(chapter, True, 9.0)])
        return ([lead] if teacher else []) + made

    def rehearsal(agenda, seated, current=True, chapters=(chapter,), check=True):
        made = rehearse.Rehearsal(
            agenda, "14G", "H100", "580", 80 * GIB, "2026-11-27", 9.0, None, seated, list(chapters), memory_check=check
        )
        if current is not None:
            made.cells = {c: rehearse.code_of(c) if current else "an older hash" for c in chapters}
        return made

    records = [
        rehearsal("two-hours", seats(None, "cell 3: ValueError: an old bug"), current=False),  # replaced below
        rehearsal("two-hours", seats(None, None)),
        rehearsal("half-day", seats(claim, crash), chapters=("02_memory_layouts", chapter)),  # a mixed part
        rehearsal("two-hours", seats(crash, crash), check=False),  # a share chosen too small: not counted
        rehearsal("two-hours", seats(None, None, kernels=2), current=None),  # which code ran is not recorded
        rehearsal("two-hours", seats(None, claim, teacher=False)),  # no teacher's seat: another room
        rehearsal("two-hours", seats(None, "interrupted before it finished")),  # the same room, on another GPU
    ]
    records[-1].gpu = "H200"
    for number, made in enumerate(records, start=1):
        made.number = number
    rows = [row for row in teaching.seats_by_chapter("two-hours", records) if row["chapter"] == chapter]
    assert [teaching.room_text(row["room"]) for row in rows] == [
        "3 seats of 14G on H100, the teacher's among them",
        "3 seats of 14G on H100, 1 of them running two kernels at once, the teacher's among them",
        "2 seats of 14G on H100, no teacher's seat",
        "3 seats of 14G on H200, the teacher's among them",
    ]
    both, doubled, alone, elsewhere = rows
    assert both["named"] == "rehearsals 2, 3" and both["version"] == "current"  # both current ones, not the old
    assert both["said"] == (
        "2 of 4 participant seats passed; 2 of 2 teacher's seats passed; stopped: ecg.read_to_plot_warm at 1 seat "
        "in rehearsal 3, another error (AssertionError) at 1 seat in rehearsal 3"
    )
    assert elsewhere["said"].endswith("stopped: not finished at 1 seat")
    assert doubled["named"] == "rehearsal 5" and doubled["version"] == "earlier or not recorded"
    assert alone["said"] == "1 of 2 participant seats passed; stopped: ecg.read_to_plot_warm at 1 seat"
    others = [row for row in teaching.seats_by_chapter("two-hours", records) if row["chapter"] != chapter]
    assert others and not any(row["rehearsals"] for row in others)  # chapter 2 is not the two-hour agenda's
    records[1].seats[0].chapters[0] = rehearse.ChapterAtSeat(chapter, False, 9.0, claim)  # the teacher's, now
    text = teaching.room_sizes_text("two-hours", records[:2])
    assert "stopped: ecg.read_to_plot_warm at 1 seat (the teacher's)" in text
    assert "not rehearsed in this room: 00_getting_started, 01_why_gpus, 03_zero_copy" in text
    assert teaching.room_sizes_text("two-hours", []) == "  rehearsed: not yet (make rehearse AGENDA=two-hours)"


def test_a_rehearsal_of_part_of_an_agenda_names_its_chapters_whole():
    seats = [rehearse.Seat(1, "teacher", [rehearse.ChapterAtSeat("04_memory_pools", True, 9.0)])]
    part = rehearse.Rehearsal("half-day", "16G", "H100", "580", 80 * GIB, "2026-11-26", 9.0, None, seats)
    part.chapters = ["04_memory_pools", "04_watching_memory"]  # both start with 04
    assert teaching.rehearsal_label(part) == (
        "this rehearsal (half-day: chapters 04_memory_pools, 04_watching_memory; 1 seat of 16G, 2026-11-26)"
    )
    part.chapters = ["06_ecg_pipeline"]
    assert "(half-day: chapter 06_ecg_pipeline; 1 seat" in teaching.rehearsal_label(part)
