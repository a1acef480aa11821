#!/usr/bin/env python3
"""Tokens per second of a whole training loop: memopt's driver and
memopt.compile from Python against PyTorch eager, on the same model, data
and threads.

The model is examples/shakespeare's character-level GPT (4 layers of width
128, batches of 16 x 64 characters); the data its token file. memopt's
figure is OUT/train --tokens with --log, over the steps after the first
(data reading, the step, the log line: the loop as a user runs it);
memopt.compile's the same batches (shakespeare.batch) through a Python loop
over program.step, in a child process; PyTorch's the same batches through an
eager AdamW loop, timed the same way, with torch.set_num_threads(THREADS).
Each loop runs ROUNDS times, interleaved, and counts its best round.
Anchor: the target of "Train on data" is at least 1.5x PyTorch's tokens per
second, for both.

    /usr/bin/python3 bench/train/run.py [--build BUILD] [--steps N] [--threads T]
                                        [--rounds R]
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.path.insert(0, os.path.join(ROOT, "examples", "shakespeare"))
import shakespeare  # noqa: E402


def memopt_rate(build, work, steps, threads):
    log = os.path.join(work, "bench.jsonl")
    if os.path.exists(log):
        os.remove(log)
    subprocess.run(
        [os.path.join(work, "compiled", "train"), "--params",
         os.path.join(work, "model.safetensors"), "--tokens",
         os.path.join(work, "train.bin"), "--seed", str(shakespeare.SEED),
         "--steps", str(steps), "--log", log], check=True,
        stdout=subprocess.DEVNULL,
        env=dict(os.environ, MEMOPT_NUM_THREADS=str(threads)))
    records = [json.loads(line) for line in open(log)]
    seconds = records[-1]["elapsed_s"] - records[0]["elapsed_s"]
    tokens = shakespeare.BATCH * shakespeare.BLOCK * (len(records) - 1)
    return tokens / seconds


def python_rate(work, steps):
    """memopt.compile's loop (run in a child process: no PyTorch thread
    pool spinning beside it)."""
    import numpy as np
    import memopt
    with open(os.path.join(work, "meta.json")) as f:
        vocab = len(json.load(f)["vocab"])
    model = shakespeare.build(vocab)
    train = np.fromfile(os.path.join(work, "train.bin"), dtype=np.uint16)
    import torch
    example = tuple(map(torch.from_numpy,
                        shakespeare.batch(train, shakespeare.SEED, 0)))
    program = memopt.compile(model, example,
                             out_dir=os.path.join(work, "python"))
    stamps = []
    for k in range(steps):
        x, y = shakespeare.batch(train, shakespeare.SEED, k)
        float(program.step(x, y))
        stamps.append(time.perf_counter())
    tokens = shakespeare.BATCH * shakespeare.BLOCK * (steps - 1)
    return tokens / (stamps[-1] - stamps[0])


def pytorch_rate(work, steps, threads):
    import numpy as np
    import torch
    torch.set_num_threads(threads)
    with open(os.path.join(work, "meta.json")) as f:
        vocab = len(json.load(f)["vocab"])
    model = shakespeare.build(vocab)
    train = np.fromfile(os.path.join(work, "train.bin"), dtype=np.uint16)
    opt = torch.optim.AdamW(model.parameters(), lr=shakespeare.LR)
    stamps = []
    for k in range(steps):
        x, y = map(torch.from_numpy,
                   shakespeare.batch(train, shakespeare.SEED, k))
        opt.zero_grad()
        loss = model(x, y)
        loss.backward()
        opt.step()
        float(loss)  # the loss a loop reads, as the driver prints it
        stamps.append(time.perf_counter())
    tokens = shakespeare.BATCH * shakespeare.BLOCK * (steps - 1)
    return tokens / (stamps[-1] - stamps[0])


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--python-child", metavar="WORK",
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.python_child:
        print(python_rate(args.python_child, args.steps))
        return
    work = tempfile.mkdtemp(prefix="memopt-train-bench-")
    shakespeare.prepare(work)
    shakespeare.export(work)
    subprocess.run([os.path.join(args.build, "bin", "memopt-compile"),
                    os.path.join(work, "model.mlir"), "-o",
                    os.path.join(work, "compiled")], check=True,
                   stdout=subprocess.DEVNULL)
    env = dict(os.environ, MEMOPT_NUM_THREADS=str(args.threads),
               PATH=os.path.join(args.build, "bin") + os.pathsep +
               os.environ.get("PATH", ""))
    # The best of the rounds of each loop, interleaved: this machine's
    # step times vary by tens of percent from minute to minute.
    ours = python = theirs = 0.0
    for _ in range(args.rounds):
        ours = max(ours, memopt_rate(args.build, work, args.steps,
                                     args.threads))
        python = max(python, float(subprocess.run(
            [sys.executable, __file__, "--steps", str(args.steps),
             "--python-child", work], check=True, capture_output=True,
            text=True, env=env).stdout.split()[-1]))
        theirs = max(theirs, pytorch_rate(work, args.steps, args.threads))
    print("| loop | tokens/s | vs PyTorch eager |")
    print("|---|---:|---:|")
    print("| memopt, OUT/train --tokens | %.0f | %.2fx |" % (ours,
                                                            ours / theirs))
    print("| memopt, memopt.compile + Python loop | %.0f | %.2fx |"
          % (python, python / theirs))
    print("| PyTorch eager, same batches | %.0f | 1.00x |" % theirs)
    print("\n%d steps, %d threads, best of %d rounds; anchor: >= 1.5x "
          "PyTorch eager" % (args.steps, args.threads, args.rounds))


if __name__ == "__main__":
    main()
