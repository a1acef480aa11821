//===- Explore.cpp - printing the budget search ---------------------------===//
//
// The --explore table and JSON of memopt/Pipelines/BudgetSearch.h's result,
// and the error of an infeasible budget.
//
//===----------------------------------------------------------------------===//

#include "Explore.h"
#include "Report.h"

#include "memopt/Support/ByteSize.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <nlohmann/json.hpp>

using namespace mlir;
using namespace memopt;
using Json = nlohmann::ordered_json;

static double itemsPerSecond(const ExploreResult &result,
                             const CombinationResult &row) {
  // A ZeRO row's ranks each train the model's batch (communication is not
  // modelled).
  int64_t items = (result.tokensPerStep ? result.tokensPerStep
                                        : result.samplesPerStep) *
                  row.combination.ranks;
  return row.cost.seconds > 0 ? double(items) / row.cost.seconds : 0.0;
}

//===----------------------------------------------------------------------===//
// Output
//===----------------------------------------------------------------------===//

static void printBudget(llvm::raw_ostream &os, const ExploreOptions &options) {
  const DeviceProfile &device = *options.device;
  os << "memory budget: " << formatBytes(options.budgetBytes) << " ("
     << options.budgetBytes << " B)";
  if (options.explicitBudget)
    os << ", --memory-budget";
  else
    os << ", " << device.name << "'s " << formatBytes(device.memoryBytes)
       << " less a reserve of " << formatBytes(getDeviceReserveBytes(device));
  os << "\nstep times estimated on " << device.description << " ("
     << device.name << ")\n";
}

void memopt::printExploreTable(llvm::raw_ostream &os,
                               const ExploreResult &result,
                               const ExploreOptions &options) {
  printBudget(os, options);
  std::string rate = result.tokensPerStep ? "tokens/s" : "samples/s";
  os << "  " << llvm::left_justify("precision", 10)
     << llvm::left_justify("remat", 10) << llvm::right_justify("K", 4)
     << llvm::right_justify("state", 7) << llvm::right_justify("frozen", 7)
     << llvm::right_justify("planned peak", 14) << llvm::right_justify("fits", 6)
     << llvm::right_justify("extra FLOPs", 24)
     << llvm::right_justify("step time", 13) << llvm::right_justify(rate, 14)
     << "\n";
  for (auto [index, row] : llvm::enumerate(result.rows)) {
    const Combination &c = row.combination;
    os << (result.chosen == index ? "* " : "  ")
       << llvm::left_justify(getPrecisionName(c.precision), 10)
       << llvm::left_justify(c.remat, 10)
       << llvm::right_justify(std::to_string(c.microBatches), 4)
       << llvm::right_justify(std::to_string(c.stateBits) + "bit", 7)
       << llvm::right_justify(c.getFrozenStorage(), 7);
    // What the search adds when nothing fits one device (or the options
    // pin): the optimizer in host memory, more ranks.
    std::string zero = c.getOffloadTag();
    if (c.ranks > 1) {
      zero += zero.empty() ? "" : ", ";
      zero += c.zeroStage > 0
                  ? llvm::formatv("ZeRO-{0} x {1} ranks", c.zeroStage, c.ranks)
                        .str()
                  : llvm::formatv("{0} ranks", c.ranks).str();
    }
    if (!row.compiled()) {
      os << "  failed" << (zero.empty() ? "" : " (" + zero + ")") << ": "
         << row.error << "\n";
      continue;
    }
    std::string extra =
        formatFlops(row.extraFlops) + " (" +
        llvm::formatv("{0:f1}%", row.flops > row.extraFlops
                                     ? 100.0 * double(row.extraFlops) /
                                           double(row.flops - row.extraFlops)
                                     : 0.0)
            .str() +
        ")";
    os << llvm::right_justify(formatBytes(row.plannedPeakBytes), 14)
       << llvm::right_justify(row.fits ? "yes" : "no", 6)
       << llvm::right_justify(extra, 24)
       << llvm::right_justify(formatSeconds(row.cost.seconds), 13)
       << llvm::right_justify(
              llvm::formatv("{0:f0}", itemsPerSecond(result, row)).str(), 14);
    os << (zero.empty() ? "" : "  " + zero) << "\n";
  }
  // The fused kernels of the first compiled row, which every row shares.
  auto first = llvm::find_if(result.rows, [](const CombinationResult &row) {
    return row.compiled();
  });
  if (first != result.rows.end())
    printFusedKernels(os, first->fused, "  ");
  for (const std::string &line : result.explanation)
    os << "  " << line << "\n";
  size_t compiled = llvm::count_if(
      result.rows, [](const CombinationResult &row) { return row.compiled(); });
  os << llvm::formatv("{0} of {1} combinations compiled in {2:f1} s\n",
                      compiled, result.rows.size(), result.seconds);
}

static const char *getRemedyText(llvm::StringRef kind) {
  if (kind == "shard-optimizer")
    return "shard the optimizer state";
  if (kind == "offload-optimizer")
    return "offload the optimizer state and master weights to host memory";
  return "shard parameters, live gradients and optimizer state";
}

void memopt::printInfeasible(llvm::raw_ostream &os,
                             const ExploreResult &result,
                             const ExploreOptions &options) {
  os << "memopt-compile: the memory budget " << formatBytes(options.budgetBytes)
     << " (" << options.budgetBytes << " B) cannot be met";
  if (!result.smallest) {
    if (!result.rows.empty() && result.rows.front().rejected)
      os << ": " << result.rows.front().error << "\n";
    else if (!result.rows.empty())
      os << ": no combination compiled; the first error: "
         << result.rows.front().error << "\n";
    else
      os << ": no combination to try\n";
    return;
  }
  const CombinationResult &row = result.rows[*result.smallest];
  int64_t gap = row.plannedPeakBytes - options.budgetBytes;
  os << ": the smallest planned peak is " << formatBytes(row.plannedPeakBytes)
     << " (" << row.plannedPeakBytes << " B), with "
     << row.combination.str() << ", " << formatBytes(gap) << " (" << gap
     << " B) over\n";
  os << "  at that peak: parameters "
     << formatBytes(row.getPool(MemoryPoolKind::Params))
     << ", optimizer state "
     << formatBytes(row.getPool(MemoryPoolKind::Optimizer))
     << ", gradients " << formatBytes(row.getPool(MemoryPoolKind::Grads))
     << ", activations "
     << formatBytes(row.getPool(MemoryPoolKind::Activations)) << "\n";
  if (result.remedies.empty())
    os << "  neither sharding nor offloading the model state closes the gap: "
          "the activations"
       << (row.combination.zeroStage == 3 || row.combination.getOffload().params
               ? " and the whole weight an op reads"
               : "")
       << " alone exceed the budget; use a smaller batch or sequence\n";
  for (const Remedy &remedy : result.remedies) {
    os << "  to close the gap: " << getRemedyText(remedy.kind) << " ("
       << formatBytes(remedy.bytes) << ", " << remedy.bytes << " B)";
    if (remedy.devices)
      os << " over " << remedy.devices << " devices";
    os << ": " << formatBytes(remedy.bytesPerDevice) << " ("
       << remedy.bytesPerDevice << " B) per device";
    if (remedy.transferBytes)
      os << "; each step moves " << formatBytes(remedy.transferBytes)
         << " over " << options.device->hostLink << " ("
         << llvm::formatv("{0:f0}", options.device->hostLinkBandwidth / 1e9)
         << " GB/s each way), " << formatSeconds(remedy.transferSeconds);
    os << "\n";
  }
}

std::string memopt::renderExploreJson(const ExploreResult &result,
                                      const ExploreOptions &options) {
  const DeviceProfile &device = *options.device;
  Json json = Json::object();
  json["device"] = Json{{"name", device.name.str()},
                        {"memory_bytes", device.memoryBytes},
                        {"reserve_bytes", getDeviceReserveBytes(device)},
                        {"host_link", device.hostLink.str()},
                        {"host_link_bytes_per_second",
                         device.hostLinkBandwidth}};
  json["budget_bytes"] = options.budgetBytes;
  json["samples_per_step"] = result.samplesPerStep;
  json["tokens_per_step"] = result.tokensPerStep;
  Json rows = Json::array();
  for (auto [index, row] : llvm::enumerate(result.rows)) {
    const Combination &c = row.combination;
    Json entry = Json{{"precision", getPrecisionName(c.precision).str()},
                      {"remat", c.remat},
                      {"micro_batches", c.microBatches},
                      {"ranks", c.ranks},
                      {"zero_stage", c.zeroStage},
                      {"optimizer_state_bits", c.stateBits},
                      {"frozen_weights", c.getFrozenStorage()},
                      {"offload", c.offload},
                      {"chosen", result.chosen == index}};
    if (!row.compiled()) {
      entry["error"] = row.error;
      rows.push_back(std::move(entry));
      continue;
    }
    entry["planned_peak_bytes"] = row.plannedPeakBytes;
    entry["argument_bytes"] = row.argumentBytes;
    entry["arena_bytes"] = row.arenaBytes;
    entry["host_bytes"] = row.hostBytes;
    entry["fits"] = row.fits;
    Json pools = Json::object();
    for (unsigned pool = 0; pool < kNumMemoryPools; ++pool)
      pools[getMemoryPoolName(static_cast<MemoryPoolKind>(pool)).str()] =
          row.pools[pool];
    entry["pools_at_peak"] = std::move(pools);
    entry["model_state"] =
        Json{{"weights", row.modelState.weights},
             {"frozen_weights", row.modelState.frozenWeights},
             {"master_weights", row.modelState.masterWeights},
             {"grads", row.modelState.grads},
             {"optimizer", row.modelState.optimizer},
             {"total", row.modelState.getTotal()}};
    entry["saved_activation_bytes"] = row.savedActivationBytes;
    entry["saved_on_host_bytes"] = row.savedOnHostBytes;
    entry["flops"] = row.flops;
    entry["extra_flops"] = row.extraFlops;
    entry["step_seconds"] = row.cost.seconds;
    entry["transfer_seconds"] = row.cost.transferSeconds;
    entry["exposed_transfer_seconds"] = row.cost.exposedTransferSeconds;
    entry["transfer_bytes"] = row.cost.transferBytes;
    entry[result.tokensPerStep ? "tokens_per_second" : "samples_per_second"] =
        itemsPerSecond(result, row);
    rows.push_back(std::move(entry));
  }
  json["combinations"] = std::move(rows);
  json["chosen"] = result.chosen ? Json(*result.chosen) : Json(nullptr);
  json["explanation"] = result.explanation;
  if (result.chosen || !result.smallest) {
    json["infeasible"] = nullptr;
  } else {
    const CombinationResult &row = result.rows[*result.smallest];
    Json remedies = Json::array();
    for (const Remedy &remedy : result.remedies)
      remedies.push_back(Json{{"kind", remedy.kind},
                              {"devices", remedy.devices},
                              {"bytes", remedy.bytes},
                              {"bytes_per_device", remedy.bytesPerDevice},
                              {"transfer_bytes", remedy.transferBytes},
                              {"transfer_seconds", remedy.transferSeconds}});
    json["infeasible"] =
        Json{{"smallest_peak_bytes", row.plannedPeakBytes},
             {"combination", *result.smallest},
             {"gap_bytes", row.plannedPeakBytes - options.budgetBytes},
             {"remedies", std::move(remedies)}};
  }
  return json.dump(2, ' ', /*ensure_ascii=*/false,
                   Json::error_handler_t::replace) +
         "\n";
}
