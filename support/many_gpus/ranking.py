"""The rankings: recordings ranked from summaries computed where their tables live, and every beat ranked
across recordings by a shuffle.

- :func:`recording_summary` reduces one beat table to one row where it lives; :func:`summaries_and_bytes` gathers
  them and counts the bytes; :func:`rank_recordings` ranks the rows with their metadata, and :func:`separation`
  says whether a column puts a group of recordings ahead of all the others;
- :func:`rank_every_beat` ranks every beat of every recording (Dask DataFrame's ``sort_values``: rows change
  workers);
- :func:`bytes_between_workers` counts the bytes the workers have sent so far.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from support.many_gpus.recordings import array_module
from support.many_gpus.scoring import empty_beat_table

#: The columns of :func:`rank_recordings`, in order.
RANK_COLUMNS = ("recording", "ectopic_rate", "beats", "mean_bpm", "premature_share", "flagged_share")


def recording_summary(table) -> dict[str, object]:
    """One recording's :func:`beat_table` in one row, computed where the table lives: its beats, heart rate
    (from the mean interval), and the shares of its beats that came early and that the global model flags. On a
    cluster, ``client.map(recording_summary, tables)`` sends back these few numbers, not the beats."""
    return {
        "recording": str(table["recording"].iloc[0]),
        "beats": int(len(table)),
        "mean_bpm": 60.0 / float(table["rr_s"].mean()),
        "flagged_share": float(table["flagged"].mean()),
        "premature_share": float(table["premature"].mean()),
    }


def rank_recordings(summaries, metadata, *, by: str = "premature_share"):
    """The :func:`recording_summary` rows joined with ``metadata`` (in the notebook: one row per recording on
    each side) and ranked by ``by`` (the share of premature beats, or ``"flagged_share"``: of beats the global
    model flags), highest first; a pandas DataFrame with :data:`RANK_COLUMNS`."""
    rows = pd.DataFrame(list(summaries))
    missing = sorted(set(metadata["recording"]) ^ set(rows["recording"]))
    if missing or len(rows) != len(metadata):
        raise ValueError(f"recordings without a summary or metadata: {missing or 'a recording summarized twice'}")
    joined = rows.merge(metadata[["recording", "ectopic_rate"]], on="recording", validate="one_to_one")
    ranked = joined.sort_values([by, "recording"], ascending=[False, True], ignore_index=True)
    return ranked[list(RANK_COLUMNS)]


def separation(ranking, column: str, group) -> float:
    """How cleanly ``column`` of a :func:`rank_recordings` table puts the recordings named in ``group`` ahead of
    the others: the group's lowest value over the others' highest. For a positive column (a share), above 1 when
    every recording of the group leads every other one; at most 1 when one of the others reaches a recording of
    the group. A name in ``group`` that the table lacks is refused (a typo would otherwise shrink the group).

    >>> table = pd.DataFrame({"recording": ["a", "b", "c", "d"], "share": [0.06, 0.05, 0.02, 0.01]})
    >>> separation(table, "share", {"a", "b"})
    2.5
    >>> separation(table, "share", {"a", "c"}) <= 1
    True
    """
    unknown = sorted(set(group) - set(ranking["recording"]))
    if unknown:
        raise ValueError(f"the group names recordings the table lacks: {unknown}")
    inside = ranking["recording"].isin(set(group))
    if inside.all() or not inside.any():
        raise ValueError(
            f"the group must name some of the {len(ranking)} recordings, not {'all' if inside.all() else 'none'}"
        )
    return float(ranking.loc[inside, column].min() / ranking.loc[~inside, column].max())


#: The columns of :func:`rank_every_beat`, in order.
TOP_COLUMNS = ("recording", "beats", "in_top", "top_share")


def _global_positions(partition, offsets, partition_info=None):
    """Each row's position among all rows of a sorted Dask DataFrame: its partition's offset plus its place."""
    xp = np if not hasattr(partition, "to_pandas") else array_module("gpu")
    first = offsets[partition_info["number"]] if partition_info else 0
    return partition.assign(position=xp.arange(first, first + len(partition)))


def rank_every_beat(tables, *, on: str = "cpu", top: float = 0.01):
    """Rank every beat of every recording by its global score, across recordings, and count per recording the
    beats among the ``top`` share of all: a pandas DataFrame with :data:`TOP_COLUMNS`, most first.

    The rank of one beat depends on every other beat, so this stage needs the beats of all recordings together:
    Dask DataFrame's ``sort_values`` samples the scores, cuts their range into partitions, and sends each beat
    row to the partition of its range (a shuffle: rows change workers). ``shuffle_method="tasks"`` runs it as
    ordinary tasks, whose transfers :func:`bytes_between_workers` counts (a peer-to-peer shuffle moves its rows
    outside them)."""
    import dask.dataframe as dd

    if not 0 < top < 1:
        raise ValueError(f"top must be a share strictly between 0 and 1, not {top}")
    if on == "gpu":
        import dask_cudf  # noqa: F401 - registers cuDF partitions with Dask DataFrame

    beats = dd.from_delayed(list(tables), meta=empty_beat_table(on), verify_meta=False)[["recording", "score"]]
    ordered = beats.sort_values("score", ascending=False, shuffle_method="tasks").persist()
    sizes = ordered.map_partitions(len).compute()
    offsets = np.concatenate([[0], np.cumsum(np.asarray(sizes))[:-1]]).tolist()
    placed = ordered.map_partitions(_global_positions, offsets)
    placed = placed.assign(in_top=(placed["position"] < top * int(sum(sizes))).astype("int64"))
    counted = placed.groupby("recording").agg({"position": "count", "in_top": "sum"}).compute()
    counted = counted.to_pandas() if hasattr(counted, "to_pandas") else counted
    counted = counted.reset_index().rename(columns={"position": "beats"})
    counted["top_share"] = counted["in_top"] / counted["beats"]
    ranked = counted.sort_values(["in_top", "recording"], ascending=[False, True], ignore_index=True)
    return ranked[list(TOP_COLUMNS)]


def summaries_and_bytes(client, tables) -> tuple[list[dict], int, int]:
    """:func:`recording_summary` of every table, computed where it lives and gathered: the summaries, the bytes
    they hold (Dask's ``sizeof``: what came to the notebook) and the bytes the workers sent meanwhile
    (:func:`bytes_between_workers`: the gathered summaries, and any table that changed workers)."""
    from dask.sizeof import sizeof

    before = bytes_between_workers(client)
    summaries = client.gather(client.map(recording_summary, tables))
    return summaries, int(sum(sizeof(row) for row in summaries)), bytes_between_workers(client) - before


def _sent_by_this_worker(dask_worker) -> int:
    return dask_worker.transfer_outgoing_bytes_total


def bytes_between_workers(client) -> int:
    """Bytes the workers have sent so far, all together: task results fetched by another worker, and those the
    client gathered from them (a worker counts both as outgoing transfers)."""
    return sum(client.run(_sent_by_this_worker).values())
