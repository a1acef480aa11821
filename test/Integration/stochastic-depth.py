# torchvision.ops.stochastic_depth exports as memopt.dropout with a shared
# mask bit (`shared`): one coin per example in row mode, one for the whole
# batch in batch mode. A residual MLP with both (p 0.5) trains on the host:
#
# - its first-step loss and gradients match a float64 evaluation of the
#   exported IR (bench/differential/reference.py, whose NumPy Philox draws
#   the mask runtime.h documents) to 1e-5 relative: another mask moves the
#   loss by 10 % or more;
# - the rows really share their bit: the reference with an elementwise
#   mask instead is far off (checked, so that the comparison can fail);
# - recomputation (--remat=sqrt, and the minimal saved set, which
#   recomputes the dropouts in the backward) redraws the same masks: the
#   losses of 4 steps are bit-identical to a run that keeps every value
#   (--no-cheap-recompute);
# - 2 micro-batches draw the full batch's row bits (a wrong offset would
#   give micro-batch 1 micro-batch 0's coins): their losses agree with one
#   batch's to 1e-5 relative.
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t %memopt_src_root | FileCheck %s
#
# CHECK: export: 2 dropouts, shared 2 and 3
# CHECK: reference: loss and 2 gradients within 1e-05
# CHECK: reference: an elementwise mask is off by
# CHECK: remat: 4 losses bit-identical
# CHECK: micro-batches: 4 losses within 1e-05

import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
import memopt_run  # noqa: E402

STEPS = 4
TOLERANCE = 1e-5


def relative(a, b):
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b))) /
                 max(np.max(np.abs(np.asarray(b))), 1e-30))


def main():
    import torch
    import torch.nn as nn
    from torchvision.ops import StochasticDepth
    import memopt

    workdir, src = sys.argv[1], sys.argv[2]
    sys.path.insert(0, os.path.join(src, "bench", "differential"))
    import reference

    class Residual(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(8, 8, bias=False)
            self.b = nn.Linear(8, 8, bias=False)
            self.row = StochasticDepth(0.5, "row")
            self.batch = StochasticDepth(0.5, "batch")

        def forward(self, x, target):
            x = x + self.row(torch.relu(self.a(x)))
            x = x + self.batch(torch.relu(self.b(x)))
            return nn.functional.mse_loss(x, target)

    torch.manual_seed(0)
    model = Residual()
    generator = torch.Generator().manual_seed(1)
    batch = {"x": torch.randn(8, 3, 8, generator=generator),
             "target": torch.randn(8, 3, 8, generator=generator)}
    mlir = os.path.join(workdir, "model.mlir")
    memopt.export(model, tuple(batch.values()), mlir)
    memopt.safetensors.save(batch, os.path.join(workdir, "batch.safetensors"))
    text = open(mlir).read()
    shared = sorted(re.findall(r"memopt.dropout .* shared (\d+)", text))
    print("export: %d dropouts, shared %s" % (len(shared),
                                              " and ".join(shared)))

    params = memopt.safetensors.load(os.path.join(workdir,
                                                  "model.safetensors"))
    inputs = {k: v.numpy() for k, v in batch.items()}
    loss, grads = reference.evaluate(text, params, inputs)
    out = os.path.join(workdir, "sgd")
    got, _ = memopt_run.first_step_gradients(mlir, workdir, out)
    first = memopt_run.losses(memopt_run.train(out, workdir, 1))[0]
    errors = [relative(first, loss)] + [relative(got[n], grads[n])
                                        for n in grads]
    verdict = "within" if max(errors) <= TOLERANCE else "MISMATCH, above"
    print("reference: loss and %d gradients %s %g (worst %.2g)"
          % (len(grads), verdict, TOLERANCE, max(errors)))
    elementwise, _ = reference.evaluate(
        re.sub(r" shared \d+", "", text), params, inputs)
    print("reference: an elementwise mask is off by %.2g"
          % relative(first, elementwise))

    def run(name, *flags):
        out = os.path.join(workdir, name)
        memopt_run.compile_model(mlir, out, *flags)
        return memopt_run.losses(memopt_run.train(out, workdir, STEPS))
    kept = run("kept", "--no-cheap-recompute")
    recomputed = [run("minimal"), run("sqrt", "--remat=sqrt")]
    print("remat: %d losses %s" % (len(kept), "bit-identical"
                                   if all(r == kept for r in recomputed) else
                                   "MISMATCH %s %s" % (kept, recomputed)))
    split = run("k2", "--micro-batches=2")
    error = relative(split, kept)
    print("micro-batches: %d losses %s %g (worst %.2g)"
          % (len(split), "within" if error <= TOLERANCE else
             "MISMATCH, above", TOLERANCE, error))


if __name__ == "__main__":
    sys.exit(main())
