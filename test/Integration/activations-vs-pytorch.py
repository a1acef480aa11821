# The hard activations, mish and the clamps train as in PyTorch: an MLP
# whose layers go through nn.ReLU6 (in place, as torchvision writes it),
# nn.Hardtanh, nn.Hardswish, nn.Hardsigmoid, nn.Mish, F.relu6,
# torch.clamp, Tensor.clamp(min=) and Tensor.clamp_max, exported, compiled
# with memopt-compile for the host and trained 5 AdamW steps in FP32,
# checked with the parity oracle (memopt.testing, docs/Reliability.md): the
# trajectory (losses, every parameter) and the first-step gradients within
# the oracle's allowance against float64.
#
# The pre-activations are scaled so that every piece of every function is
# taken (values below -3 and above 6, inside each clamp's range and outside
# on either side); the script checks that before training, and counts the
# exported ops so that a model that lost one fails.
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t | FileCheck %s
#
# CHECK: activations: ops clamp=6 hardsigmoid=1 hardswish=1 mish=1
# CHECK: activations: every piece of every activation is taken
# CHECK: activations: trajectory: 5 losses and 8 tensors within the oracle
# CHECK: activations: gradients: 8 tensors within the oracle

import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
from memopt_run import adamw, check_parity  # noqa: E402

STEPS = 5


def build():
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Activations(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(12, 32)
            self.fc2 = nn.Linear(32, 32)
            self.fc3 = nn.Linear(32, 32)
            self.head = nn.Linear(32, 5)
            self.relu6 = nn.ReLU6(inplace=True)
            self.hardtanh = nn.Hardtanh(-1.5, 2.0)
            self.hardswish = nn.Hardswish()
            self.hardsigmoid = nn.Hardsigmoid()
            self.mish = nn.Mish()

        def pre_activations(self, x):
            """The values each group of activations reads."""
            a = self.fc1(x) * 4.0
            h = self.relu6(a * 1.5) + self.hardtanh(a)
            b = self.fc2(h) * 3.0
            h = self.hardswish(b) + self.hardsigmoid(b) * self.mish(b * 0.5)
            c = self.fc3(h) * 2.0
            return a, b, c

        def forward(self, x, y):
            a, b, c = self.pre_activations(x)
            h = (torch.clamp(c, -1.0, 1.5) + c.clamp(min=-0.5) * 0.5 +
                 F.relu6(c).clamp_max(4.0))
            return F.cross_entropy(self.head(h), y)

    torch.manual_seed(0)
    model = Activations()
    generator = torch.Generator().manual_seed(1)
    batch = {"x": 2.0 * torch.randn(24, 12, generator=generator),
             "y": torch.randint(0, 5, (24,), generator=generator)}
    return model, batch


def covers_every_piece(model, batch):
    """Whether the initial pre-activations fall on both sides of every kink
    (ReLU6's input a * 1.5 and F.relu6's input c included)."""
    import torch
    with torch.no_grad():
        a, b, c = model.pre_activations(batch["x"])
    kinks = [(a * 1.5, (0.0, 6.0)), (a, (-1.5, 2.0)), (b, (-3.0, 3.0)),
             (c, (-1.0, -0.5, 0.0, 1.5, 4.0, 6.0))]
    return all(bool((v < k).any()) and bool((v > k).any())
               for v, points in kinks for k in points)


def main():
    import memopt
    from memopt.testing import Oracle

    workdir = sys.argv[1]
    model, batch = build()
    mlir = os.path.join(workdir, "model.mlir")
    memopt.export(model, tuple(batch.values()), mlir)
    with open(mlir) as f:
        text = f.read()
    counts = {op: len(re.findall(r"= memopt\.%s " % op, text))
              for op in ("clamp", "hardsigmoid", "hardswish", "mish")}
    print("activations: ops " +
          " ".join(f"{op}={n}" for op, n in sorted(counts.items())))
    if covers_every_piece(model, batch):
        print("activations: every piece of every activation is taken")
    oracle = Oracle(model, batch, STEPS, adamw)
    memopt.safetensors.save(batch, os.path.join(workdir, "batch.safetensors"))
    return 0 if check_parity("activations", oracle, mlir, workdir,
                             STEPS) else 1


if __name__ == "__main__":
    sys.exit(main())
