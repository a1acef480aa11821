// RUN: memopt-opt %s --memopt-autodiff --memopt-offload-activations | FileCheck %s
// RUN: memopt-opt %s --memopt-mixed-precision=compute-type=bf16 --memopt-autodiff --memopt-offload-activations | FileCheck %s --check-prefix=BF16
// RUN: memopt-opt %s --memopt-autodiff --memopt-offload-activations --memopt-accumulate=micro-batches=2 --memopt-bufferize --memopt-plan-buffers --memopt-verify-plan | FileCheck %s --check-prefix=PLAN
// RUN: memopt-opt %s --memopt-autodiff --memopt-offload-activations --memopt-bufferize --memopt-plan-buffers --memopt-verify-plan | FileCheck %s --check-prefix=PLAN1
// RUN: not memopt-opt %s --memopt-autodiff --memopt-accumulate=micro-batches=2 --memopt-offload-activations 2>&1 | FileCheck %s --check-prefix=LOOP
// RUN: memopt-opt %s --memopt-autodiff --memopt-offload-activations=budget=1536 | FileCheck %s --check-prefix=BUDGET
// RUN: memopt-opt %s --memopt-autodiff --memopt-offload-activations=budget=1536 --memopt-bufferize --memopt-plan-buffers | FileCheck %s --check-prefix=BUDGET-PLAN
// RUN: memopt-opt %s --memopt-autodiff --memopt-offload-activations=budget=2048 | FileCheck %s --check-prefix=ROOM
// RUN: memopt-opt %s --memopt-autodiff --memopt-offload-activations=budget=1000 --memopt-bufferize --memopt-plan-buffers | FileCheck %s --check-prefix=PLAN1
// RUN: not memopt-opt %s --memopt-autodiff --memopt-offload-activations=budget=-1 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// RUN: memopt-opt %s --memopt-autodiff --memopt-bufferize --memopt-plan-buffers | FileCheck %s --check-prefix=RESIDENT1
// RUN: memopt-opt %s --memopt-autodiff --memopt-accumulate=micro-batches=2 --memopt-bufferize --memopt-plan-buffers | FileCheck %s --check-prefix=RESIDENT

// Activation offload: each value the backward reads goes to the host after
// its last forward reader and comes back right before its first backward
// reader, which (with every other backward reader) reads the copy.

func.func @forward(
    %x: tensor<8x4xf32> {memopt.role = "input", memopt.name = "x", memopt.batch_dim = 0 : i64},
    %y: tensor<8xi64> {memopt.role = "label", memopt.name = "y", memopt.batch_dim = 0 : i64},
    %w1: tensor<16x4xf32> {memopt.role = "param", memopt.name = "fc1.weight"},
    %w2: tensor<3x16xf32> {memopt.role = "param", memopt.name = "fc2.weight"})
    -> tensor<f32> attributes {memopt.loss} {
  %0 = memopt.matmul %x, %w1 transpose_rhs {memopt.scope = "fc1"} : tensor<8x4xf32>, tensor<16x4xf32> -> tensor<8x16xf32>
  %1 = memopt.gelu %0 {memopt.scope = "act"} : tensor<8x16xf32>
  %2 = memopt.matmul %1, %w2 transpose_rhs {memopt.scope = "fc2"} : tensor<8x16xf32>, tensor<3x16xf32> -> tensor<8x3xf32>
  %loss = memopt.cross_entropy %2, %y : tensor<8x3xf32>, tensor<8xi64>
  return %loss : tensor<f32>
}

// CHECK-LABEL: func.func @train_step
// CHECK: %[[H1:.*]] = memopt.matmul %arg0, %arg2
// CHECK-NEXT: %[[A:.*]] = memopt.gelu %[[H1]]
// CHECK-NEXT: %[[H1H:.*]] = memopt.transfer %[[H1]] to host {memopt.scope = "fc1"} : tensor<8x16xf32>
// CHECK-NEXT: %[[Z:.*]] = memopt.matmul %[[A]], %arg3
// CHECK-NEXT: %[[AH:.*]] = memopt.transfer %[[A]] to host {memopt.scope = "act"}
// CHECK-NEXT: %[[LOSS:.*]] = memopt.cross_entropy %[[Z]], %arg1
// CHECK-NEXT: %[[ZH:.*]] = memopt.transfer %[[Z]] to host
// CHECK: %[[ZD:.*]] = memopt.transfer %[[ZH]] to device
// CHECK-NEXT: %[[DZ:.*]] = memopt.cross_entropy_grad %[[ZD]], %arg1
// CHECK-NEXT: %[[DA:.*]] = memopt.matmul %[[DZ]], %arg3
// CHECK-NEXT: %[[AD:.*]] = memopt.transfer %[[AH]] to device {memopt.scope = "fc2"}
// CHECK-NEXT: memopt.matmul %[[DZ]], %[[AD]] transpose_lhs
// CHECK-NEXT: %[[H1D:.*]] = memopt.transfer %[[H1H]] to device {memopt.scope = "act"}
// CHECK-NEXT: memopt.gelu_grad %[[H1D]], %[[DA]]
// The input is an argument, not an activation: it stays.
// CHECK-NEXT: memopt.matmul %{{.*}}, %arg0 transpose_lhs
// CHECK-NOT: memopt.transfer
// CHECK: return %[[LOSS]],

// In BF16 the casts of the weights read no data and stay on the device;
// the cast of the input is saved, and goes.
// BF16: %[[X:.*]] = memopt.cast %arg0
// BF16-NEXT: %[[W1:.*]] = memopt.cast %arg2
// BF16-NEXT: memopt.matmul %[[X]], %[[W1]]
// BF16-NEXT: memopt.transfer %[[X]] to host
// BF16-NOT: memopt.transfer %[[W1]]
// BF16: %[[W2:.*]] = memopt.cast %arg3
// BF16-NOT: memopt.transfer %[[W2]]
// BF16: memopt.matmul %{{.*}}, %[[W2]] {memopt.scope = "fc2"}
// BF16-NOT: memopt.transfer %[[W2]]
// BF16: return

// The plan keeps the saved values in the host arena, and the device's arena
// shrinks (RESIDENT1 is the step without offload). In the micro-batch loop,
// each micro-batch's values cross (RESIDENT is that loop without offload).
// PLAN1: memopt.arena_bytes = 1536 : i64, memopt.host_arena_bytes = 1280 : i64
// RESIDENT1: memopt.arena_bytes = 2048 : i64
// RESIDENT1-NOT: host_arena_bytes
// PLAN: memopt.arena_bytes = 2048 : i64, memopt.host_arena_bytes = 768 : i64
// PLAN: scf.for
// PLAN-COUNT-3: memopt.kernel "memopt.transfer" ins({{.*}}) outs({{.*}}) with {to = #memopt<memory host>}
// PLAN-COUNT-3: memopt.kernel "memopt.transfer" ins({{.*}}) outs({{.*}}) with {to = #memopt<memory device>}
// RESIDENT: memopt.arena_bytes = 2304 : i64
// RESIDENT-NOT: host_arena_bytes

// After the micro-batch loop the forward and the backward are one op.
// LOOP: error: 'scf.for' op holds the step's forward and backward: run --memopt-offload-activations before --memopt-accumulate

// With a budget, the fewest saved values, largest first, that plan the
// arena within it: of the three (512, 512 and 96 B), moving the first
// already plans 1536 B. With the room for all (2048 B) none moves; below
// what moving all plans (1000 B), all move.
// BUDGET:     %[[H1:.*]] = memopt.matmul %arg0, %arg2
// BUDGET:     memopt.transfer %[[H1]] to host
// BUDGET-NOT: to host
// BUDGET:     memopt.transfer %{{.*}} to device
// BUDGET-NOT: memopt.transfer
// BUDGET-PLAN: memopt.arena_bytes = 1536 : i64, memopt.host_arena_bytes = 512 : i64
// ROOM-NOT:   memopt.transfer
// NEGATIVE: error: --memopt-offload-activations: budget must be a non-negative number of bytes, got -1
