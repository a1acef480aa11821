# PyTorch's transformer decoder layers and nn.Transformer, exported by
# memopt.export and trained for 5 AdamW steps with memopt-compile (fused
# attention, the default), checked with the parity oracle (memopt.testing,
# docs/Reliability.md): every loss, every final parameter and every
# first-step gradient within 4x PyTorch FP32's own error against float64.
# Dropout is 0: memopt's dropout masks are PyTorch's only in distribution.
#
# seq2seq: a sequence-to-sequence language model, two nn.Embeddings ->
#   nn.Transformer (d_model 32, 2 heads, 1 encoder and 2 decoder layers,
#   feed-forward 64, post-norm, relu, sequence-first: batch_first=False, the
#   encoder's and the decoder's final norms) -> nn.Linear -> F.cross_entropy
#   over every position. The decoder's self-attention has the causal
#   tgt_mask of nn.Transformer.generate_square_subsequent_mask and a
#   tgt_key_padding_mask input (causal plus the padding mask); the encoder's
#   self-attention and the decoder's cross-attention the source padding
#   mask input (src_key_padding_mask, memory_key_padding_mask). All 5
#   attentions must fuse.
# decoder: nn.TransformerDecoder alone (2 layers, norm_first=True, gelu,
#   batch_first=True, layer_norm_eps 1e-6, a final LayerNorm) on token
#   embeddings and a memory projected from an input of other width, with the
#   causal tgt_mask and a constant bool memory_mask (each target position
#   sees a window of the memory). All 4 attentions must fuse.
#
# REQUIRES: torch
# RUN: rm -rf %t && mkdir -p %t
# RUN: %python %s seq2seq %t/seq2seq | FileCheck %s --check-prefix=S2S
# RUN: %python %s decoder %t/decoder | FileCheck %s --check-prefix=DEC
#
# S2S: seq2seq: trajectory: 5 losses and 56 tensors within the oracle
# S2S: seq2seq: gradients: 56 tensors within the oracle
# S2S: seq2seq: 5 attention
# DEC: decoder: trajectory: 5 losses and 43 tensors within the oracle
# DEC: decoder: gradients: 43 tensors within the oracle
# DEC: decoder: 4 attention

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "Inputs"))
from memopt_run import export_and_check  # noqa: E402

import torch  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

STEPS = 5
VOCAB, SRC, TGT, BATCH, D_MODEL, HEADS, FF = 50, 9, 12, 3, 32, 2, 64
MEMORY, MEMORY_DIM = 7, 24


def _padding(length, hidden):
    """Hides the last hidden[i] positions of sample i."""
    pad = torch.zeros(BATCH, length, dtype=torch.bool)
    for i, n in enumerate(hidden):
        if n:
            pad[i, -n:] = True
    return pad


class Seq2SeqLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.src_embed = nn.Embedding(VOCAB, D_MODEL)
        self.tgt_embed = nn.Embedding(VOCAB, D_MODEL)
        self.transformer = nn.Transformer(
            D_MODEL, HEADS, num_encoder_layers=1, num_decoder_layers=2,
            dim_feedforward=FF, dropout=0.0)
        self.head = nn.Linear(D_MODEL, VOCAB)
        # A buffer, so that the oracle's float64 copy converts it too.
        self.register_buffer(
            "causal", nn.Transformer.generate_square_subsequent_mask(TGT))

    def forward(self, src, src_pad, tgt, tgt_pad, targets):
        # The arguments are batch-first; the transformer is sequence-first.
        x = self.transformer(
            self.src_embed(src).transpose(0, 1),
            self.tgt_embed(tgt).transpose(0, 1), tgt_mask=self.causal,
            src_key_padding_mask=src_pad, tgt_key_padding_mask=tgt_pad,
            memory_key_padding_mask=src_pad)
        logits = self.head(x.transpose(0, 1))
        return F.cross_entropy(logits.reshape(-1, VOCAB), targets.view(-1))

    @staticmethod
    def example_batch(generator):
        # The padded target positions count in the loss: with the causal
        # mask, only they see the padded keys.
        return {"src": torch.randint(0, VOCAB, (BATCH, SRC),
                                     generator=generator),
                "src_pad": _padding(SRC, (0, 2, 4)),
                "tgt": torch.randint(0, VOCAB, (BATCH, TGT),
                                     generator=generator),
                "tgt_pad": _padding(TGT, (3, 0, 1)),
                "targets": torch.randint(0, VOCAB, (BATCH, TGT),
                                         generator=generator)}


class DecoderLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, D_MODEL)
        self.memory = nn.Linear(MEMORY_DIM, D_MODEL)
        layer = nn.TransformerDecoderLayer(
            D_MODEL, HEADS, FF, dropout=0.0, activation="gelu",
            layer_norm_eps=1e-6, batch_first=True, norm_first=True)
        self.decoder = nn.TransformerDecoder(
            layer, 2, norm=nn.LayerNorm(D_MODEL, eps=1e-6))
        self.head = nn.Linear(D_MODEL, VOCAB)
        self.register_buffer(
            "causal", nn.Transformer.generate_square_subsequent_mask(TGT))
        # Target position t sees memory positions t // 2 - 1 .. t // 2 + 1.
        t = torch.arange(TGT).unsqueeze(1) // 2
        m = torch.arange(MEMORY).unsqueeze(0)
        self.register_buffer("window", (m < t - 1) | (m > t + 1))

    def forward(self, idx, memory, targets):
        x = self.decoder(self.embed(idx), self.memory(memory),
                         tgt_mask=self.causal, memory_mask=self.window)
        return F.cross_entropy(self.head(x).view(-1, VOCAB), targets.view(-1))

    @staticmethod
    def example_batch(generator):
        return {"idx": torch.randint(0, VOCAB, (BATCH, TGT),
                                     generator=generator),
                "memory": torch.randn(BATCH, MEMORY, MEMORY_DIM,
                                      generator=generator),
                "targets": torch.randint(0, VOCAB, (BATCH, TGT),
                                         generator=generator)}


MODELS = {"seq2seq": Seq2SeqLM, "decoder": DecoderLM}


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
