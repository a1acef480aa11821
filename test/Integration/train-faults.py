# Faults of OUT/train (docs/Training.md, "Faults"), each one error naming
# the file and the offset or tensor, the last good checkpoint intact, on the
# bundled GPT (vocabulary 128, batches of 4 x 16 tokens):
#
# - A token id or a label beyond the vocabulary, in a token file or a batch
#   file, at a batch after a few good ones: the run stops at that batch
#   with exit 1 and one error naming the file, the offset or element and
#   the argument; the checkpoint saved after every step is byte for byte a
#   clean run's of the good batches. A label equal to the cross-entropy's
#   ignore_index (-100) trains; an index of -100 does not.
# - A full disk while writing the checkpoint (RLIMIT_FSIZE, SIGXFSZ
#   ignored: every write past the limit fails with EFBIG): exit 1, one
#   error naming the file and the OS reason, no temporary left, the previous
#   checkpoint byte-identical.
# - kill -9 of a run saving after every step, at seeded random moments and
#   inside saves: the checkpoint is absent or whole, and a run resumes from
#   it at the next step; some kills fell inside a save (their temporary was
#   left), and the next save removes the temporaries of dead writers.
#
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t %memopt_src_root | FileCheck %s
#
# CHECK: model: idx bound 128; targets bound 128, ignore_index -100
# CHECK-NEXT: token input: exit 1 after steps [1, 2, 3]: train: token id 70000 at offset {{[0-9]+}} (in tokens; byte {{[0-9]+}}) of 'WORK/bad-input.bin' is outside the vocabulary [0, 128) of input 'idx'
# CHECK-NEXT: token input: offset is a window start of batch 3, checkpoint is the clean run's after 3 steps
# CHECK-NEXT: token label: exit 1 after steps [1, 2, 3]: train: token id 128 at offset {{[0-9]+}} (in tokens; byte {{[0-9]+}}) of 'WORK/bad-label.bin' is outside the vocabulary [0, 128) of label 'targets'
# CHECK-NEXT: token label: offset is one past a window of batch 3, checkpoint is the clean run's after 3 steps
# CHECK-NEXT: batch label: exit 1 after steps [1, 2]: train: tensor 'targets' in 'WORK/bad-dir/b2.safetensors' holds 128 at element 19, outside [0, 128) and not the ignore_index -100
# CHECK-NEXT: batch label: checkpoint is the clean run's after 2 steps
# CHECK-NEXT: batch index: exit 1: train: tensor 'idx' in 'WORK/negative-idx.safetensors' holds -100 at element 5, outside [0, 128)
# CHECK-NEXT: eval batch: exit 1: train: tensor 'targets' in 'WORK/bad-dir/b2.safetensors' holds 128 at element 19, outside [0, 128) and not the ignore_index -100
# CHECK-NEXT: ignored labels: exit 0, 2 steps
# CHECK-NEXT: full disk: exit 1: train: cannot save 'WORK/full.st': cannot write 'WORK/full.st.tmp.PID': File too large
# CHECK-NEXT: full disk: no temporary left, the previous checkpoint byte-identical
# CHECK-NEXT: full disk at --save-every: exit 1 after steps [1]: train: cannot save 'WORK/full.st': cannot write 'WORK/full.st.tmp.PID': File too large
# CHECK-NEXT: full disk at --save-every: no temporary left, the previous checkpoint byte-identical
# CHECK-NEXT: kill -9: every checkpoint absent or whole and resumed at the next step; some kills inside a save
# CHECK-NEXT: kill -9: the next save removed the dead writers' temporaries, kept a live one's
# CHECK-NOT: MISMATCH

import json
import os
import random
import re
import resource
import signal
import subprocess
import sys
import time

import numpy as np

SRC = sys.argv[2]
sys.path.insert(0, os.path.join(SRC, "examples", "shakespeare"))
import shakespeare  # noqa: E402  (the documented window order)

ROWS, BLOCK, VOCAB, SEED = 4, 16, 128, 7
WORK = sys.argv[1]
TRAIN = os.path.join(WORK, "out", "train")
PARAMS = os.path.join(WORK, "model.safetensors")


def run(*args, check=False, **kwargs):
    return subprocess.run([TRAIN, "--params", PARAMS, *args],
                          capture_output=True, text=True, check=check,
                          **kwargs)


def steps(stdout):
    return [int(w[1]) for w in map(str.split, stdout.splitlines())
            if w[:1] == ["step"]]


def error(result):
    """The error lines, the work directory and pids spelled out."""
    lines = result.stderr.strip().splitlines()
    text = " | ".join(lines) if len(lines) == 1 else "%d lines: %s" % (
        len(lines), lines)
    return re.sub(r"\.tmp\.[0-9]+", ".tmp.PID", text.replace(WORK, "WORK"))


def same_bytes(a, b):
    with open(a, "rb") as f, open(b, "rb") as g:
        return f.read() == g.read()


def temporaries(path):
    prefix = os.path.basename(path) + ".tmp."
    return sorted(n for n in os.listdir(os.path.dirname(path))
                  if n.startswith(prefix))


def windows(k):
    """The window starts of batch k's rows, in order."""
    return [shakespeare.window_offset(SEED, k, b, ROWS, TOKENS - BLOCK)
            for b in range(ROWS)]


def first_read(k, offset):
    """How the driver's scan of batch k first reads token `offset`: as
    "input" or "label", or None."""
    for start in windows(k):
        for t in range(BLOCK):
            if start + t == offset:
                return "input"
            if start + t + 1 == offset:
                return "label"
    return None


TOKENS = 4096


def token_faults(good):
    """A bad token that batch 3 reads first, as an input (the start of a
    window) or as a label (one past a window's end)."""
    clean = os.path.join(WORK, "clean.st")
    run("--tokens", good, "--token-dtype", "uint32", "--seed", str(SEED),
        "--steps", "3", "--save", clean, check=True)
    for label, role, shift, value in (
            ("token input", "input", 0, 70000),
            ("token label", "label", BLOCK, VOCAB)):
        offset = next(s + shift for s in windows(3)
                      if first_read(3, s + shift) == role and
                      not any(first_read(k, s + shift) for k in range(3)))
        tokens = np.fromfile(good, dtype=np.uint32)
        tokens[offset] = value
        bad = os.path.join(WORK, "bad-%s.bin" % role)
        tokens.tofile(bad)
        saved = os.path.join(WORK, "saved.st")
        result = run("--tokens", bad, "--token-dtype", "uint32", "--seed",
                     str(SEED), "--steps", "10", "--save", saved,
                     "--save-every", "1")
        print("%s: exit %d after steps %s: %s" % (
            label, result.returncode, steps(result.stdout), error(result)))
        named = " at offset %d (in tokens; byte %d) " % (offset, 4 * offset)
        ok = named in result.stderr and same_bytes(saved, clean)
        print("%s: %s" % (label, (
            "offset is a window start of batch 3" if role == "input" else
            "offset is one past a window of batch 3") +
            ", checkpoint is the clean run's after 3 steps" if ok else
            "MISMATCH: expected%s" % named))


def batch_faults(batch):
    """A label beyond the classes in the third of three batch files; an
    index of -100; the evaluation's data; labels at ignore_index."""
    import memopt.safetensors as st
    good = st.load(batch)
    good_dir = os.path.join(WORK, "good-dir")
    bad_dir = os.path.join(WORK, "bad-dir")
    os.makedirs(good_dir)
    os.makedirs(bad_dir)
    for k in range(3):
        b = {name: np.roll(v, k) for name, v in good.items()}
        if k < 2:
            st.save(b, os.path.join(good_dir, "b%d.safetensors" % k))
        else:
            b["targets"][1, 3] = VOCAB  # element 19
        st.save(b, os.path.join(bad_dir, "b%d.safetensors" % k))
    clean = os.path.join(WORK, "clean-dir.st")
    run("--data", good_dir, "--steps", "2", "--save", clean, check=True)
    saved = os.path.join(WORK, "saved-dir.st")
    result = run("--data", bad_dir, "--steps", "6", "--save", saved,
                 "--save-every", "1")
    print("batch label: exit %d after steps %s: %s" % (
        result.returncode, steps(result.stdout), error(result)))
    print("batch label: %s" % ("checkpoint is the clean run's after 2 steps"
                               if same_bytes(saved, clean) else "MISMATCH"))

    negative = dict(good)
    negative["idx"] = good["idx"].copy()
    negative["idx"][0, 5] = -100
    path = os.path.join(WORK, "negative-idx.safetensors")
    st.save(negative, path)
    result = run("--batch", path, "--steps", "1")
    print("batch index: exit %d: %s" % (result.returncode, error(result)))

    result = run("--batch", batch, "--steps", "1", "--eval", "--eval-data",
                 os.path.join(bad_dir, "b2.safetensors"))
    print("eval batch: exit %d: %s" % (result.returncode, error(result)))

    ignored = dict(good)
    ignored["targets"] = good["targets"].copy()
    ignored["targets"][:, ::3] = -100
    path = os.path.join(WORK, "ignored.safetensors")
    st.save(ignored, path)
    result = run("--batch", path, "--steps", "2")
    print("ignored labels: exit %d, %d steps%s" % (
        result.returncode, len(steps(result.stdout)),
        "" if not result.returncode else " MISMATCH: " + error(result)))


def limited(limit):
    """A child whose writes past `limit` bytes of a file fail with EFBIG,
    as on a full disk, rather than kill it with SIGXFSZ (an ignored
    disposition survives exec)."""
    def preexec():
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    return preexec


def full_disk(good):
    data = ["--tokens", good, "--token-dtype", "uint32", "--seed", str(SEED)]
    path = os.path.join(WORK, "full.st")
    run(*data, "--steps", "2", "--save", path, check=True)
    with open(path, "rb") as f:
        before = f.read()
    for label, flags in (("full disk", ["--steps", "1"]),
                         ("full disk at --save-every",
                          ["--steps", "3", "--save-every", "1"])):
        result = run(*data, *flags, "--save", path,
                     preexec_fn=limited(64 * 1024))
        print("%s: exit %d%s: %s" % (
            label, result.returncode, "" if label == "full disk" else
            " after steps %s" % steps(result.stdout), error(result)))
        with open(path, "rb") as f:
            intact = f.read() == before
        left = temporaries(path)
        print("%s: %s" % (label, "no temporary left, the previous checkpoint "
                          "byte-identical" if intact and not left else
                          "MISMATCH: intact %s, left %s" % (intact, left)))


def kill_during_saves(good):
    """SIGKILL a run that saves after every step, 16 times: at seeded
    random moments (before the first save, in a step or in a save), and,
    every other time, once a save's temporary appears and a random part of
    a millisecond later; then resume from what each left."""
    import memopt.safetensors as st
    data = ["--tokens", good, "--token-dtype", "uint32"]
    path = os.path.join(WORK, "killed.st")
    rng = random.Random(20240611)
    inside, problems = 0, []
    for kill in range(16):
        if os.path.exists(path):
            os.remove(path)
        process = subprocess.Popen(
            [TRAIN, "--params", PARAMS, *data, "--seed", str(SEED), "--steps",
             "100000", "--save", path, "--save-every", "1"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        temporary = "%s.tmp.%d" % (path, process.pid)
        if kill % 2 == 0:
            time.sleep(rng.uniform(0.0, 0.4))
        else:
            deadline = time.monotonic() + 30
            while not os.path.exists(temporary) and \
                    time.monotonic() < deadline:
                pass
            time.sleep(rng.uniform(0.0, 0.001))
        process.send_signal(signal.SIGKILL)
        process.wait()
        if os.path.exists(temporary):
            inside += 1
        if not os.path.exists(path):
            continue
        try:
            done = int(st.load(path)["driver.steps"])
        except Exception as e:  # a torn file
            problems.append("kill %d: %s" % (kill, e))
            continue
        resumed = subprocess.run(
            [TRAIN, "--params", path, *data, "--steps", "1"],
            capture_output=True, text=True)
        if resumed.returncode or steps(resumed.stdout) != [done + 1]:
            problems.append("kill %d: resumed %d: %s%s" % (
                kill, resumed.returncode, resumed.stdout, resumed.stderr))
    print("kill -9: %s" % (
        "every checkpoint absent or whole and resumed at the next step; "
        "some kills inside a save" if not problems and inside else
        "MISMATCH: %d of 16 kills inside a save; %s" % (inside, problems)))
    print("kill -9: 16 kills, %d inside a save" % inside, file=sys.stderr)

    # A dead writer's temporary (a pid that has exited) and a live one's
    # (this process's): the next save removes the first only.
    dead = subprocess.Popen(["true"])
    dead.wait()
    for pid in (dead.pid, os.getpid()):
        with open("%s.tmp.%d" % (path, pid), "wb") as f:
            f.write(b"partial")
    run(*data, "--steps", "1", "--save", path, check=True)
    left = temporaries(path)
    print("kill -9: %s" % (
        "the next save removed the dead writers' temporaries, kept a live "
        "one's" if left == ["%s.tmp.%d" % (os.path.basename(path),
                                           os.getpid())]
        else "MISMATCH: left %s" % left))


def main():
    out = os.path.join(WORK, "out")
    subprocess.run(["memopt-compile", os.path.join(SRC, "examples",
                                                   "gpt.mlir"), "-o", out],
                   check=True, stdout=subprocess.DEVNULL)
    batch = os.path.join(WORK, "batch.safetensors")
    subprocess.run([sys.executable, os.path.join(
        SRC, "test", "Target", "Inputs", "cuda_inputs.py"),
        os.path.join(out, "model.json"), PARAMS, batch,
        "--int-high", str(VOCAB)], check=True)
    with open(os.path.join(out, "model.json")) as f:
        arguments = {a["name"]: a for a in json.load(f)["arguments"]}
    print("model: idx bound %s; targets bound %s, ignore_index %s" % (
        arguments["idx"].get("bound"), arguments["targets"].get("bound"),
        arguments["targets"].get("ignore_index")))

    good = os.path.join(WORK, "good.bin")
    np.random.default_rng(0).integers(0, VOCAB, TOKENS).astype(
        np.uint32).tofile(good)
    token_faults(good)
    batch_faults(batch)
    full_disk(good)
    kill_during_saves(good)


if __name__ == "__main__":
    main()
