#!/usr/bin/env python3
"""QLoRA's NF4 base against a bf16 base: the accuracy of a LoRA fine-tune.

examples/shakespeare's character-level GPT is pretrained (FP32, nanoGPT's
schedule, OUT/train --tokens), then fine-tuned with LoRA adapters (r = 8 on
every linear layer of the blocks: c_attn, c_proj, c_fc; the base frozen
with requires_grad=False, as peft does) under BF16 twice from the same
weights on the same batches: the frozen base in bf16 (the default) and in
NF4 (--frozen-weights=nf4, docs/Quantization.md). Prints both final
validation losses and their ratio against the anchor: within 2% (QLoRA
reports NF4 with double quantization matching 16-bit LoRA fine-tuning).

    /usr/bin/python3 bench/qlora/run.py [--build BUILD] [--pretrain N]
                                        [--steps N]
"""

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "examples", "shakespeare"))
import shakespeare  # noqa: E402

spec = importlib.util.spec_from_file_location(
    "lora_bench", os.path.join(ROOT, "bench", "lora", "run.py"))
lora_bench = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lora_bench)

RANK = 8
TARGETS = {"c_attn", "c_proj", "c_fc"}


def train(build, mlir, out, params, steps, *flags, save=None):
    """Compiles `mlir` with nanoGPT's schedule over `steps` and `flags`,
    trains it from `params` on the training text and returns the final
    validation loss."""
    subprocess.run([os.path.join(build, "bin", "memopt-compile"), mlir,
                    "-o", out, *shakespeare.schedule_flags(steps), *flags],
                   check=True, stdout=subprocess.DEVNULL)
    work = os.path.dirname(mlir)
    command = [os.path.join(out, "train"), "--params", params,
               "--tokens", os.path.join(work, "..", "train.bin"),
               "--seed", str(shakespeare.SEED), "--steps", str(steps),
               "--eval", "--eval-tokens", os.path.join(work, "..", "val.bin"),
               "--eval-batches", str(shakespeare.EVAL_BATCHES)]
    if save:
        command += ["--save", save]
    text = subprocess.run(command, check=True, capture_output=True,
                          text=True).stdout
    return float(text.split()[-1])


def main():
    import torch
    import memopt
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--pretrain", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=500)
    args = parser.parse_args()
    work = tempfile.mkdtemp(prefix="memopt-qlora-bench-")
    shakespeare.prepare(work)
    base_dir = os.path.join(work, "base")
    os.makedirs(base_dir)
    with open(os.path.join(work, "meta.json")) as f:
        import json
        vocab = len(json.load(f)["vocab"])
    example = torch.zeros(shakespeare.BATCH, shakespeare.BLOCK,
                          dtype=torch.int64)
    model = shakespeare.build(vocab)
    memopt.export(model, (example, example),
                  os.path.join(base_dir, "model.mlir"))
    pretrained = os.path.join(work, "pretrained.safetensors")
    base_loss = train(args.build, os.path.join(base_dir, "model.mlir"),
                      os.path.join(base_dir, "out"),
                      os.path.join(base_dir, "model.safetensors"),
                      args.pretrain, save=pretrained)

    # The pretrained weights under LoRA adapters, exported with them.
    tensors = memopt.safetensors.load(pretrained)
    state = {k: torch.from_numpy(v) for k, v in tensors.items()
             if k in dict(model.named_parameters())}
    model.load_state_dict(state, strict=False)
    model = lora_bench.with_lora(model, TARGETS, RANK)
    lora_dir = os.path.join(work, "lora")
    os.makedirs(lora_dir)
    lora_mlir = os.path.join(lora_dir, "model.mlir")
    memopt.export(model, (example, example), lora_mlir)
    params = os.path.join(lora_dir, "model.safetensors")
    results = {}
    for label, flags in (("bf16 base", ()),
                         ("NF4 base", ("--frozen-weights=nf4",))):
        results[label] = train(args.build, lora_mlir,
                               os.path.join(lora_dir, label.split()[0]),
                               params, args.steps, "--mixed-precision=bf16",
                               *flags)
    reference = results["bf16 base"]
    print("pretrained %d steps (FP32): validation loss %.4f"
          % (args.pretrain, base_loss))
    print("| LoRA r=%d, BF16, %d steps | final validation loss | vs bf16 "
          "base |" % (RANK, args.steps))
    print("|---|---:|---:|")
    for label, loss in results.items():
        print("| %s | %.4f | %s |" % (
            label, loss, "" if label == "bf16 base"
            else "%+.2f%%" % (100 * (loss / reference - 1))))
    print("anchor: within 2%")


if __name__ == "__main__":
    main()
