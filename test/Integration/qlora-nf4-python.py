# NF4 frozen weights from Python: memopt.compile(..., frozen_weights="nf4")
# on qlora-nf4.py's LoRA decoder runs OUT/train's steps bit for bit in
# process, and its state_dict leaves the NF4 bytes out (they are not the
# model's tensors; the checkpoint keeps those).
#
# UNSUPPORTED: sanitized
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t | FileCheck %s
#
# CHECK: python: 5 losses bit-identical to OUT/train's, state_dict holds 12 of 19 frozen weights (no NF4 bytes)

import os
import sys

import numpy as np

HERE = os.path.dirname(__file__)
sys.path.insert(0, os.path.join(HERE, "Inputs"))
import memopt_run  # noqa: E402

frozen_lora = memopt_run.load_test("frozen-lora.py")

STEPS = 5


def main():
    import torch
    import memopt

    workdir = sys.argv[1]
    model, batch = frozen_lora.build()
    mlir = os.path.join(workdir, "model.mlir")
    memopt.export(model, tuple(batch.values()), mlir)
    memopt.safetensors.save(batch, os.path.join(workdir, "batch.safetensors"))
    out = os.path.join(workdir, "out")
    memopt_run.compile_model(mlir, out, *memopt_run.ADAMW_FLAGS,
                             "--frozen-weights=nf4")
    expected = [float(np.float32(x)) for x in memopt_run.losses(
        memopt_run.train(out, workdir, STEPS))]

    program = memopt.compile(
        model, tuple(batch.values()), os.path.join(workdir, "program"),
        optimizer=torch.optim.AdamW(
            [p for p in model.parameters() if p.requires_grad],
            **memopt_run.ADAMW),
        frozen_weights="nf4")
    losses = [float(np.float32(program.step(*batch.values())))
              for _ in range(STEPS)]
    held = program.state_dict()
    program.close()
    frozen = [n for n, p in model.named_parameters() if not p.requires_grad]
    print("python: %d losses %s, state_dict holds %d of %d frozen weights "
          "(no NF4 bytes)" % (
              len(losses), "bit-identical to OUT/train's"
              if losses == expected else "MISMATCH %s %s" % (losses, expected),
              sum(n in held for n in frozen), len(frozen)))


if __name__ == "__main__":
    main()
