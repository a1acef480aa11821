# A GPT-style decoder: tied embeddings, causal self-attention with a mask
# buffer, dropout, tanh-approximated GELU and padded (ignore_index) targets.
#
# REQUIRES: torch
# RUN: %python %s %t && memopt-opt %t.mlir | FileCheck %s

import math
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import memopt

VOCAB, BLOCK, EMBED, HEADS, LAYERS = 50, 8, 16, 2, 2


class CausalSelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn = nn.Linear(EMBED, 3 * EMBED)
        self.c_proj = nn.Linear(EMBED, EMBED)
        self.attn_dropout = nn.Dropout(0.1)
        self.resid_dropout = nn.Dropout(0.1)
        self.register_buffer(
            "bias", torch.tril(torch.ones(BLOCK, BLOCK)).view(1, 1, BLOCK, BLOCK))

    def forward(self, x):
        B, T, C = x.size(0), x.size(1), x.size(2)
        qkv = self.c_attn(x)
        q = qkv[:, :, :C].view(B, T, HEADS, C // HEADS).transpose(1, 2)
        k = qkv[:, :, C:2 * C].view(B, T, HEADS, C // HEADS).transpose(1, 2)
        v = qkv[:, :, 2 * C:].view(B, T, HEADS, C // HEADS).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = self.attn_dropout(F.softmax(att, dim=-1))
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_fc = nn.Linear(EMBED, 4 * EMBED)
        self.gelu = nn.GELU(approximate="tanh")
        self.c_proj = nn.Linear(4 * EMBED, EMBED)
        self.dropout = nn.Dropout(0.1)

    def forward(self, x):
        return self.dropout(self.c_proj(self.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(EMBED)
        self.attn = CausalSelfAttention()
        self.ln_2 = nn.LayerNorm(EMBED)
        self.mlp = MLP()

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, EMBED)
        self.wpe = nn.Embedding(BLOCK, EMBED)
        self.drop = nn.Dropout(0.1)
        self.h = nn.ModuleList([Block() for _ in range(LAYERS)])
        self.ln_f = nn.LayerNorm(EMBED)
        self.lm_head = nn.Linear(EMBED, VOCAB, bias=False)
        self.lm_head.weight = self.wte.weight
        self.register_buffer("pos", torch.arange(BLOCK))

    def forward(self, idx, targets):
        T = idx.size(1)
        x = self.drop(self.wte(idx) + self.wpe(self.pos[:T]))
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)),
                               targets.view(-1), ignore_index=-1)


torch.manual_seed(0)
idx = torch.randint(0, VOCAB, (2, BLOCK))
targets = torch.randint(0, VOCAB, (2, BLOCK))
targets[:, -2:] = -1
memopt.export(GPT(), (idx, targets), sys.argv[1] + ".mlir")

# Arguments: the inputs, then each parameter once (lm_head.weight is
# wte.weight), in named_parameters() order.
# CHECK-LABEL: func.func @forward(
# CHECK-SAME: %[[IDX:[^:]+]]: tensor<2x8xi64> {memopt.batch_dim = 0 : i64, memopt.name = "idx", memopt.role = "input"}
# CHECK-SAME: %[[TGT:[^:]+]]: tensor<2x8xi64> {memopt.batch_dim = 0 : i64, memopt.name = "targets", memopt.role = "label"}
# CHECK-SAME: %[[WTE:[^:]+]]: tensor<50x16xf32> {memopt.name = "wte.weight", memopt.role = "param"}
# CHECK-SAME: %[[WPE:[^:]+]]: tensor<8x16xf32> {memopt.name = "wpe.weight", memopt.role = "param"}
# CHECK-SAME: {memopt.name = "h.0.ln_1.weight", memopt.role = "param"}
# CHECK-SAME: %[[ATTN_W:[^:]+]]: tensor<48x16xf32> {memopt.name = "h.0.attn.c_attn.weight", memopt.role = "param"}
# CHECK-SAME: {memopt.name = "h.1.mlp.c_proj.bias", memopt.role = "param"}
# CHECK-SAME: %[[LNF_B:[^:]+]]: tensor<16xf32> {memopt.name = "ln_f.bias", memopt.role = "param"})
# CHECK-SAME: -> tensor<f32> attributes {memopt.loss}
# CHECK-NOT: lm_head.weight

# Token and position embeddings; the positions are a folded constant.
# CHECK: %[[TOK:.*]] = memopt.embedding %[[WTE]], %[[IDX]] {memopt.scope = "wte"} : tensor<50x16xf32>, tensor<2x8xi64> -> tensor<2x8x16xf32>
# CHECK: %[[POS:.*]] = memopt.constant dense<[0, 1, 2, 3, 4, 5, 6, 7]> : tensor<8xi64> {memopt.scope = "wpe"}
# CHECK: memopt.embedding %[[WPE]], %[[POS]] {memopt.scope = "wpe"} : tensor<8x16xf32>, tensor<8xi64> -> tensor<8x16xf32>
# CHECK: memopt.broadcast %{{.*}} dims [1, 2] {memopt.scope = ""} : tensor<8x16xf32> to tensor<2x8x16xf32>
# CHECK: memopt.add
# CHECK: memopt.dropout %{{.*}} p 1.000000e-01 seed 0 stream 0 {memopt.scope = "drop"} : tensor<2x8x16xf32>

# First block: layer norm, the fused QKV projection, its slices and the
# head split.
# CHECK: memopt.layer_norm %{{.*}} eps 1.000000e-05 {memopt.scope = "h.0.ln_1"} : tensor<2x8x16xf32>, tensor<16xf32> -> tensor<2x8xf32>
# CHECK: memopt.matmul %{{.*}}, %[[ATTN_W]] transpose_rhs {memopt.scope = "h.0.attn.c_attn"} : tensor<2x8x16xf32>, tensor<48x16xf32> -> tensor<2x8x48xf32>
# CHECK: memopt.slice %{{.*}} starts [0, 0, 0] limits [2, 8, 16] strides [1, 1, 1] {memopt.scope = "h.0.attn"} : tensor<2x8x48xf32> to tensor<2x8x16xf32>
# CHECK: memopt.reshape %{{.*}} {memopt.scope = "h.0.attn"} : tensor<2x8x16xf32> to tensor<2x8x2x8xf32>
# CHECK: %[[Q:.*]] = memopt.transpose %{{.*}} perm [0, 2, 1, 3] {memopt.scope = "h.0.attn"} : tensor<2x8x2x8xf32> to tensor<2x2x8x8xf32>
# CHECK: memopt.slice %{{.*}} starts [0, 0, 16] limits [2, 8, 32] strides [1, 1, 1] {memopt.scope = "h.0.attn"}
# CHECK: %[[K:.*]] = memopt.transpose %{{.*}} perm [0, 2, 1, 3] {memopt.scope = "h.0.attn"} : tensor<2x8x2x8xf32> to tensor<2x2x8x8xf32>
# CHECK: memopt.slice %{{.*}} starts [0, 0, 32] limits [2, 8, 48] strides [1, 1, 1] {memopt.scope = "h.0.attn"}

# q @ k^T folds k's transpose into the matmul; scaling by 1/sqrt(8).
# CHECK: %[[S:.*]] = memopt.matmul %[[Q]], %[[K]] transpose_rhs {memopt.scope = "h.0.attn"} : tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32> -> tensor<2x2x8x8xf32>
# CHECK: %[[SS:.*]] = memopt.mul_scalar %[[S]], 0.35355339059327373 {memopt.scope = "h.0.attn"} : tensor<2x2x8x8xf32>

# The causal mask is folded to an i1 constant and broadcast explicitly.
# CHECK: %[[M:.*]] = memopt.constant dense<{{\[\[\[\[}}false, true, true, true, true, true, true, true], [false, false, true, {{.*}}]]]]> : tensor<1x1x8x8xi1> {memopt.scope = "h.0.attn"}
# CHECK: %[[MB:.*]] = memopt.broadcast %[[M]] dims [0, 1, 2, 3] {memopt.scope = "h.0.attn"} : tensor<1x1x8x8xi1> to tensor<2x2x8x8xi1>
# CHECK: %[[MF:.*]] = memopt.masked_fill %[[SS]], %[[MB]], 0xFFF0000000000000 {memopt.scope = "h.0.attn"} : tensor<2x2x8x8xf32>, tensor<2x2x8x8xi1>
# CHECK: %[[P:.*]] = memopt.softmax %[[MF]] dim 3 {memopt.scope = "h.0.attn"} : tensor<2x2x8x8xf32>
# CHECK: memopt.dropout %[[P]] p 1.000000e-01 seed 0 stream 1 {memopt.scope = "h.0.attn.attn_dropout"}
# CHECK: memopt.matmul {{.*}} {memopt.scope = "h.0.attn"} : tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32> -> tensor<2x2x8x8xf32>
# CHECK: memopt.reshape %{{.*}} {memopt.scope = "h.0.attn"} : tensor<2x8x2x8xf32> to tensor<2x8x16xf32>
# CHECK: memopt.dropout {{.*}} stream 2 {memopt.scope = "h.0.attn.resid_dropout"}
# CHECK: memopt.gelu %{{.*}} approximate<tanh> {memopt.scope = "h.0.mlp.gelu"} : tensor<2x8x64xf32>
# CHECK: memopt.dropout {{.*}} stream 3 {memopt.scope = "h.0.mlp.dropout"}
# CHECK: memopt.dropout {{.*}} stream 6 {memopt.scope = "h.1.mlp.dropout"}

# The tied head reuses wte.weight; the loss flattens the logits and targets.
# CHECK: memopt.layer_norm {{.*}} {memopt.scope = "ln_f"}
# CHECK: %[[LOGITS:.*]] = memopt.matmul %{{.*}}, %[[WTE]] transpose_rhs {memopt.scope = "lm_head"} : tensor<2x8x16xf32>, tensor<50x16xf32> -> tensor<2x8x50xf32>
# CHECK: %[[L2:.*]] = memopt.reshape %[[LOGITS]] {memopt.scope = ""} : tensor<2x8x50xf32> to tensor<16x50xf32>
# CHECK: %[[T2:.*]] = memopt.reshape %[[TGT]] {memopt.scope = ""} : tensor<2x8xi64> to tensor<16xi64>
# CHECK: %[[LOSS:.*]] = memopt.cross_entropy %[[L2]], %[[T2]] ignore_index -1 {memopt.scope = ""} : tensor<16x50xf32>, tensor<16xi64>
# CHECK: return %[[LOSS]] : tensor<f32>
