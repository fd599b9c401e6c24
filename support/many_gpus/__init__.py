"""Chapter 7 (a draft in ``drafts/``), beyond one GPU: many ECG recordings scored on a Dask-CUDA cluster.

- :mod:`~support.many_gpus.scale`: recordings written and read where they live (from disk and from the page
  cache), one model for all and one fine-tuned per recording, the rankings (summaries gathered, every beat by a
  shuffle), the stages timed on one worker, two on one GPU and two on two GPUs, the task stream and the cluster
  drawn.
"""
