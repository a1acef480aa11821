//===- PlanningPipeline.cpp - from a rematerialized step to its arena -----===//
//
// One sequence of passes, used by the training pipeline (lib/Pipelines) and
// by --memopt-remat, which plans copies of the step to choose among its
// candidates: both must plan the step the same way.
//
//===----------------------------------------------------------------------===//

#include "memopt/Dialect/Memopt/Transforms/Passes.h"

#include "memopt/Dialect/Memopt/IR/MemoptDialect.h"

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"

using namespace mlir;
using namespace memopt;

std::optional<OffloadChoice> memopt::parseOffload(llvm::StringRef text) {
  OffloadChoice choice;
  if (text == "none")
    return choice;
  llvm::SmallVector<llvm::StringRef> parts;
  text.split(parts, ',');
  for (llvm::StringRef part : parts) {
    if (part == "optimizer") {
      choice.optimizer = true;
    } else if (part == "params") {
      choice.optimizer = choice.params = true;
    } else if (part == "activations") {
      choice.activations = true;
    } else {
      return std::nullopt;
    }
  }
  return choice;
}

void memopt::buildPlanningPipeline(
    OpPassManager &pm, std::shared_ptr<const PlanningPipelineOptions> shared,
    std::optional<double> placementSeconds, ActivationPlanning activations) {
  const PlanningPipelineOptions &options = *shared;
  bool split = options.microBatches != 1 || options.dataParallel != 1;
  // (The pipeline's checks have refused any other spelling.)
  OffloadChoice offload =
      parseOffload(options.offload).value_or(OffloadChoice());
  // The activations first: they are found on the step's one block, before
  // the loop or a moved update changes it.
  if (offload.activations && activations != ActivationPlanning::Skipped) {
    OffloadActivationsPassOptions moved;
    if (activations == ActivationPlanning::Budgeted)
      moved.budget = options.offloadBudget;
    pm.addPass(createOffloadActivationsPass(moved, shared));
  }
  // Clipping needs the gradients the updates read: before release moves
  // the updates, after the loop and ZeRO have made the sums and shards.
  auto addClipping = [&] {
    ClipGradientsPassOptions clip;
    clip.maxNorm = options.clipGradNorm;
    clip.strategy = options.clipStrategy;
    pm.addPass(createClipGradientsPass(clip));
  };
  if (options.clipGradNorm > 0 && !split)
    addClipping();
  if (options.releaseGradients && !split)
    pm.addPass(createReleaseGradientsPass());
  if (split) {
    AccumulatePassOptions accumulate;
    accumulate.microBatches = options.microBatches;
    accumulate.dataParallel = options.dataParallel;
    accumulate.rankBatch = options.rankBatch;
    accumulate.allowBatchNorm = options.accumulateAllowBatchNorm;
    pm.addPass(createAccumulatePass(accumulate));
  }
  if (options.zeroStage > 0) {
    ShardOptimizerPassOptions shard;
    shard.stage = options.zeroStage;
    pm.addPass(createShardOptimizerPass(shard));
  }
  if (options.clipGradNorm > 0 && split)
    addClipping();
  if (offload.optimizer) {
    OffloadOptimizerPassOptions optimizer;
    optimizer.params = offload.params;
    pm.addPass(createOffloadOptimizerPass(optimizer));
  }
  BufferizePassOptions bufferize;
  bufferize.reuse = options.bufferReuse;
  pm.addPass(createBufferizePass(bufferize));
  if (options.overlapTransfers && (offload.optimizer || offload.activations)) {
    OverlapTransfersPassOptions overlap;
    overlap.device = options.transferDevice;
    pm.addPass(createOverlapTransfersPass(overlap));
  }
  PlanBuffersPassOptions plan;
  plan.timeLimit = placementSeconds.value_or(options.planTimeLimit);
  plan.reuse = options.bufferReuse;
  pm.addPass(createPlanBuffersPass(plan));
}

FailureOr<int64_t>
memopt::planCopyArena(ModuleOp module,
                      std::shared_ptr<const PlanningPipelineOptions> options,
                      double placementSeconds, ActivationPlanning activations) {
  PassManager pm(module.getContext());
  buildPlanningPipeline(pm, std::move(options), placementSeconds, activations);
  ScopedDiagnosticHandler quiet(module.getContext(),
                                [](Diagnostic &) { return success(); });
  if (failed(pm.run(module)))
    return failure();
  FailureOr<FunctionOpInterface> planned = findTrainStep(module, "plan");
  auto arena = succeeded(planned) ? (*planned)->getAttrOfType<IntegerAttr>(
                                        MemoptDialect::kArenaBytesAttrName)
                                  : IntegerAttr();
  if (!arena)
    return failure();
  return arena.getInt();
}
