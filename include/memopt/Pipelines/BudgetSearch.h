//===- BudgetSearch.h - combinations of techniques under a budget -*- C++ -*-===//
//
// The budget search (docs/Budget.md): every combination of precision,
// rematerialization strategy and micro-batch count is compiled on a clone of
// the module up to the planned arena (no code generation), its planned peak
// is compared with the budget and its step time estimated with the cost
// model; the chooser takes the fastest combination that fits and explains
// the choice in terms of the memory account, or names what would close the
// gap. When no combination fits one device, the smallest is compiled again
// with ZeRO over 2, 4, 8 ... ranks (stage 1, then 2), each rank training the
// model's batch, until one fits. memopt-compile prints the result
// (--explore, --memory-budget).
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_PIPELINES_BUDGETSEARCH_H
#define MEMOPT_PIPELINES_BUDGETSEARCH_H

#include "memopt/Analysis/CostModel.h"
#include "memopt/Analysis/MemoryAccount.h"
#include "memopt/Pipelines/Pipelines.h"

#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringRef.h"

#include <optional>
#include <string>
#include <vector>

namespace memopt {

/// One combination of the techniques that trade time or precision for
/// memory.
struct Combination {
  Precision precision = Precision::F32;
  /// "none" or a rematerialization strategy ("budget", "blocks", ...).
  std::string remat = "none";
  /// Micro-batches per optimizer step (K); 1 is no accumulation.
  int64_t microBatches = 1;
  /// ZeRO over `ranks` ranks that each train the model's batch (the global
  /// batch is `ranks` times it); 1 is one device, zeroStage 0 none.
  int64_t ranks = 1;
  int64_t zeroStage = 0;
  /// Bits per AdamW moment element: 32, or 8 (blockwise-quantized).
  unsigned stateBits = 32;
  /// How frozen weights are stored: MemoptPipelineOptions::frozenWeights
  /// ("" the compute type, "nf4", "f32" ...).
  std::string frozenWeights;
  /// What lives in host memory, as --offload spells it (docs/Offload.md):
  /// "none", "optimizer" (the f32 master weights and the optimizer state),
  /// "params" (those and the weights the device computes with),
  /// "activations" (the values saved for the backward), or a list.
  std::string offload = "none";

  /// Whether the optimizer (and with "params" the weights) is offloaded.
  bool isOffloaded() const { return getOffload().optimizer; }
  bool offloadsActivations() const { return getOffload().activations; }
  OffloadChoice getOffload() const {
    return parseOffload(offload).value_or(OffloadChoice());
  }
  /// "offload", "offload + params", "offload activations", "offload +
  /// activations" ...; empty without offload.
  std::string getOffloadTag() const;

  /// "bf16 / budget / K=4", then " / 8-bit state", " / NF4 frozen",
  /// " / " and the offload tag, and " / ZeRO-2 x 4 ranks" where they
  /// apply.
  std::string str() const;
  /// The frozen weights' storage by name: "nf4", "f32", "bf16" or "fp16".
  std::string getFrozenStorage() const;
};

/// The rematerialization strategies this build can apply, "none" first.
std::vector<std::string> getAvailableRematStrategies();

/// Sets the fields of `options` that realise `combination`: the one place
/// a combination becomes pipeline options. `arenaBudgetBytes` is the arena
/// the budget remat strategy, or else the activation offload, may plan (the
/// memory budget less the step's arguments). Returns an error message when the
/// combination cannot be realised, "" on success.
std::string applyCombination(const Combination &combination,
                             int64_t arenaBudgetBytes,
                             MemoptPipelineOptions &options);

/// What the search compiles and against what.
struct ExploreOptions {
  /// The device the step times are estimated on.
  const DeviceProfile *device = nullptr;
  /// The budget the planned peak must not exceed.
  int64_t budgetBytes = 0;
  /// Whether the budget came from --memory-budget (else from the device).
  bool explicitBudget = false;
  /// The candidates of each dimension, in order of preference.
  std::vector<Precision> precisions = {Precision::F32};
  std::vector<std::string> remats = {"none"};
  /// Empty: 1 and every power of two that divides the batch.
  std::vector<int64_t> microBatches;
  /// Why a dimension has no other candidate, for the explanation ("not
  /// allowed: --mixed-precision=none"); "" when it has others.
  std::string precisionNote, rematNote, accumulationNote;
  /// The most ranks the ZeRO search may use when nothing fits one device
  /// (1: none).
  int64_t maxRanks = 1;
  /// Whether the search may store AdamW's moments in 8 bits when nothing
  /// fits one device with 32 (before it asks for more devices).
  bool mayQuantizeState = false;
  /// Whether the search may store frozen weights in NF4 when nothing fits
  /// one device otherwise (before it asks for more devices).
  bool mayQuantizeFrozen = false;
  /// Whether the search may offload the optimizer to host memory when
  /// nothing fits one device otherwise (before it asks for more devices).
  bool mayOffload = false;
  /// The cost model's factors.
  CostModelOptions cost;
};

/// One compiled (or failed) combination.
struct CombinationResult {
  Combination combination;
  /// The first error the pipeline reported; "" when it compiled.
  std::string error;
  /// Arguments of @train_step (parameters, optimizer state, data ...), the
  /// planned arena, and their sum: the memory the step needs.
  int64_t argumentBytes = 0;
  int64_t arenaBytes = 0;
  int64_t plannedPeakBytes = 0;
  /// Offload: the host memory the step holds (its arguments and arena
  /// there); 0 without.
  int64_t hostBytes = 0;
  /// The account's pools at the peak.
  PoolBytes pools{};
  /// The model state over the whole step (weights, master weights, the
  /// gradients the optimizer reads, optimizer state).
  ModelStateBytes modelState;
  /// Activations saved for the backward pass in device memory, and in host
  /// memory (--offload=activations).
  int64_t savedActivationBytes = 0;
  int64_t savedOnHostBytes = 0;
  /// Executed FLOPs, and those beyond the same precision without remat at
  /// K=1 (recomputation, accumulation).
  int64_t flops = 0;
  int64_t extraFlops = 0;
  /// The cost model's estimate on the device.
  StepCost cost;
  /// The fused kernels of the step (the same in every row unless a
  /// combination changes the ops they fuse).
  MemoryAccount::FusedKernels fused;
  /// plannedPeakBytes <= the budget.
  bool fits = false;
  /// The arena budget given to the budget remat strategy or the activation
  /// offload (0: none).
  int64_t arenaBudgetBytes = 0;
  /// Not compiled because it cannot fit (`error` says why), rather than
  /// because the pipeline failed.
  bool rejected = false;

  bool compiled() const { return error.empty(); }
  /// Weights + master weights + gradients + optimizer state.
  int64_t getModelStateBytes() const;
  /// The bytes of `pool` at the peak.
  int64_t getPool(MemoryPoolKind pool) const {
    return pools[static_cast<unsigned>(pool)];
  }
};

/// How to close the gap of an infeasible budget.
struct Remedy {
  /// "shard-optimizer", "offload-optimizer" (the optimizer state and the
  /// f32 master weights), "shard-model-state".
  std::string kind;
  /// Devices needed (sharding), 0 otherwise.
  int64_t devices = 0;
  /// Bytes per device once applied.
  int64_t bytesPerDevice = 0;
  /// Bytes moved off the device (offload) or split (sharding).
  int64_t bytes = 0;
  /// Offload: what each step moves over the device's host link (the
  /// gradients to the host, the updated weights back), and the seconds that
  /// takes one way after the other.
  int64_t transferBytes = 0;
  double transferSeconds = 0;
};

/// The outcome of the search.
struct ExploreResult {
  std::vector<CombinationResult> rows;
  /// The chosen row, if any combination fits.
  std::optional<size_t> chosen;
  /// The row with the smallest planned peak, if any compiled.
  std::optional<size_t> smallest;
  /// Why each technique was or was not applied.
  std::vector<std::string> explanation;
  /// For an infeasible budget: what would close the gap.
  std::vector<Remedy> remedies;
  /// Examples per step, and tokens per step when the input is token ids
  /// (0 otherwise).
  int64_t samplesPerStep = 0;
  int64_t tokensPerStep = 0;
  /// Seconds the search took.
  double seconds = 0;
};

/// Compiles every combination of `options` on a clone of `module` (a
/// forward + loss module) with the pipeline options `base`, and chooses.
ExploreResult exploreCombinations(mlir::ModuleOp module,
                                  const MemoptPipelineOptions &base,
                                  const ExploreOptions &options);

/// The chooser, on compiled rows (their extraFlops set): the smallest
/// planned peak, the fastest row that fits (the earlier, preferred row on a
/// tie), the explanation against `plain` (FP32, no remat, K=1; null when it
/// did not compile), and for an infeasible budget the remedies.
void chooseCombination(ExploreResult &result, const ExploreOptions &options,
                       const CombinationResult *plain);

} // namespace memopt

#endif // MEMOPT_PIPELINES_BUDGETSEARCH_H
