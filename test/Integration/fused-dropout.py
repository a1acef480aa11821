# The fused attention draws the dropout mask the unfused softmax -> dropout
# would (runtime.h, docs/Fusion.md): the bundled GPT example, whose
# attentions drop probabilities with p 0.1, trains 4 steps with the fused
# kernels (attention, and the loss in chunks of 48 classes) and without, from
# the same parameters and batch. The two runs compute the same function in
# another summation order, so their losses agree to f32 rounding of the
# step (relative 1e-5 allows 100 ulps; they agree bit for bit here). Another
# mask in one of the two layers (its dropout stream 9 instead of 1) moves
# the first loss by 2e-4, 20 times that. The dropout also runs per
# micro-batch (K=2): the kernel continues the numbering at the micro-batch's
# offset.
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t %memopt_src_root | FileCheck %s
#
# CHECK: K=1: fused and unfused losses agree (4 steps,
# CHECK: K=2: fused and unfused losses agree (4 steps,

import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
import memopt_run  # noqa: E402

STEPS = 4
TOLERANCE = 1e-5


def main():
    workdir, src = sys.argv[1], sys.argv[2]
    model = os.path.join(src, "examples", "gpt.mlir")
    ok = True
    for k in (1, 2):
        runs = {}
        for name, flags in (("fused", ["--lm-loss-chunk=48"]),
                            ("unfused", ["--no-fused-attention",
                                         "--no-fused-lm-loss"])):
            out = os.path.join(workdir, f"{name}-{k}")
            report = memopt_run.compile_model(
                model, out, f"--micro-batches={k}", *flags)
            fused = report["fused_kernels"]
            if (fused["attention"] > 0) != (name == "fused"):
                print(f"K={k}: MISMATCH {name} step has {fused}")
                ok = False
            if not os.path.exists(os.path.join(workdir, "batch.safetensors")):
                subprocess.run(
                    [sys.executable, os.path.join(
                        src, "test", "Target", "Inputs", "cuda_inputs.py"),
                     os.path.join(out, "model.json"),
                     os.path.join(workdir, "model.safetensors"),
                     os.path.join(workdir, "batch.safetensors"),
                     "--int-high", "128"], check=True,
                    stdout=subprocess.DEVNULL)
            runs[name] = memopt_run.losses(
                memopt_run.train(out, workdir, STEPS))
        worst = max(abs(a - b) / abs(b)
                    for a, b in zip(runs["fused"], runs["unfused"]))
        if len(runs["fused"]) != STEPS or worst > TOLERANCE:
            print(f"K={k}: MISMATCH fused {runs['fused']} against unfused "
                  f"{runs['unfused']} (relative {worst:.3g})")
            ok = False
        else:
            print(f"K={k}: fused and unfused losses agree ({STEPS} steps, "
                  f"relative {worst:.2g})")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
