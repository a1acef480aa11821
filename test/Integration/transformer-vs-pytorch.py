# PyTorch's transformer layers, exported by memopt.export and trained for 5
# AdamW steps with memopt-compile (fused attention, the default), checked
# with the parity oracle (memopt.testing, docs/Reliability.md): every loss,
# every final parameter and every first-step gradient within 4x PyTorch
# FP32's own error against float64. Dropout is 0: memopt's dropout masks are
# PyTorch's only in distribution.
#
# prenorm, postnorm: a causal language model, nn.Embedding ->
#   nn.TransformerEncoder (2 layers, d_model 32, 4 heads, feed-forward 64,
#   batch_first, the mask of nn.Transformer.generate_square_subsequent_mask)
#   -> nn.Linear -> F.cross_entropy, with norm_first=True (and a final
#   LayerNorm) or False. Both attentions must fuse (test/python/
#   transformer.py checks that they are `causal`).
# padded: sequence-first nn.MultiheadAttention (batch_first=False, the
#   default need_weights=True with the weights unused) with a
#   key_padding_mask input that hides the last keys of some samples; its
#   attention must fuse, with the mask.
# cross: cross-attention with kdim = vdim != embed_dim (q_proj_weight,
#   k_proj_weight, v_proj_weight), no biases, and a padding mask.
# causal-padded: the language model, post-norm with gelu, given both the
#   causal mask and a src_key_padding_mask input. Each attention then has
#   two masked_fills of -inf, one causal, which fuse into `causal` plus the
#   padding mask (docs/Fusion.md).
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s prenorm %t/prenorm | FileCheck %s --check-prefix=PRE
# RUN: %python %s postnorm %t/postnorm | FileCheck %s --check-prefix=POST
# RUN: %python %s padded %t/padded | FileCheck %s --check-prefix=PAD
# RUN: %python %s cross %t/cross | FileCheck %s --check-prefix=CROSS
# RUN: %python %s causal-padded %t/causal-padded | FileCheck %s --check-prefix=BOTH
#
# PRE: prenorm: trajectory: 5 losses and 29 tensors within the oracle
# PRE: prenorm: gradients: 29 tensors within the oracle
# PRE: prenorm: 2 attention
# POST: postnorm: trajectory: 5 losses and 27 tensors within the oracle
# POST: postnorm: gradients: 27 tensors within the oracle
# POST: postnorm: 2 attention
# PAD: padded: trajectory: 5 losses and 4 tensors within the oracle
# PAD: padded: gradients: 4 tensors within the oracle
# PAD: padded: 1 attention
# CROSS: cross: trajectory: 5 losses and 4 tensors within the oracle
# CROSS: cross: gradients: 4 tensors within the oracle
# CROSS: cross: 1 attention
# BOTH: causal-padded: trajectory: 5 losses and 27 tensors within the oracle
# BOTH: causal-padded: gradients: 27 tensors within the oracle
# BOTH: causal-padded: 2 attention

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
from memopt_run import export_and_check  # noqa: E402

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

STEPS = 5
VOCAB, SEQ, BATCH, D_MODEL, HEADS, FF = 50, 12, 3, 32, 4, 64
MEMORY, MEMORY_DIM = 7, 24


def _padding():
    """Hides the last 4 keys of sample 0 and the last of sample 2."""
    pad = torch.zeros(BATCH, SEQ, dtype=torch.bool)
    pad[0, -4:] = True
    pad[2, -1:] = True
    return pad


class TransformerLM(nn.Module):
    def __init__(self, norm_first, activation="relu"):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D_MODEL)
        layer = nn.TransformerEncoderLayer(D_MODEL, HEADS, FF, dropout=0.0,
                                           activation=activation,
                                           batch_first=True,
                                           norm_first=norm_first)
        self.encoder = nn.TransformerEncoder(
            layer, 2, norm=nn.LayerNorm(D_MODEL) if norm_first else None,
            enable_nested_tensor=False)
        self.head = nn.Linear(D_MODEL, VOCAB)
        # A buffer, so that the oracle's float64 copy converts it too.
        self.register_buffer(
            "causal", nn.Transformer.generate_square_subsequent_mask(SEQ))

    def forward(self, idx, targets):
        x = self.encoder(self.embed(idx), mask=self.causal)
        return F.cross_entropy(self.head(x).view(-1, VOCAB), targets.view(-1))

    @staticmethod
    def example_batch(generator):
        return {"idx": torch.randint(0, VOCAB, (BATCH, SEQ),
                                     generator=generator),
                "targets": torch.randint(0, VOCAB, (BATCH, SEQ),
                                         generator=generator)}


class PaddedLM(TransformerLM):
    def __init__(self):
        super().__init__(norm_first=False, activation="gelu")

    def forward(self, idx, pad, targets):
        x = self.encoder(self.embed(idx), mask=self.causal,
                         src_key_padding_mask=pad)
        return F.cross_entropy(self.head(x).view(-1, VOCAB), targets.view(-1))

    @staticmethod
    def example_batch(generator):
        batch = TransformerLM.example_batch(generator)
        return {"idx": batch["idx"], "pad": _padding(),
                "targets": batch["targets"]}


class PaddedAttention(nn.Module):
    """The batch is dimension 0 of every argument (the oracle reorders the
    samples); the attention itself is sequence-first."""

    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(D_MODEL, HEADS)

    def forward(self, x, pad, y):
        x = x.transpose(0, 1)
        out, _ = self.attn(x, x, x, key_padding_mask=pad)
        return F.mse_loss(out.transpose(0, 1), y)

    @staticmethod
    def example_batch(generator):
        return {"x": torch.randn(BATCH, SEQ, D_MODEL, generator=generator),
                "pad": _padding(),
                "y": torch.randn(BATCH, SEQ, D_MODEL, generator=generator)}


class CrossAttention(nn.Module):
    """Queries of D_MODEL features attend to a memory of MEMORY_DIM."""

    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(D_MODEL, HEADS, bias=False,
                                          kdim=MEMORY_DIM, vdim=MEMORY_DIM,
                                          batch_first=True)

    def forward(self, x, memory, pad, y):
        out = self.attn(x, memory, memory, key_padding_mask=pad,
                        need_weights=False)[0]
        return F.mse_loss(out, y)

    @staticmethod
    def example_batch(generator):
        pad = torch.zeros(BATCH, MEMORY, dtype=torch.bool)
        pad[1, -2:] = True
        return {"x": torch.randn(BATCH, SEQ, D_MODEL, generator=generator),
                "memory": torch.randn(BATCH, MEMORY, MEMORY_DIM,
                                      generator=generator),
                "pad": pad,
                "y": torch.randn(BATCH, SEQ, D_MODEL, generator=generator)}


MODELS = {"prenorm": lambda: TransformerLM(norm_first=True),
          "postnorm": lambda: TransformerLM(norm_first=False),
          "padded": PaddedAttention,
          "cross": CrossAttention,
          "causal-padded": PaddedLM}


def main():
    name, workdir = sys.argv[1], sys.argv[2]
    torch.manual_seed(0)
    model = MODELS[name]()
    batch = model.example_batch(torch.Generator().manual_seed(1))
    ok = export_and_check(name, model, batch, workdir, STEPS)
    with open(os.path.join(workdir, "out", "memory_report.json")) as f:
        fused = json.load(f)["fused_kernels"]
    print(f"{name}: {fused['attention']} attention")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
