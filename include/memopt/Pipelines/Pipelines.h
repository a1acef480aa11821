//===- Pipelines.h - the memopt compilation pipeline -------------*- C++ -*-===//
//
// One function builds the pipeline that memopt-compile runs and that
// memopt-opt exposes as --memopt-pipeline, so the two never diverge.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_PIPELINES_PIPELINES_H
#define MEMOPT_PIPELINES_PIPELINES_H

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>

namespace memopt {

/// The options of the training pipeline.
struct MemoptPipelineOptions {
  /// adamw or sgd.
  std::string optimizer = "adamw";
  double lr = 1e-3;
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weightDecay = 0.01;
  double momentum = 0.0;
  /// Seconds the buffer placer may search for a smaller arena.
  double planTimeLimit = 1.0;
  /// --memopt-fuse-kernels (docs/Fusion.md): memopt.attention in place of
  /// the score matrices, memopt.linear_cross_entropy in place of the logits.
  bool fuseAttention = true;
  bool fuseLmLoss = true;
  /// Classes per chunk of the fused linear cross-entropy (0: from the
  /// memory account).
  int64_t lmLossChunk = 0;
  /// Mixed precision (docs/MixedPrecision.md): "none", "bf16" or "f16".
  std::string mixedPrecision = "none";
  /// "dynamic", "none" or a static scale; "" for the compute type's default.
  std::string lossScale;
  double lossScaleInit = 65536.0;
  double lossScaleGrowthFactor = 2.0;
  double lossScaleBackoffFactor = 0.5;
  int64_t lossScaleGrowthInterval = 2000;
  /// --memopt-remat strategy: none, blocks, sqrt, revolve, budget,
  /// selective or auto; the pass runs when it is not "none" or when
  /// cheapRecompute is set.
  std::string remat = "none";
  /// --memopt-remat's minimal saved set: recompute cheap ops in the
  /// backward where that keeps fewer bytes (false: keep every value the
  /// backward reads, as remat=none did before).
  bool cheapRecompute = true;
  /// --memopt-release-gradients: each optimizer update right after its
  /// gradient is complete (only with microBatches == 1; the pass itself
  /// leaves a loss-scaled step alone).
  bool releaseGradients = true;
  /// Bytes the planned arena may take (remat=budget or auto); 0: none.
  int64_t memoryBudget = 0;
  /// revolve: snapshot slots (0: logarithmic).
  int64_t rematSnapshots = 0;
  /// Gradient accumulation: micro-batches per step (1: no loop).
  int64_t microBatches = 1;
  /// Data parallelism: the ranks the batch is split across (1: none;
  /// docs/DataParallel.md).
  int64_t dataParallel = 1;
  /// With dataParallel > 1: the exported batch is each rank's (the global
  /// batch is dataParallel times it) instead of the global batch.
  bool rankBatch = false;
  /// ZeRO over the dataParallel ranks (docs/DataParallel.md): 0 none, 1
  /// shards the optimizer state, 2 also the gradients.
  int64_t zeroStage = 0;
  /// With microBatches > 1: accept batch norm's per-micro-batch statistics.
  bool accumulateAllowBatchNorm = false;
  /// False gives every buffer its own bytes (docs/BufferReuse.md):
  /// --memopt-bufferize and --memopt-plan-buffers run with reuse=false, and
  /// --memopt-remat's budget plans its copies the same way.
  bool bufferReuse = true;
};

/// Sets `options.mixedPrecision` from the name memopt-compile and
/// --memopt-pipeline both accept: none, bf16 or fp16 (the pass's f16).
/// `extraName`, when given, is a value the calling tool handles itself; the
/// error lists it with the others.
llvm::Error setMixedPrecision(MemoptPipelineOptions &options,
                              llvm::StringRef name,
                              llvm::StringRef extraName = "");

/// The value of a flag as the user typed it, or nullopt to print the value
/// as read; memopt-compile reads numbers from text and reports that text.
using FlagText =
    llvm::function_ref<std::optional<std::string>(llvm::StringRef flag)>;

/// Checks what memopt-compile and --memopt-pipeline both accept: the
/// optimizer and its hyper-parameters, the remat strategy, the loss scale
/// and the micro-batch count. The one error names the flag as both tools
/// spell it, with the value as `flagText` gives it.
llvm::Error validateMemoptPipelineOptions(const MemoptPipelineOptions &options,
                                          FlagText flagText = nullptr);

/// Adds the passes from a forward + loss module to a planned, bufferized
/// @train_step: mixed precision (when asked for), autodiff, bufferization,
/// buffer planning, plan verification.
void buildMemoptPipeline(mlir::OpPassManager &pm,
                         const MemoptPipelineOptions &options);

/// Registers --memopt-pipeline with memopt-opt.
void registerMemoptPipelines();

} // namespace memopt

#endif // MEMOPT_PIPELINES_PIPELINES_H
