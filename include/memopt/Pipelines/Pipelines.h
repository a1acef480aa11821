//===- Pipelines.h - the memopt compilation pipeline -------------*- C++ -*-===//
//
// One function builds the pipeline that memopt-compile runs and that
// memopt-opt exposes as --memopt-pipeline, so the two never diverge.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_PIPELINES_PIPELINES_H
#define MEMOPT_PIPELINES_PIPELINES_H

#include "memopt/Dialect/Memopt/IR/MemoptDialect.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>

namespace memopt {

/// The options of the training pipeline, declared once: --memopt-pipeline
/// parses them from its text, memopt-compile sets them from its flags, and
/// the budget search copies them (copyOptionValuesFrom) for each row.
/// Their defaults are PyTorch's (torch.optim.AdamW, GradScaler) and
/// memopt's own; memopt-compile leaves a flag the user did not give at its
/// default here.
struct MemoptPipelineOptions
    : public mlir::PassPipelineOptions<MemoptPipelineOptions> {
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
  Option<unsigned> optimizerStateBits{
      *this, "optimizer-state-bits",
      llvm::cl::desc("AdamW moments in 32 or 8 bits (docs/Optimizer.md)"),
      llvm::cl::init(32)};
  Option<double> planTimeLimit{
      *this, "plan-time-limit",
      llvm::cl::desc("Seconds the buffer placer may search for a smaller "
                     "arena"),
      llvm::cl::init(1.0)};
  /// --memopt-fuse-kernels (docs/Fusion.md).
  Option<bool> fuseAttention{
      *this, "fused-attention",
      llvm::cl::desc("Form memopt.attention (no score matrices)"),
      llvm::cl::init(true)};
  Option<bool> fuseLmLoss{
      *this, "fused-lm-loss",
      llvm::cl::desc("Form memopt.linear_cross_entropy (no logits)"),
      llvm::cl::init(true)};
  Option<int64_t> lmLossChunk{
      *this, "lm-loss-chunk",
      llvm::cl::desc("Classes per chunk of the fused linear cross-entropy "
                     "(0: from the memory account)"),
      llvm::cl::init(0)};
  /// Mixed precision (docs/MixedPrecision.md): "none", "bf16" or "f16"
  /// (setMixedPrecision reads the flags' spelling, fp16).
  Option<std::string> mixedPrecision{*this, "mixed-precision",
                                     llvm::cl::desc("none, bf16 or fp16"),
                                     llvm::cl::init("none")};
  /// How frozen weights are stored (docs/Quantization.md): "" (the compute
  /// type), "nf4", "f32", or the compute type by name ("bf16", "fp16").
  Option<std::string> frozenWeights{
      *this, "frozen-weights",
      llvm::cl::desc("Frozen weights' storage: nf4, f32, or the compute "
                     "type (the default)"),
      llvm::cl::init("")};
  /// "dynamic", "none" or a static scale; "" for the compute type's default.
  Option<std::string> lossScale{
      *this, "loss-scale",
      llvm::cl::desc("dynamic, none or a static scale (default: none for "
                     "bf16, dynamic for fp16)"),
      llvm::cl::init("")};
  Option<double> lossScaleInit{*this, "loss-scale-init",
                               llvm::cl::desc("Initial dynamic loss scale"),
                               llvm::cl::init(LossScaleConfig().scale)};
  Option<double> lossScaleGrowthFactor{
      *this, "loss-scale-growth-factor",
      llvm::cl::desc("Factor the dynamic loss scale grows by"),
      llvm::cl::init(LossScaleConfig().growthFactor)};
  Option<double> lossScaleBackoffFactor{
      *this, "loss-scale-backoff-factor",
      llvm::cl::desc("Factor the dynamic loss scale shrinks by on overflow"),
      llvm::cl::init(LossScaleConfig().backoffFactor)};
  Option<int64_t> lossScaleGrowthInterval{
      *this, "loss-scale-growth-interval",
      llvm::cl::desc("Good steps before the dynamic loss scale grows"),
      llvm::cl::init(LossScaleConfig().growthInterval)};
  /// --memopt-remat; the pass runs when the strategy is not "none" or when
  /// cheapRecompute is set.
  Option<std::string> remat{
      *this, "remat",
      llvm::cl::desc("Remat strategy: none, blocks, sqrt, revolve, budget, "
                     "selective or auto"),
      llvm::cl::init("none")};
  Option<bool> cheapRecompute{
      *this, "cheap-recompute",
      llvm::cl::desc("Recompute cheap ops in the backward where that keeps "
                     "fewer bytes (the minimal saved set)"),
      llvm::cl::init(true)};
  /// --memopt-release-gradients (only with microBatches == 1; the pass
  /// itself leaves a loss-scaled step alone).
  Option<bool> releaseGradients{
      *this, "release-gradients",
      llvm::cl::desc("Run each optimizer update as soon as its gradient is "
                     "complete (one micro-batch, no loss scaling)"),
      llvm::cl::init(true)};
  Option<double> clipGradNorm{
      *this, "clip-grad-norm",
      llvm::cl::desc("Clip the gradients to this global 2-norm, as "
                     "torch.nn.utils.clip_grad_norm_ (0: no clipping)"),
      llvm::cl::init(0.0)};
  Option<std::string> clipStrategy{
      *this, "clip-strategy",
      llvm::cl::desc("How clipping meets gradient release: keep (the "
                     "gradients wait for the norm) or recompute (a norm "
                     "pass, then the backward again)"),
      llvm::cl::init("keep")};
  Option<int64_t> memoryBudget{
      *this, "memory-budget",
      llvm::cl::desc("Bytes the planned arena may take (remat budget or "
                     "auto); 0: none"),
      llvm::cl::init(0)};
  Option<int64_t> rematSnapshots{
      *this, "remat-snapshots",
      llvm::cl::desc("revolve: snapshot slots (0: logarithmic)"),
      llvm::cl::init(0)};
  Option<int64_t> microBatches{
      *this, "micro-batches",
      llvm::cl::desc("Gradient accumulation: micro-batches per step"),
      llvm::cl::init(1)};
  /// docs/DataParallel.md.
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
                     "the optimizer state, 2 also the gradients, 3 also "
                     "the parameters"),
      llvm::cl::init(0)};
  Option<bool> accumulateAllowBatchNorm{
      *this, "accumulate-allow-batch-norm",
      llvm::cl::desc("Accept batch norm's per-micro-batch statistics"),
      llvm::cl::init(false)};
  /// False gives every buffer its own bytes (docs/BufferReuse.md).
  Option<bool> bufferReuse{
      *this, "buffer-reuse",
      llvm::cl::desc("Share buffer memory (false: every buffer its own "
                     "bytes, no in-place results, no reshape views)"),
      llvm::cl::init(true)};
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

/// Whether the pipeline releases the gradients (one micro-batch on one
/// rank, no loss scaling, release on).
bool releasesGradients(const MemoptPipelineOptions &options);

/// The clipping strategy the pipeline builds: `clipStrategy`, with `auto`
/// as `recompute` where the gradients are released and `keep` elsewhere
/// (memopt-compile prices both and may choose `keep` under a budget).
std::string getClipStrategy(const MemoptPipelineOptions &options);

/// Adds the passes from a forward + loss module to a planned, bufferized
/// @train_step: mixed precision (when asked for), autodiff, bufferization,
/// buffer planning, plan verification.
void buildMemoptPipeline(mlir::OpPassManager &pm,
                         const MemoptPipelineOptions &options);

/// Adds the passes from the same module to a planned, bufferized
/// @eval_step (forward and loss only, docs/Training.md): the fused kernels
/// and mixed precision of `options`, --memopt-eval-step, bufferization,
/// planning and verification. memopt-compile runs it on a copy of the input.
void buildEvalPipeline(mlir::OpPassManager &pm,
                       const MemoptPipelineOptions &options);

/// Adds the lowering of the planned @train_step to EmitC runtime calls;
/// `emitScopes` names each kernel's module scope at run time (the CUDA
/// target, whose errors surface away from their call).
void buildEmitCPipeline(mlir::OpPassManager &pm, bool emitScopes);

/// Registers --memopt-pipeline.
void registerMemoptPipelines();

/// The dialects of memopt's IR: memopt and the upstream dialects that its
/// input, its passes and its lowering use. One list for memopt-opt,
/// memopt-compile and the fuzzers.
void registerAllDialects(mlir::DialectRegistry &registry);

/// memopt's passes, its EmitC conversion and --memopt-pipeline (call before
/// registerPassManagerCLOptions, whose --mlir-print-ir-* flags name them).
void registerAllPasses();

} // namespace memopt

#endif // MEMOPT_PIPELINES_PIPELINES_H
