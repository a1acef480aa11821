# memopt.testing.autocast, PyTorch's reference under mixed precision: CPU
# autocast with the CUDA policy's repairs. A layer norm of a bf16 input
# runs in f32 and equals the f32 norm of the same values (plain CPU
# autocast fails on it: a bf16 input meets the norm's f32 weight); ReLU6 of
# a bf16 tensor is exact and has a backward, and hardtanh takes its bounds
# by position or by name; outside the context the functions are PyTorch's
# own again.
#
# REQUIRES: torch
# RUN: %python %s | FileCheck %s
#
# CHECK: layer_norm: f32, equal to the f32 norm: True
# CHECK: group_norm: f32, equal to the f32 norm: True
# CHECK: relu6: bf16 exact True, gradient exact True
# CHECK: hardtanh bounds by name: True
# CHECK: restored: True

import torch
import torch.nn.functional as F

from memopt.testing import autocast

functions = (F.layer_norm, F.group_norm, F.hardtanh)
generator = torch.Generator().manual_seed(0)
x = torch.randn(4, 8, generator=generator).to(torch.bfloat16)
weight = torch.randn(8, generator=generator)
bias = torch.randn(8, generator=generator)
linear = torch.randn(8, 8, generator=generator)

with autocast("bf16"):
    h = F.linear(x.float(), linear)           # bf16 under autocast
    y = F.layer_norm(h, (8,), weight, bias)
    g = F.group_norm(h.reshape(4, 8, 1), 2, weight, bias)
want = F.layer_norm(h.float(), (8,), weight, bias)
print("layer_norm: %s, equal to the f32 norm: %s" % (
    "f32" if y.dtype == torch.float32 else y.dtype, torch.equal(y, want)))
want = F.group_norm(h.float().reshape(4, 8, 1), 2, weight, bias)
print("group_norm: %s, equal to the f32 norm: %s" % (
    "f32" if g.dtype == torch.float32 else g.dtype, torch.equal(g, want)))

x6 = (x * 8).requires_grad_()
with autocast("bf16"):
    y6 = torch.nn.ReLU6()(x6)
y6.backward(torch.ones_like(y6))
exact = y6.dtype == torch.bfloat16 and torch.equal(
    y6.float(), x6.detach().float().clamp(0, 6))
mask = ((x6.detach() > 0) & (x6.detach() < 6)).to(torch.bfloat16)
print("relu6: bf16 exact %s, gradient exact %s" % (
    exact, torch.equal(x6.grad, mask)))
with autocast("bf16"):
    named = F.hardtanh(x * 8, min_val=0.0, max_val=6.0)
print("hardtanh bounds by name: %s" % torch.equal(
    named.float(), (x * 8).float().clamp(0, 6)))
print("restored: %s" % (
    (F.layer_norm, F.group_norm, F.hardtanh) == functions))
