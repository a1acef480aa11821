"""LoRA against full fine-tuning: the planned peak of one training step.

    /usr/bin/python3 bench/lora/run.py [--build BUILD] [--work DIR]

Builds the bundled large configurations on PyTorch's meta device
(examples/pytorch/models.py), adds LoRA adapters as peft does (the base
frozen with requires_grad=False; W x + B A x alpha / r, A random, B zero):

  gpt2-small  r = 8 on c_attn (peft's GPT-2 target), batch 8 x 1024
  llama-7b    r = 16 on every linear layer of the blocks (wq, wk, wv, wo,
              w1, w2, w3), batch 1 x 2048

and compiles each with and without the adapters, and with the adapters
over an NF4 base (QLoRA, --frozen-weights=nf4; docs/Quantization.md)
(--report-only, AdamW, --mixed-precision=bf16, fused attention and LM-head
loss, gradients released), without rematerialization, with --remat=sqrt
and with --remat=revolve, printing the trained parameters and the planned peak
(arguments + arena), next to torchtune's measured Llama-3.1-8B peaks on one
GPU: LoRA 16.2 GiB, QLoRA 7.4 GiB (activation checkpointing; REFERENCE.md).
"""

import argparse
import math
import os
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "python"))
sys.path.insert(0, os.path.join(ROOT, "examples", "pytorch"))

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import memopt  # noqa: E402
import models  # noqa: E402

GIB = 2.0 ** 30


class LoRALinear(nn.Module):
    def __init__(self, base, rank, alpha=16.0):
        super().__init__()
        self.base = base
        device = base.weight.device
        self.lora_A = nn.Parameter(torch.empty(rank, base.in_features,
                                               device=device))
        self.lora_B = nn.Parameter(torch.zeros(base.out_features, rank,
                                               device=device))
        if device.type != "meta":
            nn.init.kaiming_uniform_(self.lora_A, a=math.sqrt(5))
        self.scaling = alpha / rank

    def forward(self, x):
        return self.base(x) + F.linear(F.linear(x, self.lora_A),
                                       self.lora_B) * self.scaling


def with_lora(model, targets, rank):
    for p in model.parameters():
        p.requires_grad_(False)
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, nn.Linear) and name in targets:
                setattr(module, name, LoRALinear(child, rank))
    return model


CONFIGS = {
    "gpt2-small": (models.gpt2_small, (8, 1024), {"c_attn"}, 8),
    "llama-7b": (models.llama_7b, (1, 2048),
                 {"wq", "wk", "wv", "wo", "w1", "w2", "w3"}, 16),
}


def compile_report(build, mlir, remat, *flags):
    text = subprocess.run(
        [os.path.join(build, "bin", "memopt-compile"), mlir, "--report-only",
         "--mixed-precision=bf16", "--remat=" + remat, *flags], check=True,
        capture_output=True, text=True).stdout
    peak = int(re.search(r"allocated for the step: .* \((\d+) B\)",
                         text).group(1))
    trained = int(re.search(r"(\d+) parameters in", text).group(1))
    return peak, trained


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--work", default=None)
    args = parser.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="memopt-lora-")
    os.makedirs(work, exist_ok=True)
    print("| model | fine-tuning | trained parameters | planned peak | "
          "with --remat=sqrt | with --remat=revolve |")
    print("|---|---|---:|---:|---:|---:|")
    for name, (build_model, (batch, seq), targets, rank) in CONFIGS.items():
        idx = torch.empty(batch, seq, dtype=torch.int64, device="meta")
        for label, lora, flags in (
                ("full", False, ()), ("LoRA r=%d" % rank, True, ()),
                ("QLoRA r=%d (NF4 base)" % rank, True,
                 ("--frozen-weights=nf4",))):
            model = build_model(device="meta")
            if lora:
                model = with_lora(model, targets, rank)
            mlir = os.path.join(work, "%s-%s.mlir" % (name, lora))
            memopt.export(model, (idx, idx), mlir)
            peak, trained = compile_report(args.build, mlir, "none", *flags)
            sqrt, _ = compile_report(args.build, mlir, "sqrt", *flags)
            revolve, _ = compile_report(args.build, mlir, "revolve", *flags)
            print("| %s | %s | %d | %.2f GiB | %.2f GiB | %.2f GiB |" % (
                name, label, trained, peak / GIB, sqrt / GIB,
                revolve / GIB))
    print("\nanchor: torchtune, Llama-3.1-8B on one GPU, measured (bf16, "
          "activation checkpointing, chunked CE): LoRA 16.2 GiB, QLoRA "
          "7.4 GiB")


if __name__ == "__main__":
    main()
