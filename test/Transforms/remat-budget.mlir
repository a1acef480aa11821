// RUN: memopt-opt --memopt-autodiff="optimizer=sgd lr=0.1" --memopt-remat="strategy=budget budget=10000" --memopt-bufferize --memopt-plan-buffers %S/Inputs/remat-chain.mlir | FileCheck %s --check-prefix=ROOMY
// RUN: memopt-opt --memopt-autodiff="optimizer=sgd lr=0.1" --memopt-remat="strategy=budget budget=5000" --memopt-bufferize --memopt-plan-buffers %S/Inputs/remat-chain.mlir | FileCheck %s --check-prefix=TIGHT
// RUN: memopt-opt --memopt-autodiff="optimizer=sgd lr=0.1" --memopt-remat="strategy=auto budget=5000" --memopt-bufferize --memopt-plan-buffers %S/Inputs/remat-chain.mlir | FileCheck %s --check-prefix=TIGHT
// RUN: memopt-opt --memopt-autodiff="optimizer=sgd lr=0.1" --memopt-remat="strategy=auto" --memopt-bufferize --memopt-plan-buffers %S/Inputs/remat-chain.mlir | FileCheck %s --check-prefix=ROOMY

// The chain's planned arena is 6912 bytes when everything is kept and 4608
// with every layer recomputed from its input. A budget above the first keeps
// everything (no clone); 5000 bytes forces the least recompute that the
// planner fits in 5000 bytes; auto without a budget is none.

// ROOMY-LABEL: func.func @train_step
// ROOMY-SAME: memopt.arena_bytes = 6912
// ROOMY-NOT: memopt.recompute

// TIGHT-LABEL: func.func @train_step
// TIGHT-SAME: memopt.arena_bytes = 4608
// TIGHT: memopt.kernel "memopt.matmul" {{.*}} {memopt.recompute, memopt.scope = "layers.2"}
// TIGHT: memopt.kernel "memopt.matmul" {{.*}} {memopt.recompute, memopt.scope = "layers.1"}
// TIGHT: memopt.kernel "memopt.matmul" {{.*}} {memopt.recompute, memopt.scope = "layers.0"}
