//===- memopt-compile.cpp - compile a loss function into `train` ----------===//
//
// The user-facing compiler (docs/Pipeline.md): parses a module with one
// `memopt.loss` function, runs the memopt pipeline (autodiff, bufferize,
// plan buffers), writes the planned module and the model description, lowers
// to EmitC and C++, and links the result with the `train` driver and the host
// runtime by invoking the system C++ compiler:
//
//   OUT/plan.mlir         the bufferized, planned module
//   OUT/model.json        the arguments of @train_step and the arena size
//   OUT/train_step.cpp    the generated step
//   OUT/eval_step.cpp     the generated evaluation step (forward and loss)
//   OUT/model_info.cpp    model.json as the string `memopt_model_json`
//   OUT/train             the program
//   OUT/libmemopt_program.so  with --library: the steps behind a C API
//   OUT/memory_report.json  the memory account (docs/MemoryReport.md)
//   OUT/memory_report.html  the same, as a page with the timeline and the
//                           buffers live at the peak
//
// and prints the memory report: a table (--report=text) or the JSON
// (--report=json).
//
// --report-only stops after the report (no code, no OUT/train; -o optional):
// how models exported from the meta device, which have no weights, are
// accounted for. --memory-budget and --device choose the combination of
// techniques that fits (Explore.h, docs/Budget.md) before compiling it;
// --explore prints the table of every combination and builds nothing.
//
// Every file is written to a temporary and renamed, so an interrupted run
// never leaves a half-written output. The flags and their checks live in
// Options.h, the report in Report.h, the budget search in Explore.h, and the
// pipeline, the conversion and the emitter in lib/; this file runs them and
// writes the outputs (model.json, the step's code, OUT/train).
//
//===----------------------------------------------------------------------===//

#include "Explore.h"
#include "Options.h"
#include "Report.h"

#include "memopt/Analysis/CostModel.h"
#include "memopt/Analysis/MemoryAccount.h"
#include "memopt/Dialect/Memopt/IR/MemoptDialect.h"
#include "memopt/Dialect/Memopt/IR/MemoptOps.h"
#include "memopt/Pipelines/Pipelines.h"
#include "memopt/Support/ByteSize.h"
#include "memopt/Support/ModelState.h"
#include "memopt/Target/Cpp/EmitCpp.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/FileUtilities.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include "ModelDescription.h"
#include "memopt/runtime.h"

#include <cstdlib>

#ifndef MEMOPT_RUNTIME_INCLUDE_DIR
#error "MEMOPT_RUNTIME_INCLUDE_DIR must name runtime/include"
#endif
#ifndef MEMOPT_DRIVER_LIBRARY_NAME
#error "MEMOPT_DRIVER_LIBRARY_NAME must name the driver archive"
#endif
#ifndef MEMOPT_CUDA_ENABLED
#define MEMOPT_CUDA_ENABLED 0
#define MEMOPT_CUDA_RUNTIME_LIBRARY_NAME ""
#define MEMOPT_NVCC ""
#define MEMOPT_CUDA_LIBRARY_DIR ""
#endif
#ifndef MEMOPT_RUNTIME_LIBRARY_NAME
#error "MEMOPT_RUNTIME_LIBRARY_NAME must name the host runtime archive"
#endif

using namespace mlir;
namespace cl = llvm::cl;
namespace driver = memopt::driver;

namespace {

/// Prints `memopt-compile: <message>` and returns false.
bool fail(const llvm::Twine &message) {
  llvm::errs() << "memopt-compile: " << message << "\n";
  return false;
}

//===----------------------------------------------------------------------===//
// Outputs
//===----------------------------------------------------------------------===//

/// Writes `contents` to dir/name through a temporary file and a rename.
bool writeOutput(llvm::StringRef dir, llvm::StringRef name,
                 llvm::StringRef contents) {
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, name);
  llvm::Error error = llvm::writeToOutput(path, [&](llvm::raw_ostream &os) {
    os << contents;
    return llvm::Error::success();
  });
  if (error)
    return fail("cannot write '" + path +
                "': " + llvm::toString(std::move(error)));
  return true;
}

/// The function marked with `attrName`, or null after an error.
FunctionOpInterface findFunction(ModuleOp module, llvm::StringRef attrName) {
  FunctionOpInterface found;
  module.walk([&](FunctionOpInterface func) {
    if (func->hasAttr(attrName) && !found)
      found = func;
  });
  if (!found)
    module.emitError() << "no function is marked '" << attrName << "'";
  return found;
}

/// The driver's spelling of a memref element type, or "".
std::string getDtypeName(Type type) {
  if (type.isF32())
    return "f32";
  if (type.isF16())
    return "f16";
  if (type.isBF16())
    return "bf16";
  for (unsigned width : {1, 32, 64})
    if (type.isSignlessInteger(width))
      return "i" + std::to_string(width);
  // The packed bytes of 8-bit optimizer state.
  if (type.isSignlessInteger(8))
    return "u8";
  return "";
}

/// The values an integer input or label may hold (docs/Pipeline.md, section
/// 5): [0, bound), and `ignored` besides, a cross-entropy's ignore_index
/// outside that range that every op bounding the argument skips.
struct IndexBound {
  int64_t bound = 0;
  std::optional<int64_t> ignored;
};

/// The bound each integer argument of the loss function `func` has, by
/// name: the least number of rows of an embedding table it indexes and of
/// classes of a cross-entropy it labels, followed through reshapes,
/// transposes and broadcasts, which move its elements but keep them all.
/// Any other use (a slice, arithmetic, a label count) bounds nothing, so an
/// argument no lookup or loss reads whole has no entry. Read from the loss
/// function before the pipeline: its ops name what the step's kernels do.
llvm::StringMap<IndexBound> getIndexBounds(FunctionOpInterface func) {
  llvm::StringMap<IndexBound> bounds;
  if (func.isExternal())
    return bounds;
  for (BlockArgument argument : func.getArguments()) {
    auto name = func.getArgAttrOfType<StringAttr>(
        argument.getArgNumber(), memopt::MemoptDialect::kNameAttrName);
    auto type = dyn_cast<RankedTensorType>(argument.getType());
    if (!name || !type || !type.getElementType().isSignlessInteger())
      continue;
    std::optional<int64_t> bound, ignored;
    bool allIgnore = true;
    // Each bounding use: its exclusive bound and the value it skips.
    auto add = [&](int64_t limit, std::optional<int64_t> skipped) {
      bound = bound ? std::min(*bound, limit) : limit;
      if (!skipped || (ignored && *ignored != *skipped))
        allIgnore = false;
      ignored = skipped;
    };
    SmallVector<Value> worklist = {argument};
    llvm::DenseSet<Value> seen = {argument};
    while (!worklist.empty()) {
      Value value = worklist.pop_back_val();
      for (OpOperand &use : value.getUses()) {
        Operation *user = use.getOwner();
        if (isa<memopt::ReshapeOp, memopt::TransposeOp, memopt::BroadcastOp>(
                user)) {
          if (seen.insert(user->getResult(0)).second)
            worklist.push_back(user->getResult(0));
        } else if (auto embedding = dyn_cast<memopt::EmbeddingOp>(user);
                   embedding && value == embedding.getIndices()) {
          add(embedding.getWeight().getType().getDimSize(0), std::nullopt);
        } else if (auto loss = dyn_cast<memopt::CrossEntropyOp>(user);
                   loss && value == loss.getLabels()) {
          add(loss.getLogits().getType().getShape().back(),
              static_cast<int64_t>(loss.getIgnoreIndex()));
        } else if (auto fused = dyn_cast<memopt::LinearCrossEntropyOp>(user);
                   fused && value == fused.getLabels()) {
          add(fused.getW().getType().getDimSize(0),
              static_cast<int64_t>(fused.getIgnoreIndex()));
        }
      }
    }
    if (!bound)
      continue;
    IndexBound &entry = bounds[name.getValue()];
    entry.bound = *bound;
    // An ignore_index inside [0, bound) is an ordinary value.
    if (allIgnore && (*ignored < 0 || *ignored >= *bound))
      entry.ignored = ignored;
  }
  return bounds;
}

/// The arguments of the bufferized, planned `func` in the model
/// description; an integer input or label with an entry in `bounds` has its
/// bound (and ignore_index).
bool describeArguments(FunctionOpInterface func,
                       const llvm::StringMap<IndexBound> &bounds,
                       int64_t dataParallel,
                       std::vector<driver::ModelArgument> &arguments) {
  for (auto [index, type] : llvm::enumerate(func.getArgumentTypes())) {
    auto name = func.getArgAttrOfType<StringAttr>(
        index, memopt::MemoptDialect::kNameAttrName);
    auto role = func.getArgAttrOfType<StringAttr>(
        index, memopt::MemoptDialect::kRoleAttrName);
    auto memref = dyn_cast<MemRefType>(type);
    driver::ModelArgument argument;
    if (!name || !role || !memref || !memref.hasStaticShape() ||
        !memref.getLayout().isIdentity() ||
        !driver::parseModelDtype(getDtypeName(memref.getElementType()),
                                 argument.dtype)) {
      func.emitError() << "argument " << index << " (" << type
                       << ") is not a named, static, identity-layout memref "
                          "of f32, f16, bf16, i64, i32 or i1";
      return false;
    }
    if (!driver::parseRole(role.getValue().str(), argument.role)) {
      func.emitError() << "argument " << index << " has the unknown role '"
                       << role.getValue() << "'";
      return false;
    }
    argument.name = name.getValue().str();
    argument.shape.assign(memref.getShape().begin(), memref.getShape().end());
    // What the driver checks each batch's values against.
    if (auto it = bounds.find(name.getValue());
        it != bounds.end() && memref.getElementType().isSignlessInteger() &&
        (argument.role == driver::Role::Input ||
         argument.role == driver::Role::Label)) {
      argument.bound = it->second.bound;
      argument.ignoreIndex = it->second.ignored;
    }
    // Data parallelism: where the batch file holds the ranks' shares.
    if (auto batchDim = func.getArgAttrOfType<IntegerAttr>(
            index, memopt::MemoptDialect::kBatchDimAttrName);
        batchDim && dataParallel > 1)
      argument.batchDim = batchDim.getInt();
    // NF4: the shape of the weight whose packed bytes it holds.
    if (auto shape = func.getArgAttrOfType<DenseI64ArrayAttr>(
            index, memopt::MemoptDialect::kNf4OfAttrName))
      argument.nf4Of = shape.asArrayRef().vec();
    // ZeRO: the full shape the argument holds the rank's shard of.
    if (auto full = func.getArgAttrOfType<DenseI64ArrayAttr>(
            index, memopt::MemoptDialect::kShardOfAttrName))
      argument.shardOf = full.asArrayRef().vec();
    // Optimizer offload: the argument lives in host memory.
    if (auto memory = func.getArgAttrOfType<StringAttr>(
            index, memopt::MemoptDialect::kMemoryAttrName))
      argument.host = memory.getValue() == "host";
    arguments.push_back(std::move(argument));
  }
  return true;
}

/// The planned arena bytes of `func`, or an error.
std::optional<uint64_t> getArenaBytes(FunctionOpInterface func) {
  auto arena = func->getAttrOfType<IntegerAttr>(
      memopt::MemoptDialect::kArenaBytesAttrName);
  if (!arena || arena.getValue().isNegative()) {
    func.emitError() << "has no '" << memopt::MemoptDialect::kArenaBytesAttrName
                     << "' after planning";
    return std::nullopt;
  }
  return arena.getValue().getZExtValue();
}

/// Builds the model description (docs/Pipeline.md, section 5) of the
/// bufferized, planned `func` and evaluation step `eval`, with the `bounds`
/// of the loss function's integer arguments, in the driver's schema
/// (ModelDescription.h), and reads it back as the driver will.
bool buildModelJson(FunctionOpInterface func, FunctionOpInterface eval,
                    const llvm::StringMap<IndexBound> &bounds,
                    const memopt::MemoptPipelineOptions &options,
                    const memopt::runtime::LrSchedule &schedule,
                    std::string &json) {
  driver::ModelDescription model;
  std::optional<uint64_t> arena = getArenaBytes(func);
  if (!arena)
    return false;
  model.arenaBytes = *arena;
  if (auto host = func->getAttrOfType<IntegerAttr>(
          memopt::MemoptDialect::kHostArenaBytesAttrName))
    model.hostArenaBytes = host.getValue().getZExtValue();
  driver::OptimizerDescription &optimizer = model.optimizer;
  optimizer.kind = options.optimizer;
  optimizer.lr = options.lr;
  optimizer.beta1 = options.beta1;
  optimizer.beta2 = options.beta2;
  optimizer.eps = options.eps;
  optimizer.momentum = options.momentum;
  optimizer.weightDecay = options.weightDecay;
  model.lrSchedule = schedule;
  model.dataParallel = options.dataParallel;
  if (options.mixedPrecision != memopt::Precision::F32)
    model.mixedPrecision = getPrecisionName(options.mixedPrecision).str();
  if (auto attr = func->getAttr(memopt::MemoptDialect::kLossScaleAttrName)) {
    FailureOr<memopt::LossScaleConfig> config = memopt::parseLossScaleAttr(
        attr, [&] { return func.emitOpError(); });
    if (failed(config))
      return false;
    model.lossScale = {config->dynamic, config->scale, config->growthFactor,
                       config->backoffFactor, config->growthInterval};
  }
  if (!describeArguments(func, bounds, options.dataParallel, model.arguments))
    return false;
  if (eval) {
    driver::EvalDescription &description = model.eval.emplace();
    std::optional<uint64_t> evalArena = getArenaBytes(eval);
    if (!evalArena ||
        !describeArguments(eval, bounds, 1, description.arguments))
      return false;
    description.arenaBytes = *evalArena;
  }
  json = driver::writeModelDescription(model);
  // One schema: what OUT/train will read back.
  driver::ModelDescription readBack;
  std::string error;
  if (!driver::parseModelDescription(json, readBack, error)) {
    func.emitError() << "the model description does not read back: "
                     << error;
    return false;
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Building OUT/train and OUT/libmemopt_program.so
//===----------------------------------------------------------------------===//

/// How a program is built: the compiler, and what every compile and link
/// passes it.
struct Toolchain {
  bool isCuda = false;
  std::string compiler;
  /// The flags the driver and runtime archives were built with (sanitizers),
  /// passed to every compile and link.
  std::vector<std::string> flags;
  /// What a link adds after the objects: the driver, MPI, the runtime and
  /// its libraries.
  std::vector<std::string> libraries;
};

/// Finds the compiler and the driver and runtime archives next to this
/// executable (bin/../lib).
bool findToolchain(const memopt::CompileOptions &flags, const char *argv0,
                   Toolchain &tc) {
  static int anchor;
  std::string self = llvm::sys::fs::getMainExecutable(argv0, &anchor);
  llvm::SmallString<256> libDir(llvm::sys::path::parent_path(self));
  llvm::sys::path::append(libDir, "..", "lib");
  tc.isCuda = flags.target == "cuda";
  llvm::SmallString<256> driverLib(libDir), runtimeLib(libDir);
  llvm::sys::path::append(driverLib, MEMOPT_DRIVER_LIBRARY_NAME);
  llvm::sys::path::append(runtimeLib, tc.isCuda
                                          ? MEMOPT_CUDA_RUNTIME_LIBRARY_NAME
                                          : MEMOPT_RUNTIME_LIBRARY_NAME);
  for (llvm::StringRef lib : {driverLib.str(), runtimeLib.str()})
    if (!llvm::sys::fs::exists(lib))
      return fail("cannot find '" + lib + "' (build memopt_driver and " +
                  (tc.isCuda ? "memopt_runtime_cuda" : "memopt_runtime_host") +
                  ")");
  tc.libraries.push_back(std::string(driverLib));
  // Data parallelism: the driver's MPI part, whole (the driver refers to it
  // weakly), and MPI.
  if (flags.pipeline.dataParallel > 1) {
#ifdef MEMOPT_MPI_ENABLED
    llvm::SmallString<256> mpiLib(libDir);
    llvm::sys::path::append(mpiLib, MEMOPT_DRIVER_MPI_LIBRARY_NAME);
    if (!llvm::sys::fs::exists(mpiLib))
      return fail("cannot find '" + mpiLib + "' (build memopt_driver_mpi)");
    std::string prefix = tc.isCuda ? "-Xlinker=" : "-Wl,";
    tc.libraries.insert(tc.libraries.end(),
                        {prefix + "--whole-archive", std::string(mpiLib),
                         prefix + "--no-whole-archive"});
    llvm::SmallVector<llvm::StringRef> libs;
    llvm::StringRef(MEMOPT_MPI_LIBRARIES).split(libs, ';', -1, false);
    for (llvm::StringRef lib : libs)
      tc.libraries.push_back(lib.str());
#else
    return fail("--data-parallel needs MPI, and memopt was built without it "
                "(install libopenmpi-dev: scripts/setup.sh)");
#endif
  }
  tc.libraries.push_back(std::string(runtimeLib));
  if (tc.isCuda) {
    // nvcc links the program (cudart statically, cuBLASLt, cuDNN and NCCL
    // dynamically).
    tc.libraries.insert(tc.libraries.end(),
                        {"-L" MEMOPT_CUDA_LIBRARY_DIR, "-lcublasLt", "-lcudnn",
                         "-lnccl"});
  } else {
    // OpenBLAS for GEMMs, oneDNN (on libgomp's threads) for convolutions.
    tc.libraries.insert(tc.libraries.end(),
                        {"-lopenblas", "-ldnnl", "-lgomp", "-pthread"});
  }

  // The generated step is host C++ that calls the runtime, so under
  // --target=cuda nvcc hands it to its host compiler (--cxx when given).
  tc.compiler = tc.isCuda ? MEMOPT_NVCC : flags.cxx;
  if (tc.isCuda && !llvm::sys::fs::can_execute(tc.compiler))
    return fail("cannot find nvcc at '" + tc.compiler + "'");
  if (!llvm::StringRef(tc.compiler).contains('/')) {
    llvm::ErrorOr<std::string> found =
        llvm::sys::findProgramByName(tc.compiler);
    if (!found)
      return fail("cannot find the C++ compiler '" + tc.compiler +
                  "' on PATH");
    tc.compiler = *found;
  } else if (!llvm::sys::fs::can_execute(tc.compiler)) {
    return fail("the C++ compiler '" + tc.compiler + "' is not executable");
  }
  if (tc.isCuda && !flags.cudaHostCompiler.empty())
    tc.flags.insert(tc.flags.end(), {"-ccbin", flags.cudaHostCompiler});
  llvm::SmallVector<llvm::StringRef> extraFlags;
  llvm::StringRef(MEMOPT_TRAIN_CXXFLAGS)
      .split(extraFlags, ' ', /*MaxSplit=*/-1, /*KeepEmpty=*/false);
  for (llvm::StringRef flag : extraFlags)
    tc.flags.push_back(tc.isCuda ? "-Xcompiler=" + flag.str() : flag.str());
  return true;
}

/// Runs the compiler with `args` (after its name and the toolchain's flags)
/// to write `output`, written under a temporary name and renamed into place
/// when the compiler succeeds; on failure prints what it was doing (`what`),
/// the command and the compiler's output.
bool runCompiler(const Toolchain &tc, const std::vector<std::string> &args,
                 const std::string &output, const std::string &what) {
  std::string tmpPath = output + ".tmp." +
                        std::to_string(llvm::sys::Process::getProcessId());
  std::vector<std::string> command = {tc.compiler};
  command.insert(command.end(), args.begin(), args.end());
  command.insert(command.end(), {"-o", tmpPath});
  command.insert(command.end(), tc.flags.begin(), tc.flags.end());

  llvm::SmallString<128> log;
  if (std::error_code ec =
          llvm::sys::fs::createTemporaryFile("memopt-compile", "log", log))
    return fail("cannot create a temporary file: " + ec.message());
  llvm::FileRemover removeLog(log);
  std::vector<llvm::StringRef> argRefs(command.begin(), command.end());
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, log.str(),
                                                log.str()};
  std::string execError;
  int status = llvm::sys::ExecuteAndWait(tc.compiler, argRefs, std::nullopt,
                                         redirects, /*SecondsToWait=*/0,
                                         /*MemoryLimit=*/0, &execError);
  if (status != 0) {
    llvm::sys::fs::remove(tmpPath);
    std::string messages;
    if (auto buffer = llvm::MemoryBuffer::getFile(log))
      messages = (*buffer)->getBuffer().str();
    llvm::errs() << "memopt-compile: " << what << " failed ("
                 << (status < 0 ? execError
                                : "exit code " + std::to_string(status))
                 << "): " << llvm::join(command, " ") << "\n"
                 << messages;
    return false;
  }
  if (std::error_code ec = llvm::sys::fs::rename(tmpPath, output)) {
    llvm::sys::fs::remove(tmpPath);
    return fail("cannot write '" + output + "': " + ec.message());
  }
  return true;
}

/// Compiles the generated sources once, position-independent, and links
/// them with the driver and the runtime into OUT/train and, with
/// --library, OUT/libmemopt_program.so.
bool buildPrograms(const memopt::CompileOptions &flags, const char *argv0) {
  Toolchain tc;
  if (!findToolchain(flags, argv0, tc))
    return false;
  auto inOut = [&](llvm::StringRef name) {
    llvm::SmallString<256> path(flags.outputDir);
    llvm::sys::path::append(path, name);
    return std::string(path);
  };
  std::vector<std::string> objects;
  std::vector<std::unique_ptr<llvm::FileRemover>> removeObjects;
  for (llvm::StringRef name : {"train_step", "eval_step", "model_info"}) {
    std::string source = inOut((name + ".cpp").str());
    std::string object = inOut(("." + name + ".o").str());
    removeObjects.push_back(std::make_unique<llvm::FileRemover>(object));
    if (!runCompiler(tc,
                     {"-O2", "-std=c++17", "-I" MEMOPT_RUNTIME_INCLUDE_DIR,
                      tc.isCuda ? "-Xcompiler=-fPIC" : "-fPIC", "-c", source},
                     object, "compiling '" + source + "'"))
      return false;
    objects.push_back(object);
  }
  auto link = [&](llvm::StringRef name, std::vector<std::string> args) {
    args.insert(args.end(), objects.begin(), objects.end());
    args.insert(args.end(), tc.libraries.begin(), tc.libraries.end());
    return runCompiler(tc, args, inOut(name),
                       "linking '" + inOut(name) + "'");
  };
  if (!link("train", {}))
    return false;
  // The C API (Program.o) is pulled from the driver archive by its entry.
  return !flags.library ||
         link("libmemopt_program.so",
              {"-shared", (tc.isCuda ? "-Xlinker=" : "-Wl,") +
                              std::string("-u,memopt_program_open")});
}

//===----------------------------------------------------------------------===//
// Budget search
//===----------------------------------------------------------------------===//

/// The budget of the search and the chosen combination's planned peak,
/// once one was chosen.
std::optional<std::pair<int64_t, int64_t>> chosenBudget;

/// Runs the search. With --explore prints the table (or its JSON) and
/// returns false to stop (`ok` says whether that is success); otherwise
/// sets `options` to the chosen combination's and prints the explanation.
bool searchBudget(ModuleOp module, const memopt::CompileOptions &flags,
                  memopt::MemoptPipelineOptions &options, bool &ok) {
  ok = false;
  const memopt::ExploreOptions &exploreOptions = flags.search;
  memopt::ExploreResult result =
      memopt::exploreCombinations(module, options, exploreOptions);
  if (flags.explore) {
    std::string json = memopt::renderExploreJson(result, exploreOptions);
    if (!flags.outputDir.empty()) {
      if (std::error_code ec =
              llvm::sys::fs::create_directories(flags.outputDir))
        return fail("cannot create '" + flags.outputDir + "': " + ec.message());
      if (!writeOutput(flags.outputDir, "explore.json", json))
        return false;
    }
    if (flags.report == "json")
      llvm::outs() << json;
    else
      memopt::printExploreTable(llvm::outs(), result, exploreOptions);
    llvm::outs().flush();
    if (!result.chosen)
      memopt::printInfeasible(llvm::errs(), result, exploreOptions);
    ok = result.chosen.has_value();
    return false;
  }
  // When the pipeline rejects the model, the plain compilation below
  // reports why, with the diagnostic's location and context.
  if (!result.smallest &&
      llvm::none_of(result.rows, [](const memopt::CombinationResult &row) {
        return row.rejected;
      })) {
    if (!result.rows.empty())
      (void)memopt::applyCombination(result.rows.front().combination,
                                     result.rows.front().arenaBudgetBytes,
                                     options);
    return true;
  }
  if (!result.chosen) {
    memopt::printInfeasible(llvm::errs(), result, exploreOptions);
    return false;
  }
  const memopt::CombinationResult &chosen = result.rows[*result.chosen];
  std::string error = memopt::applyCombination(
      chosen.combination, chosen.arenaBudgetBytes, options);
  if (!error.empty())
    return fail(error);
  chosenBudget = {exploreOptions.budgetBytes, chosen.plannedPeakBytes};
  if (flags.report == "text") {
    llvm::outs() << "memory budget " << memopt::formatBytes(
                                            exploreOptions.budgetBytes)
                 << ": " << chosen.combination.str() << "\n";
    for (const std::string &line : result.explanation)
      llvm::outs() << "  " << line << "\n";
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Gradient clipping's strategy
//===----------------------------------------------------------------------===//

/// One clipping strategy, planned.
struct PricedStrategy {
  std::string name;
  int64_t plannedBytes = 0;
  int64_t flops = 0;
};

/// Plans a copy of `module` with clipping `strategy`; nullopt after an error
/// (reported).
std::optional<PricedStrategy>
priceClipStrategy(ModuleOp module, const memopt::MemoptPipelineOptions &options,
                  llvm::StringRef strategy,
                  const memopt::DeviceProfile &device) {
  OwningOpRef<ModuleOp> copy(module.clone());
  memopt::MemoptPipelineOptions priced;
  priced.copyOptionValuesFrom(options);
  priced.clipStrategy = strategy.str();
  PassManager pm(module.getContext(), ModuleOp::getOperationName());
  memopt::buildMemoptPipeline(pm, priced);
  if (failed(pm.run(*copy)))
    return std::nullopt;
  FailureOr<FunctionOpInterface> step =
      memopt::findTrainStep(*copy, "price clipping for");
  if (failed(step))
    return std::nullopt;
  memopt::MemoryAccount account(*step);
  return PricedStrategy{
      strategy.str(),
      account.getArgumentBytes() + account.getArenaBytes().value_or(0),
      memopt::estimateStepCost(*step, device).flops};
}

/// --clip-strategy=auto on a step that releases its gradients: plans both
/// strategies and takes `keep` (no extra backward) when it fits `budget`
/// bytes, or without a budget when it plans no more than `recompute`;
/// otherwise `recompute`. Sets options.clipStrategy and returns the line
/// that says why; empty after an error.
std::string chooseClipStrategy(ModuleOp module,
                               memopt::MemoptPipelineOptions &options,
                               std::optional<int64_t> budget,
                               const memopt::DeviceProfile &device) {
  std::optional<PricedStrategy> keep =
      priceClipStrategy(module, options, "keep", device);
  std::optional<PricedStrategy> recompute =
      keep ? priceClipStrategy(module, options, "recompute", device)
           : std::nullopt;
  if (!keep || !recompute)
    return "";
  bool keepFits = budget ? keep->plannedBytes <= *budget
                         : keep->plannedBytes <= recompute->plannedBytes;
  options.clipStrategy = keepFits ? "keep" : "recompute";
  double extra = keep->flops > 0 ? 100.0 * double(recompute->flops -
                                                  keep->flops) /
                                       double(keep->flops)
                                 : 0.0;
  return llvm::formatv(
             "gradient clipping to norm {0}: keep the gradients plans {1}, "
             "recompute the backward plans {2} with {3:f1}% more FLOPs; "
             "chose {4} ({5})\n",
             options.clipGradNorm.getValue(),
             memopt::formatBytes(keep->plannedBytes),
             memopt::formatBytes(recompute->plannedBytes), extra,
             options.clipStrategy.getValue(),
             budget ? (keepFits ? "keep fits the memory budget "
                                : "keep exceeds the memory budget ") +
                          memopt::formatBytes(*budget)
             : keepFits ? std::string("keep plans no more, without the extra "
                                      "backward")
                        : std::string("recompute plans less; --memory-budget "
                                      "lets keep win where it fits"))
      .str();
}

//===----------------------------------------------------------------------===//
// Compilation
//===----------------------------------------------------------------------===//

bool compile(MLIRContext &context, const char *argv0) {
  memopt::CompileOptions flags;
  if (llvm::Error error = memopt::getCompileOptions(flags))
    return fail(llvm::toString(std::move(error)));
  memopt::MemoptPipelineOptions options;
  options.copyOptionValuesFrom(flags.pipeline);

  std::string errorMessage;
  std::unique_ptr<llvm::MemoryBuffer> input =
      openInputFile(flags.inputFilename, &errorMessage);
  if (!input)
    return fail(errorMessage);
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(input), llvm::SMLoc());
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, &context);
  if (!module)
    return false;

  FunctionOpInterface lossFunction =
      findFunction(*module, memopt::MemoptDialect::kLossAttrName);
  if (!lossFunction)
    return false;
  if (auto recorded = lossFunction->getAttrOfType<StringAttr>(
          memopt::MemoptDialect::kOptimizerAttrName))
    if (llvm::Error error =
            memopt::adoptRecordedOptimizer(recorded.getValue(), options))
      return fail(llvm::toString(std::move(error)));
  // Read before the pipeline replaces the loss function.
  llvm::StringMap<IndexBound> bounds = getIndexBounds(lossFunction);

  if (flags.budgetSearch) {
    bool ok;
    if (!searchBudget(*module, flags, options, ok))
      return ok;
  }

  std::string clipLine;
  if (options.clipGradNorm > 0 && options.clipStrategy == "auto" &&
      memopt::releasesGradients(options)) {
    std::optional<int64_t> budget;
    if (flags.budgetSearch)
      budget = flags.search.budgetBytes;
    const memopt::DeviceProfile *device = flags.search.device;
    if (!device)
      device = memopt::lookupDeviceProfile("h100-80gb");
    clipLine = chooseClipStrategy(*module, options, budget, *device);
    if (clipLine.empty())
      return false;
  }

  // The evaluation step compiles from its own copy of the input.
  OwningOpRef<ModuleOp> evalModule(module->clone());
  PassManager pm(&context, ModuleOp::getOperationName());
  if (failed(applyPassManagerCLOptions(pm)))
    return false;
  memopt::buildMemoptPipeline(pm, options);
  if (failed(pm.run(*module)))
    return false;
  PassManager evalPm(&context, ModuleOp::getOperationName());
  if (failed(applyPassManagerCLOptions(evalPm)))
    return false;
  memopt::buildEvalPipeline(evalPm, options);
  if (failed(evalPm.run(*evalModule)))
    return false;
  FailureOr<FunctionOpInterface> evalStep =
      memopt::findTrainStep(*evalModule, "generate code for");
  if (failed(evalStep))
    return false;

  FailureOr<FunctionOpInterface> found =
      memopt::findTrainStep(*module, "generate code for");
  if (failed(found))
    return false;
  FunctionOpInterface step = *found;
  std::string modelJson;
  if (!flags.reportOnly &&
      !buildModelJson(step, *evalStep, bounds, options, flags.lrSchedule,
                      modelJson))
    return false;
  // The lowering replaces the function: render the report now.
  memopt::MemoryAccount account(step);
  memopt::MemoryAccount evalAccount(*evalStep);
  if (flags.target == "cuda")
    account.setWorkspaceBytes(
        static_cast<int64_t>(MEMOPT_CUDA_WORKSPACE_BYTES));
  if (chosenBudget) {
    // The plan compiled here is the one the search measured; check it
    // again rather than trust that the placement search is repeatable.
    int64_t planned =
        account.getArgumentBytes() + account.getArenaBytes().value_or(0);
    if (planned > chosenBudget->first)
      return fail("the planned peak " + std::to_string(planned) +
                  " B exceeds the memory budget " +
                  std::to_string(chosenBudget->first) +
                  " B (the search planned " +
                  std::to_string(chosenBudget->second) + " B)");
  }
  memopt::ReportContext reportContext{step.getName().str(), options.optimizer,
                                      flags.outputDir, &evalAccount,
                                      options.offload};
  std::string reportJson = memopt::renderMemoryReportJson(account, &evalAccount);
  std::string reportText;
  llvm::raw_string_ostream reportTextStream(reportText);
  memopt::printMemoryReportText(reportTextStream, account, reportContext);
  std::string reportHtml =
      memopt::renderMemoryReportHtml(account, reportContext);
  std::string planText;
  llvm::raw_string_ostream planStream(planText);
  module->print(planStream);
  planStream << "\n";

  if (flags.reportOnly) {
    if (!flags.outputDir.empty()) {
      if (std::error_code ec =
              llvm::sys::fs::create_directories(flags.outputDir))
        return fail("cannot create '" + flags.outputDir + "': " + ec.message());
      if (!writeOutput(flags.outputDir, "plan.mlir", planText) ||
          !writeOutput(flags.outputDir, "memory_report.json", reportJson) ||
          !writeOutput(flags.outputDir, "memory_report.html", reportHtml))
        return false;
    }
    llvm::outs() << (flags.report == "json" ? reportJson
                                            : clipLine + reportText);
    return true;
  }

  // Each step's module to EmitC, then C++. On the GPU, errors surface away
  // from their call: name the module scope.
  auto lowerToCpp = [&](ModuleOp stepModule, std::string &cpp) {
    PassManager lowering(&context, ModuleOp::getOperationName());
    if (failed(applyPassManagerCLOptions(lowering)))
      return false;
    memopt::buildEmitCPipeline(lowering, flags.target == "cuda");
    if (failed(lowering.run(stepModule)))
      return false;
    llvm::raw_string_ostream stream(cpp);
    return succeeded(memopt::emitTrainStepCpp(stepModule, stream));
  };
  std::string stepCpp, evalCpp;
  if (!lowerToCpp(*module, stepCpp) || !lowerToCpp(*evalModule, evalCpp))
    return false;

  // Everything that can reject the input has run: only now create OUT and
  // write into it, so that a rejected model leaves no output behind.
  if (std::error_code ec = llvm::sys::fs::create_directories(flags.outputDir))
    return fail("cannot create '" + flags.outputDir + "': " + ec.message());
  if (!llvm::sys::fs::is_directory(flags.outputDir))
    return fail("cannot create '" + flags.outputDir +
                "': it is not a directory");
  if (!writeOutput(flags.outputDir, "plan.mlir", planText) ||
      !writeOutput(flags.outputDir, "model.json", modelJson) ||
      !writeOutput(flags.outputDir, "memory_report.json", reportJson) ||
      !writeOutput(flags.outputDir, "memory_report.html", reportHtml) ||
      !writeOutput(flags.outputDir, "train_step.cpp", stepCpp) ||
      !writeOutput(flags.outputDir, "eval_step.cpp", evalCpp) ||
      !writeOutput(flags.outputDir, "model_info.cpp",
                   // JSON escapes every '"' inside strings, so `)memopt"`
                   // cannot occur in it and the raw string is safe.
                   "// The model description, generated by memopt-compile.\n"
                   "extern \"C\" const char memopt_model_json[] = R\"memopt(" +
                       modelJson + ")memopt\";\n"))
    return false;
  if (!buildPrograms(flags, argv0))
    return false;

  llvm::outs() << (flags.report == "json" ? reportJson : clipLine + reportText);
  return true;
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM initLLVM(argc, argv);
  // The passes first: --mlir-print-ir-after and its kin name them.
  memopt::registerAllPasses();
  registerMLIRContextCLOptions();
  registerPassManagerCLOptions();
  registerAsmPrinterCLOptions();
  memopt::registerFlags();
  memopt::hideUnrelatedOptions();
  cl::ParseCommandLineOptions(
      argc, argv,
      "memopt-compile: compile a memopt loss function into a training "
      "program\n\n"
      "  memopt-compile model.mlir -o OUT [options]\n\n"
      "writes OUT/plan.mlir, OUT/model.json, OUT/train_step.cpp,\n"
      "OUT/model_info.cpp, OUT/train and OUT/memory_report.{json,html}, and\n"
      "prints the memory report.\n");

  DialectRegistry registry;
  memopt::registerAllDialects(registry);
  MLIRContext context(registry);
  // One message per problem: no dump of the failing operation after each
  // error unless --mlir-print-op-on-diagnostic asks for it.
  auto &options = cl::getRegisteredOptions();
  auto printOp = options.find("mlir-print-op-on-diagnostic");
  if (printOp == options.end() || !printOp->second->getNumOccurrences())
    context.printOpOnDiagnostic(false);
  return compile(context, argv[0]) ? 0 : 1;
}
