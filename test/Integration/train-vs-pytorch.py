# Trains each bundled PyTorch model for 5 AdamW steps with memopt (export,
# memopt-compile, OUT/train on the host runtime) and checks it with the
# parity oracle (memopt.testing, docs/Reliability.md): PyTorch in float64 is
# the truth, and every loss, every final parameter and batch-norm statistic,
# and every first-step gradient must be within 4x PyTorch FP32's own error
# against it (or a floor of f32 rounding). This holds on any CPU's BLAS
# kernels, where a fixed tolerance between two f32 runs does not.
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s mlp %t/mlp %memopt_src_root | FileCheck %s --check-prefix=MLP
# RUN: %python %s gpt %t/gpt %memopt_src_root | FileCheck %s --check-prefix=GPT
# RUN: %python %s cnn %t/cnn %memopt_src_root | FileCheck %s --check-prefix=CNN
# RUN: %python %s llama %t/llama %memopt_src_root | FileCheck %s --check-prefix=LLAMA
#
# MLP: mlp: trajectory: 5 losses and 4 tensors within the oracle
# MLP: mlp: gradients: 4 tensors within the oracle
# GPT: gpt: trajectory: 5 losses and 26 tensors within the oracle
# GPT: gpt: gradients: 26 tensors within the oracle
# CNN: cnn: trajectory: 5 losses and 22 tensors within the oracle
# CNN: cnn: gradients: 14 tensors within the oracle
# The LLaMA-style decoder as Hugging Face writes its attention: rotary
# embeddings from cos/sin buffers, the softmax in f32 through its dtype
# argument, cast back to the queries' dtype.
# LLAMA: llama: trajectory: 5 losses and 21 tensors within the oracle
# LLAMA: llama: gradients: 21 tensors within the oracle

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
from memopt_run import adamw, check_parity  # noqa: E402

STEPS = 5


def main():
    name, workdir, src = sys.argv[1], sys.argv[2], sys.argv[3]
    sys.path.insert(0, os.path.join(src, "examples", "pytorch"))
    import memopt
    import models
    from memopt.testing import Oracle

    os.makedirs(workdir, exist_ok=True)
    model, batch = models.build(name)
    oracle = Oracle(model, batch, STEPS, adamw)
    mlir = os.path.join(workdir, "model.mlir")
    memopt.export(model, tuple(batch.values()), mlir)
    memopt.safetensors.save(batch, os.path.join(workdir, "batch.safetensors"))
    return 0 if check_parity(name, oracle, mlir, workdir, STEPS) else 1


if __name__ == "__main__":
    sys.exit(main())
