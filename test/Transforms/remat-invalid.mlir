// RUN: not memopt-opt --memopt-autodiff --memopt-remat="strategy=budget budget=4096" %S/Inputs/remat-chain.mlir 2>&1 | FileCheck %s --check-prefix=PEAK
// RUN: not memopt-opt --memopt-remat="strategy=fast" %S/Inputs/remat-chain.mlir 2>&1 | FileCheck %s --check-prefix=STRATEGY
// RUN: not memopt-opt --memopt-remat="strategy=budget" %S/Inputs/remat-chain.mlir 2>&1 | FileCheck %s --check-prefix=NOBUDGET
// RUN: not memopt-opt --memopt-remat="strategy=revolve snapshots=-1" %S/Inputs/remat-chain.mlir 2>&1 | FileCheck %s --check-prefix=SNAPSHOTS
// RUN: not memopt-opt --memopt-remat="strategy=auto budget=-5" %S/Inputs/remat-chain.mlir 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// RUN: not memopt-opt --memopt-remat="strategy=blocks" %S/Inputs/remat-chain.mlir 2>&1 | FileCheck %s --check-prefix=NOSTEP
// RUN: memopt-opt %s -split-input-file -verify-diagnostics

// A budget below the smallest arena any remat plan reaches (4608 bytes for
// this chain, every layer recomputed from its input) is an error that names
// that arena.
// PEAK: error: 'func.func' op --memopt-remat: the budget of 4096 bytes is below the smallest reachable peak, 4608 bytes
// STRATEGY: error: --memopt-remat: unknown strategy 'fast' (expected none, blocks, sqrt, revolve, budget, selective or auto)
// NOBUDGET: error: --memopt-remat: strategy=budget needs budget=<bytes>
// SNAPSHOTS: error: --memopt-remat: snapshots must be >= 0 (0: the logarithmic choice), got -1
// NEGATIVE: error: --memopt-remat: budget must be a non-negative number of bytes, got -5
// NOSTEP: error: no function marked 'memopt.train_step' to rematerialize (run --memopt-autodiff first)

// memopt.recompute is a unit attribute.
func.func @f(%a: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{attribute 'memopt.recompute' must be a unit attribute}}
  %b = memopt.relu %a {memopt.recompute = 1 : i64} : tensor<4xf32>
  return %b : tensor<4xf32>
}
