"""Compiling a model with memopt-compile and training it with OUT/train, as
the integration tests do, and comparing the result with PyTorch through the
parity oracle (memopt.testing, docs/Reliability.md)."""

import json
import os
import re
import subprocess

import numpy as np

__all__ = ["compile_model", "train", "losses", "ADAMW", "ADAMW_FLAGS",
           "adamw", "first_step_gradients", "sgd_step_gradients", "check_parity", "MPIRUN",
           "MPI_ENV", "zero_vs_k2", "load_test"]

LOSS = re.compile(r"^step \d+ loss (\S+)", re.M)

# The AdamW the parity tests train with, as torch.optim.AdamW's arguments
# and as memopt-compile's flags.
ADAMW = {"lr": 1e-3, "betas": (0.9, 0.999), "eps": 1e-8, "weight_decay": 0.01}
ADAMW_FLAGS = ["--optimizer=adamw", "--lr=1e-3", "--betas=0.9,0.999",
               "--eps=1e-8", "--weight-decay=0.01"]
# first_step_gradients reads g from one SGD step p - READ_LR * g: a large
# power of two makes the rounding of that difference about f32's rounding of
# g itself rather than of p.
READ_LR = 1024.0


# Data parallelism's launch: as root, more ranks than cores, in a container.
MPIRUN = ["mpirun", "--allow-run-as-root", "--oversubscribe",
          "--mca", "btl_vader_single_copy_mechanism", "none"]
# One BLAS thread (bit-identical sums). In the sanitized build, leak
# checking stays off in the programs that start MPI: OpenMPI's components
# leak at MPI_Finalize, after they are unloaded, where no suppression can
# name them. ASan's other checks stay on.
MPI_ENV = dict(os.environ, OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
if "ASAN_OPTIONS" in MPI_ENV:
    MPI_ENV["ASAN_OPTIONS"] += ":detect_leaks=0"

def adamw(parameters):
    import torch
    return torch.optim.AdamW(parameters, **ADAMW)


def compile_model(mlir, out, *flags):
    """memopt-compile MLIR -o OUT FLAGS; returns OUT/memory_report.json."""
    subprocess.run(["memopt-compile", mlir, "-o", out, "--report=json",
                    *flags], check=True, stdout=subprocess.DEVNULL)
    with open(os.path.join(out, "memory_report.json")) as f:
        return json.load(f)


def train(out, workdir, steps, save=None, params="model.safetensors",
          env=None):
    """OUT/train on WORKDIR/PARAMS and WORKDIR/batch.safetensors for STEPS
    steps, saving to SAVE if given, in the environment ENV (None: this
    process's); returns what it printed."""
    command = [os.path.join(out, "train"),
               "--params", os.path.join(workdir, params),
               "--batch", os.path.join(workdir, "batch.safetensors"),
               "--steps", str(steps)]
    if save:
        command += ["--save", save]
    return subprocess.run(command, check=True, capture_output=True,
                          text=True, env=env).stdout


def losses(stdout):
    """The loss of every step OUT/train printed."""
    return [float(v) for v in LOSS.findall(stdout)]


def first_step_gradients(mlir, workdir, out, *flags):
    """memopt's gradients of the first step, and what reading them back
    costs (name -> norm, for Oracle.check_gradients): compiles MLIR with
    FLAGS and SGD (lr READ_LR, no momentum or weight decay), trains one step
    from WORKDIR/model.safetensors, and reads g = (p0 - p1) / READ_LR."""
    compile_model(mlir, out, "--optimizer=sgd", f"--lr={READ_LR!r}",
                  "--momentum=0", "--weight-decay=0", *flags)
    return sgd_step_gradients(out, workdir)


def sgd_step_gradients(out, workdir, env=None):
    """first_step_gradients' reading of OUT, compiled by it, run again in
    the environment ENV (MEMOPT_HOST_ONEDNN=0: through the host's other
    convolution path)."""
    import memopt
    after = os.path.join(out, "after.safetensors")
    train(out, workdir, 1, save=after, env=env)
    before = memopt.safetensors.load(os.path.join(workdir,
                                                  "model.safetensors"))
    after = memopt.safetensors.load(after)
    gradients, rounding = {}, {}
    for name, p0 in before.items():
        if name not in after or name.startswith("optimizer."):
            continue
        p0 = p0.astype(np.float64)
        p1 = after[name].astype(np.float64)
        gradients[name] = (p0 - p1) / READ_LR
        # fl(p0 - fl(lr g)): one rounding of lr g and one of p1.
        rounding[name] = 2.0 ** -24 * (np.linalg.norm(p1) / READ_LR +
                                       np.linalg.norm(gradients[name]))
    return gradients, rounding


def check_parity(label, oracle, mlir, workdir, steps, *flags,
                 compare_state=True):
    """Trains MLIR compiled with FLAGS for STEPS AdamW steps and checks the
    losses and final state (only the losses without `compare_state`: the
    bf16 comparisons) against `oracle` (memopt.testing.Oracle), then its
    first-step gradients. Prints one line per check, the failures first;
    returns True when both pass."""
    import memopt
    out = os.path.join(workdir, "out")
    compile_model(mlir, out, *ADAMW_FLAGS, *flags)
    final = os.path.join(workdir, "final.safetensors")
    stdout = train(out, workdir, steps, save=final)
    state = memopt.safetensors.load(final) if compare_state else None
    trajectory = oracle.check(losses(stdout), state)
    gradients = oracle.check_gradients(*first_step_gradients(
        mlir, workdir, os.path.join(workdir, "out-sgd"), *flags))
    ok = True
    for what, verdict in (("trajectory", trajectory),
                          ("gradients", gradients)):
        for failure in verdict.failures:
            print(f"{label}: MISMATCH {what}: {failure}")
        if verdict.ok:
            print(f"{label}: {what}: {verdict.summary()}")
        ok = ok and verdict.ok
    return ok


def export_and_check(label, model, batch, workdir, steps, *flags,
                     precision="f32"):
    """Exports MODEL (a module returning its loss) called on BATCH to
    WORKDIR/model.mlir, saves the batch next to it and runs check_parity
    against a float64 oracle of STEPS AdamW steps; returns its verdict.
    With precision="bf16" the step is compiled with --mixed-precision=bf16
    and the oracle's own runs are torch.autocast's (losses and gradients)."""
    import memopt
    from memopt.testing import Oracle
    os.makedirs(workdir, exist_ok=True)
    oracle = Oracle(model, batch, steps, adamw, precision=precision)
    mlir = os.path.join(workdir, "model.mlir")
    memopt.export(model, tuple(batch.values()), mlir)
    memopt.safetensors.save(batch, os.path.join(workdir, "batch.safetensors"))
    if precision != "f32":
        flags += ("--mixed-precision=" + precision,)
    return check_parity(label, oracle, mlir, workdir, steps, *flags,
                        compare_state=precision == "f32")


def zero_vs_k2(mlir, workdir, steps, *flags, stage=2):
    """Trains MLIR compiled with FLAGS for STEPS AdamW steps twice: with 2
    micro-batches in one process, and under ZeRO stage STAGE over 2 MPI ranks
    (one BLAS thread each), saving WORKDIR/k2.safetensors and
    WORKDIR/zeroSTAGE.safetensors; returns the line that says whether the
    losses are bit-identical and the saved states byte-identical."""
    runs = {}
    zero = "zero%d" % stage
    for name, ranks, extra in (
            ("k2", 1, ["--micro-batches=2"]),
            (zero, 2, ["--data-parallel=2", "--zero-stage=%d" % stage])):
        out = os.path.join(workdir, "out-" + name)
        compile_model(mlir, out, *ADAMW_FLAGS, *flags, *extra)
        save = os.path.join(workdir, name + ".safetensors")
        command = [os.path.join(out, "train"),
                   "--params", os.path.join(workdir, "model.safetensors"),
                   "--batch", os.path.join(workdir, "batch.safetensors"),
                   "--steps", str(steps), "--save", save]
        if ranks > 1:
            command = MPIRUN + ["-np", str(ranks)] + command
        stdout = subprocess.run(command, check=True, capture_output=True,
                                text=True, env=MPI_ENV).stdout
        runs[name] = (losses(stdout), open(save, "rb").read())
    return "ZeRO-%d x 2 ranks vs K=2: %d losses %s, state %s" % (
        stage, len(runs[zero][0]),
        "bit-identical" if runs[zero][0] == runs["k2"][0] else
        "MISMATCH %s %s" % (runs[zero][0], runs["k2"][0]),
        "byte-identical" if runs[zero][1] == runs["k2"][1]
        else "MISMATCH")


def load_test(filename):
    """The integration test FILENAME (beside Inputs/, e.g. "frozen-lora.py")
    as a module, so that another test can train the models it builds."""
    import importlib.util
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                        filename)
    spec = importlib.util.spec_from_file_location(
        os.path.splitext(filename)[0].replace("-", "_"), path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
