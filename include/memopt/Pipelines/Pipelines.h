//===- Pipelines.h - the memopt compilation pipeline -------------*- C++ -*-===//
//
// One function builds the pipeline that memopt-compile runs and that
// memopt-opt exposes as --memopt-pipeline, so the two never diverge.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_PIPELINES_PIPELINES_H
#define MEMOPT_PIPELINES_PIPELINES_H

#include "memopt/Dialect/Memopt/IR/MemoptDialect.h"
#include "memopt/Dialect/Memopt/Transforms/Passes.h"
#include "memopt/Support/Precision.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/Support/Error.h"

#include <cstdint>
#include <optional>
#include <string>

namespace memopt {

/// The options of the training pipeline, declared once: the planning
/// options (micro-batches, data parallelism, ZeRO, clipping, buffer reuse)
/// and the rest. --memopt-pipeline parses them from its text, memopt-compile
/// reads its flags into them, and the budget search copies them
/// (copyOptionValuesFrom) for each row. Their defaults are PyTorch's
/// (torch.optim.AdamW, GradScaler) and memopt's own; memopt-compile leaves a
/// flag the user did not give at its default here.
struct MemoptPipelineOptions : public PlanningPipelineOptions {
  Option<std::string> optimizer{
      *this, "optimizer", llvm::cl::desc("Optimizer: adamw or sgd"),
      llvm::cl::value_desc("adamw|sgd"), llvm::cl::init("adamw")};
  Option<double> lr{*this, "lr", llvm::cl::desc("Learning rate"),
                    llvm::cl::value_desc("number"), llvm::cl::init(1e-3)};
  Option<double> beta1{*this, "beta1", llvm::cl::desc("AdamW beta1"),
                       llvm::cl::init(0.9)};
  Option<double> beta2{*this, "beta2", llvm::cl::desc("AdamW beta2"),
                       llvm::cl::init(0.999)};
  Option<double> eps{*this, "eps", llvm::cl::desc("AdamW denominator term"),
                     llvm::cl::value_desc("number"), llvm::cl::init(1e-8)};
  Option<double> weightDecay{
      *this, "weight-decay", llvm::cl::desc("Weight decay"),
      llvm::cl::value_desc("number"), llvm::cl::init(0.01)};
  Option<double> momentum{*this, "momentum", llvm::cl::desc("SGD momentum"),
                          llvm::cl::value_desc("number"), llvm::cl::init(0.0)};
  Option<unsigned> optimizerStateBits{
      *this, "optimizer-state-bits",
      llvm::cl::desc("AdamW moments in 32 or 8 bits (docs/Optimizer.md)"),
      llvm::cl::init(32)};
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
                     "(0: the most whose f32 logits fit in one f32 copy of "
                     "the hidden states; docs/Fusion.md)"),
      llvm::cl::value_desc("n"), llvm::cl::init(0)};
  /// docs/MixedPrecision.md.
  Option<Precision> mixedPrecision{
      *this, "mixed-precision",
      llvm::cl::desc("Mixed precision: none, bf16 or fp16"),
      llvm::cl::init(Precision::F32)};
  /// How frozen weights are stored (docs/Quantization.md): "" (the compute
  /// type), "nf4", "f32", or the compute type by name ("bf16", "fp16").
  Option<std::string> frozenWeights{
      *this, "frozen-weights",
      llvm::cl::desc("How frozen weights are stored (docs/Quantization.md): "
                     "nf4 (QLoRA's 4-bit NormalFloat, for the frozen weights "
                     "of linear layers), f32, or the compute type (the "
                     "default)"),
      llvm::cl::value_desc("nf4|f32|bf16|fp16"), llvm::cl::init("")};
  /// "dynamic", "none" or a static scale; "" for the compute type's default.
  Option<std::string> lossScale{
      *this, "loss-scale",
      llvm::cl::desc("Loss scaling: dynamic, none or a static scale "
                     "(default: none for bf16, dynamic for fp16)"),
      llvm::cl::value_desc("dynamic|none|number"), llvm::cl::init("")};
  Option<double> lossScaleInit{
      *this, "loss-scale-init", llvm::cl::desc("Initial dynamic loss scale"),
      llvm::cl::value_desc("number"), llvm::cl::init(LossScaleConfig().scale)};
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
      llvm::cl::value_desc("n"),
      llvm::cl::init(LossScaleConfig().growthInterval)};
  /// --memopt-remat; the pass runs when the strategy is not "none" or when
  /// cheapRecompute is set.
  Option<std::string> remat{
      *this, "remat",
      llvm::cl::desc("Rematerialization: none, blocks, sqrt, revolve, "
                     "budget, selective or auto (budget when a memory "
                     "budget is given)"),
      llvm::cl::value_desc("strategy"), llvm::cl::init("none")};
  Option<bool> cheapRecompute{
      *this, "cheap-recompute",
      llvm::cl::desc("Recompute cheap ops in the backward where that keeps "
                     "fewer bytes (the minimal saved set)"),
      llvm::cl::init(true)};
  Option<int64_t> memoryBudget{
      *this, "memory-budget",
      llvm::cl::desc("Bytes the planned arena may take (remat budget or "
                     "auto); 0: none"),
      llvm::cl::init(0)};
  Option<int64_t> rematSnapshots{
      *this, "remat-snapshots",
      llvm::cl::desc("remat=revolve: snapshot slots (0: logarithmic in the "
                     "depth)"),
      llvm::cl::value_desc("n"), llvm::cl::init(0)};

  /// Makes the options named `names` flags of the calling tool's command
  /// line as well, in `category`: memopt-compile's --micro-batches is this
  /// object's micro-batches, declared once. The object must outlive the
  /// parse.
  void registerAsFlags(llvm::ArrayRef<llvm::StringRef> names,
                       llvm::cl::OptionCategory &category);
};

/// Checks what memopt-compile and --memopt-pipeline both accept: the
/// optimizer and its hyper-parameters, the remat strategy, the loss scale
/// and the micro-batch count. The one error names the flag as both tools
/// spell it.
llvm::Error validateMemoptPipelineOptions(const MemoptPipelineOptions &options);

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
