// RUN: memopt-opt -split-input-file --memopt-fuse-kernels %s | FileCheck %s
// RUN: memopt-opt -split-input-file --memopt-fuse-kernels="attention=false lm-loss=false" %s | FileCheck %s --check-prefix=OFF
// RUN: memopt-opt -split-input-file --memopt-fuse-kernels="lm-loss-chunk=3" %s | FileCheck %s --check-prefix=CHUNK

// --memopt-fuse-kernels: attention chains become memopt.attention, a last
// linear layer into cross_entropy becomes memopt.linear_cross_entropy.

// Causal attention as GPT-2 writes it: q k^T, a scale, masked_fill with a
// broadcast lower-triangular constant, softmax, dropout, p v. The constant
// becomes `causal`, the dropout's attributes move over, nothing score-sized
// is left.
// CHECK-LABEL: func.func @causal
// CHECK: %[[O:.*]], %{{.*}} = memopt.attention %arg0, %arg1, %arg2 scale 1.250000e-01 causal dropout 1.000000e-01 stream 3 {memopt.scope = "attn"} : tensor<2x4x4x8xf32>, tensor<2x4x4x8xf32>, tensor<2x4x4x8xf32> -> tensor<2x4x4x8xf32>, tensor<2x4x4xf32>
// CHECK-NOT: memopt.softmax
// CHECK-NOT: memopt.constant
// CHECK-NOT: memopt.broadcast
// CHECK: memopt.reduce_sum %[[O]]
// OFF-LABEL: func.func @causal
// OFF: memopt.softmax
// OFF-NOT: memopt.attention
func.func @causal(%q: tensor<2x4x4x8xf32> {memopt.role = "input", memopt.name = "q"}, %k: tensor<2x4x4x8xf32> {memopt.role = "input", memopt.name = "k"},
                  %v: tensor<2x4x4x8xf32> {memopt.role = "input", memopt.name = "v"}) -> tensor<f32>
    attributes {memopt.loss} {
  %s = memopt.matmul %q, %k transpose_rhs : tensor<2x4x4x8xf32>, tensor<2x4x4x8xf32> -> tensor<2x4x4x4xf32>
  %t = memopt.mul_scalar %s, 0.125 : tensor<2x4x4x4xf32>
  %c = memopt.constant dense<[[false, true, true, true], [false, false, true, true], [false, false, false, true], [false, false, false, false]]> : tensor<4x4xi1>
  %m = memopt.broadcast %c dims [2, 3] : tensor<4x4xi1> to tensor<2x4x4x4xi1>
  %f = memopt.masked_fill %t, %m, 0xFFF0000000000000 : tensor<2x4x4x4xf32>, tensor<2x4x4x4xi1>
  %p = memopt.softmax %f dim 3 {memopt.scope = "attn"} : tensor<2x4x4x4xf32>
  %d = memopt.dropout %p p 1.0e-01 seed 0 stream 3 : tensor<2x4x4x4xf32>
  %o = memopt.matmul %d, %v : tensor<2x4x4x4xf32>, tensor<2x4x4x8xf32> -> tensor<2x4x4x8xf32>
  %r = memopt.reduce_sum %o dims [0, 1, 2, 3] : tensor<2x4x4x8xf32> to tensor<f32>
  return %r : tensor<f32>
}

// -----

// Another mask stays an operand, before its broadcast, reshaped to the
// scores' rank; a scale after the fill scales the fill value; k given
// transposed; sq != sk.
// CHECK-LABEL: func.func @padding_mask
// CHECK: %[[M:.*]] = memopt.reshape %arg3 : tensor<2x1x6xi1> to tensor<2x1x1x6xi1>
// CHECK: memopt.attention %arg0, %arg1, %arg2 mask %[[M]] scale 5.000000e-01 mask_value -5.000000e+03 : tensor<2x3x4x8xf32>, tensor<2x3x6x8xf32>, tensor<2x3x6x5xf32>, tensor<2x1x1x6xi1> -> tensor<2x3x4x5xf32>, tensor<2x3x4xf32>
func.func @padding_mask(%q: tensor<2x3x4x8xf32> {memopt.role = "input", memopt.name = "q"}, %k: tensor<2x3x6x8xf32> {memopt.role = "input", memopt.name = "k"},
                        %v: tensor<2x3x6x5xf32> {memopt.role = "input", memopt.name = "v"}, %pad: tensor<2x1x6xi1> {memopt.role = "input", memopt.name = "pad"})
    -> tensor<f32> attributes {memopt.loss} {
  %kt = memopt.transpose %k perm [0, 1, 3, 2] : tensor<2x3x6x8xf32> to tensor<2x3x8x6xf32>
  %s = memopt.matmul %q, %kt : tensor<2x3x4x8xf32>, tensor<2x3x8x6xf32> -> tensor<2x3x4x6xf32>
  %m = memopt.broadcast %pad dims [0, 2, 3] : tensor<2x1x6xi1> to tensor<2x3x4x6xi1>
  %f = memopt.masked_fill %s, %m, -1.0e4 : tensor<2x3x4x6xf32>, tensor<2x3x4x6xi1>
  %t = memopt.mul_scalar %f, 0.5 : tensor<2x3x4x6xf32>
  %p = memopt.softmax %t dim 3 : tensor<2x3x4x6xf32>
  %o = memopt.matmul %p, %v : tensor<2x3x4x6xf32>, tensor<2x3x6x5xf32> -> tensor<2x3x4x5xf32>
  %r = memopt.reduce_sum %o dims [0, 1, 2, 3] : tensor<2x3x4x5xf32> to tensor<f32>
  return %r : tensor<f32>
}

// -----

// The probabilities are also read elsewhere: they must exist, nothing is
// fused.
// CHECK-LABEL: func.func @probs_used
// CHECK-NOT: memopt.attention
// CHECK: memopt.softmax
func.func @probs_used(%q: tensor<4x8xf32> {memopt.role = "input", memopt.name = "q"}, %k: tensor<4x8xf32> {memopt.role = "input", memopt.name = "k"},
                      %v: tensor<4x8xf32> {memopt.role = "input", memopt.name = "v"}) -> tensor<f32>
    attributes {memopt.loss} {
  %s = memopt.matmul %q, %k transpose_rhs : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x4xf32>
  %p = memopt.softmax %s dim 1 : tensor<4x4xf32>
  %o = memopt.matmul %p, %v : tensor<4x4xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %r = memopt.reduce_sum %o dims [0, 1] : tensor<4x8xf32> to tensor<f32>
  %rp = memopt.reduce_sum %p dims [0, 1] : tensor<4x4xf32> to tensor<f32>
  %l = memopt.add %r, %rp : tensor<f32>
  return %l : tensor<f32>
}

// -----

// A softmax over another dimension is not attention.
// CHECK-LABEL: func.func @softmax_dim0
// CHECK-NOT: memopt.attention
func.func @softmax_dim0(%q: tensor<4x8xf32> {memopt.role = "input", memopt.name = "q"}, %k: tensor<4x8xf32> {memopt.role = "input", memopt.name = "k"},
                        %v: tensor<4x8xf32> {memopt.role = "input", memopt.name = "v"}) -> tensor<f32>
    attributes {memopt.loss} {
  %s = memopt.matmul %q, %k transpose_rhs : tensor<4x8xf32>, tensor<4x8xf32> -> tensor<4x4xf32>
  %p = memopt.softmax %s dim 0 : tensor<4x4xf32>
  %o = memopt.matmul %p, %v : tensor<4x4xf32>, tensor<4x8xf32> -> tensor<4x8xf32>
  %r = memopt.reduce_sum %o dims [0, 1] : tensor<4x8xf32> to tensor<f32>
  return %r : tensor<f32>
}

// -----

// The LM head: [batch, seq, width] x [vocab, width]^T plus a bias, reshaped
// to [tokens, vocab] for the loss. With a chunk of 3 classes, x is reshaped
// to the labels' shape and no logits tensor is left. By default the chunk
// would be the whole vocabulary (the 1 MiB floor), which saves nothing:
// nothing is fused.
// CHECK-LABEL: func.func @lm_head
// CHECK-NOT: memopt.linear_cross_entropy
// CHECK: memopt.cross_entropy
// CHUNK-LABEL: func.func @lm_head
// CHUNK: %[[X:.*]] = memopt.reshape %arg0 {memopt.scope = "loss"} : tensor<2x3x8xf32> to tensor<6x8xf32>
// CHUNK: %[[L:.*]], %{{.*}} = memopt.linear_cross_entropy %[[X]], %arg1, %arg3 bias %arg2 chunk 3 ignore_index 0 reduction<sum> {memopt.scope = "lm_head"} : tensor<6x8xf32>, tensor<10x8xf32>, tensor<6xi64>, tensor<10xf32> -> tensor<6xf32>
// CHUNK-NOT: memopt.matmul
// CHUNK-NOT: memopt.cross_entropy
// CHUNK: return %[[L]]
// OFF-LABEL: func.func @lm_head
// OFF: memopt.cross_entropy
func.func @lm_head(%x: tensor<2x3x8xf32> {memopt.role = "input", memopt.name = "x"}, %w: tensor<10x8xf32> {memopt.role = "param", memopt.name = "w"},
                   %b: tensor<10xf32> {memopt.role = "param", memopt.name = "b"}, %y: tensor<6xi64> {memopt.role = "label", memopt.name = "y"}) -> tensor<f32>
    attributes {memopt.loss} {
  %h = memopt.matmul %x, %w transpose_rhs {memopt.scope = "lm_head"} : tensor<2x3x8xf32>, tensor<10x8xf32> -> tensor<2x3x10xf32>
  %bb = memopt.broadcast %b dims [2] : tensor<10xf32> to tensor<2x3x10xf32>
  %z = memopt.add %h, %bb : tensor<2x3x10xf32>
  %r = memopt.reshape %z : tensor<2x3x10xf32> to tensor<6x10xf32>
  %l = memopt.cross_entropy %r, %y ignore_index 0 reduction<sum> {memopt.scope = "loss"} : tensor<6x10xf32>, tensor<6xi64>
  return %l : tensor<f32>
}

// -----

// The default chunk: f32 logits for every row in no more than one f32 copy
// of x or 1 MiB. 512 rows of width 64 (128 KiB) and 4096 classes: 512
// classes per chunk (1 MiB / (512 rows * 4 B)).
// CHECK-LABEL: func.func @chunked
// CHECK: memopt.linear_cross_entropy %arg0, %arg1, %arg2 chunk 512 :
func.func @chunked(%x: tensor<512x64xf32> {memopt.role = "input", memopt.name = "x"}, %w: tensor<4096x64xf32> {memopt.role = "param", memopt.name = "w"},
                   %y: tensor<512xi32> {memopt.role = "label", memopt.name = "y"}) -> tensor<f32>
    attributes {memopt.loss} {
  %h = memopt.matmul %x, %w transpose_rhs : tensor<512x64xf32>, tensor<4096x64xf32> -> tensor<512x4096xf32>
  %l = memopt.cross_entropy %h, %y : tensor<512x4096xf32>, tensor<512xi32>
  return %l : tensor<f32>
}

// -----

// With label smoothing, which the fused kernels do not compute, nothing is
// fused: neither at the default chunk (@chunked's shapes) nor at a chosen
// one.
// CHECK-LABEL: func.func @label_smoothing
// CHECK-NOT: memopt.linear_cross_entropy
// CHECK: %[[H:.*]] = memopt.matmul %arg0, %arg1 transpose_rhs
// CHECK-NEXT: memopt.cross_entropy %[[H]], %arg2 label_smoothing 1.000000e-01 :
// CHUNK-LABEL: func.func @label_smoothing
// CHUNK-NOT: memopt.linear_cross_entropy
// CHUNK: memopt.cross_entropy %{{.*}}, %arg2 label_smoothing 1.000000e-01 :
func.func @label_smoothing(%x: tensor<512x64xf32> {memopt.role = "input", memopt.name = "x"}, %w: tensor<4096x64xf32> {memopt.role = "param", memopt.name = "w"},
                           %y: tensor<512xi32> {memopt.role = "label", memopt.name = "y"}) -> tensor<f32>
    attributes {memopt.loss} {
  %h = memopt.matmul %x, %w transpose_rhs : tensor<512x64xf32>, tensor<4096x64xf32> -> tensor<512x4096xf32>
  %l = memopt.cross_entropy %h, %y label_smoothing 0.1 : tensor<512x4096xf32>, tensor<512xi32>
  return %l : tensor<f32>
}

// -----

// The logits are also read elsewhere: nothing is fused.
// CHECK-LABEL: func.func @logits_used
// CHECK-NOT: memopt.linear_cross_entropy
func.func @logits_used(%x: tensor<4x8xf32> {memopt.role = "input", memopt.name = "x"}, %w: tensor<10x8xf32> {memopt.role = "param", memopt.name = "w"},
                       %y: tensor<4xi64> {memopt.role = "label", memopt.name = "y"}) -> tensor<f32>
    attributes {memopt.loss} {
  %h = memopt.matmul %x, %w transpose_rhs : tensor<4x8xf32>, tensor<10x8xf32> -> tensor<4x10xf32>
  %l = memopt.cross_entropy %h, %y : tensor<4x10xf32>, tensor<4xi64>
  %rh = memopt.reduce_sum %h dims [0, 1] : tensor<4x10xf32> to tensor<f32>
  %t = memopt.add %l, %rh : tensor<f32>
  return %t : tensor<f32>
}

// -----

// A causal mask built from a small constant through views (as
// bench/gpu/gen_gpt.py builds it: row i of [T, 2T-1] starts i elements into
// a repeated [F, T...T, F...F] pattern) is recognised element by element:
// `causal`, and nothing of the mask is left. Off by one (the diagonal
// masked too), it is kept as the op's mask.
// CHECK-LABEL: func.func @viewed_causal
// CHECK-NOT: starts [0, 3]
// CHECK: memopt.attention %arg0, %arg0, %arg0 scale 1.000000e+00 causal :
// CHECK: %[[WRONG:.*]] = memopt.slice %{{.*}} starts [0, 2]
// CHECK: %[[M:.*]] = memopt.reshape %[[WRONG]] : tensor<4x4xi1> to tensor<1x1x4x4xi1>
// CHECK: memopt.attention %arg0, %arg0, %arg0 mask %[[M]] scale 1.000000e+00 :
func.func @viewed_causal(%q: tensor<1x1x4x2xf32> {memopt.role = "input", memopt.name = "q"}) -> tensor<f32>
    attributes {memopt.loss} {
  %w = memopt.constant dense<[false, false, false, false, true, true, true, true]> : tensor<8xi1>
  %b = memopt.broadcast %w dims [1] : tensor<8xi1> to tensor<4x8xi1>
  %f = memopt.reshape %b : tensor<4x8xi1> to tensor<32xi1>
  %c = memopt.slice %f starts [0] limits [28] strides [1] : tensor<32xi1> to tensor<28xi1>
  %r = memopt.reshape %c : tensor<28xi1> to tensor<4x7xi1>
  %causal = memopt.slice %r starts [0, 3] limits [4, 7] strides [1, 1] : tensor<4x7xi1> to tensor<4x4xi1>
  %m = memopt.broadcast %causal dims [2, 3] : tensor<4x4xi1> to tensor<1x1x4x4xi1>
  %s = memopt.matmul %q, %q transpose_rhs : tensor<1x1x4x2xf32>, tensor<1x1x4x2xf32> -> tensor<1x1x4x4xf32>
  %fl = memopt.masked_fill %s, %m, 0xFFF0000000000000 : tensor<1x1x4x4xf32>, tensor<1x1x4x4xi1>
  %p = memopt.softmax %fl dim 3 : tensor<1x1x4x4xf32>
  %o = memopt.matmul %p, %q : tensor<1x1x4x4xf32>, tensor<1x1x4x2xf32> -> tensor<1x1x4x2xf32>
  %wrong = memopt.slice %r starts [0, 2] limits [4, 6] strides [1, 1] : tensor<4x7xi1> to tensor<4x4xi1>
  %m2 = memopt.broadcast %wrong dims [2, 3] : tensor<4x4xi1> to tensor<1x1x4x4xi1>
  %s2 = memopt.matmul %q, %q transpose_rhs : tensor<1x1x4x2xf32>, tensor<1x1x4x2xf32> -> tensor<1x1x4x4xf32>
  %fl2 = memopt.masked_fill %s2, %m2, 0xFFF0000000000000 : tensor<1x1x4x4xf32>, tensor<1x1x4x4xi1>
  %p2 = memopt.softmax %fl2 dim 3 : tensor<1x1x4x4xf32>
  %o2 = memopt.matmul %p2, %q : tensor<1x1x4x4xf32>, tensor<1x1x4x2xf32> -> tensor<1x1x4x2xf32>
  %sum = memopt.add %o, %o2 : tensor<1x1x4x2xf32>
  %l = memopt.reduce_sum %sum dims [0, 1, 2, 3] : tensor<1x1x4x2xf32> to tensor<f32>
  return %l : tensor<f32>
}

// -----

// A causal fill and a padding fill of the same value: `causal` plus the
// padding mask. With different values, or two non-causal masks, nothing is
// fused.
// CHECK-LABEL: func.func @causal_and_padding
// CHECK: %[[M:.*]] = memopt.reshape %arg1 : tensor<2x4xi1> to tensor<2x1x1x4xi1>
// CHECK: memopt.attention %arg0, %arg0, %arg0 mask %[[M]] scale 5.000000e-01 causal :
// CHECK: memopt.softmax
// CHECK: memopt.softmax
func.func @causal_and_padding(%q: tensor<2x3x4x8xf32> {memopt.role = "input", memopt.name = "q"},
                              %pad: tensor<2x4xi1> {memopt.role = "input", memopt.name = "pad"}) -> tensor<f32>
    attributes {memopt.loss} {
  %c = memopt.constant dense<[[false, true, true, true], [false, false, true, true], [false, false, false, true], [false, false, false, false]]> : tensor<4x4xi1>
  %cm = memopt.broadcast %c dims [2, 3] : tensor<4x4xi1> to tensor<2x3x4x4xi1>
  %pm = memopt.broadcast %pad dims [0, 3] : tensor<2x4xi1> to tensor<2x3x4x4xi1>
  %s = memopt.matmul %q, %q transpose_rhs : tensor<2x3x4x8xf32>, tensor<2x3x4x8xf32> -> tensor<2x3x4x4xf32>
  %t = memopt.mul_scalar %s, 0.5 : tensor<2x3x4x4xf32>
  %f1 = memopt.masked_fill %t, %cm, 0xFFF0000000000000 : tensor<2x3x4x4xf32>, tensor<2x3x4x4xi1>
  %f2 = memopt.masked_fill %f1, %pm, 0xFFF0000000000000 : tensor<2x3x4x4xf32>, tensor<2x3x4x4xi1>
  %p = memopt.softmax %f2 dim 3 : tensor<2x3x4x4xf32>
  %o = memopt.matmul %p, %q : tensor<2x3x4x4xf32>, tensor<2x3x4x8xf32> -> tensor<2x3x4x8xf32>
  // Different fill values.
  %s2 = memopt.matmul %q, %q transpose_rhs : tensor<2x3x4x8xf32>, tensor<2x3x4x8xf32> -> tensor<2x3x4x4xf32>
  %g1 = memopt.masked_fill %s2, %cm, 0xFFF0000000000000 : tensor<2x3x4x4xf32>, tensor<2x3x4x4xi1>
  %g2 = memopt.masked_fill %g1, %pm, -1.0e4 : tensor<2x3x4x4xf32>, tensor<2x3x4x4xi1>
  %p2 = memopt.softmax %g2 dim 3 : tensor<2x3x4x4xf32>
  %o2 = memopt.matmul %p2, %q : tensor<2x3x4x4xf32>, tensor<2x3x4x8xf32> -> tensor<2x3x4x8xf32>
  // Two padding masks.
  %s3 = memopt.matmul %q, %q transpose_rhs : tensor<2x3x4x8xf32>, tensor<2x3x4x8xf32> -> tensor<2x3x4x4xf32>
  %h1 = memopt.masked_fill %s3, %pm, 0xFFF0000000000000 : tensor<2x3x4x4xf32>, tensor<2x3x4x4xi1>
  %h2 = memopt.masked_fill %h1, %pm, 0xFFF0000000000000 : tensor<2x3x4x4xf32>, tensor<2x3x4x4xi1>
  %p3 = memopt.softmax %h2 dim 3 : tensor<2x3x4x4xf32>
  %o3 = memopt.matmul %p3, %q : tensor<2x3x4x4xf32>, tensor<2x3x4x8xf32> -> tensor<2x3x4x8xf32>
  %a = memopt.add %o, %o2 : tensor<2x3x4x8xf32>
  %b = memopt.add %a, %o3 : tensor<2x3x4x8xf32>
  %l = memopt.reduce_sum %b dims [0, 1, 2, 3] : tensor<2x3x4x8xf32> to tensor<f32>
  return %l : tensor<f32>
}
