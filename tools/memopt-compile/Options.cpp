//===- Options.cpp - memopt-compile's command line ------------------------===//
//
// The flags are text where they hold numbers, so that a malformed number is
// reported as typed ("invalid --lr='abc'") by the same check, in
// lib/Pipelines, that rejects one out of range.
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
#include <cstdio>
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

cl::opt<std::string> optimizer("optimizer",
                               cl::desc("Optimizer: adamw or sgd"),
                               cl::value_desc("adamw|sgd"),
                               cl::cat(compileCategory));

cl::opt<std::string> lr("lr", cl::desc("Learning rate"),
                        cl::value_desc("number"), cl::cat(compileCategory));

cl::opt<std::string>
    weightDecay("weight-decay",
                cl::desc("Weight decay"),
                cl::value_desc("number"), cl::cat(compileCategory));

cl::opt<std::string> betas("betas",
                           cl::desc("AdamW moment decays, as b1,b2"),
                           cl::value_desc("b1,b2"), cl::cat(compileCategory));

cl::opt<std::string> eps("eps",
                         cl::desc("AdamW denominator term"),
                         cl::value_desc("number"), cl::cat(compileCategory));

cl::opt<std::string> optimizerState(
    "optimizer-state", cl::init("32bit"),
    cl::desc("AdamW's moments in 32 bits, or 8 (blockwise-quantized, "
             "bitsandbytes' 8-bit AdamW; parameters under 4096 elements keep "
             "32; docs/Optimizer.md)"),
    cl::value_desc("32bit|8bit"), cl::cat(compileCategory));

cl::opt<std::string> frozenWeights(
    "frozen-weights",
    cl::desc("How frozen weights are stored (docs/Quantization.md): nf4 "
             "(QLoRA's 4-bit NormalFloat, for the frozen weights of linear "
             "layers), f32, or the compute type (the default)"),
    cl::value_desc("nf4|f32|bf16|fp16"), cl::cat(compileCategory));

cl::opt<std::string> momentum("momentum", cl::desc("SGD momentum"),
                              cl::value_desc("number"),
                              cl::cat(compileCategory));

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

cl::opt<std::string> lossScale(
    "loss-scale",
    cl::desc("Loss scaling: dynamic, none or a static scale (default: none "
             "for bf16, dynamic for fp16)"),
    cl::value_desc("dynamic|none|number"), cl::cat(compileCategory));

cl::opt<std::string> lossScaleInit("loss-scale-init",
                                   cl::desc("Initial dynamic loss scale"),
                                   cl::value_desc("number"),
                                   cl::cat(compileCategory));

cl::opt<std::string> lossScaleGrowthInterval(
    "loss-scale-growth-interval",
    cl::desc("Good steps before the dynamic loss scale doubles"),
    cl::value_desc("n"), cl::cat(compileCategory));

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
               cl::desc("Device whose memory and speed the budget search "
                        "uses: a100-40gb, a100-80gb, h100-80gb (default), "
                        "h200-141gb, rtx4090-24gb"),
               cl::value_desc("name"), cl::cat(compileCategory));

cl::opt<std::string>
    remat("remat", cl::init("none"),
          cl::desc("Rematerialization: none, blocks, sqrt, revolve, budget, "
                   "selective or auto (budget when --memory-budget is given)"),
          cl::value_desc("strategy"), cl::cat(compileCategory));

cl::opt<std::string>
    rematSnapshots("remat-snapshots",
                   cl::desc("--remat=revolve: snapshot slots (0: "
                            "logarithmic in the depth)"),
                   cl::value_desc("n"), cl::cat(compileCategory));

cl::opt<std::string> cxx("cxx", cl::init("c++"),
                         cl::desc("C++ compiler that builds OUT/train"),
                         cl::value_desc("path"), cl::cat(compileCategory));

cl::opt<bool> library(
    "library",
    cl::desc("Also build OUT/libmemopt_program.so: the steps behind the C "
             "API of runtime/driver/Program.h, which memopt.compile loads "
             "into Python (docs/Python.md)"),
    cl::cat(compileCategory));

cl::opt<int64_t> microBatches(
    "micro-batches", cl::init(1),
    cl::desc("Gradient accumulation: split the batch into K micro-batches "
             "(docs/Accumulation.md)"),
    cl::value_desc("K"), cl::cat(compileCategory));

cl::opt<int64_t> dataParallel(
    "data-parallel", cl::init(1),
    cl::desc("Data parallelism: split the batch across N ranks, launched "
             "with `mpirun -np N OUT/train` (docs/DataParallel.md)"),
    cl::value_desc("N"), cl::cat(compileCategory));

cl::opt<bool> rankBatch(
    "rank-batch", cl::init(false),
    cl::desc("With --data-parallel=N: the model's batch is each rank's, and "
             "the global batch N times it (the default splits the model's "
             "batch across the ranks)"),
    cl::cat(compileCategory));

cl::opt<int64_t> zeroStage(
    "zero-stage", cl::init(0),
    cl::desc("With --data-parallel: ZeRO stage 1 keeps 1/N of the optimizer "
             "state on each rank, stage 2 also 1/N of the gradients, "
             "stage 3 also 1/N of the parameters, gathered where they are "
             "read (docs/DataParallel.md)"),
    cl::value_desc("0|1|2|3"), cl::cat(compileCategory));

cl::opt<bool> accumulateAllowBatchNorm(
    "accumulate-allow-batch-norm", cl::init(false),
    cl::desc("With --micro-batches > 1: accept batch norm with statistics "
             "of each micro-batch"),
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

cl::opt<std::string> clipGradNorm(
    "clip-grad-norm",
    cl::desc("Clip the gradients to this global 2-norm before each update, "
             "as torch.nn.utils.clip_grad_norm_ (docs/Training.md)"),
    cl::value_desc("C"), cl::cat(compileCategory));

cl::opt<std::string> clipStrategy(
    "clip-strategy", cl::init("auto"),
    cl::desc("How clipping meets gradient release: keep (every gradient "
             "waits for the norm), recompute (a norm pass, then the backward "
             "again, each update right after its gradient) or auto (keep "
             "where it fits the memory budget, otherwise recompute)"),
    cl::value_desc("auto|keep|recompute"), cl::cat(compileCategory));

cl::opt<std::string> lmLossChunk(
    "lm-loss-chunk",
    cl::desc("Classes per chunk of the fused linear cross-entropy (0: the "
             "most whose f32 logits fit in one f32 copy of the hidden "
             "states; docs/Fusion.md)"),
    cl::value_desc("n"), cl::cat(compileCategory));

cl::opt<bool> noBufferReuse(
    "no-buffer-reuse", cl::init(false),
    cl::desc("Give every buffer its own memory: no in-place results, no "
             "reshape views, no shared arena bytes (for debugging a suspected "
             "planning problem; the arena is the sum of all buffers)"),
    cl::cat(compileCategory));

/// The flags that hold numbers, as typed.
cl::opt<std::string> *numberFlags[] = {&lr,
                                       &weightDecay,
                                       &betas,
                                       &eps,
                                       &momentum,
                                       &lossScaleInit,
                                       &lossScaleGrowthInterval,
                                       &clipGradNorm};

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
    if (!(value >= 0.0 && value <= base)) {
      char text[32];
      std::snprintf(text, sizeof(text), "%g", base);
      return fail("invalid --min-lr='" + minLr +
                  "' (expected a number between 0 and --lr, " + text + ")");
    }
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

/// Maps the technique and optimizer flags into the pipeline's options,
/// with the checks only memopt-compile makes (flags that apply to one
/// optimizer or strategy, what needs the budget search).
llvm::Error setPipelineOptions(bool budgetSearch,
                               MemoptPipelineOptions &options) {
  // A flag the user did not give keeps the pipeline's default.
  auto given = [](const cl::Option &flag) { return flag.getNumOccurrences(); };
  if (given(optimizer))
    options.optimizer = optimizer;
  bool isSgd = options.optimizer == "sgd";
  if (isSgd && (given(betas) || given(eps)))
    return fail(llvm::Twine("--") + (given(betas) ? "betas" : "eps") +
                " applies to --optimizer=adamw only");
  if (!isSgd && given(momentum))
    return fail("--momentum applies to --optimizer=sgd only");
  if (optimizerState != "32bit" && optimizerState != "8bit")
    return fail("invalid --optimizer-state='" + optimizerState +
                "': expected 32bit or 8bit");
  if (isSgd && optimizerState == "8bit")
    return fail("--optimizer-state=8bit applies to --optimizer=adamw only");
  options.optimizerStateBits = optimizerState == "8bit" ? 8 : 32;
  if (given(lr))
    options.lr = toNumber(lr);
  if (given(eps))
    options.eps = toNumber(eps);
  if (given(momentum))
    options.momentum = toNumber(momentum);
  // torch.optim's defaults: AdamW decays by 0.01, SGD not at all.
  if (given(weightDecay))
    options.weightDecay = toNumber(weightDecay);
  else if (isSgd)
    options.weightDecay = 0.0;
  if (given(betas)) {
    auto [beta1, beta2] = llvm::StringRef(betas).split(',');
    options.beta1 = toNumber(beta1);
    options.beta2 = toNumber(beta2);
  }

  options.remat = remat;
  // The budget strategy's arena budget comes from the budget search
  // (--memory-budget or --device): the step's budget less its arguments.
  if (remat == "budget" && !budgetSearch)
    return fail("--remat=budget needs --memory-budget=SIZE or --device=NAME");
  if (rematSnapshots.getNumOccurrences()) {
    if (remat != "revolve")
      return fail("--remat-snapshots applies to --remat=revolve only");
    options.rematSnapshots = toInteger(rematSnapshots);
    if (options.rematSnapshots < 1)
      return fail("invalid --remat-snapshots='" + rematSnapshots +
                  "': expected a positive integer");
  }
  if (given(microBatches))
    options.microBatches = microBatches;
  if (given(dataParallel))
    options.dataParallel = dataParallel;
  if (given(zeroStage))
    options.zeroStage = zeroStage;
  options.rankBatch = rankBatch;
  options.accumulateAllowBatchNorm = accumulateAllowBatchNorm;
  // The budget search compiles its candidates with the same options, so
  // the peak it reports is the one built.
  options.bufferReuse = !noBufferReuse;
  options.cheapRecompute = !noCheapRecompute;
  options.fuseAttention = !noFusedAttention;
  options.fuseLmLoss = !noFusedLmLoss;
  options.releaseGradients = !noReleaseGradients;
  if (clipGradNorm.getNumOccurrences()) {
    options.clipGradNorm = toNumber(clipGradNorm);
    if (!(options.clipGradNorm > 0) || !std::isfinite(options.clipGradNorm))
      return fail("invalid --clip-grad-norm='" + clipGradNorm +
                  "': expected a positive number");
  } else if (clipStrategy.getNumOccurrences()) {
    return fail("--clip-strategy applies to --clip-grad-norm=C");
  }
  options.clipStrategy = clipStrategy;
  if (lmLossChunk.getNumOccurrences()) {
    options.lmLossChunk = toInteger(lmLossChunk);
    if (options.lmLossChunk < 1 || lmLossChunk != std::to_string(
                                       options.lmLossChunk))
      return fail("invalid --lm-loss-chunk='" + lmLossChunk +
                  "': expected a positive integer");
    if (noFusedLmLoss)
      return fail("--lm-loss-chunk applies to the fused linear "
                  "cross-entropy, which --no-fused-lm-loss turns off");
  }

  if (mixedPrecision == "auto") {
    if (!budgetSearch)
      return fail("--mixed-precision=auto lets the budget search choose: give "
                  "--memory-budget, --device or --explore with it");
  } else if (llvm::Error error =
                 setMixedPrecision(options, mixedPrecision, "auto")) {
    return error;
  }
  if (mixedPrecision == "none" &&
      (lossScale.getNumOccurrences() || lossScaleInit.getNumOccurrences() ||
       lossScaleGrowthInterval.getNumOccurrences()))
    return fail("--loss-scale, --loss-scale-init and "
                "--loss-scale-growth-interval need --mixed-precision=bf16 or "
                "fp16");
  options.lossScale = lossScale;
  options.frozenWeights = frozenWeights;
  if (given(lossScaleInit))
    options.lossScaleInit = toNumber(lossScaleInit);
  if (given(lossScaleGrowthInterval))
    options.lossScaleGrowthInterval = toInteger(lossScaleGrowthInterval);

  return validateMemoptPipelineOptions(
      options, [](llvm::StringRef flag) -> std::optional<std::string> {
        for (cl::opt<std::string> *number : numberFlags)
          if (number->ArgStr == flag && number->getNumOccurrences())
            return number->getValue();
        return std::nullopt;
      });
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
    options.precisions = {"bf16", "none"};
  } else {
    options.precisions = {mixedPrecision};
    options.precisionNote =
        mixedPrecision == "none"
            ? "not allowed (--mixed-precision=none; --mixed-precision=auto "
              "lets the search use bf16)"
            : "--mixed-precision=" + mixedPrecision.getValue();
  }
  if (remat.getNumOccurrences()) {
    options.remats = {remat};
    if (remat == "none")
      options.rematNote = "not allowed (--remat=none)";
  } else {
    options.remats = getAvailableRematStrategies();
  }
  // 8-bit AdamW moments when nothing fits one device with 32, unless the
  // user chose the state's precision.
  options.mayQuantizeState = !optimizerState.getNumOccurrences();
  // NF4 frozen weights likewise, unless the user chose their storage.
  options.mayQuantizeFrozen = !frozenWeights.getNumOccurrences();
  // Sharding over ranks when nothing fits one device, unless the user chose
  // the ranks.
  if (!dataParallel.getNumOccurrences() && !zeroStage.getNumOccurrences())
    options.maxRanks = 1024;
  if (microBatches.getNumOccurrences()) {
    options.microBatches = {microBatches};
    if (microBatches == 1)
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
  if (options.budgetSearch)
    return setSearchOptions(options.search);
  return llvm::Error::success();
}

llvm::Error memopt::adoptRecordedOptimizer(llvm::StringRef recorded,
                                           MemoptPipelineOptions &options) {
  if (recorded.empty() || recorded == options.optimizer)
    return llvm::Error::success();
  if (optimizer.getNumOccurrences())
    return fail("--optimizer=" + optimizer +
                " contradicts the optimizer the model was exported with ('" +
                recorded + "', memopt.optimizer): its parameter groups are "
                "that optimizer's");
  if (recorded != "adamw" && recorded != "sgd")
    return fail("the model was exported for an unknown optimizer '" +
                recorded + "' (memopt.optimizer; expected adamw or sgd)");
  options.optimizer = recorded.str();
  // torch.optim's defaults for the parameters the groups do not set.
  if (!weightDecay.getNumOccurrences())
    options.weightDecay = recorded == "sgd" ? 0.0 : 0.01;
  return llvm::Error::success();
}

void memopt::describeDefaults() {
  // The flags' text, with the defaults of the pipeline options they set.
  static const MemoptPipelineOptions defaults;
  // The texts outlive the flags' references to them.
  static std::deque<std::string> texts;
  auto number = [](double value) {
    char text[32];
    std::snprintf(text, sizeof(text), "%g", value);
    return std::string(text);
  };
  auto describe = [](cl::Option &flag, const std::string &value) {
    texts.push_back((flag.HelpStr + " (default " + value + ")").str());
    flag.setDescription(texts.back());
  };
  describe(optimizer, defaults.optimizer);
  describe(lr, number(defaults.lr));
  describe(betas, number(defaults.beta1) + "," + number(defaults.beta2));
  describe(eps, number(defaults.eps));
  // setPipelineOptions: SGD's default is torch.optim's, no decay.
  describe(weightDecay, number(defaults.weightDecay) + " for adamw, 0 for sgd");
  describe(momentum, number(defaults.momentum));
  describe(lossScaleInit, number(defaults.lossScaleInit) + ", GradScaler's");
  describe(lossScaleGrowthInterval,
           std::to_string(defaults.lossScaleGrowthInterval) + ", GradScaler's");
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
