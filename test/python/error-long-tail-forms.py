# The forms of the long-tail ops memopt does not take each stop the export
# with one ExportError that names the op and what it does not support, and
# no file is written.
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t | FileCheck %s
#
# CHECK: antialias: torch.nn.functional.interpolate {{.*}}: antialias=True is not supported
# CHECK: index-arithmetic: operator.add {{.*}}: arithmetic on i64 tensors is not supported
# CHECK: empty-piece: torch.tensor_split {{.*}}: piece 0 is empty, which memopt does not support
# CHECK: mask-int: Tensor.sum {{.*}}: the sum of an integer tensor is not supported (only of a bool mask)
# CHECK: softplus: torch.nn.functional.softplus {{.*}}: threshold=100 is not supported (at most 80, where exp still fits f32)
# CHECK: strided-view: torch.as_strided {{.*}}: as_strided reads the storage of a non-contiguous tensor, whose layout memopt does not keep: call .contiguous() first
# CHECK: scatter-overlap: torch.as_strided_scatter {{.*}}: the view names an element twice (PyTorch's result is unspecified)
# CHECK: floor-division: torch.div {{.*}}: rounding_mode='floor' is not supported (only 'trunc')
# CHECK: trapezoid-x: torch.trapezoid {{.*}}: x tensor<4x4xf32> must be 1-D or of y's rank, with y's extent 4 along dimension 3
# CHECK: cummax-indices: torch.cummax {{.*}}: the indices (the second result) of cummax are read: memopt computes only the values
# CHECK: files written: 0

import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import memopt


class Fn(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


x = torch.randn(2, 8, 4, 4)
cases = {
    "antialias": lambda x: F.interpolate(x, scale_factor=2.0,
                                         mode="bilinear",
                                         antialias=True).sum(),
    "index-arithmetic": lambda x: (x.argmax(1) + 1).float().sum(),
    "empty-piece": lambda x: torch.tensor_split(x, [0, 2], dim=1)[0].sum(),
    "mask-int": lambda x: (x > 0).to(torch.int32).sum(),
    "softplus": lambda x: F.softplus(x, threshold=100).sum(),
    "strided-view": lambda x: torch.as_strided(x.transpose(2, 3), (4,),
                                               (1,)).sum(),
    "scatter-overlap": lambda x: torch.as_strided_scatter(
        x, torch.ones(2, 2), (2, 2), (1, 1)).sum(),
    "floor-division": lambda x: torch.div(x, 3.0,
                                          rounding_mode="floor").sum(),
    "trapezoid-x": lambda x: torch.trapezoid(x, torch.ones(4, 4)).sum(),
    "cummax-indices": lambda x: torch.cummax(x, 1)[1].float().sum(),
}
for name, fn in cases.items():
    try:
        memopt.export(Fn(fn), (x,), os.path.join(sys.argv[1], name + ".mlir"))
        print("%s: exported" % name)
    except memopt.exporter.ExportError as e:
        print("%s: %s" % (name, e))
print("files written: %d" % len(os.listdir(sys.argv[1])))
