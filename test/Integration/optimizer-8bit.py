# 8-bit AdamW (--optimizer-state=8bit, docs/Optimizer.md) on the bundled
# GPT: every parameter of at least 4096 elements keeps its moments as
# packed bytes of the documented size in the checkpoint (u8), the smaller
# ones f32; the first update, which reads zero moments, is the 32-bit
# update bit for bit, and the trajectories part after it; 3 steps, a save
# and 3 resumed steps are 6 uninterrupted ones byte for byte, also under
# BF16 and with 2 micro-batches; the report counts the packed bytes.
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t | FileCheck %s
#
# CHECK: state: 18 packed moments (u8), 34 f32, sizes as documented
# CHECK-NEXT: step 1 is the 32-bit update bit for bit; step 3 differs
# CHECK-NEXT: fp32: 3 + save + 3 resumed is 6 uninterrupted
# CHECK-NEXT: bf16: 3 + save + 3 resumed is 6 uninterrupted
# CHECK-NEXT: K=2: 3 + save + 3 resumed is 6 uninterrupted
# CHECK-NEXT: report: optimizer state {{[0-9]+}} bytes, the arguments' sum

import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
import memopt_run  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
BLOCK, MIN_ELEMENTS = 256, 4096


def packed_bytes(n):
    """A record per block: its f32 absmax, then its BLOCK codes."""
    return (4 + BLOCK) * ((n + BLOCK - 1) // BLOCK)


def run(out, workdir, *args):
    return subprocess.run(
        [os.path.join(out, "train"), "--params",
         os.path.join(workdir, "model.safetensors"), "--batch",
         os.path.join(workdir, "batch.safetensors"), *args],
        check=True, capture_output=True, text=True).stdout


def same_file_tensors(a, b):
    import memopt
    x, y = memopt.safetensors.load(a), memopt.safetensors.load(b)
    return x.keys() == y.keys() and all(x[k].tobytes() == y[k].tobytes()
                                        for k in x)


def main():
    import numpy as np
    import memopt
    workdir = sys.argv[1]
    sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "pytorch"))
    import models

    model, batch = models.build("gpt")
    mlir = os.path.join(workdir, "model.mlir")
    memopt.export(model, tuple(batch.values()), mlir)
    memopt.safetensors.save(batch, os.path.join(workdir, "batch.safetensors"))
    sizes = {name: p.numel() for name, p in model.named_parameters()}

    out8 = os.path.join(workdir, "out8")
    report = memopt_run.compile_model(mlir, out8, *memopt_run.ADAMW_FLAGS,
                                      "--optimizer-state=8bit")
    out32 = os.path.join(workdir, "out32")
    memopt_run.compile_model(mlir, out32, *memopt_run.ADAMW_FLAGS)

    saved = os.path.join(workdir, "one.safetensors")
    run(out8, workdir, "--steps", "1", "--save", saved)
    state = memopt.safetensors.load(saved)
    packed = f32 = 0
    for name, n in sizes.items():
        for slot in ("exp_avg", "exp_avg_sq"):
            moment = state["optimizer.%s.%s" % (name, slot)]
            if n >= MIN_ELEMENTS:
                assert moment.dtype == np.uint8 and \
                    moment.shape == (packed_bytes(n),), (name, moment.shape)
                packed += 1
            else:
                assert moment.dtype == np.float32 and moment.size == n
                f32 += 1
    print("state: %d packed moments (u8), %d f32, sizes as documented"
          % (packed, f32))
    assert packed > 0 and f32 > 0

    # The first update reads zero moments: exactly the 32-bit update.
    full = os.path.join(workdir, "one32.safetensors")
    run(out32, workdir, "--steps", "1", "--save", full)
    reference = memopt.safetensors.load(full)
    assert all(state[name].tobytes() == reference[name].tobytes()
               for name in sizes), "step 1 differs from the 32-bit update"
    eight = memopt_run.losses(run(out8, workdir, "--steps", "3"))
    thirty_two = memopt_run.losses(run(out32, workdir, "--steps", "3"))
    assert eight[:2] == thirty_two[:2] and eight[2] != thirty_two[2], \
        (eight, thirty_two)
    print("step 1 is the 32-bit update bit for bit; step 3 differs")

    for label, flags in (("fp32", []), ("bf16", ["--mixed-precision=bf16"]),
                         ("K=2", ["--micro-batches=2"])):
        out = os.path.join(workdir, "resume-" + label.replace("=", ""))
        memopt_run.compile_model(mlir, out, *memopt_run.ADAMW_FLAGS,
                                 "--optimizer-state=8bit", *flags)
        whole = os.path.join(workdir, label + "-6.safetensors")
        half = os.path.join(workdir, label + "-3.safetensors")
        again = os.path.join(workdir, label + "-3+3.safetensors")
        six = memopt_run.losses(run(out, workdir, "--steps", "6", "--save",
                                    whole))
        first = memopt_run.losses(run(out, workdir, "--steps", "3", "--save",
                                      half))
        rest = subprocess.run(
            [os.path.join(out, "train"), "--params", half, "--batch",
             os.path.join(workdir, "batch.safetensors"), "--steps", "3",
             "--save", again], check=True, capture_output=True,
            text=True).stdout
        assert first + memopt_run.losses(rest) == six, (label, six)
        assert rest.split()[1] == "4"
        assert same_file_tensors(whole, again), label
        print("%s: 3 + save + 3 resumed is 6 uninterrupted" % label)

    # The report's optimizer state is the bytes of its arguments.
    with open(os.path.join(out8, "model.json")) as f:
        arguments = json.load(f)["arguments"]
    width = {"f32": 4, "u8": 1, "i64": 8}
    expected = sum(int(np.prod(a["shape"])) * width[a["dtype"]]
                   for a in arguments if a["role"] == "optim")
    got = report["model_state"]["optimizer"]
    assert got == expected, (got, expected)
    print("report: optimizer state %d bytes, the arguments' sum" % got)


if __name__ == "__main__":
    main()
