//===- PlanningPipeline.cpp - from a rematerialized step to its arena -----===//
//
// One sequence of passes, used by the training pipeline (lib/Pipelines) and
// by --memopt-remat, which plans copies of the step to choose among its
// candidates: both must plan the step the same way.
//
//===----------------------------------------------------------------------===//

#include "memopt/Dialect/Memopt/Transforms/Passes.h"

#include "mlir/Pass/PassManager.h"

using namespace mlir;
using namespace memopt;

void memopt::buildPlanningPipeline(OpPassManager &pm,
                                   const PlanningPipelineOptions &options,
                                   std::optional<double> placementSeconds) {
  bool split = options.microBatches != 1 || options.dataParallel != 1;
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
  if (options.offload == "optimizer")
    pm.addPass(createOffloadOptimizerPass());
  BufferizePassOptions bufferize;
  bufferize.reuse = options.bufferReuse;
  pm.addPass(createBufferizePass(bufferize));
  PlanBuffersPassOptions plan;
  plan.timeLimit = placementSeconds.value_or(options.planTimeLimit);
  plan.reuse = options.bufferReuse;
  pm.addPass(createPlanBuffersPass(plan));
}
