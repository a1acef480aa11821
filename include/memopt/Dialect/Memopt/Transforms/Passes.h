//===- Passes.h - memopt passes -----------------------------------*- C++ -*-===//
//
// Declares the memopt passes and their registration.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_DIALECT_MEMOPT_TRANSFORMS_PASSES_H
#define MEMOPT_DIALECT_MEMOPT_TRANSFORMS_PASSES_H

#include "memopt/Dialect/Memopt/IR/MemoptDialect.h"
#include "memopt/Support/Precision.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassOptions.h"
#include "llvm/ADT/StringRef.h"

#include <memory>
#include <optional>
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

/// The options of the passes that take a rematerialized step to its
/// planned arena, declared once: the training pipeline's options extend
/// them (MemoptPipelineOptions), and --memopt-remat plans its candidates
/// with them.
struct PlanningPipelineOptions
    : public mlir::PassPipelineOptions<PlanningPipelineOptions> {
  /// The micro-batch loop (--memopt-accumulate) when either is above 1.
  Option<int64_t> microBatches{
      *this, "micro-batches",
      llvm::cl::desc("Gradient accumulation: split the batch into K "
                     "micro-batches (docs/Accumulation.md)"),
      llvm::cl::value_desc("K"), llvm::cl::init(1)};
  /// docs/DataParallel.md.
  Option<int64_t> dataParallel{
      *this, "data-parallel",
      llvm::cl::desc("Data parallelism: split the batch across N ranks, "
                     "launched with `mpirun -np N OUT/train` "
                     "(docs/DataParallel.md)"),
      llvm::cl::value_desc("N"), llvm::cl::init(1)};
  Option<bool> rankBatch{
      *this, "rank-batch",
      llvm::cl::desc("With data-parallel=N: the model's batch is each "
                     "rank's, and the global batch N times it (the default "
                     "splits the model's batch across the ranks)"),
      llvm::cl::init(false)};
  Option<bool> accumulateAllowBatchNorm{
      *this, "accumulate-allow-batch-norm",
      llvm::cl::desc("With micro-batches > 1: accept batch norm with "
                     "statistics of each micro-batch"),
      llvm::cl::init(false)};
  /// --memopt-shard-optimizer's stage after the loop.
  Option<int64_t> zeroStage{
      *this, "zero-stage",
      llvm::cl::desc("With data-parallel: ZeRO stage 1 keeps 1/N of the "
                     "optimizer state on each rank, stage 2 also 1/N of the "
                     "gradients, stage 3 also 1/N of the parameters, "
                     "gathered where they are read (docs/DataParallel.md)"),
      llvm::cl::value_desc("0|1|2|3"), llvm::cl::init(0)};
  /// --memopt-release-gradients, with one micro-batch on one rank (the
  /// pass itself leaves a loss-scaled step alone).
  Option<bool> releaseGradients{
      *this, "release-gradients",
      llvm::cl::desc("Run each optimizer update as soon as its gradient is "
                     "complete (one micro-batch, no loss scaling)"),
      llvm::cl::init(true)};
  /// --memopt-clip-gradients' max-norm and strategy.
  Option<double> clipGradNorm{
      *this, "clip-grad-norm",
      llvm::cl::desc("Clip the gradients to this global 2-norm before each "
                     "update, as torch.nn.utils.clip_grad_norm_ "
                     "(docs/Training.md)"),
      llvm::cl::value_desc("C"), llvm::cl::init(0.0)};
  Option<std::string> clipStrategy{
      *this, "clip-strategy",
      llvm::cl::desc("How clipping meets gradient release: keep (every "
                     "gradient waits for the norm), recompute (a norm pass, "
                     "then the backward again, each update right after its "
                     "gradient) or auto (recompute where the gradients are "
                     "released; memopt-compile keeps where that fits the "
                     "memory budget)"),
      llvm::cl::value_desc("keep|recompute|auto"), llvm::cl::init("keep")};
  /// --memopt-offload-optimizer before bufferization (docs/Offload.md).
  Option<std::string> offload{
      *this, "offload",
      llvm::cl::desc("What lives in host memory: none, or a comma-separated "
                     "list of optimizer (the f32 master weights and the "
                     "optimizer state, updated on the host), params (the "
                     "optimizer and the weights the device computes with, "
                     "copied to it before each use) and activations (the "
                     "values saved for the backward, copied back before "
                     "their backward use; docs/Offload.md)"),
      llvm::cl::value_desc("none|optimizer|params|activations[,...]"),
      llvm::cl::init("none")};
  /// --memopt-offload-activations' budget.
  Option<int64_t> offloadBudget{
      *this, "offload-budget",
      llvm::cl::desc("With offload=activations: the bytes the planned "
                     "arena may take; the fewest saved bytes that fit it, "
                     "largest first, go to the host (0: all of them)"),
      llvm::cl::init(0)};
  /// --memopt-overlap-transfers after bufferization (docs/Offload.md).
  Option<bool> overlapTransfers{
      *this, "overlap-transfers",
      llvm::cl::desc("Copies between the memories run while the device "
                     "computes: each starts early and is waited for late, "
                     "one in flight (false: each copy completes where it "
                     "is issued)"),
      llvm::cl::init(true)};
  /// The overlap's device (--memopt-overlap-transfers' `device`).
  Option<std::string> transferDevice{
      *this, "transfer-device",
      llvm::cl::desc("The device whose host link times the copies that "
                     "overlap-transfers hides behind compute"),
      llvm::cl::init("h100-80gb")};
  /// False gives every buffer its own bytes (docs/BufferReuse.md).
  Option<bool> bufferReuse{
      *this, "buffer-reuse",
      llvm::cl::desc("Share buffer memory (false: every buffer its own "
                     "bytes, no in-place results, no reshape views)"),
      llvm::cl::init(true)};
  /// --memopt-plan-buffers' time-limit (0: its heuristics only).
  Option<double> planTimeLimit{
      *this, "plan-time-limit",
      llvm::cl::desc("Seconds the buffer placer may search for a smaller "
                     "arena"),
      llvm::cl::init(1.0)};
};

/// What --offload puts in host memory.
struct OffloadChoice {
  /// The master weights and the optimizer state (--memopt-offload-optimizer).
  bool optimizer = false;
  /// The weights the device computes with too (its `params` option).
  bool params = false;
  /// The saved activations (--memopt-offload-activations).
  bool activations = false;
};

/// `text` as --offload spells it: "none", or a comma-separated list of
/// "optimizer", "params" (which includes the optimizer) and "activations".
/// std::nullopt when it names anything else.
std::optional<OffloadChoice> parseOffload(llvm::StringRef text);

/// How buildPlanningPipeline runs --memopt-offload-activations when the
/// options offload the activations.
enum class ActivationPlanning {
  /// Within the options' offload-budget (the step itself).
  Budgeted,
  /// Moving every candidate (the copies remat plans: no search within each).
  All,
  /// Not at all (the copies the activation offload plans, having moved the
  /// values itself).
  Skipped,
};

/// Adds the activation offload, the gradient release or the micro-batch loop
/// (and ZeRO's sharding), the optimizer offload, --memopt-bufferize and
/// --memopt-plan-buffers: what follows --memopt-remat in the training
/// pipeline, and what remat runs on copies to plan its candidates.
/// `placementSeconds`, when given, replaces the placer's plan-time-limit.
/// The passes that plan copies keep `options`.
void buildPlanningPipeline(
    mlir::OpPassManager &pm,
    std::shared_ptr<const PlanningPipelineOptions> options,
    std::optional<double> placementSeconds = std::nullopt,
    ActivationPlanning activations = ActivationPlanning::Budgeted);

/// Runs buildPlanningPipeline on `module` (a copy of the step the caller
/// owns) quietly and returns the planned arena of its @train_step; failure
/// when the copy cannot be planned (the pipeline reports that on the step
/// itself).
mlir::FailureOr<int64_t>
planCopyArena(mlir::ModuleOp module,
              std::shared_ptr<const PlanningPipelineOptions> options,
              double placementSeconds, ActivationPlanning activations);

/// --memopt-offload-activations with the options the pipeline plans with
/// (its budget's checks plan copies with them; without, bufferization and
/// planning alone).
std::unique_ptr<mlir::Pass> createOffloadActivationsPass(
    const OffloadActivationsPassOptions &options,
    std::shared_ptr<const PlanningPipelineOptions> planning);

/// --memopt-remat with the options the pipeline plans with; the pass keeps
/// them (the remat options' `planning` text, for memopt-opt, replaces them).
std::unique_ptr<mlir::Pass> createRematerializePass(
    const RematerializePassOptions &options,
    std::shared_ptr<const PlanningPipelineOptions> planning);

} // namespace memopt

#endif // MEMOPT_DIALECT_MEMOPT_TRANSFORMS_PASSES_H
