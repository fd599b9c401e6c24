"""One model for every recording, and one fine-tuned per recording (chapter 6's autoencoder).

- :func:`train_on_sample` trains the global model on beats sampled from a few recordings and sets the score above
  which a beat is flagged (a :class:`GlobalModel`, kept on the CPU so that it travels between processes);
- :func:`fine_tune` makes a copy of it trained more epochs on one recording's beats, where they live.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from support.many_gpus.recordings import array_module

#: Beats scored per batch: a whole recording's beats at once. Scoring in chapter 6's training batches (4096) is
#: launch-bound: the same kernels launched twenty times over, each with little work, and it was what kept scoring
#: on two GPUs from scaling (the probe in drafts/07_many_gpus_h200_runs.txt).
SCORE_BATCH = 2**17


@dataclass
class GlobalModel:
    """One model for every recording: the autoencoder (kept on the CPU to travel between processes), the score
    above which a beat is flagged, and the sampling rate of the recordings it was trained on."""

    model: object  # support.ecg.vae.BeatVAE
    threshold: float
    fs: float
    trained_on: int  # beats

    def scores(self, tensor):
        """Anomaly scores of the beats in ``tensor``, computed where they live, in batches of
        :data:`SCORE_BATCH` beats."""
        from support.ecg import vae

        return vae.anomaly_scores(self.model.to(tensor.device), tensor, batch_size=SCORE_BATCH)


def _beats_of(path, fs: float, on: str):
    from support.ecg import pipeline, reading

    recording = reading.read_signal(path, on=on)
    pipeline.check_length(recording.signal, fs)
    return pipeline.find_beats(recording.signal, pipeline.PipelineConfig(fs=fs, progress=False))


def train_on_sample(
    paths, *, beats_per_recording: int = 8000, fs: float = 250.0, on: str = "cpu", flag_share: float = 0.03, seed=0
) -> GlobalModel:
    """Train chapter 6's autoencoder on up to ``beats_per_recording`` beats drawn from each recording in ``paths``,
    and set the threshold that flags the ``flag_share`` of those beats that score highest."""
    import torch

    from support.ecg import pipeline, vae

    if not 0 < flag_share < 1:
        raise ValueError(f"flag_share must lie strictly between 0 and 1, not {flag_share}")
    xp = array_module(on)
    rng = np.random.default_rng(seed)
    sampled = []
    for path in paths:
        matrix = _beats_of(path, fs, on).matrix
        rows = np.sort(rng.choice(len(matrix), size=min(beats_per_recording, len(matrix)), replace=False))
        sampled.append(matrix[xp.asarray(rows)])
    tensor = pipeline.to_torch(xp.concatenate(sampled))
    config = pipeline.PipelineConfig(fs=fs, seed=seed, progress=False)
    training = vae.train(
        tensor, latent=config.latent, epochs=config.epochs, batch_size=config.batch_size, seed=seed, progress=False
    )
    scores = vae.anomaly_scores(training.model, tensor)
    threshold = float(torch.quantile(scores.float(), 1 - flag_share))
    return GlobalModel(training.model.cpu(), threshold, fs, trained_on=len(tensor))


def fine_tune(model: GlobalModel, tensor, *, epochs: int, batch_size: int = 4096, seed: int = 0):
    """A copy of ``model``'s autoencoder trained ``epochs`` more epochs on the beats in ``tensor`` (one recording's,
    on their device), from the global weights: a model per recording, fine-tuned from the global one. The
    global model is left as it was. Deterministic as :func:`support.ecg.vae.train` is (same seed, same GPU)."""
    import copy

    import torch

    from support.ecg import vae

    if epochs < 1:
        raise ValueError(f"fine-tuning needs at least one epoch, not {epochs}")
    tuned = copy.deepcopy(model.model).to(tensor.device)
    fused = True if tensor.device.type == "cuda" else None  # one kernel for every parameter's update (CUDA only)
    optimizer = torch.optim.Adam(tuned.parameters(), lr=1e-3, fused=fused)
    generator = torch.Generator(device=tensor.device).manual_seed(seed)
    steps = max(1, len(tensor) // batch_size)
    tuned.train()
    devices = [tensor.device] if tensor.device.type == "cuda" else []
    # the VAE's sampling draws from the global generator: seeded here, and restored after (fork_rng)
    with (
        torch.random.fork_rng(devices=devices),
        torch.backends.cudnn.flags(enabled=True, benchmark=False, deterministic=True),
    ):
        torch.manual_seed(seed)
        for _ in range(epochs):
            order = torch.randperm(len(tensor), device=tensor.device, generator=generator)
            for step in range(steps):
                vae.train_step(tuned, optimizer, tensor[order[step * batch_size : (step + 1) * batch_size]])
    tuned.eval()
    return tuned
