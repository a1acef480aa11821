# A model on PyTorch's meta device exports the same IR as on the CPU and
# writes no parameter file. The bundled GPT and LLaMA-style models are built
# twice, once per device, with the same shapes; the meta example arguments
# have no data either. A causal mask wider than 64 elements is written as
# packed bits and, being the same in every layer, once.
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t | FileCheck %s
# RUN: not test -e %t/gpt-meta.safetensors
# RUN: test -e %t/gpt-cpu.safetensors
# RUN: memopt-opt %t/llama-meta.mlir --verify-roundtrip > /dev/null
# RUN: FileCheck %s --check-prefix=LLAMA --input-file=%t/llama-meta.mlir

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..",
                                "examples", "pytorch"))

import torch

import memopt
import models

out = sys.argv[1]


def body(text):
    """The IR without the header comments."""
    return "\n".join(line for line in text.splitlines()
                     if not line.startswith("//"))


for name, make in (("gpt", lambda device: models.GPT(block=128, device=device)),
                   ("llama", lambda device: models.Llama(block=128,
                                                         device=device))):
    torch.manual_seed(0)
    cpu_model = make(None)
    meta_model = make("meta")
    batch = cpu_model.example_batch(torch.Generator().manual_seed(1))
    cpu = memopt.export(cpu_model, tuple(batch.values()),
                        os.path.join(out, name + "-cpu.mlir"))
    meta_args = tuple(t.to("meta") for t in batch.values())
    meta = memopt.export(meta_model, meta_args,
                         os.path.join(out, name + "-meta.mlir"))
    print(name, "same IR:", body(cpu) == body(meta))
    print(name, "meta header:", meta.splitlines()[1])
# CHECK: gpt same IR: True
# CHECK: gpt meta header: // The parameters were on the meta device: there is no parameter file.
# CHECK: llama same IR: True

# LLAMA: memopt.rsqrt
# The 128x128 mask is 2 KiB of packed bits, emitted once for both layers.
# LLAMA: %[[MASK:.*]] = memopt.constant dense<"0xFEFFFFFFFFFFFFFFFF{{[0-9A-F]+}}"> : tensor<1x1x128x128xi1>
# LLAMA: memopt.broadcast %[[MASK]]
# LLAMA: memopt.silu
# LLAMA-NOT: memopt.constant dense<"0x
# LLAMA: memopt.broadcast %[[MASK]]
