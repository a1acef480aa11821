//===- Options.cpp - memopt-compile's command line ------------------------===//
//
// Most flags are the training pipeline's options themselves
// (kPipelineFlags, declared in MemoptPipelineOptions); the rest are
// memopt-compile's own, mapped into those options here.
//
//===----------------------------------------------------------------------===//

#include "Options.h"

#include "memopt/Analysis/CostModel.h"
#include "memopt/Support/ByteSize.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/Support/CommandLine.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <limits>

#ifndef MEMOPT_CUDA_ENABLED
#define MEMOPT_CUDA_ENABLED 0
#define MEMOPT_CUDA_HOST_COMPILER ""
#define MEMOPT_CUDA_ARCHITECTURES ""
#endif

using namespace memopt;
namespace cl = llvm::cl;

namespace {

cl::OptionCategory compileCategory("memopt-compile options");

cl::opt<std::string> inputFilename(cl::Positional, cl::Required,
                                   cl::desc("<model.mlir>"),
                                   cl::cat(compileCategory));

cl::opt<std::string>
    outputDir("o",
              cl::desc("Output directory (created if needed); optional with "
                       "--report-only and --explore"),
              cl::value_desc("dir"), cl::cat(compileCategory));

cl::opt<std::string> target("target", cl::init("host"),
                            cl::desc("Runtime to link: host or cuda"),
                            cl::value_desc("host|cuda"),
                            cl::cat(compileCategory));

cl::opt<std::string> cudaArch(
    "cuda-arch",
    cl::desc("GPU architectures for --target=cuda, e.g. 80;90a (a subset of "
             "those the CUDA runtime was built for; default: all of them)"),
    cl::value_desc("list"), cl::cat(compileCategory));

/// The pipeline options that are memopt-compile flags as they are, under
/// the same names: MemoptPipelineOptions declares them once, for this
/// command line and for --memopt-pipeline. The flags below are
/// memopt-compile's own, where its spelling differs: --betas (a pair),
/// --optimizer-state, --mixed-precision (which adds auto), --memory-budget
/// (the whole step's, for the budget search) and the --no-* switches.
const llvm::StringRef kPipelineFlags[] = {"optimizer",
                                          "lr",
                                          "weight-decay",
                                          "eps",
                                          "momentum",
                                          "frozen-weights",
                                          "loss-scale",
                                          "loss-scale-init",
                                          "loss-scale-growth-interval",
                                          "remat",
                                          "remat-snapshots",
                                          "micro-batches",
                                          "data-parallel",
                                          "rank-batch",
                                          "zero-stage",
                                          "accumulate-allow-batch-norm",
                                          "clip-grad-norm",
                                          "clip-strategy",
                                          "lm-loss-chunk",
                                          "offload",
                                          "overlap-transfers"};

/// The options the flags above set; they live as long as the flags.
MemoptPipelineOptions &getFlags() {
  static MemoptPipelineOptions flags;
  return flags;
}

cl::opt<std::string> betas("betas",
                           cl::desc("AdamW moment decays, as b1,b2"),
                           cl::value_desc("b1,b2"), cl::cat(compileCategory));

cl::opt<std::string> optimizerState(
    "optimizer-state", cl::init("32bit"),
    cl::desc("AdamW's moments in 32 bits, or 8 (blockwise-quantized, "
             "bitsandbytes' 8-bit AdamW; parameters under 4096 elements keep "
             "32; docs/Optimizer.md)"),
    cl::value_desc("32bit|8bit"), cl::cat(compileCategory));

cl::opt<std::string> lrSchedule(
    "lr-schedule", cl::init("constant"),
    cl::desc("Learning-rate schedule, a factor on every parameter group's lr "
             "computed from the optimizer step at run time: constant, linear "
             "and cosine (Hugging Face's, with warmup), nanogpt (nanoGPT's "
             "get_lr); docs/Training.md"),
    cl::value_desc("constant|linear|cosine|nanogpt"), cl::cat(compileCategory));

cl::opt<std::string> warmupSteps("warmup-steps",
                                 cl::desc("Schedule: warmup steps (default 0)"),
                                 cl::value_desc("n"), cl::cat(compileCategory));

cl::opt<std::string>
    decaySteps("decay-steps",
               cl::desc("Schedule: the step the decay ends at (linear, "
                        "cosine: the total training steps)"),
               cl::value_desc("n"), cl::cat(compileCategory));

cl::opt<std::string>
    minLr("min-lr",
          cl::desc("Schedule: the learning rate the decay ends at (cosine, "
                   "nanogpt; default 0), for the --lr of the default group; "
                   "every group keeps the same min-lr / lr ratio"),
          cl::value_desc("number"), cl::cat(compileCategory));

cl::opt<std::string> mixedPrecision(
    "mixed-precision", cl::init("none"),
    cl::desc("Mixed precision (docs/MixedPrecision.md): none, bf16, fp16, "
             "or auto (the budget search may use bf16)"),
    cl::value_desc("none|bf16|fp16|auto"), cl::cat(compileCategory));

cl::opt<std::string> report("report", cl::init("text"),
                            cl::desc("Memory report printed: text (a table) or "
                                     "json (OUT/memory_report.json)"),
                            cl::value_desc("text|json"),
                            cl::cat(compileCategory));

cl::opt<bool>
    reportOnly("report-only",
               cl::desc("Stop after the memory report: no code generation, no "
                        "OUT/train (for models without weights)"),
               cl::cat(compileCategory));

cl::opt<bool>
    explore("explore",
            cl::desc("Print the table of combinations of techniques (planned "
                     "peak, fit, extra FLOPs, step time) and build nothing"),
            cl::cat(compileCategory));

cl::opt<std::string>
    memoryBudget("memory-budget",
                 cl::desc("Memory the step may use (arguments + planned "
                          "arena), e.g. 24GiB (B, KiB, MiB, GiB, KB, MB, GB); "
                          "runs the budget search (docs/Budget.md)"),
                 cl::value_desc("size"), cl::cat(compileCategory));

cl::opt<std::string>
    deviceName("device",
               cl::desc("Device whose memory, speed and host link the budget "
                        "search and the copies' overlap use: a100-40gb, "
                        "a100-80gb, h100-80gb (default), "
                        "h200-141gb, gh200-96gb, rtx4090-24gb"),
               cl::value_desc("name"), cl::cat(compileCategory));

cl::opt<std::string> cxx("cxx", cl::init("c++"),
                         cl::desc("C++ compiler that builds OUT/train"),
                         cl::value_desc("path"), cl::cat(compileCategory));

cl::opt<bool> library(
    "library",
    cl::desc("Also build OUT/libmemopt_program.so: the steps behind the C "
             "API of runtime/driver/Program.h, which memopt.compile loads "
             "into Python (docs/Python.md)"),
    cl::cat(compileCategory));

cl::opt<bool> noCheapRecompute(
    "no-cheap-recompute", cl::init(false),
    cl::desc("Keep every forward value the backward reads, instead of the "
             "minimal saved set (which recomputes casts, views and "
             "elementwise ops in the backward where that keeps fewer bytes; "
             "for comparison)"),
    cl::cat(compileCategory));

cl::opt<bool> noFusedAttention(
    "no-fused-attention", cl::init(false),
    cl::desc("Keep attention as matmul, softmax and matmul, materialising "
             "the score matrices, instead of memopt.attention (for "
             "comparison; docs/Fusion.md)"),
    cl::cat(compileCategory));

cl::opt<bool> noFusedLmLoss(
    "no-fused-lm-loss", cl::init(false),
    cl::desc("Keep the last linear layer and the cross-entropy apart, "
             "materialising the logits, instead of "
             "memopt.linear_cross_entropy (for comparison; docs/Fusion.md)"),
    cl::cat(compileCategory));

cl::opt<bool> noReleaseGradients(
    "no-release-gradients", cl::init(false),
    cl::desc("Keep every gradient until the optimizer step instead of "
             "updating each parameter as soon as its gradient is complete "
             "(for comparison; docs/Remat.md)"),
    cl::cat(compileCategory));

cl::opt<bool> noBufferReuse(
    "no-buffer-reuse", cl::init(false),
    cl::desc("Give every buffer its own memory: no in-place results, no "
             "reshape views, no shared arena bytes (for debugging a suspected "
             "planning problem; the arena is the sum of all buffers)"),
    cl::cat(compileCategory));

/// `text` as a number; NaN when it is not one, which the range checks then
/// report with the text.
double toNumber(llvm::StringRef text) {
  double value;
  if (text.trim().getAsDouble(value))
    return std::numeric_limits<double>::quiet_NaN();
  return value;
}

/// `text` as an integer; 0 when it is not one.
int64_t toInteger(llvm::StringRef text) {
  int64_t value;
  return text.trim().getAsInteger(10, value) ? 0 : value;
}

/// An error with `message`, which main prefixes with the tool's name.
llvm::Error fail(const llvm::Twine &message) {
  return llvm::createStringError(message);
}

/// Reads --lr-schedule and its flags into `schedule`.
llvm::Error setLrSchedule(const MemoptPipelineOptions &pipeline,
                          memopt::runtime::LrSchedule &schedule) {
  std::optional<memopt::runtime::LrScheduleKind> kind =
      memopt::runtime::parseLrScheduleKind(lrSchedule);
  if (!kind)
    return fail("unknown --lr-schedule='" + lrSchedule +
                "' (expected constant, linear, cosine or nanogpt)");
  schedule.kind = *kind;
  auto steps = [&](cl::opt<std::string> &flag, int64_t &out) {
    out = toInteger(flag);
    return flag.getNumOccurrences() && (out <= 0 && flag != "0")
               ? fail("invalid --" + flag.ArgStr + "='" + flag +
                      "' (expected a whole number of steps)")
               : llvm::Error::success();
  };
  if (llvm::Error error = steps(warmupSteps, schedule.warmupSteps))
    return error;
  if (llvm::Error error = steps(decaySteps, schedule.decaySteps))
    return error;
  if (minLr.getNumOccurrences()) {
    if (*kind != memopt::runtime::LrScheduleKind::Cosine &&
        *kind != memopt::runtime::LrScheduleKind::NanoGpt)
      return fail("--min-lr applies to --lr-schedule=cosine or nanogpt only");
    double value = toNumber(minLr);
    double base = pipeline.lr;
    if (!(value >= 0.0 && value <= base))
      return fail("invalid --min-lr='" + minLr +
                  "' (expected a number between 0 and --lr, " +
                  formatNumber(base) + ")");
    schedule.minRatio = base > 0 ? value / base : 0.0;
  }
  if (*kind == memopt::runtime::LrScheduleKind::Constant &&
      decaySteps.getNumOccurrences())
    return fail("--decay-steps applies to a decaying --lr-schedule "
                "(linear, cosine or nanogpt)");
  std::string why = memopt::runtime::checkLrSchedule(schedule);
  if (!why.empty())
    return fail("invalid learning-rate schedule: " + why);
  return llvm::Error::success();
}

/// Checks --target and --cuda-arch.
llvm::Error checkTarget() {
  if (target != "host" && target != "cuda")
    return fail("unsupported --target='" + target +
                "' (expected host or cuda)");
  if (target == "cuda" && !MEMOPT_CUDA_ENABLED)
    return fail("--target=cuda: this memopt was built without the CUDA "
                "runtime (configure with -DMEMOPT_ENABLE_CUDA=ON on a machine "
                "with nvcc and cuBLASLt)");
  if (!cudaArch.getNumOccurrences())
    return llvm::Error::success();
  if (target != "cuda")
    return fail("--cuda-arch applies to --target=cuda only");
  llvm::SmallVector<llvm::StringRef> built, wanted;
  llvm::StringRef(MEMOPT_CUDA_ARCHITECTURES)
      .split(built, ',', -1, /*KeepEmpty=*/false);
  std::string archList = cudaArch;
  std::replace(archList.begin(), archList.end(), ',', ';');
  llvm::StringRef(archList).split(wanted, ';', -1, /*KeepEmpty=*/false);
  if (wanted.empty())
    return fail("--cuda-arch is empty (expected e.g. 80;90a)");
  for (llvm::StringRef arch : wanted) {
    arch = arch.trim();
    arch.consume_front("sm_");
    if (!llvm::is_contained(built, arch))
      return fail("--cuda-arch: the CUDA runtime was built for '" +
                  llvm::Twine(MEMOPT_CUDA_ARCHITECTURES) + "', not '" + arch +
                  "' (reconfigure with -DMEMOPT_CUDA_ARCHITECTURES=...)");
  }
  return llvm::Error::success();
}

/// The pipeline's options from the flags: those of kPipelineFlags as they
/// are, memopt-compile's own mapped into them, with the checks only
/// memopt-compile makes (flags that apply to one optimizer or strategy,
/// what needs the budget search).
llvm::Error setPipelineOptions(bool budgetSearch,
                               MemoptPipelineOptions &options) {
  const MemoptPipelineOptions &flags = getFlags();
  options.copyOptionValuesFrom(flags);
  auto given = [](const cl::Option &flag) { return flag.getNumOccurrences(); };
  bool isSgd = options.optimizer == "sgd";
  if (isSgd && (given(betas) || given(flags.eps)))
    return fail(llvm::Twine("--") + (given(betas) ? "betas" : "eps") +
                " applies to --optimizer=adamw only");
  if (!isSgd && given(flags.momentum))
    return fail("--momentum applies to --optimizer=sgd only");
  if (optimizerState != "32bit" && optimizerState != "8bit")
    return fail("invalid --optimizer-state='" + optimizerState +
                "': expected 32bit or 8bit");
  if (isSgd && optimizerState == "8bit")
    return fail("--optimizer-state=8bit applies to --optimizer=adamw only");
  options.optimizerStateBits = optimizerState == "8bit" ? 8 : 32;
  // torch.optim's defaults: AdamW decays by 0.01, SGD not at all.
  if (isSgd && !given(flags.weightDecay))
    options.weightDecay = 0.0;
  if (given(betas)) {
    llvm::SmallVector<llvm::StringRef> parts;
    llvm::StringRef(betas).split(parts, ',');
    double beta1, beta2;
    if (parts.size() != 2 || parts[0].trim().getAsDouble(beta1) ||
        parts[1].trim().getAsDouble(beta2))
      return fail("invalid --betas='" + betas +
                  "': expected two numbers b1,b2 in [0, 1)");
    options.beta1 = beta1;
    options.beta2 = beta2;
  }

  // The budget strategy's arena budget comes from the budget search
  // (--memory-budget or --device): the step's budget less its arguments.
  if (options.remat == "budget" && !budgetSearch)
    return fail("--remat=budget needs --memory-budget=SIZE or --device=NAME");
  if (given(flags.rematSnapshots)) {
    if (options.remat != "revolve")
      return fail("--remat-snapshots applies to --remat=revolve only");
    if (options.rematSnapshots < 1)
      return fail("invalid --remat-snapshots='" +
                  llvm::Twine(options.rematSnapshots) +
                  "': expected a positive integer");
  }
  // The budget search compiles its candidates with the same options, so
  // the peak it reports is the one built.
  options.bufferReuse = !noBufferReuse;
  options.cheapRecompute = !noCheapRecompute;
  options.fuseAttention = !noFusedAttention;
  options.fuseLmLoss = !noFusedLmLoss;
  options.releaseGradients = !noReleaseGradients;
  if (given(flags.clipGradNorm)) {
    if (!(options.clipGradNorm > 0) || !std::isfinite(options.clipGradNorm))
      return fail("invalid --clip-grad-norm='" +
                  formatNumber(options.clipGradNorm) +
                  "': expected a positive number");
  } else if (given(flags.clipStrategy)) {
    return fail("--clip-strategy applies to --clip-grad-norm=C");
  }
  // memopt-compile prices both strategies: auto is its default.
  if (!given(flags.clipStrategy))
    options.clipStrategy = "auto";
  if (given(flags.lmLossChunk)) {
    if (options.lmLossChunk < 1)
      return fail("invalid --lm-loss-chunk='" +
                  llvm::Twine(options.lmLossChunk) +
                  "': expected a positive integer");
    if (noFusedLmLoss)
      return fail("--lm-loss-chunk applies to the fused linear "
                  "cross-entropy, which --no-fused-lm-loss turns off");
  }

  if (mixedPrecision == "auto") {
    if (!budgetSearch)
      return fail("--mixed-precision=auto lets the budget search choose: give "
                  "--memory-budget, --device or --explore with it");
  } else if (std::optional<Precision> precision =
                 parsePrecision(mixedPrecision)) {
    options.mixedPrecision = *precision;
  } else {
    return fail("unknown --mixed-precision='" + mixedPrecision +
                "' (expected " + listPrecisions("auto") + ")");
  }
  if (mixedPrecision == "none" &&
      (given(flags.lossScale) || given(flags.lossScaleInit) ||
       given(flags.lossScaleGrowthInterval)))
    return fail("--loss-scale, --loss-scale-init and "
                "--loss-scale-growth-interval need --mixed-precision=bf16 or "
                "fp16");
  return validateMemoptPipelineOptions(options);
}

/// Fills the budget search's options from --device, --memory-budget and the
/// dimensions the user pinned.
llvm::Error setSearchOptions(ExploreOptions &options) {
  std::string name = deviceName.empty() ? "h100-80gb" : deviceName.getValue();
  options.device = lookupDeviceProfile(name);
  if (!options.device) {
    std::string known;
    for (const DeviceProfile &device : getDeviceProfiles())
      known += (known.empty() ? "" : ", ") + device.name.str();
    return fail("unknown --device='" + name + "' (expected one of " + known +
                ")");
  }
  options.budgetBytes = getDefaultBudgetBytes(*options.device);
  if (memoryBudget.getNumOccurrences()) {
    std::optional<int64_t> bytes = parseByteSize(memoryBudget);
    if (!bytes || *bytes == 0)
      return fail("invalid --memory-budget='" + memoryBudget +
                  "': expected a positive size such as 24GiB, 80GB or "
                  "1073741824 (units B, KiB, MiB, GiB, KB, MB, GB)");
    options.budgetBytes = *bytes;
    options.explicitBudget = true;
  }
  // The user's choices pin a dimension; --mixed-precision=auto opens it.
  if (mixedPrecision == "auto") {
    options.precisions = {Precision::BF16, Precision::F32};
  } else {
    options.precisions = {*parsePrecision(mixedPrecision)};
    options.precisionNote =
        mixedPrecision == "none"
            ? "not allowed (--mixed-precision=none; --mixed-precision=auto "
              "lets the search use bf16)"
            : "--mixed-precision=" + mixedPrecision.getValue();
  }
  const MemoptPipelineOptions &flags = getFlags();
  if (flags.remat.getNumOccurrences()) {
    options.remats = {flags.remat};
    if (flags.remat == "none")
      options.rematNote = "not allowed (--remat=none)";
  } else {
    options.remats = getAvailableRematStrategies();
  }
  // 8-bit AdamW moments when nothing fits one device with 32, unless the
  // user chose the state's precision.
  options.mayQuantizeState = !optimizerState.getNumOccurrences();
  // NF4 frozen weights likewise, unless the user chose their storage.
  options.mayQuantizeFrozen = !flags.frozenWeights.getNumOccurrences();
  // Optimizer offload likewise, unless the user chose what is offloaded.
  options.mayOffload = !flags.offload.getNumOccurrences();
  // Sharding over ranks when nothing fits one device, unless the user chose
  // the ranks.
  if (!flags.dataParallel.getNumOccurrences() &&
      !flags.zeroStage.getNumOccurrences())
    options.maxRanks = 1024;
  if (flags.microBatches.getNumOccurrences()) {
    options.microBatches = {flags.microBatches};
    if (flags.microBatches == 1)
      options.accumulationNote = "not allowed (--micro-batches=1)";
  }
  return llvm::Error::success();
}

} // namespace

llvm::Error memopt::getCompileOptions(CompileOptions &options) {
  options.inputFilename = inputFilename;
  options.outputDir = outputDir;
  options.target = target;
  options.report = report;
  options.reportOnly = reportOnly;
  options.explore = explore;
  options.cxx = cxx;
  options.library = library;
  options.cudaHostCompiler =
      cxx.getNumOccurrences() ? cxx.getValue() : MEMOPT_CUDA_HOST_COMPILER;
  options.budgetSearch = explore || memoryBudget.getNumOccurrences() ||
                         deviceName.getNumOccurrences();
  if (llvm::Error error = checkTarget())
    return error;
  if (report != "text" && report != "json")
    return fail("unknown --report='" + report + "' (expected text or json)");
  if (outputDir.empty() && !reportOnly && !explore)
    return fail("no output directory: give -o DIR (optional only with "
                "--report-only or --explore)");
  if (llvm::Error error =
          setPipelineOptions(options.budgetSearch, options.pipeline))
    return error;
  if (llvm::Error error = setLrSchedule(options.pipeline, options.lrSchedule))
    return error;
  if (options.budgetSearch) {
    if (llvm::Error error = setSearchOptions(options.search))
      return error;
    // The copies overlap the compute of the device the step is planned for.
    options.pipeline.transferDevice = options.search.device->name.str();
  }
  return llvm::Error::success();
}

llvm::Error memopt::adoptRecordedOptimizer(llvm::StringRef recorded,
                                           MemoptPipelineOptions &options) {
  if (recorded.empty() || recorded == options.optimizer)
    return llvm::Error::success();
  const MemoptPipelineOptions &flags = getFlags();
  if (flags.optimizer.getNumOccurrences())
    return fail("--optimizer=" + flags.optimizer +
                " contradicts the optimizer the model was exported with ('" +
                recorded +
                "', memopt.optimizer): its parameter groups are "
                "that optimizer's");
  if (recorded != "adamw" && recorded != "sgd")
    return fail("the model was exported for an unknown optimizer '" +
                recorded + "' (memopt.optimizer; expected adamw or sgd)");
  options.optimizer = recorded.str();
  // torch.optim's defaults for the parameters the groups do not set.
  if (!flags.weightDecay.getNumOccurrences())
    options.weightDecay = recorded == "sgd" ? 0.0 : 0.01;
  return llvm::Error::success();
}

void memopt::registerFlags() {
  MemoptPipelineOptions &flags = getFlags();
  flags.registerAsFlags(kPipelineFlags, compileCategory);
  // The help text, with the defaults of the pipeline options; the texts
  // outlive the flags' references to them.
  static std::deque<std::string> texts;
  auto describe = [](cl::Option &flag, const std::string &value) {
    texts.push_back((flag.HelpStr + " (default " + value + ")").str());
    flag.setDescription(texts.back());
  };
  describe(flags.optimizer, flags.optimizer);
  describe(flags.lr, formatNumber(flags.lr));
  describe(betas, formatNumber(flags.beta1) + "," + formatNumber(flags.beta2));
  describe(flags.eps, formatNumber(flags.eps));
  // setPipelineOptions: SGD's default is torch.optim's, no decay.
  describe(flags.weightDecay,
           formatNumber(flags.weightDecay) + " for adamw, 0 for sgd");
  describe(flags.momentum, formatNumber(flags.momentum));
  describe(flags.lossScaleInit, formatNumber(flags.lossScaleInit) + ", GradScaler's");
  describe(flags.lossScaleGrowthInterval,
           std::to_string(flags.lossScaleGrowthInterval) + ", GradScaler's");
  describe(flags.clipStrategy, "auto");
}

void memopt::hideUnrelatedOptions() {
  std::vector<std::pair<cl::Option *, cl::OptionHidden>> mlirOptions;
  for (auto &entry : cl::getRegisteredOptions())
    if (entry.first.starts_with("mlir-"))
      mlirOptions.emplace_back(entry.second,
                               entry.second->getOptionHiddenFlag());
  cl::HideUnrelatedOptions(compileCategory);
  for (auto [option, flag] : mlirOptions)
    option->setHiddenFlag(flag);
}
