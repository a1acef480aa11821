# The parity oracle (memopt.testing) itself, on candidates whose error is
# known: PyTorch FP32 runs that differ from the oracle's own in rounding only
# must pass, and runs with one VJP scaled by 1.001 must fail.
#
#  - sums in another order (the batch reversed, the first steps' gradients
#    summed the other way round): passes, trajectory and gradients;
#  - one module's input gradient scaled by 1.001 (a backward hook): the
#    first-step gradient check fails on every model. Adam's update is
#    invariant to a gradient scaled uniformly, so in the MLP, where the
#    scale reaches fc1's gradients undiluted, the trajectory may pass (it
#    moves only through eps: on some BLAS kernels it fails, on others not),
#    which is why the parity tests check gradients as well; where the scaled
#    path joins a residual (GPT) or a batch norm (CNN) the trajectory fails
#    too.
#
# REQUIRES: torch
# RUN: %python %s %memopt_src_root | FileCheck %s
#
# CHECK: mlp reordered: trajectory ok, gradients ok
# CHECK: mlp vjp*1.001 (fc2): gradients FAIL
# CHECK: gpt reordered: trajectory ok, gradients ok
# CHECK: gpt vjp*1.001 (transformer.h.0.attn.c_proj): trajectory FAIL, gradients FAIL
# CHECK: cnn reordered: trajectory ok, gradients ok
# CHECK: cnn vjp*1.001 (layer1.conv2): trajectory FAIL, gradients FAIL

import os
import sys

import torch

from memopt.testing import Oracle, run_pytorch

STEPS = 5
SCALED = {"mlp": "fc2", "gpt": "transformer.h.0.attn.c_proj",
          "cnn": "layer1.conv2"}


def adamw(parameters):
    return torch.optim.AdamW(parameters, lr=1e-3, weight_decay=0.01)


def scale_vjp(path):
    def hook(model):
        def scaled(module, grad_input, grad_output):
            return tuple(None if g is None else g * 1.001 for g in grad_input)
        model.get_submodule(path).register_full_backward_hook(scaled)
    return hook


def verdicts(oracle, run, trajectory=True):
    checks = [("gradients", oracle.check_gradients(run.gradients))]
    if trajectory:
        checks.insert(0, ("trajectory", oracle.check(run.losses, run.state)))
    return ", ".join(f"{what} {'ok' if v.ok else 'FAIL'}"
                     for what, v in checks)


def main():
    sys.path.insert(0, os.path.join(sys.argv[1], "examples", "pytorch"))
    import models
    for name, path in SCALED.items():
        model, batch = models.build(name)
        oracle = Oracle(model, batch, STEPS, adamw)
        reversed_batch = {k: v.flip(0) for k, v in batch.items()}
        reordered = run_pytorch(model, reversed_batch, STEPS, adamw)
        print(f"{name} reordered: {verdicts(oracle, reordered)}")
        wrong = run_pytorch(model, batch, STEPS, adamw, hook=scale_vjp(path))
        print(f"{name} vjp*1.001 ({path}): "
              f"{verdicts(oracle, wrong, trajectory=name != 'mlp')}")


if __name__ == "__main__":
    main()
