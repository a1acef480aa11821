# The long tail of ops that models write every day, each exported and
# trained as in PyTorch: a small diffusion-style block (a convolution, nn.GroupNorm,
# a sinusoidal time embedding with torch.sin/cos), the activations written
# with the elementwise ops (leaky_relu, elu, selu, celu, softplus with a
# beta, logsigmoid, softsign, tanhshrink, erf, expm1, log1p, abs, square,
# sinc),
# std, var and logsumexp (through the maximum's gradient), and the losses: nll_loss of a log_softmax (the fused
# cross entropy), binary cross entropy with logits and a pos_weight, binary
# cross entropy of a sigmoid, L1, smooth L1 and Huber. Compiled for the host
# and trained 5 AdamW steps in FP32, checked with the parity oracle
# (memopt.testing, docs/Reliability.md): the trajectory (losses, every
# parameter) and the first-step gradients against float64; and with
# --mixed-precision=bf16 against torch.autocast (the losses and the
# first-step gradients). Each model also exports with F.group_norm's
# functional form.
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t | FileCheck %s
# RUN: mkdir -p %t/bf16 && %python %s %t/bf16 bf16 | FileCheck %s --check-prefix=BF16
#
# CHECK: long-tail: ops abs=5 cos=1 cross_entropy=1 erf=1 expm1=4 log1p=1 log_softmax=0 sin=1 sinc=1 softplus=3
# CHECK: long-tail: trajectory: 5 losses and 12 tensors within the oracle
# CHECK: long-tail: gradients: 12 tensors within the oracle
# BF16: long-tail bf16: trajectory: 5 losses within the oracle
# BF16: long-tail bf16: gradients: 12 tensors within the oracle

import math
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

    class LongTail(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(4, 8, 3, padding=1)
            self.norm = nn.GroupNorm(2, 8)
            self.time = nn.Linear(8, 8)
            self.fc = nn.Linear(8 * 16, 24)
            self.classes = nn.Linear(24, 5)
            self.labels = nn.Linear(24, 5)
            half = torch.arange(4, dtype=torch.float32)
            self.register_buffer("freqs", torch.exp(-math.log(100.0) *
                                                    half / 4).reshape(1, 4))
            self.register_buffer("pos_weight", torch.tensor(
                [2.0, 0.5, 1.0, 3.0, 1.5]))

        def forward(self, x, t, y, target):
            angles = t * self.freqs
            emb = self.time(torch.cat([torch.sin(angles), torch.cos(angles)],
                                      dim=1))
            h = self.norm(self.conv(x)) + emb.reshape(-1, 8, 1, 1)
            h = F.leaky_relu(h, 0.1).flatten(1)
            z = self.fc(h)
            z = (F.elu(z) + 0.5 * F.selu(z) + F.celu(z, 0.7) +
                 F.softplus(z, beta=2.0) + F.logsigmoid(z) + F.softsign(z) +
                 F.tanhshrink(z) + 0.3 * torch.erf(z) +
                 0.2 * torch.expm1(z.clamp(max=1.0)) +
                 torch.log1p(z.abs()) + 0.1 * z.square() +
                 0.5 * torch.sinc(z))
            z = z / (z.std(dim=1, keepdim=True) + 1.0)
            logits = self.classes(z)
            loss = F.nll_loss(F.log_softmax(logits, dim=1), y)
            b = self.labels(z)
            loss = loss + F.binary_cross_entropy_with_logits(
                b, target, pos_weight=self.pos_weight)
            loss = loss + 0.5 * F.binary_cross_entropy(torch.sigmoid(b),
                                                       target)
            loss = loss + F.l1_loss(b, target) + F.smooth_l1_loss(
                b, target, beta=0.5) + F.huber_loss(b, target, delta=0.8)
            return (loss + 0.1 * torch.var(b, dim=0, unbiased=False).sum() +
                    0.1 * torch.logsumexp(logits, dim=1).mean())

    torch.manual_seed(0)
    model = LongTail()
    generator = torch.Generator().manual_seed(1)
    batch = {"x": torch.randn(6, 4, 4, 4, generator=generator),
             "t": 10.0 * torch.rand(6, 1, generator=generator),
             "y": torch.randint(0, 5, (6,), generator=generator),
             "target": torch.randint(0, 2, (6, 5), generator=generator)
             .float()}
    return model, batch


def main():
    import torch
    import torch.nn.functional as F
    import memopt
    from memopt.testing import Oracle

    workdir = sys.argv[1]
    model, batch = build()
    mlir = os.path.join(workdir, "model.mlir")
    memopt.export(model, tuple(batch.values()), mlir)
    with open(mlir) as f:
        text = f.read()
    ops = ("abs", "cos", "cross_entropy", "erf", "expm1", "log1p",
           "log_softmax", "sin", "sinc", "softplus")
    counts = {op: len(re.findall(r"= memopt\.%s " % op, text)) for op in ops}
    print("long-tail: ops " +
          " ".join(f"{op}={n}" for op, n in sorted(counts.items())))

    # The functional group norm exports to the same ops as the module's.
    class Functional(torch.nn.Module):
        def __init__(self, norm):
            super().__init__()
            self.norm = norm

        def forward(self, x):
            return F.group_norm(x, 2, self.norm.weight, self.norm.bias,
                                self.norm.eps).square().mean()
    memopt.export(Functional(model.norm), (batch["x"].repeat(1, 2, 1, 1),),
                  os.path.join(workdir, "functional.mlir"))

    memopt.safetensors.save(batch, os.path.join(workdir, "batch.safetensors"))
    if len(sys.argv) > 2 and sys.argv[2] == "bf16":
        oracle = Oracle(model, batch, STEPS, adamw, precision="bf16")
        return 0 if check_parity("long-tail bf16", oracle, mlir, workdir,
                                 STEPS, "--mixed-precision=bf16",
                                 compare_state=False) else 1
    oracle = Oracle(model, batch, STEPS, adamw)
    return 0 if check_parity("long-tail", oracle, mlir, workdir,
                             STEPS) else 1


if __name__ == "__main__":
    sys.exit(main())
