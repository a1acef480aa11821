"""Fused attention and LM-head loss: memory that grows linearly in sequence.

    /usr/bin/python3 bench/fusion/run.py [--build BUILD] [--precision P]

Generates GPT-2 small's shape (12 layers, width 768, 12 heads, vocabulary
50304, dropout 0.1, batch 1) with bench/gpu/gen_gpt.py at sequence 1024,
2048 and 4096, compiles each with memopt-compile --report-only (BF16 by
default), fused (the default) and with --no-fused-attention
--no-fused-lm-loss, and prints for each

  - the activations saved for the backward (the sum of `by_scope`),
  - the activation pool's maximum over the step (`timeline`),
  - the planned peak (arguments + arena),
  - whether the plan holds a buffer with a sequence x sequence or a
    tokens x vocabulary shape,

then the ratio of each figure from sequence 1024 to 4096: 4 is linear, 16
quadratic.
"""

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
SEQUENCES = (1024, 2048, 4096)
VOCAB = 50304
MIB = 2.0 ** 20


def measure(compile_, mlir, out, precision, flags, seq):
    subprocess.run([compile_, mlir, "-o", out, "--report-only",
                    f"--mixed-precision={precision}", *flags], check=True,
                   stdout=subprocess.DEVNULL)
    with open(os.path.join(out, "memory_report.json")) as f:
        report = json.load(f)
    with open(os.path.join(out, "plan.mlir")) as f:
        shapes = set(re.findall(r"memref<([0-9x]+)x[a-z0-9]+>", f.read()))
    big = [s for s in shapes
           if f"{seq}x{seq}" in s or re.search(rf"(^|x){seq}x{VOCAB}$", s)]
    return {"saved": sum(report["by_scope"].values()),
            "pool": max(p["activations"] for p in report["timeline"]),
            "peak": sum(report["pools"].values()),
            "big": big}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--precision", default="bf16")
    args = parser.parse_args()
    compile_ = os.path.join(args.build, "bin", "memopt-compile")
    rows = {}
    with tempfile.TemporaryDirectory() as work:
        for seq in SEQUENCES:
            mlir = os.path.join(work, f"gpt{seq}.mlir")
            subprocess.run([sys.executable,
                            os.path.join(ROOT, "bench", "gpu", "gen_gpt.py"),
                            mlir, "--batch", "1", "--seq", str(seq),
                            "--vocab", str(VOCAB), "--dropout", "0.1"],
                           check=True, stdout=subprocess.DEVNULL)
            for name, flags in (("fused", []),
                                ("unfused", ["--no-fused-attention",
                                             "--no-fused-lm-loss"])):
                rows[name, seq] = measure(compile_, mlir,
                                          os.path.join(work, "out"),
                                          args.precision, flags, seq)
    print(f"GPT-2 small shape, batch 1, --mixed-precision={args.precision}")
    print(f"{'step':8} {'seq':>5} {'saved MiB':>10} {'pool MiB':>10} "
          f"{'peak MiB':>10}  seq x seq or tokens x vocab buffers")
    for (name, seq), row in rows.items():
        print(f"{name:8} {seq:5} {row['saved'] / MIB:10.1f} "
              f"{row['pool'] / MIB:10.1f} {row['peak'] / MIB:10.1f}  "
              f"{', '.join(row['big']) or 'none'}")
    first, last = SEQUENCES[0], SEQUENCES[-1]
    for name in ("fused", "unfused"):
        a, b = rows[name, first], rows[name, last]
        print(f"{name}: sequence {first} -> {last}: saved x"
              f"{b['saved'] / a['saved']:.2f}, pool x"
              f"{b['pool'] / a['pool']:.2f} (4 is linear, 16 quadratic)")


if __name__ == "__main__":
    main()
