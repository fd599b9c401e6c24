#!/usr/bin/env bash
# What chapter 6's text says of PyTorch's optimizer, read in the GPU host's own PyTorch, and support.ecg.adam's
# tests run there (the CUDA ones included), before chapter 6 is executed. Run from the repository root on the GPU
# host with its environment set; what it prints is committed as functional_adam_check_<gpu>_<date>.log.
set -uo pipefail
python3 -c "import torch; print('torch', torch.__version__)"
OPTIM=$(python3 -c "import torch.optim.optimizer as o; print(o.__file__)")
COMPILE=$(python3 -c "import torch._compile as c; print(c.__file__)")
echo "--- $OPTIM: the step wrapper's import, and add_param_group under torch._disable_dynamo"
grep -n -B1 -A2 "import torch._dynamo" "$OPTIM"
grep -n -B1 -A1 "def add_param_group" "$OPTIM"
ADAM=$(python3 -c "import torch.optim.adam as a; print(a.__file__)")
echo "--- $ADAM: Adam.step under the step wrapper; the functional adam's own decorator"
grep -n -A1 "_use_grad_for_differentiable$\|@_disable_dynamo_if_unsupported" "$ADAM"
echo "--- $COMPILE: _disable_dynamo imports torch._dynamo at the decorated function's first call"
grep -n -A3 "if disable_fn is None" "$COMPILE"
echo "--- whether a profile imports torch._dynamo (the command line's --traffic profiles each stage)"
python3 -c "
import sys, torch
before = 'torch._dynamo' in sys.modules
with torch.profiler.profile():
    torch.ones(4, device='cuda') + 1
print('imported before a profile:', before, '- after:', 'torch._dynamo' in sys.modules)
"
echo "--- python3 -m pytest -q -p no:cacheprovider -o addopts= tests/test_ecg_adam.py"
python3 -m pytest -q -p no:cacheprovider -o addopts="" tests/test_ecg_adam.py 2>&1 | tail -5
exit "${PIPESTATUS[0]}"  # the tests' own status: a failing run's log must not pass for a clean one
