# Models written as torchvision writes them (test/python/Inputs/
# trace_models.py: shapes unpacked into view arguments and used in
# arithmetic, chunk/split/unbind, torch.cat/torch.stack of lists, a
# submodule returning a tuple, flatten), exported by memopt.export and
# trained for 5 AdamW steps with memopt-compile, checked with the parity
# oracle (memopt.testing, docs/Reliability.md): every loss, every final
# parameter and every first-step gradient within 4x PyTorch FP32's own
# error against float64. test/python/trace-shapes.py checks their IR.
#
# conv: ChannelShuffle (x.size() unpacked into view), a tuple-returning
#   two-branch block over x.chunk(2, 1), torch.cat of a list, split into
#   [1, 3] channels, unbind of the rows, torch.stack of their means over
#   len(rows), flatten, a classifier.
# vit: patches from `n, c, h, w = x.shape`, a class token expanded to the
#   batch and concatenated, positions sliced to x.shape[1],
#   attention (each token sees itself and the later ones) with
#   `B, T, C = x.shape`, q, k, v from split(C, dim=2) and the
#   scale k.size(-1) ** -0.5, the class token's output.
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s conv %t/conv | FileCheck %s --check-prefix=CONV
# RUN: %python %s vit %t/vit | FileCheck %s --check-prefix=VIT
#
# CONV: conv: trajectory: 5 losses and 8 tensors within the oracle
# CONV: conv: gradients: 8 tensors within the oracle
# VIT: vit: trajectory: 5 losses and 12 tensors within the oracle
# VIT: vit: gradients: 12 tensors within the oracle

import os
import sys

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "Inputs"))
sys.path.insert(0, os.path.join(HERE, "..", "python", "Inputs"))
from memopt_run import export_and_check  # noqa: E402
from trace_models import ConvNet, PatchTransformer  # noqa: E402

import torch  # noqa: E402

STEPS = 5
MODELS = {"conv": ConvNet, "vit": PatchTransformer}


def main():
    name, workdir = sys.argv[1], sys.argv[2]
    torch.manual_seed(0)
    model = MODELS[name]()
    batch = model.example_batch(torch.Generator().manual_seed(1))
    return 0 if export_and_check(name, model, batch, workdir, STEPS) else 1


if __name__ == "__main__":
    sys.exit(main())
