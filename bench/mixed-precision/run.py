# Mixed precision on the bundled models (docs/MixedPrecision.md): exports
# each PyTorch model, compiles it with --mixed-precision=none, bf16 and fp16,
# trains 10 AdamW steps on the host, and prints per regime the model state
# per parameter (target: REFERENCE.md's table), the activations saved for
# the backward relative to FP32 (target: about 0.5), the peak and arena,
# and the largest relative loss difference to PyTorch FP32 (target: 3e-2).
#
#   ninja -C build memopt-compile memopt_driver memopt_runtime_host
#   /usr/bin/python3 bench/mixed-precision/run.py [build/bin] [workdir]
import copy
import json
import os
import re
import subprocess
import sys
import tempfile

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
STEPS = 10


def main():
    bindir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        ROOT, "build", "bin")
    workdir = sys.argv[2] if len(sys.argv) > 2 else tempfile.mkdtemp()
    sys.path[:0] = [os.path.join(ROOT, "python"),
                    os.path.join(ROOT, "examples", "pytorch")]
    import memopt
    import models

    print("| model | regime | model state B/param (target) | saved activations "
          "| vs FP32 (target ~0.5) | arena | max rel. loss diff vs PyTorch "
          "FP32 (target 3e-2) |")
    print("|---|---|---|---:|---:|---:|---:|")
    for name in ["mlp", "gpt", "cnn"]:
        model, batch = models.build(name)
        base = os.path.join(workdir, name)
        os.makedirs(base, exist_ok=True)
        mlir = os.path.join(base, "model.mlir")
        memopt.export(copy.deepcopy(model), tuple(batch.values()), mlir)
        memopt.safetensors.save(batch, os.path.join(base, "batch.safetensors"))
        reference = copy.deepcopy(model)
        optimizer = torch.optim.AdamW(reference.parameters(), lr=1e-3)
        expected = []
        for _ in range(STEPS):
            optimizer.zero_grad()
            loss = reference(**batch)
            loss.backward()
            optimizer.step()
            expected.append(loss.item())
        saved32 = None
        for regime, target in [("none", "16"), ("bf16", "16-18"),
                               ("fp16", "16-18")]:
            out = os.path.join(base, regime)
            subprocess.run([os.path.join(bindir, "memopt-compile"), mlir,
                            "-o", out, f"--mixed-precision={regime}",
                            "--report=json"], check=True,
                           stdout=subprocess.DEVNULL)
            report = json.load(open(os.path.join(out, "memory_report.json")))
            run = subprocess.run(
                [os.path.join(out, "train"),
                 "--params", os.path.join(base, "model.safetensors"),
                 "--batch", os.path.join(base, "batch.safetensors"),
                 "--steps", str(STEPS)], check=True, capture_output=True,
                text=True)
            losses = [float(m) for m in
                      re.findall(r"^step \d+ loss (\S+)", run.stdout, re.M)]
            error = max(abs(a - b) / abs(b) for a, b in zip(losses, expected))
            saved = sum(report["by_scope"].values())
            saved32 = saved32 or saved
            params = sum(p.numel() for p in model.parameters())
            per_param = report["model_state"]["total"] / params
            print(f"| {name} | {regime} | {per_param:.2f} ({target}) | "
                  f"{saved} | {saved / saved32:.2f} | "
                  f"{report['arena_bytes']} | {error:.1e} |")


if __name__ == "__main__":
    main()
