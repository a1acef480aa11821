# Ops memopt writes with other ops, under --mixed-precision=bf16 against
# torch.autocast (the parity oracle, docs/Reliability.md: 5 AdamW losses and
# the first-step gradients): a cumulative sum and F.normalize, which the
# exporter marks to run in f32 as autocast's policy does; a sort (exact in
# any dtype); an atan2 and a cdist (f32); fmax and nan_to_num, selections
# by comparisons of the bf16 values as stored (exact in any dtype, as
# autocast runs them); all on bf16 activations between linear layers. The model.mlir must carry the f32 marks.
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t | FileCheck %s
#
# CHECK: f32 marks: cumsum yes, normalize yes, sort no
# CHECK: long-tail bf16: trajectory: 5 losses within the oracle
# CHECK: long-tail bf16: gradients: 6 tensors within the oracle

import os
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
import memopt_run  # noqa: E402

STEPS = 5


class LongTail(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(12, 16)
        self.b = nn.Linear(12, 16)
        self.head = nn.Linear(16 * 6 + 4, 5)

    def forward(self, x, y):
        h, g = self.a(x), self.b(x)
        features = [torch.cumsum(h, dim=1) * 0.25,
                    F.normalize(h, dim=1),
                    torch.sort(g, dim=1, descending=True)[0],
                    torch.atan2(h, g),
                    torch.cdist(h, h[:4]),
                    torch.fmax(h, g),
                    torch.nan_to_num(h, posinf=1.0)]
        return F.cross_entropy(self.head(torch.cat(features, 1)), y)


def main():
    import memopt
    from memopt.testing import Oracle
    workdir = sys.argv[1]
    torch.manual_seed(0)
    model = LongTail()
    batch = {"x": torch.randn(8, 12), "y": torch.randint(0, 5, (8,))}
    oracle = Oracle(model, batch, STEPS, memopt_run.adamw, precision="bf16")
    mlir = os.path.join(workdir, "model.mlir")
    memopt.export(model, tuple(batch.values()), mlir)
    text = open(mlir).read()

    def marked(op):
        return "yes" if any('memopt.precision = "f32"' in line
                            for line in text.splitlines()
                            if "memopt.%s " % op in line) else "no"
    # The scan's adds, the norm's reduce_sum, the network's maximum.
    print("f32 marks: cumsum %s, normalize %s, sort %s" % (
        marked("add"), marked("reduce_sum"), marked("maximum")))
    memopt.safetensors.save(batch, os.path.join(workdir, "batch.safetensors"))
    ok = memopt_run.check_parity("long-tail bf16", oracle, mlir, workdir,
                                 STEPS, "--mixed-precision=bf16",
                                 compare_state=False)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
