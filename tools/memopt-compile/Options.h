//===- Options.h - memopt-compile's command line ----------------*- C++ -*-===//
//
// memopt-compile's flags, checked once: a malformed or incompatible flag is
// one `memopt-compile: ...` message before any input is read. The checks
// that --memopt-pipeline shares live in lib/Pipelines
// (validateMemoptPipelineOptions), so the two tools accept the same values
// with the same messages; this module adds the flags only memopt-compile
// has (output, target, report, the budget search).
//
//===----------------------------------------------------------------------===//

#ifndef MEMOPT_TOOLS_MEMOPT_COMPILE_OPTIONS_H
#define MEMOPT_TOOLS_MEMOPT_COMPILE_OPTIONS_H

#include "Explore.h"

#include "memopt/Pipelines/Pipelines.h"
#include "memopt/runtime/LrSchedule.h"

#include "llvm/Support/Error.h"

#include <string>

namespace memopt {

/// What memopt-compile was asked to do.
struct CompileOptions {
  std::string inputFilename;
  /// OUT; "" only with --report-only or --explore.
  std::string outputDir;
  /// "host" or "cuda".
  std::string target;
  /// "text" or "json".
  std::string report;
  bool reportOnly = false;
  /// Print the table of combinations and build nothing.
  bool explore = false;
  /// The C++ compiler that builds OUT/train (--target=host), and the host
  /// compiler nvcc hands the step to (--target=cuda; "": nvcc's default).
  std::string cxx;
  /// --library: also build OUT/libmemopt_program.so.
  bool library = false;
  std::string cudaHostCompiler;
  /// The pipeline; the budget search, when it runs, starts from it.
  MemoptPipelineOptions pipeline;
  /// Whether --explore, --memory-budget or --device asks for the budget
  /// search, and what it compiles against.
  bool budgetSearch = false;
  ExploreOptions search;
  /// --lr-schedule and its flags: the driver sets the factor each step.
  memopt::runtime::LrSchedule lrSchedule;
};

/// Reads and checks the command line that llvm::cl parsed into `options`;
/// the error is one line, without the tool's name.
llvm::Error getCompileOptions(CompileOptions &options);

/// The model's own optimizer (`memopt.optimizer`, recorded by the exporter
/// from the user's torch.optim optimizer; "" when it has none) into
/// `options`: an error when --optimizer names another one.
llvm::Error adoptRecordedOptimizer(llvm::StringRef recorded,
                                   MemoptPipelineOptions &options);

/// Makes the pipeline options that memopt-compile takes as they are its
/// flags (MemoptPipelineOptions declares them), and completes the help text
/// of the flags that set a pipeline option with that option's default. Call
/// before parsing the command line.
void registerFlags();

/// Keeps --help to memopt-compile's options, the generic ones and MLIR's
/// `-mlir-*` instrumentation (timing, IR printing, statistics) rather than
/// every option linked in from libLLVM.
void hideUnrelatedOptions();

} // namespace memopt

#endif // MEMOPT_TOOLS_MEMOPT_COMPILE_OPTIONS_H
