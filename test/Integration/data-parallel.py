# Data parallelism on MPI (docs/DataParallel.md), on the bundled GPT, whose
# attentions drop probabilities (p 0.1), with a batch whose ignored labels
# are uneven (rank 0's half holds 2 of them, rank 1's 27), one BLAS thread:
#
# - 2 ranks of one micro-batch each train bit for bit as one process with 2
#   micro-batches: the same 4 losses and the same parameters and optimizer
#   state, byte for byte; both ranks end with the same state hash. So the
#   label count is the full batch's, the dropout masks are the full batch's
#   and the all-reduce sums what accumulation sums.
# - 2 ranks x 2 micro-batches against one process with 4, and 4 ranks
#   (oversubscribed) of one against one process with 4: the sums run in
#   another order, so the losses and parameters agree to 1e-5 relative
#   (f32 rounding; a wrong mask or count moves the loss by 1e-2).
# - A program compiled for 2 ranks run as one process, and a rank that dies
#   before joining: one error each, a non-zero exit, no hang (30 s bound).
# - A batch that ranks x micro-batches do not divide is a compile error.
#
# REQUIRES: mpi
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t %memopt_src_root | FileCheck %s
#
# CHECK: N=2 K=1 vs K=2: 4 losses bit-identical, state byte-identical, 2 ranks with one state hash
# CHECK: N=2 K=2 vs K=4: 4 losses and the state within 1e-05
# CHECK: N=4 K=1 vs K=4: 4 losses and the state within 1e-05
# CHECK: world size 1 for 2: exit 1: train: rank 0: launched with 1 rank(s), but the model was compiled for 2
# CHECK: dead rank: non-zero exit within 30 s
# CHECK: compile: {{.*}}which micro-batches=1 x data-parallel=3 does not divide

import os
import re
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
import memopt_run  # noqa: E402

STEPS = 4
TOLERANCE = 1e-5
MPIRUN = memopt_run.MPIRUN
ENV = memopt_run.MPI_ENV


def train(out, workdir, ranks, save):
    command = [os.path.join(out, "train"),
               "--params", os.path.join(workdir, "model.safetensors"),
               "--batch", os.path.join(workdir, "batch.safetensors"),
               "--steps", str(STEPS), "--save", save, "--stats"]
    if ranks > 1:
        command = MPIRUN + ["-np", str(ranks)] + command
    result = subprocess.run(command, capture_output=True, text=True, env=ENV,
                            timeout=300)
    if result.returncode:
        sys.exit("train failed: %s\n%s" % (" ".join(command), result.stderr))
    return result.stdout


def compile_model(model, out, *flags):
    memopt_run.compile_model(model, out, *flags)
    return out


def relative(a, b):
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-30))


def main():
    import memopt
    workdir, src = sys.argv[1], sys.argv[2]
    model = os.path.join(src, "examples", "gpt.mlir")
    one = compile_model(model, os.path.join(workdir, "k1"))
    subprocess.run([sys.executable, os.path.join(
        src, "test", "Target", "Inputs", "cuda_inputs.py"),
        os.path.join(one, "model.json"),
        os.path.join(workdir, "model.safetensors"),
        os.path.join(workdir, "batch.safetensors"),
        "--int-high", "128"], check=True)
    batch = memopt.safetensors.load(os.path.join(workdir, "batch.safetensors"))
    targets = batch["targets"].copy()
    targets[0, :2] = -100          # rank 0's half: 2 ignored labels
    targets[2, 5:] = -100          # rank 1's half: 27
    targets[3, :] = -100
    batch["targets"] = targets
    memopt.safetensors.save(batch, os.path.join(workdir, "batch.safetensors"))

    runs = {}
    for name, ranks, flags in (("N1K2", 1, ["--micro-batches=2"]),
                               ("N2K1", 2, ["--data-parallel=2"]),
                               ("N1K4", 1, ["--micro-batches=4"]),
                               ("N2K2", 2, ["--data-parallel=2",
                                            "--micro-batches=2"]),
                               ("N4K1", 4, ["--data-parallel=4"])):
        out = compile_model(model, os.path.join(workdir, name), *flags)
        save = os.path.join(workdir, name + ".safetensors")
        stdout = train(out, workdir, ranks, save)
        hashes = set(re.findall(r"state_hash=(\w+)", stdout))
        runs[name] = (memopt_run.losses(stdout), save, hashes,
                      len(re.findall(r"^stats ", stdout, re.M)))

    def state(name):
        return memopt.safetensors.load(runs[name][1])

    losses, _, hashes, lines = runs["N2K1"]
    same_bytes = open(runs["N2K1"][1], "rb").read() == \
        open(runs["N1K2"][1], "rb").read()
    print("N=2 K=1 vs K=2: %d losses %s, state %s, %d ranks with %s" % (
        len(losses),
        "bit-identical" if losses == runs["N1K2"][0] else
        "MISMATCH %s %s" % (losses, runs["N1K2"][0]),
        "byte-identical" if same_bytes else "MISMATCH",
        lines, "one state hash" if len(hashes) == 1 else "MISMATCH hashes"))
    for name, reference in (("N2K2", "N1K4"), ("N4K1", "N1K4")):
        got, want = state(name), state(reference)
        error = max([relative(runs[name][0], runs[reference][0])] +
                    [relative(got[k], want[k]) for k in want
                     if k != "optimizer.step"])
        print("%s vs %s: %d losses and the state %s" % (
            "N=%s K=%s" % (name[1], name[3]),
            "K=%s" % reference[3], len(runs[name][0]),
            "within %g" % TOLERANCE if error <= TOLERANCE and
            len(runs[name][2]) == 1 else "MISMATCH %.3g" % error))

    # A program for 2 ranks started alone.
    alone = subprocess.run(
        [os.path.join(workdir, "N2K1", "train"),
         "--params", os.path.join(workdir, "model.safetensors"),
         "--batch", os.path.join(workdir, "batch.safetensors"),
         "--steps", "1"], capture_output=True, text=True, env=ENV,
        timeout=60)
    print("world size 1 for 2: exit %d: %s" % (
        alone.returncode, alone.stderr.strip().splitlines()[0]))
    # Rank 1 dies before it joins; rank 0 must not wait for it forever.
    start = time.monotonic()
    dead = subprocess.run(
        MPIRUN + ["-np", "2", "sh", "-c",
                  '[ "$OMPI_COMM_WORLD_RANK" = 1 ] && exit 3; exec "$@"',
                  "sh", os.path.join(workdir, "N2K1", "train"),
                  "--params", os.path.join(workdir, "model.safetensors"),
                  "--batch", os.path.join(workdir, "batch.safetensors"),
                  "--steps", "100"], capture_output=True, text=True,
        env=ENV, timeout=120)
    elapsed = time.monotonic() - start
    print("dead rank: %s" % ("non-zero exit within 30 s"
                             if dead.returncode and elapsed < 30 else
                             "MISMATCH exit %d after %.0f s" %
                             (dead.returncode, elapsed)))
    bad = subprocess.run(["memopt-compile", model, "-o",
                          os.path.join(workdir, "bad"), "--data-parallel=3"],
                         capture_output=True, text=True)
    print("compile: exit %d: %s" % (bad.returncode,
                                    " ".join(bad.stderr.split())))


if __name__ == "__main__":
    sys.exit(main())
