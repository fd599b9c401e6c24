"""A convolutional variational autoencoder for heartbeats, and anomaly scores from its reconstruction error.

The model learns what most beats look like; a beat it reconstructs badly is unusual. It trains on whatever
device its beats are on (a CUDA tensor trains on the GPU) and creates its weights there, so no weight crosses
the host link.

>>> import torch
>>> model = BeatVAE(width=64, latent=4)
>>> model(torch.zeros(2, 64))[0].shape
torch.Size([2, 64])
"""

from __future__ import annotations

import sys
import warnings
from dataclasses import dataclass

import torch  # noqa: TID253 - this module is the PyTorch model: it has no use without PyTorch
from torch import nn  # noqa: TID253
from tqdm import tqdm

from support.ecg.adam import FunctionalAdam
from support.memory import pools


class BeatVAE(nn.Module):
    """Three strided 1-D convolutions down to a ``latent``-dimensional Gaussian, and back up."""

    def __init__(self, width: int, latent: int = 8, channels: int = 32):
        super().__init__()
        if width % 8:
            raise ValueError(f"the beat width must be a multiple of 8 (three halvings), not {width}")
        self.width = width
        c = channels
        self.encoder = nn.Sequential(
            nn.Conv1d(1, c // 2, 7, stride=2, padding=3),
            nn.GELU(),
            nn.Conv1d(c // 2, c, 7, stride=2, padding=3),
            nn.GELU(),
            nn.Conv1d(c, c, 7, stride=2, padding=3),
            nn.GELU(),
            nn.Flatten(),
        )
        flat = c * width // 8
        self.to_mean = nn.Linear(flat, latent)
        self.to_log_var = nn.Linear(flat, latent)
        self.decoder = nn.Sequential(
            nn.Linear(latent, flat),
            nn.GELU(),
            nn.Unflatten(1, (c, width // 8)),
            nn.ConvTranspose1d(c, c, 8, stride=2, padding=3),
            nn.GELU(),
            nn.ConvTranspose1d(c, c // 2, 8, stride=2, padding=3),
            nn.GELU(),
            nn.ConvTranspose1d(c // 2, 1, 8, stride=2, padding=3),
        )

    def encode(self, beats: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        hidden = self.encoder(beats.unsqueeze(1))
        return self.to_mean(hidden), self.to_log_var(hidden)

    def forward(self, beats: torch.Tensor):
        mean, log_var = self.encode(beats)
        z = mean + torch.randn_like(mean) * torch.exp(0.5 * log_var) if self.training else mean
        return self.decoder(z).squeeze(1), mean, log_var


def negative_elbo(reconstruction, beats, mean, log_var, beta: float = 1.0) -> torch.Tensor:
    """Per-beat squared reconstruction error plus ``beta`` times the KL divergence to the unit Gaussian."""
    error = ((reconstruction - beats) ** 2).sum(dim=1)
    kl = -0.5 * (1 + log_var - mean**2 - log_var.exp()).sum(dim=1)
    return error + beta * kl


@dataclass(frozen=True)
class Training:
    """What :func:`train` did: the model, the mean loss of each epoch (on the model's device), and how each step
    ran: ``"CUDA graph"`` (captured once, replayed) or ``"eager"`` with the reason in ``step_note``."""

    model: BeatVAE
    epoch_losses: torch.Tensor
    steps_ran: str = "eager"
    step_note: str = ""


def batch_loss(model: BeatVAE, batch: torch.Tensor, beta: float = 1.0) -> torch.Tensor:
    """The mean negative ELBO of a batch of beats under ``model``: what one training step minimizes."""
    reconstruction, mean, log_var = model(batch)
    return negative_elbo(reconstruction, batch, mean, log_var, beta).mean()


def train_step(model: BeatVAE, optimizer, batch: torch.Tensor, beta: float = 1.0) -> torch.Tensor:
    """One training step on ``batch``: loss, gradients, update. Returns the loss (still on the device)."""
    loss = batch_loss(model, batch, beta)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    optimizer.step()
    return loss


def capture_step(model: BeatVAE, optimizer, static_batch: torch.Tensor, beta: float = 1.0, *, before_capture=None):
    """Capture one training step on ``static_batch`` (forward, backward, optimizer update) as a CUDA graph.

    Returns ``(graph, loss)``: ``graph.replay()`` runs the step again on whatever ``static_batch`` holds then, and
    ``loss`` is the graph's output tensor, rewritten by each replay. Follows PyTorch's recipe: three warm-up steps
    on a side stream (autograd allocates its buffers there, and ``torch.optim.Adam`` its state at its first step),
    then ``torch.cuda.graph``. The optimizer must be
    created with ``capturable=True`` (``torch.optim.Adam`` or :class:`support.ecg.adam.FunctionalAdam`). Raises
    :class:`RuntimeError` with the reason when capture fails (under RMM's PyTorch allocator it does:
    :func:`graph_ready` says whether to try).
    ``before_capture()``, if given, runs between the warm-ups and the capture.
    """
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    try:
        with torch.cuda.stream(side):
            for _ in range(3):
                optimizer.zero_grad(set_to_none=True)
                batch_loss(model, static_batch, beta).backward()
                optimizer.step()
        torch.cuda.current_stream().wait_stream(side)
        if before_capture is not None:
            before_capture()
        graph = torch.cuda.CUDAGraph()
        optimizer.zero_grad(set_to_none=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # a note on AccumulateGrad streams, about DDP
            with torch.cuda.graph(graph):
                loss = batch_loss(model, static_batch, beta)
                loss.backward()
                optimizer.step()
    except RuntimeError as error:
        reason = str(error).strip().splitlines()[0]
        raise RuntimeError(f"CUDA graph capture failed: {reason}") from error
    return graph, loss


def graph_ready(device: torch.device) -> tuple[bool, str]:
    """Whether :func:`train` can capture its step on ``device``, and why not: CUDA graphs need a CUDA device, and
    the capture fails where PyTorch allocates through RMM (:func:`support.memory.use_one_pool`; a
    ``torch.cuda.MemPool`` on RMM beside PyTorch's own allocator is another matter: chapter 4)."""
    if device.type != "cuda":
        return False, f"CUDA graphs need a CUDA device, not {device.type}"
    if pools.pytorch_on_rmm():
        return False, "PyTorch allocates through RMM (use_one_pool), where graph capture fails"
    return True, ""


def train(
    beats: torch.Tensor,
    *,
    latent: int = 2,
    epochs: int = 12,
    batch_size: int = 4096,
    learning_rate: float = 2e-3,
    beta: float = 1.0,
    seed: int = 0,
    progress: bool = True,
    after_epoch=None,
    graph: bool | None = None,
) -> Training:
    """Train a :class:`BeatVAE` on ``beats`` (beats × width), on their device, with a tqdm progress bar.

    The loss is read back to the host once per epoch, for the progress bar, not once per step. cuDNN is held
    to deterministic algorithms, so the same seed trains the same model on the same GPU (the chapter's
    published tables are compared with a re-run).
    ``after_epoch(epoch, model)``, if given, is called after each epoch with the model in eval mode (to
    score validation beats, say); training resumes afterwards.

    ``graph``: capture the step once as a CUDA graph and replay it (one launch per step instead of one per
    kernel), with the same fused Adam made ``capturable``. ``None`` (the default) captures where
    :func:`graph_ready` says it can and runs eagerly elsewhere; ``True`` refuses to run eagerly. Each step takes
    ``batch_size`` beats (the last partial batch of an epoch is left out, eager or graphed, so every step has the
    graph's shape). :attr:`Training.steps_ran` says which way the steps ran. The Adam is
    :class:`support.ecg.adam.FunctionalAdam`: ``torch.optim.Adam``'s update without the class's import of
    PyTorch's compiler stack.
    """
    if beats.ndim != 2 or len(beats) < 2:
        raise ValueError(f"need a matrix of at least 2 beats, got shape {tuple(beats.shape)}")
    if not torch.isfinite(beats).all():
        raise ValueError("the beats contain NaN or infinite values; repair the signal before training")
    device = beats.device
    ready, why_not = graph_ready(device)
    if graph and not ready:
        raise ValueError(f"graph=True, but {why_not}")
    use_graph = ready if graph is None else graph
    torch.manual_seed(seed)
    with torch.device(device):
        model = BeatVAE(beats.shape[1], latent=latent)
        generator = torch.Generator(device=device).manual_seed(seed)
    # the fused Adam updates every parameter in one pass (on CUDA and on the CPU: support.ecg.adam). Called through
    # its functional form, which does not import PyTorch's compiler stack as the Optimizer class does (a cost
    # of a fresh process's first training: support.ecg.adam, and chapter 6's first command against the class)
    optimizer = FunctionalAdam(model.parameters(), lr=learning_rate, capturable=use_graph)
    losses = torch.zeros(epochs, device=device)
    batch_size = min(batch_size, len(beats))
    steps = len(beats) // batch_size
    bar = tqdm(range(epochs), desc="training the VAE", unit="epoch", file=sys.stderr, disable=not progress)
    with torch.backends.cudnn.flags(enabled=True, benchmark=False, deterministic=True):
        if use_graph:
            model.train()
            static_batch = beats[:batch_size].clone()
            replay, graph_loss = capture_step(model, optimizer, static_batch, beta)
            # the capture's warm-ups trained on the first batch: start again from the same initial weights
            with torch.device(device):
                torch.manual_seed(seed)
                fresh = BeatVAE(beats.shape[1], latent=latent)
            with torch.no_grad():
                for kept, initial in zip(model.parameters(), fresh.parameters(), strict=True):
                    kept.copy_(initial)
            _reset_adam(optimizer)
        for epoch in bar:
            model.train()
            order = torch.randperm(len(beats), device=device, generator=generator)
            for step in range(steps):
                rows = order[step * batch_size : (step + 1) * batch_size]
                if use_graph:
                    torch.index_select(beats, 0, rows, out=static_batch)
                    replay.replay()
                    loss = graph_loss
                else:
                    loss = train_step(model, optimizer, beats[rows], beta)
                losses[epoch] += loss.detach() / steps
            if progress:
                bar.set_postfix(loss=f"{losses[epoch].item():.3f}")
            if after_epoch is not None:
                model.eval()
                after_epoch(epoch, model)
    model.eval()
    return Training(model, losses, "CUDA graph" if use_graph else "eager", "" if use_graph else why_not)


def _reset_adam(optimizer) -> None:
    """Zero Adam's moments and step counts in place (the graph holds their addresses), as if no step ran yet."""
    with torch.no_grad():
        for state in optimizer.state.values():
            for value in state.values():
                if torch.is_tensor(value):
                    value.zero_()


@torch.no_grad()
def anomaly_scores(model: BeatVAE, beats: torch.Tensor, batch_size: int = 4096) -> torch.Tensor:
    """Each beat's reconstruction error through the latent mean: high means unusual. Stays on the device."""
    model.eval()
    parts = []
    for start in range(0, len(beats), batch_size):
        batch = beats[start : start + batch_size]
        reconstruction, _, _ = model(batch)
        parts.append(((reconstruction - batch) ** 2).sum(dim=1))
    return torch.cat(parts) if parts else beats.new_zeros(0)


@torch.no_grad()
def latent_means(model: BeatVAE, beats: torch.Tensor, batch_size: int = 4096) -> torch.Tensor:
    """The latent mean of every beat (beats × latent), for plots of the latent space."""
    model.eval()
    return torch.cat([model.encode(beats[s : s + batch_size])[0] for s in range(0, len(beats), batch_size)])
