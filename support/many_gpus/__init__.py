"""Chapter 7, beyond one GPU: many ECG recordings scored on a Dask-CUDA cluster.

One module per concept, in the order the chapter meets them (each imports only those above it):

- :mod:`~support.many_gpus.recordings`: the recordings written by the workers and read where they are dealt;
- :mod:`~support.many_gpus.models`: one model for every recording, and one fine-tuned per recording;
- :mod:`~support.many_gpus.scoring`: a recording scored where it lives (its beats as a table) and judged;
- :mod:`~support.many_gpus.ranking`: the recordings ranked from summaries; every beat ranked by a shuffle;
- :mod:`~support.many_gpus.host`: the page cache and file systems under the reads;
- :mod:`~support.many_gpus.task_stream`: Dask's task stream read as who computed what, and when;
- :mod:`~support.many_gpus.utilisation`: each GPU's utilisation sampled with NVML while the workers run;
- :mod:`~support.many_gpus.cluster`: the placements (one worker on one GPU, two on one, two on two) and
  :func:`~support.many_gpus.cluster.make_cluster`;
- :mod:`~support.many_gpus.timing`: the stages timed on each cluster and the clusters set side by side;
- :mod:`~support.many_gpus.figures`: the cluster and the task stream drawn;
- readers' questions: :mod:`~support.many_gpus.contexts` (where workers compute when a script made a CUDA
  context before its cluster), :mod:`~support.many_gpus.ranks` (one process per GPU with ``torchrun``, each with
  its own RMM pool) and :mod:`~support.many_gpus.spilling` (what a worker pays when its data outgrows its GPU).
"""
