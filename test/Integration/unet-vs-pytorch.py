# A small diffusion-style UNet trains as in PyTorch: convolutions with
# nn.GroupNorm and SiLU, a sinusoidal time embedding computed in forward
# with torch.sin/cos, a nearest-neighbour F.interpolate and nn.Upsample by
# 2 (and a downsampling interpolate by 2), a bilinear interpolate, an
# nn.ConvTranspose2d upsampling (stride 2, output_padding), a skip connection
# concatenated, pixel_unshuffle / pixel_shuffle, and the rearrangements
# repeat, tile, narrow, select and movedim, a reflect padding and a flip;
# an L1 + MSE loss. Compiled for the host (also with 2 micro-batches, whose
# step must be the full batch's) and trained 5 AdamW steps in FP32,
# checked with the parity
# oracle (memopt.testing, docs/Reliability.md): the trajectory (losses,
# every parameter) and the first-step gradients against float64.
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t | FileCheck %s
#
# RUN: %python %s %t/k2 2 | FileCheck %s --check-prefix=K2
#
# CHECK: unet: trajectory: 5 losses and 18 tensors within the oracle
# CHECK: unet: gradients: 18 tensors within the oracle
# K2: unet K=2: trajectory: 5 losses and 18 tensors within the oracle
# K2: unet K=2: gradients: 18 tensors within the oracle

import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
from memopt_run import adamw, check_parity  # noqa: E402

STEPS = 5


def build():
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Block(nn.Module):
        def __init__(self, cin, cout):
            super().__init__()
            self.conv = nn.Conv2d(cin, cout, 3, padding=1)
            self.norm = nn.GroupNorm(4, cout)

        def forward(self, x, emb):
            return F.silu(self.norm(self.conv(x)) + emb)

    class UNet(nn.Module):
        def __init__(self):
            super().__init__()
            self.time = nn.Linear(8, 8)
            self.down = Block(3, 8)
            self.mid = Block(32, 8)
            self.up = nn.Upsample(scale_factor=2, mode="nearest")
            self.deconv = nn.ConvTranspose2d(8, 8, 3, stride=2, padding=1,
                                             output_padding=1)
            self.out = Block(16, 12)
            self.head = nn.Conv2d(3, 3, 1)
            half = torch.arange(4, dtype=torch.float32)
            self.register_buffer("freqs", torch.exp(
                -math.log(100.0) * half / 4).reshape(1, 4))

        def forward(self, x, t, target):
            angles = t * self.freqs
            emb = self.time(torch.cat([torch.sin(angles), torch.cos(angles)],
                                      dim=1)).reshape(-1, 8, 1, 1)
            skip = self.down(x, emb)                       # [N, 8, 8, 8]
            h = F.pixel_unshuffle(skip, 2)                 # [N, 32, 4, 4]
            h = self.mid(h, emb)                           # [N, 8, 4, 4]
            h = self.up(h) + self.deconv(h) + F.interpolate(
                F.interpolate(skip, scale_factor=0.5), scale_factor=2.0) + \
                F.interpolate(F.avg_pool2d(skip, 2), scale_factor=2.0,
                              mode="bilinear", align_corners=False)
            h = torch.cat([h, skip], dim=1)                # [N, 16, 8, 8]
            h = self.out(h, emb.repeat(1, 2, 1, 1)[:, :12] +
                         torch.tile(emb.narrow(1, 0, 4), (1, 3, 1, 1)))
            y = self.head(F.pixel_shuffle(h, 2)[:, :, ::2, ::2])
            y = y + torch.flip(F.pad(y, (1, 1, 1, 1), mode="reflect"),
                               [3])[:, :, 1:-1, 2:]
            y = y + h.select(1, 0).unsqueeze(1).movedim(1, 3).movedim(3, 1)
            return F.l1_loss(y, target) + F.mse_loss(y, target)

    torch.manual_seed(0)
    model = UNet()
    generator = torch.Generator().manual_seed(1)
    batch = {"x": torch.randn(2, 3, 8, 8, generator=generator),
             "t": 10.0 * torch.rand(2, 1, generator=generator),
             "target": torch.randn(2, 3, 8, 8, generator=generator)}
    return model, batch


def main():
    import memopt
    from memopt.testing import Oracle

    workdir = sys.argv[1]
    os.makedirs(workdir, exist_ok=True)
    k = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    model, batch = build()
    mlir = os.path.join(workdir, "model.mlir")
    memopt.export(model, tuple(batch.values()), mlir)
    oracle = Oracle(model, batch, STEPS, adamw)
    memopt.safetensors.save(batch, os.path.join(workdir, "batch.safetensors"))
    if k == 1:
        return 0 if check_parity("unet", oracle, mlir, workdir, STEPS) else 1
    return 0 if check_parity("unet K=%d" % k, oracle, mlir, workdir, STEPS,
                             "--micro-batches=%d" % k) else 1


if __name__ == "__main__":
    sys.exit(main())
