# The class-index losses in the forms the fused cross-entropy does not take,
# with the labels an input of the step (so that the one-hot mask is computed
# in the step, not folded at export): F.cross_entropy with class weights and
# label smoothing, and with reduction='none'; F.nll_loss of an input that
# is no log_softmax, with class weights and an ignore_index that is a class
# (3, half of its labels); nn.NLLLoss with weights on a log_softmax over the
# class dimension of [N, C, d] scores; the mean over the labels that count,
# written out with a mask and its sum. Some labels are ignore_index. Checked
# against the parity oracle in FP32 (5 AdamW losses, the final state and the
# first-step gradients), and the exported IR holds no fused cross-entropy.
# The same model also trains with --micro-batches=2 against the full batch's
# oracle: the weighted means divide by a sum over the batch of the labels'
# weights, the written-out mean by the mask's count, which
# --memopt-accumulate makes once on the full batch before the loop.
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t/k2
# RUN: %python %s %t | FileCheck %s
# RUN: %python %s %t/k2 k2 | FileCheck %s --check-prefix=K2
#
# K2: class losses K=2: trajectory: 5 losses and 4 tensors within the oracle
# K2: class losses K=2: gradients: 4 tensors within the oracle
#
# CHECK: fused cross-entropy ops: 0, comparisons: 13
# CHECK: class losses: trajectory: 5 losses and 4 tensors within the oracle
# CHECK: class losses: gradients: 4 tensors within the oracle

import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
import memopt_run  # noqa: E402

STEPS = 5
C = 5


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(6, 12)
        self.head = nn.Linear(12, C * 3)
        self.register_buffer("weight", torch.tensor([0.5, 2.0, 1.0, 1.5,
                                                     0.25]))
        self.nll = nn.NLLLoss(weight=self.weight)

    def forward(self, x, y, z, t):
        logits = self.head(torch.tanh(self.body(x)))       # [N, 3C]
        first = logits[:, :C]
        # [N, C, 2] scores for the labels z of shape [N, 2].
        spatial = logits[:, C:].reshape(-1, 2, C).transpose(1, 2)
        losses = [
            F.cross_entropy(first, y, weight=self.weight,
                            label_smoothing=0.2),
            (F.cross_entropy(first, y, reduction="none") *
             torch.sigmoid(x[:, 0])).sum() / 8,
            F.nll_loss(torch.log(torch.sigmoid(first)), t, weight=self.weight,
                       ignore_index=3),
            self.nll(F.log_softmax(spatial, dim=1), z),
            # Hugging Face's token mean: a computed mask and its count.
            (F.cross_entropy(first, y.clamp(min=0), reduction="none") *
             (y != -100)).sum() / (y != -100).sum(),
        ]
        return sum(losses)


def main():
    import memopt
    from memopt.testing import Oracle
    workdir = sys.argv[1]
    torch.manual_seed(0)
    model = Classifier()
    y = torch.randint(0, C, (8,))
    y[2] = -100
    y[5] = 0
    z = torch.randint(0, C, (8, 2))
    z[1, 0] = -100
    t = torch.randint(0, C, (8,))
    t[::2] = 3
    batch = {"x": torch.randn(8, 6), "y": y, "z": z, "t": t}
    if sys.argv[2:] == ["k2"]:
        ok = memopt_run.export_and_check("class losses K=2", model, batch,
                                         workdir, STEPS, "--micro-batches=2")
        return 0 if ok else 1
    oracle = Oracle(model, batch, STEPS, memopt_run.adamw)
    mlir = os.path.join(workdir, "model.mlir")
    memopt.export(model, tuple(batch.values()), mlir)
    text = open(mlir).read()
    print("fused cross-entropy ops: %d, comparisons: %d" % (
        text.count("memopt.cross_entropy "), text.count("memopt.compare ")))
    memopt.safetensors.save(batch, os.path.join(workdir, "batch.safetensors"))
    ok = memopt_run.check_parity("class losses", oracle, mlir, workdir, STEPS)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
