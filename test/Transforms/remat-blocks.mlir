// RUN: memopt-opt --memopt-autodiff="optimizer=sgd lr=0.1" --memopt-remat="strategy=blocks" %S/Inputs/remat-chain.mlir | FileCheck %s

// --memopt-remat=blocks on a chain of four layers: keeps each layer's output
// (H0, H1, H2, the stage boundaries); recomputes the matmul and tanh of
// layers 2, 1 and 0 from the kept input of their layer (layer 3, the last
// stage, keeps its values) right before their first backward use. The
// forward is unchanged; every clone carries memopt.recompute, and each
// layer's backward reads its clones, not the forward's values.

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

// Layer 3 reads the forward's values.
// CHECK-NOT: memopt.recompute
// CHECK:      %[[G3:.*]] = memopt.cross_entropy_grad %[[H3]], %arg1, %{{.*}} {memopt.scope = ""}
// CHECK-NEXT: %[[T3:.*]] = memopt.mul %[[G3]], %[[M3]] {memopt.scope = "layers.3"}
// CHECK-NEXT: memopt.mul %[[G3]], %[[A3]] {memopt.scope = "layers.3"}
// CHECK-NEXT: memopt.tanh_grad %[[A3]], %[[T3]] {memopt.scope = "layers.3"}
// CHECK:      %[[D2:.*]] = memopt.matmul %[[S3:.*]], %arg5 {memopt.scope = "layers.3"}
// CHECK-NEXT: memopt.matmul %[[S3]], %[[H2]] transpose_lhs {memopt.scope = "layers.3"}

// Layer 2 recomputes from H1, kept.
// CHECK-NEXT: %[[R2:.*]] = memopt.matmul %[[H1]], %arg4 transpose_rhs {memopt.recompute, memopt.scope = "layers.2"}
// CHECK-NEXT: %[[U2:.*]] = memopt.mul %[[D2]], %[[R2]] {memopt.scope = "layers.2"}
// CHECK-NEXT: %[[B2:.*]] = memopt.tanh %[[R2]] {memopt.recompute, memopt.scope = "layers.2"}
// CHECK-NEXT: memopt.mul %[[D2]], %[[B2]] {memopt.scope = "layers.2"}
// CHECK-NEXT: memopt.tanh_grad %[[B2]], %[[U2]] {memopt.scope = "layers.2"}
// CHECK:      %[[D1:.*]] = memopt.matmul %[[S2:.*]], %arg4 {memopt.scope = "layers.2"}
// CHECK-NEXT: memopt.matmul %[[S2]], %[[H1]] transpose_lhs {memopt.scope = "layers.2"}

// Layer 1 recomputes from H0, kept.
// CHECK-NEXT: %[[R1:.*]] = memopt.matmul %[[H0]], %arg3 transpose_rhs {memopt.recompute, memopt.scope = "layers.1"}
// CHECK-NEXT: %[[U1:.*]] = memopt.mul %[[D1]], %[[R1]] {memopt.scope = "layers.1"}
// CHECK-NEXT: %[[B1:.*]] = memopt.tanh %[[R1]] {memopt.recompute, memopt.scope = "layers.1"}
// CHECK-NEXT: memopt.mul %[[D1]], %[[B1]] {memopt.scope = "layers.1"}
// CHECK-NEXT: memopt.tanh_grad %[[B1]], %[[U1]] {memopt.scope = "layers.1"}
// CHECK:      %[[D0:.*]] = memopt.matmul %[[S1:.*]], %arg3 {memopt.scope = "layers.1"}
// CHECK-NEXT: memopt.matmul %[[S1]], %[[H0]] transpose_lhs {memopt.scope = "layers.1"}

// Layer 0 recomputes from x.
// CHECK-NEXT: %[[R0:.*]] = memopt.matmul %arg0, %arg2 transpose_rhs {memopt.recompute, memopt.scope = "layers.0"}
// CHECK-NEXT: %[[U0:.*]] = memopt.mul %[[D0]], %[[R0]] {memopt.scope = "layers.0"}
// CHECK-NEXT: %[[B0:.*]] = memopt.tanh %[[R0]] {memopt.recompute, memopt.scope = "layers.0"}
// CHECK-NEXT: memopt.mul %[[D0]], %[[B0]] {memopt.scope = "layers.0"}
// CHECK-NEXT: memopt.tanh_grad %[[B0]], %[[U0]] {memopt.scope = "layers.0"}
// CHECK:      memopt.matmul %{{.*}}, %arg0 transpose_lhs {memopt.scope = "layers.0"}
// CHECK-NOT: memopt.recompute
// CHECK: return
