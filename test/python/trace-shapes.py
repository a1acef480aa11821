# Models written as torchvision writes them trace (test/python/Inputs/
# trace_models.py): the tracer knows every shape while it traces, so
# `n, c, h, w = x.size()` and `B, T, C = x.shape` unpack into view
# arguments, `x.size(-1) ** -0.5`, `h // p` and `len(rows)` are numbers,
# chunk/split/unbind results unpack, lists go to torch.cat/torch.stack, a
# submodule's tuple result unpacks, and a mask that `x.new_zeros(T, T)` and
# `mask[i, :i] = True` for i in range(1, T) build is a constant. Each op keeps the scope of the module whose
# forward() computes it.
#
# REQUIRES: torch
# RUN: %python %s %t
# RUN: memopt-opt %t.conv.mlir | FileCheck %s --check-prefix=CONV
# RUN: memopt-opt %t.vit.mlir | FileCheck %s --check-prefix=VIT

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))

import torch  # noqa: E402

import memopt  # noqa: E402
from trace_models import ConvNet, PatchTransformer  # noqa: E402

torch.manual_seed(0)
for model, suffix in ((ConvNet(), "conv"), (PatchTransformer(), "vit")):
    batch = model.example_batch(torch.Generator().manual_seed(1))
    memopt.export(model, tuple(batch.values()),
                  "%s.%s.mlir" % (sys.argv[1], suffix))

# CONV-LABEL: func.func @forward(
# CONV-SAME: %[[X:[^:]+]]: tensor<2x3x6x6xf32>
# CONV-SAME: memopt.role = "input"
# CONV-SAME: %[[Y:[^:]+]]: tensor<2xi64>
# CONV-SAME: memopt.role = "label"
# CONV: %[[STEM:.*]] = memopt.add {{.*}} {memopt.scope = "stem"} : tensor<2x4x6x6xf32>

# ChannelShuffle: `n, c, h, w = x.size()`, view(n, 2, c // 2, h, w),
# transpose, reshape(n, -1, h, w).
# CONV: %[[V:.*]] = memopt.reshape %[[STEM]] {memopt.scope = "shuffle"} : tensor<2x4x6x6xf32> to tensor<2x2x2x6x6xf32>
# CONV: %[[T:.*]] = memopt.transpose %[[V]] perm [0, 2, 1, 3, 4] {memopt.scope = "shuffle"}
# CONV: %[[S:.*]] = memopt.reshape %[[T]] {memopt.scope = "shuffle"} : tensor<2x2x2x6x6xf32> to tensor<2x4x6x6xf32>

# TwoWay: `a, b = x.chunk(2, dim=1)`, one branch each, returned as a tuple
# and unpacked by the caller.
# CONV: %[[A:.*]] = memopt.slice %[[S]] starts [0, 0, 0, 0] limits [2, 2, 6, 6] strides [1, 1, 1, 1] {memopt.scope = "branches"}
# CONV: %[[B:.*]] = memopt.slice %[[S]] starts [0, 2, 0, 0] limits [2, 4, 6, 6] strides [1, 1, 1, 1] {memopt.scope = "branches"}
# CONV: memopt.conv2d %[[A]], {{.*}} {memopt.scope = "branches.left"}
# CONV: %[[LEFT:.*]] = memopt.add {{.*}} {memopt.scope = "branches.left"}
# CONV: memopt.conv2d %[[B]], {{.*}} {memopt.scope = "branches.right"}
# CONV: %[[RIGHT:.*]] = memopt.relu {{.*}} {memopt.scope = "branches"}

# torch.cat of a list, then `first, rest = x.split([1, 3], dim=1)`.
# CONV: %[[CAT:.*]] = memopt.concat %[[LEFT]], %[[RIGHT]] dim 1 {memopt.scope = ""}
# CONV: %[[FIRST:.*]] = memopt.slice %[[CAT]] starts [0, 0, 0, 0] limits [2, 1, 6, 6] strides [1, 1, 1, 1] {memopt.scope = ""} : tensor<2x4x6x6xf32> to tensor<2x1x6x6xf32>
# CONV: %[[REST:.*]] = memopt.slice %[[CAT]] starts [0, 1, 0, 0] limits [2, 4, 6, 6] strides [1, 1, 1, 1] {memopt.scope = ""} : tensor<2x4x6x6xf32> to tensor<2x3x6x6xf32>

# unbind(2): six rows, each a slice without its dimension.
# CONV: %[[R0:.*]] = memopt.slice %[[REST]] starts [0, 0, 0, 0] limits [2, 3, 1, 6] strides [1, 1, 1, 1]
# CONV: memopt.reshape %[[R0]] {memopt.scope = ""} : tensor<2x3x1x6xf32> to tensor<2x3x6xf32>
# CONV: memopt.slice %[[REST]] starts [0, 0, 5, 0] limits [2, 3, 6, 6] strides [1, 1, 1, 1]

# torch.stack of the row means along a new last dimension, / len(rows).
# CONV: %[[M0:.*]] = memopt.reduce_mean %{{.*}} dims [2] {memopt.scope = ""} : tensor<2x3x6xf32> to tensor<2x3xf32>
# CONV: %[[E0:.*]] = memopt.reshape %[[M0]] {memopt.scope = ""} : tensor<2x3xf32> to tensor<2x3x1xf32>
# CONV: %[[STACK:.*]] = memopt.concat %[[E0]], %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} dim 2 {memopt.scope = ""} {{.*}} -> tensor<2x3x6xf32>
# CONV: %[[POOLED:.*]] = memopt.mul_scalar %[[STACK]], 0.16666666666666666

# flatten (the function and the method), then the classifier.
# CONV: %[[F1:.*]] = memopt.reshape %[[FIRST]] {memopt.scope = ""} : tensor<2x1x6x6xf32> to tensor<2x36xf32>
# CONV: %[[F2:.*]] = memopt.reshape %[[POOLED]] {memopt.scope = ""} : tensor<2x3x6xf32> to tensor<2x18xf32>
# CONV: %[[FEAT:.*]] = memopt.concat %[[F1]], %[[F2]] dim 1 {memopt.scope = ""} : tensor<2x36xf32>, tensor<2x18xf32> -> tensor<2x54xf32>
# CONV: memopt.matmul %[[FEAT]], {{.*}} {memopt.scope = "fc"}
# CONV: memopt.cross_entropy %{{.*}}, %[[Y]] {memopt.scope = ""}

# PatchTransformer: `n, c, h, w = x.shape`; patches of 2x2 from h // p and
# w // p.
# VIT-LABEL: func.func @forward(
# VIT-SAME: %[[X:[^:]+]]: tensor<2x3x4x6xf32>
# VIT-SAME: %[[CLS:[^:]+]]: tensor<1x1x8xf32> {memopt.name = "cls", memopt.role = "param"}
# VIT-SAME: %[[POS:[^:]+]]: tensor<1x32x8xf32> {memopt.name = "pos", memopt.role = "param"}
# VIT: %[[P:.*]] = memopt.reshape %[[X]] {memopt.scope = ""} : tensor<2x3x4x6xf32> to tensor<2x3x2x2x3x2xf32>
# VIT: %[[PT:.*]] = memopt.transpose %[[P]] perm [0, 2, 4, 1, 3, 5] {memopt.scope = ""}
# VIT: memopt.reshape %[[PT]] {memopt.scope = ""} : tensor<2x2x3x3x2x2xf32> to tensor<2x6x12xf32>
# VIT: %[[EMB:.*]] = memopt.add {{.*}} {memopt.scope = "embed"} : tensor<2x6x8xf32>

# The class token expanded to n, concatenated; positions sliced to
# x.shape[1] = 7.
# VIT: %[[CLSB:.*]] = memopt.broadcast %[[CLS]] dims [0, 1, 2] {memopt.scope = ""} : tensor<1x1x8xf32> to tensor<2x1x8xf32>
# VIT: memopt.concat %[[CLSB]], %[[EMB]] dim 1 {memopt.scope = ""} : tensor<2x1x8xf32>, tensor<2x6x8xf32> -> tensor<2x7x8xf32>
# VIT: memopt.slice %[[POS]] starts [0, 0, 0] limits [1, 7, 8] strides [1, 1, 1] {memopt.scope = ""}

# Attention: `B, T, C = x.shape`, `q, k, v = qkv.split(C, dim=2)`, heads
# from view(B, T, heads, C // heads), the scale k.size(-1) ** -0.5, a
# mask built from x.new_zeros(T, T), known at export time.
# VIT: %[[QKV:.*]] = memopt.add {{.*}} {memopt.scope = "attn.qkv"} : tensor<2x7x24xf32>
# VIT: %[[Q:.*]] = memopt.slice %[[QKV]] starts [0, 0, 0] limits [2, 7, 8] strides [1, 1, 1] {memopt.scope = "attn"}
# VIT: %[[K:.*]] = memopt.slice %[[QKV]] starts [0, 0, 8] limits [2, 7, 16] strides [1, 1, 1] {memopt.scope = "attn"}
# VIT: %[[V:.*]] = memopt.slice %[[QKV]] starts [0, 0, 16] limits [2, 7, 24] strides [1, 1, 1] {memopt.scope = "attn"}
# VIT: memopt.reshape %[[Q]] {memopt.scope = "attn"} : tensor<2x7x8xf32> to tensor<2x7x2x4xf32>
# VIT: %[[SCORES:.*]] = memopt.matmul %{{.*}}, %{{.*}} transpose_rhs {memopt.scope = "attn"} : tensor<2x2x7x4xf32>, tensor<2x2x7x4xf32> -> tensor<2x2x7x7xf32>
# VIT: %[[SCALED:.*]] = memopt.mul_scalar %[[SCORES]], 5.000000e-01 {memopt.scope = "attn"}
# VIT: %[[MASK:.*]] = memopt.constant dense<{{\[\[}}false, false, false, false, false, false, false], [true, false, {{.*}}, [true, true, true, true, true, true, false]]> : tensor<7x7xi1> {memopt.scope = "attn"}
# VIT: memopt.masked_fill %[[SCALED]], %{{.*}}, 0xFFF0000000000000 {memopt.scope = "attn"}
# VIT: memopt.softmax %{{.*}} dim 3 {memopt.scope = "attn"}
# VIT: memopt.reshape %{{.*}} {memopt.scope = "attn"} : tensor<2x7x2x4xf32> to tensor<2x7x8xf32>
# VIT: memopt.matmul {{.*}} {memopt.scope = "attn.proj"}

# The class token's output: x[:, 0].
# VIT: %[[TOKEN:.*]] = memopt.slice %{{.*}} starts [0, 0, 0] limits [2, 1, 8] strides [1, 1, 1] {memopt.scope = ""}
# VIT: %[[FLAT:.*]] = memopt.reshape %[[TOKEN]] {memopt.scope = ""} : tensor<2x1x8xf32> to tensor<2x8xf32>
# VIT: memopt.matmul %[[FLAT]], {{.*}} {memopt.scope = "head"}
# VIT: memopt.cross_entropy
