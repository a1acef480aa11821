# Label smoothing and padding indices: nn.CrossEntropyLoss and
# F.cross_entropy carry label_smoothing (0 prints nothing); nn.Embedding and
# F.embedding carry padding_idx, a negative one counted from the end of the
# table as PyTorch does; the options memopt does not implement are refused.
#
# REQUIRES: torch
# RUN: %python %s %t && memopt-opt %t.mlir | FileCheck %s
# RUN: not %python %s %t-norm max_norm 2>&1 | FileCheck %s --check-prefix=NORM
# RUN: not %python %s %t-freq scale_grad_by_freq 2>&1 | FileCheck %s --check-prefix=FREQ
# RUN: not %python %s %t-sparse sparse 2>&1 | FileCheck %s --check-prefix=SPARSE

# CHECK-LABEL: func.func @forward
# CHECK: memopt.embedding %{{.*}}, %{{.*}} padding_idx 9 {memopt.scope = "tok"} : tensor<10x4xf32>
# CHECK: memopt.embedding %{{.*}}, %{{.*}} padding_idx 8 {memopt.scope = ""} : tensor<10x4xf32>
# CHECK: memopt.embedding %{{.*}}, %{{.*}} {memopt.scope = "pos"} : tensor<10x4xf32>
# CHECK: memopt.cross_entropy %{{.*}}, %{{.*}} label_smoothing 1.000000e-01 {memopt.scope = "loss"}
# CHECK: memopt.cross_entropy %{{.*}}, %{{.*}} reduction<sum> label_smoothing 2.500000e-01 {memopt.scope = ""}
# CHECK: memopt.cross_entropy %{{.*}}, %{{.*}} {memopt.scope = ""}

# NORM: ExportError: {{.*}}: max_norm=1.0 is not supported
# FREQ: ExportError: {{.*}}: scale_grad_by_freq=True is not supported
# SPARSE: ExportError: {{.*}}: sparse=True is not supported

import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import memopt

REFUSED = {"max_norm": 1.0, "scale_grad_by_freq": True, "sparse": True}


class Model(nn.Module):
    def __init__(self, **options):
        super().__init__()
        self.tok = nn.Embedding(10, 4, padding_idx=-1, **options)
        self.extra = nn.Parameter(torch.randn(10, 4))
        self.pos = nn.Embedding(10, 4)
        self.head = nn.Linear(4, 10)
        self.loss = nn.CrossEntropyLoss(label_smoothing=0.1)

    def forward(self, x, y):
        h = self.tok(x) + F.embedding(x, self.extra, padding_idx=-2)
        logits = self.head(h + self.pos(x)).view(-1, 10)
        return (self.loss(logits, y.view(-1)) +
                F.cross_entropy(logits, y.view(-1), label_smoothing=0.25,
                                reduction="sum") +
                F.cross_entropy(logits, y.view(-1), label_smoothing=0.0))


options = {name: REFUSED[name] for name in sys.argv[2:]}
torch.manual_seed(0)
memopt.export(Model(**options),
              (torch.randint(0, 10, (2, 3)), torch.randint(0, 10, (2, 3))),
              sys.argv[1] + ".mlir")
