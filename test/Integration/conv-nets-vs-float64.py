# Whole convolutional nets drawn at random, trained on the host through both
# of its convolution paths (oneDNN's kernels, and im2col + GEMM with
# MEMOPT_HOST_ONEDNN=0) and checked against PyTorch in float64 with the
# parity oracle (memopt.testing): the first step's gradients, and the losses
# and parameters after 3 AdamW steps. Each net chains what real CNNs do
# between their convolutions: strides, dilation, groups, padding that leaves
# input rows no window reads, batch norm, max pooling in floor and ceil mode,
# average pooling, branches concatenated along the channels (SqueezeNet's
# Fire), residual adds, and the same convolution shape several times in one
# step (so that a cached plan, reorder or workspace serves several layers).
# OUT/train --stats shows that each path ran (conv_onednn, conv_im2col).
# The nets are drawn from fixed seeds, the same on every machine.
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t | FileCheck %s
#
# CHECK-COUNT-12: net {{[0-9]}} {{(onednn|im2col)}}: gradients and trajectory within the oracle
# CHECK: 6 nets, 2 convolution paths, every check within the oracle
# CHECK-NOT: MISMATCH

import os
import random
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
import memopt_run  # noqa: E402

NETS = 6
STEPS = 3
BATCH = 4


def build(seed):
    """A random CNN (nn.Module with forward(x, y) -> loss) and its input
    shape, drawn from `seed`."""
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    rng = random.Random(seed)

    class Fire(nn.Module):
        """Squeeze to s channels, expand by a 1x1 and a 3x3, concatenate."""

        def __init__(self, c, s, e):
            super().__init__()
            self.squeeze = nn.Conv2d(c, s, 1)
            self.expand1 = nn.Conv2d(s, e, 1)
            self.expand3 = nn.Conv2d(s, e, 3, padding=1)

        def forward(self, x):
            x = F.relu(self.squeeze(x))
            return torch.cat([F.relu(self.expand1(x)),
                              F.relu(self.expand3(x))], 1)

    class Residual(nn.Module):
        """Two convolutions of one shape (groups, dilation) with batch norm
        around an identity."""

        def __init__(self, c, groups, dilation):
            super().__init__()
            self.a = nn.Conv2d(c, c, 3, padding=dilation, dilation=dilation,
                               groups=groups, bias=False)
            self.bn = nn.BatchNorm2d(c)
            self.b = nn.Conv2d(c, c, 3, padding=dilation, dilation=dilation,
                               groups=groups, bias=False)

        def forward(self, x):
            return F.relu(x + self.b(F.relu(self.bn(self.a(x)))))

    size = rng.choice([15, 16, 17])
    channels = rng.choice([8, 16])
    layers = [nn.Conv2d(3, channels, rng.choice([3, 5]),
                        stride=2, padding=rng.choice([0, 1])),
              nn.BatchNorm2d(channels), nn.ReLU()]
    for _ in range(3):
        kind = rng.choice(["fire", "residual", "pool", "strided"])
        if kind == "fire":
            s = rng.choice([4, 8])
            layers.append(Fire(channels, s, channels))
            channels *= 2
        elif kind == "residual":
            layers.append(Residual(channels, rng.choice([1, 2, channels]),
                                   rng.choice([1, 2])))
        elif kind == "pool":
            if rng.random() < 0.5:
                layers.append(nn.MaxPool2d(3, 2, ceil_mode=rng.random() < 0.5))
            else:
                layers.append(nn.AvgPool2d(2))
        else:
            # A 1x1 of stride 2 on an even extent skips the last row and
            # column: oneDNN's right padding is negative.
            layers += [nn.Conv2d(channels, channels, 1, stride=2),
                       nn.ReLU()]

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(*layers)
            self.head = nn.Linear(channels, 10)

        def forward(self, x, y):
            h = F.adaptive_avg_pool2d(self.features(x), 1).flatten(1)
            return F.cross_entropy(self.head(h), y)

    torch.manual_seed(seed)
    return Net(), (BATCH, 3, size, size)


def main():
    import torch
    import memopt
    from memopt.testing import Oracle

    root = sys.argv[1]
    failures = 0
    for seed in range(NETS):
        model, shape = build(seed)
        generator = torch.Generator().manual_seed(100 + seed)
        batch = {"x": torch.randn(*shape, generator=generator),
                 "y": torch.randint(0, 10, (BATCH,), generator=generator)}
        workdir = os.path.join(root, "net%d" % seed)
        os.makedirs(workdir)
        mlir = os.path.join(workdir, "model.mlir")
        memopt.export(model, tuple(batch.values()), mlir)
        memopt.safetensors.save(batch,
                                os.path.join(workdir, "batch.safetensors"))
        oracle = Oracle(model, batch, STEPS, memopt_run.adamw)
        out = os.path.join(workdir, "out")
        memopt_run.compile_model(mlir, out, *memopt_run.ADAMW_FLAGS)
        for path, flag in (("onednn", "1"), ("im2col", "0")):
            os.environ["MEMOPT_HOST_ONEDNN"] = flag
            final = os.path.join(workdir, "final-%s.safetensors" % path)
            stdout = memopt_run.train(out, workdir, STEPS, save=final)
            verdicts = [
                oracle.check(memopt_run.losses(stdout),
                             memopt.safetensors.load(final)),
                oracle.check_gradients(*memopt_run.first_step_gradients(
                    mlir, workdir, os.path.join(workdir, "out-sgd"))),
            ]
            found = [f for v in verdicts for f in v.failures]
            for failure in found:
                print("net %d %s: MISMATCH %s" % (seed, path, failure))
            if not found:
                print("net %d %s: gradients and trajectory within the oracle"
                      % (seed, path))
            failures += bool(found)
        # Each path ran: --stats counts the shapes on each.
        paths = {}
        for path, flag in (("onednn", "1"), ("im2col", "0")):
            stdout = subprocess.run(
                [os.path.join(out, "train"), "--params",
                 os.path.join(workdir, "model.safetensors"), "--batch",
                 os.path.join(workdir, "batch.safetensors"), "--steps", "1",
                 "--stats"], check=True, capture_output=True, text=True,
                env=dict(os.environ, MEMOPT_HOST_ONEDNN=flag)).stdout
            paths[path] = {k: int(v) for k, v in re.findall(
                r"(conv_\w+)=(\d+)", stdout)}
        if not (paths["onednn"]["conv_onednn"] > 0 and
                paths["im2col"]["conv_onednn"] == 0 and
                paths["im2col"]["conv_im2col"] > 0):
            print("net %d: MISMATCH convolution paths %s" % (seed, paths))
            failures += 1
    if not failures:
        print("%d nets, 2 convolution paths, every check within the oracle"
              % NETS)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
