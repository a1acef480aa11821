# Offload on the CUDA runtime (docs/Offload.md): the bundled GPT trained for
# 3 steps on the GPU with and without offload, from the same inputs.
#  - --offload=activations: the saved activations cross to the page-locked
#    host arena and back on the copy stream (memopt_transfer_start, ordered
#    against the step's stream by events while the compute goes on), every
#    kernel is the same, so the losses and the saved checkpoint are
#    bit-identical to the step without offload: a copy read too early or
#    overwritten in flight would break them.
#  - --offload=params,activations in BF16: the update also runs in the CUDA
#    runtime's host loops (memopt_host_adamw_update) and the weights cross
#    before each use; the losses are within 1e-4 relative of the device
#    update's and every saved tensor within cuda-parity.py's tolerance.
#
# REQUIRES: cuda-gpu
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t %memopt_src_root | FileCheck %s
#
# CHECK: activations: 3 losses bit-identical, checkpoint byte-identical
# CHECK: params,activations: 3 losses within 1e-4, {{[0-9]+}} tensors within tolerance

import os
import re
import subprocess
import sys

import numpy as np

STEPS = 3
LR = 1e-3
TOLERANCE = 1e-4


def train(src, workdir, label, flags, params, batch):
    out = os.path.join(workdir, label)
    subprocess.run(["memopt-compile", os.path.join(src, "examples", "gpt.mlir"),
                    "-o", out, "--target=cuda", f"--lr={LR}", *flags],
                   check=True, stdout=subprocess.DEVNULL)
    final = out + ".safetensors"
    run = subprocess.run([os.path.join(out, "train"), "--params", params,
                          "--batch", batch, "--steps", str(STEPS), "--save",
                          final], capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit(f"{label}: train failed with {run.returncode}: {run.stderr}")
    losses = re.findall(r"^step \d+ loss (\S+)$", run.stdout, re.M)
    return losses, final


def main():
    workdir, src = sys.argv[1], sys.argv[2]
    sys.path.insert(0, os.path.join(src, "python"))
    import memopt.safetensors
    plan = os.path.join(workdir, "plan")
    subprocess.run(["memopt-compile", os.path.join(src, "examples", "gpt.mlir"),
                    "-o", plan], check=True, stdout=subprocess.DEVNULL)
    params = os.path.join(workdir, "params.safetensors")
    batch = os.path.join(workdir, "batch.safetensors")
    subprocess.run([sys.executable, os.path.join(
        src, "test", "Target", "Inputs", "cuda_inputs.py"),
        os.path.join(plan, "model.json"), params, batch, "--int-high", "16"],
        check=True)

    plain = train(src, workdir, "plain", [], params, batch)
    moved = train(src, workdir, "activations", ["--offload=activations"],
                  params, batch)
    same = open(plain[1], "rb").read() == open(moved[1], "rb").read()
    print("activations: %d losses %s, checkpoint %s" % (
        len(moved[0]),
        "bit-identical" if moved[0] == plain[0] and len(plain[0]) == STEPS
        else "MISMATCH %s %s" % (moved[0], plain[0]),
        "byte-identical" if same else "MISMATCH"))

    bf16 = ["--mixed-precision=bf16"]
    want = train(src, workdir, "bf16", bf16, params, batch)
    got = train(src, workdir, "params-activations",
                bf16 + ["--offload=params,activations"], params, batch)
    failures = []
    if len(got[0]) != STEPS or len(want[0]) != STEPS:
        failures.append("losses %s vs %s" % (got[0], want[0]))
    for a, b in zip(map(float, got[0]), map(float, want[0])):
        if not abs(a - b) <= TOLERANCE * abs(b):
            failures.append("loss %r vs %r" % (a, b))
    saved, reference = (memopt.safetensors.load(got[1]),
                        memopt.safetensors.load(want[1]))
    for key, expected in reference.items():
        actual = saved.get(key)
        if actual is None or actual.shape != expected.shape:
            failures.append("%s: missing or misshapen" % key)
            continue
        if expected.dtype.kind != "f":
            if not np.array_equal(actual, expected):
                failures.append("%s differs" % key)
            continue
        scale = max(float(np.abs(expected).max()), 1e-30)
        diff = np.abs(actual.astype(np.float64) - expected)
        if np.mean(diff <= TOLERANCE * scale) < 0.999 or diff.max() > LR * STEPS:
            failures.append("%s: max diff %.3g" % (key, diff.max()))
    print("params,activations: %s" % (
        "; ".join(failures[:10]) if failures else
        "%d losses within 1e-4, %d tensors within tolerance" % (
            STEPS, len(reference))))


if __name__ == "__main__":
    main()
