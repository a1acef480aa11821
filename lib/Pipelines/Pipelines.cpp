//===- Pipelines.cpp - the memopt compilation pipeline --------------------===//
//
// The order of the passes, and why:
// 0. mixed-precision (only when asked for) before autodiff, as autocast runs
//    in the forward: the backward then follows the forward's dtypes, and the
//    loss scaling it records is what autodiff implements;
// 1. autodiff first: every later pass sees the whole training step (forward,
//    backward and update), which is what must fit in memory;
// 2. remat (when a strategy is chosen, or for the minimal saved set, on by
//    default): on tensors, after autodiff, so that it sees which forward
//    values the backward reads, and before bufferize, whose buffers and
//    lifetimes follow from its clones;
// 3. accumulate (only with micro-batches > 1): after autodiff and remat
//    (remat needs one block), so the loop wraps the whole forward and
//    backward, recomputation included, and before bufferize, so that every
//    body value gets a buffer that lives one iteration;
// 4. bufferize: from here on every value is a buffer with a lifetime;
// 5. plan-buffers: offsets in one arena from the buffers' live ranges
//    (with bufferReuse off, 4 and 5 share nothing: the unoptimised baseline);
// 6. verify-plan: an independent check of the plan before code is generated.
//
//===----------------------------------------------------------------------===//

#include "memopt/Pipelines/Pipelines.h"
#include "memopt/Analysis/CostModel.h"
#include "memopt/Conversion/Passes.h"
#include "memopt/Dialect/Memopt/Transforms/Passes.h"
#include "memopt/Support/ByteSize.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/EmitC/IR/EmitC.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include "mlir/Pass/PassRegistry.h"
#include "llvm/ADT/STLExtras.h"

#include <cmath>

using namespace mlir;
using namespace memopt;

void MemoptPipelineOptions::registerAsFlags(
    llvm::ArrayRef<llvm::StringRef> names, llvm::cl::OptionCategory &category) {
  for (llvm::StringRef name : names) {
    auto it = OptionsMap.find(name);
    assert(it != OptionsMap.end() && "not a pipeline option");
    llvm::cl::Option *option = it->second;
    // Registered again, now also in the tool's top-level command line.
    option->removeArgument();
    option->addSubCommand(llvm::cl::SubCommand::getTopLevel());
    option->addCategory(category);
    option->addArgument();
  }
}

llvm::Error
memopt::validateMemoptPipelineOptions(const MemoptPipelineOptions &options) {
  auto fail = [](const llvm::Twine &message) -> llvm::Error {
    return llvm::createStringError(message);
  };
  if (options.optimizer != "adamw" && options.optimizer != "sgd")
    return fail("unknown --optimizer='" + options.optimizer +
                "' (expected adamw or sgd)");
  if (!isRematStrategy(options.remat))
    return fail("unknown --remat='" + options.remat + "' (expected " +
                listRematStrategies() + ")");
  if (options.microBatches < 1)
    return fail("invalid --micro-batches=" + llvm::Twine(options.microBatches) +
                ": expected at least 1");
  if (options.dataParallel < 1)
    return fail("invalid --data-parallel=" + llvm::Twine(options.dataParallel) +
                ": expected at least 1");
  if (options.rankBatch && options.dataParallel < 2)
    return fail("--rank-batch says the batch is each rank's: it needs "
                "--data-parallel=N with N >= 2");
  if (options.rematSnapshots < 0)
    return fail(
        "invalid --remat-snapshots=" + llvm::Twine(options.rematSnapshots) +
        ": expected a non-negative integer (0: logarithmic)");
  if (options.lmLossChunk < 0)
    return fail("invalid --lm-loss-chunk=" + llvm::Twine(options.lmLossChunk) +
                ": expected a non-negative integer (0: from the account)");
  if (options.zeroStage < 0 || options.zeroStage > 3)
    return fail("invalid --zero-stage=" + llvm::Twine(options.zeroStage) +
                ": expected 0, 1, 2 or 3");
  if (options.optimizerStateBits != 32 &&
      (options.optimizerStateBits != 8 || options.optimizer != "adamw"))
    return fail("invalid optimizer-state-bits=" +
                llvm::Twine(options.optimizerStateBits) +
                ": expected 32, or 8 with adamw");
  if (options.zeroStage > 0 && options.dataParallel < 2)
    return fail("--zero-stage=" + llvm::Twine(options.zeroStage) +
                " shards over the data-parallel ranks: it needs "
                "--data-parallel=N with N >= 2");
  if (options.zeroStage > 0 && options.mixedPrecision == Precision::F16 &&
      options.lossScale != "none")
    return fail("--zero-stage=" + llvm::Twine(options.zeroStage) +
                " with --mixed-precision=fp16 needs --loss-scale=none: loss "
                "scaling unscales and checks whole gradients, which ZeRO "
                "never holds (use --mixed-precision=bf16)");
  llvm::StringRef frozen = options.frozenWeights;
  if (!llvm::is_contained({"", "nf4", "f32", "bf16", "fp16"}, frozen))
    return fail("unknown --frozen-weights='" + frozen +
                "' (expected nf4, f32, bf16 or fp16)");
  if ((frozen == "bf16" || frozen == "fp16") &&
      parsePrecision(frozen) != options.mixedPrecision)
    return fail("--frozen-weights=" + frozen + " needs --mixed-precision=" +
                frozen +
                ": frozen weights are stored in the compute type, in f32 or "
                "in nf4");
  llvm::StringRef lossScale = options.lossScale;
  double scale = 0;
  if (!lossScale.empty() && lossScale != "dynamic" && lossScale != "none" &&
      (lossScale.trim().getAsDouble(scale) || !std::isfinite(scale) ||
       scale <= 0))
    return fail("invalid --loss-scale='" + lossScale +
                "': expected a positive number");
  struct {
    llvm::StringRef flag;
    double value;
    bool positive;
  } numbers[] = {{"lr", options.lr, true},
                 {"eps", options.eps, true},
                 {"momentum", options.momentum, false},
                 {"weight-decay", options.weightDecay, false},
                 {"loss-scale-init", options.lossScaleInit, true}};
  for (const auto &[flag, value, positive] : numbers)
    if (!std::isfinite(value) || value < 0 || (positive && value == 0))
      return fail("invalid --" + flag + "='" + formatNumber(value) +
                  "': expected a " + (positive ? "positive" : "non-negative") +
                  " number");
  if (!std::isfinite(options.clipGradNorm) || options.clipGradNorm < 0)
    return fail("invalid --clip-grad-norm='" +
                formatNumber(options.clipGradNorm) +
                "': expected a positive number");
  if (options.clipStrategy != "keep" && options.clipStrategy != "recompute" &&
      options.clipStrategy != "auto")
    return fail("unknown --clip-strategy='" + options.clipStrategy +
                "' (expected auto, keep or recompute)");
  if (options.clipStrategy == "recompute" && !releasesGradients(options))
    return fail("--clip-strategy=recompute keeps the memory of gradient "
                "release, which needs one micro-batch on one rank, no loss "
                "scaling and no --no-release-gradients (use keep)");
  if (!parseOffload(options.offload))
    return fail("unknown --offload='" + options.offload +
                "' (expected none, or a comma-separated list of optimizer, "
                "params and activations)");
  if (!lookupDeviceProfile(options.transferDevice))
    return fail("unknown transfer-device='" + options.transferDevice +
                "' (a device --device names)");
  if (options.lossScaleGrowthInterval < 1)
    return fail("invalid --loss-scale-growth-interval='" +
                std::to_string(options.lossScaleGrowthInterval) +
                "': expected an integer >= 1");
  if (!(options.lossScaleGrowthFactor > 1) ||
      !std::isfinite(options.lossScaleGrowthFactor))
    return fail("invalid --loss-scale-growth-factor='" +
                formatNumber(options.lossScaleGrowthFactor) +
                "': expected a number > 1");
  if (!(options.lossScaleBackoffFactor > 0 &&
        options.lossScaleBackoffFactor < 1))
    return fail("invalid --loss-scale-backoff-factor='" +
                formatNumber(options.lossScaleBackoffFactor) +
                "': expected a number in (0, 1)");
  if (!(options.beta1 >= 0 && options.beta1 < 1 && options.beta2 >= 0 &&
        options.beta2 < 1))
    return fail("invalid --betas='" + formatNumber(options.beta1) + "," +
                formatNumber(options.beta2) +
                "': expected two numbers b1,b2 in [0, 1)");
  return llvm::Error::success();
}

bool memopt::releasesGradients(const MemoptPipelineOptions &options) {
  bool lossScaled =
      options.mixedPrecision == Precision::F16 && options.lossScale != "none";
  return options.releaseGradients && options.microBatches == 1 &&
         options.dataParallel == 1 && !lossScaled;
}

std::string memopt::getClipStrategy(const MemoptPipelineOptions &options) {
  if (options.clipStrategy != "auto")
    return options.clipStrategy;
  return releasesGradients(options) ? "recompute" : "keep";
}

/// The passes on the loss function that the training and the evaluation
/// step share: the fused kernels and the dtypes of the forward.
static void addForwardPasses(OpPassManager &pm,
                             const MemoptPipelineOptions &options) {
  if (options.fuseAttention || options.fuseLmLoss) {
    FuseKernelsPassOptions fuse;
    fuse.attention = options.fuseAttention;
    fuse.lmLoss = options.fuseLmLoss;
    fuse.lmLossChunk = options.lmLossChunk;
    pm.addPass(createFuseKernelsPass(fuse));
  }
  if (options.mixedPrecision != Precision::F32) {
    MixedPrecisionPassOptions mixed;
    mixed.computeType = options.mixedPrecision;
    mixed.lossScale = options.lossScale;
    mixed.lossScaleInit = options.lossScaleInit;
    mixed.growthFactor = options.lossScaleGrowthFactor;
    mixed.backoffFactor = options.lossScaleBackoffFactor;
    mixed.growthInterval = options.lossScaleGrowthInterval;
    mixed.frozenInComputeType = options.frozenWeights != "f32";
    pm.addPass(createMixedPrecisionPass(mixed));
  }
  if (options.frozenWeights == "nf4")
    pm.addPass(createQuantizeFrozenPass());
}

void memopt::buildEvalPipeline(OpPassManager &pm,
                               const MemoptPipelineOptions &options) {
  addForwardPasses(pm, options);
  pm.addPass(createEvalStepPass());
  // One step with no update to release, clip, loop over or shard: the
  // planning pipeline is bufferization and planning alone.
  auto planning = std::make_shared<PlanningPipelineOptions>();
  planning->releaseGradients = false;
  planning->bufferReuse = options.bufferReuse.getValue();
  planning->planTimeLimit = options.planTimeLimit.getValue();
  buildPlanningPipeline(pm, planning);
  pm.addPass(createVerifyPlanPass());
}

void memopt::buildMemoptPipeline(OpPassManager &pm,
                                 const MemoptPipelineOptions &options) {
  addForwardPasses(pm, options);
  AutodiffPassOptions autodiff;
  autodiff.optimizer = options.optimizer;
  autodiff.lr = options.lr;
  autodiff.beta1 = options.beta1;
  autodiff.beta2 = options.beta2;
  autodiff.eps = options.eps;
  autodiff.weightDecay = options.weightDecay;
  autodiff.momentum = options.momentum;
  autodiff.stateBits = options.optimizerStateBits;
  pm.addPass(createAutodiffPass(autodiff));
  // Remat plans its candidates as the passes after it will plan the step:
  // with these options, clip-strategy=auto resolved, shared by the two.
  auto planning = std::make_shared<MemoptPipelineOptions>();
  planning->copyOptionValuesFrom(options);
  planning->clipStrategy = getClipStrategy(options);
  if (options.remat != "none" || options.cheapRecompute) {
    RematerializePassOptions remat;
    remat.strategy = options.remat;
    remat.cheapRecompute = options.cheapRecompute;
    remat.budget = options.memoryBudget;
    remat.snapshots = options.rematSnapshots;
    pm.addPass(createRematerializePass(remat, planning));
  }
  buildPlanningPipeline(pm, planning);
  pm.addPass(createVerifyPlanPass());
}

void memopt::buildEmitCPipeline(OpPassManager &pm, bool emitScopes) {
  ConvertMemoptToEmitCPassOptions lowering;
  lowering.emitScopes = emitScopes;
  pm.addPass(createConvertMemoptToEmitCPass(lowering));
}

void memopt::registerMemoptPipelines() {
  // The checks memopt-compile makes, with its messages, before any pass runs.
  registerPassPipeline(
      "memopt-pipeline",
      "The training pipeline: autodiff, bufferize, plan and verify buffers",
      [](OpPassManager &pm, llvm::StringRef text,
         llvm::function_ref<LogicalResult(const llvm::Twine &)> errorHandler)
          -> LogicalResult {
        MemoptPipelineOptions options;
        if (failed(options.parseFromString(text)))
          return failure();
        if (llvm::Error error = validateMemoptPipelineOptions(options))
          return errorHandler(llvm::toString(std::move(error)));
        buildMemoptPipeline(pm, options);
        return success();
      },
      [](llvm::function_ref<void(const mlir::detail::PassOptions &)>
             optHandler) { optHandler(MemoptPipelineOptions()); });
}

void memopt::registerAllDialects(DialectRegistry &registry) {
  registry.insert<MemoptDialect, arith::ArithDialect,
                  bufferization::BufferizationDialect, emitc::EmitCDialect,
                  func::FuncDialect, memref::MemRefDialect, scf::SCFDialect,
                  shard::ShardDialect, tensor::TensorDialect>();
}

void memopt::registerAllPasses() {
  registerMemoptPasses();
  registerMemoptConversionPasses();
  registerMemoptPipelines();
}
