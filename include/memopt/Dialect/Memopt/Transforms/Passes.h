//===- Passes.h - memopt passes -----------------------------------*- C++ -*-===//
//
// Declares the memopt passes and their registration.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_DIALECT_MEMOPT_TRANSFORMS_PASSES_H
#define MEMOPT_DIALECT_MEMOPT_TRANSFORMS_PASSES_H

#include "memopt/Dialect/Memopt/IR/MemoptDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "llvm/ADT/StringRef.h"

#include <string>

namespace memopt {

/// The strategies of --memopt-remat (memopt-compile --remat).
inline constexpr llvm::StringLiteral kRematStrategies[] = {
    "none", "blocks", "sqrt", "revolve", "budget", "selective", "auto"};

/// Whether `strategy` is one of kRematStrategies.
bool isRematStrategy(llvm::StringRef strategy);

/// "none, blocks, ... or auto", for messages.
std::string listRematStrategies();

#define GEN_PASS_DECL
#include "memopt/Dialect/Memopt/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "memopt/Dialect/Memopt/Transforms/Passes.h.inc"

/// The passes that take a rematerialized step to its planned arena.
struct PlanningPipelineOptions {
  /// The micro-batch loop (--memopt-accumulate) when either is above 1.
  int64_t microBatches = 1;
  int64_t dataParallel = 1;
  /// The batch arguments are one rank's (--memopt-accumulate's rank-batch).
  bool rankBatch = false;
  bool allowBatchNorm = false;
  /// --memopt-shard-optimizer's stage after the loop (0: none).
  int64_t zeroStage = 0;
  /// --memopt-release-gradients, with one micro-batch on one rank.
  bool releaseGradients = true;
  /// --memopt-clip-gradients' max-norm (0: no clipping) and strategy.
  double clipGradNorm = 0;
  std::string clipStrategy = "keep";
  bool bufferReuse = true;
  /// --memopt-plan-buffers' time-limit (0: its heuristics only).
  double planTimeLimit = 1.0;
};

/// Adds the gradient release or the micro-batch loop (and ZeRO's sharding),
/// --memopt-bufferize and
/// --memopt-plan-buffers: what follows --memopt-remat in the training
/// pipeline, and what remat runs on copies to plan its candidates.
void buildPlanningPipeline(mlir::OpPassManager &pm,
                           const PlanningPipelineOptions &options);

} // namespace memopt

#endif // MEMOPT_DIALECT_MEMOPT_TRANSFORMS_PASSES_H
