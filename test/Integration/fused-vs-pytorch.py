# The fused kernels (docs/Fusion.md) train as the ops they replace, checked
# with the parity oracle (memopt.testing, docs/Reliability.md) on the bundled
# PyTorch GPT (dropout 0, as the oracle needs), whose two causal attentions
# always fuse; its 128-class head is fused too with --lm-loss-chunk=48,
# three chunks of 48, 48 and 32 classes.
#
# fp32: 5 AdamW steps, the trajectory (losses, every parameter) and the
#   first-step gradients within 4x PyTorch FP32's error against float64.
# accumulate: the same with --micro-batches=2 (the fused loss is summed per
#   micro-batch and normalised by the full batch's label count; the
#   attention runs per micro-batch).
# bf16: 10 steps under --mixed-precision=bf16 against torch.autocast bf16:
#   the losses and first-step gradients.
# The memory report must name the fused kernels, so a pass that fused
# nothing fails.
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s fp32 %t/fp32 %memopt_src_root | FileCheck %s --check-prefix=FP32
# RUN: %python %s accumulate %t/acc %memopt_src_root | FileCheck %s --check-prefix=ACC
# RUN: %python %s bf16 %t/bf16 %memopt_src_root | FileCheck %s --check-prefix=BF16
#
# FP32: fused fp32: trajectory: 5 losses and 26 tensors within the oracle
# FP32: fused fp32: gradients: 26 tensors within the oracle
# FP32: fused fp32: 2 attention, 1 linear cross-entropy
# ACC: fused accumulate: trajectory: 5 losses and 26 tensors within the oracle
# ACC: fused accumulate: gradients: 26 tensors within the oracle
# ACC: fused accumulate: 2 attention, 1 linear cross-entropy
# BF16: fused bf16: trajectory: 10 losses within the oracle
# BF16: fused bf16: gradients: 26 tensors within the oracle
# BF16: fused bf16: 2 attention, 1 linear cross-entropy

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
from memopt_run import adamw, check_parity  # noqa: E402

CHUNK = "--lm-loss-chunk=48"


def main():
    how, workdir, src = sys.argv[1], sys.argv[2], sys.argv[3]
    sys.path.insert(0, os.path.join(src, "examples", "pytorch"))
    import memopt
    import models
    from memopt.testing import Oracle

    os.makedirs(workdir, exist_ok=True)
    model, batch = models.build("gpt")
    label = f"fused {how}"
    flags, steps = [CHUNK], 5
    if how == "fp32":
        oracle = Oracle(model, batch, steps, adamw)
    elif how == "accumulate":
        flags.append("--micro-batches=2")
        # No batch norm: the full batch's step is the reference.
        oracle = Oracle(model, batch, steps, adamw)
    else:
        flags.append("--mixed-precision=bf16")
        steps = 10
        oracle = Oracle(model, batch, steps, adamw, precision="bf16")
    mlir = os.path.join(workdir, "model.mlir")
    memopt.export(model, tuple(batch.values()), mlir)
    memopt.safetensors.save(batch, os.path.join(workdir, "batch.safetensors"))
    ok = check_parity(label, oracle, mlir, workdir, steps, *flags,
                      compare_state=how != "bf16")
    with open(os.path.join(workdir, "out", "memory_report.json")) as f:
        fused = json.load(f)["fused_kernels"]
    print(f"{label}: {fused['attention']} attention, "
          f"{fused['linear_cross_entropy']} linear cross-entropy")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
