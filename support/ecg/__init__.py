"""The ECG pipeline of chapter 6: from a CSV file to anomaly scores without leaving the GPU.

One idea per module, in the order the data flows:

- :mod:`~support.ecg.synthetic`: a synthetic Holter ECG with ground truth for every beat and stretch of artefact;
- :mod:`~support.ecg.real`: five minutes of MIT-BIH record 208, record 100 with its annotations scored as EC57
  does, and two published detectors to compare with;
- :mod:`~support.ecg.hrv`: the rhythm's variability (RMSSD and the prematurity of beats) beside published norms;
- :mod:`~support.ecg.reading`: a one-column CSV into GPU memory (cuDF) or host memory (pandas), or a WFDB record;
- :mod:`~support.ecg.rules`: the tests the kernels apply to one sample or one beat, written once in plain Python;
- :mod:`~support.ecg.kernels`: the hand-written Numba kernels, compiled for the CPU (``numba.njit``);
- :mod:`~support.ecg.cuda_kernels`: the same kernels compiled for the GPU (``numba.cuda``);
- :mod:`~support.ecg.detection`: heartbeats found with a Ricker wavelet, FFT convolution and a threshold;
- :mod:`~support.ecg.beats`: from beat candidates to a matrix of beats, and each detected beat's true label;
- :mod:`~support.ecg.vae`: a convolutional variational autoencoder and anomaly scores from its reconstruction;
- :mod:`~support.ecg.adam`: the autoencoder's Adam through PyTorch's functional form, without the compiler import;
- :mod:`~support.ecg.step_speed`: where a training step of the autoencoder spends its time;
- :mod:`~support.ecg.turns`: the order in which contenders are timed, turning round each round;
- :mod:`~support.ecg.pipeline`: the pipeline stage by stage, on the GPU or on the CPU with the same functions;
- :mod:`~support.ecg.cpu_peers`: the fastest CPU version of the shared stages a reader could write;
- :mod:`~support.ecg.method_speed`: the best training-free method timed from the CSV on the GPU and on the CPU;
- :mod:`~support.ecg.baselines`: baselines beside the autoencoder, scored the same way;
- :mod:`~support.ecg.metrics`: how well scores separate labelled anomalies from normal beats;
- :mod:`~support.ecg.events`: scoring per true beat and per true stretch of artefact;
- :mod:`~support.ecg.evaluation`: three splits, a model chosen on validation, and what the flags hold;
- :mod:`~support.ecg.plots`: the chapter's figures, summarized where the data lives.

``python -m support.ecg`` (``__main__``) runs the whole pipeline from a shell; ``--help`` lists its options;
:mod:`~support.ecg.output_folder` checks its ``--out`` before any work, so no file it did not write is replaced;
:mod:`~support.ecg.cli_runs` runs it from a notebook in fresh processes and sets their times side by side;
:mod:`~support.ecg.run_report` reads a run's ``metrics.json`` back and says where its time went.
"""
