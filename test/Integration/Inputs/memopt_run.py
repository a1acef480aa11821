"""Compiling a model with memopt-compile and training it with OUT/train, as
the integration tests do."""

import json
import os
import re
import subprocess

__all__ = ["compile_model", "train", "losses"]

LOSS = re.compile(r"^step \d+ loss (\S+)", re.M)


def compile_model(mlir, out, *flags):
    """memopt-compile MLIR -o OUT FLAGS; returns OUT/memory_report.json."""
    subprocess.run(["memopt-compile", mlir, "-o", out, "--report=json",
                    *flags], check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(out, "memory_report.json")) as f:
        return json.load(f)


def train(out, workdir, steps, save=None, params="model.safetensors"):
    """OUT/train on WORKDIR/PARAMS and WORKDIR/batch.safetensors for STEPS
    steps, saving to SAVE if given; returns what it printed."""
    command = [os.path.join(out, "train"),
               "--params", os.path.join(workdir, params),
               "--batch", os.path.join(workdir, "batch.safetensors"),
               "--steps", str(steps)]
    if save:
        command += ["--save", save]
    return subprocess.run(command, check=True, capture_output=True,
                          text=True).stdout


def losses(stdout):
    """The loss of every step OUT/train printed."""
    return [float(v) for v in LOSS.findall(stdout)]
