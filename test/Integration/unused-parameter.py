# A parameter no gradient reaches (a head the loss does not use) is left
# alone, as torch.optim does with a None gradient: AdamW with weight decay
# 0.01 trains the model 5 steps, checked with the parity oracle
# (memopt.testing), which compares the unused weights too. Were they
# updated with a zero gradient, weight decay would shrink them by lr * 0.01
# per step: 53 times the oracle's allowance after 5 steps (its two tensors have
# no gradient to compare, as in PyTorch).
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t | FileCheck %s
#
# CHECK: unused: trajectory: 5 losses and 4 tensors within the oracle
# CHECK: unused: gradients: 2 tensors within the oracle

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
from memopt_run import adamw, check_parity  # noqa: E402

STEPS = 5


def main():
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import memopt
    from memopt.testing import Oracle

    class TwoHeads(nn.Module):
        def __init__(self):
            super().__init__()
            self.used = nn.Linear(8, 4)
            self.unused = nn.Linear(8, 4)

        def forward(self, x, y):
            return F.cross_entropy(self.used(x), y)

    workdir = sys.argv[1]
    torch.manual_seed(0)
    model = TwoHeads()
    generator = torch.Generator().manual_seed(1)
    batch = {"x": torch.randn(6, 8, generator=generator),
             "y": torch.randint(0, 4, (6,), generator=generator)}
    oracle = Oracle(model, batch, STEPS, adamw)
    mlir = os.path.join(workdir, "model.mlir")
    memopt.export(model, tuple(batch.values()), mlir)
    memopt.safetensors.save(batch, os.path.join(workdir, "batch.safetensors"))
    return 0 if check_parity("unused", oracle, mlir, workdir, STEPS) else 1


if __name__ == "__main__":
    sys.exit(main())
