# FP16 dynamic loss scaling with memopt.unscale written in place
# (docs/MixedPrecision.md, "Memory"). Trains the MLP and the GPT from
# examples/ for 3 steps with --mixed-precision=fp16 (alone, with gradient
# accumulation, with rematerialization, and with a scale so large that every
# step overflows and is skipped) both with and without --no-buffer-reuse,
# and checks that:
#  - the printed losses and the --save'd parameters, optimizer state and
#    loss scale are byte-identical (the unoptimised baseline writes every
#    unscaled gradient into a buffer of its own);
#  - the default plan's unscale kernel writes each result into its gradient's
#    buffer (outs == ins), and the no-reuse one into fresh buffers;
#  - the fp16 arena is the bf16 one (without gradient release, which fp16's
#    dynamic loss scaling rules out) up to the loss-scaling scalars (the
#    scale, its tracker, the overflow flag, the scaled loss: four 256-byte
#    slots at most, where the minimal saved set puts the peak among them):
#    loss scaling no longer needs a second copy of the f32 gradients.
# The helpers (inputs, compile + train, no-reuse plan check) are those of
# no-buffer-reuse.py.
#
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t %examples | FileCheck %s
#
# CHECK: mlp: fp16: 3 losses and {{[0-9]+}} bytes identical, 4/4 gradients unscaled in place, arena {{[0-9]+}} -> {{[0-9]+}} B
# CHECK: mlp: fp16 micro-batches=4: 3 losses and {{[0-9]+}} bytes identical, 4/4 gradients unscaled in place
# CHECK: mlp: bf16 arena {{[0-9]+}} B, fp16's within the loss-scaling scalars
# CHECK: gpt: fp16: 3 losses and {{[0-9]+}} bytes identical, 28/28 gradients unscaled in place, arena {{[0-9]+}} -> {{[0-9]+}} B
# CHECK: gpt: fp16 micro-batches=2 remat=selective: 3 losses and {{[0-9]+}} bytes identical, 28/28 gradients unscaled in place
# CHECK: gpt: fp16 overflow: 3 losses and {{[0-9]+}} bytes identical, 28/28 gradients unscaled in place
# CHECK: gpt: bf16 arena {{[0-9]+}} B, fp16's within the loss-scaling scalars
# CHECK-NOT: MISMATCH

import importlib.util
import os
import re
import sys

sys.dont_write_bytecode = True  # no __pycache__ next to the tests
HERE = os.path.dirname(os.path.abspath(__file__))
_spec = importlib.util.spec_from_file_location(
    "no_buffer_reuse", os.path.join(HERE, "no-buffer-reuse.py"))
no_buffer_reuse = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(no_buffer_reuse)
compile_and_train = no_buffer_reuse.compile_and_train
STEPS = no_buffer_reuse.STEPS

UNSCALE = re.compile(r'memopt\.kernel "memopt\.unscale" ins\(([^:]*) :[^)]*\) '
                     r'outs\(([^:]*) :')


# Bytes the loss-scaling scalars may add to the fp16 arena: four 256-byte
# slots.
LOSS_SCALING_SLOTS = 4 * 256


def unscale_operands(plan):
    """The gradient buffers the unscale reads and the buffers it writes."""
    kernels = UNSCALE.findall(plan)
    if len(kernels) != 1:
        return None
    ins, outs = ([name.strip() for name in group.split(",")]
                 for group in kernels[0])
    return ins[1:], outs[:-1]


def main():
    workdir, examples = sys.argv[1], sys.argv[2]
    fp16 = ["--mixed-precision=fp16"]
    variants = {
        "mlp": {"fp16": fp16,
                "fp16 micro-batches=4": fp16 + ["--micro-batches=4"]},
        "gpt": {"fp16": fp16,
                "fp16 micro-batches=2 remat=selective":
                    fp16 + ["--micro-batches=2", "--remat=selective"],
                "fp16 overflow": fp16 + ["--loss-scale-init=1e30"]},
    }
    status = 0
    for name, runs in variants.items():
        mlir = os.path.join(examples, name + ".mlir")
        modeldir = os.path.join(workdir, name)
        os.makedirs(modeldir, exist_ok=True)
        fp16_arena = None
        for tag, flags in runs.items():
            slug = re.sub(r"[^\w]+", "-", tag)
            reuse, alone, problems = no_buffer_reuse.both_ways(
                modeldir, mlir, slug, flags)
            if "overflow" in tag and reuse[0].count("skipped") != STEPS:
                problems.append(f"expected {STEPS} skipped steps: {reuse[0]!r}")
            in_place = 0
            operands = unscale_operands(reuse[3])
            separate = unscale_operands(alone[3])
            if operands is None or separate is None:
                problems.append("expected one unscale kernel in each plan")
            else:
                in_place = sum(g == r for g, r in zip(*operands))
                if any(g == r for g, r in zip(*separate)):
                    problems.append("no-reuse unscale writes a gradient")
            if problems:
                status = 1
                print(f"{name}: {tag}: MISMATCH " + "; ".join(problems))
                continue
            line = (f"{name}: {tag}: {STEPS} losses and {len(reuse[1])} bytes "
                    f"identical, {in_place}/{len(operands[0])} gradients "
                    f"unscaled in place")
            if tag == "fp16":
                fp16_arena = reuse[2]
                line += f", arena {reuse[2]} -> {alone[2]} B"
            print(line)
        # bf16 without gradient release, which loss scaling rules out for
        # fp16 (docs/Remat.md): the same gradients live at the same points.
        bf16 = compile_and_train(modeldir, mlir, "bf16",
                                 ["--mixed-precision=bf16",
                                  "--no-release-gradients"])
        if not 0 <= fp16_arena - bf16[2] <= LOSS_SCALING_SLOTS:
            status = 1
            print(f"{name}: MISMATCH fp16 arena {fp16_arena}, bf16 arena "
                  f"{bf16[2]}")
        print(f"{name}: bf16 arena {bf16[2]} B, fp16's within the "
              f"loss-scaling scalars ({fp16_arena - bf16[2]} B more)")
    return status


if __name__ == "__main__":
    sys.exit(main())
