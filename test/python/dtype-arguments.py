# The dtype argument of softmax, log_softmax, sum and mean converts the
# input before the op, as in PyTorch: dtype=torch.float32 on an f32 input
# (Hugging Face's LLaMA and Mistral attention) adds nothing, a 16-bit dtype
# is a cast, and the casts around them (.to(dtype), .float(), .type_as())
# follow. An integer dtype is refused by name. On the meta device, a real
# buffer (rotary cos/sin tables) meets values computed from meta parameters
# and stays the constant it is.
#
# REQUIRES: torch
# RUN: %python %s %t && memopt-opt %t.mlir | FileCheck %s
# RUN: %python %s %t-meta meta && memopt-opt %t-meta.mlir | FileCheck %s --check-prefix=META
# RUN: not test -e %t-meta.safetensors
# RUN: not %python %s %t-int int 2>&1 | FileCheck %s --check-prefix=INT

# CHECK-LABEL: func.func @forward
# CHECK-NOT: memopt.cast
# CHECK: memopt.softmax %{{.*}} dim 1 {{.*}} : tensor<4x8xf32>
# CHECK-NOT: memopt.cast
# CHECK: memopt.log_softmax %{{.*}} dim 1 {{.*}} : tensor<4x8xf32>
# CHECK: memopt.cast %{{.*}} : tensor<4x8xf32> to tensor<4x8xbf16>
# CHECK-NEXT: memopt.softmax %{{.*}} dim 1 {{.*}} : tensor<4x8xbf16>
# CHECK-NEXT: memopt.cast %{{.*}} : tensor<4x8xbf16> to tensor<4x8xf32>
# CHECK: memopt.cast %{{.*}} : tensor<4x8xf32> to tensor<4x8xf16>
# CHECK-NEXT: memopt.reduce_sum %{{.*}} dims [1] {{.*}} : tensor<4x8xf16> to tensor<4xf16>
# CHECK: memopt.reduce_mean %{{.*}} dims [0] {{.*}} : tensor<4xf32> to tensor<f32>

# META: %[[COS:.*]] = memopt.constant dense<{{\[\[}}1.000000e+00, 0.540302{{.*}}> : tensor<4x8xf32>
# META: memopt.mul %{{.*}}, %[[COS]]

# INT: ExportError: {{.*}}sum{{.*}}: dtype=torch.int64 is not supported (only floating-point dtypes)

import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import memopt

path = sys.argv[1]
mode = sys.argv[2] if len(sys.argv) > 2 else "cpu"


class Model(nn.Module):
    def __init__(self, device=None):
        super().__init__()
        self.w = nn.Parameter(torch.randn(8, 8, device=device))
        # A buffer with a value, as rotary embeddings keep their tables.
        self.register_buffer("cos", torch.arange(32.0).view(4, 8).cos())

    def forward(self, x, y):
        h = (x @ self.w) * self.cos
        p = F.softmax(h, dim=-1, dtype=torch.float32).to(h.dtype)
        q = torch.log_softmax(h, 1, dtype=torch.float32).float()
        r = F.softmax(h, dim=-1, dtype=torch.bfloat16).type_as(h)
        dtype = torch.int64 if mode == "int" else torch.float16
        s = h.sum(1, dtype=dtype).to(torch.float32)
        return F.mse_loss(p + q + r, y) + s.mean(dtype=torch.float32)


torch.manual_seed(0)
x, y = torch.randn(4, 8), torch.randn(4, 8)
if mode == "meta":
    memopt.export(Model("meta"), (x.to("meta"), y.to("meta")), path + ".mlir")
else:
    memopt.export(Model(), (x, y), path + ".mlir")
