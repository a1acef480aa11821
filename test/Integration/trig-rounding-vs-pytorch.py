# The trigonometric and rounding ops train as in PyTorch: tan, asin
# (arcsin), acos, atan, floor, ceil, round (with and without decimals),
# trunc (fix) and frac, exported, compiled for the host and trained 5 AdamW
# steps, checked with the parity oracle (memopt.testing,
# docs/Reliability.md):
#
# - FP32: the trajectory (losses, every parameter) and the first-step
#   gradients against float64. The rounding ops read the input batch
#   (their values) and a layer's output (their zero gradient: the layer's
#   weights get none through them; frac's is 1).
# - BF16 against torch.autocast bf16: tan, asin and acos on autocast's f32
#   list (memopt runs them in f32, as CUDA's autocast does), atan and the
#   rounding of the batch in the input's type; the losses and the
#   first-step gradients. The rounding of a bf16 layer output is left out
#   there: bf16 moves a value across an integer far more often than the
#   oracle's spread can allow for.
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s f32 %t/f32 | FileCheck %s --check-prefix=F32
# RUN: %python %s bf16 %t/bf16 | FileCheck %s --check-prefix=BF16
#
# F32: f32: ops acos=1 asin=1 atan=1 ceil=1 floor=1 round=3 tan=1 trunc=3
# F32: f32: trajectory: 5 losses and 6 tensors within the oracle
# F32: f32: gradients: 6 tensors within the oracle
# BF16: bf16: ops acos=1 asin=1 atan=1 ceil=1 floor=1 round=2 tan=1 trunc=1
# BF16: bf16: tan in f32, asin in f32, acos in f32, atan in bf16
# BF16: bf16: trajectory: 5 losses within the oracle
# BF16: bf16: gradients: 6 tensors within the oracle

import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
from memopt_run import adamw, check_parity  # noqa: E402

STEPS = 5
OPS = ("acos", "asin", "atan", "ceil", "floor", "round", "tan", "trunc")


def build(layer_rounding):
    import torch
    import torch.nn as nn

    class TrigRounding(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(8 + 5, 16)
            self.fc2 = nn.Linear(16, 16)
            self.head = nn.Linear(16, 4)

        def forward(self, x, y):
            q = torch.cat([
                torch.floor(x[:, :1] * 3), torch.ceil(x[:, 1:2] * 2),
                torch.round(x[:, 2:3] * 4), torch.fix(x[:, 3:4] * 5),
                x[:, 4:5].round(decimals=1)], dim=1)
            a = self.fc1(torch.cat([x, q], dim=1))
            t = torch.tanh(a)
            h = (torch.tan(0.6 * t) + torch.arcsin(0.9 * t) +
                 torch.acos(0.8 * torch.sigmoid(a)) + torch.atan(2.0 * a))
            if layer_rounding:
                h = h + torch.frac(3.0 * a) + 0.1 * torch.round(a) + \
                    0.1 * torch.trunc(2.0 * a)
            return nn.functional.cross_entropy(self.head(self.fc2(h)), y)

    torch.manual_seed(0)
    model = TrigRounding()
    generator = torch.Generator().manual_seed(1)
    batch = {"x": 1.5 * torch.randn(24, 8, generator=generator),
             "y": torch.randint(0, 4, (24,), generator=generator)}
    return model, batch


def main():
    import memopt
    from memopt.testing import Oracle

    precision, workdir = sys.argv[1], sys.argv[2]
    os.makedirs(workdir, exist_ok=True)
    model, batch = build(layer_rounding=precision == "f32")
    mlir = os.path.join(workdir, "model.mlir")
    memopt.export(model, tuple(batch.values()), mlir)
    with open(mlir) as f:
        text = f.read()
    counts = {op: len(re.findall(r"= memopt\.%s " % op, text)) for op in OPS}
    print("%s: ops %s" % (precision, " ".join(
        "%s=%d" % (op, n) for op, n in sorted(counts.items()))))
    flags = []
    if precision == "bf16":
        flags.append("--mixed-precision=bf16")
        # The ops on autocast's f32 list read and write f32, the others
        # their input's type.
        typed = mixed_precision_ir(mlir)
        dtypes = {op: re.search(r"memopt\.%s %%\S+ (?:\{[^}]*\} )?: "
                                r"tensor<\S+x(\w+)>" % op, typed).group(1)
                  for op in ("tan", "asin", "acos", "atan")}
        print("bf16: %s" % ", ".join("%s in %s" % item
                                     for item in dtypes.items()))
    oracle = Oracle(model, batch, STEPS, adamw, precision=precision)
    memopt.safetensors.save(batch, os.path.join(workdir, "batch.safetensors"))
    return 0 if check_parity(precision, oracle, mlir, workdir, STEPS, *flags,
                             compare_state=precision == "f32") else 1


def mixed_precision_ir(mlir):
    """The loss function after BF16 mixed precision, as memopt-opt prints
    it."""
    return subprocess.run(
        ["memopt-opt", mlir, "--memopt-mixed-precision=compute-type=bf16"],
        check=True, capture_output=True, text=True).stdout


if __name__ == "__main__":
    sys.exit(main())
