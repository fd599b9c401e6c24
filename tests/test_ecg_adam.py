"""The functional Adam: the same updates as ``torch.optim.Adam``, without importing PyTorch's compiler stack."""

import subprocess
import sys

import pytest
import torch  # noqa: TID253 - these tests need it: without it they cannot run

from support.ecg import vae
from support.ecg.adam import FunctionalAdam

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def _trained_twice(device: str, *, fused: bool, capturable: bool = False, steps: int = 5):
    """The same model trained ``steps`` steps by torch.optim.Adam and by FunctionalAdam: both models' parameters."""
    beats = torch.randn(32, 16, generator=torch.Generator().manual_seed(1)).to(device)
    parameters = []
    for make in (
        lambda params: torch.optim.Adam(params, lr=2e-3, fused=fused or None, capturable=capturable),
        lambda params: FunctionalAdam(params, lr=2e-3, fused=fused, capturable=capturable),
    ):
        torch.manual_seed(0)
        model = vae.BeatVAE(16, latent=2).to(device)
        optimizer = make(model.parameters())
        for _ in range(steps):
            torch.manual_seed(2)  # the same sampling noise for both optimizers
            vae.train_step(model, optimizer, beats)
        parameters.append([p.detach().clone() for p in model.parameters()])
    return parameters


def test_it_makes_the_updates_torch_optim_adam_makes():
    reference, functional = _trained_twice("cpu", fused=False)
    for a, b in zip(reference, functional, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    start = _trained_twice("cpu", fused=False, steps=0)[0]
    moved = [not torch.equal(a, b) for a, b in zip(reference, start, strict=True)]
    assert any(moved), "five steps left every parameter where it started: the comparison shows nothing"


def test_on_the_cpu_it_fuses_by_default_and_makes_the_fused_class_s_updates():
    """PyTorch has a fused Adam for the CPU too (since 2.4): the default uses it there, as on CUDA, so that the
    CPU's training in chapter 6's speed table is timed with the fastest update PyTorch has for it."""
    assert FunctionalAdam([torch.nn.Parameter(torch.ones(1))]).fused
    reference, functional = _trained_twice("cpu", fused=True)
    for a, b in zip(reference, functional, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_it_does_not_import_pytorch_s_compiler_stack_and_the_class_does():
    """In a fresh process, since the first import is what costs; the class is the control that could refute it."""
    code = (
        "import sys, torch\n"
        "from support.ecg.adam import FunctionalAdam\n"
        "w = torch.nn.Parameter(torch.ones(2))\n"
        "opt = {make}([w], lr=0.1)\n"
        "w.sum().backward(); opt.step()\n"
        "print('torch._dynamo' in sys.modules)\n"
    )
    imported = {
        make: subprocess.run(
            [sys.executable, "-c", code.format(make=make)], capture_output=True, text=True, check=True
        ).stdout.split()[-1]
        for make in ("FunctionalAdam", "torch.optim.Adam")
    }
    assert imported == {"FunctionalAdam": "False", "torch.optim.Adam": "True"}


def test_it_refuses_what_it_cannot_do():
    with pytest.raises(ValueError, match="no parameter to optimize"):
        FunctionalAdam([torch.nn.Parameter(torch.ones(1), requires_grad=False)])
    with pytest.raises(ValueError, match="the fused Adam runs on cuda and cpu.*pass fused=False"):
        FunctionalAdam([torch.nn.Parameter(torch.ones(1, device="meta"))], fused=True)
    with pytest.raises(ValueError, match="capturable Adam is for CUDA graphs"):
        FunctionalAdam([torch.nn.Parameter(torch.ones(1))], capturable=True)
    on_two = [torch.nn.Parameter(torch.ones(1)), torch.nn.Parameter(torch.ones(1, device="meta"))]
    with pytest.raises(ValueError, match="on several devices"):
        FunctionalAdam(on_two)
    FunctionalAdam(on_two[:1])  # the control: one device is accepted


def test_zero_grad_forgets_or_zeroes():
    w = torch.nn.Parameter(torch.ones(2))
    adam = FunctionalAdam([w])
    w.sum().backward()
    adam.zero_grad(set_to_none=False)
    assert torch.equal(w.grad, torch.zeros(2))
    adam.zero_grad()
    assert w.grad is None
    adam.step()  # no gradient: nothing moves, no step is counted
    assert torch.equal(w.detach(), torch.ones(2)) and adam.state[w]["step"].item() == 0


@CUDA
@pytest.mark.parametrize("capturable", [False, True])
def test_on_cuda_the_fused_update_matches_the_class(capturable):
    reference, functional = _trained_twice("cuda", fused=True, capturable=capturable)
    for a, b in zip(reference, functional, strict=True):
        torch.testing.assert_close(a, b)


@CUDA
def test_on_cuda_training_captures_its_step_as_a_graph():
    beats = torch.randn(256, 16, device="cuda")
    trained = vae.train(beats, epochs=2, batch_size=64, progress=False)
    assert trained.steps_ran == "CUDA graph", trained.step_note
    assert torch.isfinite(trained.epoch_losses).all()


@CUDA
def test_under_a_cuda_graph_the_functional_update_matches_the_class():
    beats = torch.randn(64, 16, generator=torch.Generator().manual_seed(1)).cuda()
    trained = []
    for make in (
        lambda params: torch.optim.Adam(params, lr=2e-3, fused=True, capturable=True),
        lambda params: FunctionalAdam(params, lr=2e-3, capturable=True),
    ):
        torch.manual_seed(0)
        model = vae.BeatVAE(16, latent=2).cuda()
        optimizer = make(model.parameters())
        torch.manual_seed(2)  # the same sampling noise in the warm-ups and the graph, for both optimizers
        graph, _ = vae.capture_step(model, optimizer, beats.clone())
        for _ in range(3):
            graph.replay()
        torch.cuda.synchronize()
        trained.append([p.detach().clone() for p in model.parameters()])
    for a, b in zip(*trained, strict=True):
        torch.testing.assert_close(a, b)
