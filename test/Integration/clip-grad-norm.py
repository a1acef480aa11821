# Global-norm gradient clipping (memopt-compile --clip-grad-norm=C,
# docs/Training.md): torch.nn.utils.clip_grad_norm_(trained parameters, C)
# between the backward and AdamW, on the bundled GPT for 8 steps with C
# between the smallest and the largest unclipped norm, so that it clips on
# some steps and not on others. Against PyTorch through the parity oracle:
# FP32 with the gradients kept for the norm, and with the backward run
# twice so that the updates stay released (byte for byte the same run; on
# one sample, where the gradients outweigh the activations, in less planned
# memory, and --clip-strategy=auto takes it); 2 micro-batches (the norm of the whole batch's
# gradient); BF16 (losses). FP16 clips the unscaled gradients (the norm of
# the first step as FP32's, not 2^16 times it) and an overflowing step is
# still skipped. Over 2 ranks the norm is every rank's gradient's: data
# parallelism is byte for byte one process with 2 micro-batches, and ZeRO-2
# and ZeRO-3 (every parameter a shard), whose ranks add the partial sums of
# their shards, are within the oracle.
# Every norm the driver prints is PyTorch's float64 norm within the oracle's
# own spread. Bad flags are one error each.
#
# REQUIRES: torch, mpi
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t | FileCheck %s
#
# CHECK: unclipped norms: 8 printed
# CHECK: keep: norms: 8 within the oracle
# CHECK-NEXT: keep: trajectory: 8 losses and 26 tensors within the oracle
# CHECK-NEXT: keep: clipped on {{[1-7]}} of 8 steps
# CHECK: recompute: byte-identical to keep
# CHECK-NEXT: one sample: recompute plans less than keep ({{[0-9]+}} B against {{[0-9]+}} B), and auto takes it
# CHECK: K=2: norms: 8 within the oracle
# CHECK-NEXT: K=2: trajectory: 8 losses and 26 tensors within the oracle
# CHECK: bf16: norms: 8 within the oracle
# CHECK-NEXT: bf16: trajectory: 8 losses within the oracle
# CHECK: fp16: the first norm is the unscaled gradient's
# CHECK: fp16 overflow: {{[1-9]}} steps skipped with a non-finite norm, parameters unchanged by them
# CHECK: data parallel x 2 ranks vs K=2: 8 losses bit-identical, state byte-identical
# CHECK: ZeRO-2 x 2 ranks: norms: 8 within the oracle
# CHECK-NEXT: ZeRO-2 x 2 ranks: trajectory: 8 losses and 26 tensors within the oracle
# CHECK: ZeRO-3 x 2 ranks: norms: 8 within the oracle
# CHECK-NEXT: ZeRO-3 x 2 ranks: trajectory: 8 losses and 26 tensors within the oracle
# CHECK: zero: memopt-compile: invalid --clip-grad-norm='0': expected a positive number
# CHECK: negative: memopt-compile: invalid --clip-grad-norm='-1': expected a positive number
# CHECK: not a number: memopt-compile: for the --clip-grad-norm option: 'one' value invalid for floating point argument!
# CHECK: strategy alone: memopt-compile: --clip-strategy applies to --clip-grad-norm=C
# CHECK: unknown strategy: memopt-compile: unknown --clip-strategy='later' (expected auto, keep or recompute)
# CHECK: recompute with K=2: memopt-compile: --clip-strategy=recompute keeps the memory of gradient release, which needs one micro-batch on one rank, no loss scaling and no --no-release-gradients (use keep)

import json
import math
import os
import re
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
import memopt_run  # noqa: E402

STEPS = 8
NORM = re.compile(r"^step \d+ loss \S+.* grad_norm (\S+)$", re.M)


def norms(stdout):
    return [float(v) for v in NORM.findall(stdout)]


class Clipped:
    """An optimizer factory for the oracle: AdamW whose step clips the
    gradients first, recording each run's norms."""

    def __init__(self, torch, max_norm):
        self.torch, self.max_norm, self.runs = torch, max_norm, []

    def __call__(self, parameters):
        parameters = list(parameters)
        opt = self.torch.optim.AdamW(parameters, **memopt_run.ADAMW)
        update, run = opt.step, []
        self.runs.append(run)

        def step(*args, **kwargs):
            run.append(float(self.torch.nn.utils.clip_grad_norm_(
                parameters, self.max_norm)))
            return update(*args, **kwargs)
        opt.step = step
        return opt

    def check(self, label, got):
        """`got` against the float64 run's norms (the oracle's first run),
        allowed what the oracle allows: twice the farthest of PyTorch's own
        runs at the precision under test, or a few roundings."""
        from memopt.testing import FACTOR, FLOOR_ULPS, UNIT_ROUNDOFF
        exact = np.array(self.runs[0])
        own = max(np.linalg.norm(np.array(r) - exact) for r in self.runs[1:])
        allowed = FACTOR * max(own, FLOOR_ULPS * UNIT_ROUNDOFF *
                               np.linalg.norm(exact))
        error = np.linalg.norm(np.array(got) - exact) if len(got) == len(
            exact) else math.inf
        if error <= allowed:
            print("%s: norms: %d within the oracle" % (label, len(got)))
        else:
            print("%s: MISMATCH norms %s, float64 %s, allowed %.3g" % (
                label, got, list(exact), allowed))


def parity(label, torch, model, batch, mlir, workdir, max_norm, flags,
           precision="f32", ranks=1):
    """Trains MLIR compiled with FLAGS and --clip-grad-norm; checks its
    norms and trajectory against the oracle; returns the printed output
    and the saved state's bytes."""
    import memopt
    from memopt.testing import Oracle
    clipped = Clipped(torch, max_norm)
    # The full batch's step: memopt's micro-batches and ranks compute its
    # gradient exactly (the GPT's labels pad unevenly, so PyTorch's
    # accumulation loop would not).
    oracle = Oracle(model, batch, STEPS, clipped, precision=precision)
    out = os.path.join(workdir, "out-" + label.replace(" ", "-"))
    memopt_run.compile_model(mlir, out, *memopt_run.ADAMW_FLAGS,
                             "--clip-grad-norm=%r" % max_norm, *flags)
    final = os.path.join(workdir, label.replace(" ", "-") + ".safetensors")
    stdout = run(out, workdir, ranks, final)
    clipped.check(label, norms(stdout))
    state = memopt.safetensors.load(final) if precision == "f32" else None
    verdict = oracle.check(memopt_run.losses(stdout), state)
    for failure in verdict.failures:
        print("%s: MISMATCH trajectory: %s" % (label, failure))
    if verdict.ok:
        print("%s: trajectory: %s" % (label, verdict.summary()))
    return stdout, open(final, "rb").read()


def run(out, workdir, ranks, save, steps=STEPS):
    command = [os.path.join(out, "train"),
               "--params", os.path.join(workdir, "model.safetensors"),
               "--batch", os.path.join(workdir, "batch.safetensors"),
               "--steps", str(steps), "--save", save]
    if ranks > 1:
        command = memopt_run.MPIRUN + ["-np", str(ranks)] + command
    return subprocess.run(command, check=True, capture_output=True,
                          text=True, env=memopt_run.MPI_ENV).stdout


def main():
    import torch
    import memopt
    workdir = sys.argv[1]
    src = os.path.join(os.path.dirname(__file__), "..", "..")
    sys.path.insert(0, os.path.join(src, "examples", "pytorch"))
    import models

    model, batch = models.build("gpt")
    mlir = os.path.join(workdir, "model.mlir")
    memopt.export(model, tuple(batch.values()), mlir)
    memopt.safetensors.save(batch, os.path.join(workdir, "batch.safetensors"))

    # The unclipped norms (a bound no norm reaches), and a bound between.
    out = os.path.join(workdir, "out-unclipped")
    memopt_run.compile_model(mlir, out, *memopt_run.ADAMW_FLAGS,
                             "--clip-grad-norm=1e30")
    free = norms(run(out, workdir, 1, os.path.join(workdir, "u.safetensors")))
    print("unclipped norms: %d printed" % len(free))
    max_norm = float(np.median(free))

    keep, keep_state = parity("keep", torch, model, batch, mlir, workdir,
                              max_norm, ["--clip-strategy=keep"])
    clipped = sum(n > max_norm for n in norms(keep))
    print("keep: clipped on %d of %d steps" % (clipped, STEPS))

    out = os.path.join(workdir, "out-recompute")
    memopt_run.compile_model(mlir, out, *memopt_run.ADAMW_FLAGS,
                             "--clip-grad-norm=%r" % max_norm,
                             "--clip-strategy=recompute")
    save = os.path.join(workdir, "recompute.safetensors")
    recompute = run(out, workdir, 1, save)
    same = (memopt_run.losses(recompute) == memopt_run.losses(keep) and
            norms(recompute) == norms(keep) and
            open(save, "rb").read() == keep_state)
    print("recompute: %s" % ("byte-identical to keep" if same else
                             "MISMATCH"))
    # One sample: the gradients outweigh the activations.
    single = os.path.join(workdir, "one-sample.mlir")
    memopt.export(model, tuple(v[:1] for v in batch.values()), single)
    arenas = {}
    for strategy in ("keep", "recompute", "auto"):
        printed = subprocess.run(
            ["memopt-compile", single, "--report-only", "--report=json",
             "--clip-grad-norm=1", "--clip-strategy=" + strategy],
            check=True, capture_output=True, text=True).stdout
        arenas[strategy] = json.loads(printed)["arena_bytes"]
    print("one sample: recompute plans %s keep (%d B against %d B), and "
          "auto %s" % (
              "less than" if arenas["recompute"] < arenas["keep"] else
              "NOT less than", arenas["recompute"], arenas["keep"],
              "takes it" if arenas["auto"] == arenas["recompute"] else
              "MISMATCH: plans %d B" % arenas["auto"]))

    parity("K=2", torch, model, batch, mlir, workdir, max_norm,
           ["--micro-batches=2"])
    parity("bf16", torch, model, batch, mlir, workdir, max_norm,
           ["--mixed-precision=bf16"], precision="bf16")

    # FP16: the norm of the unscaled gradients; an overflow still skips.
    out = os.path.join(workdir, "out-fp16")
    memopt_run.compile_model(mlir, out, *memopt_run.ADAMW_FLAGS,
                             "--clip-grad-norm=%r" % max_norm,
                             "--mixed-precision=fp16")
    first = norms(run(out, workdir, 1, os.path.join(workdir, "f.safetensors"),
                      steps=1))
    ratio = first[0] / free[0] if first else math.nan
    print("fp16: the first norm is %s (%.4g of FP32's)" % (
        "the unscaled gradient's" if abs(ratio - 1) < 0.05 else "WRONG",
        ratio))
    out = os.path.join(workdir, "out-fp16-overflow")
    memopt_run.compile_model(mlir, out, *memopt_run.ADAMW_FLAGS,
                             "--clip-grad-norm=%r" % max_norm,
                             "--mixed-precision=fp16",
                             "--loss-scale-init=1e30")
    skipped_save = os.path.join(workdir, "skipped.safetensors")
    stdout = run(out, workdir, 1, skipped_save, steps=3)
    lines = [l for l in stdout.splitlines() if l.startswith("step ")]
    skipped = [l for l in lines if " skipped" in l]
    nonfinite = all(not math.isfinite(float(l.split()[-1])) for l in skipped)
    before = memopt.safetensors.load(os.path.join(workdir,
                                                  "model.safetensors"))
    after = memopt.safetensors.load(skipped_save)
    unchanged = len(skipped) == len(lines) and all(
        before[n].tobytes() == after[n].tobytes() for n in before)
    print("fp16 overflow: %d steps skipped%s, parameters %s" % (
        len(skipped), " with a non-finite norm" if nonfinite else
        " MISMATCH: a finite norm", "unchanged by them" if unchanged or
        len(skipped) < len(lines) else "CHANGED"))

    runs = {}
    for name, ranks, flags in (("k2", 1, ["--micro-batches=2"]),
                               ("dp", 2, ["--data-parallel=2"])):
        out = os.path.join(workdir, "out-" + name)
        memopt_run.compile_model(mlir, out, *memopt_run.ADAMW_FLAGS,
                                 "--clip-grad-norm=%r" % max_norm, *flags)
        save = os.path.join(workdir, name + ".safetensors")
        stdout = run(out, workdir, ranks, save)
        runs[name] = (memopt_run.losses(stdout), open(save, "rb").read())
    print("data parallel x 2 ranks vs K=2: %d losses %s, state %s" % (
        len(runs["dp"][0]),
        "bit-identical" if runs["dp"][0] == runs["k2"][0] else
        "MISMATCH %s %s" % (runs["dp"][0], runs["k2"][0]),
        "byte-identical" if runs["dp"][1] == runs["k2"][1] else "MISMATCH"))
    parity("ZeRO-2 x 2 ranks", torch, model, batch, mlir, workdir, max_norm,
           ["--data-parallel=2", "--zero-stage=2"], ranks=2)
    parity("ZeRO-3 x 2 ranks", torch, model, batch, mlir, workdir, max_norm,
           ["--data-parallel=2", "--zero-stage=3"], ranks=2)

    for label, flags in (
            ("zero", ["--clip-grad-norm=0"]),
            ("negative", ["--clip-grad-norm=-1"]),
            ("not a number", ["--clip-grad-norm=one"]),
            ("strategy alone", ["--clip-strategy=keep"]),
            ("unknown strategy", ["--clip-grad-norm=1",
                                  "--clip-strategy=later"]),
            ("recompute with K=2", ["--clip-grad-norm=1",
                                    "--clip-strategy=recompute",
                                    "--micro-batches=2"])):
        bad = subprocess.run(["memopt-compile", mlir, "--report-only",
                              *flags], capture_output=True, text=True)
        print("%s: %s" % (label, (bad.stderr.strip().splitlines() or
                                  ["exit %d" % bad.returncode])[0]))


if __name__ == "__main__":
    main()
