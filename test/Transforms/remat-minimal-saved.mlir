// RUN: memopt-opt -split-input-file --memopt-autodiff="optimizer=sgd lr=0.1" --memopt-remat="cheap-recompute" %s | FileCheck %s
// RUN: memopt-opt -split-input-file --memopt-autodiff="optimizer=sgd lr=0.1" --memopt-remat="cheap-recompute print-summary" %s 2>&1 >/dev/null | FileCheck %s --check-prefix=SUMMARY
// RUN: memopt-opt --memopt-autodiff="optimizer=sgd lr=0.1" --memopt-remat="cheap-recompute print-summary" --memopt-bufferize --memopt-plan-buffers %S/Inputs/remat-chain.mlir 2>&1 | FileCheck %s --check-prefix=CHAIN
// RUN: memopt-opt --memopt-autodiff="optimizer=sgd lr=0.1" --memopt-remat --memopt-bufferize --memopt-plan-buffers %S/Inputs/remat-chain.mlir | FileCheck %s --check-prefix=CHAIN-OFF
// RUN: memopt-opt --memopt-autodiff="optimizer=sgd lr=0.1" --memopt-remat="strategy=selective cheap-recompute print-summary" %S/Inputs/remat-chain.mlir 2>&1 >/dev/null | FileCheck %s --check-prefix=SELECTIVE
// RUN: memopt-opt -split-input-file --memopt-autodiff="optimizer=sgd lr=0.1" --memopt-remat %s | FileCheck %s --check-prefix=OFF

// The minimal saved set (--memopt-remat's cheap-recompute): of the values
// the backward reads, keep the least bytes and recompute the rest by cheap
// ops right before the backward op that reads them.

// A perceptron: relu's gradient reads its input, the second matmul's
// weight gradient its output. Keep the first matmul's result only; relu is
// recomputed from it.
// SUMMARY: remat: strategy=none cheap_recomputed_ops=1
// CHECK-LABEL: func.func @train_step
// CHECK: %[[H:.*]] = memopt.matmul %arg0, %arg2 transpose_rhs {memopt.scope = "fc1"}
// CHECK: memopt.relu %[[H]] {memopt.scope = ""}
// CHECK: memopt.cross_entropy_grad
// CHECK: %[[R:.*]] = memopt.relu %[[H]] {memopt.recompute, memopt.scope = ""}
// CHECK-NEXT: memopt.matmul %{{.*}}, %[[R]] transpose_lhs {memopt.scope = "fc2"}
// CHECK: memopt.relu_grad %[[H]],
// OFF-LABEL: func.func @train_step
// OFF-NOT: memopt.recompute
func.func @forward(
    %x: tensor<8x16xf32> {memopt.role = "input", memopt.name = "x"},
    %y: tensor<8xi64> {memopt.role = "label", memopt.name = "y"},
    %w0: tensor<16x16xf32> {memopt.role = "param", memopt.name = "fc1.weight"},
    %w1: tensor<4x16xf32> {memopt.role = "param", memopt.name = "fc2.weight"})
    -> tensor<f32> attributes {memopt.loss} {
  %h = memopt.matmul %x, %w0 transpose_rhs {memopt.scope = "fc1"} : tensor<8x16xf32>, tensor<16x16xf32> -> tensor<8x16xf32>
  %r = memopt.relu %h {memopt.scope = ""} : tensor<8x16xf32>
  %o = memopt.matmul %r, %w1 transpose_rhs {memopt.scope = "fc2"} : tensor<8x16xf32>, tensor<4x16xf32> -> tensor<8x4xf32>
  %loss = memopt.cross_entropy %o, %y {memopt.scope = ""} : tensor<8x4xf32>, tensor<8xi64>
  return %loss : tensor<f32>
}

// -----

// A bf16 matmul result, its f32 cast, tanh of that and tanh's bf16 cast:
// the backward reads tanh's output (its gradient) and the bf16 cast (the
// second weight gradient). The least bytes they can be rebuilt from is the
// bf16 matmul result: keep it alone; the f32 values and the cast are
// recomputed once, tanh's output kept for its own gradient.
// SUMMARY: remat: strategy=none cheap_recomputed_ops=3
// CHECK-LABEL: func.func @train_step
// CHECK: %[[M:.*]] = memopt.matmul %arg0, %arg2 transpose_rhs
// CHECK: memopt.cross_entropy_grad
// CHECK: %[[F:.*]] = memopt.cast %[[M]] {memopt.recompute, memopt.scope = "fc1"} : tensor<8x16xbf16> to tensor<8x16xf32>
// CHECK-NEXT: %[[T:.*]] = memopt.tanh %[[F]] {memopt.recompute, memopt.scope = ""}
// CHECK-NEXT: %[[C:.*]] = memopt.cast %[[T]] {memopt.recompute, memopt.scope = "fc2"} : tensor<8x16xf32> to tensor<8x16xbf16>
// CHECK-NEXT: memopt.matmul %{{.*}}, %[[C]] transpose_lhs
// CHECK-NOT: memopt.recompute
// CHECK: memopt.tanh_grad %[[T]],
// OFF-LABEL: func.func @train_step
// OFF-NOT: memopt.recompute
func.func @forward(
    %x: tensor<8x16xbf16> {memopt.role = "input", memopt.name = "x"},
    %y: tensor<8xi64> {memopt.role = "label", memopt.name = "y"},
    %w0: tensor<16x16xbf16> {memopt.role = "param", memopt.name = "fc1.weight"},
    %w1: tensor<4x16xbf16> {memopt.role = "param", memopt.name = "fc2.weight"})
    -> tensor<f32> attributes {memopt.loss} {
  %h = memopt.matmul %x, %w0 transpose_rhs {memopt.scope = "fc1"} : tensor<8x16xbf16>, tensor<16x16xbf16> -> tensor<8x16xbf16>
  %hf = memopt.cast %h {memopt.scope = "fc1"} : tensor<8x16xbf16> to tensor<8x16xf32>
  %t = memopt.tanh %hf {memopt.scope = ""} : tensor<8x16xf32>
  %c = memopt.cast %t {memopt.scope = "fc2"} : tensor<8x16xf32> to tensor<8x16xbf16>
  %o = memopt.matmul %c, %w1 transpose_rhs {memopt.scope = "fc2"} : tensor<8x16xbf16>, tensor<4x16xbf16> -> tensor<8x4xbf16>
  %of = memopt.cast %o {memopt.scope = "fc2"} : tensor<8x4xbf16> to tensor<8x4xf32>
  %loss = memopt.cross_entropy %of, %y {memopt.scope = ""} : tensor<8x4xf32>, tensor<8xi64>
  return %loss : tensor<f32>
}

// The chain h = tanh(m) * m after each matmul: the minimal saved set keeps
// the matmul results only; every tanh and mul the backward reads is rebuilt
// from them (8 clones), and the planned arena falls from 6912 to 5632 bytes.
// CHAIN: remat: strategy=none cheap_recomputed_ops=8
// CHAIN-LABEL: func.func @train_step
// CHAIN-SAME: memopt.arena_bytes = 5632
// CHAIN-NOT: memopt.kernel "memopt.matmul" {{.*}}memopt.recompute
// CHAIN: memopt.kernel "memopt.tanh" {{.*}}memopt.recompute
// CHAIN-NOT: memopt.kernel "memopt.matmul" {{.*}}memopt.recompute
// CHAIN: return
// CHAIN-OFF: memopt.arena_bytes = 6912

// Account first: selective on the same chain plans a smaller arena from the
// step as it is than from the minimal saved set, so it runs from the step as
// it is.
// SELECTIVE: remat: strategy=selective {{.*}} recomputed_ops=4 {{.*}} cheap_recomputed_ops=0
