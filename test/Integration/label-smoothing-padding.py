# Label smoothing and padding indices against PyTorch: a small language
# model (nn.Embedding with padding_idx, whose tokens include the padding
# index, and a linear head) trained with nn.CrossEntropyLoss(
# label_smoothing=0.1) and ignore_index=-100 labels for 5 AdamW steps,
# checked with the parity oracle (memopt.testing): the losses, the final
# state and the first step's gradients, in which the padding row is zero.
# Once with one batch and once with --micro-batches=2, whose halves hold 5
# and 1 ignored labels: the mean must divide by the full batch's count, so
# that the smoothed term is normalised as the first one.
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t | FileCheck %s
#
# CHECK: export: embedding padding_idx 0, cross_entropy label_smoothing 0.1
# CHECK: K=1: trajectory: 5 losses and 3 tensors within the oracle
# CHECK: K=1: gradients: 3 tensors within the oracle
# CHECK: K=2: trajectory: 5 losses and 3 tensors within the oracle
# CHECK: K=2: gradients: 3 tensors within the oracle

import os
import re
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
from memopt_run import adamw, check_parity  # noqa: E402

STEPS = 5
VOCAB, WIDTH, PAD = 16, 8, 0


def main():
    import torch
    import torch.nn as nn
    import memopt
    from memopt.testing import Oracle

    class TinyLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(VOCAB, WIDTH, padding_idx=PAD)
            self.head = nn.Linear(WIDTH, VOCAB)
            self.loss = nn.CrossEntropyLoss(label_smoothing=0.1,
                                            ignore_index=-100)

        def forward(self, idx, targets):
            logits = self.head(torch.tanh(self.wte(idx)))
            return self.loss(logits.view(-1, VOCAB), targets.view(-1))

    workdir = sys.argv[1]
    torch.manual_seed(0)
    model = TinyLM()
    generator = torch.Generator().manual_seed(1)
    idx = torch.randint(1, VOCAB, (4, 6), generator=generator)
    idx[0, 4:] = PAD
    idx[1, 5] = PAD
    idx[3, 0] = PAD
    targets = torch.randint(0, VOCAB, (4, 6), generator=generator)
    # 5 ignored labels in the first micro-batch (rows 0-1), 1 in the second.
    targets[0, 3:] = -100
    targets[1, :2] = -100
    targets[2, 5] = -100
    batch = {"idx": idx, "targets": targets}
    mlir = os.path.join(workdir, "model.mlir")
    memopt.export(model, tuple(batch.values()), mlir)
    memopt.safetensors.save(batch, os.path.join(workdir, "batch.safetensors"))
    text = open(mlir).read()
    print("export: embedding padding_idx %s, cross_entropy label_smoothing %s"
          % (re.search(r"memopt.embedding .* padding_idx (\S+)",
                       text).group(1),
             re.search(r"memopt.cross_entropy .* label_smoothing (\S+)",
                       text).group(1)))

    oracle = Oracle(model, batch, STEPS, adamw)
    ok = True
    for k in (1, 2):
        ok &= check_parity("K=%d" % k, oracle, mlir, workdir, STEPS,
                           "--micro-batches=%d" % k)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
