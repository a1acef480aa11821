# memopt.compile (docs/Python.md): the bundled GPT compiled from Python and
# trained in-process on the caller's own batches runs exactly OUT/train's
# step (losses bit-identical, checkpoints equal tensor for tensor), in
# either direction of a resume; evaluate() is OUT/train's evaluation and the
# float64 loss of the model holding state_dict(); load_state_dict() writes
# the weights back; step(lr=) is a program compiled with that rate; a
# program with the optimizer offloaded steps, evaluates and takes
# load_state_dict as the one without, bit for bit; the
# batch is never written; wrong batches (a token beyond the vocabulary too,
# while a label's ignore_index trains), options and checkpoints are one
# clear error each; a temporary program directory goes with the program.
#
# The library loads into the Python interpreter, which a sanitized build's
# runtime cannot come first in.
# UNSUPPORTED: sanitized
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t | FileCheck %s
#
# CHECK: in-process vs OUT/train: 6 losses bit-identical, checkpoints equal
# CHECK-NEXT: batches unchanged by the steps
# CHECK-NEXT: python 3 + save + OUT/train 3 resumed is 6 (steps 4-6 numbered on)
# CHECK-NEXT: OUT/train 3 + save + memopt.load 3 resumed is 6
# CHECK-NEXT: bf16, 2 micro-batches, clipping, cosine: OUT/train's lines
# CHECK-NEXT: evaluate: OUT/train's --eval bit for bit, float64 model within 256 u
# CHECK-NEXT: load_state_dict: a fresh model's loss, state_dict returns it
# CHECK-NEXT: lr=0.003: the program compiled with --lr=0.003, bit for bit
# CHECK-NEXT: offload=optimizer: 4 steps around load_state_dict and an evaluation bit for bit, state equal
# CHECK-NEXT: memory_report: peak {{[0-9]+}} bytes
# CHECK-NEXT: wrong dtype: ValueError: 'idx' has dtype int32, the step was compiled for int64
# CHECK-NEXT: wrong shape: ValueError: 'targets' has shape [2, 16], the step was compiled for [4, 16]
# CHECK-NEXT: wrong count: ValueError: the step takes 2 batch tensors (idx, targets), got 1
# CHECK-NEXT: not contiguous: ValueError: 'idx' is not contiguous: pass x.contiguous()
# CHECK-NEXT: beyond the vocabulary: ValueError: 'idx' holds 128 at element 19, outside [0, 128)
# CHECK-NEXT: unknown option: CompileError: {{.*}}no-such-option{{.*}}
# CHECK-NEXT: other model's checkpoint: ProgramError: tensor '{{.*}}' (param) not found in '{{.*}}mlp.safetensors'
# CHECK-NEXT: corrupt checkpoint: ProgramError: cannot read '{{.*}}corrupt.safetensors': {{.*}}
# CHECK-NEXT: temporary directory removed on close

import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "shakespeare"))
import shakespeare  # noqa: E402  (the documented window order)

SEED, ROWS, BLOCK, VOCAB = 7, 4, 16, 128


def train(out, *args):
    return subprocess.run([os.path.join(out, "train"), *args], check=True,
                          capture_output=True, text=True).stdout


def step_losses(stdout):
    return [(int(w[1]), np.float32(w[3]))
            for w in map(str.split, stdout.splitlines())
            if w[:1] == ["step"]]


def same_tensors(a, b):
    import memopt
    x, y = memopt.safetensors.load(a), memopt.safetensors.load(b)
    return x.keys() == y.keys() and all(
        x[k].dtype == y[k].dtype and x[k].tobytes() == y[k].tobytes()
        for k in x)


def error_of(call):
    try:
        call()
    except Exception as e:  # noqa: BLE001  (the test prints which)
        return "%s: %s" % (type(e).__name__, str(e).splitlines()[0])
    return "no error"


def main():
    import torch
    import memopt
    import memopt.testing
    workdir = sys.argv[1]
    sys.path.insert(0, os.path.join(HERE, "..", "..", "examples", "pytorch"))
    import models

    model, example = models.build("gpt")
    initial = {k: v.clone() for k, v in model.state_dict().items()}
    out = os.path.join(workdir, "gpt")
    program = memopt.compile(model, tuple(example.values()), out_dir=out,
                             lr=1e-3)
    tokens = np.random.default_rng(0).integers(0, VOCAB, 4096, np.uint16)
    batches = [tuple(torch.from_numpy(t) for t in
                     shakespeare.batch(tokens, SEED, k, ROWS, BLOCK))
               for k in range(6)]
    data = os.path.join(workdir, "batches")
    os.makedirs(data)
    for k, (x, y) in enumerate(batches):
        memopt.safetensors.save({"idx": x, "targets": y},
                                os.path.join(data, "b%d.safetensors" % k))
    params = os.path.join(out, "model.safetensors")

    # The same six steps in-process and by OUT/train.
    copies = [tuple(t.clone() for t in b) for b in batches]
    losses = [np.float32(program.step(*b)) for b in batches]
    ours = os.path.join(workdir, "python6.safetensors")
    program.save(ours)
    theirs = os.path.join(workdir, "train6.safetensors")
    reference = step_losses(train(out, "--params", params, "--data", data,
                                  "--steps", "6", "--save", theirs))
    assert [l for _, l in reference] == losses, (reference, losses)
    assert same_tensors(ours, theirs)
    print("in-process vs OUT/train: 6 losses bit-identical, checkpoints equal")
    assert all(torch.equal(a, b) for c, d in zip(copies, batches)
               for a, b in zip(c, d))
    print("batches unchanged by the steps")

    # Resumes, both ways.
    fresh = memopt.load(params, out_dir=out)
    for b in batches[:3]:
        fresh.step(*b)
    half = os.path.join(workdir, "python3.safetensors")
    fresh.save(half)
    resumed = step_losses(train(out, "--params", half, "--data", data,
                                "--steps", "3"))
    assert resumed == reference[3:], (resumed, reference)
    print("python 3 + save + OUT/train 3 resumed is 6 (steps 4-6 numbered "
          "on)")
    half = os.path.join(workdir, "train3.safetensors")
    train(out, "--params", params, "--data", data, "--steps", "3", "--save",
          half)
    again = memopt.load(half, out_dir=out)
    tail = [np.float32(again.step(*b)) for b in batches[3:]]
    assert tail == losses[3:], (tail, losses)
    assert again.last_step["step"] == 6
    again.save(os.path.join(workdir, "resumed6.safetensors"))
    assert same_tensors(os.path.join(workdir, "resumed6.safetensors"), theirs)
    print("OUT/train 3 + save + memopt.load 3 resumed is 6")

    # Under BF16, accumulation, clipping and a schedule too, with the
    # step's figures as OUT/train prints them.
    options = dict(mixed_precision="bf16", micro_batches=2,
                   clip_grad_norm=0.5, lr_schedule="cosine", warmup_steps=2,
                   decay_steps=6)
    mixed_dir = os.path.join(workdir, "gpt-mixed")
    mixed = memopt.compile(models.build("gpt")[0], tuple(example.values()),
                           out_dir=mixed_dir, **options)
    printed = []
    for b in batches:
        mixed.step(*b)
        s = mixed.last_step
        printed.append("step %d loss %.9g lr %.9g grad_norm %.9g"
                       % (s["step"], s["loss"], s["lr"], s["grad_norm"]))
    text = train(mixed_dir, "--params", params, "--data", data, "--steps", "6")
    assert text.splitlines() == printed, (text, printed)
    print("bf16, 2 micro-batches, clipping, cosine: OUT/train's lines")

    # Evaluation: OUT/train's (on its first batch after 6 steps), and the
    # float64 loss of the model holding the program's weights.
    text = train(out, "--params", params, "--data", data, "--steps", "6",
                 "--eval", "--eval-batches", "1")
    line = [w for w in map(str.split, text.splitlines())
            if w[:2] == ["eval", "step"]][-1]
    evaluated = program.evaluate(*batches[0])
    assert np.float32(evaluated) == np.float32(line[4]), (evaluated, line)
    state = program.state_dict()
    check = models.build("gpt")[0].double().eval()
    missing, unexpected = check.load_state_dict(state, strict=False)
    assert not unexpected and all(k not in dict(check.named_parameters())
                                  for k in missing), (missing, unexpected)
    with torch.no_grad():
        exact = float(check(*batches[0]))
    # The f32 forward's error bound: the longest reduction (the MLP's 256
    # hidden units) times f32's unit roundoff.
    tolerance = 256 * memopt.testing.UNIT_ROUNDOFF
    assert abs(evaluated - exact) <= tolerance * abs(exact), (evaluated, exact)
    print("evaluate: OUT/train's --eval bit for bit, float64 model within "
          "256 u")

    program.load_state_dict({k: initial[k] for k in state})
    start = models.build("gpt")[0].double().eval()
    with torch.no_grad():
        exact = float(start(*batches[0]))
    assert abs(program.evaluate(*batches[0]) - exact) <= tolerance * exact
    assert all(torch.equal(v, initial[k].to(v.dtype))
               for k, v in program.state_dict().items())
    print("load_state_dict: a fresh model's loss, state_dict returns it")

    # A learning rate given to step() is the compiled one's.
    faster = memopt.compile(models.build("gpt")[0],
                            tuple(example.values()),
                            out_dir=os.path.join(workdir, "gpt-lr"), lr=3e-3)
    slower = memopt.load(params, out_dir=out)
    for b in batches[:3]:
        a, c = faster.step(*b), slower.step(*b, lr=3e-3)
        assert np.float32(a) == np.float32(c), (a, c)
    a, c = faster.evaluate(*batches[3]), slower.evaluate(*batches[3])
    assert np.float32(a) == np.float32(c) and slower.last_step["lr"] == 3e-3
    print("lr=0.003: the program compiled with --lr=0.003, bit for bit")

    # The optimizer in host memory (docs/Offload.md): the same steps and
    # state, and load_state_dict reaches the device's copy of each weight.
    runs = []
    for offload in ("none", "optimizer"):
        p = memopt.compile(models.build("gpt")[0], tuple(example.values()),
                           out_dir=os.path.join(workdir, "gpt-" + offload),
                           mixed_precision="bf16", offload=offload)
        seen = [np.float32(p.step(*b)) for b in batches[:2]]
        p.load_state_dict({k: initial[k] for k in p.state_dict()})
        seen += [np.float32(p.step(*b)) for b in batches[2:4]]
        seen.append(np.float32(p.evaluate(*batches[0])))
        runs.append((seen, p.state_dict()))
    assert runs[0][0] == runs[1][0], runs
    assert all(torch.equal(runs[0][1][k], runs[1][1][k]) for k in runs[0][1])
    print("offload=optimizer: 4 steps around load_state_dict and an "
          "evaluation bit for bit, state equal")

    report = program.memory_report
    print("memory_report: peak %d bytes" % report["peak"]["bytes"])

    x, y = batches[0]
    print("wrong dtype:", error_of(lambda: program.step(x.int(), y)))
    print("wrong shape:", error_of(lambda: program.step(x, y[:2])))
    print("wrong count:", error_of(lambda: program.step(x)))
    print("not contiguous:", error_of(lambda: program.step(
        x.t().contiguous().t(), y)))
    beyond = x.clone()
    beyond[1, 3] = VOCAB
    print("beyond the vocabulary:", error_of(lambda: program.step(beyond, y)))
    ignored = y.clone()
    ignored[0, 0] = -100
    program.step(x, ignored)
    print("unknown option:", error_of(lambda: memopt.compile(
        model, tuple(example.values()), no_such_option=1)))
    mlp, mlp_batch = models.build("mlp")
    mlp_path = os.path.join(workdir, "mlp.mlir")
    memopt.export(mlp, tuple(mlp_batch.values()), mlp_path)
    print("other model's checkpoint:", error_of(lambda: memopt.load(
        os.path.join(workdir, "mlp.safetensors"), out_dir=out)))
    corrupt = os.path.join(workdir, "corrupt.safetensors")
    with open(theirs, "rb") as f:
        blob = f.read()
    with open(corrupt, "wb") as f:
        f.write(blob[:len(blob) // 2])
    print("corrupt checkpoint:", error_of(lambda: memopt.load(
        corrupt, out_dir=out)))

    temporary = memopt.compile(mlp, tuple(mlp_batch.values()))
    directory = temporary.out_dir
    assert os.path.exists(os.path.join(directory, "libmemopt_program.so"))
    temporary.close()
    assert not os.path.exists(directory)
    print("temporary directory removed on close")


if __name__ == "__main__":
    main()
