"""Adam through PyTorch's functional form: the update ``torch.optim.Adam`` makes, the fused one on CUDA,
without the ``torch.optim.Optimizer`` class, whose first use imports PyTorch's compiler stack.

Why a fresh process cares: ``Optimizer.add_param_group`` runs under ``torch._disable_dynamo``, which imports
``torch._dynamo`` at its first call (``torch/_compile.py``), and ``Adam.step`` runs under
``_use_grad_for_differentiable`` (``torch/optim/optimizer.py``), which imports it too: read in PyTorch 2.13's
source, and in the GPU host's 2.11 by ``runs/probes/functional_adam_check.sh`` (its logs beside it). ``import
torch`` does not import it. The functional ``torch.optim.adam.adam`` runs the same update and reaches the compiler
only while compiling. The import is among the slowest of chapter 6's command line (its cold-start probe's import
profile).

>>> import torch
>>> weight = torch.nn.Parameter(torch.ones(3))
>>> adam = FunctionalAdam([weight], lr=0.1)
>>> weight.sum().backward()
>>> adam.step()
>>> [round(value, 3) for value in weight.tolist()]
[0.9, 0.9, 0.9]
"""

from __future__ import annotations

from collections.abc import Iterable

import torch  # noqa: TID253 - an optimizer of PyTorch tensors: it has no use without PyTorch
from torch.optim.adam import adam  # noqa: TID253

#: Where PyTorch has a fused Adam that :class:`FunctionalAdam` uses by default (the CPU's since PyTorch 2.4).
FUSED_DEVICES = ("cuda", "cpu")


class FunctionalAdam:
    """Adam over ``params`` with the defaults of ``torch.optim.Adam`` (betas 0.9 and 0.999, eps 1e-8, no weight
    decay), through ``torch.optim.adam.adam``.

    ``fused``: PyTorch's fused implementation, which updates every parameter in one pass (few launches on CUDA; on
    the CPU since PyTorch 2.4). The default, ``None``, fuses on CUDA and on the CPU, where PyTorch has it
    (:data:`FUSED_DEVICES`), and runs the per-tensor loop elsewhere; ``fused=False`` runs the per-tensor loop
    (where the class would pick its ``foreach`` kernels). ``capturable``: the step counts live on the device, so
    the update can be captured in a CUDA graph (as ``torch.optim.Adam(capturable=True)``).

    It keeps the moments and step counts that ``torch.optim.Adam`` keeps, one entry of :attr:`state` per
    parameter, created at once (a CUDA graph captures their addresses). It has what chapter 6's training
    calls: :meth:`zero_grad` and :meth:`step`; no parameter groups, no ``state_dict``.
    """

    def __init__(
        self,
        params: Iterable[torch.nn.Parameter],
        *,
        lr: float = 1e-3,
        fused: bool | None = None,
        capturable: bool = False,
    ):
        self.params = [p for p in params if p.requires_grad]
        if not self.params:
            raise ValueError("no parameter to optimize: every one given has requires_grad=False")
        devices = {p.device for p in self.params}
        if len(devices) > 1:
            raise ValueError(f"the parameters are on several devices ({sorted(map(str, devices))}): keep them on one")
        (device,) = devices
        self.fused = device.type in FUSED_DEVICES if fused is None else fused
        if self.fused and device.type not in FUSED_DEVICES:
            raise ValueError(
                f"the fused Adam runs on {' and '.join(FUSED_DEVICES)}, and the parameters are on {device}: "
                "pass fused=False"
            )
        if capturable and device.type != "cuda":
            raise ValueError(f"a capturable Adam is for CUDA graphs, and the parameters are on {device}")
        self.capturable = capturable
        self.lr = lr
        # as torch.optim.Adam keeps them: float32 step counts on the parameters' device when fused or capturable
        on_device = self.fused or capturable
        self.state = {
            p: {
                "step": torch.zeros((), dtype=torch.float32, device=device if on_device else "cpu"),
                "exp_avg": torch.zeros_like(p, memory_format=torch.preserve_format),
                "exp_avg_sq": torch.zeros_like(p, memory_format=torch.preserve_format),
            }
            for p in self.params
        }

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Forget every parameter's gradient (``None``, as ``torch.optim`` does by default), or zero it."""
        for p in self.params:
            if set_to_none:
                p.grad = None
            elif p.grad is not None:
                p.grad.detach_().zero_()

    @torch.no_grad()
    def step(self) -> None:
        """One Adam update of every parameter that has a gradient."""
        with_grad = [p for p in self.params if p.grad is not None]
        if not with_grad:
            return
        states = [self.state[p] for p in with_grad]
        adam(
            with_grad,
            [p.grad for p in with_grad],
            [s["exp_avg"] for s in states],
            [s["exp_avg_sq"] for s in states],
            [],
            [s["step"] for s in states],
            foreach=False,
            capturable=self.capturable,
            fused=self.fused,
            amsgrad=False,
            beta1=0.9,
            beta2=0.999,
            lr=self.lr,
            weight_decay=0.0,
            eps=1e-8,
            maximize=False,
        )
