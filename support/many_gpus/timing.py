"""The chapter's stages timed on one cluster, and the clusters set side by side.

- :func:`measure_stages` times the reads (from disk and from the page cache), the scoring and both rankings on
  one cluster, with the bytes the workers sent, each worker's load, every task's duration and each GPU's
  utilisation while the workers scored: a :class:`ScalingRun`;
- :func:`mirrored_order` is the order the clusters start in (A B C C B A), and :func:`pool_runs` pools the runs of
  each placement;
- :func:`scaling_table` and :func:`spread_table` set them side by side; :func:`second_gpu_speedup` bounds what the
  second GPU buys against two workers on one;
- :func:`job_bounds` bounds a job made of several stages (the read, then the scoring) from its stages' repeats;
- :func:`second_gpu_scoring` gathers the inputs of the chapter's headline (the second GPU against both one-GPU
  clusters, on scoring), and :func:`second_gpu_with_the_read` adds the read to the scoring;
- :func:`task_table` and :func:`task_median` set a recording's scoring task beside its read task.
"""

from __future__ import annotations

import dataclasses
import functools
import statistics
from dataclasses import dataclass

import pandas as pd

from support.bench import Timing, format_ratio, format_seconds, time_wall
from support.many_gpus.cluster import PLACEMENTS, Placement
from support.many_gpus.host import time_cold
from support.many_gpus.models import GlobalModel
from support.many_gpus.ranking import bytes_between_workers, rank_every_beat, rank_recordings, summaries_and_bytes
from support.many_gpus.recordings import read_everywhere
from support.many_gpus.scoring import score_everywhere, table_bytes
from support.many_gpus.task_stream import busy_span, busy_window, task_seconds, worker_load
from support.many_gpus.utilisation import BUSY, UtilisationSampler, pooled, summarize
from support.units import describe_bytes


@dataclass
class ScalingRun:
    """The stages of the chapter timed on one cluster: their wall-clock timings (every repeat kept), the bytes
    the workers sent during each ranking (to each other and to the notebook; beside the size of all beat tables)
    and the bytes the summaries brought to the notebook, both rankings themselves (to check that every cluster
    computes the same), the duration of every task of the timed reads and scoring runs (:data:`TASKS`), and every
    GPU's utilisation sampled while the workers were busy with the timed scoring runs
    (:mod:`support.many_gpus.utilisation`; empty without NVML)."""

    placement: Placement
    timings: dict[str, object]  # stage -> support.bench.Timing
    sent: dict[str, int]  # ranking stage -> bytes the workers sent (to one another and to the notebook)
    gathered: int  # bytes of the per-recording summaries gathered into the notebook
    ranking: object  # pandas DataFrame: rank_recordings
    top: object  # pandas DataFrame: rank_every_beat
    table_bytes: int  # the beat tables' size in memory, all together
    load: object  # pandas DataFrame: each worker's tasks in the last timed read and score (worker_load)
    starts: int = 1  # how many clusters were started for these repeats (pool_runs adds them up)
    utilisation: dict = dataclasses.field(default_factory=dict)  # GPU -> samples (percent) while workers scored
    tasks: dict = dataclasses.field(default_factory=dict)  # TASKS key -> every timed task's duration (seconds)

    @property
    def workers(self) -> int:
        return self.placement.workers


#: The stages :func:`measure_stages` times, in order. Each "on the workers" line is the stage above it seen from the
#: workers: from the start of its first task to the end of its last, without the notebook's part (sending the
#: tasks, hearing back).
STAGES = (
    "read from disk",
    "read from the page cache",
    "  read: on the workers",
    "score every recording",
    "  score: on the workers",
    "rank: summaries gathered",
    "rank: every beat (shuffle)",
)

#: The tasks whose every duration :func:`measure_stages` keeps (:attr:`ScalingRun.tasks`), from the task stream of
#: the timed runs: a recording read from disk (where it was timed), read from the page cache, and scored.
TASKS = ("read from disk", "read from the page cache", "score")


def measure_stages(
    client,
    paths,
    model: GlobalModel,
    metadata,
    *,
    on: str = "cpu",
    warmup: int = 1,
    repeat: int = 5,
    fine_tune_epochs: int = 0,
    placement: Placement | None = None,
    cold: bool = True,
):
    """Time each of :data:`STAGES` on ``client``'s cluster with the wall clock (``warmup`` untimed runs, then
    ``repeat`` timed ones): every recording read (:func:`read_everywhere`) until all are in memory, from the disk
    (:func:`time_cold`) and from the page cache; then every recording scored (:func:`score_recording` with
    ``fine_tune_epochs``, one task each, where its recording lives; the model travels with each task) until
    every table is done, with every GPU's utilisation sampled during the timed runs (:class:`UtilisationSampler`);
    then the two rankings of the last timed run's tables: the per-recording summaries computed where the tables
    live and gathered (:func:`rank_recordings`), and every beat ranked across recordings (:func:`rank_every_beat`,
    a shuffle). ``placement`` says what the cluster is (by default: its workers, one per GPU). ``cold=False``
    leaves the read from disk out (where nothing can be dropped from the page cache, as on ``tmpfs``, it would time
    the read from the page cache again). The utilisation samples kept are those taken while the workers were busy
    (from each timed run's first task start to its last task end), not while the notebook handed tasks out and
    heard back; the duration of every task of the timed runs is kept per kind (:data:`TASKS`). Returns a
    :class:`ScalingRun`."""
    from distributed import get_task_stream, wait

    streams = {"read": [], "score": []}

    def streamed(kind, start):
        with get_task_stream(client) as stream:
            futures = start()
            wait(futures)
        streams[kind].append(stream.data)
        return futures

    def read():
        return streamed("read", lambda: read_everywhere(client, paths, fs=model.fs, on=on))

    timings = {STAGES[0]: time_cold(read, paths, label=STAGES[0], warmup=warmup, repeat=repeat)} if cold else {}
    timings[STAGES[1]] = time_wall(read, label=STAGES[1], warmup=warmup, repeat=repeat)
    recordings = read()

    latest = []  # the tables of the last scoring run, held so that the rankings rank them

    def score():
        def start():
            return score_everywhere(client, recordings, model, on=on, fine_tune_epochs=fine_tune_epochs)

        latest[:] = [streamed("score", start)]
        return latest[0]

    for _ in range(warmup):  # untimed, and outside the utilisation samples
        score()
    with UtilisationSampler() as sampler:
        timings[STAGES[3]] = time_wall(score, label=STAGES[3], warmup=0, repeat=repeat)
    # the streams of the timed runs: the cold reads come first (after their warm-ups), the warm reads last but
    # for the read after them (the one kept); the warm-up's streams come before the timed ones of each kind
    timed = {"read from the page cache": streams["read"][:-1][-repeat:], "score": streams["score"][-repeat:]}
    if cold:
        timed["read from disk"] = streams["read"][warmup : warmup + repeat]
    for kind, label in (("read from the page cache", STAGES[2]), ("score", STAGES[4])):
        timings[label] = Timing(label, tuple(busy_span(records) for records in timed[kind]), "wall")
    function = {
        "read from disk": "read_recording",
        "read from the page cache": "read_recording",
        "score": "score_recording",
    }
    tasks = {
        kind: tuple(x for records in timed[kind] for x in task_seconds(records, function=function[kind]))
        for kind in TASKS
        if kind in timed
    }
    busy_samples = sampler.within(busy_window(records) for records in timed["score"])
    load = pd.concat({kind: worker_load(streams[kind][-1]) for kind in streams}, names=["stage", "worker"])
    tables = latest[0]  # the last timed run's: no scoring run more than the repeats
    summaries, gathered, sent_by_summaries = summaries_and_bytes(client, tables)
    before = bytes_between_workers(client)
    top = rank_every_beat(tables, on=on)
    sent = {STAGES[5]: sent_by_summaries, STAGES[6]: bytes_between_workers(client) - before}
    timings[STAGES[5]] = time_wall(
        lambda: rank_recordings(summaries_and_bytes(client, tables)[0], metadata),
        label=STAGES[5],
        warmup=warmup,
        repeat=repeat,
    )
    timings[STAGES[6]] = time_wall(
        functools.partial(rank_every_beat, tables, on=on), label=STAGES[6], warmup=warmup, repeat=repeat
    )
    tables_size = sum(client.gather(client.map(table_bytes, tables)))
    placement = placement or Placement(len(client.scheduler_info()["workers"]))
    return ScalingRun(
        placement,
        {s: timings[s] for s in STAGES if s in timings},
        sent,
        gathered,
        rank_recordings(summaries, metadata),
        top,
        int(tables_size),
        load,
        utilisation=busy_samples,
        tasks=tasks,
    )


def second_gpu_speedup(shared: ScalingRun, own: ScalingRun, stage: str) -> dict[str, float]:
    """What the second GPU buys on ``stage``: the time of two workers sharing one GPU (``shared``) over that of two
    workers on a GPU each (``own``), by median, and as the repeats bound it: the fastest shared repeat over the
    slowest own one (``"at least"``, what every repeat supports) and the slowest over the fastest (``"at most"``)."""
    if shared.workers != own.workers or shared.placement.gpus >= own.placement.gpus:
        raise ValueError(f"compare as many workers on fewer GPUs with more, not {shared.placement} and {own.placement}")
    few, many = shared.timings[stage], own.timings[stage]
    return {"at least": few.min / many.max, "median": few.median / many.median, "at most": few.max / many.min}


def job_bounds(run: ScalingRun, stages) -> dict[str, float]:
    """A job made of ``stages`` one after the other (say ``["read from disk", "score every recording"]``), as
    ``run``'s repeats bound it: ``"fastest"`` adds each stage's fastest repeat, no repeat of the whole job could
    have been faster; ``"slowest"`` adds each stage's slowest, none could have been slower. The stages are timed
    one after the other, not as one job, so these bounds are what the repeats support without pairing them."""
    stages = list(stages)  # read twice below: a generator would be spent by the first pass
    missing = [stage for stage in stages if stage not in run.timings]
    if not stages or missing:
        named = missing or "none named"
        raise ValueError(f"name stages {run.placement.label!r} timed: {named} not among {list(run.timings)}")
    return {
        "fastest": sum(run.timings[stage].min for stage in stages),
        "slowest": sum(run.timings[stage].max for stage in stages),
    }


def scaling_table(runs):
    """The stages side by side on every cluster of ``runs`` (a sequence of :class:`ScalingRun`: median times), and
    the bytes the workers sent during each ranking on the last (to each other and to the notebook: a worker counts
    both alike; a stage only where every run timed it); where the last two runs are as many workers on fewer GPUs
    and on more, also the second GPU's speed-up by median (:func:`second_gpu_speedup`), in a column named for the
    cluster it divides: ``"speed-up vs 2 workers, 1 GPU"``. A pandas DataFrame."""
    *_, last = runs
    pair = runs[-2:] if len(runs) > 1 else []
    compared = bool(pair) and pair[0].workers == last.workers and pair[0].placement.gpus < last.placement.gpus
    rows = []
    for stage in (s for s in STAGES if all(s in run.timings for run in runs)):  # what every cluster timed
        row = {"stage": stage} | {run.placement.label: format_seconds(run.timings[stage].median) for run in runs}
        if compared:
            row[f"speed-up vs {pair[0].placement.label}"] = format_ratio(second_gpu_speedup(*pair, stage)["median"])
        row[f"sent by the workers ({last.placement.label})"] = (
            describe_bytes(last.sent[stage]) if stage in last.sent else ""
        )
        rows.append(row)
    return pd.DataFrame(rows).set_index("stage")


def spread_table(runs, stage: str):
    """The spread of one stage's repeats on every cluster of ``runs``: how many, the fastest, the median and the
    slowest (seconds, as numbers); a pandas DataFrame, one row per cluster."""
    rows = []
    for run in runs:
        timing = run.timings[stage]
        rows.append(
            {
                "cluster": run.placement.label,
                "repeats": len(timing.samples),
                "fastest": timing.min,
                "median": timing.median,
                "slowest": timing.max,
            }
        )
    return pd.DataFrame(rows).set_index("cluster")


def mirrored_order(placements) -> list:
    """``placements`` in order, then again in reverse (A B C C B A): the order to start the clusters in. Whatever
    drifts over the run (a warming GPU, a filling page cache) then falls on every placement alike, early and
    late, and :func:`pool_runs` pools each placement's starts.

    >>> mirrored_order("ABC")
    ['A', 'B', 'C', 'C', 'B', 'A']
    """
    placements = list(placements)
    return placements + placements[::-1]


def pool_runs(runs) -> list[ScalingRun]:
    """The runs of ``runs`` pooled by placement, in the order each placement first appears: every stage's repeats
    of all the runs of one placement in one :class:`support.bench.Timing` (so that the spread spans the clusters
    started for it, not one start's repeats), and the GPUs' utilisation samples of all of them together; the rest
    (bytes, rankings, load) from that placement's last run. Run the clusters in a mirrored order (A B C C B A) and
    pool them: drift over the run (a warming GPU, a filling page cache) then weighs on every placement alike."""
    if not runs:
        raise ValueError("no runs to pool: measure at least one cluster")
    groups: dict[Placement, list[ScalingRun]] = {}
    for run in runs:
        groups.setdefault(run.placement, []).append(run)
    together = []
    for mine in groups.values():
        timings = {
            stage: Timing(stage, tuple(x for run in mine for x in run.timings[stage].samples), "wall")
            for stage in mine[0].timings
        }
        starts = sum(run.starts for run in mine)
        samples = pooled(*(run.utilisation for run in mine))
        tasks = {kind: tuple(x for run in mine for x in run.tasks.get(kind, ())) for kind in mine[0].tasks}
        together.append(dataclasses.replace(mine[-1], timings=timings, starts=starts, utilisation=samples, tasks=tasks))
    return together


def utilisation_table(runs, *, busy: float | None = None):
    """Each GPU's utilisation while each cluster of ``runs`` scored (:attr:`ScalingRun.utilisation`): one row per
    cluster and GPU (NVML's numbering), with the mean utilisation (percent), the share of samples at or above
    ``busy`` percent (:data:`support.many_gpus.utilisation.BUSY` by default) and the number of samples. Empty
    where no GPU was sampled (no NVML). A pandas DataFrame."""
    rows = []
    for run in runs:
        for gpu, numbers in summarize(run.utilisation, busy=BUSY if busy is None else busy).items():
            rows.append({"cluster": run.placement.label, "GPU": gpu} | numbers)
    columns = ["cluster", "GPU", "mean", "busy share", "samples"]
    return pd.DataFrame(rows, columns=columns).set_index(["cluster", "GPU"])


def task_median(runs, kind: str) -> float:
    """The median duration of every task of ``kind`` (one of :data:`TASKS`) over all of ``runs`` together: every
    cluster's timed repeats pooled, so that no one cluster is chosen. Raises if no run kept such tasks (a read from
    disk where none was timed)."""
    pooled_tasks = [x for run in runs for x in run.tasks.get(kind, ())]
    if not pooled_tasks:
        raise ValueError(f"no run kept a {kind!r} task: {sorted({k for run in runs for k in run.tasks})} were kept")
    return statistics.median(pooled_tasks)


def task_table(runs):
    """A recording's scoring task beside its read task, per cluster of ``runs`` and for all of them together (the
    last row, ``"every cluster"``): the median duration of each kind of task in :data:`TASKS` that every run kept,
    and how many times the scoring task's median is each read's. A pandas DataFrame of printed values (durations as
    :func:`support.bench.format_seconds` writes them, ratios with ×)."""
    kinds = [kind for kind in TASKS if all(run.tasks.get(kind) for run in runs)]
    if "score" not in kinds:
        raise ValueError("every run needs its scoring tasks: measure them with measure_stages")
    reads = [kind for kind in kinds if kind != "score"]
    rows = []
    for label, group in [(run.placement.label, [run]) for run in runs] + [("every cluster", list(runs))]:
        medians = {kind: task_median(group, kind) for kind in kinds}
        row = {"cluster": label, "scoring task": format_seconds(medians["score"])}
        row |= {f"read task ({kind})": format_seconds(medians[kind]) for kind in reads}
        row |= {f"scoring / read ({kind})": format_ratio(medians["score"] / medians[kind]) for kind in reads}
        rows.append(row)
    return pd.DataFrame(rows).set_index("cluster")


#: The stage the headline compares: scoring, as the workers' task stream timed it (without the notebook's part).
SCORING = STAGES[4]


def _by_placement(runs) -> tuple[ScalingRun, ScalingRun, ScalingRun | None]:
    """The runs of one worker on one GPU, of two on one GPU and of two on two GPUs (None where it did not run),
    from pooled ``runs``."""
    found = {run.placement: run for run in runs}
    one, shared, own = PLACEMENTS
    missing = [p.label for p in (one, shared) if p not in found]
    if missing:
        raise ValueError(f"the one-GPU clusters are the controls: measure {missing} (runs of {list(found)} given)")
    return found[one], found[shared], found.get(own)


@dataclass(frozen=True)
class SecondGpuScoring:
    """The inputs of the chapter's headline, on scoring (:data:`SCORING`): what a second process gained on one GPU
    (``process_gain``: one worker alone over two on one GPU, medians), and where two GPUs ran, what the second
    GPU gained against two workers on one GPU as the repeats bound it (``bounds``, :func:`second_gpu_speedup`),
    the slowest two-GPU repeat (``slowest_two_gpus``) and the fastest repeat of each one-GPU cluster
    (``fastest_repeats``, by label): the claim's value and its control."""

    process_gain: float
    bounds: dict[str, float] | None = None
    slowest_two_gpus: float | None = None
    fastest_repeats: dict[str, float] = dataclasses.field(default_factory=dict)

    @property
    def two_gpus(self) -> bool:
        """Whether a two-GPU cluster ran."""
        return self.bounds is not None

    @property
    def fastest_one_gpu(self) -> float:
        """The fastest repeat of either one-GPU cluster: the control of the second GPU's claim."""
        if not self.fastest_repeats:
            raise ValueError("no two-GPU cluster ran: there is no second GPU to set against the one-GPU clusters")
        return min(self.fastest_repeats.values())

    def lines(self) -> list[str]:
        """The lines the chapter prints: the second process, then (with two GPUs) the second GPU's bounds against
        two workers on one GPU and the slowest two-GPU repeat against each one-GPU cluster's fastest."""
        lines = [f"a second process on the same GPU, scoring: {format_ratio(self.process_gain)}"]
        if self.two_gpus:
            bounds = ", ".join(f"{name} {format_ratio(value)}" for name, value in self.bounds.items())
            lines.append(f"the second GPU against two workers on one, scoring: {bounds}")
            lines += [
                f"the slowest two-GPU repeat against {label}: {format_ratio(fastest / self.slowest_two_gpus)}"
                for label, fastest in self.fastest_repeats.items()
            ]
        return lines


def second_gpu_scoring(runs) -> SecondGpuScoring:
    """What a second process on one GPU, and a second GPU, did to scoring (:data:`SCORING`) in pooled ``runs`` (one
    per placement of :data:`~support.many_gpus.cluster.PLACEMENTS`; the two-GPU one may be missing, on a machine
    with one GPU): a :class:`SecondGpuScoring`."""
    one, shared, own = _by_placement(runs)
    process_gain = one.timings[SCORING].median / shared.timings[SCORING].median
    if own is None:
        return SecondGpuScoring(process_gain)
    return SecondGpuScoring(
        process_gain,
        second_gpu_speedup(shared, own, SCORING),
        own.timings[SCORING].max,
        {run.placement.label: run.timings[SCORING].min for run in (one, shared)},
    )


@dataclass(frozen=True)
class ReadAndScoring:
    """The second GPU on a read (``read``, a stage of :data:`STAGES`) and the scoring after it: the read alone
    against two workers on one GPU (``read_alone``, medians), the two added as the repeats bound them
    (``together``: either one-GPU cluster's fastest job over the two-GPU cluster's slowest, :func:`job_bounds`),
    and the read's share of the two on two GPUs (``read_share``, medians)."""

    read: str
    read_alone: float
    together: float
    read_share: float

    def lines(self) -> list[str]:
        """The lines the chapter prints, one per figure."""
        return [
            f"the second GPU, {self.read} alone (median): {format_ratio(self.read_alone)}",
            f"the second GPU, {self.read} and scoring added (slowest two-GPU "
            f"against fastest one-GPU): {format_ratio(self.together)}",
            f"the read's share of the two on two GPUs (medians): {self.read_share:.1%}",
        ]


def second_gpu_with_the_read(runs, read: str) -> ReadAndScoring:
    """The second GPU on ``read`` (``"read from disk"``, or ``"read from the page cache"`` where no disk was
    timed) and on the read and the scoring (``"score every recording"``, as the notebook timed it) added, in
    pooled ``runs`` with a two-GPU cluster: a :class:`ReadAndScoring`. The stages were timed one after the other,
    not as one job, so the sum takes the same cautious pair as the headline: the two-GPU cluster at its slowest
    against either one-GPU cluster at its fastest."""
    one, shared, own = _by_placement(runs)
    if own is None:
        raise ValueError("no two-GPU cluster ran: measure one to set the read beside the scoring on two GPUs")
    job = [read, STAGES[3]]
    fastest_one_gpu = min(job_bounds(run, job)["fastest"] for run in (one, shared))
    read_time, score_time = (own.timings[stage].median for stage in job)
    return ReadAndScoring(
        read,
        second_gpu_speedup(shared, own, read)["median"],
        fastest_one_gpu / job_bounds(own, job)["slowest"],
        read_time / (read_time + score_time),
    )
