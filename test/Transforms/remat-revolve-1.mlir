// RUN: memopt-opt --memopt-autodiff="optimizer=sgd lr=0.1" --memopt-remat="strategy=revolve snapshots=1" %S/Inputs/remat-chain.mlir | FileCheck %s

// --memopt-remat=revolve snapshots=1 on a chain of four layers: with one
// snapshot (the arguments), t(4, 1) = 6 stage recomputations, each turn from
// x. The forward is unchanged; every clone carries memopt.recompute, each
// turn's clones read x and earlier clones only, and each layer's backward
// reads its turn's clones.

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

// The last layer's backward reads the forward's values.
// CHECK-NOT: memopt.recompute
// CHECK:      %[[G3:.*]] = memopt.cross_entropy_grad %[[H3]], %arg1, %{{.*}} {memopt.scope = ""}
// CHECK-NEXT: %[[T3:.*]] = memopt.mul %[[G3]], %[[M3]] {memopt.scope = "layers.3"}
// CHECK-NEXT: memopt.mul %[[G3]], %[[A3]] {memopt.scope = "layers.3"}
// CHECK-NEXT: memopt.tanh_grad %[[A3]], %[[T3]] {memopt.scope = "layers.3"}
// CHECK-NEXT: %[[S3:.*]] = memopt.add
// CHECK-NEXT: %[[D2:.*]] = memopt.matmul %[[S3]], %arg5 {memopt.scope = "layers.3"}
// CHECK-NEXT: memopt.matmul %[[S3]], %[[H2]] transpose_lhs {memopt.scope = "layers.3"}

// Every turn advances from x (the one snapshot) through clones only.
// CHECK-NEXT: %[[PM0:.*]] = memopt.matmul %arg0, %arg2 transpose_rhs {memopt.recompute, memopt.scope = "layers.0"}
// CHECK-NEXT: %[[PA0:.*]] = memopt.tanh %[[PM0]] {memopt.recompute, memopt.scope = "layers.0"}
// CHECK-NEXT: %[[PH0:.*]] = memopt.mul %[[PA0]], %[[PM0]] {memopt.recompute, memopt.scope = "layers.0"}
// CHECK-NEXT: %[[PM1:.*]] = memopt.matmul %[[PH0]], %arg3 transpose_rhs {memopt.recompute, memopt.scope = "layers.1"}
// CHECK-NEXT: %[[PA1:.*]] = memopt.tanh %[[PM1]] {memopt.recompute, memopt.scope = "layers.1"}
// CHECK-NEXT: %[[PH1:.*]] = memopt.mul %[[PA1]], %[[PM1]] {memopt.recompute, memopt.scope = "layers.1"}
// CHECK-NEXT: %[[PM2:.*]] = memopt.matmul %[[PH1]], %arg4 transpose_rhs {memopt.recompute, memopt.scope = "layers.2"}
// CHECK-NEXT: %[[PT2:.*]] = memopt.mul %[[D2]], %[[PM2]] {memopt.scope = "layers.2"}
// CHECK-NEXT: %[[PA2:.*]] = memopt.tanh %[[PM2]] {memopt.recompute, memopt.scope = "layers.2"}
// CHECK-NEXT: memopt.mul %[[D2]], %[[PA2]] {memopt.scope = "layers.2"}
// CHECK-NEXT: memopt.tanh_grad %[[PA2]], %[[PT2]] {memopt.scope = "layers.2"}
// CHECK-NEXT: %[[PS2:.*]] = memopt.add
// CHECK-NEXT: %[[D1:.*]] = memopt.matmul %[[PS2]], %arg4 {memopt.scope = "layers.2"}
// CHECK-NEXT: memopt.matmul %[[PS2]], %[[PH1]] transpose_lhs {memopt.scope = "layers.2"}
// CHECK-NEXT: %[[QM0:.*]] = memopt.matmul %arg0, %arg2 transpose_rhs {memopt.recompute, memopt.scope = "layers.0"}
// CHECK-NEXT: %[[QA0:.*]] = memopt.tanh %[[QM0]] {memopt.recompute, memopt.scope = "layers.0"}
// CHECK-NEXT: %[[QH0:.*]] = memopt.mul %[[QA0]], %[[QM0]] {memopt.recompute, memopt.scope = "layers.0"}
// CHECK-NEXT: %[[QM1:.*]] = memopt.matmul %[[QH0]], %arg3 transpose_rhs {memopt.recompute, memopt.scope = "layers.1"}
// CHECK-NEXT: %[[QT1:.*]] = memopt.mul %[[D1]], %[[QM1]] {memopt.scope = "layers.1"}
// CHECK-NEXT: %[[QA1:.*]] = memopt.tanh %[[QM1]] {memopt.recompute, memopt.scope = "layers.1"}
// CHECK-NEXT: memopt.mul %[[D1]], %[[QA1]] {memopt.scope = "layers.1"}
// CHECK-NEXT: memopt.tanh_grad %[[QA1]], %[[QT1]] {memopt.scope = "layers.1"}
// CHECK-NEXT: %[[QS1:.*]] = memopt.add
// CHECK-NEXT: %[[D0:.*]] = memopt.matmul %[[QS1]], %arg3 {memopt.scope = "layers.1"}
// CHECK-NEXT: memopt.matmul %[[QS1]], %[[QH0]] transpose_lhs {memopt.scope = "layers.1"}
// CHECK-NEXT: %[[RM0:.*]] = memopt.matmul %arg0, %arg2 transpose_rhs {memopt.recompute, memopt.scope = "layers.0"}
// CHECK-NEXT: %[[RT0:.*]] = memopt.mul %[[D0]], %[[RM0]] {memopt.scope = "layers.0"}
// CHECK-NEXT: %[[RA0:.*]] = memopt.tanh %[[RM0]] {memopt.recompute, memopt.scope = "layers.0"}
// CHECK-NEXT: memopt.mul %[[D0]], %[[RA0]] {memopt.scope = "layers.0"}
// CHECK-NEXT: memopt.tanh_grad %[[RA0]], %[[RT0]] {memopt.scope = "layers.0"}
// CHECK-NEXT: %[[RS0:.*]] = memopt.add
// CHECK-NEXT: memopt.matmul %[[RS0]], %arg0 transpose_lhs {memopt.scope = "layers.0"}
// CHECK-NOT: memopt.recompute
// CHECK: return
