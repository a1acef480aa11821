#!/usr/bin/env python3
"""Gradient clipping against gradient release: planned peaks.

For examples/gpt2-small.mlir (8 x 1024) and examples/llama-7b.mlir
(1 x 2048), in FP32 and BF16, prints memopt-compile's planned peak
(--report-only) without clipping, with --clip-grad-norm=1 under each
strategy (keep: every gradient waits for the norm; recompute: a norm pass,
then the backward again with released updates), the strategy that
--clip-strategy=auto chooses without a budget, and its peak against the
unclipped one. The target (issue "Training as users write it"): the
clipped step plans at most 1.02x the unclipped one; the anchor is
PyTorch's own clip_grad_norm_, which needs every gradient at once
(torchtune refuses it with its optimizer in the backward).

    python3 bench/clip/run.py [--build BUILD]
"""

import argparse
import os
import re
import subprocess

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
GIB = 1024.0 ** 3
MODELS = ["gpt2-small", "llama-7b"]
PEAK = re.compile(r"allocated for the step: .* \((\d+) B\)")
CHOICE = re.compile(r"with ([\d.]+)% more FLOPs; chose (\w+)")


def planned(build, mlir, *flags):
    text = subprocess.run(
        [os.path.join(build, "bin", "memopt-compile"), mlir, "--report-only",
         *flags], check=True, capture_output=True, text=True).stdout
    choice = CHOICE.search(text)
    return int(PEAK.search(text).group(1)), choice.groups() if choice else None


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    args = parser.parse_args()
    print("| model | precision | no clipping | keep | recompute "
          "(extra FLOPs) | auto chooses | auto / no clipping |")
    print("|---|---|---:|---:|---:|---|---:|")
    for name in MODELS:
        mlir = os.path.join(ROOT, "examples", name + ".mlir")
        for precision in ("none", "bf16"):
            flags = ["--mixed-precision=" + precision]
            free, _ = planned(args.build, mlir, *flags)
            keep, _ = planned(args.build, mlir, *flags, "--clip-grad-norm=1",
                              "--clip-strategy=keep")
            recompute, _ = planned(args.build, mlir, *flags,
                                   "--clip-grad-norm=1",
                                   "--clip-strategy=recompute")
            auto, (extra, chosen) = planned(args.build, mlir, *flags,
                                            "--clip-grad-norm=1")
            print("| %s | %s | %.2f GiB | %.2f GiB | %.2f GiB (+%s%%) | %s | "
                  "%.4fx |" % (name, "FP32" if precision == "none" else
                               "BF16", free / GIB, keep / GIB,
                               recompute / GIB, extra, chosen, auto / free))


if __name__ == "__main__":
    main()
