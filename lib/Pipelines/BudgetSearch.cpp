//===- BudgetSearch.cpp - combinations of techniques under a budget -------===//
//
// "Do the memory accounting first, then choose the technique": each
// combination (precision x remat strategy x micro-batches) is compiled on a
// clone of the module through the same pipeline memopt-compile runs, up to
// the planned arena, so that every figure is the planned one, not an
// estimate. The chooser takes, among the combinations whose planned peak
// (arguments + arena) fits the budget, the one with the lowest estimated step
// time (CostModel), ties broken by the order of preference: mixed precision
// first, then rematerialization, then the smallest K. Cost: one pipeline run
// per combination (about 0.1 s for GPT-2 small and 0.6 s for LLaMA-7B on
// this machine), plus one per precision for the reference without
// rematerialization when it is not in the table.
//
//===----------------------------------------------------------------------===//

#include "memopt/Pipelines/BudgetSearch.h"

#include "memopt/Dialect/Memopt/IR/MemoptDialect.h"
#include "memopt/Dialect/Memopt/IR/MemoptOps.h"
#include "memopt/Support/ByteSize.h"
#include "memopt/Support/ModelState.h"

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <map>

using namespace mlir;
using namespace memopt;

//===----------------------------------------------------------------------===//
// Combinations
//===----------------------------------------------------------------------===//

std::string Combination::str() const {
  std::string text =
      llvm::formatv("{0} / {1} / K={2}", precision, remat, microBatches).str();
  if (stateBits == 8)
    text += " / 8-bit state";
  if (frozenWeights == "nf4")
    text += " / NF4 frozen";
  if (std::string tag = getOffloadTag(); !tag.empty())
    text += " / " + tag;
  if (ranks > 1 && zeroStage > 0)
    text += llvm::formatv(" / ZeRO-{0} x {1} ranks", zeroStage, ranks).str();
  else if (ranks > 1)
    text += llvm::formatv(" / {0} ranks", ranks).str();
  return text;
}

std::string Combination::getOffloadTag() const {
  OffloadChoice choice = getOffload();
  std::string tag = choice.params      ? "offload + params"
                    : choice.optimizer ? "offload"
                                       : "";
  if (choice.activations)
    tag += tag.empty() ? "offload activations" : " + activations";
  return tag;
}

std::string Combination::getFrozenStorage() const {
  if (!frozenWeights.empty())
    return frozenWeights;
  return precision == Precision::F32 ? "f32"
                                     : getPrecisionName(precision).str();
}

std::vector<std::string> memopt::getAvailableRematStrategies() {
  return {"none", "budget", "selective", "blocks", "sqrt"};
}

std::string memopt::applyCombination(const Combination &combination,
                                     int64_t arenaBudgetBytes,
                                     MemoptPipelineOptions &options) {
  options.mixedPrecision = combination.precision;
  options.remat = combination.remat;
  options.memoryBudget = 0;
  if (combination.remat == "budget" || combination.remat == "auto") {
    // --memopt-remat's budget is the arena's: the budget less the
    // arguments, which remat does not change.
    if (arenaBudgetBytes <= 0)
      return "the arguments alone (parameters, optimizer state, data) take "
             "the whole budget";
    options.memoryBudget = arenaBudgetBytes;
  }
  // Saved activations on the host: only as many as the arena budget needs
  // (all of them under remat's budget strategy, whose search the budget
  // drives), unless the user's --offload asked for them: then all.
  bool askedForActivations =
      parseOffload(options.offload).value_or(OffloadChoice()).activations;
  options.offloadBudget = 0;
  if (combination.offloadsActivations() && !askedForActivations &&
      !options.memoryBudget && arenaBudgetBytes > 0)
    options.offloadBudget = arenaBudgetBytes;
  options.microBatches = combination.microBatches;
  if (combination.ranks != options.dataParallel) {
    // Ranks the search added: each trains the model's batch.
    options.dataParallel = combination.ranks;
    options.rankBatch = combination.ranks > 1;
  }
  options.zeroStage = combination.zeroStage;
  options.optimizerStateBits = combination.stateBits;
  options.frozenWeights = combination.frozenWeights;
  options.offload = combination.offload;
  if (llvm::Error error = validateMemoptPipelineOptions(options))
    return llvm::toString(std::move(error));
  return "";
}

int64_t CombinationResult::getModelStateBytes() const {
  return modelState.getTotal();
}

//===----------------------------------------------------------------------===//
// Compiling one combination
//===----------------------------------------------------------------------===//

/// Compiles `combination` on a clone of `module` up to the planned arena.
static CombinationResult compileCombination(ModuleOp module,
                                            const MemoptPipelineOptions &base,
                                            const Combination &combination,
                                            const ExploreOptions &options,
                                            int64_t arenaBudgetBytes = 0) {
  CombinationResult row;
  row.combination = combination;
  MemoptPipelineOptions pipeline;
  pipeline.copyOptionValuesFrom(base);
  row.error = applyCombination(combination, arenaBudgetBytes, pipeline);
  if (!row.compiled())
    return row;

  MLIRContext *context = module.getContext();
  OwningOpRef<ModuleOp> clone = module.clone();
  std::string firstError;
  ScopedDiagnosticHandler collect(context, [&](Diagnostic &diagnostic) {
    if (diagnostic.getSeverity() == DiagnosticSeverity::Error &&
        firstError.empty()) {
      llvm::raw_string_ostream os(firstError);
      if (auto file = dyn_cast<FileLineColLoc>(diagnostic.getLocation()))
        os << file.getFilename().getValue() << ":" << file.getLine() << ":"
           << file.getColumn() << ": ";
      os << diagnostic.str();
    }
    return success();
  });
  PassManager pm(context, ModuleOp::getOperationName());
  buildMemoptPipeline(pm, pipeline);
  if (failed(pm.run(*clone))) {
    row.error = firstError.empty() ? "the pipeline failed" : firstError;
    return row;
  }
  FailureOr<FunctionOpInterface> step =
      findTrainStep(*clone, "explore the budget of");
  if (failed(step)) {
    row.error = firstError;
    return row;
  }

  MemoryAccount account(*step);
  row.argumentBytes = account.getArgumentBytes();
  row.arenaBytes = account.getArenaBytes().value_or(0);
  row.plannedPeakBytes = row.argumentBytes + row.arenaBytes;
  row.hostBytes = account.getHostBytes();
  row.pools = account.getPoolsAtPeak();
  for (const auto &entry : account.getSavedByScope())
    row.savedActivationBytes += entry.second;
  row.savedOnHostBytes = account.getSavedOnHostBytes();
  row.modelState = account.getModelState();
  row.fused = account.getFusedKernels();
  row.cost = estimateStepCost(*step, *options.device, options.cost);
  row.flops = row.cost.flops;
  row.fits = row.plannedPeakBytes <= options.budgetBytes;
  return row;
}

/// Examples and tokens per step, from the loss function's first input with
/// a batch dimension: token ids (an integer tensor of rank 2 or more) count
/// tokens too.
static void countItems(ModuleOp module, ExploreResult &result) {
  module.walk([&](FunctionOpInterface func) {
    if (!func->hasAttr(MemoptDialect::kLossAttrName) ||
        result.samplesPerStep > 0)
      return;
    for (auto [index, type] : llvm::enumerate(func.getArgumentTypes())) {
      auto role =
          func.getArgAttrOfType<StringAttr>(index, MemoptDialect::kRoleAttrName);
      auto batchDim = func.getArgAttrOfType<IntegerAttr>(
          index, MemoptDialect::kBatchDimAttrName);
      auto tensor = dyn_cast<RankedTensorType>(type);
      if (!role || role.getValue() != "input" || !batchDim || !tensor ||
          !tensor.hasStaticShape() || batchDim.getInt() < 0 ||
          batchDim.getInt() >= tensor.getRank())
        continue;
      result.samplesPerStep = tensor.getDimSize(batchDim.getInt());
      if (tensor.getElementType().isInteger() && tensor.getRank() >= 2)
        result.tokensPerStep = tensor.getNumElements();
      return;
    }
  });
}

//===----------------------------------------------------------------------===//
// Choosing and explaining
//===----------------------------------------------------------------------===//

static std::string percent(int64_t part, int64_t whole) {
  return llvm::formatv("{0:f0}%", whole > 0 ? 100.0 * double(part) /
                                                  double(whole)
                                            : 0.0)
      .str();
}

/// The compiled row that `matches` selects with the smallest planned peak
/// (the first on a tie), or null.
static const CombinationResult *
findSmallest(const ExploreResult &result,
             llvm::function_ref<bool(const Combination &)> matches) {
  const CombinationResult *smallest = nullptr;
  for (const CombinationResult &row : result.rows)
    if (row.compiled() && matches(row.combination) &&
        (!smallest || row.plannedPeakBytes < smallest->plannedPeakBytes))
      smallest = &row;
  return smallest;
}

/// Why the rows `matches` selects (an alternative to the chosen one) were
/// not chosen: none compiled, the smallest planned peak among them is over
/// the budget, or the fastest of them that fits is slower.
static std::string
explainRejected(const ExploreResult &result,
                llvm::function_ref<bool(const Combination &)> matches) {
  const CombinationResult *smallest = nullptr, *fastest = nullptr;
  for (const CombinationResult &row : result.rows) {
    if (!matches(row.combination) || !row.compiled())
      continue;
    if (!smallest || row.plannedPeakBytes < smallest->plannedPeakBytes)
      smallest = &row;
    if (row.fits && (!fastest || row.cost.seconds < fastest->cost.seconds))
      fastest = &row;
  }
  if (!smallest)
    return "none of its combinations compiled";
  if (!fastest)
    return llvm::formatv("its smallest planned peak, {0} ({1}), is over the "
                         "budget",
                         formatBytes(smallest->plannedPeakBytes),
                         smallest->combination.str());
  return llvm::formatv("{0} fits but is estimated slower ({1})",
                       fastest->combination.str(),
                       formatSeconds(fastest->cost.seconds));
}

/// The copies' time on `device`'s host link and the part that the compute
/// between their starts and waits does not hide.
static std::string formatCopySeconds(const StepCost &cost,
                                     const DeviceProfile &device) {
  return llvm::formatv("{0} over {1}, {2} of it not hidden behind compute",
                       formatSeconds(cost.transferSeconds), device.hostLink,
                       formatSeconds(cost.exposedTransferSeconds))
      .str();
}

/// The line on the step without any technique: its peak and its parts.
static std::string explainPlain(const CombinationResult &plain) {
  int64_t peak = plain.plannedPeakBytes;
  auto part = [&](MemoryPoolKind pool) {
    int64_t bytes = plain.getPool(pool);
    return formatBytes(bytes) + " (" + percent(bytes, peak) + ")";
  };
  return llvm::formatv(
      "without any technique the step needs {0}: parameters {1}, "
      "optimizer state {2}, and at the peak gradients {3} and "
      "activations {4}",
      formatBytes(peak), part(MemoryPoolKind::Params),
      part(MemoryPoolKind::Optimizer), part(MemoryPoolKind::Grads),
      part(MemoryPoolKind::Activations));
}

/// Whether the chosen combination `c` uses mixed precision, and why.
static std::string explainPrecision(const ExploreResult &result,
                                    const ExploreOptions &options,
                                    const Combination &c) {
  if (c.precision != Precision::F32 && !options.precisionNote.empty())
    return llvm::formatv("mixed precision ({0}) applied: {1}", c.precision,
                         options.precisionNote);
  if (c.precision != Precision::F32)
    return llvm::formatv(
        "mixed precision ({0}) applied: the fastest combination that fits "
        "uses it (GEMMs on the {1:f0} TFLOP/s tensor cores instead of "
        "{2:f1} TFLOP/s FP32)",
        c.precision, options.device->halfFlops / 1e12,
        options.device->fp32Flops / 1e12);
  if (!options.precisionNote.empty())
    return "mixed precision not applied: " + options.precisionNote;
  return "mixed precision not applied: " +
         explainRejected(result, [](const Combination &o) {
           return o.precision != Precision::F32;
         });
}

/// Whether the chosen row recomputes, and why, after the activations' share
/// of the step without any technique (`plain`, when it compiled).
/// Why the chosen combination sends its saved activations to the host:
/// the fastest that recomputes instead, and what the copies cost.
static std::string explainActivationOffload(const CombinationResult &chosen,
                                            const ExploreOptions &options,
                                            const ExploreResult &result) {
  const CombinationResult *recomputing = nullptr;
  for (const CombinationResult &row : result.rows)
    if (row.fits && row.combination.remat != "none" &&
        !row.combination.offloadsActivations() &&
        (!recomputing || row.cost.seconds < recomputing->cost.seconds))
      recomputing = &row;
  std::string instead =
      recomputing
          ? llvm::formatv("; the fastest that recomputes instead, {0}, is "
                          "estimated at {1}",
                          recomputing->combination.str(),
                          formatSeconds(recomputing->cost.seconds))
                .str()
          : "; nothing that recomputes fits";
  return llvm::formatv(
      "the saved activations wait for the backward in host memory "
      "(--offload=activations, docs/Offload.md: {0}), and the step's copies "
      "take {1}{2}",
      formatBytes(chosen.savedOnHostBytes),
      formatCopySeconds(chosen.cost, *options.device), instead);
}

static std::string explainRemat(const ExploreResult &result,
                                const ExploreOptions &options,
                                const CombinationResult &chosen,
                                const CombinationResult *plain) {
  const Combination &c = chosen.combination;
  std::string share =
      plain && plain->compiled()
          ? "activations are " +
                percent(plain->getPool(MemoryPoolKind::Activations),
                        plain->plannedPeakBytes) +
                " of the peak"
          : "";
  std::string lead = share.empty() ? "" : share + ": ";
  if (c.remat != "none" && chosen.extraFlops == 0)
    return llvm::formatv(
        "{0}remat applied ({1} strategy), recomputing only FLOP-free ops "
        "(casts, broadcasts, reshapes) instead of keeping their results",
        lead, c.remat);
  if (c.remat != "none") {
    // The other way to drop them, when the search tried it.
    const CombinationResult *offloaded = nullptr;
    for (const CombinationResult &row : result.rows)
      if (row.fits && row.combination.offloadsActivations() &&
          (!offloaded || row.cost.seconds < offloaded->cost.seconds))
        offloaded = &row;
    return llvm::formatv(
        "{0}remat applied ({1} strategy), {2} recomputed ({3} more FLOPs){4}",
        lead, c.remat, formatFlops(chosen.extraFlops),
        percent(chosen.extraFlops, chosen.flops - chosen.extraFlops),
        offloaded ? "; offloading the saved activations instead (" +
                        offloaded->combination.str() + ") is estimated at " +
                        formatSeconds(offloaded->cost.seconds)
                  : std::string());
  }
  std::string prefix = share.empty() ? "" : share + "; ";
  if (c.offloadsActivations())
    return prefix + "remat not applied: " +
           explainActivationOffload(chosen, options, result);
  if (!options.rematNote.empty())
    return prefix + "remat not applied: " + options.rematNote;
  if (c.microBatches == 1)
    return prefix + "remat not needed: the step fits without recomputing";
  return prefix + "remat not applied: " +
         explainRejected(
             result, [](const Combination &o) { return o.remat != "none"; });
}

/// Whether the chosen combination accumulates, and for K > 1 why not the
/// next smaller K with the same precision and remat.
static std::string explainAccumulation(const ExploreResult &result,
                                       const ExploreOptions &options,
                                       const Combination &c) {
  if (c.microBatches == 1)
    return options.accumulationNote.empty()
               ? "accumulation not needed: the whole batch fits in one "
                 "micro-batch (K=1)"
               : "accumulation not applied: " + options.accumulationNote;
  const CombinationResult *smaller = nullptr;
  for (const CombinationResult &row : result.rows)
    if (row.compiled() && row.combination.precision == c.precision &&
        row.combination.remat == c.remat &&
        row.combination.microBatches < c.microBatches &&
        (!smaller ||
         row.combination.microBatches > smaller->combination.microBatches))
      smaller = &row;
  std::string why;
  if (smaller && !smaller->fits)
    why = llvm::formatv("; K={0} needs {1}, over the budget",
                        smaller->combination.microBatches,
                        formatBytes(smaller->plannedPeakBytes));
  else if (smaller)
    why = llvm::formatv("; K={0} fits but is estimated slower ({1})",
                        smaller->combination.microBatches,
                        formatSeconds(smaller->cost.seconds));
  return llvm::formatv(
      "accumulation applied: K={0} micro-batches of {1} examples{2}",
      c.microBatches,
      result.samplesPerStep ? result.samplesPerStep / c.microBatches : 0, why);
}

/// Why the chosen combination `c` (over c.ranks > 1) shards, and what.
static std::string explainZero(const ExploreResult &result,
                               const Combination &c) {
  const CombinationResult *single = findSmallest(
      result, [](const Combination &c) { return c.ranks == 1; });
  return llvm::formatv(
      "ZeRO stage {0} over {1} ranks applied: no combination fits one "
      "device{2}; each rank keeps 1/{1} of the optimizer state{3}{4} and "
      "trains the model's batch ({5} examples per step over all ranks; "
      "run with mpirun -np {1})",
      c.zeroStage, c.ranks,
      single ? " (the smallest, " + single->combination.str() + ", needs " +
                   formatBytes(single->plannedPeakBytes) + ")"
             : std::string(),
      c.precision != Precision::F32 ? ", of the f32 master weights" : "",
      c.zeroStage == 2   ? " and of the gradients"
      : c.zeroStage == 3 ? ", of the gradients and of the parameters "
                           "(gathered where they are read)"
                         : "",
      result.samplesPerStep * c.ranks);
}

/// Why the chosen combination (8-bit state) quantizes: the moments of one
/// device, also when the chosen row then shards them.
static std::string explainState(const ExploreResult &result,
                                const CombinationResult &chosen) {
  const CombinationResult *wide =
      findSmallest(result, [](const Combination &c) {
        return c.stateBits == 32 && c.ranks == 1;
      });
  const CombinationResult *narrow =
      findSmallest(result, [](const Combination &c) {
        return c.stateBits == 8 && c.ranks == 1;
      });
  return llvm::formatv(
      "8-bit optimizer state applied: no combination with 32-bit state fits "
      "one device{0}; AdamW's moments take {1} instead of {2} "
      "(--optimizer-state=8bit, docs/Optimizer.md), before more devices",
      wide ? " (the smallest, " + wide->combination.str() + ", needs " +
                 formatBytes(wide->plannedPeakBytes) + ")"
           : std::string(),
      formatBytes((narrow ? *narrow : chosen).modelState.optimizer),
      wide ? formatBytes(wide->modelState.optimizer) : std::string("32 bits"));
}

/// Why the chosen combination offloads the optimizer: nothing fits the
/// device with it resident, and what the offload costs each step.
static std::string explainOffload(const ExploreResult &result,
                                  const ExploreOptions &options,
                                  const CombinationResult &chosen) {
  const CombinationResult *resident =
      findSmallest(result, [](const Combination &c) {
        return !c.isOffloaded() && c.ranks == 1;
      });
  const CombinationResult *weightsOnDevice =
      findSmallest(result, [](const Combination &c) {
        return c.isOffloaded() && !c.getOffload().params && c.ranks == 1;
      });
  bool params = chosen.combination.getOffload().params;
  std::string why = "--offload=" + chosen.combination.offload;
  if (options.mayOffload) {
    const CombinationResult *next = params ? weightsOnDevice : resident;
    why = params ? "no combination fits one device with its weights in "
                   "device memory"
                 : "no combination fits one device with its optimizer "
                   "state in device memory";
    if (next)
      why += " (the smallest, " + next->combination.str() + ", needs " +
             formatBytes(next->plannedPeakBytes) + ")";
  }
  return llvm::formatv(
      "{0} offload applied: {1}; the f32 master weights{2} and the "
      "optimizer state live in host memory ({3} there), and each step "
      "copies the gradients down and the weights up{4}, {5} "
      "(docs/Offload.md){6}",
      params ? "parameter" : "optimizer", why,
      params ? ", the weights the device computes with" : "",
      formatBytes(chosen.hostBytes), params ? " before each use" : "",
      formatCopySeconds(chosen.cost, *options.device),
      options.mayOffload ? ", before more devices" : "");
}

/// Why the chosen combination (single-device, NF4 frozen weights)
/// quantizes them.
static std::string explainFrozen(const ExploreResult &result,
                                 const CombinationResult &chosen) {
  const CombinationResult *unquantized =
      findSmallest(result, [](const Combination &c) {
        return c.frozenWeights != "nf4" && c.ranks == 1;
      });
  return llvm::formatv(
      "NF4 frozen weights applied: no combination with {0} frozen weights "
      "fits one device{1}; the frozen weights take {2} instead of {3} "
      "(--frozen-weights=nf4, docs/Quantization.md), before more devices",
      unquantized ? unquantized->combination.getFrozenStorage() : "unquantized",
      unquantized ? " (the smallest, " + unquantized->combination.str() +
                        ", needs " +
                        formatBytes(unquantized->plannedPeakBytes) + ")"
                  : std::string(),
      formatBytes(chosen.modelState.frozenWeights),
      unquantized ? formatBytes(unquantized->modelState.frozenWeights)
                  : std::string("16 or 32 bits"));
}

/// The explanation of the choice, in terms of the account of the step
/// without any technique (`plain`) and of the chosen one: one line per
/// technique, then the choice.
static void explain(ExploreResult &result, const ExploreOptions &options,
                    const CombinationResult *plain) {
  auto &lines = result.explanation;
  if (plain && plain->compiled())
    lines.push_back(explainPlain(*plain));
  if (!result.chosen) {
    lines.push_back("no combination fits the budget");
    return;
  }
  const CombinationResult &chosen = result.rows[*result.chosen];
  const Combination &c = chosen.combination;
  lines.push_back(explainPrecision(result, options, c));
  lines.push_back(explainRemat(result, options, chosen, plain));
  lines.push_back(explainAccumulation(result, options, c));
  if (c.stateBits == 8 && options.mayQuantizeState)
    lines.push_back(explainState(result, chosen));
  if (c.frozenWeights == "nf4" && options.mayQuantizeFrozen)
    lines.push_back(explainFrozen(result, chosen));
  if (c.isOffloaded())
    lines.push_back(explainOffload(result, options, chosen));
  if (c.ranks > 1 && options.maxRanks > 1)
    lines.push_back(explainZero(result, c));
  lines.push_back(llvm::formatv(
      "chosen: {0}: planned peak {1} of the {2} budget ({3} free), estimated "
      "step {4}",
      c.str(), formatBytes(chosen.plannedPeakBytes),
      formatBytes(options.budgetBytes),
      formatBytes(options.budgetBytes - chosen.plannedPeakBytes),
      formatSeconds(chosen.cost.seconds)));
}

/// The devices over which `shardable` bytes must be split for `peak` to
/// fit `budget`, and the bytes per device; std::nullopt when no number of
/// devices is enough.
static std::optional<Remedy> shard(llvm::StringRef kind, int64_t peak,
                                   int64_t shardable, int64_t budget) {
  int64_t rest = peak - shardable;
  if (shardable <= 0 || rest >= budget)
    return std::nullopt;
  for (int64_t devices = 2; devices <= (int64_t(1) << 20); devices *= 2) {
    int64_t perDevice = rest + (shardable + devices - 1) / devices;
    if (perDevice <= budget) {
      // The smallest count, not only powers of two.
      int64_t low = devices / 2 + 1;
      for (int64_t n = std::max<int64_t>(low, 2); n < devices; ++n)
        if (rest + (shardable + n - 1) / n <= budget)
          return Remedy{kind.str(), n, rest + (shardable + n - 1) / n,
                        shardable};
      return Remedy{kind.str(), devices, perDevice, shardable};
    }
  }
  return std::nullopt;
}

static void findRemedies(ExploreResult &result, const ExploreOptions &options) {
  if (!result.smallest)
    return;
  const CombinationResult &row = result.rows[*result.smallest];
  int64_t peak = row.plannedPeakBytes;
  int64_t optimizer = row.getPool(MemoryPoolKind::Optimizer);
  if (auto remedy =
          shard("shard-optimizer", peak, optimizer, options.budgetBytes))
    result.remedies.push_back(*remedy);
  // ZeRO-Offload (--offload=optimizer, when the smallest row has not
  // offloaded already): the optimizer state and the f32 master weights
  // live on the host, the weights the device computes with stay on it, all
  // of them (not only the low-precision copies live at the peak); each step
  // the f32 gradients go to the host and the updated weights come back.
  int64_t offloaded = optimizer + row.getPool(MemoryPoolKind::MasterParams);
  int64_t onDevice = peak - offloaded - row.getPool(MemoryPoolKind::Params) +
                     row.modelState.weights;
  if (!row.combination.isOffloaded() && onDevice <= options.budgetBytes) {
    Remedy offload{"offload-optimizer", 0, onDevice, offloaded};
    offload.transferBytes = row.modelState.grads + row.modelState.weights;
    offload.transferSeconds =
        estimateHostTransferSeconds(offload.transferBytes, *options.device);
    result.remedies.push_back(offload);
  }
  // What ZeRO stage 3 would split: the model state in the planned peak
  // (the gradients live there, not all of them). A row that is ZeRO-3
  // already, or streams its weights from the host, holds at its peak the
  // whole weight an op reads: more devices do not shrink it.
  if (row.combination.zeroStage == 3 || row.combination.getOffload().params)
    return;
  int64_t modelState = row.getPool(MemoryPoolKind::Params) +
                       row.getPool(MemoryPoolKind::MasterParams) +
                       row.getPool(MemoryPoolKind::Grads) + optimizer;
  if (auto remedy =
          shard("shard-model-state", peak, modelState, options.budgetBytes))
    result.remedies.push_back(*remedy);
}

/// The arena budget of a row that moves saved activations to the host: the
/// budget less the arguments of the same row without remat or moved
/// activations, compiled before it (0, all of them moved, when there is
/// none).
static int64_t getActivationArenaBudget(const ExploreResult &result,
                                        const ExploreOptions &options,
                                        const Combination &c) {
  OffloadChoice choice = c.getOffload();
  std::string keeping = choice.params      ? "params"
                        : choice.optimizer ? "optimizer"
                                           : "none";
  for (const CombinationResult &row : result.rows) {
    const Combination &o = row.combination;
    if (row.compiled() && o.remat == "none" && o.offload == keeping &&
        o.precision == c.precision && o.microBatches == c.microBatches &&
        o.stateBits == c.stateBits && o.frozenWeights == c.frozenWeights &&
        o.ranks == c.ranks && o.zeroStage == c.zeroStage)
      return std::max<int64_t>(0, options.budgetBytes - row.argumentBytes);
  }
  return 0;
}

/// Compiles again, as `change` makes it, the combination of every compiled
/// single-device row that `select` picks; one that moves saved activations
/// to the host without remat moves the fewest that fit the budget. Returns
/// whether it added rows.
static bool addRows(ModuleOp module, const MemoptPipelineOptions &base,
                    const ExploreOptions &options, ExploreResult &result,
                    llvm::function_ref<bool(const Combination &)> select,
                    llvm::function_ref<void(Combination &)> change) {
  std::vector<Combination> picked;
  for (const CombinationResult &row : result.rows)
    if (row.compiled() && row.combination.ranks == 1 && select(row.combination))
      picked.push_back(row.combination);
  for (Combination combination : picked) {
    change(combination);
    int64_t arenaBudget =
        combination.offloadsActivations() && combination.remat == "none"
            ? getActivationArenaBudget(result, options, combination)
            : 0;
    result.rows.push_back(
        compileCombination(module, base, combination, options, arenaBudget));
    result.rows.back().arenaBudgetBytes = arenaBudget;
  }
  return !picked.empty();
}

/// Nothing fits one device: every single-device combination that compiled
/// (but the budget remat strategy's, whose arena budget depends on the
/// arguments) again with 8-bit AdamW moments.
static bool addQuantizedStateRows(ModuleOp module,
                                  const MemoptPipelineOptions &base,
                                  const ExploreOptions &options,
                                  ExploreResult &result) {
  return addRows(
      module, base, options, result,
      [](const Combination &c) {
        return c.stateBits == 32 && c.remat != "budget";
      },
      [](Combination &c) { c.stateBits = 8; });
}

/// The single-device rows whose moments have `stateBits` again with `what`
/// offloaded ("optimizer" or "params"; not the budget strategy's rows,
/// whose arena budget assumed the arguments on the device). A row that
/// offloads its activations keeps them there.
static bool addOffloadRows(ModuleOp module, const MemoptPipelineOptions &base,
                           const ExploreOptions &options, unsigned stateBits,
                           llvm::StringRef what, ExploreResult &result) {
  return addRows(
      module, base, options, result,
      [&](const Combination &c) {
        return !c.isOffloaded() && c.remat != "budget" &&
               c.stateBits == stateBits;
      },
      [&](Combination &c) {
        c.offload =
            c.offloadsActivations() ? what.str() + ",activations" : what.str();
      });
}

/// The other way to drop saved activations: each single-device combination
/// that keeps what it saves (remat "none") again with the fewest of its
/// saved activations in host memory that fit the budget (all of them when
/// none do). The choice weighs them against the rows that recompute by
/// estimated step time: the copies over the host link against the
/// recompute FLOPs.
static bool addActivationOffloadRows(ModuleOp module,
                                     const MemoptPipelineOptions &base,
                                     const ExploreOptions &options,
                                     ExploreResult &result) {
  return addRows(
      module, base, options, result,
      [](const Combination &c) {
        return c.remat == "none" && c.offload == "none";
      },
      [](Combination &c) { c.offload = "activations"; });
}

/// Whether the loss function of `module` has a frozen argument (which NF4
/// may store in 4 bits).
static bool hasFrozenWeights(ModuleOp module) {
  bool found = false;
  module.walk([&](FunctionOpInterface func) {
    if (!func->hasAttr(MemoptDialect::kLossAttrName))
      return;
    for (unsigned i = 0; i < func.getNumArguments(); ++i)
      if (auto role = func.getArgAttrOfType<StringAttr>(
              i, MemoptDialect::kRoleAttrName);
          role &&
          role.getValue() == stringifyArgumentRole(ArgumentRole::Frozen))
        found = true;
  });
  return found;
}

/// Nothing fits one device: every single-device combination that compiled
/// (but the budget remat strategy's) again with its frozen weights in NF4.
static bool addNf4FrozenRows(ModuleOp module, const MemoptPipelineOptions &base,
                             const ExploreOptions &options,
                             ExploreResult &result) {
  return addRows(
      module, base, options, result,
      [](const Combination &c) {
        return c.frozenWeights != "nf4" && c.remat != "budget";
      },
      [](Combination &c) { c.frozenWeights = "nf4"; });
}

/// Nothing fits one device: compiles the smallest single-device combination
/// (of a fixed remat strategy: budget's depends on the arguments, which
/// sharding changes) with ZeRO stage 1, then 2, then 3, over 2, 4, 8 ... ranks up to
/// options.maxRanks, each rank training the model's batch, until one fits.
/// Returns whether it added rows.
static bool addShardedRows(ModuleOp module, const MemoptPipelineOptions &base,
                           const ExploreOptions &options,
                           ExploreResult &result) {
  // With 8-bit moments when the search quantized them: the smallest.
  const CombinationResult *smallest = findSmallest(
      result, [](const Combination &c) { return c.remat != "budget"; });
  if (!smallest)
    return false;
  Combination combination = smallest->combination;
  bool added = false;
  for (int64_t ranks = 2; ranks <= options.maxRanks; ranks *= 2)
    for (int64_t stage : {1, 2, 3}) {
      combination.ranks = ranks;
      combination.zeroStage = stage;
      result.rows.push_back(
          compileCombination(module, base, combination, options));
      added = true;
      const CombinationResult &row = result.rows.back();
      if (row.fits || !row.compiled())
        return true;
      // What no number of ranks divides is over the budget already.
      int64_t unsharded = row.plannedPeakBytes -
                          row.getPool(MemoryPoolKind::Optimizer) -
                          row.getPool(MemoryPoolKind::Grads) -
                          row.getPool(MemoryPoolKind::MasterParams) -
                          row.getPool(MemoryPoolKind::Params);
      if (stage == 3 && unsharded >= options.budgetBytes)
        return true;
    }
  return added;
}

ExploreResult memopt::exploreCombinations(ModuleOp module,
                                          const MemoptPipelineOptions &base,
                                          const ExploreOptions &options) {
  auto start = std::chrono::steady_clock::now();
  ExploreResult result;
  countItems(module, result);
  // Every combination keeps the state precision, the offload and the ranks
  // the options give, until the search quantizes, offloads or shards.
  auto withBaseState = [&](Combination c) {
    c.stateBits = base.optimizerStateBits;
    c.frozenWeights = base.frozenWeights;
    c.offload = base.offload;
    c.ranks = base.dataParallel;
    c.zeroStage = base.zeroStage;
    return c;
  };

  // By default every power of two that divides the batch.
  std::vector<int64_t> microBatches = options.microBatches;
  if (microBatches.empty()) {
    microBatches.push_back(1);
    for (int64_t k = 2; k <= result.samplesPerStep; k *= 2)
      if (result.samplesPerStep % k == 0)
        microBatches.push_back(k);
  }
  // The arguments of a combination do not depend on its remat strategy:
  // the budget strategy's arena budget is the budget less those of the
  // same precision and K without remat (compiled first, or now).
  // The arguments of the same precision and K without remat (-1: unknown).
  auto getArgumentBytes = [&](const Combination &c) -> int64_t {
    for (const CombinationResult &row : result.rows)
      if (row.compiled() && row.combination.precision == c.precision &&
          row.combination.remat == "none" &&
          row.combination.microBatches == c.microBatches)
        return row.argumentBytes;
    CombinationResult reference = compileCombination(
        module, base, withBaseState(Combination{c.precision, "none",
                                                c.microBatches}),
        options);
    return reference.compiled() ? reference.argumentBytes : -1;
  };
  for (Precision precision : options.precisions)
    for (const std::string &remat : options.remats)
      for (int64_t k : microBatches) {
        Combination c = withBaseState({precision, remat, k});
        int64_t arenaBudget = 0;
        if (remat == "budget" || remat == "auto" || c.offloadsActivations()) {
          int64_t arguments = getArgumentBytes(c);
          arenaBudget = arguments < 0 ? 0 : options.budgetBytes - arguments;
          if (arguments >= options.budgetBytes) {
            // Over the budget before any scratch buffer: not compiled.
            CombinationResult row;
            row.combination = c;
            row.rejected = true;
            row.error = "the arguments alone (" + formatBytes(arguments) +
                        ": parameters, optimizer state, data) exceed the "
                        "budget";
            result.rows.push_back(std::move(row));
            continue;
          }
        }
        result.rows.push_back(
            compileCombination(module, base, c, options, arenaBudget));
        result.rows.back().arenaBudgetBytes = arenaBudget;
      }

  // The reference of each precision: no remat, K=1.
  std::map<Precision, int64_t> referenceFlops;
  const CombinationResult *plain = nullptr;
  for (const CombinationResult &row : result.rows)
    if (row.compiled() && row.combination.remat == "none" &&
        row.combination.microBatches == 1) {
      referenceFlops.emplace(row.combination.precision, row.flops);
      if (row.combination.precision == Precision::F32)
        plain = &row;
    }
  std::optional<CombinationResult> plainExtra;
  if (!plain) {
    plainExtra =
        compileCombination(module, base, withBaseState(Combination()), options);
    if (plainExtra->compiled()) {
      plain = &*plainExtra;
      referenceFlops.emplace(Precision::F32, plain->flops);
    }
  }
  for (CombinationResult &row : result.rows) {
    if (!row.compiled())
      continue;
    auto it = referenceFlops.find(row.combination.precision);
    if (it == referenceFlops.end()) {
      CombinationResult reference = compileCombination(
          module, base,
          withBaseState(Combination{row.combination.precision, "none", 1}),
          options);
      it = referenceFlops
               .emplace(row.combination.precision,
                        reference.compiled() ? reference.flops : row.flops)
               .first;
    }
    row.extraFlops = std::max<int64_t>(0, row.flops - it->second);
  }

  chooseCombination(result, options, plain);
  // Adding rows moves them: `plain`, when it is one, is found again.
  std::optional<size_t> plainRow;
  if (plain && !plainExtra)
    plainRow = plain - result.rows.data();
  // Then 8-bit optimizer state, before more devices.
  auto recount = [&] {
    if (plainRow)
      plain = &result.rows[*plainRow];
    for (CombinationResult &row : result.rows)
      if (row.compiled() &&
          (row.combination.ranks > 1 || row.combination.stateBits != 32 ||
           row.combination.frozenWeights == "nf4" ||
           row.combination.offload != "none"))
        row.extraFlops = std::max<int64_t>(
            0, row.flops - referenceFlops[row.combination.precision]);
    chooseCombination(result, options, plain);
  };
  // Recomputing was needed, or is not enough: the saved activations in
  // host memory instead, when the device has a host link.
  if ((!result.chosen || result.rows[*result.chosen].extraFlops > 0) &&
      options.mayOffload && base.dataParallel == 1 && base.offload == "none" &&
      options.device->hostLinkBandwidth > 0 &&
      addActivationOffloadRows(module, base, options, result))
    recount();
  if (!result.chosen && options.mayQuantizeState &&
      base.optimizer == "adamw" && base.dataParallel == 1 &&
      addQuantizedStateRows(module, base, options, result))
    recount();
  if (!result.chosen && options.mayQuantizeFrozen &&
      base.dataParallel == 1 && hasFrozenWeights(module) &&
      addNf4FrozenRows(module, base, options, result))
    recount();
  // Then the optimizer in host memory, which computes what the step
  // without offload does: with the user's moments first, then with the
  // 8-bit moments the search made; then the weights too.
  if (!result.chosen && options.mayOffload && base.dataParallel == 1 &&
      base.offload == "none") {
    for (llvm::StringRef what : {"optimizer", "params"}) {
      if (!result.chosen &&
          addOffloadRows(module, base, options, base.optimizerStateBits, what,
                         result))
        recount();
      if (!result.chosen && base.optimizerStateBits != 8 &&
          addOffloadRows(module, base, options, 8, what, result))
        recount();
    }
  }
  if (!result.chosen && base.dataParallel == 1 &&
      addShardedRows(module, base, options, result))
    recount();
  result.seconds = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - start)
                       .count();
  return result;
}

void memopt::chooseCombination(ExploreResult &result,
                               const ExploreOptions &options,
                               const CombinationResult *plain) {
  result.chosen = result.smallest = std::nullopt;
  result.explanation.clear();
  result.remedies.clear();
  for (auto [index, row] : llvm::enumerate(result.rows)) {
    if (!row.compiled())
      continue;
    if (!result.smallest ||
        row.plannedPeakBytes < result.rows[*result.smallest].plannedPeakBytes)
      result.smallest = index;
    // Strictly faster wins: on a tie the earlier (preferred) row stays.
    if (row.fits && (!result.chosen || row.cost.seconds <
                                           result.rows[*result.chosen]
                                               .cost.seconds))
      result.chosen = index;
  }
  explain(result, options, plain);
  if (!result.chosen)
    findRemedies(result, options);
}
