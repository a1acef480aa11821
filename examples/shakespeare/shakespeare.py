"""A character-level GPT on Shakespeare, trained by memopt and by PyTorch.

nanoGPT's shakespeare_char recipe scaled to a CPU. The text is
examples/shakespeare/input.txt.gz: 1,115,394 characters of Shakespeare's
plays (public domain), the tinyshakespeare collection of char-rnn. Its 65
characters are the vocabulary; the first 90% trains, the rest validates,
written as nanoGPT writes them (uint16 token files, train.bin and val.bin).

    /usr/bin/python3 examples/shakespeare/shakespeare.py prepare OUT
        writes OUT/train.bin, OUT/val.bin and OUT/meta.json
    /usr/bin/python3 examples/shakespeare/shakespeare.py export OUT
        writes OUT/model.mlir and OUT/model.safetensors (the initial weights)
    /usr/bin/python3 examples/shakespeare/shakespeare.py compare OUT [STEPS]
        compiles the step for a run of STEPS (OUT/compare), trains with
        memopt (OUT/compare/train --tokens) and with PyTorch eager from the
        same weights on the same batches, prints both runs' losses and draws
        their curves in OUT/curves.html

Both runs read the batches the driver documents: row b of batch k is the
window of BLOCK tokens at window_offset(seed, k, b), the label the window one
token later (docs/Training.md, "Training on data"); evaluations read batches
0..EVAL_BATCHES-1 of val.bin from the seed XOR "eval".
"""

import gzip
import json
import math
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..")
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "examples", "pytorch"))

# The model and the run: 4 layers of width 128, a block of 64 characters,
# batches of 16 windows, AdamW at nanoGPT's shakespeare_char rates: 1e-3
# after 100 warmup steps, decaying to 1e-4 at the last step (its get_lr).
LAYERS, HEADS, EMBED, BLOCK, BATCH = 4, 4, 128, 64, 16
LR, EVAL_EVERY, EVAL_BATCHES, SEED = 1e-3, 100, 8, 1337
WARMUP, MIN_LR = 100, 1e-4
EVAL_STREAM = 0x6576616C  # "eval"
MASK = (1 << 64) - 1


def window_offset(seed, batch, row, rows, count):
    """The driver's window start (runtime/driver/Data.h): splitmix64 of
    seed + golden * (batch * rows + row + 1), modulo count."""
    z = (seed + 0x9E3779B97F4A7C15 * (batch * rows + row + 1)) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return (z ^ (z >> 31)) % count


def batch(tokens, seed, k, rows=BATCH, block=BLOCK):
    """Batch k of `tokens` as OUT/train --tokens draws it."""
    starts = [window_offset(seed, k, b, rows, len(tokens) - block)
              for b in range(rows)]
    x = np.stack([tokens[s:s + block] for s in starts]).astype(np.int64)
    y = np.stack([tokens[s + 1:s + 1 + block] for s in starts])
    return x, y.astype(np.int64)


def prepare(out):
    os.makedirs(out, exist_ok=True)
    with gzip.open(os.path.join(HERE, "input.txt.gz"), "rt",
                   encoding="utf-8") as f:
        text = f.read()
    chars = sorted(set(text))
    index = {c: i for i, c in enumerate(chars)}
    data = np.array([index[c] for c in text], dtype=np.uint16)
    split = int(0.9 * len(data))
    data[:split].tofile(os.path.join(out, "train.bin"))
    data[split:].tofile(os.path.join(out, "val.bin"))
    with open(os.path.join(out, "meta.json"), "w") as f:
        json.dump({"vocab": chars}, f)
    print(f"{len(text)} characters, vocabulary of {len(chars)}: "
          f"{split} to train, {len(data) - split} to validate")


def build(vocab):
    import torch
    import models
    torch.manual_seed(SEED)
    return models.GPT(vocab=vocab, block=BLOCK, embed=EMBED, heads=HEADS,
                      layers=LAYERS)


def export(out):
    import torch
    import memopt
    with open(os.path.join(out, "meta.json")) as f:
        vocab = len(json.load(f)["vocab"])
    model = build(vocab)
    example = torch.zeros(BATCH, BLOCK, dtype=torch.int64)
    memopt.export(model, (example, example), os.path.join(out, "model.mlir"))
    print(f"exported a {LAYERS}-layer GPT of width {EMBED} "
          f"({sum(p.numel() for p in model.parameters())} parameters), "
          f"batch {BATCH} x {BLOCK}")


def schedule_flags(steps):
    """memopt-compile's flags for nanoGPT's schedule over `steps` steps."""
    return ["--lr=%g" % LR, "--lr-schedule=nanogpt",
            "--warmup-steps=%d" % WARMUP, "--decay-steps=%d" % steps,
            "--min-lr=%g" % MIN_LR]


def get_lr(it, steps):
    """nanoGPT's get_lr, the rate of 0-based step `it`."""
    if it < WARMUP:
        return LR * (it + 1) / (WARMUP + 1)
    if it > steps:
        return MIN_LR
    ratio = (it - WARMUP) / (steps - WARMUP)
    return MIN_LR + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (LR - MIN_LR)


def pytorch_trainer(out, dtype=None):
    """The model (in `dtype`) from the exported weights' seed, its AdamW
    and the training tokens."""
    import torch
    with open(os.path.join(out, "meta.json")) as f:
        vocab = len(json.load(f)["vocab"])
    model = build(vocab).to(dtype or torch.float32)
    train = np.fromfile(os.path.join(out, "train.bin"), dtype=np.uint16)
    opt = torch.optim.AdamW(model.parameters(), lr=LR, betas=(0.9, 0.999),
                            eps=1e-8, weight_decay=0.01)
    return model, opt, train


def pytorch_step(model, opt, x, y, lr):
    """One eager AdamW step at rate `lr`; its loss."""
    for group in opt.param_groups:
        group["lr"] = lr
    opt.zero_grad()
    loss = model(x, y)
    loss.backward()
    opt.step()
    return float(loss)


def train_pytorch(out, steps):
    """PyTorch eager from the same weights on the same batches."""
    import torch
    model, opt, train = pytorch_trainer(out)
    val = np.fromfile(os.path.join(out, "val.bin"), dtype=np.uint16)

    def evaluate():
        model.eval()
        with torch.no_grad():
            total = sum(float(model(*map(torch.from_numpy, batch(
                val, SEED ^ EVAL_STREAM, j)))) for j in range(EVAL_BATCHES))
        model.train()
        return total / EVAL_BATCHES

    losses, evals = [], [(0, evaluate())]
    for k in range(steps):
        x, y = map(torch.from_numpy, batch(train, SEED, k))
        losses.append(pytorch_step(model, opt, x, y, get_lr(k, steps)))
        if (k + 1) % EVAL_EVERY == 0:
            evals.append((k + 1, evaluate()))
    return losses, evals


def first_losses(out, steps, count, dtype, order=None):
    """PyTorch's first `count` losses of the run in `dtype`, the rows of
    each batch permuted by `order` (the same mean loss, rounded anew)."""
    import torch
    model, opt, train = pytorch_trainer(out, dtype)
    rows = np.random.default_rng(order).permutation(BATCH) \
        if order is not None else np.arange(BATCH)
    return np.array([pytorch_step(model, opt, *(torch.from_numpy(t[rows])
                                               for t in batch(train, SEED, k)),
                                  get_lr(k, steps))
                     for k in range(count)])


def oracle_verdict(out, steps, losses):
    """The parity oracle (memopt.testing, docs/Reliability.md) on the first
    losses: memopt's distance from PyTorch's float64 run at most FACTOR
    times PyTorch float32's own (the largest over ORDERS row orders), or
    the floor."""
    import torch
    from memopt import testing
    count = len(losses)
    exact = first_losses(out, steps, count, torch.float64)
    own = max(np.linalg.norm(first_losses(out, steps, count, torch.float32,
                                          order) - exact)
              for order in range(testing.ORDERS))
    floor = testing.FLOOR_ULPS * testing.UNIT_ROUNDOFF * np.linalg.norm(exact)
    ours = np.linalg.norm(np.array(losses, dtype=np.float64) - exact)
    bound = testing.FACTOR * max(own, floor)
    return ours <= bound, (f"first {count} losses: memopt {ours:.3g} from "
                           f"PyTorch float64, PyTorch float32 {own:.3g}; "
                           f"bound {bound:.3g}")


def train_memopt(out, steps):
    compiler = os.environ.get("MEMOPT_COMPILE") or os.path.join(
        ROOT, "build", "bin", "memopt-compile")
    subprocess.run([compiler, os.path.join(out, "model.mlir"), "-o",
                    os.path.join(out, "compare"), *schedule_flags(steps)],
                   check=True, stdout=subprocess.DEVNULL)
    log = os.path.join(out, "memopt.jsonl")
    if os.path.exists(log):  # --log appends
        os.remove(log)
    command = [os.path.join(out, "compare", "train"),
               "--params", os.path.join(out, "model.safetensors"),
               "--tokens", os.path.join(out, "train.bin"),
               "--seed", str(SEED), "--steps", str(steps),
               "--eval-every", str(EVAL_EVERY),
               "--eval-tokens", os.path.join(out, "val.bin"),
               "--eval-batches", str(EVAL_BATCHES),
               "--log", log]
    text = subprocess.run(command, check=True, capture_output=True,
                          text=True).stdout
    losses, evals = [], []
    for line in text.splitlines():
        words = line.split()
        if words[:1] == ["step"]:
            losses.append(float(words[3]))
        elif words[:2] == ["eval", "step"]:
            evals.append((int(words[2]), float(words[4])))
    return losses, evals


def draw(path, runs):
    """One self-contained HTML page: train and validation curves as SVG."""
    width, height, pad = 720, 420, 48
    everything = [v for run in runs.values() for curve in run for _, v in curve]
    top, bottom = max(everything), min(everything)
    steps = max(s for run in runs.values() for curve in run for s, _ in curve)

    def point(s, v):
        return (pad + (width - 2 * pad) * s / max(steps, 1),
                height - pad - (height - 2 * pad) * (v - bottom) /
                max(top - bottom, 1e-9))

    colours = {"memopt": "#c0392b", "PyTorch eager": "#2471a3"}
    lines = []
    for name, (train, val) in runs.items():
        for curve, dash, label in ((train, "", "train"),
                                   (val, "6,4", "validation")):
            points = " ".join("%.1f,%.1f" % point(s, v) for s, v in curve)
            lines.append(f'<polyline fill="none" stroke="{colours[name]}" '
                         f'stroke-width="1.5" stroke-dasharray="{dash}" '
                         f'points="{points}"><title>{name} {label}</title>'
                         f'</polyline>')
    legend = "".join(
        f'<text x="{width - 220}" y="{pad + 18 * i}" fill="{colours[n]}">'
        f'{n} {kind}</text>'
        for i, (n, kind) in enumerate((n, k) for n in runs
                                      for k in ("train", "validation (dashed)")))
    axes = (f'<line x1="{pad}" y1="{height - pad}" x2="{width - pad}" '
            f'y2="{height - pad}" stroke="#444"/><line x1="{pad}" y1="{pad}" '
            f'x2="{pad}" y2="{height - pad}" stroke="#444"/>'
            f'<text x="{width / 2}" y="{height - 12}">step (0 to {steps})'
            f'</text><text x="4" y="{pad - 8}">loss ({bottom:.2f} to '
            f'{top:.2f})</text>')
    with open(path, "w") as f:
        f.write("<!doctype html><meta charset='utf-8'><title>memopt: "
                "character-level GPT on Shakespeare</title><h3>Character-level "
                "GPT on Shakespeare: memopt and PyTorch eager from the same "
                f"weights on the same batches</h3><svg width='{width}' "
                f"height='{height}' font-family='sans-serif' font-size='12'>"
                f"{axes}{''.join(lines)}{legend}</svg>")


def compare(out, steps):
    memopt_losses, memopt_evals = train_memopt(out, steps)
    torch_losses, torch_evals = train_pytorch(out, steps)
    print("step   memopt     PyTorch")
    for k in list(range(min(20, steps))) + [steps - 1]:
        print(f"{k + 1:5d}  {memopt_losses[k]:.6f}   {torch_losses[k]:.6f}")
    print("validation loss (mean of %d batches)" % EVAL_BATCHES)
    for (s, a), (_, b) in zip(memopt_evals, torch_evals):
        print(f"{s:5d}  {a:.6f}   {b:.6f}")
    within, detail = oracle_verdict(out, steps, memopt_losses[:20])
    print(("within the parity oracle: " if within else
           "OUTSIDE the parity oracle: ") + detail)
    final = memopt_evals[-1][1] / torch_evals[-1][1] - 1
    print(f"final validation loss: memopt {memopt_evals[-1][1]:.4f}, "
          f"PyTorch {torch_evals[-1][1]:.4f} ({100 * final:+.2f}%)")
    smooth = lambda xs: [(i + 1, float(np.mean(xs[max(0, i - 19):i + 1])))
                         for i in range(len(xs))]
    draw(os.path.join(out, "curves.html"),
         {"memopt": (smooth(memopt_losses), memopt_evals),
          "PyTorch eager": (smooth(torch_losses), torch_evals)})
    print(f"curves: {out}/curves.html")


def main(argv):
    if len(argv) < 3 or argv[1] not in ("prepare", "export", "compare"):
        print(__doc__, file=sys.stderr)
        return 1
    out = argv[2]
    if argv[1] == "prepare":
        prepare(out)
    elif argv[1] == "export":
        export(out)
    else:
        compare(out, int(argv[3]) if len(argv) > 3 else 2000)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
