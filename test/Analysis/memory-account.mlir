// RUN: memopt-opt %s -split-input-file -memopt-test-print-memory-account -o /dev/null | FileCheck %s --check-prefixes=CHECK,ALIGN256
// RUN: memopt-opt %s -split-input-file -memopt-test-print-memory-account=alignment=1 -o /dev/null | FileCheck %s --check-prefixes=CHECK,ALIGN1

// A planned two-layer step, fc1 -> silu (act) -> fc2 -> mean, with SGD and
// fc1's weight decay as a separate gradient term; every figure by hand.
//
// Arguments, by role: params w1 16x8xf32 = 512 + w2 2x16xf32 = 128 -> 640;
// optimizer b1 512 + b2 128 -> 640; state 16xf32 -> 64; data x 4x8xf32 =
// 128 + loss 4 -> 132.
//
// Buffers (op index of the alloc, uses; the dealloc is no use):
//   0 h   4x16 256 B  [0, 20]  fc1 output, read by silu and silu_grad
//   1 r   4x16 256 B  [2, 16]  silu output, read by fc2 and its weight grad
//   2 y   4x2   32 B  [4, 6]
//   3 one f32    4 B  [8, 11]
//   4 dy  4x2   32 B  [10, 16]
//   5 dr  4x16 256 B  [13, 20]
//   6 gw2 2x16 128 B  [15, 34]  grad: the grad operand of w2's update
//   7 dh  4x16 256 B  [19, 24]
//   8 ga  16x8 512 B  [23, 29]  grad: an input of the add that makes gw1
//   9 gb  16x8 512 B  [26, 29]  grad: likewise (weight decay)
//  10 gw1 16x8 512 B  [28, 32]  grad: the grad operand of w1's update
//
// Live scratch bytes: the most is 1664 = gw2 128 + ga 512 + gb 512 + gw1 512
// at points 28 (the alloc of gw1) and 29 (the add); the kernel wins the tie.
// Pools at the peak: grads 1664, activations 0, plus the arguments:
// total 640 + 1664 + 640 + 64 + 132 = 3140.
//
// Lower bound: each buffer rounded up to 256 B is live most at 28..29:
// 256 + 512 + 512 + 512 = 1792 (1664 with alignment 1); the plan meets it.
//
// The loss is written at 6; the first backward op is the next kernel, the
// constant at 9. Live there and written by a forward kernel: h (fc1, 256)
// and r (act, 256); `one` is written by the backward itself.
//
// FLOPs. Forward: matmul 2*64*8 = 1024, silu 64, matmul 2*8*16 = 256,
// reduce_mean 8 -> 1352. Backward: constant 0, broadcast 0, matmul
// 2*64*2 = 256, matmul (lhs transposed, K = 4) 2*32*4 = 256, silu_grad 64,
// matmul 2*128*4 = 1024, mul_scalar 128, add 128, sgd 128 and 32 -> 2016.

// CHECK-LABEL: memory account of @train_step (37 ops):
// CHECK-NEXT:  arena_bytes=1792
// ALIGN256-SAME: lower_bound_bytes=1792
// ALIGN1-SAME:   lower_bound_bytes=1664
// CHECK-NEXT:  pools: params=640 master_params=0 grads=1664 optimizer=640 state=64 data=132 activations=0 workspace=0
// CHECK-NEXT:  peak: index=29 op=memopt.add scope="fc1" bytes=1664
// CHECK-NEXT:  loss=6 first_backward=9 saved: "act"=256 "fc1"=256
// CHECK-NEXT:  flops: forward=1352 backward=2016 recompute=0
// CHECK-NEXT:  buffer 0 activations size=256 live=[0, 20] producer=1 scope="fc1"
// CHECK-NEXT:  buffer 1 activations size=256 live=[2, 16] producer=3 scope="act"
// CHECK-NEXT:  buffer 2 activations size=32 live=[4, 6] producer=5 scope="fc2"
// CHECK-NEXT:  buffer 3 activations size=4 live=[8, 11] producer=9 scope=""
// CHECK-NEXT:  buffer 4 activations size=32 live=[10, 16] producer=11 scope=""
// CHECK-NEXT:  buffer 5 activations size=256 live=[13, 20] producer=14 scope="fc2"
// CHECK-NEXT:  buffer 6 grads size=128 live=[15, 34] producer=16 scope="fc2"
// CHECK-NEXT:  buffer 7 activations size=256 live=[19, 24] producer=20 scope="act"
// CHECK-NEXT:  buffer 8 grads size=512 live=[23, 29] producer=24 scope="fc1"
// CHECK-NEXT:  buffer 9 grads size=512 live=[26, 29] producer=27 scope="fc1"
// CHECK-NEXT:  buffer 10 grads size=512 live=[28, 32] producer=29 scope="fc1"
// CHECK-NEXT:  point 0 memref.alloc activations=256 grads=0
// CHECK-NEXT:  point 1 memopt.matmul activations=256 grads=0
// CHECK-NEXT:  point 2 memref.alloc activations=512 grads=0
// CHECK-NEXT:  point 3 memopt.silu activations=512 grads=0
// CHECK-NEXT:  point 4 memref.alloc activations=544 grads=0
// CHECK-NEXT:  point 5 memopt.matmul activations=544 grads=0
// CHECK-NEXT:  point 6 memopt.reduce_mean activations=544 grads=0
// CHECK-NEXT:  point 7 memref.dealloc activations=512 grads=0
// CHECK-NEXT:  point 8 memref.alloc activations=516 grads=0
// CHECK-NEXT:  point 9 memopt.constant activations=516 grads=0
// CHECK-NEXT:  point 10 memref.alloc activations=548 grads=0
// CHECK-NEXT:  point 11 memopt.broadcast activations=548 grads=0
// CHECK-NEXT:  point 12 memref.dealloc activations=544 grads=0
// CHECK-NEXT:  point 13 memref.alloc activations=800 grads=0
// CHECK-NEXT:  point 14 memopt.matmul activations=800 grads=0
// CHECK-NEXT:  point 15 memref.alloc activations=800 grads=128
// CHECK-NEXT:  point 16 memopt.matmul activations=800 grads=128
// CHECK-NEXT:  point 17 memref.dealloc activations=512 grads=128
// CHECK-NEXT:  point 18 memref.dealloc activations=512 grads=128
// CHECK-NEXT:  point 19 memref.alloc activations=768 grads=128
// CHECK-NEXT:  point 20 memopt.silu_grad activations=768 grads=128
// CHECK-NEXT:  point 21 memref.dealloc activations=256 grads=128
// CHECK-NEXT:  point 22 memref.dealloc activations=256 grads=128
// CHECK-NEXT:  point 23 memref.alloc activations=256 grads=640
// CHECK-NEXT:  point 24 memopt.matmul activations=256 grads=640
// CHECK-NEXT:  point 25 memref.dealloc activations=0 grads=640
// CHECK-NEXT:  point 26 memref.alloc activations=0 grads=1152
// CHECK-NEXT:  point 27 memopt.mul_scalar activations=0 grads=1152
// CHECK-NEXT:  point 28 memref.alloc activations=0 grads=1664
// CHECK-NEXT:  point 29 memopt.add activations=0 grads=1664
// CHECK-NEXT:  point 30 memref.dealloc activations=0 grads=640
// CHECK-NEXT:  point 31 memref.dealloc activations=0 grads=640
// CHECK-NEXT:  point 32 memopt.sgd_update activations=0 grads=640
// CHECK-NEXT:  point 33 memref.dealloc activations=0 grads=128
// CHECK-NEXT:  point 34 memopt.sgd_update activations=0 grads=128
// CHECK-NEXT:  point 35 memref.dealloc activations=0 grads=0
// CHECK-NEXT:  point 36 func.return activations=0 grads=0
func.func @train_step(
    %x: memref<4x8xf32> {memopt.role = "input", memopt.name = "x"},
    %w1: memref<16x8xf32> {memopt.role = "param", memopt.name = "fc1.weight"},
    %w2: memref<2x16xf32> {memopt.role = "param", memopt.name = "fc2.weight"},
    %b1: memref<16x8xf32> {memopt.role = "optim", memopt.name = "optimizer.fc1.weight.momentum_buffer"},
    %b2: memref<2x16xf32> {memopt.role = "optim", memopt.name = "optimizer.fc2.weight.momentum_buffer"},
    %stats: memref<16xf32> {memopt.role = "state", memopt.name = "stats"},
    %loss: memref<f32> {memopt.role = "loss", memopt.name = "loss"})
    attributes {memopt.train_step, memopt.arena_bytes = 1792 : i64} {
  %h = memref.alloc() {memopt.offset = 0 : i64} : memref<4x16xf32>
  memopt.kernel "memopt.matmul" ins(%x, %w1 : memref<4x8xf32>, memref<16x8xf32>) outs(%h : memref<4x16xf32>) with {transpose_rhs} {memopt.scope = "fc1"}
  %r = memref.alloc() {memopt.offset = 256 : i64} : memref<4x16xf32>
  memopt.kernel "memopt.silu" ins(%h : memref<4x16xf32>) outs(%r : memref<4x16xf32>) with {} {memopt.scope = "act"}
  %y = memref.alloc() {memopt.offset = 512 : i64} : memref<4x2xf32>
  memopt.kernel "memopt.matmul" ins(%r, %w2 : memref<4x16xf32>, memref<2x16xf32>) outs(%y : memref<4x2xf32>) with {transpose_rhs} {memopt.scope = "fc2"}
  memopt.kernel "memopt.reduce_mean" ins(%y : memref<4x2xf32>) outs(%loss : memref<f32>) with {dims = array<i64: 0, 1>} {memopt.scope = ""}
  memref.dealloc %y : memref<4x2xf32>
  %one = memref.alloc() {memopt.offset = 512 : i64} : memref<f32>
  memopt.kernel "memopt.constant" outs(%one : memref<f32>) with {value = dense<1.250000e-01> : tensor<f32>}
  %dy = memref.alloc() {memopt.offset = 768 : i64} : memref<4x2xf32>
  memopt.kernel "memopt.broadcast" ins(%one : memref<f32>) outs(%dy : memref<4x2xf32>) with {dims = array<i64: 0, 1>} {memopt.scope = ""}
  memref.dealloc %one : memref<f32>
  %dr = memref.alloc() {memopt.offset = 512 : i64} : memref<4x16xf32>
  memopt.kernel "memopt.matmul" ins(%dy, %w2 : memref<4x2xf32>, memref<2x16xf32>) outs(%dr : memref<4x16xf32>) with {} {memopt.scope = "fc2"}
  %gw2 = memref.alloc() {memopt.offset = 1024 : i64} : memref<2x16xf32>
  memopt.kernel "memopt.matmul" ins(%dy, %r : memref<4x2xf32>, memref<4x16xf32>) outs(%gw2 : memref<2x16xf32>) with {transpose_lhs} {memopt.scope = "fc2"}
  memref.dealloc %dy : memref<4x2xf32>
  memref.dealloc %r : memref<4x16xf32>
  %dh = memref.alloc() {memopt.offset = 256 : i64} : memref<4x16xf32>
  memopt.kernel "memopt.silu_grad" ins(%h, %dr : memref<4x16xf32>, memref<4x16xf32>) outs(%dh : memref<4x16xf32>) with {} {memopt.scope = "act"}
  memref.dealloc %dr : memref<4x16xf32>
  memref.dealloc %h : memref<4x16xf32>
  %ga = memref.alloc() {memopt.offset = 1280 : i64} : memref<16x8xf32>
  memopt.kernel "memopt.matmul" ins(%dh, %x : memref<4x16xf32>, memref<4x8xf32>) outs(%ga : memref<16x8xf32>) with {transpose_lhs} {memopt.scope = "fc1"}
  memref.dealloc %dh : memref<4x16xf32>
  %gb = memref.alloc() {memopt.offset = 0 : i64} : memref<16x8xf32>
  memopt.kernel "memopt.mul_scalar" ins(%w1 : memref<16x8xf32>) outs(%gb : memref<16x8xf32>) with {value = 1.000000e-02 : f64} {memopt.scope = "fc1"}
  %gw1 = memref.alloc() {memopt.offset = 512 : i64} : memref<16x8xf32>
  memopt.kernel "memopt.add" ins(%ga, %gb : memref<16x8xf32>, memref<16x8xf32>) outs(%gw1 : memref<16x8xf32>) with {} {memopt.scope = "fc1"}
  memref.dealloc %gb : memref<16x8xf32>
  memref.dealloc %ga : memref<16x8xf32>
  memopt.kernel "memopt.sgd_update" ins(%w1, %gw1, %b1 : memref<16x8xf32>, memref<16x8xf32>, memref<16x8xf32>) outs(%w1, %b1 : memref<16x8xf32>, memref<16x8xf32>) with {lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64, weight_decay = 0.000000e+00 : f64} {memopt.scope = "fc1"}
  memref.dealloc %gw1 : memref<16x8xf32>
  memopt.kernel "memopt.sgd_update" ins(%w2, %gw2, %b2 : memref<2x16xf32>, memref<2x16xf32>, memref<2x16xf32>) outs(%w2, %b2 : memref<2x16xf32>, memref<2x16xf32>) with {lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64, weight_decay = 0.000000e+00 : f64} {memopt.scope = "fc2"}
  memref.dealloc %gw2 : memref<2x16xf32>
  return
}

// -----

// Before planning, without a loss: no arena, every kernel is forward and
// nothing is saved for a backward. An argument without a role is data:
// 32 + 32 = 64. The buffer (32 B) is live at points 0..2; the first kernel
// among them, the relu at 1, is the peak. FLOPs: relu 8 + exp 8 = 16. The
// lower bound rounds the 32 B up to 256 (ALIGN256) or not (ALIGN1).

// CHECK-LABEL: memory account of @unplanned (5 ops):
// CHECK-NEXT:  arena_bytes=?
// ALIGN256-SAME: lower_bound_bytes=256
// ALIGN1-SAME:   lower_bound_bytes=32
// CHECK-NEXT:  pools: params=0 master_params=0 grads=0 optimizer=0 state=0 data=64 activations=32 workspace=0
// CHECK-NEXT:  peak: index=1 op=memopt.relu scope="s" bytes=32
// CHECK-NEXT:  loss=-1 first_backward=-1 saved:{{$}}
// CHECK-NEXT:  flops: forward=16 backward=0 recompute=0
// CHECK-NEXT:  buffer 0 activations size=32 live=[0, 2] producer=1 scope="s"
// CHECK-NEXT:  point 0 memref.alloc activations=32 grads=0
// CHECK-NEXT:  point 1 memopt.relu activations=32 grads=0
// CHECK-NEXT:  point 2 memopt.exp activations=32 grads=0
// CHECK-NEXT:  point 3 memref.dealloc activations=0 grads=0
// CHECK-NEXT:  point 4 func.return activations=0 grads=0
func.func @unplanned(%x: memref<8xf32> {memopt.role = "input"}, %out: memref<8xf32>) {
  %a = memref.alloc() : memref<8xf32>
  memopt.kernel "memopt.relu" ins(%x : memref<8xf32>) outs(%a : memref<8xf32>) with {} {memopt.scope = "s"}
  memopt.kernel "memopt.exp" ins(%a : memref<8xf32>) outs(%out : memref<8xf32>) with {}
  memref.dealloc %a : memref<8xf32>
  return
}

// -----

// FLOP formulas: a batched matmul counts its batch (2*2*3*4*5 = 240 for
// [2, 3, 5] x [2, 5, 4]); a conv2d and both its gradients 2 * outputs of the
// forward * (C/groups * KH * KW): 2 * (1*4*6*6) * (3*3*3) = 7776 each; a
// transpose moves data (0); the reduction, its largest operand's elements
// (24). Forward 240 + 7776 + 0 + 24 = 8040, backward 2 * 7776 = 15552. The
// conv output (1x4x6x6xf32, 576 B) is read by both gradients: saved.

// CHECK-LABEL: memory account of @flops (13 ops):
// CHECK:       loss=6 first_backward=9 saved: ""=576{{$}}
// CHECK-NEXT:  flops: forward=8040 backward=15552 recompute=0
func.func @flops(%a: memref<2x3x5xf32>, %b: memref<2x5x4xf32>,
                 %img: memref<1x3x8x8xf32>, %f: memref<4x3x3x3xf32>,
                 %dimg: memref<1x3x8x8xf32>, %df: memref<4x3x3x3xf32>,
                 %loss: memref<f32> {memopt.role = "loss"}) {
  %c = memref.alloc() : memref<2x3x4xf32>
  memopt.kernel "memopt.matmul" ins(%a, %b : memref<2x3x5xf32>, memref<2x5x4xf32>) outs(%c : memref<2x3x4xf32>) with {}
  %y = memref.alloc() : memref<1x4x6x6xf32>
  memopt.kernel "memopt.conv2d" ins(%img, %f : memref<1x3x8x8xf32>, memref<4x3x3x3xf32>) outs(%y : memref<1x4x6x6xf32>) with {}
  %t = memref.alloc() : memref<2x4x3xf32>
  memopt.kernel "memopt.transpose" ins(%c : memref<2x3x4xf32>) outs(%t : memref<2x4x3xf32>) with {perm = array<i64: 0, 2, 1>}
  memopt.kernel "memopt.reduce_sum" ins(%t : memref<2x4x3xf32>) outs(%loss : memref<f32>) with {dims = array<i64: 0, 1, 2>}
  memref.dealloc %t : memref<2x4x3xf32>
  memref.dealloc %c : memref<2x3x4xf32>
  memopt.kernel "memopt.conv2d_grad_input" ins(%y, %f : memref<1x4x6x6xf32>, memref<4x3x3x3xf32>) outs(%dimg : memref<1x3x8x8xf32>) with {}
  memopt.kernel "memopt.conv2d_grad_filter" ins(%y, %img : memref<1x4x6x6xf32>, memref<1x3x8x8xf32>) outs(%df : memref<4x3x3x3xf32>) with {}
  memref.dealloc %y : memref<1x4x6x6xf32>
  return
}
