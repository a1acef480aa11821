# Gradients released in the backward (--memopt-release-gradients, the
# default with one micro-batch; docs/Remat.md) compute the same step: the
# bundled models train 3 steps with and without --no-release-gradients,
# FP32 with AdamW and with SGD with momentum, and BF16, from the same
# parameters and batch, and the --save'd parameters and optimizer state are
# byte-identical. The released step must keep fewer gradient bytes at its
# peak, so a pass that did nothing fails.
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t %memopt_src_root | FileCheck %s
#
# CHECK: mlp adamw: 3 losses and {{[0-9]+}} bytes identical
# CHECK: mlp sgd: 3 losses and {{[0-9]+}} bytes identical
# CHECK: gpt adamw: 3 losses and {{[0-9]+}} bytes identical
# CHECK: gpt adamw bf16: 3 losses and {{[0-9]+}} bytes identical
# CHECK: gpt sgd: 3 losses and {{[0-9]+}} bytes identical
# CHECK: cnn adamw: 3 losses and {{[0-9]+}} bytes identical

import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
import memopt_run  # noqa: E402

STEPS = 3
OPTIMIZERS = {"adamw": ["--optimizer=adamw"],
              "sgd": ["--optimizer=sgd", "--momentum=0.9"]}
CASES = [("mlp", "adamw", []), ("mlp", "sgd", []), ("gpt", "adamw", []),
         ("gpt", "adamw", ["--mixed-precision=bf16"]), ("gpt", "sgd", []),
         ("cnn", "adamw", [])]


def main():
    workdir, src = sys.argv[1], sys.argv[2]
    ok = True
    for name, optimizer, extra in CASES:
        label = " ".join([name, optimizer] + [f.split("=")[-1] for f in extra])
        work = os.path.join(workdir, label.replace(" ", "-"))
        os.makedirs(work, exist_ok=True)
        model = os.path.join(src, "examples", f"{name}.mlir")
        runs = {}
        for variant, flags in (("released", []),
                               ("kept", ["--no-release-gradients"])):
            out = os.path.join(work, variant)
            report = memopt_run.compile_model(
                model, out, *OPTIMIZERS[optimizer], *extra, *flags)
            if variant == "released":
                subprocess.run(
                    [sys.executable, os.path.join(
                        src, "test", "Target", "Inputs", "cuda_inputs.py"),
                     os.path.join(out, "model.json"),
                     os.path.join(work, "model.safetensors"),
                     os.path.join(work, "batch.safetensors"),
                     "--int-high", "10"], check=True,
                    stdout=subprocess.DEVNULL)
            saved = os.path.join(work, f"{variant}.safetensors")
            stdout = memopt_run.train(out, work, STEPS, save=saved)
            with open(saved, "rb") as f:
                runs[variant] = (memopt_run.losses(stdout), f.read(),
                                 report["pools"]["grads"])
        (losses, state, grads), (want_losses, want_state, want_grads) = (
            runs["released"], runs["kept"])
        if losses != want_losses or state != want_state:
            print(f"{label}: MISMATCH losses {losses} against {want_losses}, "
                  f"state identical: {state == want_state}")
            ok = False
        elif not grads < want_grads:
            print(f"{label}: MISMATCH gradients at the peak {grads} B, "
                  f"{want_grads} B without release")
            ok = False
        else:
            print(f"{label}: {len(losses)} losses and {len(state)} bytes "
                  f"identical; gradients at the peak {grads} B instead of "
                  f"{want_grads} B")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
