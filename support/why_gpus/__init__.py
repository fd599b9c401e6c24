"""Chapter 1, why GPUs: the same work on the CPU and the GPU, and the link between them.

- :mod:`~support.why_gpus.speedups`: CPU (familiar and fastest) against GPU, side by side, and the figure;
- :mod:`~support.why_gpus.host_link`: the host↔GPU link's bandwidth, pipelines with and without round trips,
  and the picture of the link drawn from the measured bandwidths;
- :mod:`~support.why_gpus.crossover`: one sum from kilobytes to gigabytes, CPU against GPU, cold and warm: where
  the lines cross.
"""
