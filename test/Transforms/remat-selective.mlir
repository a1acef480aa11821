// RUN: memopt-opt --memopt-autodiff="optimizer=sgd lr=0.1" --memopt-remat="strategy=selective" %S/Inputs/remat-chain.mlir | FileCheck %s

// --memopt-remat=selective on a chain of four layers: recomputes the cheap
// tanh of every layer, keeps the matmul outputs. The forward is unchanged;
// every clone carries memopt.recompute and sits just before the backward op
// that reads it first.

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

// Each layer's backward recomputes its tanh from the kept matmul output and
// reads the clone; the matmul outputs and the layer inputs are the forward's.
// CHECK-NOT: memopt.recompute
// CHECK:      %[[G3:.*]] = memopt.cross_entropy_grad %[[H3]], %arg1, %{{.*}} {memopt.scope = ""}
// CHECK-NEXT: %[[T3:.*]] = memopt.mul %[[G3]], %[[M3]] {memopt.scope = "layers.3"}
// CHECK-NEXT: %[[B3:.*]] = memopt.tanh %[[M3]] {memopt.recompute, memopt.scope = "layers.3"}
// CHECK-NEXT: memopt.mul %[[G3]], %[[B3]] {memopt.scope = "layers.3"}
// CHECK-NEXT: memopt.tanh_grad %[[B3]], %[[T3]] {memopt.scope = "layers.3"}
// CHECK-NEXT: %[[S3:.*]] = memopt.add
// CHECK-NEXT: %[[D3:.*]] = memopt.matmul %[[S3]], %arg5 {memopt.scope = "layers.3"}
// CHECK-NEXT: memopt.matmul %[[S3]], %[[H2]] transpose_lhs {memopt.scope = "layers.3"}
// CHECK-NEXT: %[[T2:.*]] = memopt.mul %[[D3]], %[[M2]] {memopt.scope = "layers.2"}
// CHECK-NEXT: %[[B2:.*]] = memopt.tanh %[[M2]] {memopt.recompute, memopt.scope = "layers.2"}
// CHECK-NEXT: memopt.mul %[[D3]], %[[B2]] {memopt.scope = "layers.2"}
// CHECK-NEXT: memopt.tanh_grad %[[B2]], %[[T2]] {memopt.scope = "layers.2"}
// CHECK-NEXT: %[[S2:.*]] = memopt.add
// CHECK-NEXT: %[[D2:.*]] = memopt.matmul %[[S2]], %arg4 {memopt.scope = "layers.2"}
// CHECK-NEXT: memopt.matmul %[[S2]], %[[H1]] transpose_lhs {memopt.scope = "layers.2"}
// CHECK-NEXT: %[[T1:.*]] = memopt.mul %[[D2]], %[[M1]] {memopt.scope = "layers.1"}
// CHECK-NEXT: %[[B1:.*]] = memopt.tanh %[[M1]] {memopt.recompute, memopt.scope = "layers.1"}
// CHECK-NEXT: memopt.mul %[[D2]], %[[B1]] {memopt.scope = "layers.1"}
// CHECK-NEXT: memopt.tanh_grad %[[B1]], %[[T1]] {memopt.scope = "layers.1"}
// CHECK-NEXT: %[[S1:.*]] = memopt.add
// CHECK-NEXT: %[[D1:.*]] = memopt.matmul %[[S1]], %arg3 {memopt.scope = "layers.1"}
// CHECK-NEXT: memopt.matmul %[[S1]], %[[H0]] transpose_lhs {memopt.scope = "layers.1"}
// CHECK-NEXT: %[[T0:.*]] = memopt.mul %[[D1]], %[[M0]] {memopt.scope = "layers.0"}
// CHECK-NEXT: %[[B0:.*]] = memopt.tanh %[[M0]] {memopt.recompute, memopt.scope = "layers.0"}
// CHECK-NEXT: memopt.mul %[[D1]], %[[B0]] {memopt.scope = "layers.0"}
// CHECK-NEXT: memopt.tanh_grad %[[B0]], %[[T0]] {memopt.scope = "layers.0"}
// CHECK-NEXT: %[[S0:.*]] = memopt.add
// CHECK-NEXT: memopt.matmul %[[S0]], %arg0 transpose_lhs {memopt.scope = "layers.0"}
// CHECK-NOT: memopt.recompute
// CHECK: return
