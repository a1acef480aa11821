# Training on data (OUT/train --tokens / --data, docs/Training.md): the
# bundled GPT trained from a flat token file reads exactly the batches the
# documented window order gives (the same run, bit for bit, as from a
# directory of those batches written here), a resumed run is byte for byte
# an uninterrupted one and numbers its steps on (FP32, 2 micro-batches, BF16,
# 2 ranks), the evaluation's mean over --eval-batches is its batches',
# --log writes a record per step and evaluation, SIGTERM ends the run after
# its step with a checkpoint that resumes, and bad data is one error each.
#
# REQUIRES: torch, mpi
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t | FileCheck %s
#
# CHECK: tokens vs directory of the documented windows: 6 losses bit-identical, state byte-identical, 6 files cycled
# CHECK-NEXT: uint32 tokens: the same run
# CHECK-NEXT: eval: mean of 3 token batches is the directory's, bit for bit
# CHECK-NEXT: fp32: 3 + save + 3 resumed is 6 uninterrupted (steps 4-6 numbered on, losses bit-identical, state byte-identical)
# CHECK-NEXT: K=2: 3 + save + 3 resumed is 6 uninterrupted
# CHECK-NEXT: bf16: 3 + save + 3 resumed is 6 uninterrupted
# CHECK-NEXT: 2 ranks: 3 + save + 3 resumed is 6 uninterrupted
# CHECK-NEXT: log: 6 step records and 3 evaluations, fields present
# CHECK-NEXT: SIGTERM: exit 143 after step {{[0-9]+}}, its checkpoint resumes at the next step
# CHECK-NEXT: empty: train: token file '{{.*}}empty.bin': 0 tokens hold no window of 16 tokens and its next one
# CHECK-NEXT: truncated: train: token file '{{.*}}odd.bin': 4097 bytes is not a whole number of 2-byte tokens (truncated, or another --token-dtype)
# CHECK-NEXT: missing tensor: train: tensor 'targets' not found in '{{.*}}missing/b0.safetensors'
# CHECK-NEXT: wrong shape: train: tensor 'idx' in '{{.*}}shape/b0.safetensors' is I64 [2, 16], the step reads I64 [4, 16]
# CHECK-NEXT: corrupt: train: cannot read '{{.*}}corrupt/b0.safetensors': {{.*}}
# CHECK-NEXT: empty directory: train: directory '{{.*}}none' holds no .safetensors batch file

import json
import os
import signal
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
import memopt_run  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "shakespeare"))
import shakespeare  # noqa: E402  (the documented window order)

SEED, ROWS, BLOCK, VOCAB = 7, 4, 16, 128


def run(out, workdir, *args, ranks=1, check=True):
    command = [os.path.join(out, "train"),
               "--params", os.path.join(workdir, "model.safetensors"), *args]
    if ranks > 1:
        command = memopt_run.MPIRUN + ["-np", str(ranks)] + command
    return subprocess.run(command, check=check, capture_output=True,
                          text=True, env=memopt_run.MPI_ENV)


def steps(stdout):
    return [(int(w[1]), w[3]) for w in map(str.split, stdout.splitlines())
            if w[:1] == ["step"]]


def write_batches(memopt, directory, tokens, seed, count):
    os.makedirs(directory, exist_ok=True)
    for k in range(count):
        x, y = shakespeare.batch(tokens, seed, k, ROWS, BLOCK)
        memopt.safetensors.save({"idx": x, "targets": y},
                                os.path.join(directory, "b%d.safetensors" % k))


def main():
    import memopt
    workdir = sys.argv[1]
    sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "pytorch"))
    import models

    model, batch = models.build("gpt")
    mlir = os.path.join(workdir, "model.mlir")
    memopt.export(model, tuple(batch.values()), mlir)
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, VOCAB, 4096, dtype=np.uint16)
    train_bin = os.path.join(workdir, "train.bin")
    tokens.tofile(train_bin)
    val_tokens = rng.integers(0, VOCAB, 1024, dtype=np.uint16)
    val_bin = os.path.join(workdir, "val.bin")
    val_tokens.tofile(val_bin)

    out = os.path.join(workdir, "out")
    memopt_run.compile_model(mlir, out, *memopt_run.ADAMW_FLAGS)

    # The token windows are the documented ones: the same run as from a
    # directory of those 6 batches (shakespeare.batch writes them).
    write_batches(memopt, os.path.join(workdir, "batches"), tokens, SEED, 6)
    a = run(out, workdir, "--tokens", train_bin, "--seed", str(SEED),
            "--steps", "6", "--save", os.path.join(workdir, "a.st")).stdout
    b = run(out, workdir, "--data", os.path.join(workdir, "batches"),
            "--steps", "6", "--save", os.path.join(workdir, "b.st")).stdout
    # A directory cycles: 3 files twice are batches 0-2 twice.
    write_batches(memopt, os.path.join(workdir, "three"), tokens, SEED, 3)
    c = run(out, workdir, "--data", os.path.join(workdir, "three"),
            "--steps", "6").stdout
    # Byte for byte but for the seed each run records.
    sa = memopt.safetensors.load(os.path.join(workdir, "a.st"))
    sb = memopt.safetensors.load(os.path.join(workdir, "b.st"))
    same_state = sa.keys() == sb.keys() and all(
        sa[k].tobytes() == sb[k].tobytes() for k in sa if k != "driver.seed")
    cycled = steps(c)[:3] == steps(b)[:3] and steps(c)[3:] != steps(b)[3:]
    print("tokens vs directory of the documented windows: %d losses %s, "
          "state %s, %s" % (
              len(steps(a)), "bit-identical" if steps(a) == steps(b) else
              "MISMATCH", "byte-identical" if same_state else "MISMATCH",
              "6 files cycled" if cycled else "MISMATCH in cycling"))
    wide = os.path.join(workdir, "train32.bin")
    tokens.astype(np.uint32).tofile(wide)
    d = run(out, workdir, "--tokens", wide, "--token-dtype", "uint32",
            "--seed", str(SEED), "--steps", "6").stdout
    print("uint32 tokens: %s" % ("the same run" if steps(d) == steps(a)
                                 else "MISMATCH"))

    # Evaluation batches come from the seed's "eval" stream.
    write_batches(memopt, os.path.join(workdir, "evals"), val_tokens,
                  SEED ^ shakespeare.EVAL_STREAM, 3)
    e1 = run(out, workdir, "--tokens", train_bin, "--seed", str(SEED),
             "--steps", "1", "--eval", "--eval-tokens", val_bin,
             "--eval-batches", "3").stdout
    e2 = run(out, workdir, "--tokens", train_bin, "--seed", str(SEED),
             "--steps", "1", "--eval", "--eval-data",
             os.path.join(workdir, "evals"), "--eval-batches", "3").stdout
    evals = [l for l in e1.splitlines() if l.startswith("eval")]
    print("eval: mean of 3 token batches is %s" % (
        "the directory's, bit for bit" if evals and evals ==
        [l for l in e2.splitlines() if l.startswith("eval")] else
        "MISMATCH %s %s" % (e1, e2)))

    # Resuming: 3 steps, a save, 3 more, against 6 at once.
    for label, flags, ranks in (("fp32", [], 1),
                                ("K=2", ["--micro-batches=2"], 1),
                                ("bf16", ["--mixed-precision=bf16"], 1),
                                ("2 ranks", ["--data-parallel=2"], 2)):
        compiled = os.path.join(workdir, "out-" + label.replace(" ", ""))
        memopt_run.compile_model(mlir, compiled, *memopt_run.ADAMW_FLAGS,
                                 *flags)
        data = ["--tokens", train_bin, "--seed", str(SEED)]
        whole = os.path.join(workdir, "whole.st")
        half = os.path.join(workdir, "half.st")
        resumed = os.path.join(workdir, "resumed.st")
        full = run(compiled, workdir, *data, "--steps", "6", "--save", whole,
                   ranks=ranks).stdout
        first = run(compiled, workdir, *data, "--steps", "3", "--save", half,
                    ranks=ranks).stdout
        # The seed comes from the checkpoint.
        second = subprocess.run(
            ([*memopt_run.MPIRUN, "-np", str(ranks)] if ranks > 1 else []) +
            [os.path.join(compiled, "train"), "--params", half,
             "--tokens", train_bin, "--steps", "3", "--save", resumed],
            check=True, capture_output=True, text=True,
            env=memopt_run.MPI_ENV).stdout
        ok = (steps(first) + steps(second) == steps(full) and
              [n for n, _ in steps(second)] == [4, 5, 6] and
              open(whole, "rb").read() == open(resumed, "rb").read())
        print("%s: 3 + save + 3 resumed is %s" % (
            label, ("6 uninterrupted (steps 4-6 numbered on, losses "
                    "bit-identical, state byte-identical)" if label == "fp32"
                    else "6 uninterrupted") if ok else
            "MISMATCH %s %s %s" % (steps(first), steps(second), steps(full))))

    log = os.path.join(workdir, "run.jsonl")
    clipped = os.path.join(workdir, "out-clipped")
    memopt_run.compile_model(mlir, clipped, *memopt_run.ADAMW_FLAGS,
                             "--clip-grad-norm=1")
    run(clipped, workdir, "--tokens", train_bin, "--steps", "6",
        "--eval-every", "3", "--eval-tokens", val_bin, "--log", log)
    records = [json.loads(line) for line in open(log)]
    step_records = [r for r in records if "loss" in r]
    eval_records = [r for r in records if "eval_loss" in r]
    # No loss scaling: no skipped or loss_scale fields.
    fields = all(set(r) == {"step", "loss", "lr", "grad_norm", "step_ms",
                            "samples_per_s", "tokens_per_s", "elapsed_s"}
                 for r in step_records) and [r["step"] for r in
                                             step_records] == [1, 2, 3, 4, 5, 6]
    print("log: %d step records and %d evaluations, %s" % (
        len(step_records), len(eval_records),
        "fields present" if fields else "MISMATCH %s" % records))

    # SIGTERM: the step in flight finishes, the checkpoint is written.
    stop = os.path.join(workdir, "stopped.st")
    process = subprocess.Popen(
        [os.path.join(out, "train"), "--params",
         os.path.join(workdir, "model.safetensors"), "--tokens", train_bin,
         "--steps", "100000", "--save", stop], stdout=subprocess.PIPE,
        text=True)
    printed = []
    while len(printed) < 2:
        printed.append(process.stdout.readline())
    process.send_signal(signal.SIGTERM)
    rest, _ = process.communicate(timeout=60)
    last = steps("".join(printed) + rest)[-1][0]
    resumed = subprocess.run(
        [os.path.join(out, "train"), "--params", stop, "--tokens", train_bin,
         "--steps", "1"], capture_output=True, text=True).stdout
    print("SIGTERM: exit %d after step %d, its checkpoint %s" % (
        process.returncode, last, "resumes at the next step"
        if steps(resumed) and steps(resumed)[0][0] == last + 1 else
        "MISMATCH: " + resumed))

    bad = os.path.join(workdir, "bad")
    os.makedirs(bad)
    open(os.path.join(bad, "empty.bin"), "wb").close()
    with open(os.path.join(bad, "odd.bin"), "wb") as f:
        f.write(b"\0" * 4097)
    os.makedirs(os.path.join(bad, "missing"))
    memopt.safetensors.save({"idx": batch["idx"]},
                            os.path.join(bad, "missing", "b0.safetensors"))
    os.makedirs(os.path.join(bad, "shape"))
    memopt.safetensors.save({k: v[:2] for k, v in batch.items()},
                            os.path.join(bad, "shape", "b0.safetensors"))
    os.makedirs(os.path.join(bad, "corrupt"))
    with open(os.path.join(bad, "corrupt", "b0.safetensors"), "wb") as f:
        f.write(b"\x08\0\0\0\0\0\0\0{broken")
    os.makedirs(os.path.join(bad, "none"))
    for label, args in (
            ("empty", ["--tokens", os.path.join(bad, "empty.bin")]),
            ("truncated", ["--tokens", os.path.join(bad, "odd.bin")]),
            ("missing tensor", ["--data", os.path.join(bad, "missing")]),
            ("wrong shape", ["--data", os.path.join(bad, "shape")]),
            ("corrupt", ["--data", os.path.join(bad, "corrupt")]),
            ("empty directory", ["--data", os.path.join(bad, "none")])):
        failed = run(out, workdir, *args, "--steps", "1", check=False)
        print("%s: %s" % (label, (failed.stderr.strip().splitlines() or
                                  ["exit %d" % failed.returncode])[0]))


if __name__ == "__main__":
    main()
