// RUN: memopt-opt --memopt-autodiff="optimizer=sgd lr=0.1" --memopt-remat="strategy=budget budget=30000 planning=buffer-reuse=false" --memopt-bufferize=reuse=false --memopt-plan-buffers=reuse=false %S/Inputs/remat-chain.mlir | FileCheck %s
// RUN: not memopt-opt --memopt-autodiff="optimizer=sgd lr=0.1" --memopt-remat="strategy=budget budget=10000 planning=buffer-reuse=false" %S/Inputs/remat-chain.mlir 2>&1 | FileCheck %s --check-prefix=TIGHT
// RUN: memopt-opt --memopt-autodiff="optimizer=sgd lr=0.1" --memopt-remat="strategy=budget budget=10000" %S/Inputs/remat-chain.mlir -o /dev/null
// RUN: not memopt-opt --memopt-autodiff="optimizer=sgd lr=0.1" --memopt-remat="strategy=budget budget=10000 planning={micro-batches=x}" %S/Inputs/remat-chain.mlir 2>&1 | FileCheck %s --check-prefix=PLANNING

// --memopt-remat's budget strategy plans its candidates as the pipeline will:
// with planning=buffer-reuse=false, without reuse. The chain's no-reuse arena is 20736
// bytes with everything kept, and a clone only adds buffers, so no
// recomputation lowers it: a roomy budget keeps everything, and 10000 bytes
// (above the 6912 the chain plans to with reuse, which the last RUN line
// accepts) is out of reach.

// CHECK-LABEL: func.func @train_step
// CHECK-SAME: memopt.arena_bytes = 20736
// CHECK-NOT: memopt.recompute

// PLANNING: for the --micro-batches option: 'x' value invalid
// PLANNING: error: --memopt-remat: invalid planning='micro-batches=x'

// TIGHT: error: 'func.func' op --memopt-remat: the budget of 10000 bytes is below the smallest reachable peak, 20736 bytes
