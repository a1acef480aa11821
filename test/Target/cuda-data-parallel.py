# Data parallelism and ZeRO on NCCL (docs/DataParallel.md): the bundled GPT
# (dropout on) on 2 ranks that share this machine's GPU, each with its own
# NCCL_HOSTID (NCCL refuses two ranks of one host on one device otherwise),
# plain and with ZeRO stages 2 and 3, against the host runtime's 2 ranks on
# MPI:
#  - every loss within 1e-4 relative of the host's (cuBLASLt and OpenBLAS sum
#    in different orders; cuda-parity.py's tolerance);
#  - ZeRO-2's losses and checkpoint equal plain data parallelism's on the
#    GPU bit for bit (2 ranks: each element's sum over the ranks is the same
#    one addition, whether NCCL all-reduces or reduce-scatters it), and so
#    do ZeRO-3's, whose gathers copy bits;
#  - every rank ends with one state hash.
#
# REQUIRES: cuda-gpu, mpi
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t %memopt_src_root | FileCheck %s
#
# CHECK: cuda N=2: 4 losses within 0.0001 of the host's, 1 state hash
# CHECK: cuda N=2 ZeRO-2: 4 losses within 0.0001 of the host's, 1 state hash, checkpoint byte-identical to plain data parallelism
# CHECK: cuda N=2 ZeRO-3: 4 losses within 0.0001 of the host's, 1 state hash, checkpoint byte-identical to plain data parallelism

import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..",
                                "Integration", "Inputs"))
from memopt_run import MPIRUN  # noqa: E402

STEPS = 4
TOLERANCE = 1e-4
# Each rank its own NCCL host id, from its MPI rank.
PER_RANK = ["sh", "-c",
            'NCCL_HOSTID=memopt-rank-$OMPI_COMM_WORLD_RANK exec "$@"', "sh"]


def train(model, workdir, name, flags):
    out = os.path.join(workdir, name)
    subprocess.run(["memopt-compile", model, "-o", out, "--data-parallel=2",
        *flags], check=True, stdout=subprocess.DEVNULL)
    save = out + ".safetensors"
    run = subprocess.run(
        MPIRUN + ["-np", "2"] + PER_RANK +
        [os.path.join(out, "train"),
         "--params", os.path.join(workdir, "model.safetensors"),
         "--batch", os.path.join(workdir, "batch.safetensors"),
         "--steps", str(STEPS), "--save", save, "--stats"],
        capture_output=True, text=True, timeout=300)
    if run.returncode:
        sys.exit("%s: train failed: %s" % (name, run.stderr))
    losses = [float(v) for v in re.findall(r"^step \d+ loss (\S+)$",
                                           run.stdout, re.M)]
    hashes = set(re.findall(r"state_hash=(\w+)", run.stdout))
    return losses, hashes, save


def main():
    workdir, src = sys.argv[1], sys.argv[2]
    model = os.path.join(src, "examples", "gpt.mlir")
    single = os.path.join(workdir, "single")
    subprocess.run(["memopt-compile", model, "-o", single], check=True,
                   stdout=subprocess.DEVNULL)
    subprocess.run([sys.executable, os.path.join(
        os.path.dirname(__file__), "Inputs", "cuda_inputs.py"),
        os.path.join(single, "model.json"),
        os.path.join(workdir, "model.safetensors"),
        os.path.join(workdir, "batch.safetensors"), "--int-high", "16"],
        check=True)
    host = train(model, workdir, "host", [])
    cuda = train(model, workdir, "cuda", ["--target=cuda"])
    zero = train(model, workdir, "cuda-zero2",
                 ["--target=cuda", "--zero-stage=2"])

    def line(label, run, extra=""):
        losses, hashes, _ = run
        close = len(losses) == len(host[0]) and all(
            abs(a - b) <= TOLERANCE * abs(b) for a, b in zip(losses, host[0]))
        print("%s: %d losses %s of the host's, %s%s" % (
            label, len(losses),
            "within %g" % TOLERANCE if close else
            "MISMATCH %s %s" % (losses, host[0]),
            "1 state hash" if len(hashes) == 1 else "MISMATCH hashes",
            extra))

    line("cuda N=2", cuda)
    same = zero[0] == cuda[0] and \
        open(zero[2], "rb").read() == open(cuda[2], "rb").read()
    line("cuda N=2 ZeRO-2", zero, ", checkpoint %s" % (
        "byte-identical to plain data parallelism" if same else "MISMATCH"))
    zero3 = train(model, workdir, "cuda-zero3",
                  ["--target=cuda", "--zero-stage=3"])
    same = zero3[0] == cuda[0] and \
        open(zero3[2], "rb").read() == open(cuda[2], "rb").read()
    line("cuda N=2 ZeRO-3", zero3, ", checkpoint %s" % (
        "byte-identical to plain data parallelism" if same else "MISMATCH"))


if __name__ == "__main__":
    sys.exit(main())
