# Gradient accumulation against PyTorch's full-batch training: each bundled
# model is compiled with --micro-batches=K and trained for 5 AdamW steps on
# the host runtime, then checked with the parity oracle (memopt.testing,
# docs/Reliability.md) against PyTorch's full-batch step in float64: every
# loss, final tensor and first-step gradient within 4x PyTorch FP32's own
# error. A wrong normalisation (per-micro-batch means) is off by far more
# than rounding and fails.
#
# The GPT example pads its labels unevenly (row r ignores its last 2r
# tokens), so with K = 4 every micro-batch has a different number of
# counted tokens: averaging per-micro-batch means would differ from the
# full batch's mean, and this test would fail.
#
# The CNN has batch norm: compiled with --accumulate-allow-batch-norm, it is
# compared with PyTorch's accumulation loop (one forward and backward per
# micro-batch, each loss divided by K), whose statistics and running
# statistics are per micro-batch too.
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s mlp 2 %t/mlp2 %memopt_src_root | FileCheck %s --check-prefix=MLP2
# RUN: %python %s mlp 4 %t/mlp4 %memopt_src_root | FileCheck %s --check-prefix=MLP4
# RUN: %python %s gpt 2 %t/gpt2 %memopt_src_root | FileCheck %s --check-prefix=GPT2
# RUN: %python %s gpt 4 %t/gpt4 %memopt_src_root | FileCheck %s --check-prefix=GPT4
# RUN: %python %s cnn 2 %t/cnn2 %memopt_src_root | FileCheck %s --check-prefix=CNN2
#
# MLP2: mlp K=2: trajectory: 5 losses and 4 tensors within the oracle
# MLP2: mlp K=2: gradients: 4 tensors within the oracle
# MLP4: mlp K=4: trajectory: 5 losses and 4 tensors within the oracle
# MLP4: mlp K=4: gradients: 4 tensors within the oracle
# GPT2: gpt K=2: trajectory: 5 losses and 26 tensors within the oracle
# GPT2: gpt K=2: gradients: 26 tensors within the oracle
# GPT4: gpt K=4: trajectory: 5 losses and 26 tensors within the oracle
# GPT4: gpt K=4: gradients: 26 tensors within the oracle
# CNN2: cnn K=2: trajectory: 5 losses and 22 tensors within the oracle
# CNN2: cnn K=2: gradients: 14 tensors within the oracle

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
from memopt_run import adamw, check_parity  # noqa: E402

STEPS = 5


def main():
    name, k, workdir, src = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
    sys.path.insert(0, os.path.join(src, "examples", "pytorch"))
    import memopt
    import models
    from memopt.testing import Oracle

    os.makedirs(workdir, exist_ok=True)
    model, batch = models.build(name)
    # Batch norm's statistics are per micro-batch: the reference is
    # PyTorch's accumulation loop. Elsewhere it is the full batch.
    oracle = Oracle(model, batch, STEPS, adamw,
                    micro_batches=k if name == "cnn" else 1)
    mlir = os.path.join(workdir, "model.mlir")
    memopt.export(model, tuple(batch.values()), mlir)
    memopt.safetensors.save(batch, os.path.join(workdir, "batch.safetensors"))
    flags = [f"--micro-batches={k}"]
    if name == "cnn":
        flags.append("--accumulate-allow-batch-norm")
    label = f"{name} K={k}"
    # The step must really loop over the micro-batches.
    ok = check_parity(label, oracle, mlir, workdir, STEPS, *flags)
    with open(os.path.join(workdir, "out", "plan.mlir")) as f:
        if f"memopt.micro_batches = {k} : i64" not in f.read():
            print(f"{label}: MISMATCH no micro-batch loop in plan.mlir")
            ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
