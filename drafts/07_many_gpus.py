# ---
# jupyter:
#   book:
#     gpus: 2
#     needs_gpu: true
#   jupytext:
#     notebook_metadata_filter: book,kernelspec
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Beyond one GPU: many recordings on two GPUs with Dask
#
# Chapter 6 followed one twenty-hour recording from CSV to anomaly scores on one GPU. A cardiology department
# has thousands of recordings, and a server often has more than one GPU. This chapter scores sixteen recordings
# on two GPUs with the engine the RAPIDS ecosystem uses for this, [Dask](https://docs.dask.org) with
# [Dask-CUDA](https://docs.rapids.ai/api/dask-cuda/stable/), and measures what the second GPU buys.
#
# | section | what it shows |
# | --- | --- |
# | one worker per GPU | `LocalCUDACluster`: a process per GPU, each with its own RMM pool |
# | the recordings | sixteen recordings written by the workers themselves |
# | one model for all | why one model, trained on a sample, scores every recording |
# | every recording, where it lives | a read and a scoring task per recording, zero-copy in each worker |
# | the ranking | a stage that needs every recording at once: a shuffle, or a broadcast |
# | one GPU against two | the same stages on one worker and on two, in one run |
# | spilling, the dashboard, other transports | what to reach for when a job does not fit |
# | beyond one machine | the same code against a cluster of servers |
#
# The code is in `support/many_gpus/`; its unit tests run it on a CPU cluster of two processes.

# %%
from support import env, needs
from support.many_gpus import scale

needs.check_gpu("07_many_gpus", gpus=2)
env.banner(env.GPU_STACK + ("dask", "distributed", "dask_cuda", "dask_cudf"))

# %%
fig = scale.cluster_diagram()

# %% [markdown]
# The cluster of this chapter. The notebook is Dask's *client*: it describes tasks and hands them to the
# *scheduler*, which gives each to a free *worker*. A worker is a process that owns one GPU and one memory pool
# on it; the samples of a recording never leave the GPU that read them. Only the last stage moves data between
# workers, and the chapter measures it.

# %% [markdown]
# ## One worker per GPU
#
# `dask_cuda.LocalCUDACluster` starts a scheduler and one worker process per GPU. Each worker gets its own
# `CUDA_VISIBLE_DEVICES`, rotated so that its GPU comes first: inside worker 1, "device 0" is the second GPU, and
# code written for one GPU runs unchanged. Each worker runs one task at a time (`threads_per_worker=1`, the
# default), so two recordings never compete for one GPU.
#
# Chapter 4's lesson applies per process: `rmm_pool_size` makes each worker reserve an RMM pool when it starts, and
# `rmm_allocator_external_lib_list=["cupy", "torch"]` points CuPy and PyTorch at it, as `use_one_pool` did in
# chapter 6. `scale.make_cluster("gpu")` passes both; `worker_devices` asks every worker what it sees.

# %%
import tempfile
import time
from pathlib import Path

import pandas as pd
from distributed import Client, get_task_stream, wait

from support.bench import format_ratio, format_seconds
from support.memory import describe_bytes

pd.set_option("display.expand_frame_repr", False)
HOURS, COUNT, FS = 20, 16, 250.0
workdir = Path(tempfile.mkdtemp(prefix="ecg-many-"))

cluster = scale.make_cluster("gpu", rmm_pool_size="8GB")
client = Client(cluster)
devices = scale.worker_devices(client)
devices

# %%
first_gpu = devices["CUDA_VISIBLE_DEVICES"].str.split(",").str[0]
assert (
    len(devices) == 2 and first_gpu.nunique() == 2
)  # each worker has a GPU of its own
assert devices["memory resource"].str.contains("Pool").all()

# %% [markdown]
# ## Sixteen recordings, written by the workers
#
# The data are sixteen recordings of chapter 6's generator, twenty hours each, with different seeds; every
# third has three times the ectopic beats of the others. Each recording is one CSV, as a Holter device exports it,
# with its truth (where the beats are, and which are anomalies) in a small file beside it, and the metadata
# table says which recording is which.
#
# Writing them is itself a job for the cluster: `write_recordings` with a client makes one task per recording,
# and each worker synthesizes its recordings on its own GPU and writes them with cuDF.

# %%
specs = scale.recording_specs(COUNT, HOURS)
start = time.perf_counter()
paths, metadata = scale.write_recordings(workdir, specs, on="gpu", client=client)
written = time.perf_counter() - start
size = sum(path.stat().st_size for path in paths)
print(
    f"{COUNT} recordings of {HOURS} h: {describe_bytes(size)} of CSV, "
    f"written in {format_seconds(written)}"
)
metadata.head(4)

# %% [markdown]
# ## Which engine: dask-cuDF's `read_csv`, or one task per file
#
# Dask offers two ways in. `dask_cudf.read_csv("*.csv")` makes one large data frame of all the files, cut into
# partitions of about 256 MB; `map_partitions` then runs a function on each partition. That is the right tool
# for tables whose rows stand on their own. A recording is not such a table: filtering and beat detection need
# each sample's neighbours, and a partition boundary in the middle of a recording would cut beats in two and
# break the filter at the edges.
#
# So the unit of work here is the recording, in two tasks per file. `read_recording` reads one CSV into its
# worker's GPU; its result stays on that worker as a *future*, and only a handle comes back to the notebook.
# `score_recording` then runs chapter 6's stages on that recording, and the scheduler runs it on the worker that
# holds the recording: Dask brings tasks to the data instead of data to the notebook. Its result, a cuDF table of
# the recording's beats, stays there too. `read_everywhere` deals the files out to the workers in turn and pins
# each read to its worker, as a cluster whose servers each hold their own files on disk would read them.
# `make_cluster` turns Dask's *work stealing* off (the scheduler moving a waiting task, with the data it needs, to
# an idle worker): here every task already waits where its recording is, and moving a recording from one GPU to
# the other would cost more than scoring it.

# %% [markdown]
# ## One model for every recording
#
# Chapter 6 trained an autoencoder per recording. Here one model scores every recording, trained on beats
# sampled from four of them. Three reasons:
#
# - **What "normal" means.** A model trained on one recording learns that recording's beats. A recording with many
#   ectopic beats teaches its own model that they are normal and hides them; a model trained across recordings
#   learns what normal beats look like in general.
# - **Comparable scores.** One model and one threshold make "share of beats flagged" mean the same in every
#   recording, so the recordings can be ranked against each other.
# - **Cost.** Training is the pipeline's most expensive stage (chapter 6); scoring is cheap. One training,
#   then sixteen scorings, beats sixteen trainings.
#
# Real patients differ more than this generator's seeds do; a model per patient, fine-tuned from the global
# one, is the next step when they do. The training runs as one task on a worker; the trained model comes back on
# the CPU, small enough to travel with every scoring task.

# %%
sample = [str(path) for path in paths[:4]]
model = client.submit(scale.train_on_sample, sample, on="gpu", pure=False).result()
print(f"trained on {model.trained_on:,} beats from {len(sample)} recordings")

# %% [markdown]
# ## Every recording, scored where it lives
#
# One read and one scoring task per recording; `wait` returns when every table is done. `get_task_stream`
# records what each worker did and when, the same record the dashboard's "Task Stream" plot draws, and
# `task_stream_figure` draws it for the page.

# %%
with get_task_stream(client) as stream:
    recordings = scale.read_everywhere(client, paths, on="gpu")
    tables = client.map(
        scale.score_recording, recordings, model=model, on="gpu", pure=False
    )
    wait(tables)
holders = client.who_has(tables)
per_worker = pd.Series([a for held in holders.values() for a in held]).value_counts()
assert list(per_worker) == [COUNT // 2] * 2  # each scored where its half was read
fig = scale.task_stream_figure(stream.data, title="Sixteen recordings on two GPUs")

# %% [markdown]
# Each bar is one task on one worker, from the moment it started to the moment it finished: the reads of the
# worker's half of the recordings, then their scoring, which starts as soon as a recording is in memory. Where a
# worker's first scoring bar is longer than the others, that task compiled the Numba kernels and planned the FFTs
# in that process; later tasks reuse them.
#
# How good are the scores? Every recording has its truth beside it, and `recording_quality` runs where each table
# lives, reads the truth and sends back one row. The four recordings the model sampled for training are marked:
# the other twelve are recordings it has never seen.

# %%
judged = client.map(scale.recording_quality, tables, folder=str(workdir))
quality = pd.DataFrame(client.gather(judged))
quality["in training sample"] = quality["recording"].isin(
    [Path(p).stem for p in sample]
)
print(quality.round(3).to_string(index=False))

# %%
unseen = quality[~quality["in training sample"]]
assert unseen["auroc"].min() >= 0.95, unseen
assert unseen["auroc ectopic vs normal"].min() >= 0.95, unseen

# %% [markdown]
# ### Zero-copy inside each worker
#
# Chapter 6's traffic meter works in any process that uses the GPU. `beat_table_traffic` runs one recording's
# stages under the meter and returns what crossed the host link in each stage; `client.run` runs it on a chosen
# worker, outside the task queue (in the worker's main thread, where the profiler under the meter insists on
# starting). The same recording runs once on each worker.

# %%
workers = sorted(client.scheduler_info()["workers"])
traffic = {}
for k, address in enumerate(workers):
    seen = client.run(
        scale.beat_table_traffic, str(paths[0]), model, on="gpu", workers=[address]
    )
    traffic[f"worker {k}"] = seen[address]
rows = [
    {
        "worker": worker,
        "stage": stage,
        "host → GPU": describe_bytes(c.host_to_device),
        "GPU → host": describe_bytes(c.device_to_host),
    }
    for worker, stages in traffic.items()
    for stage, c in stages.items()
]
print(pd.DataFrame(rows).to_string(index=False))

# %%
csv_bytes = paths[0].stat().st_size
for worker, stages in traffic.items():
    assert stages["read"].host_to_device >= csv_bytes, worker  # the CSV's bytes, once
    after_read = sum(c.across_host_link for name, c in stages.items() if name != "read")
    assert after_read < 2**20, (worker, after_read)  # the rest stays on the GPU

# %% [markdown]
# The CSV's bytes cross once, when cuDF reads them; after that, the stages exchange data on the GPU, on
# either worker. What else crosses is small: the model's weights on their way in (`score`: the model travels
# with the task, on the CPU), a little that cuDF's reader reads back while it parses, and a few scalars (a count,
# a threshold).
#
# ## The ranking: a stage that needs every recording at once
#
# So far each task needed one recording. Ranking the recordings by their share of flagged beats, with what the
# metadata says about each, needs all of them: every beat table is joined with the metadata table on the
# recording's name, then grouped by recording.
#
# `rank_recordings` builds a Dask DataFrame of cuDF partitions from the futures (`dd.from_delayed`): the tables
# stay where they are. A join of two partitioned tables is a **shuffle**: both sides are cut by a hash of the
# key, and every worker sends each row to the partition that owns its key, so that matching rows meet. On two
# GPUs, the rows whose partition lies on the other worker change workers. When one side is small, a **broadcast**
# join sends that side to every partition of the other instead, and the beat rows need not move. Left to itself,
# Dask would not shuffle for a table this small; `rank_recordings` asks for each kind of join explicitly, to
# measure both.

# %%
ranking = scale.rank_recordings(tables, metadata, on="gpu")
print(ranking.round(4).to_string(index=False))

# %%
high = set(metadata.loc[metadata["ectopic_rate"] > 0.02, "recording"])
assert set(ranking["recording"][: len(high)]) == high  # they lead the ranking

# %% [markdown]
# The recordings with three times the ectopic beats lead the ranking, and their share of short RR intervals
# (premature beats) says the same from the beat timing alone, without the model.
#
# ## One GPU against two
#
# Now the same stages on one worker and on two, on the same files and with the same model, in one run. Each stage
# is timed with the wall clock (the work is spread over processes), after a warm-up run, as the median of five:
#
# - "read every recording": from the first `client.map` in the notebook to the moment `wait` returns with every
#   recording in GPU memory, each worker reading its share;
# - "score every recording": from `client.map` to the moment every table is done, each task where its recording
#   lives. The model (its weights: the `score` row of the traffic table) travels with each task;
# - each "on the workers" line: the same runs seen from the task stream, from the start of the first task to the
#   end of the last: the workers' part, without the notebook's (sending the tasks, hearing that they are done);
# - each ranking: from the merge to the ranked table in the notebook.
#
# Both clusters are started afresh for the comparison, the same way, one after the other. The cluster of the
# tour above is closed first: its workers ran the traffic meter's profiler, trained the model and joined the
# tables, and a process keeps some of what it did (a profiler that was started, memory in its pool). A fair
# comparison starts both sides from the same state.

# %%
client.close()
cluster.close()
runs = {}
for count in (2, 1):
    with scale.make_cluster("gpu", workers=count, rmm_pool_size="8GB") as fresh:
        with Client(fresh) as fresh_client:
            runs[count] = scale.measure_stages(
                fresh_client, paths, model, metadata, on="gpu"
            )
one, two = runs[1], runs[2]

# %% tags=["nbval-ignore-output"]
scaling = scale.scaling_table(one, two)
scaling

# %% tags=["nbval-ignore-output"]
load = pd.concat({"1 worker": one.load, "2 workers": two.load})
for column in ("median task", "busy"):
    load[column] = load[column].map(format_seconds)
load


# %% [markdown]
# The table above is the last timed read and scoring run seen per worker: how many recordings each took, how
# long one took, and how long it was busy. It is where to look when a cluster scales less than expected: uneven
# counts mean the work was not shared evenly; longer tasks on two workers than on one mean the workers compete for
# something they share.

# %%
def speedup(stage):
    return one.timings[stage].median / two.timings[stage].median


def task_slower(stage):  # a task's median time on two workers, against on one
    return (
        two.load.loc[stage, "median task"].median()
        / one.load.loc[stage, "median task"].median()
    )


scoring, reading = speedup("  score: on the workers"), speedup("  read: on the workers")
per_recording = one.timings["  score: on the workers"].median / COUNT
print(f"scoring one recording on one GPU: {format_seconds(per_recording)}")
for stage in ("read", "score"):
    print(f"a {stage} task on two workers takes {format_ratio(task_slower(stage))}")
print(f"scoring on the workers, one GPU against two: {format_ratio(scoring)}")
print(f"reading on the workers, one GPU against two: {format_ratio(reading)}")
for name, run in (("one worker", one), ("two workers", two)):
    part = (
        run.timings["score every recording"].median
        - run.timings["  score: on the workers"].median
    )
    print(f"the notebook's part of a scoring run, {name}: {format_seconds(part)}")
assert scoring >= 1.8, scaling
sent, tables_size = two.sent, two.table_bytes
assert sent["rank: shuffle"] >= tables_size / 4  # beat rows changed workers
assert sent["rank: broadcast"] < sent["rank: shuffle"] / 10  # a small part of that
pd.testing.assert_frame_equal(one.ranking, two.ranking)  # same answer, one GPU or two

# %% [markdown]
# Scoring is *embarrassingly parallel*: sixteen independent tasks, each on the GPU that holds its recording, and
# nothing moves between workers, so two GPUs could at best halve its time; the check above asks for 1.8×, and the
# lines printed above say how close this run came to 2×.
#
# Reading is the stage that shares the most. The workers have a GPU each but one host: every read takes the CSV
# from the host's memory, and its bytes (the `read` row of the traffic table) cross the host's links to the GPU.
# When both workers read at once, they compete for that host, and the per-worker table shows what it cost: how
# much longer a read task took on two workers than on one, beside the scoring task, which competes for nothing.
# Where reading dominates a job, a faster GPU does not help; a binary format instead of text (less to parse and
# to move), or a host with more memory bandwidth per GPU, does.
#
# Seen from the notebook, a scoring run takes longer than the workers' span: the notebook's part (sending
# sixteen tasks to the scheduler, the scheduler handing them out, the news that they are done coming back) comes
# on top, and the cell prints it for each cluster. It is not GPU work, which is why the check on the
# per-recording stage is made on the workers' span; and since a recording takes the GPU a fraction of a second
# (printed above), it is a visible share of a run this small.
#
# The ranking behaves differently. On one worker the shuffle moves rows between partitions inside one process;
# on two, a share of the beat rows leave their worker: copied from the GPU to the host, sent over a TCP socket,
# and copied to the other GPU. The last column of the table counts those bytes. The broadcast join sends only the
# sixteen-row metadata table to each partition, and the beat rows can stay where they are (the checks above: the
# shuffle sent at least a quarter of all beat tables' bytes, the broadcast less than a tenth of what the shuffle
# sent). Both rankings are small jobs (the beats of sixteen recordings), so fixed costs weigh on them too:
# building the task graph, scheduling dozens of small tasks, gathering the result in the notebook, none of which
# a second GPU shortens. The table gives this
# machine's figures. A second GPU speeds up work that stays where its data is; work that must move data between
# GPUs pays for the trip, and the cheapest trip is the one a small table makes.
#
# Both clusters produced the same ranking (checked above: beat counts, rates and shares), so the second GPU
# changed the time and nothing else.
#
# ## Spilling, the dashboard, other transports
#
# **When a job does not fit.** A job that *keeps* more data on a worker
# than its GPU holds (a large Dask-cuDF table persisted for many queries) needs somewhere to put the excess.
# Dask-CUDA moves whole task results to host memory when a worker's GPU passes `device_memory_limit` (by default
# 80 % of the GPU), and back when a task needs them. For cuDF work, cuDF's own spilling
# (`enable_cudf_spill=True`) is finer: it moves individual buffers, not whole results. Spilling saves a job that
# would otherwise fail with out-of-memory; it does not make it fast, since every spilled byte crosses the host
# link twice (chapter 1 measured the link).
#
# **The dashboard.** With `bokeh` installed, the scheduler serves a live dashboard at `client.dashboard_link`
# (port 8787 by default): the task stream drawn above, each worker's memory, and the progress of every
# computation. Open it while a job runs; it is the first place to look when a cluster is slower than expected.
#
# **Transports.** The workers here talk over TCP: a cuDF table sent to another worker is copied to the host,
# sent through the kernel's socket, and copied to the other GPU. With UCX (`pip install ucxx-cu13
# distributed-ucxx-cu13`, then `LocalCUDACluster(protocol="ucx")`), workers on one server send GPU buffers to
# each other directly over NVLink where the GPUs have it, and over InfiniBand between servers. This book's GPU
# host had no UCX wheels to install, so the chapter measures TCP only; the shuffle's row in the table above is
# the one UCX would shorten.
#
# ## Beyond one machine
#
# The client code of this chapter does not change when the workers run on several servers; only the cluster
# does. Start a scheduler on one machine and a Dask-CUDA worker process per GPU on every machine:
#
# ```bash
# dask scheduler --port 8786                         # on the first server
# dask cuda worker tcp://first-server:8786 \
#     --rmm-pool-size 8GB --set-rmm-allocator-for-libs cupy,torch   # on every server
# ```
#
# then connect the notebook to the scheduler instead of starting a local cluster:
#
# ```python
# client = Client("tcp://first-server:8786")
# ```
#
# The recordings must be readable by every worker under the same path (a shared file system, or object storage
# that cuDF reads directly). On an HPC cluster, [dask-jobqueue](https://jobqueue.dask.org) starts the workers as
# batch jobs:
#
# ```python
# from dask_jobqueue import SLURMCluster
#
# cluster = SLURMCluster(
#     queue="gpu", cores=8, memory="64GB", job_extra_directives=["--gres=gpu:1"],
#     worker_command="dask cuda worker", worker_extra_args=["--rmm-pool-size", "8GB"],
# )
# cluster.scale(jobs=4)  # four GPU jobs, one worker each
# client = Client(cluster)
# ```
#
# ## What to take away
#
# - Dask-CUDA gives each GPU its own worker process and memory pool; code written for one GPU runs unchanged in
#   each.
# - Make the unit of work the thing that must stay whole (here, a recording), and keep its data where it was
#   read: results stay on the workers as futures.
# - Independent work scales with the GPUs; work that moves data between GPUs pays for each byte moved. Measure
#   both before buying the next GPU.

# %% [markdown]
# ## Exercises
#
# Three exercises on this chapter's cluster: predict what an uneven share of the recordings costs, find the
# recordings that travel between workers, and add a summary computed where the tables live. They use a
# two-worker cluster of their own, started here, and the model trained above.

# %%
import statistics

cluster = scale.make_cluster("gpu", rmm_pool_size="8GB")
client = Client(cluster)
workers = sorted(client.scheduler_info()["workers"])
per_task = two.load.loc["score", "median task"].median()
print(f"{len(workers)} workers; a scoring task took {format_seconds(per_task)} above")

# %% [markdown]
# ```{exercise-start}
# :label: ex-many-uneven
# ```
# **Predict, then measure.** `read_everywhere` dealt the recordings out evenly. Read three quarters of them on
# the first worker and the rest on the second instead (`client.map(scale.read_recording, ...,
# workers=[address])` pins each read to a worker). From the scoring task's time printed above, predict how long
# scoring all of them takes on the workers; then measure it from the task stream with `scale.busy_span`.
#
# ```{exercise-end}
# ```

# %% [markdown]
# ```{solution-start} ex-many-uneven
# :class: dropdown
# ```
# A scoring task runs where its recording lives, so the first worker scores its three quarters one after
# another while the second finishes its quarter and waits: the larger share sets the pace. The prediction is
# that many tasks' time, one after the other (the even share took half of them):

# %%
heavy = 3 * COUNT // 4
placement = {workers[0]: paths[:heavy], workers[1]: paths[heavy:]}
uneven = []
for address, mine in placement.items():
    uneven += client.map(
        scale.read_recording,
        [str(path) for path in mine],
        fs=FS,
        on="gpu",
        workers=[address],
        pure=False,
    )
wait(uneven)


def scoring_span(recordings):
    with get_task_stream(client) as stream:
        wait(
            client.map(
                scale.score_recording, recordings, model=model, on="gpu", pure=False
            )
        )
    return scale.busy_span(stream.data)


scoring_span(uneven)  # a warm-up: this cluster's first tasks load the kernels
measured = statistics.median(scoring_span(uneven) for _ in range(3))
predicted = heavy * per_task
print(f"predicted {format_seconds(predicted)}, measured {format_seconds(measured)}")
assert 0.7 < measured / predicted < 1.5, (predicted, measured)
del uneven

# %% [markdown]
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise-start}
# :label: ex-many-find-the-move
# ```
# **Find the move.** `score_on_first_worker` gives the right tables, but slowly. Find out with
# `scale.bytes_between_workers` what it sends between the workers, say why, and score the recordings so that
# nothing moves.
#
# ```{exercise-end}
# ```

# %%
def score_on_first_worker(recordings):
    return client.map(
        scale.score_recording,
        recordings,
        model=model,
        on="gpu",
        workers=[workers[0]],
        pure=False,
    )


# %% [markdown]
# ```{solution-start} ex-many-find-the-move
# :class: dropdown
# ```
# `workers=[workers[0]]` pins every scoring task to the first worker, and a pinned task runs where it is pinned,
# not where its data is: the scheduler has the second worker send its recordings over (from its GPU to the
# host, over TCP, to the first GPU). The counter of bytes the workers sent each other grows by at least the
# second worker's recordings. Without the pin, each task runs where its recording lives and nothing moves. The
# fix is measured first, before the pinned run leaves copies of the recordings on the first worker:

# %%
def bytes_moved_by(start):
    before = scale.bytes_between_workers(client)
    wait(start())
    return scale.bytes_between_workers(client) - before


recordings = scale.read_everywhere(client, paths, on="gpu")
wait(recordings)
holders = client.who_has(recordings)
on_second = [r for r in recordings if workers[1] in holders[r.key]]
second_holds = sum(client.gather(client.map(scale.recording_size, on_second)))
where_they_live = bytes_moved_by(
    lambda: client.map(
        scale.score_recording, recordings, model=model, on="gpu", pure=False
    )
)
pinned = bytes_moved_by(lambda: score_on_first_worker(recordings))
print(f"the second worker holds {describe_bytes(second_holds)} of recordings")
print(f"pinned to the first worker: {describe_bytes(pinned)} sent between workers")
print(f"where the recordings live: {describe_bytes(where_they_live)}")
assert pinned >= second_holds, (pinned, second_holds)
assert where_they_live < 2**20, where_they_live

# %% [markdown]
# ```{solution-end}
# ```

# %% [markdown]
# ```{exercise-start}
# :label: ex-many-summary
# ```
# **Extend.** Add a summary of each recording, computed where its beat table lives: its heart rate (beats per
# minute, from the median interval between beats) and the share of its beats the model flags. Gather only the
# summaries, one row per recording, into a pandas table, and check that the recordings with three times the
# ectopic beats flag the largest shares.
#
# ```{exercise-end}
# ```

# %% [markdown]
# ```{solution-start} ex-many-summary
# :class: dropdown
# ```
# A task that takes a table and returns a few numbers runs where the table lives, and only the numbers travel:

# %%
def summary(table):
    return {
        "recording": table["recording"].iloc[0],
        "beats per minute": 60 / float(table["rr_s"].median()),
        "share flagged": float(table["flagged"].mean()),
    }


scored = client.map(
    scale.score_recording, recordings, model=model, on="gpu", pure=False
)
summaries = pd.DataFrame(client.gather(client.map(summary, scored)))
print(summaries.round(3).to_string(index=False))
assert len(summaries) == COUNT
assert summaries["beats per minute"].between(40, 180).all(), summaries
most_flagged = summaries.nlargest(len(high), "share flagged")["recording"]
assert set(most_flagged) == high, summaries

# %% [markdown]
# ```{solution-end}
# ```

# %%
import shutil

client.close()
cluster.close()
shutil.rmtree(workdir)
