#!/usr/bin/env python3
"""8-bit AdamW against 32-bit AdamW: accuracy and memory.

Accuracy: examples/shakespeare's character-level GPT trained twice from the
same weights on the same batches (OUT/train --tokens, nanoGPT's schedule),
once with --optimizer-state=32bit and once with 8bit; the final validation
losses, and their ratio against the anchor: within 1% (Dettmers et al.
report 8-bit AdamW matching 32-bit on language-model pretraining).

Memory: LLaMA-7B full fine-tuning, BF16, batch 1 x 2048, planned by
memopt-compile --report-only with each state precision, against the anchor:
one 80 GB device, no ZeRO (32-bit moments need ZeRO-2 over 2 ranks).

    /usr/bin/python3 bench/optimizer8bit/run.py [--build BUILD] [--steps N]
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "examples", "shakespeare"))
import shakespeare  # noqa: E402


def final_eval(build, work, bits, steps):
    out = os.path.join(work, "out" + bits)
    subprocess.run([os.path.join(build, "bin", "memopt-compile"),
                    os.path.join(work, "model.mlir"), "-o", out,
                    "--optimizer-state=" + bits,
                    *shakespeare.schedule_flags(steps)], check=True,
                   stdout=subprocess.DEVNULL)
    text = subprocess.run(
        [os.path.join(out, "train"), "--params",
         os.path.join(work, "model.safetensors"), "--tokens",
         os.path.join(work, "train.bin"), "--seed", str(shakespeare.SEED),
         "--steps", str(steps), "--eval", "--eval-tokens",
         os.path.join(work, "val.bin"), "--eval-batches",
         str(shakespeare.EVAL_BATCHES)], check=True, capture_output=True,
        text=True).stdout
    return float(text.split()[-1])


def planned(build, bits):
    text = subprocess.run(
        [os.path.join(build, "bin", "memopt-compile"),
         os.path.join(ROOT, "examples", "llama-7b.mlir"), "--report-only",
         "--mixed-precision=bf16", "--optimizer-state=" + bits],
        check=True, capture_output=True, text=True).stdout
    total = re.search(r"allocated for the step: ([0-9.]+ GiB)", text).group(1)
    state = re.search(r"^  optimizer\s+([0-9.]+ GiB)", text, re.M).group(1)
    return total, state


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--steps", type=int, default=2000)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="memopt-8bit-bench-")
    shakespeare.prepare(work)
    shakespeare.export(work)
    wide = final_eval(args.build, work, "32bit", args.steps)
    narrow = final_eval(args.build, work, "8bit", args.steps)
    print("| AdamW state | final validation loss (%d steps) | vs 32-bit |"
          % args.steps)
    print("|---|---:|---:|")
    print("| 32-bit | %.4f | |" % wide)
    print("| 8-bit | %.4f | %+.2f%% |" % (narrow, 100 * (narrow / wide - 1)))
    print("anchor: within 1%\n")
    print("| LLaMA-7B, BF16, 1 x 2048 | optimizer state | planned for the "
          "step |")
    print("|---|---:|---:|")
    for bits in ("32bit", "8bit"):
        total, state = planned(args.build, bits)
        print("| %s moments | %s | %s |" % (bits, state, total))
    print("anchor: one 80 GB device without ZeRO")


if __name__ == "__main__":
    main()
