# A multi-label image classifier as people write it trains as in PyTorch:
# two convolutions with GroupNorm, SiLU and max pooling, a global average
# pool, a linear head with one logit per label, and nn.BCEWithLogitsLoss
# with a pos_weight against multi-hot targets; the labels the model counts
# as predicted (logits > 0, a mask computed in the step) scale an auxiliary
# term. Compiled for the host and trained 5 AdamW steps in FP32, checked with
# the parity oracle (memopt.testing, docs/Reliability.md): the trajectory
# (losses, every parameter) and the first-step gradients against float64;
# and with --mixed-precision=bf16 against torch.autocast (the losses and the
# first-step gradients).
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t/f32 | FileCheck %s
# RUN: %python %s %t/bf16 bf16 | FileCheck %s --check-prefix=BF16
#
# CHECK: multi-label cnn: trajectory: 5 losses and 10 tensors within the oracle
# CHECK: multi-label cnn: gradients: 10 tensors within the oracle
# BF16: multi-label cnn bf16: trajectory: 5 losses within the oracle
# BF16: multi-label cnn bf16: gradients: 10 tensors within the oracle

import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
import memopt_run  # noqa: E402

LABELS = 6


class MultiLabelCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.GroupNorm(2, 8), nn.SiLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.GroupNorm(4, 16), nn.SiLU(),
            nn.AdaptiveAvgPool2d(1), nn.Flatten())
        self.head = nn.Linear(16, LABELS)
        self.loss = nn.BCEWithLogitsLoss(
            pos_weight=torch.linspace(0.5, 3.0, LABELS))

    def forward(self, images, targets):
        logits = self.head(self.features(images))
        predicted = (logits > 0).float()
        return self.loss(logits, targets) + \
            0.1 * (predicted * logits.sigmoid()).mean()


def main():
    torch.manual_seed(0)
    batch = {"images": torch.randn(8, 3, 8, 8),
             "targets": (torch.rand(8, LABELS) < 0.3).float()}
    precision = sys.argv[2] if len(sys.argv) > 2 else "f32"
    label = "multi-label cnn" + ("" if precision == "f32" else " " + precision)
    ok = memopt_run.export_and_check(label, MultiLabelCNN(), batch,
                                     sys.argv[1], 5, precision=precision)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
