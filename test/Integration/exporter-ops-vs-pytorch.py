# The ops torchvision's Swin, MaxViT, GoogLeNet, SqueezeNet, AlexNet and VGG
# need, as those models write them, in one small net that trains on the
# host and matches PyTorch under the parity oracle (memopt.testing): max
# pooling in ceil mode (8x8 to 4x4 where floor mode gives 3x3); average
# pooling in ceil mode (the last window's divisor is its 2 rows within the
# input), with padding not counted (count_include_pad=False) and with a
# divisor override, each as two averaging matmuls; adaptive average
# pooling to a size that does not divide the input (5x5 to 3x3,
# overlapping windows); F.pad with a value (0.5); torch.roll; swapaxes;
# indexing a parameter with a constant integer tensor (a relative-position
# bias table); a cloned bias with a slice zeroed in place (Swin V2's qkv
# bias); F.normalize and torch.einsum. With one batch and with 2
# micro-batches.
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t | FileCheck %s
#
# CHECK: export: max_pool2d of 9x9 after 2 copies of a row and a column, 6 matmuls for the average pools, 2 for the adaptive pool, slice_grad, embedding, masked_fill
# CHECK: K=1: trajectory: 5 losses and 7 tensors within the oracle
# CHECK: K=1: gradients: 7 tensors within the oracle
# CHECK: K=2: trajectory: 5 losses and 7 tensors within the oracle
# CHECK: K=2: gradients: 7 tensors within the oracle

import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
from memopt_run import adamw, check_parity  # noqa: E402

STEPS = 5


def main():
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import memopt
    from memopt.testing import Oracle

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3, padding=1)
            self.pool = nn.MaxPool2d(3, 2, ceil_mode=True)
            self.table = nn.Parameter(torch.randn(5, 1))
            self.register_buffer("index", torch.randint(0, 5, (9, 9)))
            self.qkv = nn.Linear(4, 12)
            self.head = nn.Linear(4, 10)

        def forward(self, x, y):
            r = torch.relu(self.conv(x))                       # 2 4 8 8
            h = (self.pool(r) + F.avg_pool2d(r, 3, 2, ceil_mode=True) +
                 F.avg_pool2d(r, 3, 2, padding=1, count_include_pad=False) +
                 F.avg_pool2d(r, 2, divisor_override=3))       # 2 4 4 4
            h = F.pad(h.permute(0, 2, 3, 1), (0, 0, 0, 1, 0, 1), value=0.5)
            h = torch.roll(h, shifts=(-1, -1), dims=(1, 2))    # 2 5 5 4
            h = F.adaptive_avg_pool2d(h.permute(0, 3, 1, 2), 3)
            t = h.flatten(2).swapaxes(1, 2)                    # 2 9 4
            bias = self.qkv.bias.clone()
            bias[4:8].zero_()
            q, k, v = F.linear(t, self.qkv.weight, bias).chunk(3, dim=-1)
            q, k = F.normalize(q, dim=-1), F.normalize(k, dim=-1)
            relative = self.table[self.index].squeeze(-1)      # 9 9
            s = torch.einsum("bid,bjd->bij", q, k) * 4 + relative
            o = torch.einsum("bij,bjd->bid", s.softmax(-1), v)
            return F.cross_entropy(self.head(o.mean(1)), y)

    workdir = sys.argv[1]
    torch.manual_seed(0)
    model = Net()
    generator = torch.Generator().manual_seed(1)
    batch = {"x": torch.randn(4, 3, 8, 8, generator=generator),
             "y": torch.randint(0, 10, (4,), generator=generator)}
    mlir = os.path.join(workdir, "model.mlir")
    memopt.export(model, tuple(batch.values()), mlir)
    memopt.safetensors.save(batch, os.path.join(workdir, "batch.safetensors"))
    text = open(mlir).read()
    pool = re.search(r"max_pool2d .*: (tensor<[^>]*>)", text).group(1)
    print("export: max_pool2d of %s after %d copies of a row and a column, "
          "%d matmuls for the average pools, %d for the adaptive pool, %s" % (
              "x".join(pool[7:-1].split("x")[2:4]),
              text.count("memopt.concat") // 2,
              len(re.findall(r"memopt.matmul .*tensor<4x8xf32>", text)),
              len(re.findall(r"memopt.matmul .*tensor<3x5xf32>", text)),
              ", ".join(op for op in ("slice_grad", "embedding",
                                      "masked_fill")
                        if "memopt." + op in text)))

    oracle = Oracle(model, batch, STEPS, adamw)
    ok = True
    for k in (1, 2):
        ok &= check_parity("K=%d" % k, oracle, mlir,
                           os.path.join(workdir), STEPS,
                           "--micro-batches=%d" % k)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
