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
#include "memopt/Dialect/Memopt/Transforms/Passes.h"

#include "mlir/Pass/PassRegistry.h"
#include "llvm/ADT/STLExtras.h"

#include <cmath>
#include <cstdio>

using namespace mlir;
using namespace memopt;

llvm::Error memopt::setMixedPrecision(MemoptPipelineOptions &options,
                                      llvm::StringRef name,
                                      llvm::StringRef extraName) {
  if (name == "none" || name == "bf16" || name == "fp16") {
    options.mixedPrecision = name == "fp16" ? "f16" : name.str();
    return llvm::Error::success();
  }
  return llvm::createStringError(
      "unknown --mixed-precision='" + name + "' (expected none, bf16" +
      (extraName.empty() ? " or fp16" : ", fp16 or " + extraName.str()) + ")");
}

/// `value` as "%g" prints it (1.5, not 1.500000e+00).
static std::string formatNumber(double value) {
  char text[32];
  std::snprintf(text, sizeof(text), "%g", value);
  return text;
}

llvm::Error
memopt::validateMemoptPipelineOptions(const MemoptPipelineOptions &options,
                                      FlagText flagText) {
  auto spell = [&](llvm::StringRef flag, std::string value) {
    std::optional<std::string> typed;
    if (flagText)
      typed = flagText(flag);
    return typed.value_or(value);
  };
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
  if (options.zeroStage < 0 || options.zeroStage > 2)
    return fail("invalid --zero-stage=" + llvm::Twine(options.zeroStage) +
                ": expected 0, 1 or 2");
  if (options.zeroStage > 0 && options.dataParallel < 2)
    return fail("--zero-stage=" + llvm::Twine(options.zeroStage) +
                " shards over the data-parallel ranks: it needs "
                "--data-parallel=N with N >= 2");
  if (options.zeroStage > 0 && options.mixedPrecision == "f16" &&
      options.lossScale != "none")
    return fail("--zero-stage=" + llvm::Twine(options.zeroStage) +
                " with --mixed-precision=fp16 needs --loss-scale=none: loss "
                "scaling unscales and checks whole gradients, which ZeRO "
                "never holds (use --mixed-precision=bf16)");
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
      return fail("invalid --" + flag + "='" +
                  spell(flag, formatNumber(value)) + "': expected a " +
                  (positive ? "positive" : "non-negative") + " number");
  if (options.lossScaleGrowthInterval < 1)
    return fail("invalid --loss-scale-growth-interval='" +
                spell("loss-scale-growth-interval",
                      std::to_string(options.lossScaleGrowthInterval)) +
                "': expected an integer >= 1");
  if (!(options.beta1 >= 0 && options.beta1 < 1 && options.beta2 >= 0 &&
        options.beta2 < 1))
    return fail("invalid --betas='" +
                spell("betas", formatNumber(options.beta1) + "," +
                                   formatNumber(options.beta2)) +
                "': expected two numbers b1,b2 in [0, 1)");
  return llvm::Error::success();
}

void memopt::buildMemoptPipeline(OpPassManager &pm,
                                 const MemoptPipelineOptions &options) {
  if (options.fuseAttention || options.fuseLmLoss) {
    FuseKernelsPassOptions fuse;
    fuse.attention = options.fuseAttention;
    fuse.lmLoss = options.fuseLmLoss;
    fuse.lmLossChunk = options.lmLossChunk;
    pm.addPass(createFuseKernelsPass(fuse));
  }
  if (options.mixedPrecision != "none") {
    MixedPrecisionPassOptions mixed;
    mixed.computeType = options.mixedPrecision;
    mixed.lossScale = options.lossScale;
    mixed.lossScaleInit = options.lossScaleInit;
    mixed.growthFactor = options.lossScaleGrowthFactor;
    mixed.backoffFactor = options.lossScaleBackoffFactor;
    mixed.growthInterval = options.lossScaleGrowthInterval;
    pm.addPass(createMixedPrecisionPass(mixed));
  }
  AutodiffPassOptions autodiff;
  autodiff.optimizer = options.optimizer;
  autodiff.lr = options.lr;
  autodiff.beta1 = options.beta1;
  autodiff.beta2 = options.beta2;
  autodiff.eps = options.eps;
  autodiff.weightDecay = options.weightDecay;
  autodiff.momentum = options.momentum;
  pm.addPass(createAutodiffPass(autodiff));
  if (options.remat != "none" || options.cheapRecompute) {
    RematerializePassOptions remat;
    remat.strategy = options.remat;
    remat.cheapRecompute = options.cheapRecompute;
    remat.microBatches = options.microBatches;
    remat.dataParallel = options.dataParallel;
    remat.rankBatch = options.rankBatch;
    remat.zeroStage = options.zeroStage;
    remat.accumulateAllowBatchNorm = options.accumulateAllowBatchNorm;
    remat.budget = options.memoryBudget;
    remat.snapshots = options.rematSnapshots;
    remat.bufferReuse = options.bufferReuse;
    remat.releaseGradients = options.releaseGradients;
    pm.addPass(createRematerializePass(remat));
  }
  PlanningPipelineOptions planning;
  planning.microBatches = options.microBatches;
  planning.dataParallel = options.dataParallel;
  planning.rankBatch = options.rankBatch;
  planning.zeroStage = options.zeroStage;
  planning.allowBatchNorm = options.accumulateAllowBatchNorm;
  planning.releaseGradients = options.releaseGradients;
  planning.bufferReuse = options.bufferReuse;
  planning.planTimeLimit = options.planTimeLimit;
  buildPlanningPipeline(pm, planning);
  pm.addPass(createVerifyPlanPass());
}

namespace {
/// The textual options of --memopt-pipeline.
struct PipelineCLOptions : public PassPipelineOptions<PipelineCLOptions> {
  Option<std::string> optimizer{*this, "optimizer",
                                llvm::cl::desc("adamw or sgd"),
                                llvm::cl::init("adamw")};
  Option<double> lr{*this, "lr", llvm::cl::desc("Learning rate"),
                    llvm::cl::init(1e-3)};
  Option<double> beta1{*this, "beta1", llvm::cl::desc("AdamW beta1"),
                       llvm::cl::init(0.9)};
  Option<double> beta2{*this, "beta2", llvm::cl::desc("AdamW beta2"),
                       llvm::cl::init(0.999)};
  Option<double> eps{*this, "eps", llvm::cl::desc("AdamW epsilon"),
                     llvm::cl::init(1e-8)};
  Option<double> weightDecay{*this, "weight-decay",
                             llvm::cl::desc("Weight decay"),
                             llvm::cl::init(0.01)};
  Option<double> momentum{*this, "momentum", llvm::cl::desc("SGD momentum"),
                          llvm::cl::init(0.0)};
  Option<int64_t> microBatches{
      *this, "micro-batches",
      llvm::cl::desc("Gradient accumulation: micro-batches per step"),
      llvm::cl::init(1)};
  Option<int64_t> dataParallel{
      *this, "data-parallel",
      llvm::cl::desc("Data parallelism: ranks the batch is split across"),
      llvm::cl::init(1)};
  Option<bool> rankBatch{
      *this, "rank-batch",
      llvm::cl::desc("With data-parallel: the batch is each rank's (the "
                     "global batch is N times it)"),
      llvm::cl::init(false)};
  Option<int64_t> zeroStage{
      *this, "zero-stage",
      llvm::cl::desc("ZeRO over the data-parallel ranks: 0 none, 1 shards "
                     "the optimizer state, 2 also the gradients"),
      llvm::cl::init(0)};
  Option<bool> accumulateAllowBatchNorm{
      *this, "accumulate-allow-batch-norm",
      llvm::cl::desc("Accept batch norm's per-micro-batch statistics"),
      llvm::cl::init(false)};
  Option<double> planTimeLimit{
      *this, "plan-time-limit",
      llvm::cl::desc("Seconds the buffer placer may search"),
      llvm::cl::init(1.0)};
  Option<std::string> mixedPrecision{*this, "mixed-precision",
                                     llvm::cl::desc("none, bf16 or fp16"),
                                     llvm::cl::init("none")};
  Option<std::string> lossScale{
      *this, "loss-scale",
      llvm::cl::desc("dynamic, none or a static scale (default: none for "
                     "bf16, dynamic for f16)"),
      llvm::cl::init("")};
  Option<double> lossScaleInit{*this, "loss-scale-init",
                               llvm::cl::desc("Initial dynamic loss scale"),
                               llvm::cl::init(65536.0)};
  Option<int64_t> lossScaleGrowthInterval{
      *this, "loss-scale-growth-interval",
      llvm::cl::desc("Good steps before the dynamic loss scale grows"),
      llvm::cl::init(2000)};
  Option<std::string> remat{
      *this, "remat",
      llvm::cl::desc("Remat strategy: none, blocks, sqrt, revolve, budget, "
                     "selective or auto"),
      llvm::cl::init("none")};
  Option<int64_t> memoryBudget{
      *this, "memory-budget",
      llvm::cl::desc("Bytes the planned arena may take (remat budget/auto)"),
      llvm::cl::init(0)};
  Option<int64_t> rematSnapshots{
      *this, "remat-snapshots",
      llvm::cl::desc("revolve: snapshot slots (0: logarithmic)"),
      llvm::cl::init(0)};
  Option<bool> cheapRecompute{
      *this, "cheap-recompute",
      llvm::cl::desc("Recompute cheap ops in the backward where that keeps "
                     "fewer bytes (the minimal saved set)"),
      llvm::cl::init(true)};
  Option<bool> fusedAttention{
      *this, "fused-attention",
      llvm::cl::desc("Form memopt.attention (no score matrices)"),
      llvm::cl::init(true)};
  Option<bool> fusedLmLoss{
      *this, "fused-lm-loss",
      llvm::cl::desc("Form memopt.linear_cross_entropy (no logits)"),
      llvm::cl::init(true)};
  Option<bool> releaseGradients{
      *this, "release-gradients",
      llvm::cl::desc("Run each optimizer update as soon as its gradient is "
                     "complete (one micro-batch, no loss scaling)"),
      llvm::cl::init(true)};
  Option<int64_t> lmLossChunk{
      *this, "lm-loss-chunk",
      llvm::cl::desc("Classes per chunk of the fused linear cross-entropy "
                     "(0: from the memory account)"),
      llvm::cl::init(0)};
  Option<bool> bufferReuse{
      *this, "buffer-reuse",
      llvm::cl::desc("Share buffer memory (false: every buffer its own "
                     "bytes, no in-place results, no reshape views)"),
      llvm::cl::init(true)};
};
} // namespace

void memopt::registerMemoptPipelines() {
  // The checks memopt-compile makes, with its messages, before any pass runs.
  registerPassPipeline(
      "memopt-pipeline",
      "The training pipeline: autodiff, bufferize, plan and verify buffers",
      [](OpPassManager &pm, llvm::StringRef text,
         llvm::function_ref<LogicalResult(const llvm::Twine &)> errorHandler)
          -> LogicalResult {
        PipelineCLOptions cl;
        if (failed(cl.parseFromString(text)))
          return failure();
        MemoptPipelineOptions options;
        options.optimizer = cl.optimizer;
        options.lr = cl.lr;
        options.beta1 = cl.beta1;
        options.beta2 = cl.beta2;
        options.eps = cl.eps;
        options.weightDecay = cl.weightDecay;
        options.momentum = cl.momentum;
        options.planTimeLimit = cl.planTimeLimit;
        options.lossScale = cl.lossScale;
        options.lossScaleInit = cl.lossScaleInit;
        options.lossScaleGrowthInterval = cl.lossScaleGrowthInterval;
        options.remat = cl.remat;
        options.memoryBudget = cl.memoryBudget;
        options.rematSnapshots = cl.rematSnapshots;
        options.microBatches = cl.microBatches;
        options.dataParallel = cl.dataParallel;
        options.rankBatch = cl.rankBatch;
        options.zeroStage = cl.zeroStage;
        options.accumulateAllowBatchNorm = cl.accumulateAllowBatchNorm;
        options.bufferReuse = cl.bufferReuse;
        options.cheapRecompute = cl.cheapRecompute;
        options.fuseAttention = cl.fusedAttention;
        options.fuseLmLoss = cl.fusedLmLoss;
        options.lmLossChunk = cl.lmLossChunk;
        options.releaseGradients = cl.releaseGradients;
        llvm::Error error = setMixedPrecision(options, cl.mixedPrecision);
        if (!error)
          error = validateMemoptPipelineOptions(options);
        if (error)
          return errorHandler(llvm::toString(std::move(error)));
        buildMemoptPipeline(pm, options);
        return success();
      },
      [](llvm::function_ref<void(const mlir::detail::PassOptions &)> optHandler) {
        optHandler(PipelineCLOptions());
      });
}
