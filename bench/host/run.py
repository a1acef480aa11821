"""Host step time: memopt's training step against PyTorch eager on the CPU.

    /usr/bin/python3 bench/host/run.py [--build BUILD] [--steps N]
                                       [--rounds R] [--threads T]
                                       [--only NAME,...]

For every model below, exports it with memopt.export, compiles it with
memopt-compile (AdamW, FP32, the default pipeline) for the host runtime,
trains it for N steps (`OUT/train --stats`: the minimum step time, first
step excluded) and times the same model, batch and torch.optim.AdamW in
PyTorch eager (zero_grad, forward, backward, step; the minimum over N steps
after one warm-up step). Both run with T threads (MEMOPT_NUM_THREADS and
OPENBLAS_NUM_THREADS for memopt, torch.set_num_threads for PyTorch), taking
turns R times in the same run (a shared machine's noise then hits both;
each PyTorch measurement runs in a child process, so that its OpenMP
workers, which spin after each parallel region, are gone while memopt runs);
each figure is the minimum over its rounds. Prints one Markdown table: both
minimum step times, their ratio
(memopt / PyTorch: below 1 is faster) and both first losses, which agree
(the same parameters and batch) except with dropout, whose masks differ.

The models: the bundled examples (examples/pytorch/models.py: mlp, gpt,
cnn, llama at their example batches) and three larger ones whose step is
dominated by compute rather than per-op overhead: a GPT of width 256, 4
layers, 4 heads, sequence 256, vocabulary 8192, dropout 0.1, batch 4; the
CNN at batch 64; and the MLP at batch 4096.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "examples", "pytorch"))

ADAMW = {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.01}
ADAMW_FLAGS = ["--optimizer=adamw", "--lr=1e-3", "--betas=0.9,0.999",
               "--eps=1e-8", "--weight-decay=0.01"]


def build_model(name):
    """(model, batch dict) for NAME, deterministically."""
    import torch
    import models
    if name in ("mlp", "gpt", "cnn", "llama"):
        return models.build(name)
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(1)
    if name == "gpt-256x4":
        model = models.GPT(vocab=8192, block=256, embed=256, heads=4,
                           layers=4, dropout=0.1)
        return model, model.example_batch(generator)
    if name == "cnn-b64":
        model = models.CNN()
        x = torch.randn(64, 3, 16, 16, generator=generator)
        y = torch.randint(0, 10, (64,), generator=generator)
        return model, {"x": x, "y": y}
    if name == "mlp-b4096":
        model = models.MLP()
        x = torch.randn(4096, 64, generator=generator)
        y = torch.randint(0, 10, (4096,), generator=generator)
        return model, {"x": x, "y": y}
    raise ValueError(f"unknown model {name}")


MODELS = ("mlp", "gpt", "cnn", "llama", "gpt-256x4", "cnn-b64", "mlp-b4096")


def time_torch(name, steps, threads):
    """PyTorch eager in a child process (so that its OpenMP workers, which
    spin after each parallel region, are gone before memopt runs), from the
    initial parameters: (minimum step seconds, first loss)."""
    run = subprocess.run([sys.executable, os.path.abspath(__file__),
                          "--torch-only", name, "--steps", str(steps),
                          "--threads", str(threads)],
                         check=True, capture_output=True, text=True).stdout
    best, first = run.split()
    return float(best), float(first)


def torch_step_times(name, steps):
    """PyTorch eager in this process: (minimum step seconds, first loss)."""
    import torch
    model, batch = build_model(name)
    optimizer = torch.optim.AdamW(model.parameters(), **ADAMW)
    args = tuple(batch.values())
    best, first = float("inf"), None
    for step in range(steps + 1):
        start = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = model(*args)
        loss.backward()
        optimizer.step()
        elapsed = time.perf_counter() - start
        if first is None:
            first = loss.item()
        if step > 0:
            best = min(best, elapsed)
    return best, first


def compile_memopt(build, name, model, batch, work):
    """Exports and compiles NAME for the host into WORK/NAME."""
    import memopt
    mlir = os.path.join(work, f"{name}.mlir")
    memopt.export(model, tuple(batch.values()), mlir)
    memopt.safetensors.save(batch,
                            os.path.join(work, f"{name}.batch.safetensors"))
    subprocess.run([os.path.join(build, "bin", "memopt-compile"), mlir,
                    "-o", os.path.join(work, name), *ADAMW_FLAGS], check=True,
                   stdout=subprocess.DEVNULL)


def time_memopt(name, steps, threads, work):
    """memopt on the host: (minimum step seconds, first loss)."""
    out = os.path.join(work, name)
    batch_file = os.path.join(work, f"{name}.batch.safetensors")
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads),
               MEMOPT_NUM_THREADS=str(threads))
    run = subprocess.run([os.path.join(out, "train"), "--params",
                          os.path.join(work, f"{name}.safetensors"),
                          "--batch", batch_file, "--steps", str(steps + 1),
                          "--stats"], check=True, capture_output=True,
                         text=True, env=env).stdout
    best = float(re.search(r"step_ms_min=(\S+)", run).group(1)) / 1e3
    first = float(re.search(r"^step \d+ loss (\S+)", run, re.M).group(1))
    return best, first


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--only", default=",".join(MODELS))
    parser.add_argument("--torch-only", help=argparse.SUPPRESS)
    args = parser.parse_args()
    import torch
    torch.set_num_threads(args.threads)
    if args.torch_only:
        best, first = torch_step_times(args.torch_only, args.steps)
        print(best, first)
        return 0
    names = args.only.split(",")
    for name in names:
        if name not in MODELS:
            parser.error(f"unknown model '{name}' (known: {', '.join(MODELS)})")
    print(f"threads {args.threads}, steps {args.steps}, rounds "
          f"{args.rounds}, torch {torch.__version__}")
    print("| model | memopt min step (ms) | PyTorch min step (ms) | ratio "
          "| memopt first loss | PyTorch first loss |")
    print("|---|---:|---:|---:|---:|---:|")
    worst = 0.0
    with tempfile.TemporaryDirectory() as work:
        for name in names:
            model, batch = build_model(name)
            compile_memopt(args.build, name, model, batch, work)
            ours = theirs = float("inf")
            for _ in range(args.rounds):
                seconds, our_loss = time_memopt(name, args.steps,
                                                args.threads, work)
                ours = min(ours, seconds)
                seconds, their_loss = time_torch(name, args.steps,
                                                 args.threads)
                theirs = min(theirs, seconds)
            worst = max(worst, ours / theirs)
            print(f"| {name} | {ours * 1e3:.3f} | {theirs * 1e3:.3f} | "
                  f"{ours / theirs:.2f} | {our_loss:.6f} | {their_loss:.6f} |",
                  flush=True)
    print(f"largest ratio {worst:.2f} (target: at most 1.00)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
