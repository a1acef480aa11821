# The indexing and spatial forms memopt writes with lookups, scatters,
# slices and constant matrices, under --mixed-precision=bf16 against
# torch.autocast (the parity oracle, docs/Reliability.md: 5 AdamW losses
# and the first-step gradients). Each reads the bf16 output of a
# convolution or a linear layer, as in a model: flip, index_select and
# gather by constant indices, gather and take_along_dim by indices the step
# computes (the labels, an argmax), max along a dimension with its indices,
# topk, the reflect / replicate / circular pads, roll, pixel (un)shuffle,
# 1-D max and average pooling, uneven adaptive max and average pooling,
# nearest and bilinear interpolation (align_corners both ways), a
# transposed convolution, repeat_interleave, tril, diagonal and a
# scatter_add. The selections are exact in any dtype; the averages,
# interpolation weights and the transposed convolution round as autocast's
# CUDA policy does (the oracle's repairs, memopt.testing.autocast).
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t | FileCheck %s
#
# CHECK: indexing-spatial bf16: trajectory: 5 losses within the oracle
# CHECK: indexing-spatial bf16: gradients: 8 tensors within the oracle

import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
import memopt_run  # noqa: E402

STEPS = 5


def features(h, z, y):
    """Every form under test, of the conv output h [N, 8, 6, 6], the linear
    output z [N, 10] and the labels y, flattened per sample."""
    n = h.shape[0]
    index = torch.tensor([3, 0, 0, 5])
    picked = torch.tensor([[0, 2, 1], [1, 1, 0], [2, 0, 2], [0, 0, 1]])
    parts = [
        torch.flip(h, [2, 3]),
        torch.index_select(h, 1, index),
        torch.gather(z, 1, picked[:n].repeat(1, 1)),
        torch.gather(z, 1, y.unsqueeze(1)),
        torch.take_along_dim(z, z.argmax(1, keepdim=True), 1),
        z.max(1).values.unsqueeze(1) * 0.5 + z.max(1).indices.unsqueeze(1),
        torch.topk(z, 3, dim=1).values,
        F.pad(h, (1, 1, 2, 0), mode="reflect"),
        F.pad(h, (0, 2, 1, 1), mode="replicate"),
        F.pad(h, (1, 1, 1, 1), mode="circular"),
        torch.roll(h, (1, -2), (2, 3)),
        F.pixel_shuffle(h, 2),
        F.pixel_unshuffle(h, 2),
        F.max_pool1d(h.flatten(2), 4),
        F.avg_pool1d(h.flatten(2), 3),
        F.adaptive_max_pool2d(h, 4),
        F.adaptive_avg_pool2d(h, 4),
        F.interpolate(h, scale_factor=2, mode="nearest"),
        F.interpolate(h, size=(5, 7), mode="bilinear"),
        F.interpolate(h, size=(9, 9), mode="bilinear", align_corners=True),
        torch.repeat_interleave(h[:, :2], 2, dim=1),
        torch.tril(h),
        torch.diagonal(h, 1, 2, 3),
        torch.zeros(n, 8, 4, dtype=h.dtype).scatter_add(
            2, torch.tensor([0, 1, 1, 3]).expand(n, 8, 4), h[:, :, 0, :4]),
    ]
    return torch.cat([p.flatten(1).to(z.dtype) for p in parts], 1)


class IndexingSpatial(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.up = nn.ConvTranspose2d(8, 2, 3, stride=2, padding=1)
        self.fc = nn.Linear(3 * 36, 10)
        with torch.no_grad():
            h = torch.zeros(4, 8, 6, 6)
            width = features(h, torch.zeros(4, 10),
                             torch.zeros(4, dtype=torch.long)).shape[1]
        self.head = nn.Linear(width + 2 * 11 * 11, 5)

    def forward(self, x, y):
        h = self.conv(x)
        z = self.fc(x.flatten(1))
        u = self.up(h).flatten(1)
        return F.cross_entropy(
            self.head(torch.cat([features(h, z, y), u.to(z.dtype)], 1)), y)


def main():
    import memopt
    from memopt.testing import Oracle
    workdir = sys.argv[1]
    torch.manual_seed(0)
    model = IndexingSpatial()
    batch = {"x": torch.randn(4, 3, 6, 6), "y": torch.tensor([1, 4, 0, 2])}
    oracle = Oracle(model, batch, STEPS, memopt_run.adamw, precision="bf16")
    mlir = os.path.join(workdir, "model.mlir")
    memopt.export(model, tuple(batch.values()), mlir)
    memopt.safetensors.save(batch, os.path.join(workdir, "batch.safetensors"))
    ok = memopt_run.check_parity("indexing-spatial bf16", oracle, mlir,
                                 workdir, STEPS, "--mixed-precision=bf16",
                                 compare_state=False)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
