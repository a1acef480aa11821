//===- Report.h - the memory report of memopt-compile ------------*- C++
//-*-===//
//
// Renders a MemoryAccount as the three forms of the memory report
// (docs/MemoryReport.md): the table printed by --report=text, the JSON of
// OUT/memory_report.json and --report=json, and the self-contained
// OUT/memory_report.html.
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_TOOLS_MEMOPT_COMPILE_REPORT_H
#define MEMOPT_TOOLS_MEMOPT_COMPILE_REPORT_H

#include "memopt/Analysis/MemoryAccount.h"

#include "llvm/ADT/StringRef.h"

#include <nlohmann/json_fwd.hpp>

#include <string>

namespace llvm {
class raw_ostream;
} // namespace llvm

namespace memopt {

/// What the report says about the step besides its account.
struct ReportContext {
  /// The planned function (`train_step`).
  std::string functionName;
  /// "adamw" or "sgd".
  std::string optimizer;
  /// Where the files go, for the pointer printed after the table.
  std::string outputDir;
  /// The evaluation step's account, when it was compiled.
  const MemoryAccount *eval = nullptr;
  /// What lives in host memory, as --offload spells it ("none" ...).
  std::string offload = "none";
};

/// The report as a JSON value: the fields of OUT/memory_report.json, in the
/// order docs/MemoryReport.md lists them; `eval_step` (its arena and peak)
/// when `eval`, the evaluation step's account, is given.
nlohmann::ordered_json buildMemoryReport(const MemoryAccount &account,
                                         const MemoryAccount *eval = nullptr);

/// The report as JSON text (docs/MemoryReport.md, "The JSON"): one line per
/// timeline point, two-space indentation elsewhere, a final newline.
std::string renderMemoryReportJson(const MemoryAccount &account,
                                   const MemoryAccount *eval = nullptr);

/// One line naming the step's fused kernels and the FLOPs their backward
/// spends recomputing scores and logits; nothing when there are none.
void printFusedKernels(llvm::raw_ostream &os,
                       const MemoryAccount::FusedKernels &fused,
                       llvm::StringRef indent = "");

/// Prints the table users read first: each pool's bytes and share at the
/// peak, the arena against its lower bound, the scopes that save the most
/// activations for the backward pass, and the FLOPs.
void printMemoryReportText(llvm::raw_ostream &os, const MemoryAccount &account,
                           const ReportContext &context);

/// The report as one self-contained HTML page: the data inline as JSON,
/// rendered by inline JavaScript into SVG charts and tables; no network.
std::string renderMemoryReportHtml(const MemoryAccount &account,
                                   const ReportContext &context);

} // namespace memopt

#endif // MEMOPT_TOOLS_MEMOPT_COMPILE_REPORT_H
