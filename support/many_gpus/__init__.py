"""Chapter 7 (a draft in ``drafts/``), beyond one GPU: many ECG recordings scored on a Dask-CUDA cluster.

- :mod:`~support.many_gpus.scale`: recordings written and read where they live, one model for all, the
  ranking, the stages timed on clusters of one and two workers, the task stream and the cluster drawn.
"""
