# The evaluation step (docs/Training.md): every compiled program also holds
# `eval_step`, what `model.eval(); with torch.no_grad(): model(x, y)`
# computes, in an arena of its own over the training step's parameters.
# OUT/train --eval-every / --eval prints its loss.
#
# On the bundled CNN (batch norm: the running statistics, not the batch's)
# and on the GPT with dropout 0.1 (dropout off), before training and after
# 3 AdamW steps, the evaluation loss is PyTorch's float64 eval-mode loss of
# the same parameters (read back from memopt's checkpoint) within the
# oracle's allowance: 4x the farthest of PyTorch's own FP32 evaluations with
# the parameters and inputs rounded anew, or a few roundings. Evaluating
# changes nothing: the checkpoint after a step and an evaluation is the one
# after the step alone (the running statistics too). Under BF16 the loss is
# within the oracle of autocast's; with 2 micro-batches, and over 2 ranks
# with ZeRO-2 (whose shards the driver gathers), the losses are those of one
# process. The report plans the evaluation below the training step.
#
# REQUIRES: torch, mpi
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t | FileCheck %s
#
# CHECK: cnn: evaluation arena {{[0-9]+}} B below the training step's {{[0-9]+}} B
# CHECK-NEXT: cnn: eval losses after 0 and 3 steps within the oracle
# CHECK-NEXT: cnn: evaluating changes nothing (checkpoint byte-identical)
# CHECK: gpt-dropout: evaluation arena {{[0-9]+}} B below the training step's {{[0-9]+}} B
# CHECK-NEXT: gpt-dropout: eval losses after 0 and 3 steps within the oracle
# CHECK-NEXT: gpt-dropout: evaluating changes nothing (checkpoint byte-identical)
# CHECK: gpt-dropout bf16: eval losses after 0 and 3 steps within the oracle
# CHECK: gpt-dropout K=2 vs K=1: eval before training bit-identical
# CHECK: gpt-dropout ZeRO-2 x 2 ranks vs K=2: 4 eval losses bit-identical
# CHECK: no eval: train: --eval-data applies to --eval or --eval-every (see --help)
# CHECK: zero: train: --eval-every must be an integer >= 1, got '0' (see --help)
# CHECK: wrong shape: train: tensor 'idx' in '{{.*}}' is I64 [2, 16], the step reads I64 [4, 16]

import os
import re
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
import memopt_run  # noqa: E402

STEPS = 3
EVAL = re.compile(r"^eval step (\d+) loss (\S+)$", re.M)


def eval_losses(stdout):
    return [float(v) for _, v in EVAL.findall(stdout)]


def train(out, workdir, steps, *flags, save=None, ranks=1):
    command = [os.path.join(out, "train"),
               "--params", os.path.join(workdir, "model.safetensors"),
               "--batch", os.path.join(workdir, "batch.safetensors"),
               "--steps", str(steps), *flags]
    if save:
        command += ["--save", save]
    if ranks > 1:
        command = memopt_run.MPIRUN + ["-np", str(ranks)] + command
    return subprocess.run(command, check=True, capture_output=True,
                          text=True, env=memopt_run.MPI_ENV).stdout


def pytorch_eval(torch, model, state, batch, hook=None, dtype=None,
                 precision=None):
    """PyTorch's eval-mode loss of `model` with `state` loaded."""
    import copy
    from memopt.testing import autocast
    model = copy.deepcopy(model)
    model.load_state_dict({k: torch.from_numpy(np.array(v))
                           for k, v in state.items()}, strict=False)
    if dtype is not None:
        model = model.to(dtype)
    if hook:
        hook(model)
    model.eval()
    batch = {k: v.to(dtype) if dtype is not None and v.is_floating_point()
             else v for k, v in batch.items()}
    with torch.no_grad(), autocast(precision):
        return float(model(**batch))


def check(label, torch, model, batch, states, got, precision=None):
    """`got` (one eval loss per state) against PyTorch float64, allowed 4x
    the farthest of 8 of PyTorch's own runs at the precision under test
    (the parameters rounded anew, as the parity oracle does)."""
    from memopt.testing import FACTOR, FLOOR_ULPS, UNIT_ROUNDOFF, \
        _rounding_anew
    failures = []
    for state, value in zip(states, got):
        exact = pytorch_eval(torch, model, state, batch,
                             dtype=torch.float64)
        own = max(abs(pytorch_eval(torch, model, state, batch,
                                   hook=_rounding_anew(order),
                                   precision=precision) - exact)
                  for order in range(8))
        allowed = FACTOR * max(own, FLOOR_ULPS * UNIT_ROUNDOFF * abs(exact))
        if not abs(value - exact) <= allowed:
            failures.append("%r from float64 %r, allowed %.3g" % (
                value, exact, allowed))
    if len(got) != len(states):
        failures.append("%d losses for %d states" % (len(got), len(states)))
    print("%s: %s" % (label, "eval losses after 0 and 3 steps within the "
                      "oracle" if not failures else "MISMATCH " +
                      "; ".join(failures)))


def run_model(label, torch, memopt, model, batch, workdir, extra=()):
    os.makedirs(workdir, exist_ok=True)
    mlir = os.path.join(workdir, "model.mlir")
    memopt.export(model, tuple(batch.values()), mlir)
    memopt.safetensors.save(batch, os.path.join(workdir, "batch.safetensors"))
    out = os.path.join(workdir, "out")
    report = memopt_run.compile_model(mlir, out, *memopt_run.ADAMW_FLAGS,
                                      *extra)
    evaluation, training = (report["eval_step"]["arena_bytes"],
                            report["arena_bytes"])
    print("%s: evaluation arena %d B %s the training step's %d B" % (
        label, evaluation, "below" if evaluation < training else
        "NOT below", training))
    final = os.path.join(workdir, "final.safetensors")
    stdout = train(out, workdir, STEPS, "--eval-every", str(STEPS),
                   save=final)
    initial = memopt.safetensors.load(os.path.join(workdir,
                                                   "model.safetensors"))
    check(label, torch, model, batch,
          [initial, memopt.safetensors.load(final)], eval_losses(stdout))
    plain = os.path.join(workdir, "plain.safetensors")
    evaluated = os.path.join(workdir, "evaluated.safetensors")
    train(out, workdir, 1, save=plain)
    train(out, workdir, 1, "--eval", save=evaluated)
    print("%s: evaluating %s" % (label, "changes nothing (checkpoint "
                                 "byte-identical)" if open(plain, "rb").read()
                                 == open(evaluated, "rb").read() else
                                 "CHANGED the checkpoint"))
    return mlir


def main():
    import torch
    import memopt
    workdir = sys.argv[1]
    src = os.path.join(os.path.dirname(__file__), "..", "..")
    sys.path.insert(0, os.path.join(src, "examples", "pytorch"))
    import models

    model, batch = models.build("cnn")
    run_model("cnn", torch, memopt, model, batch,
              os.path.join(workdir, "cnn"))

    torch.manual_seed(0)
    model = models.GPT(dropout=0.1)
    _, batch = models.build("gpt")
    gpt = os.path.join(workdir, "gpt")
    mlir = run_model("gpt-dropout", torch, memopt, model, batch, gpt)

    out = os.path.join(gpt, "out-bf16")
    memopt_run.compile_model(mlir, out, *memopt_run.ADAMW_FLAGS,
                             "--mixed-precision=bf16")
    final = os.path.join(gpt, "bf16.safetensors")
    stdout = train(out, gpt, STEPS, "--eval-every", str(STEPS), save=final)
    check("gpt-dropout bf16", torch, model, batch,
          [memopt.safetensors.load(os.path.join(gpt, "model.safetensors")),
           memopt.safetensors.load(final)], eval_losses(stdout),
          precision="bf16")

    runs = {}
    for name, ranks, flags in (
            ("k1", 1, []), ("k2", 1, ["--micro-batches=2"]),
            ("zero2", 2, ["--data-parallel=2", "--zero-stage=2"])):
        out = os.path.join(gpt, "out-" + name)
        memopt_run.compile_model(mlir, out, *memopt_run.ADAMW_FLAGS, *flags)
        runs[name] = eval_losses(train(out, gpt, STEPS, "--eval-every", "1",
                                       ranks=ranks))
    print("gpt-dropout K=2 vs K=1: eval before training %s" % (
        "bit-identical" if runs["k2"][0] == runs["k1"][0] else "MISMATCH"))
    print("gpt-dropout ZeRO-2 x 2 ranks vs K=2: %d eval losses %s" % (
        len(runs["zero2"]), "bit-identical" if runs["zero2"] == runs["k2"]
        else "MISMATCH %s %s" % (runs["zero2"], runs["k2"])))

    out = os.path.join(gpt, "out")
    small = os.path.join(gpt, "small.safetensors")
    memopt.safetensors.save({k: v[:2] for k, v in batch.items()}, small)
    for label, flags in (("no eval", ["--eval-data", small]),
                         ("zero", ["--eval-every", "0"]),
                         ("wrong shape", ["--eval", "--eval-data", small])):
        bad = subprocess.run(
            [os.path.join(out, "train"), "--params",
             os.path.join(gpt, "model.safetensors"), "--batch",
             os.path.join(gpt, "batch.safetensors"), "--steps", "1", *flags],
            capture_output=True, text=True)
        print("%s: %s" % (label, (bad.stderr.strip().splitlines() or
                                  ["exit %d" % bad.returncode])[0]))


if __name__ == "__main__":
    main()
