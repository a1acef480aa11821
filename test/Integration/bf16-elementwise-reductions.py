# The elementwise, reduction, normalization and loss forms of the op long
# tail that the other bf16 tests do not reach, under --mixed-precision=bf16
# against torch.autocast (the parity oracle, docs/Reliability.md: 5 AdamW
# losses and the first-step gradients), each on the bf16 output of a linear
# layer as in a model: lerp, addcmul, addcdiv, xlogy, logit, the rounding
# functions, minimum and maximum, clamp with tensor bounds, glu, prelu,
# hardshrink, softshrink, threshold, var_mean and std with a correction,
# prod, amin, vector norms, cumprod, nansum, nanmean, cosine_similarity,
# instance_norm, kl_div and the margin losses.
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t | FileCheck %s
#
# CHECK: elementwise-reductions bf16: trajectory: 5 losses within the oracle
# CHECK: elementwise-reductions bf16: gradients: 7 tensors within the oracle

import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
import memopt_run  # noqa: E402

STEPS = 5


def features(h, g, p):
    """Every form under test, of the linear outputs h and g [N, 8] and the
    PReLU weight p, flattened per sample."""
    s = torch.sigmoid(g)
    variance, mean = torch.var_mean(h, dim=1, unbiased=True, keepdim=True)
    parts = [
        torch.lerp(h, g, 0.3),
        torch.lerp(h, g, s),
        torch.addcmul(h, g, s, value=0.5),
        torch.addcdiv(h, g, s + 1.0, value=-0.25),
        torch.xlogy(s, s + 0.5),
        torch.logit(s, eps=1e-3),
        torch.floor(h) + torch.ceil(g) + torch.round(h) + torch.trunc(g),
        torch.minimum(h, g) + torch.maximum(h, g),
        torch.clamp(h, min=g - 0.5, max=g + 0.5),
        F.glu(torch.cat([h, g], 1), dim=1),
        F.prelu(h, p),
        F.hardshrink(h, 0.3) + F.softshrink(g, 0.2) +
        F.threshold(h, 0.1, -1.0),
        variance, mean,
        torch.std(g, dim=1, keepdim=True),
        torch.prod(s[:, :4], dim=1, keepdim=True),
        torch.amin(h, dim=1, keepdim=True),
        torch.linalg.vector_norm(h, ord=3, dim=1, keepdim=True),
        torch.norm(g, dim=1, keepdim=True),
        torch.cumprod(s[:, :4], dim=1),
        torch.nansum(h, dim=1, keepdim=True),
        torch.nanmean(g, dim=1, keepdim=True),
        F.cosine_similarity(h, g, dim=1).unsqueeze(1),
        F.instance_norm(h.reshape(-1, 2, 4)).flatten(1),
    ]
    return torch.cat([x.flatten(1).to(h.dtype) for x in parts], 1)


class ElementwiseReductions(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(6, 8)
        self.b = nn.Linear(6, 8)
        self.prelu = nn.Parameter(torch.tensor([0.25]))
        with torch.no_grad():
            width = features(torch.zeros(4, 8), torch.zeros(4, 8),
                             self.prelu).shape[1]
        self.head = nn.Linear(width, 5)

    def forward(self, x, y, target, sign):
        h, g = self.a(x), self.b(x)
        z = self.head(features(h, g, self.prelu))
        log_p = F.log_softmax(z, dim=1)
        return (F.cross_entropy(z, y) +
                F.kl_div(log_p, target, reduction="batchmean") +
                F.margin_ranking_loss(z[:, 0], z[:, 1], sign, margin=0.1) +
                F.soft_margin_loss(z[:, 2], sign))


def main():
    workdir = sys.argv[1]
    torch.manual_seed(0)
    model = ElementwiseReductions()
    generator = torch.Generator().manual_seed(1)
    batch = {"x": torch.randn(4, 6, generator=generator),
             "y": torch.tensor([1, 4, 0, 2]),
             "target": torch.softmax(torch.randn(4, 5, generator=generator),
                                     1),
             "sign": torch.tensor([1.0, -1.0, -1.0, 1.0])}
    ok = memopt_run.export_and_check("elementwise-reductions bf16", model,
                                     batch, workdir, STEPS, precision="bf16")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
