# A LLaMA block written as model code writes it trains as in PyTorch: the
# rotary embedding's frequencies, angles, cos and sin and the causal mask
# are built in forward (torch.arange, torch.outer, cos/sin, torch.full +
# triu), RMSNorm by hand (pow, mean, rsqrt), rotate_half with a cat,
# attention by matmul + mask + softmax, and a SwiGLU feed-forward. What
# depends only on shapes and constants becomes constants at export; the
# rest is memopt's ops. Compiled for the host and trained 5 AdamW steps in
# FP32, checked with the parity oracle (memopt.testing,
# docs/Reliability.md): the trajectory (losses, every parameter) and the
# first-step gradients against float64; and with --mixed-precision=bf16
# against torch.autocast (the losses and the first-step gradients).
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t/f32 | FileCheck %s
# RUN: %python %s %t/bf16 bf16 | FileCheck %s --check-prefix=BF16
#
# CHECK: llama: trajectory: 5 losses and 9 tensors within the oracle
# CHECK: llama: gradients: 9 tensors within the oracle
# BF16: llama bf16: trajectory: 5 losses within the oracle
# BF16: llama bf16: gradients: 9 tensors within the oracle

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
from memopt_run import export_and_check  # noqa: E402

STEPS = 5
WIDTH, HEADS, LENGTH, VOCAB = 16, 2, 6, 11


def build():
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class RMSNorm(nn.Module):
        def __init__(self, width, eps=1e-6):
            super().__init__()
            self.eps = eps
            self.weight = nn.Parameter(torch.ones(width))

        def forward(self, x):
            x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
            return x * self.weight

    def rotate_half(x):
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
        return torch.cat((-x2, x1), dim=-1)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(VOCAB, WIDTH)
            self.norm1 = RMSNorm(WIDTH)
            self.qkv = nn.Linear(WIDTH, 3 * WIDTH, bias=False)
            self.proj = nn.Linear(WIDTH, WIDTH, bias=False)
            self.norm2 = RMSNorm(WIDTH)
            self.gate = nn.Linear(WIDTH, 2 * WIDTH, bias=False)
            self.up = nn.Linear(WIDTH, 2 * WIDTH, bias=False)
            self.down = nn.Linear(2 * WIDTH, WIDTH, bias=False)
            self.head = nn.Linear(WIDTH, VOCAB, bias=False)

        def forward(self, idx, targets):
            batch, length = idx.shape
            dim = WIDTH // HEADS
            inv = 1.0 / (10000.0 ** (torch.arange(0, dim, 2).float() / dim))
            angles = torch.outer(torch.arange(length).float(), inv)
            angles = torch.cat((angles, angles), dim=-1)
            cos, sin = angles.cos(), angles.sin()
            mask = torch.full((length, length), float("-inf")).triu(1)

            x = self.embed(idx)
            q, k, v = self.qkv(self.norm1(x)).split(WIDTH, dim=-1)
            q, k, v = (t.view(batch, length, HEADS, dim).transpose(1, 2)
                       for t in (q, k, v))
            q = q * cos + rotate_half(q) * sin
            k = k * cos + rotate_half(k) * sin
            scores = q @ k.transpose(-2, -1) / dim ** 0.5 + mask
            y = F.softmax(scores, dim=-1) @ v
            x = x + self.proj(y.transpose(1, 2).reshape(batch, length, WIDTH))
            h = self.norm2(x)
            x = x + self.down(F.silu(self.gate(h)) * self.up(h))
            logits = self.head(x)
            return F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))

    torch.manual_seed(0)
    model = Block()
    generator = torch.Generator().manual_seed(1)
    batch = {"idx": torch.randint(0, VOCAB, (3, LENGTH), generator=generator),
             "targets": torch.randint(0, VOCAB, (3, LENGTH),
                                      generator=generator)}
    return model, batch


def main():
    model, batch = build()
    precision = sys.argv[2] if len(sys.argv) > 2 else "f32"
    label = "llama" if precision == "f32" else "llama " + precision
    return 0 if export_and_check(label, model, batch, sys.argv[1], STEPS,
                                 precision=precision) else 1


if __name__ == "__main__":
    sys.exit(main())
