// RUN: memopt-opt --memopt-autodiff="optimizer=sgd lr=0.1" --memopt-remat="strategy=revolve snapshots=1" %S/Inputs/remat-chain.mlir | FileCheck %s

// --memopt-remat=revolve snapshots=1 on a chain of four layers: with one snapshot (the arguments): t(4, 1) = 6 stage recomputations, each turn from the arguments.
// The forward is unchanged; every clone carries memopt.recompute and sits
// just before the backward op that reads it first.

// CHECK-LABEL: func.func @train_step
// CHECK-NOT: memopt.recompute
// CHECK: memopt.cross_entropy %{{[0-9]+}}, %arg1
// CHECK-NOT: memopt.recompute
// CHECK: %{{[0-9]+}} = memopt.cross_entropy_grad %{{[0-9]+}}, %arg1, %{{[0-9]+}} {memopt.scope = ""}
// CHECK: %{{[0-9]+}} = memopt.tanh_grad %{{[0-9]+}}, %{{[0-9]+}} {memopt.scope = "layers.3"}
// CHECK: %{{[0-9]+}} = memopt.matmul %arg0, %arg2 transpose_rhs {memopt.recompute, memopt.scope = "layers.0"}
// CHECK: %{{[0-9]+}} = memopt.tanh %{{[0-9]+}} {memopt.recompute, memopt.scope = "layers.0"}
// CHECK: %{{[0-9]+}} = memopt.mul %{{[0-9]+}}, %{{[0-9]+}} {memopt.recompute, memopt.scope = "layers.0"}
// CHECK: %{{[0-9]+}} = memopt.matmul %{{[0-9]+}}, %arg3 transpose_rhs {memopt.recompute, memopt.scope = "layers.1"}
// CHECK: %{{[0-9]+}} = memopt.tanh %{{[0-9]+}} {memopt.recompute, memopt.scope = "layers.1"}
// CHECK: %{{[0-9]+}} = memopt.mul %{{[0-9]+}}, %{{[0-9]+}} {memopt.recompute, memopt.scope = "layers.1"}
// CHECK: %{{[0-9]+}} = memopt.matmul %{{[0-9]+}}, %arg4 transpose_rhs {memopt.recompute, memopt.scope = "layers.2"}
// CHECK: %{{[0-9]+}} = memopt.tanh %{{[0-9]+}} {memopt.recompute, memopt.scope = "layers.2"}
// CHECK: %{{[0-9]+}} = memopt.tanh_grad %{{[0-9]+}}, %{{[0-9]+}} {memopt.scope = "layers.2"}
// CHECK: %{{[0-9]+}} = memopt.matmul %arg0, %arg2 transpose_rhs {memopt.recompute, memopt.scope = "layers.0"}
// CHECK: %{{[0-9]+}} = memopt.tanh %{{[0-9]+}} {memopt.recompute, memopt.scope = "layers.0"}
// CHECK: %{{[0-9]+}} = memopt.mul %{{[0-9]+}}, %{{[0-9]+}} {memopt.recompute, memopt.scope = "layers.0"}
// CHECK: %{{[0-9]+}} = memopt.matmul %{{[0-9]+}}, %arg3 transpose_rhs {memopt.recompute, memopt.scope = "layers.1"}
// CHECK: %{{[0-9]+}} = memopt.tanh %{{[0-9]+}} {memopt.recompute, memopt.scope = "layers.1"}
// CHECK: %{{[0-9]+}} = memopt.tanh_grad %{{[0-9]+}}, %{{[0-9]+}} {memopt.scope = "layers.1"}
// CHECK: %{{[0-9]+}} = memopt.matmul %arg0, %arg2 transpose_rhs {memopt.recompute, memopt.scope = "layers.0"}
// CHECK: %{{[0-9]+}} = memopt.tanh %{{[0-9]+}} {memopt.recompute, memopt.scope = "layers.0"}
// CHECK: %{{[0-9]+}} = memopt.tanh_grad %{{[0-9]+}}, %{{[0-9]+}} {memopt.scope = "layers.0"}
// CHECK-NOT: memopt.recompute
// CHECK: return
