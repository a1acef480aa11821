// RUN: memopt-opt --memopt-autodiff="optimizer=sgd lr=0.1" --memopt-remat="strategy=sqrt" %S/Inputs/remat-chain.mlir | FileCheck %s

// --memopt-remat=sqrt on a chain of four layers: keeps the input of the last
// segment (layers 2-3, kept whole); recomputes the first segment, layers 0 and
// 1, at its first backward use. The forward is unchanged; every clone carries
// memopt.recompute and sits just before the backward op that reads it first,
// and the backward of layers 0 and 1 reads the clones, not the forward's
// values.

// CHECK-LABEL: func.func @train_step
// CHECK-NOT: memopt.recompute
// CHECK:      %[[M0:.*]] = memopt.matmul %arg0, %arg2 transpose_rhs {memopt.scope = "layers.0"}
// CHECK-NEXT: %[[A0:.*]] = memopt.tanh %[[M0]] {memopt.scope = "layers.0"}
// CHECK-NEXT: %[[H0:.*]] = memopt.mul %[[A0]], %[[M0]] {memopt.scope = "layers.0"}
// CHECK-NEXT: %[[M1:.*]] = memopt.matmul %[[H0]], %arg3 transpose_rhs {memopt.scope = "layers.1"}
// CHECK-NEXT: %[[A1:.*]] = memopt.tanh %[[M1]] {memopt.scope = "layers.1"}
// CHECK-NEXT: %[[H1:.*]] = memopt.mul %[[A1]], %[[M1]] {memopt.scope = "layers.1"}
// CHECK-NEXT: %[[M2:.*]] = memopt.matmul %[[H1]], %arg4 transpose_rhs {memopt.scope = "layers.2"}
// CHECK-NEXT: %[[A2:.*]] = memopt.tanh %[[M2]] {memopt.scope = "layers.2"}
// CHECK-NEXT: %[[H2:.*]] = memopt.mul %[[A2]], %[[M2]] {memopt.scope = "layers.2"}
// CHECK-NEXT: %[[M3:.*]] = memopt.matmul %[[H2]], %arg5 transpose_rhs {memopt.scope = "layers.3"}
// CHECK-NEXT: %[[A3:.*]] = memopt.tanh %[[M3]] {memopt.scope = "layers.3"}
// CHECK-NEXT: %[[H3:.*]] = memopt.mul %[[A3]], %[[M3]] {memopt.scope = "layers.3"}
// CHECK-NEXT: memopt.cross_entropy %[[H3]], %arg1 {memopt.scope = ""}

// The kept segment's backward reads the forward's values, down to its input
// H1, the checkpoint.
// CHECK-NOT: memopt.recompute
// CHECK:      memopt.cross_entropy_grad %[[H3]], %arg1, %{{.*}} {memopt.scope = ""}
// CHECK:      %[[T3:.*]] = memopt.mul %{{.*}}, %[[M3]] {memopt.scope = "layers.3"}
// CHECK:      memopt.mul %{{.*}}, %[[A3]] {memopt.scope = "layers.3"}
// CHECK:      memopt.tanh_grad %[[A3]], %[[T3]] {memopt.scope = "layers.3"}
// CHECK:      memopt.matmul %{{.*}}, %[[H2]] transpose_lhs {memopt.scope = "layers.3"}
// CHECK:      %[[T2:.*]] = memopt.mul %{{.*}}, %[[M2]] {memopt.scope = "layers.2"}
// CHECK:      memopt.mul %{{.*}}, %[[A2]] {memopt.scope = "layers.2"}
// CHECK:      memopt.tanh_grad %[[A2]], %[[T2]] {memopt.scope = "layers.2"}
// CHECK:      %[[D1:.*]] = memopt.matmul %[[G2:.*]], %arg4 {memopt.scope = "layers.2"}
// CHECK-NEXT: memopt.matmul %[[G2]], %[[H1]] transpose_lhs {memopt.scope = "layers.2"}

// The first segment is recomputed from x, each clone reading the clones
// before it, and its backward reads the clones.
// CHECK-NEXT: %[[RM0:.*]] = memopt.matmul %arg0, %arg2 transpose_rhs {memopt.recompute, memopt.scope = "layers.0"}
// CHECK-NEXT: %[[RA0:.*]] = memopt.tanh %[[RM0]] {memopt.recompute, memopt.scope = "layers.0"}
// CHECK-NEXT: %[[RH0:.*]] = memopt.mul %[[RA0]], %[[RM0]] {memopt.recompute, memopt.scope = "layers.0"}
// CHECK-NEXT: %[[RM1:.*]] = memopt.matmul %[[RH0]], %arg3 transpose_rhs {memopt.recompute, memopt.scope = "layers.1"}
// CHECK-NEXT: %[[T1:.*]] = memopt.mul %[[D1]], %[[RM1]] {memopt.scope = "layers.1"}
// CHECK-NEXT: %[[RA1:.*]] = memopt.tanh %[[RM1]] {memopt.recompute, memopt.scope = "layers.1"}
// CHECK-NEXT: %[[U1:.*]] = memopt.mul %[[D1]], %[[RA1]] {memopt.scope = "layers.1"}
// CHECK-NEXT: %[[V1:.*]] = memopt.tanh_grad %[[RA1]], %[[T1]] {memopt.scope = "layers.1"}
// CHECK-NEXT: %[[G1:.*]] = memopt.add %[[U1]], %[[V1]] {memopt.scope = "layers.1"}
// CHECK-NEXT: %[[D0:.*]] = memopt.matmul %[[G1]], %arg3 {memopt.scope = "layers.1"}
// CHECK-NEXT: memopt.matmul %[[G1]], %[[RH0]] transpose_lhs {memopt.scope = "layers.1"}
// CHECK-NEXT: %[[T0:.*]] = memopt.mul %[[D0]], %[[RM0]] {memopt.scope = "layers.0"}
// CHECK-NEXT: %[[U0:.*]] = memopt.mul %[[D0]], %[[RA0]] {memopt.scope = "layers.0"}
// CHECK-NEXT: %[[V0:.*]] = memopt.tanh_grad %[[RA0]], %[[T0]] {memopt.scope = "layers.0"}
// CHECK-NEXT: %[[G0:.*]] = memopt.add %[[U0]], %[[V0]] {memopt.scope = "layers.0"}
// CHECK-NEXT: memopt.matmul %[[G0]], %arg0 transpose_lhs {memopt.scope = "layers.0"}
// CHECK-NOT: memopt.recompute
// CHECK: return
