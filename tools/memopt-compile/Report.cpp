//===- Report.cpp - the memory report: JSON and text ----------------------===//
//
// The JSON and the printed table of the memory report (docs/MemoryReport.md)
// from a MemoryAccount. memopt-compile is built without exceptions, so the
// JSON is only constructed and dumped, with invalid UTF-8 replaced rather than
// thrown on.
//
//===----------------------------------------------------------------------===//

#include "Report.h"

#include "memopt/Analysis/MemoryAccount.h"
#include "memopt/Dialect/Memopt/Transforms/Passes.h"
#include "memopt/Support/ByteSize.h"
#include "memopt/Support/ModelState.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/raw_ostream.h"

#include <nlohmann/json.hpp>

using namespace memopt;
using Json = nlohmann::ordered_json;

/// The scopes the text report lists.
static constexpr size_t kMaxScopesShown = 10;

/// `value` as JSON text, never throwing on invalid UTF-8.
static std::string dump(const Json &value, int indent = -1) {
  return value.dump(indent, ' ', /*ensure_ascii=*/false,
                    Json::error_handler_t::replace);
}

/// The arena and peak of a planned step.
static Json describePeak(const MemoryAccount &account) {
  mlir::Operation *peakOp = account.getPeakOp();
  return Json{{"index", account.getPeakIndex()},
              {"op", getReportedOpName(peakOp).str()},
              {"scope", getReportedScope(peakOp).str()},
              {"bytes", account.getPeakBytes()}};
}

Json memopt::buildMemoryReport(const MemoryAccount &account,
                               const MemoryAccount *eval) {
  Json report = Json::object();
  if (std::optional<int64_t> arena = account.getArenaBytes())
    report["arena_bytes"] = *arena;
  else
    report["arena_bytes"] = nullptr;
  report["lower_bound_bytes"] = account.getLowerBoundBytes();

  Json pools = Json::object();
  for (unsigned pool = 0; pool < kNumMemoryPools; ++pool)
    pools[getMemoryPoolName(static_cast<MemoryPoolKind>(pool)).str()] =
        account.getPoolsAtPeak()[pool];
  report["pools"] = std::move(pools);

  report["peak"] = describePeak(account);

  Json byScope = Json::object();
  for (const auto &[scope, bytes] : account.getSavedByScope())
    byScope[scope] = bytes;
  report["by_scope"] = std::move(byScope);

  const ModelStateBytes &state = account.getModelState();
  report["parameters"] =
      Json{{"trainable", account.getNumParameters()},
           {"trainable_tensors", account.getNumParameterTensors()},
           {"frozen", account.getNumFrozenParameters()},
           {"frozen_tensors", account.getNumFrozenTensors()}};
  report["nf4_frozen_bytes"] = account.getNf4FrozenBytes();
  report["model_state"] = Json{{"weights", state.weights},
                               {"frozen_weights", state.frozenWeights},
                               {"master_weights", state.masterWeights},
                               {"grads", state.grads},
                               {"optimizer", state.optimizer},
                               {"total", state.getTotal()}};
  report["max_gathered_bytes"] = account.getMaxGatheredBytes();
  if (int64_t host = account.getHostBytes()) {
    Json hostPools = Json::object();
    for (unsigned pool = 0; pool < kNumMemoryPools; ++pool)
      if (int64_t bytes = account.getHostArgumentBytes()[pool])
        hostPools[getMemoryPoolName(static_cast<MemoryPoolKind>(pool)).str()] =
            bytes;
    report["host"] =
        Json{{"total_bytes", host},
             {"arena_bytes", account.getHostArenaBytes()},
             {"pools", std::move(hostPools)},
             {"to_host_bytes", account.getTransferBytes(MemoryKind::Host)},
             {"to_device_bytes", account.getTransferBytes(MemoryKind::Device)},
             {"saved_activation_bytes", account.getSavedOnHostBytes()}};
  }

  report["forward_flops"] = account.getForwardFlops();
  report["backward_flops"] = account.getBackwardFlops();
  report["recompute_flops"] = account.getRecomputeFlops();
  const MemoryAccount::FusedKernels &fused = account.getFusedKernels();
  report["fused_kernels"] =
      Json{{"attention", fused.attention},
           {"linear_cross_entropy", fused.linearCrossEntropy},
           {"recompute_flops", fused.recomputeFlops}};

  Json timeline = Json::array();
  for (auto [index, point] : llvm::enumerate(account.getTimeline()))
    timeline.push_back(Json{{"index", index},
                            {"op", getReportedOpName(point.op).str()},
                            {"scope", getReportedScope(point.op).str()},
                            {"bytes", point.getBytes()},
                            {"activations", point.activations},
                            {"grads", point.grads},
                            {"params", point.params}});
  report["timeline"] = std::move(timeline);
  if (eval)
    report["eval_step"] =
        Json{{"arena_bytes", eval->getArenaBytes().value_or(0)},
             {"allocated_bytes", eval->getArgumentBytes() +
                                     eval->getArenaBytes().value_or(0)},
             {"peak", describePeak(*eval)}};
  return report;
}

std::string memopt::renderMemoryReportJson(const MemoryAccount &account,
                                           const MemoryAccount *eval) {
  // Pretty-printed, except that each timeline point stays on one line so
  // that the file reads like the table it is.
  Json report = buildMemoryReport(account, eval);
  std::string text = "{";
  llvm::ListSeparator sep(",");
  for (const auto &[key, value] : report.items()) {
    text += sep;
    text += "\n  " + dump(Json(key)) + ": ";
    if (key == "timeline") {
      text += "[";
      llvm::ListSeparator pointSep(",");
      for (const Json &point : value) {
        text += pointSep;
        text += "\n    " + dump(point);
      }
      text += value.empty() ? "]" : "\n  ]";
      continue;
    }
    std::string nested = dump(value, 2);
    llvm::SmallVector<llvm::StringRef> lines;
    llvm::StringRef(nested).split(lines, '\n');
    text += llvm::join(lines, "\n  ");
  }
  text += "\n}\n";
  return text;
}

/// How the text and HTML reports name a scope: "(top level)" for "".
void memopt::printFusedKernels(llvm::raw_ostream &os,
                               const MemoryAccount::FusedKernels &fused,
                               llvm::StringRef indent) {
  if (fused.attention == 0 && fused.linearCrossEntropy == 0)
    return;
  os << indent << "fused kernels:";
  if (fused.attention)
    os << " " << fused.attention << " attention (no score matrices)"
       << (fused.linearCrossEntropy ? "," : "");
  if (fused.linearCrossEntropy)
    os << " " << fused.linearCrossEntropy
       << " linear cross-entropy (no logits)";
  os << "; their backward recomputes " << formatFlops(fused.recomputeFlops)
     << " (--no-fused-attention, --no-fused-lm-loss to compare)\n";
}

static std::string displayScope(llvm::StringRef scope) {
  return scope.empty() ? "(top level)" : scope.str();
}

void memopt::printMemoryReportText(llvm::raw_ostream &os,
                                   const MemoryAccount &account,
                                   const ReportContext &context) {
  const PoolBytes &pools = account.getPoolsAtPeak();
  int64_t total = account.getTotalBytesAtPeak();
  mlir::Operation *peakOp = account.getPeakOp();

  os << "memory of @" << context.functionName << " at its peak (program point "
     << account.getPeakIndex() << ", " << getReportedOpName(peakOp);
  if (llvm::StringRef scope = getReportedScope(peakOp); !scope.empty())
    os << " in " << scope;
  os << "):\n";
  auto printRow = [&](llvm::StringRef name, int64_t bytes) {
    os << "  " << llvm::left_justify(name, 14) << " "
       << llvm::right_justify(formatBytes(bytes), 12) << " "
       << llvm::right_justify(std::to_string(bytes), 14) << " B  "
       << llvm::format("%5.1f%%", total > 0
                                      ? 100.0 * static_cast<double>(bytes) /
                                            static_cast<double>(total)
                                      : 0.0)
       << "\n";
  };
  os << "  " << llvm::left_justify("pool", 14) << " "
     << llvm::right_justify("bytes", 12) << " "
     << llvm::right_justify("exact", 14) << "    share\n";
  for (unsigned pool = 0; pool < kNumMemoryPools; ++pool)
    printRow(getMemoryPoolName(static_cast<MemoryPoolKind>(pool)), pools[pool]);
  printRow("total", total);
  os << "  " << account.getNumParameters() << " parameters in "
     << account.getNumParameterTensors() << " tensors, optimizer "
     << context.optimizer;
  if (int64_t frozen = account.getNumFrozenTensors())
    os << "; " << account.getNumFrozenParameters() << " frozen in " << frozen
       << " tensors (" << formatBytes(account.getModelState().frozenWeights)
       << (account.getNf4FrozenBytes()
               ? " with " + formatBytes(account.getNf4FrozenBytes()) +
                     " in NF4"
               : std::string())
       << ", no gradient or optimizer state)";
  os << "\n";

  if (int64_t numParams = account.getNumParameters(); numParams > 0) {
    const ModelStateBytes &state = account.getModelState();
    auto perParam = [&](int64_t bytes) {
      return llvm::formatv("{0:f2}", static_cast<double>(bytes) /
                                         static_cast<double>(numParams))
          .str();
    };
    // Per trained parameter: the frozen weights are reported apart.
    os << "model state per parameter: "
       << perParam(state.getTotal() - state.frozenWeights)
       << " B = weights " << perParam(state.weights) << " + master "
       << perParam(state.masterWeights) << " + grads "
       << perParam(state.grads) << " + optimizer "
       << perParam(state.optimizer) << "\n";
  }
  if (int64_t gathered = account.getMaxGatheredBytes())
    os << "gathered parameters (ZeRO-3): at most " << formatBytes(gathered)
       << " (" << gathered << " B) live at once, each gathered right before "
       << "the op that reads it and freed after\n";

  int64_t lowerBound = account.getLowerBoundBytes();
  os << "scratch arena: ";
  if (std::optional<int64_t> arena = account.getArenaBytes()) {
    os << formatBytes(*arena) << " (" << *arena << " B), lower bound "
       << formatBytes(lowerBound) << " (" << lowerBound << " B)";
    if (lowerBound > 0)
      os << llvm::format(", %.3fx the bound",
                         static_cast<double>(*arena) /
                             static_cast<double>(lowerBound));
    int64_t workspace =
        pools[static_cast<unsigned>(MemoryPoolKind::Workspace)];
    int64_t allocated = account.getArgumentBytes() + *arena + workspace;
    os << "\nallocated for the step: " << formatBytes(allocated) << " ("
       << allocated << " B): arguments " << account.getArgumentBytes()
       << " B + arena " << *arena << " B";
    if (workspace > 0)
      os << " + workspace " << workspace << " B";
    os << "\n";
    if (int64_t host = account.getHostBytes()) {
      // Offload: the second memory, and what crosses the link.
      memopt::OffloadChoice offload = memopt::parseOffload(context.offload)
                                          .value_or(memopt::OffloadChoice());
      os << "host memory (--offload=" << context.offload
         << "): " << formatBytes(host) << " (" << host << " B):";
      llvm::ListSeparator plus(" +");
      for (unsigned pool = 0; pool < kNumMemoryPools; ++pool)
        if (int64_t bytes = account.getHostArgumentBytes()[pool])
          os << plus << " "
             << getMemoryPoolName(static_cast<MemoryPoolKind>(pool)) << " "
             << bytes << " B";
      os << plus << " host arena " << account.getHostArenaBytes() << " B\n";
      int64_t down = account.getTransferBytes(MemoryKind::Host);
      int64_t up = account.getTransferBytes(MemoryKind::Device);
      auto what = [&](llvm::StringRef optimizer) {
        std::string text;
        if (offload.optimizer)
          text = optimizer.str();
        if (offload.activations)
          text +=
              (text.empty() ? "" : ", ") + std::string("the saved activations");
        return text;
      };
      os << "each step copies " << formatBytes(down) << " (" << down
         << " B) to the host (" << what("the gradients") << ") and "
         << formatBytes(up) << " (" << up << " B) back ("
         << what(offload.params ? "the weights, before each use"
                                : "the weights")
         << ")\n";
    }
    if (const MemoryAccount *eval = context.eval) {
      int64_t evalArena = eval->getArenaBytes().value_or(0);
      mlir::Operation *peakOp = eval->getPeakOp();
      os << "evaluation step (eval_step): arena " << formatBytes(evalArena)
         << " (" << evalArena << " B), peak at "
         << getReportedOpName(peakOp) << " in "
         << displayScope(getReportedScope(peakOp))
         << " (the parameters and the arena are the training step's)\n";
    }
  } else {
    os << "not planned, lower bound " << formatBytes(lowerBound) << " ("
       << lowerBound << " B)\n";
  }

  auto scopes = account.getSavedByScope();
  int64_t saved = 0;
  for (const auto &entry : scopes)
    saved += entry.second;
  os << "activations saved for the backward: " << formatBytes(saved) << " ("
     << saved << " B)";
  if (int64_t host = account.getSavedOnHostBytes())
    os << " on the device, " << formatBytes(host) << " (" << host
       << " B) in host memory";
  if (scopes.empty()) {
    os << "\n";
  } else {
    size_t shown = std::min(scopes.size(), kMaxScopesShown);
    os << ", top " << shown << " of " << scopes.size() << " scopes:\n";
    for (const auto &[scope, bytes] : scopes.take_front(shown))
      os << "  " << llvm::left_justify(displayScope(scope), 32) << " "
         << llvm::right_justify(formatBytes(bytes), 12) << " "
         << llvm::right_justify(std::to_string(bytes), 14) << " B\n";
  }
  os << "compute: forward " << formatFlops(account.getForwardFlops())
     << ", backward " << formatFlops(account.getBackwardFlops())
     << ", recompute " << formatFlops(account.getRecomputeFlops()) << "\n";
  printFusedKernels(os, account.getFusedKernels());
  if (!context.outputDir.empty())
    os << "timeline and buffers at the peak: " << context.outputDir
       << "/memory_report.html\n";
}
