# Learning-rate schedules (memopt-compile --lr-schedule, docs/Training.md):
# the lr is a runtime scalar that the driver sets before each step from the
# optimizer's step counter, so one compiled program serves any schedule.
# Each schedule trains the bundled GPT for 20 AdamW steps, with nanoGPT's
# two parameter groups (every group follows the same factor, as LambdaLR),
# and is checked against PyTorch with torch.optim.lr_scheduler.LambdaLR
# over the reference's own formula, written here from REFERENCE.md (Hugging
# Face's get_*_schedule_with_warmup, nanoGPT's get_lr): every lr the driver
# prints (9 digits) is the formula's, and the losses and parameters are
# within the parity oracle. Bad schedules are one error each.
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t | FileCheck %s
#
# CHECK: cosine: 20 lrs as the formula's, from 0 through 0.001 to {{.*}}
# CHECK-NEXT: cosine: trajectory: 20 losses and 26 tensors within the oracle
# CHECK: linear: 20 lrs as the formula's
# CHECK-NEXT: linear: trajectory: 20 losses and 26 tensors within the oracle
# CHECK: nanogpt: 20 lrs as the formula's
# CHECK-NEXT: nanogpt: trajectory: 20 losses and 26 tensors within the oracle
# CHECK: constant: 20 lrs as the formula's
# CHECK-NEXT: constant: trajectory: 20 losses and 26 tensors within the oracle
# CHECK: resumed: steps 11-20 print the lrs of an uninterrupted run
# CHECK: warmup past decay: memopt-compile: invalid learning-rate schedule: the warmup (30 steps) does not end before the decay does (20 steps)
# CHECK: no decay steps: memopt-compile: invalid learning-rate schedule: the schedule needs its decay steps (--decay-steps > 0)
# CHECK: min-lr above lr: memopt-compile: invalid --min-lr='0.01' (expected a number between 0 and --lr, 0.001)
# CHECK: unknown: memopt-compile: unknown --lr-schedule='step' (expected constant, linear, cosine or nanogpt)

import math
import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
import memopt_run  # noqa: E402

STEPS = 20
LR = 1e-3
SCHEDULES = {
    # name: (flags, factor(it) from the reference's formula)
    "cosine": (["--lr-schedule=cosine", "--warmup-steps=4",
                "--decay-steps=20", "--min-lr=1e-4"],
               lambda it: it / 4 if it < 4 else max(
                   0.0, 0.1 + 0.9 * 0.5 * (1 + math.cos(
                       math.pi * 2 * 0.5 * (it - 4) / (20 - 4))))),
    "linear": (["--lr-schedule=linear", "--warmup-steps=5",
                "--decay-steps=25"],
               lambda it: it / 5 if it < 5 else max(0.0, (25 - it) / 20)),
    "nanogpt": (["--lr-schedule=nanogpt", "--warmup-steps=3",
                 "--decay-steps=15", "--min-lr=6e-5"],
                lambda it: (LR * (it + 1) / 4 if it < 3 else 6e-5 if it > 15
                            else 6e-5 + 0.5 * (1 + math.cos(
                                math.pi * (it - 3) / 12)) * (LR - 6e-5)) / LR),
    "constant": (["--lr-schedule=constant", "--warmup-steps=6"],
                 lambda it: min(1.0, it / 6)),
}
LR_LINE = re.compile(r"^step \d+ loss \S+ lr (\S+)$", re.M)


def groups(parameters):
    """nanoGPT's groups: decay on the matrices, none on the vectors."""
    parameters = list(parameters)
    return [{"params": [p for p in parameters if p.dim() >= 2],
             "weight_decay": 0.1},
            {"params": [p for p in parameters if p.dim() < 2],
             "weight_decay": 0.0}]


def scheduled(torch, factor):
    """An optimizer factory for the oracle: AdamW over nanoGPT's groups,
    stepping a LambdaLR of `factor` after each update."""
    def make(parameters):
        opt = torch.optim.AdamW(groups(parameters), lr=LR)
        schedule = torch.optim.lr_scheduler.LambdaLR(opt, factor)
        update = opt.step

        def step(*args, **kwargs):
            result = update(*args, **kwargs)
            schedule.step()
            return result
        opt.step = step
        return opt
    return make


def main():
    import warnings
    import torch
    # LambdaLR warns that `step` was wrapped after it: on purpose (scheduled).
    warnings.filterwarnings("ignore", message=".*optimizer.step.*")
    import memopt
    from memopt.testing import Oracle
    workdir = sys.argv[1]
    src = os.path.join(os.path.dirname(__file__), "..", "..")
    sys.path.insert(0, os.path.join(src, "examples", "pytorch"))
    import models

    model, batch = models.build("gpt")
    mlir = os.path.join(workdir, "model.mlir")
    memopt.export(model, tuple(batch.values()), mlir,
                  optimizer=torch.optim.AdamW(groups(model.parameters()),
                                              lr=LR))
    memopt.safetensors.save(batch, os.path.join(workdir, "batch.safetensors"))

    for name, (flags, factor) in SCHEDULES.items():
        out = os.path.join(workdir, name)
        memopt_run.compile_model(mlir, out, "--lr=%r" % LR, *flags)
        final = os.path.join(workdir, name + ".safetensors")
        stdout = memopt_run.train(out, workdir, STEPS, save=final)
        lrs = [float(v) for v in LR_LINE.findall(stdout)]
        want = [LR * factor(it) for it in range(STEPS)]
        same = len(lrs) == STEPS and all(
            abs(a - b) <= 5e-9 * abs(b) or a == b
            for a, b in zip(lrs, want))
        print("%s: %d lrs %s, from %g through %g to %g" % (
            name, len(lrs), "as the formula's" if same else
            "MISMATCH %s %s" % (lrs, want), lrs[0], max(lrs), lrs[-1]))
        verdict = Oracle(model, batch, STEPS, scheduled(torch, factor)).check(
            memopt_run.losses(stdout), memopt.safetensors.load(final))
        for failure in verdict.failures:
            print("%s: MISMATCH trajectory: %s" % (name, failure))
        if verdict.ok:
            print("%s: trajectory: %s" % (name, verdict.summary()))

    # Resuming continues the schedule from the saved step counter.
    out = os.path.join(workdir, "cosine")
    half = os.path.join(workdir, "half.safetensors")
    memopt_run.train(out, workdir, 10, save=half)
    resumed = memopt_run.train(out, workdir, 10, params=os.path.relpath(
        half, workdir))
    whole = memopt_run.train(out, workdir, STEPS)
    print("resumed: steps 11-20 %s" % (
        "print the lrs of an uninterrupted run"
        if LR_LINE.findall(resumed) == LR_LINE.findall(whole)[10:]
        else "MISMATCH"))

    for label, flags in (
            ("warmup past decay", ["--lr-schedule=cosine",
                                   "--warmup-steps=30", "--decay-steps=20"]),
            ("no decay steps", ["--lr-schedule=linear"]),
            ("min-lr above lr", ["--lr-schedule=cosine", "--decay-steps=20",
                                 "--min-lr=0.01"]),
            ("unknown", ["--lr-schedule=step"])):
        bad = subprocess.run(["memopt-compile", mlir, "--report-only",
                              *flags], capture_output=True, text=True)
        print("%s: %s" % (label, (bad.stderr.strip().splitlines() or
                                  ["exit %d" % bad.returncode])[0]))


if __name__ == "__main__":
    main()
