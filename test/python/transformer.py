# nn.TransformerEncoder and nn.MultiheadAttention are decomposed into memopt
# ops, with the attention as the chain --memopt-fuse-kernels fuses:
# matmul transpose_rhs, mul_scalar 1/sqrt(head_dim), masked_fill, softmax
# over the last dimension, dropout, matmul. Parameters keep their
# state_dict names, ops the scope of the submodule that computes them.
#
# REQUIRES: torch
# RUN: %python %s %t
# RUN: memopt-opt %t.lm.mlir | FileCheck %s --check-prefix=LM
# RUN: memopt-opt --memopt-fuse-kernels %t.lm.mlir | FileCheck %s --check-prefix=LM-FUSED
# RUN: memopt-opt %t.mha.mlir | FileCheck %s --check-prefix=MHA
# RUN: memopt-opt --memopt-fuse-kernels %t.mha.mlir | FileCheck %s --check-prefix=MHA-FUSED

import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

import memopt

VOCAB, SEQ, EMBED, HEADS, FF, BATCH = 50, 8, 16, 2, 32, 2


class TransformerLM(nn.Module):
    """A causal language model from PyTorch's own layers."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, EMBED)
        layer = nn.TransformerEncoderLayer(EMBED, HEADS, FF, dropout=0.1,
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2,
                                             norm=nn.LayerNorm(EMBED))
        self.head = nn.Linear(EMBED, VOCAB)
        # A float mask of 0 and -inf: a bool mask to memopt.
        self.register_buffer(
            "causal", nn.Transformer.generate_square_subsequent_mask(SEQ))

    def forward(self, idx, targets):
        x = self.encoder(self.embed(idx), mask=self.causal)
        return F.cross_entropy(self.head(x).view(-1, VOCAB), targets.view(-1))


class PaddedAttention(nn.Module):
    """Sequence-first self-attention that ignores padded keys; the attention
    weights (need_weights=True by default) are not used."""

    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(EMBED, HEADS)

    def forward(self, x, pad, y):
        out, _ = self.attn(x, x, x, key_padding_mask=pad)
        return F.mse_loss(out, y)


torch.manual_seed(0)
memopt.export(TransformerLM(),
              (torch.randint(0, VOCAB, (BATCH, SEQ)),
               torch.randint(0, VOCAB, (BATCH, SEQ))), sys.argv[1] + ".lm.mlir")
pad = torch.zeros(BATCH, SEQ, dtype=torch.bool)
pad[1, -3:] = True
memopt.export(PaddedAttention(),
              (torch.randn(SEQ, BATCH, EMBED), pad,
               torch.randn(SEQ, BATCH, EMBED)), sys.argv[1] + ".mha.mlir")

# The parameters keep their state_dict names.
# LM-LABEL: func.func @forward(
# LM-SAME: %[[IDX:[^:]+]]: tensor<2x8xi64> {memopt.batch_dim = 0 : i64, memopt.name = "idx", memopt.role = "input"}
# LM-SAME: %[[WQKV:[^:]+]]: tensor<48x16xf32> {memopt.name = "encoder.layers.0.self_attn.in_proj_weight", memopt.role = "param"}
# LM-SAME: %[[BQKV:[^:]+]]: tensor<48xf32> {memopt.name = "encoder.layers.0.self_attn.in_proj_bias", memopt.role = "param"}
# LM-SAME: %[[WO:[^:]+]]: tensor<16x16xf32> {memopt.name = "encoder.layers.0.self_attn.out_proj.weight", memopt.role = "param"}
# LM-SAME: {memopt.name = "encoder.layers.0.self_attn.out_proj.bias", memopt.role = "param"}
# LM-SAME: %[[W1:[^:]+]]: tensor<32x16xf32> {memopt.name = "encoder.layers.0.linear1.weight", memopt.role = "param"}
# LM-SAME: {memopt.name = "encoder.layers.0.linear2.weight", memopt.role = "param"}
# LM-SAME: %[[LN1:[^:]+]]: tensor<16xf32> {memopt.name = "encoder.layers.0.norm1.weight", memopt.role = "param"}
# LM-SAME: {memopt.name = "encoder.layers.1.self_attn.in_proj_weight", memopt.role = "param"}
# LM-SAME: %[[LNF:[^:]+]]: tensor<16xf32> {memopt.name = "encoder.norm.weight", memopt.role = "param"}
# LM-SAME: {memopt.name = "head.weight", memopt.role = "param"}

# norm_first: norm1 before the attention; one product for q, k and v, then
# the heads [batch, heads, seq, head_dim].
# LM: %[[X:.*]] = memopt.embedding {{.*}} {memopt.scope = "embed"}
# LM: %[[H:.*]], %{{.*}}, %{{.*}} = memopt.layer_norm %[[X]], %[[LN1]], {{.*}} {memopt.scope = "encoder.layers.0.norm1"}
# LM: %[[QKV:.*]] = memopt.matmul %[[H]], %[[WQKV]] transpose_rhs {memopt.scope = "encoder.layers.0.self_attn"} : tensor<2x8x16xf32>, tensor<48x16xf32> -> tensor<2x8x48xf32>
# LM: memopt.broadcast %[[BQKV]] dims [2] {memopt.scope = "encoder.layers.0.self_attn"}
# LM: memopt.slice %{{.*}} starts [0, 0, 0] limits [2, 8, 16] strides [1, 1, 1] {memopt.scope = "encoder.layers.0.self_attn"}
# LM: memopt.slice %{{.*}} starts [0, 0, 16] limits [2, 8, 32] strides [1, 1, 1] {memopt.scope = "encoder.layers.0.self_attn"}
# LM: memopt.slice %{{.*}} starts [0, 0, 32] limits [2, 8, 48] strides [1, 1, 1] {memopt.scope = "encoder.layers.0.self_attn"}
# LM: %[[Q:.*]] = memopt.transpose %{{.*}} perm [0, 2, 1, 3] {memopt.scope = "encoder.layers.0.self_attn"} : tensor<2x8x2x8xf32> to tensor<2x2x8x8xf32>
# LM: %[[K:.*]] = memopt.transpose %{{.*}} perm [0, 2, 1, 3] {memopt.scope = "encoder.layers.0.self_attn"} : tensor<2x8x2x8xf32> to tensor<2x2x8x8xf32>
# LM: %[[V:.*]] = memopt.transpose %{{.*}} perm [0, 2, 1, 3] {memopt.scope = "encoder.layers.0.self_attn"} : tensor<2x8x2x8xf32> to tensor<2x2x8x8xf32>

# The chain: q k^T, 1/sqrt(8), the causal mask (generate_square_subsequent_mask's
# -inf entries, true above the diagonal), softmax, the attention dropout, p v.
# LM: %[[S:.*]] = memopt.matmul %[[Q]], %[[K]] transpose_rhs {memopt.scope = "encoder.layers.0.self_attn"} : tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32> -> tensor<2x2x8x8xf32>
# LM: %[[SS:.*]] = memopt.mul_scalar %[[S]], 0.35355339059327373 {memopt.scope = "encoder.layers.0.self_attn"}
# LM: %[[M:.*]] = memopt.constant dense<{{\[\[\[\[}}false, true, true, true, true, true, true, true], [false, false, true, {{.*}}, [false, false, false, false, false, false, false, false]]]]> : tensor<1x1x8x8xi1> {memopt.scope = "encoder.layers.0.self_attn"}
# LM: %[[MB:.*]] = memopt.broadcast %[[M]] dims [0, 1, 2, 3] {memopt.scope = "encoder.layers.0.self_attn"} : tensor<1x1x8x8xi1> to tensor<2x2x8x8xi1>
# LM: %[[F:.*]] = memopt.masked_fill %[[SS]], %[[MB]], 0xFFF0000000000000 {memopt.scope = "encoder.layers.0.self_attn"}
# LM: %[[P:.*]] = memopt.softmax %[[F]] dim 3 {memopt.scope = "encoder.layers.0.self_attn"} : tensor<2x2x8x8xf32>
# LM: %[[PD:.*]] = memopt.dropout %[[P]] p 1.000000e-01 seed 0 stream 0 {memopt.scope = "encoder.layers.0.self_attn"}
# LM: %[[O:.*]] = memopt.matmul %[[PD]], %[[V]] {memopt.scope = "encoder.layers.0.self_attn"} : tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32> -> tensor<2x2x8x8xf32>

# Back to [batch, seq, embed], out_proj, dropout1 and the residual.
# LM: memopt.transpose %[[O]] perm [0, 2, 1, 3] {memopt.scope = "encoder.layers.0.self_attn"}
# LM: memopt.matmul %{{.*}}, %[[WO]] transpose_rhs {memopt.scope = "encoder.layers.0.self_attn.out_proj"}
# LM: %[[D1:.*]] = memopt.dropout %{{.*}} stream 1 {memopt.scope = "encoder.layers.0.dropout1"}
# LM: %[[R1:.*]] = memopt.add %[[X]], %[[D1]] {memopt.scope = "encoder.layers.0"}

# The feed-forward block on norm2 of the residual.
# LM: memopt.layer_norm %[[R1]], {{.*}} {memopt.scope = "encoder.layers.0.norm2"}
# LM: memopt.matmul %{{.*}}, %[[W1]] transpose_rhs {memopt.scope = "encoder.layers.0.linear1"}
# LM: memopt.relu %{{.*}} {memopt.scope = "encoder.layers.0"} : tensor<2x8x32xf32>
# LM: memopt.dropout %{{.*}} stream 2 {memopt.scope = "encoder.layers.0.dropout"}
# LM: {memopt.scope = "encoder.layers.0.linear2"}
# LM: memopt.dropout %{{.*}} stream 3 {memopt.scope = "encoder.layers.0.dropout2"}
# LM: memopt.add %[[R1]], %{{.*}} {memopt.scope = "encoder.layers.0"}
# LM: memopt.softmax %{{.*}} dim 3 {memopt.scope = "encoder.layers.1.self_attn"}
# LM: memopt.dropout %{{.*}} stream 4 {memopt.scope = "encoder.layers.1.self_attn"}
# LM: memopt.dropout %{{.*}} stream 7 {memopt.scope = "encoder.layers.1.dropout2"}
# LM: memopt.layer_norm %{{.*}}, %[[LNF]], {{.*}} {memopt.scope = "encoder.norm"}
# LM: memopt.cross_entropy

# Fused: one causal attention per layer, with its dropout, and no score
# matrix left.
# LM-FUSED-LABEL: func.func @forward(
# LM-FUSED-NOT: memopt.softmax
# LM-FUSED-NOT: memopt.masked_fill
# LM-FUSED: memopt.attention %{{.*}}, %{{.*}}, %{{.*}} scale 0.35355339059327373 causal dropout 1.000000e-01 {memopt.scope = "encoder.layers.0.self_attn"} : tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32> -> tensor<2x2x8x8xf32>, tensor<2x2x8xf32>
# LM-FUSED-NOT: memopt.softmax
# LM-FUSED-NOT: memopt.masked_fill
# LM-FUSED: memopt.attention %{{.*}}, %{{.*}}, %{{.*}} scale 0.35355339059327373 causal dropout 1.000000e-01 stream 4 {memopt.scope = "encoder.layers.1.self_attn"}
# LM-FUSED-NOT: memopt.softmax
# LM-FUSED-NOT: memopt.masked_fill
# LM-FUSED: return

# Sequence-first: the heads come from [seq, batch, embed]; the padding mask
# [batch, keys] is broadcast over heads and queries.
# MHA-LABEL: func.func @forward(
# MHA-SAME: %[[X:[^:]+]]: tensor<8x2x16xf32> {{.*}}memopt.name = "x", memopt.role = "input"}
# MHA-SAME: %[[PAD:[^:]+]]: tensor<2x8xi1> {memopt.name = "pad", memopt.role = "input"}
# MHA-SAME: %[[W:[^:]+]]: tensor<48x16xf32> {memopt.name = "attn.in_proj_weight", memopt.role = "param"}
# MHA-SAME: %[[B:[^:]+]]: tensor<48xf32> {memopt.name = "attn.in_proj_bias", memopt.role = "param"}
# MHA-SAME: %[[WO:[^:]+]]: tensor<16x16xf32> {memopt.name = "attn.out_proj.weight", memopt.role = "param"}
# MHA-SAME: %[[BO:[^:]+]]: tensor<16xf32> {memopt.name = "attn.out_proj.bias", memopt.role = "param"})
# MHA: memopt.matmul %[[X]], %[[W]] transpose_rhs {memopt.scope = "attn"} : tensor<8x2x16xf32>, tensor<48x16xf32> -> tensor<8x2x48xf32>
# MHA: %[[Q:.*]] = memopt.transpose %{{.*}} perm [1, 2, 0, 3] {memopt.scope = "attn"} : tensor<8x2x2x8xf32> to tensor<2x2x8x8xf32>
# MHA: %[[K:.*]] = memopt.transpose %{{.*}} perm [1, 2, 0, 3] {memopt.scope = "attn"} : tensor<8x2x2x8xf32> to tensor<2x2x8x8xf32>
# MHA: %[[V:.*]] = memopt.transpose %{{.*}} perm [1, 2, 0, 3] {memopt.scope = "attn"} : tensor<8x2x2x8xf32> to tensor<2x2x8x8xf32>
# MHA: %[[S:.*]] = memopt.matmul %[[Q]], %[[K]] transpose_rhs {memopt.scope = "attn"} : tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32> -> tensor<2x2x8x8xf32>
# MHA: %[[SS:.*]] = memopt.mul_scalar %[[S]], 0.35355339059327373 {memopt.scope = "attn"}
# MHA: %[[M:.*]] = memopt.reshape %[[PAD]] {memopt.scope = "attn"} : tensor<2x8xi1> to tensor<2x1x1x8xi1>
# MHA: %[[MB:.*]] = memopt.broadcast %[[M]] dims [0, 1, 2, 3] {memopt.scope = "attn"} : tensor<2x1x1x8xi1> to tensor<2x2x8x8xi1>
# MHA: %[[F:.*]] = memopt.masked_fill %[[SS]], %[[MB]], 0xFFF0000000000000 {memopt.scope = "attn"}
# MHA: %[[P:.*]] = memopt.softmax %[[F]] dim 3 {memopt.scope = "attn"}
# MHA: %[[O:.*]] = memopt.matmul %[[P]], %[[V]] {memopt.scope = "attn"} : tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32> -> tensor<2x2x8x8xf32>
# MHA: %[[OT:.*]] = memopt.transpose %[[O]] perm [2, 0, 1, 3] {memopt.scope = "attn"} : tensor<2x2x8x8xf32> to tensor<8x2x2x8xf32>
# MHA: %[[OR:.*]] = memopt.reshape %[[OT]] {memopt.scope = "attn"} : tensor<8x2x2x8xf32> to tensor<8x2x16xf32>
# MHA: memopt.matmul %[[OR]], %[[WO]] transpose_rhs {memopt.scope = "attn.out_proj"}
# MHA: memopt.broadcast %[[BO]] dims [2] {memopt.scope = "attn.out_proj"}
# MHA: memopt.mse_loss

# Fused: the padding mask goes in as [batch, 1, 1, keys].
# MHA-FUSED-LABEL: func.func @forward(
# MHA-FUSED-SAME: %[[PAD:[^:]+]]: tensor<2x8xi1>
# MHA-FUSED-NOT: memopt.softmax
# MHA-FUSED: %[[M:.*]] = memopt.reshape %[[PAD]] {memopt.scope = "attn"} : tensor<2x8xi1> to tensor<2x1x1x8xi1>
# MHA-FUSED: memopt.attention %{{.*}}, %{{.*}}, %{{.*}} mask %[[M]] scale 0.35355339059327373 {memopt.scope = "attn"} : tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x2x8x8xf32>, tensor<2x1x1x8xi1> -> tensor<2x2x8x8xf32>, tensor<2x2x8xf32>
# MHA-FUSED-NOT: memopt.softmax
# MHA-FUSED-NOT: memopt.masked_fill
# MHA-FUSED: return
