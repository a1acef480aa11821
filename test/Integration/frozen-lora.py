# Frozen parameters: a LoRA fine-tune as peft sets it up (the base model's
# weights requires_grad=False, rank-4 adapters on the query and value
# projections), exported, compiled and trained on the host. The frozen
# weights get no gradient, no optimizer state and no update (they leave
# training byte for byte as they came), the account counts them apart, and
# the trained adapters match PyTorch through the parity oracle: in FP32
# (5 AdamW steps and the first-step gradients), with 2 micro-batches, and
# under BF16 (the losses and the first-step gradients, against autocast;
# the frozen weights that only matmuls read are stored in bf16 alone, and
# saved as the f32 tensors they were loaded from).
# Under data parallelism with ZeRO-2 (2 ranks, one BLAS thread) the run is
# byte for byte that of one process with 2 micro-batches, frozen weights
# included.
#
# REQUIRES: torch, mpi
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s %t | FileCheck %s
#
# CHECK: export: 4 trained tensors (param), 19 frozen (frozen)
# CHECK: account: 256 trained parameters, 3280 frozen in 19 tensors; gradients 1024 B, optimizer state 2056 B
# CHECK: frozen weights unchanged after 5 steps: 19 of 19
# CHECK: fp32: trajectory: 5 losses and 23 tensors within the oracle
# CHECK: fp32: gradients: 4 tensors within the oracle
# CHECK: K=2: trajectory: 5 losses and 23 tensors within the oracle
# CHECK: K=2: gradients: 4 tensors within the oracle
# CHECK: bf16: frozen weights 7712 B (2704 elements in bf16, 576 in f32), saved unchanged: 19 of 19
# CHECK: bf16: 5 losses within the oracle
# CHECK: bf16: gradients: 4 tensors within the oracle
# CHECK: ZeRO-2 x 2 ranks vs K=2: 5 losses bit-identical, state byte-identical

import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
import memopt_run  # noqa: E402

STEPS = 5
VOCAB, SEQ, WIDTH, HEADS, RANK = 32, 8, 16, 2, 4


def build():
    import math
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class LoRALinear(nn.Module):
        """peft's LoRA: the frozen base plus B A x scaled by alpha / r."""

        def __init__(self, base, rank, alpha=8.0):
            super().__init__()
            self.base = base
            self.lora_A = nn.Parameter(
                torch.randn(rank, base.in_features) / math.sqrt(rank))
            # peft starts B at zero; small values here give the first step a
            # gradient through A too.
            self.lora_B = nn.Parameter(
                0.1 * torch.randn(base.out_features, rank))
            self.scaling = alpha / rank

        def forward(self, x):
            return self.base(x) + F.linear(
                F.linear(x, self.lora_A), self.lora_B) * self.scaling

    class Decoder(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(VOCAB, WIDTH)
            self.ln1 = nn.LayerNorm(WIDTH)
            self.q = nn.Linear(WIDTH, WIDTH)
            self.k = nn.Linear(WIDTH, WIDTH)
            self.v = nn.Linear(WIDTH, WIDTH)
            self.o = nn.Linear(WIDTH, WIDTH)
            self.ln2 = nn.LayerNorm(WIDTH)
            self.up = nn.Linear(WIDTH, 2 * WIDTH)
            self.down = nn.Linear(2 * WIDTH, WIDTH)
            self.head = nn.Linear(WIDTH, VOCAB)
            self.register_buffer(
                "mask", torch.tril(torch.ones(SEQ, SEQ)).view(1, 1, SEQ, SEQ))

        def forward(self, idx, targets):
            B, T = idx.shape
            x = self.embed(idx)
            h = self.ln1(x)

            def heads(t):
                return t.view(B, T, HEADS, WIDTH // HEADS).transpose(1, 2)
            q, k, v = heads(self.q(h)), heads(self.k(h)), heads(self.v(h))
            att = (q @ k.transpose(-2, -1)) / math.sqrt(WIDTH // HEADS)
            att = att.masked_fill(self.mask[:, :, :T, :T] == 0, float("-inf"))
            y = (att.softmax(-1) @ v).transpose(1, 2).reshape(B, T, WIDTH)
            x = x + self.o(y)
            x = x + self.down(F.gelu(self.up(self.ln2(x))))
            logits = self.head(x)
            return F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))

    torch.manual_seed(0)
    model = Decoder()
    for p in model.parameters():
        p.requires_grad_(False)
    model.q = LoRALinear(model.q, RANK)
    model.v = LoRALinear(model.v, RANK)
    generator = torch.Generator().manual_seed(1)
    batch = {"idx": torch.randint(0, VOCAB, (4, SEQ), generator=generator),
             "targets": torch.randint(0, VOCAB, (4, SEQ),
                                      generator=generator)}
    return model, batch


def main():
    import memopt
    from memopt.testing import Oracle

    workdir = sys.argv[1]
    model, batch = build()
    frozen = [n for n, p in model.named_parameters() if not p.requires_grad]
    trained = [n for n, p in model.named_parameters() if p.requires_grad]
    mlir = os.path.join(workdir, "model.mlir")
    memopt.export(model, tuple(batch.values()), mlir)
    memopt.safetensors.save(batch, os.path.join(workdir, "batch.safetensors"))
    text = open(mlir).read()
    print("export: %d trained tensors (param), %d frozen (frozen)" % (
        len(re.findall(r'memopt.role = "param"', text)),
        len(re.findall(r'memopt.role = "frozen"', text))))

    report = memopt_run.compile_model(mlir, os.path.join(workdir, "out"),
                                      *memopt_run.ADAMW_FLAGS)
    counts = report["parameters"]
    state = report["model_state"]
    n_trained = sum(model.get_parameter(n).numel() for n in trained)
    assert counts["trainable"] == n_trained, counts
    # AdamW: two f32 moments per trained element and the step counter.
    assert state["optimizer"] == 8 * n_trained + 8, state
    assert state["grads"] == 4 * n_trained, state
    print("account: %d trained parameters, %d frozen in %d tensors; "
          "gradients %d B, optimizer state %d B" % (
              counts["trainable"], counts["frozen"], counts["frozen_tensors"],
              state["grads"], state["optimizer"]))

    final = os.path.join(workdir, "final.safetensors")
    memopt_run.train(os.path.join(workdir, "out"), workdir, STEPS, save=final)
    before = memopt.safetensors.load(os.path.join(workdir,
                                                  "model.safetensors"))
    after = memopt.safetensors.load(final)
    same = sum(before[n].tobytes() == after[n].tobytes() for n in frozen)
    print("frozen weights unchanged after %d steps: %d of %d"
          % (STEPS, same, len(frozen)))
    assert not any(np.array_equal(before[n], after[n]) for n in trained)

    memopt_run.check_parity("fp32", Oracle(model, batch, STEPS,
                                           memopt_run.adamw),
                            mlir, workdir, STEPS)
    memopt_run.check_parity(
        "K=2", Oracle(model, batch, STEPS, memopt_run.adamw,
                      micro_batches=2),
        mlir, workdir, STEPS, "--micro-batches=2")

    oracle = Oracle(model, batch, STEPS, memopt_run.adamw, precision="bf16")
    out = os.path.join(workdir, "out-bf16")
    report = memopt_run.compile_model(mlir, out, *memopt_run.ADAMW_FLAGS,
                                      "--mixed-precision=bf16")
    # The frozen weights only matmuls read are stored in bf16 alone; the
    # embedding and the layer norms read theirs in f32.
    in_f32 = sum(model.get_parameter(n).numel() for n in frozen
                 if n.startswith(("embed.", "ln")))
    in_bf16 = counts["frozen"] - in_f32
    assert report["model_state"]["frozen_weights"] == \
        4 * in_f32 + 2 * in_bf16, report["model_state"]
    final = os.path.join(workdir, "final-bf16.safetensors")
    stdout = memopt_run.train(out, workdir, STEPS, save=final)
    after = memopt.safetensors.load(final)
    print("bf16: frozen weights %d B (%d elements in bf16, %d in f32), "
          "saved unchanged: %d of %d" % (
              report["model_state"]["frozen_weights"], in_bf16, in_f32,
              sum(before[n].tobytes() == after[n].tobytes() for n in frozen),
              len(frozen)))
    for what, verdict in (
            ("", oracle.check(memopt_run.losses(stdout))),
            ("gradients: ", oracle.check_gradients(
                *memopt_run.first_step_gradients(
                    mlir, workdir, os.path.join(workdir, "out-bf16-sgd"),
                    "--mixed-precision=bf16")))):
        for failure in verdict.failures:
            print("bf16: MISMATCH %s%s" % (what, failure))
        if verdict.ok:
            print("bf16: %s%s" % (what, verdict.summary()))

    print(memopt_run.zero_vs_k2(mlir, workdir, STEPS))


if __name__ == "__main__":
    main()
