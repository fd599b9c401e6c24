"""One model for every recording, and one fine-tuned per recording (chapter 6's autoencoder).

- :func:`train_on_sample` trains the global model on beats sampled from a few recordings and sets the score above
  which a beat is flagged (a :class:`GlobalModel`, kept on the CPU so that it travels between processes);
- :func:`fine_tune` makes a copy of it trained more epochs on one recording's beats, where they live.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np

from support.ecg import reading
from support.many_gpus.recordings import array_module

#: The most beats scored per batch, and the bytes the widest activation of a scoring batch may take: a whole
#: recording's beats at once for chapter 6's model (32 channels). Scoring in chapter 6's training batches (4096)
#: is launch-bound: the same kernels launched twenty times over, each with little work, and it was what kept
#: scoring on two GPUs from scaling (the probe in runs/history/07_many_gpus_h200_runs.txt). A wider model
#: (:func:`train_on_sample`'s ``channels``) scores in smaller batches, so that two workers sharing a GPU fit.
SCORE_BATCH = 2**17
SCORE_BATCH_BYTES = 2**30


@dataclass
class GlobalModel:
    """One model for every recording: the autoencoder (kept on the CPU to travel between processes), the score
    above which a beat is flagged, the sampling rate of the recordings it was trained on, and the batch it was
    trained with (which :func:`fine_tune` uses too)."""

    model: object  # support.ecg.vae.BeatVAE
    threshold: float
    fs: float
    trained_on: int  # beats
    batch_size: int = 4096

    @property
    def channels(self) -> int:
        """The width of the autoencoder's convolutions (chapter 6's is 32)."""
        return max(m.out_channels for m in self.model.encoder if hasattr(m, "out_channels"))

    def score_batch(self, width: int) -> int:
        """Beats per scoring batch for beats of ``width`` samples: a power of two whose widest activation
        (``channels`` × ``width`` / 4 floats a beat) stays within :data:`SCORE_BATCH_BYTES`, at most
        :data:`SCORE_BATCH`."""
        fits = max(1, SCORE_BATCH_BYTES // max(1, self.channels * width))
        return min(SCORE_BATCH, 1 << (fits.bit_length() - 1))

    def scores(self, tensor):
        """Anomaly scores of the beats in ``tensor``, computed where they live, in batches of
        :meth:`score_batch` beats."""
        from support.ecg import vae  # noqa: PLC0415  # support.ecg.vae imports PyTorch at its top

        batch = self.score_batch(tensor.shape[1])
        return vae.anomaly_scores(self.model.to(tensor.device), tensor, batch_size=batch)


def flops_per_beat(width: int, channels: int, *, latent: int = 2, beats: int = 8) -> float:
    """The floating-point operations of one training step of chapter 6's autoencoder, per beat, for beats of
    ``width`` samples and convolutions ``channels`` wide: counted by PyTorch's ``FlopCounterMode`` on a small batch
    on the CPU (the same count on any device; the GPU's speed at it is another matter)."""
    import torch
    from torch.utils.flop_counter import FlopCounterMode

    from support.ecg import vae  # noqa: PLC0415  # support.ecg.vae imports PyTorch at its top

    # the model is built on the CPU: fork the CPU's generator alone (no device touched, no CUDA context made)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = vae.BeatVAE(width, latent=latent, channels=channels)
    optimizer = torch.optim.Adam(model.parameters())
    with FlopCounterMode(display=False) as counter:
        vae.train_step(model, optimizer, torch.zeros(beats, width))
    return counter.get_total_flops() / beats


def _beats_of(path, fs: float, on: str):
    from support.ecg import pipeline  # noqa: PLC0415  # support.ecg.pipeline imports PyTorch at its top (through vae)

    recording = reading.read_signal(path, on=on)
    pipeline.check_length(recording.signal, fs)
    return pipeline.find_beats(recording.signal, pipeline.PipelineConfig(fs=fs, progress=False))


def train_on_sample(
    paths,
    *,
    beats_per_recording: int = 8000,
    fs: float = 250.0,
    on: str = "cpu",
    flag_share: float = 0.03,
    channels: int = 32,
    batch_size: int = 4096,
    seed=0,
) -> GlobalModel:
    """Train chapter 6's autoencoder (``channels`` wide: chapter 6's 32, or wider to give every step more GPU
    work) on up to ``beats_per_recording`` beats drawn from each recording in ``paths``, for chapter 6's epochs in
    batches of ``batch_size``, and set the threshold that flags the ``flag_share`` of those beats that score
    highest."""
    import torch

    from support.ecg import pipeline, vae  # noqa: PLC0415  # both import PyTorch at their top

    if not 0 < flag_share < 1:
        raise ValueError(f"flag_share must lie strictly between 0 and 1, not {flag_share}")
    if channels < 2 or channels % 2 or batch_size < 1:
        raise ValueError(f"need an even number of channels and a batch of at least 1, not {channels}, {batch_size}")
    xp = array_module(on)
    rng = np.random.default_rng(seed)
    sampled = []
    for path in paths:
        matrix = _beats_of(path, fs, on).matrix
        rows = np.sort(rng.choice(len(matrix), size=min(beats_per_recording, len(matrix)), replace=False))
        sampled.append(matrix[xp.asarray(rows)])
    tensor = pipeline.to_torch(xp.concatenate(sampled))
    config = pipeline.PipelineConfig(fs=fs, seed=seed, progress=False)
    with torch.random.fork_rng(devices=_cuda_devices(tensor)):
        torch.manual_seed(seed)
        with torch.device(tensor.device):
            model = vae.BeatVAE(tensor.shape[1], latent=config.latent, channels=channels)
    _train(model, tensor, epochs=config.epochs, batch_size=batch_size, learning_rate=2e-3, seed=seed)
    trained = GlobalModel(model, 0.0, fs, trained_on=len(tensor), batch_size=batch_size)
    scores = trained.scores(tensor)
    trained.threshold = float(torch.quantile(scores.float(), 1 - flag_share))
    trained.model = model.cpu()
    return trained


def _cuda_devices(tensor) -> list:
    return [tensor.device] if tensor.device.type == "cuda" else []


def _train(model, tensor, *, epochs: int, batch_size: int, learning_rate: float, seed: int) -> None:
    """Train ``model`` in place on the beats in ``tensor`` (on their device) for ``epochs`` epochs of shuffled
    batches of ``batch_size``: chapter 6's step (:func:`support.ecg.vae.train_step`) with ``torch.optim.Adam``,
    fused on CUDA (its default update on the CPU, where only the tests train), cuDNN held to deterministic
    algorithms, every random draw seeded by ``seed`` and the global generators restored after."""
    import torch

    from support.ecg import vae  # noqa: PLC0415  # support.ecg.vae imports PyTorch at its top

    fused = True if tensor.device.type == "cuda" else None  # PyTorch's fused update on CUDA
    optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate, fused=fused)
    generator = torch.Generator(device=tensor.device).manual_seed(seed)
    steps = max(1, len(tensor) // batch_size)
    model.train()
    # the VAE's sampling draws from the global generator: seeded here, and restored after (fork_rng)
    with (
        torch.random.fork_rng(devices=_cuda_devices(tensor)),
        torch.backends.cudnn.flags(enabled=True, benchmark=False, deterministic=True),
    ):
        torch.manual_seed(seed)
        for _ in range(epochs):
            order = torch.randperm(len(tensor), device=tensor.device, generator=generator)
            for step in range(steps):
                vae.train_step(model, optimizer, tensor[order[step * batch_size : (step + 1) * batch_size]])
    model.eval()


def fine_tune(model: GlobalModel, tensor, *, epochs: int, batch_size: int | None = None, seed: int = 0):
    """A copy of ``model``'s autoencoder trained ``epochs`` more epochs on the beats in ``tensor`` (one recording's,
    on their device), from the global weights, in batches of ``batch_size`` (by default the global model's): a
    model per recording, fine-tuned from the global one. The global model is left as it was. Deterministic as
    :func:`support.ecg.vae.train` is (same seed, same GPU)."""
    if epochs < 1:
        raise ValueError(f"fine-tuning needs at least one epoch, not {epochs}")
    tuned = copy.deepcopy(model.model).to(tensor.device)
    _train(tuned, tensor, epochs=epochs, batch_size=batch_size or model.batch_size, learning_rate=1e-3, seed=seed)
    return tuned
