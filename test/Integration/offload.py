# Optimizer offload (docs/Offload.md) on the host runtime, one BLAS thread:
# the f32 master weights and the optimizer state live in the host arena,
# every update runs through the host entries, the gradients and the weights
# cross by copies that overlap the compute (memopt_transfer_start and
# memopt_transfer_wait; docs/Offload.md), and the step trains bit for bit as
# the step
# without offload: the losses, the evaluation losses (which read the host's
# masters through a copy) and the saved checkpoint, in
#
# - FP32 AdamW (the device keeps an f32 copy of each weight);
# - BF16 (the copy is the bf16 cast, made on the host);
# - FP16 with dynamic loss scaling (the skip flag crosses to the host);
# - K = 2 micro-batches, SGD with momentum and --clip-grad-norm=1: the
#   gradients accumulate on the host, where clipping reads them;
# - 8-bit AdamW state;
# - --offload=params, the weights the device computes with on the host too
#   and copied to the device before each use: FP32, BF16, and K = 2 with
#   SGD and clipping;
# - a resumed run, from the checkpoint the step without offload saved;
# - ZeRO stages 1 to 3 on 2 MPI ranks in BF16, each rank offloading its
#   shard, against ZeRO without offload; stages 2 and 3 accumulate each
#   scattered gradient shard on the host, stage 1 sums whole gradients on
#   the device (its all-reduce reads them there); stages 2 and 3 with
#   --offload=params (stage 2's gathered copy goes to the host, stage 3
#   copies each shard up before each gather).
# - --offload=activations, the values saved for the backward in the host
#   arena between their last forward and first backward use: FP32, BF16
#   with selective remat, FP16 with each copy complete where it is issued
#   (--overlap-transfers=false, memopt_transfer: there the device saves
#   none of them), K = 2 with dropout, with the optimizer offloaded too, and
#   with ZeRO-2 on 2 ranks.
#
# The account: the device's arena keeps no master weight and no optimizer
# state, the host holds them, and the bytes each step copies are the
# gradients down and the weights up; with params, no weight stays on the
# device and each crosses at least twice; with activations, the device
# saves fewer bytes for the backward, the host arena holds them, and each
# crosses once each way.
#
# REQUIRES: mpi
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t %memopt_src_root | FileCheck %s
#
# CHECK: fp32: 4 losses bit-identical, 3 eval losses bit-identical, checkpoint byte-identical, [[N:[0-9]+]] of [[N]] updates on the host, 0 sums on the host
# CHECK: fp32: device 0 B master_params + 8 B optimizer, host {{[0-9]+}} B master_params + {{[0-9]+}} B optimizer, copies = gradients down and weights up
# CHECK: bf16: 4 losses bit-identical, 3 eval losses bit-identical, checkpoint byte-identical, [[N:[0-9]+]] of [[N]] updates on the host, 0 sums on the host
# CHECK: bf16: device 0 B master_params + 8 B optimizer, host {{[0-9]+}} B master_params + {{[0-9]+}} B optimizer, copies = gradients down and weights up
# CHECK: fp16: 4 losses bit-identical, 3 eval losses bit-identical, checkpoint byte-identical, [[N:[0-9]+]] of [[N]] updates on the host, 0 sums on the host
# CHECK: k2-sgd-clip: 4 losses bit-identical, 3 eval losses bit-identical, checkpoint byte-identical, [[N:[0-9]+]] of [[N]] updates on the host, [[N]] sums on the host
# CHECK: adamw8bit: 4 losses bit-identical, 3 eval losses bit-identical, checkpoint byte-identical, [[N:[0-9]+]] of [[N]] updates on the host, 0 sums on the host
# CHECK: params-fp32: 4 losses bit-identical, 3 eval losses bit-identical, checkpoint byte-identical, [[N:[0-9]+]] of [[N]] updates on the host, 0 sums on the host
# CHECK: params-bf16: 4 losses bit-identical, 3 eval losses bit-identical, checkpoint byte-identical, [[N:[0-9]+]] of [[N]] updates on the host, 0 sums on the host
# CHECK: params-bf16: host {{[1-9][0-9]*}} B params, {{[0-9]+}} B copied up per step, weights on the host, each copied up per use
# CHECK: params-k2-sgd-clip: 4 losses bit-identical, 3 eval losses bit-identical, checkpoint byte-identical, [[N:[0-9]+]] of [[N]] updates on the host, [[N]] sums on the host
# CHECK: act-fp32: 4 losses bit-identical, 3 eval losses bit-identical, checkpoint byte-identical, [[S:[1-9][0-9]*]] saved values copied down and [[S]] back
# CHECK: act-fp32: device saves {{[0-9]+}} of {{[0-9]+}} B, host arena {{[0-9]+}} B, copies = the saved activations down and back
# CHECK: act-bf16-selective: 4 losses bit-identical, 3 eval losses bit-identical, checkpoint byte-identical, [[S:[1-9][0-9]*]] saved values copied down and [[S]] back
# CHECK: act-bf16-selective: device saves {{[0-9]+}} of {{[0-9]+}} B, host arena {{[0-9]+}} B, copies = the saved activations down and back
# CHECK: act-fp16-sync: 4 losses bit-identical, 3 eval losses bit-identical, checkpoint byte-identical, [[S:[1-9][0-9]*]] saved values copied down and [[S]] back
# CHECK: act-fp16-sync: device saves 0 of {{[0-9]+}} B, host arena {{[0-9]+}} B, copies = the saved activations down and back
# CHECK: act-k2-dropout: 4 losses bit-identical, 3 eval losses bit-identical, checkpoint byte-identical, [[S:[1-9][0-9]*]] saved values copied down and [[S]] back
# CHECK: act-optimizer-bf16: 4 losses bit-identical, 3 eval losses bit-identical, checkpoint byte-identical, [[N:[0-9]+]] of [[N]] updates on the host, 0 sums on the host
# CHECK: resumed: 2 losses bit-identical, checkpoint byte-identical
# CHECK: zero-1: 4 losses bit-identical, checkpoint byte-identical, [[N:[0-9]+]] of [[N]] updates on the host, 0 sums on the host
# CHECK: zero-2: 4 losses bit-identical, checkpoint byte-identical, [[N:[0-9]+]] of [[N]] updates on the host, [[N]] sums on the host
# CHECK: zero-3: 4 losses bit-identical, checkpoint byte-identical, [[N:[0-9]+]] of [[N]] updates on the host, [[N]] sums on the host
# CHECK: zero-2-params: 4 losses bit-identical, checkpoint byte-identical, [[N:[0-9]+]] of [[N]] updates on the host, [[N]] sums on the host
# CHECK: zero-3-params: 4 losses bit-identical, checkpoint byte-identical, [[N:[0-9]+]] of [[N]] updates on the host, [[N]] sums on the host
# CHECK: zero-2-act: 4 losses bit-identical, checkpoint byte-identical, [[S:[1-9][0-9]*]] saved values copied down and [[S]] back

import os
import re
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
import memopt_run  # noqa: E402

STEPS = 4
EVAL = re.compile(r"^eval step \d+ loss (\S+)", re.M)
ENV = memopt_run.MPI_ENV
SGD = ["--optimizer=sgd", "--lr=0.1", "--momentum=0.9", "--weight-decay=0"]


def make_inputs(model, workdir):
    out = os.path.join(workdir, "inputs")
    memopt_run.compile_model(model, out)
    subprocess.run([sys.executable, os.path.join(
        os.path.dirname(__file__), "..", "Target", "Inputs",
        "cuda_inputs.py"), os.path.join(out, "model.json"),
        os.path.join(workdir, "model.safetensors"),
        os.path.join(workdir, "batch.safetensors"), "--int-high", "10"],
        check=True)


def train(out, workdir, params, save, steps=STEPS, ranks=1):
    command = [os.path.join(out, "train"), "--params", params,
               "--batch", os.path.join(workdir, "batch.safetensors"),
               "--steps", str(steps), "--save", save]
    if ranks > 1:
        command = memopt_run.MPIRUN + ["-np", str(ranks)] + command
    else:
        command += ["--eval-every", "2", "--eval-batches", "1"]
    result = subprocess.run(command, capture_output=True, text=True, env=ENV,
                            timeout=300)
    if result.returncode:
        sys.exit("train failed: %s\n%s" % (" ".join(command), result.stderr))
    return (memopt_run.losses(result.stdout),
            [float(v) for v in EVAL.findall(result.stdout)], save)


UPDATE = re.compile(r"memopt_(host_)?(adamw8bit|adamw|sgd)_update\(")
SUM = re.compile(r"memopt_host_binary\(")
# A copy, synchronous or the start of an overlapped one, and the end of one.
TRANSFER = re.compile(r"memopt_transfer(?:_start)?\(\w+, MEMOPT_TO_(HOST|DEVICE)")
STARTS = re.compile(r"memopt_transfer_start\(")
WAITS = re.compile(r"memopt_transfer_wait\(")


def updates_on_host(plain, offload):
    """", N of N updates on the host, S sums on the host": the offloaded
    step calls the host entry wherever the plain step calls the device's,
    and adds S micro-batch gradients onto sums in host memory."""
    def calls(out):
        with open(os.path.join(out, "train_step.cpp")) as f:
            text = f.read()
        found = UPDATE.findall(text)
        return (sum(1 for host, _ in found if not host),
                sum(1 for host, _ in found if host), len(SUM.findall(text)))
    device, _, _ = calls(plain)
    left, host, sums = calls(offload)
    return ", %d of %d updates on the host, %d sums on the host" % (
        host, device, sums) + (
        "" if left == 0 and host == device else " MISMATCH")


def activations_moved(plain, offload):
    """", S saved values copied down and S back": the step with activation
    offload copies S values to the host and S back, the plain step none, and
    each overlapped copy has its wait."""
    def transfers(out):
        with open(os.path.join(out, "train_step.cpp")) as f:
            text = f.read()
        found = TRANSFER.findall(text)
        return (found.count("HOST"), found.count("DEVICE"),
                len(STARTS.findall(text)) - len(WAITS.findall(text)))
    down, up, unwaited = transfers(offload)
    return ", %d saved values copied down and %d back%s" % (
        down, up,
        "" if transfers(plain) == (0, 0, 0) and unwaited == 0 else
        " MISMATCH")


def check_activations_account(label, plain, offload):
    """--offload=activations: the device saves fewer bytes for the backward,
    the host arena holds the saved ones and no argument is on the host, and
    each step copies the same bytes down and back (each saved value once
    each way)."""
    def saved(report):
        return sum(report["by_scope"].values())
    host = offload["host"]
    ok = (saved(offload) < saved(plain) and
          0 < host["saved_activation_bytes"] <= host["arena_bytes"] and
          not any(host["pools"].values()) and
          host["to_host_bytes"] == host["to_device_bytes"] > 0)
    print("%s: device saves %d of %d B, host arena %d B, %s" % (
        label, saved(offload), saved(plain), host["arena_bytes"],
        "copies = the saved activations down and back" if ok else
        "MISMATCH %s" % host))


def compare(label, got, want, suffix=""):
    same = open(got[2], "rb").read() == open(want[2], "rb").read()
    line = "%d losses %s" % (len(got[0]), "bit-identical"
                             if got[0] == want[0] and got[0] else
                             "MISMATCH %s %s" % (got[0], want[0]))
    if want[1]:
        line += ", %d eval losses %s" % (
            len(got[1]), "bit-identical" if got[1] == want[1] else
            "MISMATCH %s %s" % (got[1], want[1]))
    print("%s: %s, checkpoint %s%s" % (
        label, line, "byte-identical" if same else "MISMATCH", suffix))


def check_account(label, plain, offload):
    """The offloaded report keeps the f32 masters and the optimizer state on
    the host, and copies each gradient down and each weight up once."""
    pools, host = offload["pools"], offload["host"]
    before, after = plain["model_state"], offload["model_state"]
    counter = 8  # optimizer.step stays on the device; the host reads a copy
    masters = 4 * plain["parameters"]["trainable"]
    ok = (pools["master_params"] == 0 and pools["optimizer"] == counter and
          host["pools"]["master_params"] == masters and
          host["pools"]["optimizer"] == before["optimizer"] - counter and
          host["to_host_bytes"] == before["grads"] + counter and
          host["to_device_bytes"] == after["weights"])
    print("%s: device %d B master_params + %d B optimizer, host %d B "
          "master_params + %d B optimizer, %s" % (
              label, pools["master_params"], pools["optimizer"],
              host["pools"]["master_params"], host["pools"]["optimizer"],
              "copies = gradients down and weights up" if ok else
              "MISMATCH %s %s %s" % (host, before, after)))


def check_params_account(label, plain, offload):
    """--offload=params: the device keeps no weight between its uses: the
    bf16 copies live on the host (the weights read in f32 are read from the
    masters there) and each crosses at least twice a step (forward and
    backward)."""
    host = offload["host"]
    copies = host["pools"]["params"]
    ok = (0 < copies <= plain["model_state"]["weights"] and
          offload["model_state"]["weights"] == 0 and
          host["to_device_bytes"] >= 2 * copies)
    print("%s: host %d B params, %d B copied up per step, %s" % (
        label, host["pools"]["params"], host["to_device_bytes"],
        "weights on the host, each copied up per use" if ok else
        "MISMATCH %s %s" % (host, plain["model_state"])))


def single(workdir, model, label, flags, account=None, what="optimizer",
           moved=updates_on_host):
    runs = {}
    reports = {}
    for name, extra in (("plain", []), ("offload", ["--offload=" + what])):
        out = os.path.join(workdir, label + "-" + name)
        reports[name] = memopt_run.compile_model(model, out, *flags, *extra)
        runs[name] = train(out, workdir,
                           os.path.join(workdir, "model.safetensors"),
                           out + ".safetensors")
    compare(label, runs["offload"], runs["plain"],
            moved(*(os.path.join(workdir, label + "-" + name)
                    for name in ("plain", "offload"))))
    if account:
        account(label, reports["plain"], reports["offload"])
    return runs


def main():
    workdir, src = sys.argv[1], sys.argv[2]
    gpt = os.path.join(src, "examples", "gpt.mlir")
    make_inputs(gpt, workdir)

    fp32 = single(workdir, gpt, "fp32", [], account=check_account)
    single(workdir, gpt, "bf16", ["--mixed-precision=bf16"],
           account=check_account)
    single(workdir, gpt, "fp16", ["--mixed-precision=fp16"])
    single(workdir, gpt, "k2-sgd-clip",
           ["--micro-batches=2", "--clip-grad-norm=1", *SGD])
    single(workdir, gpt, "adamw8bit", ["--optimizer-state=8bit"])
    # The weights on the host too, copied to the device before each use.
    single(workdir, gpt, "params-fp32", [], what="params")
    single(workdir, gpt, "params-bf16", ["--mixed-precision=bf16"],
           account=check_params_account, what="params")
    single(workdir, gpt, "params-k2-sgd-clip",
           ["--mixed-precision=bf16", "--micro-batches=2",
            "--clip-grad-norm=1", *SGD], what="params")

    # The saved activations in host memory, alone and with the optimizer.
    for label, flags, account in (
            ("act-fp32", [], check_activations_account),
            ("act-bf16-selective", ["--mixed-precision=bf16",
                                    "--remat=selective"],
             check_activations_account),
            ("act-fp16-sync", ["--mixed-precision=fp16",
                               "--overlap-transfers=false"],
             check_activations_account),
            ("act-k2-dropout", ["--micro-batches=2"], None)):
        single(workdir, gpt, label, flags, account=account,
               what="activations", moved=activations_moved)
    single(workdir, gpt, "act-optimizer-bf16", ["--mixed-precision=bf16"],
           what="optimizer,activations")

    # Resumed from the checkpoint of the step without offload.
    resumed = {}
    for name in ("plain", "offload"):
        out = os.path.join(workdir, "fp32-" + name)
        resumed[name] = train(out, workdir, fp32["plain"][2],
                              out + ".resumed.safetensors", steps=2)
        resumed[name] = (resumed[name][0], [], resumed[name][2])
    compare("resumed", resumed["offload"], resumed["plain"])

    # ZeRO: each rank offloads its shard (and with params, its weights).
    for stage, what in ((1, "optimizer"), (2, "optimizer"), (3, "optimizer"),
                        (2, "params"), (3, "params"), (2, "activations")):
        runs = {}
        tag = "zero%d%s" % (stage, {"optimizer": "", "params": "-params",
                                    "activations": "-act"}[what])
        for name, extra in (("plain", []),
                            ("offload", ["--offload=" + what])):
            out = os.path.join(workdir, "%s-%s" % (tag, name))
            memopt_run.compile_model(gpt, out, "--data-parallel=2",
                                     "--zero-stage=%d" % stage,
                                     "--mixed-precision=bf16", *extra)
            runs[name] = train(out, workdir,
                               os.path.join(workdir, "model.safetensors"),
                               out + ".safetensors", ranks=2)
        moved = (activations_moved if what == "activations" else
                 updates_on_host)
        compare(tag.replace("zero", "zero-"), runs["offload"], runs["plain"],
                moved(*(os.path.join(workdir, "%s-%s" % (tag, name))
                        for name in ("plain", "offload"))))


if __name__ == "__main__":
    sys.exit(main())
